"""Shared helpers of the ``fnx.scipy.stats`` distributions."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ...core import dtypes
from ...numpy.util import promote


def promote_inexact(name, *args):
    """``args`` as arrays of their common inexact dtype (ints and bools: the default
    float), as JAX's ``promote_args_inexact``; shapes broadcast in the arithmetic."""
    return promote(name, *args, to_inexact=True)


def full_like(x, value):
    """``value`` as an array of ``x``'s shape and dtype."""
    return fnp.full(x.shape, np.array(value, x.dtype), dtype=x.dtype)


def default_float(x):
    """``x`` cast to the default float (JAX's ``jnp.asarray(x, float)``)."""
    return fnp.asarray(x, dtype=dtypes.default_float())
