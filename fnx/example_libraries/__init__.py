"""``fnx.example_libraries``: JAX's stax and optimizers (being written)."""
