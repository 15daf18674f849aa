"""``fnx.scipy.linalg``: JAX's ``jax.scipy.linalg`` (being written)."""
