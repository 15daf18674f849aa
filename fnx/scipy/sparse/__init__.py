"""``fnx.scipy.sparse``: JAX's ``jax.scipy.sparse`` (the iterative solvers of ``linalg``)."""
from . import linalg  # noqa: F401

__all__ = ["linalg"]
