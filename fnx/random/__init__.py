"""``fnx.random``: explicit-key random numbers over threefry-2x32 (JAX's bits)."""
