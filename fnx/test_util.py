"""``fnx.test_util``: JAX's ``jax.test_util`` names (being written)."""
