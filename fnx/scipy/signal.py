"""``fnx.scipy.signal``: JAX's ``jax.scipy.signal`` (being written)."""
