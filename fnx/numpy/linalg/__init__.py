"""``fnx.numpy.linalg``: the Array API linalg extension functions that need no
factorization (products, diagonals, traces, norms, cross products).

Factorizations (inv, solve, det, cholesky, qr, svd, eigh) and the norms that
need singular values (matrix 2-norm, nuclear norm) come with a later issue.
"""
from __future__ import annotations

import numpy as np

from ... import lax
from ...core.array import to_array
from ...errors import ShapeError
from .._util import normalize_axes, promote
from ..manipulation import matrix_transpose  # noqa: F401
from ..products import matmul, outer, tensordot, vecdot  # noqa: F401

__all__ = ["matrix_transpose", "matmul", "tensordot", "vecdot", "outer", "diagonal", "trace",
           "vector_norm", "matrix_norm", "norm", "cross"]

_SVD_LATER = ("needs singular values (an SVD), which come with the linalg factorizations "
              "(a later issue); use ord='fro', 1, -1, inf or -inf for now")


def _matrix(name, x):
    (x,) = promote(name, x)
    if x.ndim < 2:
        raise ShapeError(f"{name}: needs an array of rank >= 2 (a stack of matrices), got "
                         f"shape {x.shape}")
    return x


def diagonal(x, /, *, offset=0):
    """The ``offset`` diagonals of the matrices in the last two axes."""
    from ..manipulation import diagonal as diagonal_
    return diagonal_(_matrix("diagonal", x), offset, -2, -1)


def trace(x, /, *, offset=0, dtype=None):
    """Sums of the ``offset`` diagonals of the matrices in the last two axes."""
    from ..reductions import sum as sum_
    return sum_(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def _abs_inexact(name, x):
    """``|x|`` as a real floating array (ints become float, complex its real dtype)."""
    from ..elementwise import absolute
    (x,) = promote(name, x, to_inexact=True)
    return absolute(x)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Vector p-norm over ``axis`` (None: all elements; a tuple: those axes as one vector).

    ``ord``: 2 (default), 1, inf (max |x|), -inf (min |x|), 0 (count of non-zeros),
    or any other p: ``sum(|x|**p) ** (1/p)``.
    """
    from .. import elementwise as ew
    from ..reductions import max as max_, min as min_, sum as sum_
    if isinstance(ord, str):
        raise ValueError(f"vector_norm: ord must be a number, got {ord!r}")
    a = _abs_inexact("vector_norm", x)
    axes = normalize_axes("vector_norm", axis, a.ndim)
    if ord == 2:
        return ew.sqrt(sum_(ew.multiply(a, a), axis=axes, keepdims=keepdims))
    if ord == 1:
        return sum_(a, axis=axes, keepdims=keepdims)
    if ord == np.inf:
        return max_(a, axis=axes, keepdims=keepdims)
    if ord == -np.inf:
        return min_(a, axis=axes, keepdims=keepdims)
    if ord == 0:
        return sum_(ew.not_equal(a, 0), axis=axes, keepdims=keepdims, dtype=a.dtype)
    p = float(ord)
    s = sum_(ew.power(a, p), axis=axes, keepdims=keepdims)
    return ew.power(s, 1.0 / p)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Norm of the matrices in the last two axes: 'fro', 1, -1, inf or -inf
    (2, -2 and 'nuc' need an SVD and raise NotImplementedError for now)."""
    x = _matrix("matrix_norm", x)
    return _matrix_norm("matrix_norm", x, (x.ndim - 2, x.ndim - 1), keepdims, ord)


def _matrix_norm(name, x, axes, keepdims, ord):
    from .. import elementwise as ew
    from ..reductions import max as max_, min as min_, sum as sum_
    row, col = axes
    if row == col:
        raise ValueError(f"{name}: the two matrix axes must differ, got {axes}")
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"{name}: ord={ord!r} {_SVD_LATER}")
    a = _abs_inexact(name, x)
    if ord in ("fro", "f", None):
        return ew.sqrt(sum_(ew.multiply(a, a), axis=axes, keepdims=keepdims))
    if ord in (1, -1):  # max/min over columns of the column sums
        red, over = row, col
    elif ord in (np.inf, -np.inf):  # max/min over rows of the row sums
        red, over = col, row
    else:
        raise ValueError(f"{name}: invalid ord {ord!r} for a matrix norm; use 'fro', 1, -1, "
                         "inf or -inf")
    s = sum_(a, axis=red, keepdims=True)
    pick = max_ if ord in (1, np.inf) else min_
    out = pick(s, axis=over, keepdims=True)
    return out if keepdims else lax.squeeze(out, sorted(axes))


def norm(x, ord=None, axis=None, keepdims=False):
    """``numpy.linalg.norm``: a vector norm (1-D, or ``axis`` an int), a matrix norm
    (2-D, or ``axis`` a pair), or with ``ord=None`` the 2-norm of all elements."""
    x = to_array(x, "norm")
    if axis is None:
        if ord is None:
            return vector_norm(x, axis=None, keepdims=keepdims)
        if x.ndim == 1:
            axis = (0,)
        elif x.ndim == 2:
            axis = (0, 1)
        else:
            raise ValueError(f"norm: improper number of dimensions to norm (rank {x.ndim} "
                             "with ord given and axis=None)")
    axes = normalize_axes("norm", (axis,) if isinstance(axis, (int, np.integer)) else axis,
                          x.ndim)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
        return vector_norm(x, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) == 2:
        return _matrix_norm("norm", x, axes, keepdims, "fro" if ord is None else ord)
    raise ValueError(f"norm: improper number of dimensions to norm (axis={axis})")


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-vectors along ``axis`` (broadcasting the other dims)."""
    from ..products import cross as cross_
    a, b = promote("cross", x1, x2)
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ShapeError(f"cross: needs 3-vectors along axis {axis}, got shapes {a.shape} "
                         f"and {b.shape}")
    return cross_(a, b, axis=axis)
