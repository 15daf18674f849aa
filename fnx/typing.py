"""JAX's ``jax.typing``: the annotations ported code imports (``ArrayLike``,
``DTypeLike``). They are for type checkers and documentation; nothing checks them at run
time."""
from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np

from .core.array import Array

__all__ = ["ArrayLike", "DTypeLike"]


class SupportsDType(Protocol):
    @property
    def dtype(self) -> np.dtype: ...


# What fnx functions accept as an array: fnx Arrays, NumPy arrays and scalars, Python
# numbers (JAX's definition, with fnx's Array).
ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]

# What names a dtype: a string, a type (np.float32, fnx.numpy.float32's type), a NumPy
# dtype, or anything with a ``dtype`` attribute.
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]
