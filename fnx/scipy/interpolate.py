"""``fnx.scipy.interpolate``: JAX's ``jax.scipy.interpolate`` (``RegularGridInterpolator``)."""
from __future__ import annotations

import itertools

import numpy as np

from .. import numpy as fnp
from .. import tree_util
from ..errors import ShapeError
from ..numpy.util import promote

__all__ = ["RegularGridInterpolator"]


class RegularGridInterpolator:
    """Interpolation on a rectilinear grid: ``points`` a tuple of strictly ascending 1-D
    arrays (one per grid dimension), ``values`` of shape ``(n_1, ..., n_d, ...)``.
    ``method``: 'linear' or 'nearest' (ties to the lower neighbour, as JAX). Points
    outside the grid give ``fill_value`` (NaN), or are extrapolated linearly with
    ``fill_value=None``. ``bounds_error=True`` is not supported (as in JAX: it would need
    a data-dependent error). A pytree (the grid, values and fill value are its leaves),
    so an interpolator passes through ``jit``."""

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        if method not in ("linear", "nearest"):
            raise ValueError(f"RegularGridInterpolator: method must be 'linear' or 'nearest', "
                             f"got {method!r}")
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: bounds_error=True is not "
                                      "supported (as in JAX); check the bounds yourself")
        (values,) = promote("RegularGridInterpolator", values, to_inexact=True)
        if len(points) > values.ndim:
            raise ShapeError(f"RegularGridInterpolator: {len(points)} point arrays but values "
                             f"has {values.ndim} dimensions")
        self.grid = tuple(fnp.asarray(p) for p in points)
        for d, (g, n) in enumerate(zip(self.grid, values.shape)):
            if g.ndim != 1 or g.shape[0] != n:
                raise ShapeError(f"RegularGridInterpolator: points[{d}] must be 1-D with "
                                 f"{n} entries (values' axis {d}), got shape {g.shape}")
        if fill_value is not None:
            fill_value = fnp.asarray(fill_value)
            if fill_value.dtype.kind == "c" and values.dtype.kind != "c":
                raise ValueError("RegularGridInterpolator: a complex fill_value needs complex "
                                 "values")
        self.method, self.bounds_error = method, bounds_error
        self.values, self.fill_value = values, fill_value

    def __call__(self, xi, method=None):
        """Values at the points ``xi``: (..., d) (or a tuple of d coordinate arrays); the
        result has shape ``xi.shape[:-1] + values.shape[d:]``."""
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"RegularGridInterpolator: method must be 'linear' or "
                             f"'nearest', got {method!r}")
        d = len(self.grid)
        if isinstance(xi, tuple):
            xi = fnp.stack(fnp.broadcast_arrays(*[fnp.asarray(c) for c in xi]), axis=-1)
        xi = fnp.asarray(xi)
        if xi.ndim == 1:
            xi = xi.reshape((-1, d))
        if xi.shape[-1] != d:
            raise ShapeError(f"RegularGridInterpolator: points xi have dimension "
                             f"{xi.shape[-1]}, the grid has {d}")
        lead = xi.shape[:-1]
        xi = xi.reshape((-1, d)).astype(self.values.dtype if self.values.dtype.kind == "f"
                                        else xi.dtype)
        idx, frac, outside = [], [], None
        for k, g in enumerate(self.grid):
            x = xi[:, k]
            i = fnp.clip(fnp.searchsorted(g, x) - 1, 0, g.shape[0] - 2).astype(np.int32)
            idx.append(i)
            frac.append((x - g[i]) / (g[i + 1] - g[i]))
            out = (x < g[0]) | (x > g[-1])
            outside = out if outside is None else outside | out
        extra = self.values.ndim - d
        if method == "nearest":
            near = tuple(fnp.where(f <= 0.5, i, i + 1) for i, f in zip(idx, frac))
            result = self.values[near]
        else:
            result = None
            for corner in itertools.product((0, 1), repeat=d):
                w = None
                for c, f in zip(corner, frac):
                    wk = f if c else 1 - f
                    w = wk if w is None else w * wk
                term = self.values[tuple(i + c for i, c in zip(idx, corner))] * \
                    w.reshape(w.shape + (1,) * extra)
                result = term if result is None else result + term
        if self.fill_value is not None:
            mask = outside.reshape(outside.shape + (1,) * extra)
            result = fnp.where(mask, self.fill_value.astype(result.dtype), result)
        return result.reshape(lead + self.values.shape[d:])


tree_util.register_pytree_node(
    RegularGridInterpolator,
    lambda r: ((r.grid, r.values, r.fill_value), (r.method, r.bounds_error)),
    lambda aux, ch: _rebuild(aux, ch))


def _rebuild(aux, children):
    obj = object.__new__(RegularGridInterpolator)
    obj.grid, obj.values, obj.fill_value = children
    obj.method, obj.bounds_error = aux
    return obj
