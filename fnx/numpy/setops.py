"""Data-dependent shapes: ``nonzero``, ``unique``... run eagerly only.

Their output shape depends on the values, so under ``jit`` they raise a
ConcretizationError (pass ``size=`` where supported to get a static shape).
"""
from __future__ import annotations

import numpy as np

from ..core.array import Array, to_array


def _concrete(name, x):
    return np.asarray(to_array(x)._concrete(f"{name} (its output shape depends on the values)"))


def nonzero(a, *, size=None, fill_value=None):
    """Indices of the non-zero elements, one array per dimension."""
    v = _concrete("nonzero", a)
    if v.ndim == 0:
        raise ValueError("nonzero: call it on arrays of rank >= 1 (numpy deprecated 0-d)")
    return tuple(Array._wrap(i.astype(np.int32)) for i in np.nonzero(v))
