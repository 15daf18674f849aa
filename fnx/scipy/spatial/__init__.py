"""``fnx.scipy.spatial``: JAX's ``jax.scipy.spatial`` (``transform``)."""
from . import transform  # noqa: F401

__all__ = ["transform"]
