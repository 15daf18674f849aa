"""``fnx.tree``: JAX's ``jax.tree`` namespace over fnx pytrees (being written)."""
