"""``fnx.scipy.optimize``: JAX's ``jax.scipy.optimize`` (being written)."""
