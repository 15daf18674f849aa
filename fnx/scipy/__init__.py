"""``fnx.scipy``: SciPy's names over fnx arrays, as ``jax.scipy`` has them."""
from . import linalg, optimize, signal, special, stats  # noqa: F401
