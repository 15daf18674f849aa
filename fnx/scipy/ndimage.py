"""``fnx.scipy.ndimage``: JAX's ``jax.scipy.ndimage`` (``map_coordinates``)."""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..errors import ShapeError

__all__ = ["map_coordinates"]


def _mirror(index, size):
    """Reflection about the edge samples (``d c b | a b c d | c b a``)."""
    if size == 1:
        return fnp.zeros_like(index)
    s = size - 1
    return fnp.abs((index + s) % (2 * s) - s)


def _reflect(index, size):
    """Reflection about the edges (``d c b a | a b c d | d c b a``)."""
    return (_mirror(2 * index + 1, 2 * size + 1) - 1) // 2


_FIXERS = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: fnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """The values of ``input`` at the (fractional) ``coordinates``, one array per input
    dimension: nearest sample (``order=0``, halves rounded away from zero) or
    multilinear interpolation (``order=1``). Outside the input, ``mode`` 'constant'
    (``cval``), 'nearest', 'wrap', 'mirror' or 'reflect'. Integer input is rounded back
    to its dtype. As JAX, only ``order <= 1``."""
    x = fnp.asarray(input)
    coords = [fnp.asarray(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ShapeError(f"map_coordinates: needs one coordinate array per input dimension "
                         f"({x.ndim}), got {len(coords)}")
    if mode not in _FIXERS:
        raise NotImplementedError(f"map_coordinates: mode must be one of {sorted(_FIXERS)}, "
                                  f"got {mode!r}")
    if order not in (0, 1):
        raise NotImplementedError(f"map_coordinates: only order 0 and 1 are supported (as "
                                  f"in JAX), got order={order}")
    shape = np.broadcast_shapes(*[c.shape for c in coords])
    work = x.dtype if x.dtype.kind in "fc" else np.result_type(np.float32, *[
        c.dtype for c in coords if c.dtype.kind == "f"])
    coords = [fnp.broadcast_to(c, shape).astype(work if c.dtype.kind in "biu" else c.dtype)
              for c in coords]
    per_dim = []
    for c, size in zip(coords, x.shape):
        if order == 0:
            nodes = [(lax.round(c).astype(np.int32), None)]
        else:
            lo = fnp.floor(c)
            hi_w = c - lo
            lo_i = lo.astype(np.int32)
            nodes = [(lo_i, 1 - hi_w), (lo_i + 1, hi_w)]
        fixed = []
        for idx, w in nodes:
            valid = ((idx >= 0) & (idx < size)) if mode == "constant" else None
            j = fnp.clip(_FIXERS[mode](idx, size), 0, size - 1)
            fixed.append((j, valid, w))
        per_dim.append(fixed)
    cval = fnp.asarray(cval).astype(x.dtype)
    total = None
    for combo in itertools.product(*per_dim):
        idx = tuple(j for j, _, _ in combo)
        val = x[idx]
        valids = [v for _, v, _ in combo if v is not None]
        if valids:
            val = fnp.where(functools.reduce(operator.and_, valids), val, cval)
        weights = [w for _, _, w in combo if w is not None]
        if weights:
            val = functools.reduce(operator.mul, weights) * val
        total = val if total is None else total + val
    if x.dtype.kind in "biu" and total.dtype.kind == "f":
        total = lax.round(total)
    return total.astype(x.dtype)
