"""``fnx.scipy.cluster``: JAX's ``jax.scipy.cluster`` (``vq``)."""
from . import vq  # noqa: F401

__all__ = ["vq"]
