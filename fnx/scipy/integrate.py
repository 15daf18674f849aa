"""``fnx.scipy.integrate``: JAX's ``jax.scipy.integrate`` (``trapezoid``)."""
from __future__ import annotations

from .. import numpy as fnp
from ..errors import ShapeError
from ..numpy.util import promote

__all__ = ["trapezoid"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal rule along ``axis``: spacing ``dx``, or sample points ``x`` (1-D of
    ``y``'s length along ``axis``, or broadcasting with ``y``). Integer input gives the
    default float."""
    if x is None:
        (y,) = promote("trapezoid", y, to_inexact=True)
        y = fnp.moveaxis(y, axis, -1)
        return dx * (fnp.sum(y, axis=-1) - (y[..., 0] + y[..., -1]) / 2)
    y, x = promote("trapezoid", y, x, to_inexact=True)
    y = fnp.moveaxis(y, axis, -1)
    if x.ndim == 1:
        if x.shape[0] != y.shape[-1]:
            raise ShapeError(f"trapezoid: x has {x.shape[0]} points but y has {y.shape[-1]} "
                             f"along axis {axis}")
    else:
        x = fnp.moveaxis(x, axis, -1)
    d = x[..., 1:] - x[..., :-1]
    return fnp.sum(d * (y[..., 1:] + y[..., :-1]), axis=-1) / 2
