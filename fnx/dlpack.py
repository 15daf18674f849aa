"""``fnx.dlpack``, JAX's ``jax.dlpack``: Arrays from other libraries' buffers through the
DLPack protocol (``from_dlpack``), and whether a dtype can travel that way
(``is_supported_dtype``). An ``fnx.Array`` is itself a DLPack producer
(``__dlpack__``), so ``numpy.from_dlpack(x)`` or ``torch.from_dlpack(x)`` take it."""
from __future__ import annotations

from .core import dtypes
from .numpy.creation import from_dlpack

__all__ = ["from_dlpack", "is_supported_dtype"]


def is_supported_dtype(dtype) -> bool:
    """Whether arrays of ``dtype`` can be exchanged through DLPack: every dtype fnx has
    (bool, the integers, float16, bfloat16, float32/64 and complex64/128), as in JAX."""
    try:
        return dtypes.canonicalize(dtype) in dtypes.SUPPORTED_SET
    except TypeError:
        return False
