"""``fnx.lax.linalg``: matrix factorizations and solves as primitives (JAX's ``jax.lax.linalg``)."""
