"""``fnx.scipy.stats``: JAX's ``jax.scipy.stats`` (being written)."""
