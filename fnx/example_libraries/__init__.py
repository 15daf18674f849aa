"""``fnx.example_libraries``: JAX's example libraries, ``stax`` (layers as
``(init_fun, apply_fun)`` pairs) and ``optimizers`` (``(init, update, get_params)``
triples), so code written against ``jax.example_libraries`` runs by changing its imports.
For real work use ``fnx.nn`` and ``fnx.optim``."""
from . import optimizers, stax  # noqa: F401
