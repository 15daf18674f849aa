"""``fnx.numpy.linalg``: the Array API 2023.12 linalg extension (and NumPy's extras).

Products, diagonals, traces, norms and cross products are written with elementwise and
contraction primitives; factorizations and everything built on them (``inv``, ``solve``,
``det``, ``slogdet``, ``cholesky``, ``qr``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``,
``pinv``, ``lstsq``, ``matrix_rank``, ``matrix_power``, the 2-, -2- and nuclear matrix
norms) on the primitives of ``fnx.lax.linalg``, so all of them differentiate (``solve``,
``inv`` and ``det`` through an LU decomposition; ``pinv`` and ``lstsq`` through an SVD),
work under ``jit`` and ``vmap``, and take stacks of matrices in the last two axes.
Functions returning several arrays return the Array API's named tuples
(``SlogdetResult``, ``EighResult``, ``EigResult``, ``QRResult``, ``SVDResult``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import lax
from ...lax.linalg import check_matrix
from ...lax import linalg as _la
from ...core.array import to_array
from ...errors import ShapeError
from ..util import compiled_when_eager, normalize_axes, promote
from ..manipulation import matrix_transpose  # noqa: F401
from ..products import kron, matmul, outer, tensordot, vecdot  # noqa: F401

__all__ = ["matrix_transpose", "matmul", "tensordot", "vecdot", "outer", "diagonal", "trace",
           "vector_norm", "matrix_norm", "norm", "cross", "inv", "solve", "det", "slogdet",
           "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "matrix_power", "pinv",
           "lstsq", "matrix_rank", "kron", "SlogdetResult", "EighResult", "EigResult", "QRResult",
           "SVDResult", "eig", "eigvals", "cond", "multi_dot", "tensorinv", "tensorsolve"]


def cond(x, p=None):
    """The condition number of the matrices in the last two axes: the ratio of extreme
    singular values for ``p`` None, 2 or -2, else ``norm(x, p) * norm(inv(x), p)``
    (``p`` 'fro', 'nuc', inf, -inf, 1, -1). Singular matrices give inf, as NumPy."""
    from .. import elementwise as ew
    a = _inexact_matrix("cond", x)
    if p is None or p in (2, -2):
        s = svdvals(a)
        big, small = s[..., 0], s[..., -1]
        r = ew.divide(big, small) if p != -2 else ew.divide(small, big)
    else:
        if a.shape[-1] != a.shape[-2]:
            raise ShapeError(f"cond: p={p!r} needs square matrices, got shape {a.shape}")
        r = ew.multiply(matrix_norm(a, ord=p), matrix_norm(inv(a), ord=p))
    return ew.where(ew.isnan(r), np.inf, r)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices in the cheapest order (dynamic programming
    over the chain, as NumPy); the first may be a 1-D row and the last a 1-D column."""
    arrays = [to_array(a, "multi_dot") for a in arrays]
    n = len(arrays)
    if n < 2:
        raise ValueError(f"multi_dot: needs at least two arrays, got {n}")
    if n == 2:
        return matmul(arrays[0], arrays[1], precision=precision)
    first_1d, last_1d = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_1d:
        arrays[0] = lax.reshape(arrays[0], (1, arrays[0].shape[0]))
    if last_1d:
        arrays[-1] = lax.reshape(arrays[-1], (arrays[-1].shape[0], 1))
    for k, a in enumerate(arrays):
        if a.ndim != 2:
            raise ShapeError(f"multi_dot: array {k} must be 2-D (the first and last may be "
                             f"1-D), got shape {a.shape}")
    dims = [arrays[0].shape[0]] + [a.shape[1] for a in arrays]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def chain(i, j):
        if i == j:
            return arrays[i]
        k = split[i][j]
        return matmul(chain(i, k), chain(k + 1, j), precision=precision)
    out = chain(0, n - 1)
    if first_1d:
        out = out[0]
    if last_1d:
        out = out[..., 0]
    return out


def tensorinv(a, ind=2):
    """The inverse of ``a`` seen as a matrix from its first ``ind`` axes to the rest:
    shape ``a.shape[ind:] + a.shape[:ind]``."""
    a = to_array(a, "tensorinv")
    ind = int(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive int, got {ind}")
    rows, cols = a.shape[:ind], a.shape[ind:]
    nr, nc = int(np.prod(rows)), int(np.prod(cols))
    if nr != nc:
        raise ShapeError(f"tensorinv: prod(a.shape[:ind]) = {nr} must equal prod(a.shape[ind:]) "
                         f"= {nc} (shape {a.shape}, ind={ind})")
    return lax.reshape(inv(lax.reshape(a, (nr, nc))), cols + rows)


def tensorsolve(a, b, axes=None):
    """``x`` with ``tensordot(a, x, x.ndim) == b`` (``axes``: axes of ``a`` moved to the
    end first)."""
    from ..manipulation import moveaxis
    a, b = promote("tensorsolve", a, b, to_inexact=True)
    if axes is not None:
        axes = [ax % a.ndim for ax in axes]
        a = moveaxis(a, axes, list(range(a.ndim - len(axes), a.ndim)))
    xshape = a.shape[b.ndim:]
    nb, nx = int(np.prod(b.shape)), int(np.prod(xshape))
    if a.shape[:b.ndim] != b.shape or nb != nx:
        raise ShapeError(f"tensorsolve: a's leading dims {a.shape[:b.ndim]} must be b's shape "
                         f"{b.shape} and span as many elements as the rest {xshape}")
    x = solve(lax.reshape(a, (nb, nx)), lax.reshape(b, (nb,)))
    return lax.reshape(x, xshape)


def _complex_of(dtype):
    return np.result_type(dtype, np.complex64)


def _nan_eig(m, vectors):
    """NumPy's eig (eigvals) of a stack of matrices, NaNs for the matrices holding an inf
    or a NaN (as JAX; LAPACK's geev refuses them)."""
    m = np.asarray(m)
    bad = ~np.isfinite(m).all(axis=(-2, -1))
    if bad.any():
        m = np.where(bad[..., None, None], 0, m)
    fn = np.linalg.eig if vectors else np.linalg.eigvals
    out = fn(m)
    if not bad.any():
        return out
    if vectors:
        w, v = out
        w = np.where(bad[..., None], np.nan, w)
        return w, np.where(bad[..., None, None], np.nan, v)
    return np.where(bad[..., None], np.nan, out)


def eig(a, /):
    """``EigResult(eigenvalues, eigenvectors)``, the right eigenvectors, of general square
    matrices, complex (as
    JAX, whose eig also runs on the CPU only). LAPACK's geev through a pure callback:
    works under jit and vmap, but has no derivative rule (use eigh for Hermitian
    matrices)."""
    from ...lax.callback import pure_callback
    from ...core.primitive import ShapeDtypeStruct
    a = _inexact_matrix("eig", a, square=True)
    ct = _complex_of(a.dtype)
    shapes = (ShapeDtypeStruct(a.shape[:-1], ct), ShapeDtypeStruct(a.shape, ct))
    return EigResult(*pure_callback(lambda m: tuple(v.astype(ct) for v in _nan_eig(m, True)),
                                    shapes, a, vmap_method="expand_dims"))


def eigvals(a, /):
    """The eigenvalues of general square matrices (complex); see ``eig``."""
    from ...lax.callback import pure_callback
    from ...core.primitive import ShapeDtypeStruct
    a = _inexact_matrix("eigvals", a, square=True)
    ct = _complex_of(a.dtype)
    return pure_callback(lambda m: _nan_eig(m, False).astype(ct),
                         ShapeDtypeStruct(a.shape[:-1], ct), a, vmap_method="expand_dims")


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
    from ..reductions import _fused_sum, max as max_, min as min_, sum as sum_
    if isinstance(ord, str):
        raise ValueError(f"vector_norm: ord must be a number, got {ord!r}")
    a = _abs_inexact("vector_norm", x)
    axes = normalize_axes("vector_norm", axis, a.ndim)
    if ord == 2:
        return ew.sqrt(_fused_sum(ew.multiply, a, a, axis=axes, keepdims=keepdims))
    if ord == 1:
        return sum_(a, axis=axes, keepdims=keepdims)
    if ord == np.inf:   # 0 for no elements, as JAX
        return max_(a, axis=axes, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return min_(a, axis=axes, keepdims=keepdims)
    if ord == 0:
        return sum_(ew.not_equal(a, 0), axis=axes, keepdims=keepdims, dtype=a.dtype)
    p = float(ord)
    s = sum_(ew.power(a, p), axis=axes, keepdims=keepdims)
    return ew.power(s, 1.0 / p)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Norm of the matrices in the last two axes: 'fro', 'nuc' (sum of the singular
    values), 1, -1, inf, -inf, 2 (the largest singular value) or -2 (the smallest)."""
    x = _matrix("matrix_norm", x)
    return _matrix_norm("matrix_norm", x, (x.ndim - 2, x.ndim - 1), keepdims, ord)


def _matrix_norm(name, x, axes, keepdims, ord):
    from .. import elementwise as ew
    from ..reductions import _fused_sum, max as max_, min as min_, sum as sum_
    row, col = axes
    if row == col:
        raise ValueError(f"{name}: the two matrix axes must differ, got {axes}")
    if ord in (2, -2, "nuc"):
        return _sv_norm(x, axes, keepdims, ord)
    a = _abs_inexact(name, x)
    if ord in ("fro", "f", None):
        return ew.sqrt(_fused_sum(ew.multiply, a, a, axis=axes, keepdims=keepdims))
    if ord in (1, -1):  # max/min over columns of the column sums
        red, over = row, col
    elif ord in (np.inf, -np.inf):  # max/min over rows of the row sums
        red, over = col, row
    else:
        raise ValueError(f"{name}: invalid ord {ord!r} for a matrix norm; use 'fro', 'nuc', "
                         "1, -1, 2, -2, inf or -inf")
    s = sum_(a, axis=red, keepdims=True)
    if ord in (1, np.inf):   # 0 for no columns (rows), as JAX
        out = max_(s, axis=over, keepdims=True, initial=0)
    else:
        out = min_(s, axis=over, keepdims=True)
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
            raise ValueError(f"norm: Invalid order {ord!r} for vector norm.")
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


# --- factorizations and what is built on them ------------------------------------------------

class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _inexact_matrix(name, x, square=False):
    """``x`` as a float/complex stack of matrices (ints and bools: the default float)."""
    (x,) = promote(name, x, to_inexact=True)
    check_matrix(name, x, square)
    return x




def _eps(dtype):
    return float(np.finfo(_la.real_dtype(dtype)).eps)


def _identity_like(a):
    """Identity matrices of ``a``'s shape and dtype."""
    from ..creation import eye
    from ..util import broadcast_to_shape
    return broadcast_to_shape(eye(a.shape[-1], dtype=a.dtype), a.shape)


def _broadcast_batch(name, a, b):
    """a (..., m, m) and b (..., m, k) with their batch dims broadcast together."""
    from ..util import broadcast_shapes, broadcast_to_shape
    batch = broadcast_shapes(name, a.shape[:-2], b.shape[:-2])
    return (broadcast_to_shape(a, batch + a.shape[-2:]),
            broadcast_to_shape(b, batch + b.shape[-2:]))


def solve(a, b):
    """The solution ``x`` of ``a @ x = b`` for square ``a`` (..., M, M).

    ``x2`` is one vector when 1-D (shape (M,): the result is (..., M)); otherwise a stack
    of (M, K) matrices whose batch dims broadcast with ``x1``'s (Array API 2023.12, as
    NumPy 2). One LAPACK ``gesv`` per matrix (``lax.linalg.linear_solve``: an LU
    decomposition with partial pivoting and its two triangular solves, as NumPy's)."""
    a, b = promote("solve", a, b, to_inexact=True)
    a = _inexact_matrix("solve", a, square=True)
    vector = b.ndim == 1
    if b.ndim == 0:
        raise ShapeError(f"solve: x2 must be a vector (M,) or a stack of matrices "
                         f"(..., M, K), got shape {b.shape}")
    if vector:
        b = lax.expand_dims(b, (1,))
    if b.shape[-2] != a.shape[-1]:
        what = "(M,)" if vector else "(..., M, K)"
        raise ShapeError(f"solve: x1 has shape {a.shape} (M = {a.shape[-1]}) but x2 has shape "
                         f"{b.shape[:-1] if vector else b.shape}; x2 must be {what}")
    if a.shape[:-2] != b.shape[:-2]:
        a, b = _broadcast_batch("solve", a, b)
    x = _la.linear_solve(a, b)
    return lax.squeeze(x, (x.ndim - 1,)) if vector else x


def inv(a):
    """The inverses of the square matrices in the last two axes: ``a`` solved against the
    identity (``lax.linalg.linear_solve``, LAPACK's gesv, as NumPy's ``inv``)."""
    a = _inexact_matrix("inv", a, square=True)
    eye = lax.broadcast_in_dim(lax.convert_element_type(np.eye(a.shape[-1]), a.dtype),
                               tuple(a.shape), (a.ndim - 2, a.ndim - 1))
    return _la.linear_solve(a, eye)


def _lu_parts(name, x):
    """The diagonal of U with the pivots' signs folded in: ``d`` negated where the LU
    swapped row ``i`` with another at step ``i``, so ``prod(d) = det(x)``. (lax-level
    ops: a handful of primitives, as the eager call of a 100 x 100 det is mostly their
    dispatch.)"""
    a = _inexact_matrix(name, x, square=True)
    lu_, piv, _ = _la.lu(a)
    steps = np.broadcast_to(np.arange(piv.shape[-1], dtype=np.int32), piv.shape)
    swapped = lax.ne(piv, to_array(steps))
    d = _la.matrix_diagonal(lu_)
    return lax.select_n(swapped, d, lax.neg(d))


def det(a):
    """Determinants of the square matrices in the last two axes: 2 x 2 and 3 x 3 ones by
    their explicit formulas, larger ones from an LU decomposition, whose derivative is
    ``trace(adjugate(a) @ da)`` (finite for singular matrices too), as JAX's."""
    a = _inexact_matrix("det", a, square=True)
    n = a.shape[-1]
    if n == 2:
        return _det_2x2(a)
    if n == 3:
        return _det_3x3(a)
    return _det_lu(a)


def _det_2x2(a):
    from .. import elementwise as ew
    return ew.subtract(ew.multiply(a[..., 0, 0], a[..., 1, 1]),
                       ew.multiply(a[..., 0, 1], a[..., 1, 0]))


def _det_3x3(a):
    from .. import elementwise as ew

    def term(*ij):
        out = a[(Ellipsis,) + ij[0]]
        for k in ij[1:]:
            out = ew.multiply(out, a[(Ellipsis,) + k])
        return out
    plus = ew.add(ew.add(term((0, 0), (1, 1), (2, 2)), term((0, 1), (1, 2), (2, 0))),
                  term((0, 2), (1, 0), (2, 1)))
    minus = ew.add(ew.add(term((0, 2), (1, 1), (2, 0)), term((0, 0), (1, 2), (2, 1))),
                   term((0, 1), (1, 0), (2, 2)))
    return ew.subtract(plus, minus)


@compiled_when_eager
def _det_by_lu(a):
    d = _lu_parts("det", a)
    return lax.reduce_prod(d, (d.ndim - 1,))


def _cofactor_solve(a, b):
    """``det(a)`` and ``adjugate(a) @ b`` (``det(a) * solve(a, b)`` for nonsingular
    ``a``), finite for matrices of rank n - 1 (the lower right corner of U is replaced by
    ``1 / prod(diag(U)[:-1])``) and zero for lower ranks: JAX's ``_cofactor_solve``."""
    from .. import elementwise as ew
    from ..creation import ones
    from ..manipulation import concatenate
    from ..reductions import any as any_, cumprod, sum as sum_
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, 0], b
    lu_, piv, perm = _la.lu(a)
    diag = _la.matrix_diagonal(lu_)
    steps = to_array(np.broadcast_to(np.arange(n, dtype=np.int32), piv.shape))
    parity = sum_(lax.ne(piv, steps), axis=-1, dtype=np.int32)
    sign = lax.convert_element_type(ew.subtract(1, ew.multiply(2, ew.remainder(parity, 2))),
                                    a.dtype)
    partial_det = ew.multiply(cumprod(diag, axis=-1), sign[..., None])
    lu_ = lu_.at[..., -1, -1].set(ew.divide(1, partial_det[..., -2]))
    d = _la.triangular_solve(lu_, ones(a.shape[:-1] + (1,), a.dtype), left_side=True,
                             lower=False)
    bad = any_(ew.logical_or(ew.isnan(d), ew.isinf(d)), axis=(-2, -1))[..., None, None]
    zero = lax.convert_element_type(0, b.dtype)
    x = ew.where(bad, zero, b)
    x = _la.permute_rows(x, perm)
    x = _la.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    x = concatenate((ew.multiply(x[..., :-1, :], partial_det[..., -1, None, None]),
                     x[..., -1:, :]), axis=-2)
    x = _la.triangular_solve(lu_, x, left_side=True, lower=False)
    return partial_det[..., -1], ew.where(bad, zero, x)


def _make_det_lu():
    from ...transforms.custom import custom_jvp

    @custom_jvp
    def det_lu(a):
        return _det_by_lu(a)

    @det_lu.defjvp
    def _jvp(primals, tangents):
        (x,), (g,) = primals, tangents
        y, z = _cofactor_solve(x, lax.convert_element_type(g, x.dtype))
        return y, trace(z)
    return det_lu


_det_lu = _make_det_lu()


def slogdet(a, *, method=None):
    """``SlogdetResult(sign, logabsdet)`` with ``det(a) = sign * exp(logabsdet)``; a
    singular matrix gives sign 0 and logabsdet -inf. ``method``: 'lu' (None) or 'qr', as
    JAX; both are computed from the LU decomposition here."""
    if method not in (None, "lu", "qr"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                         "(`None`), and 'qr'.")
    return _slogdet(a)


@compiled_when_eager
def _slogdet(x):
    from .. import elementwise as ew
    d = _lu_parts("slogdet", x)
    mag = lax.abs(d)
    if d.dtype.kind == "c":
        zero = ew.equal(mag, 0)
        unit = ew.where(zero, lax.convert_element_type(0, d.dtype),
                        ew.divide(d, lax.convert_element_type(ew.where(zero, 1, mag), d.dtype)))
    else:
        unit = lax.sign(d)
    last = (d.ndim - 1,)
    return SlogdetResult(lax.reduce_prod(unit, last), lax.reduce_sum(lax.log(mag), last))


def cholesky(a, *, upper=False, symmetrize_input=True):
    """Cholesky factor of Hermitian positive definite matrices: lower ``L`` with
    ``a = L L^H`` (``upper``: ``U = L^H``, ``a = U^H U``). Factors ``(a + a^H) / 2`` (so
    the gradient is symmetric), or with ``symmetrize_input=False`` reads the lower
    triangle only; not positive definite: NaNs (as JAX; NumPy raises)."""
    a = _inexact_matrix("cholesky", a, square=True)
    chol = _la.cholesky(a, symmetrize_input=bool(symmetrize_input))
    return _la.mH(chol) if upper else chol


def qr(a, mode="reduced"):
    """``QRResult(Q, R)`` of the matrices in the last two axes; ``mode``: 'reduced'
    (K = min(M, N)), 'complete' (Q is M x M) or 'r' (R alone, as NumPy)."""
    a = _inexact_matrix("qr", a)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    q, r = _la.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def eigh(a, UPLO=None, symmetrize_input=True):
    """``EighResult(eigenvalues, eigenvectors)`` of Hermitian matrices: eigenvalues
    ascending (real), eigenvectors in the columns. ``symmetrize_input`` (default, as JAX):
    decompose ``(a + a^H) / 2``; else read the ``UPLO`` ('L', the default, or 'U')
    triangle only."""
    a = _inexact_matrix("eigh", a, square=True)
    if UPLO is None:
        UPLO = "L"
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = _la.eigh(a, lower=UPLO == "L", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """Eigenvalues (ascending, real) of Hermitian matrices."""
    return eigh(a, UPLO=UPLO, symmetrize_input=symmetrize_input).eigenvalues


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    """``SVDResult(U, S, Vh)`` with ``a = U @ (S[..., None] * Vh)`` (S descending), or
    ``S`` alone when not ``compute_uv`` (as NumPy). ``hermitian`` is accepted and
    ignored (the general SVD is used). ``subset_by_index=(start, end)``: the singular
    triplets ``start`` to ``end - 1`` only (with ``full_matrices=False``)."""
    a = _inexact_matrix("svd", a)
    if not compute_uv:
        return _la.svd(a, full_matrices=full_matrices, compute_uv=False,
                       subset_by_index=subset_by_index)
    u, s, vh = _la.svd(a, full_matrices=full_matrices, subset_by_index=subset_by_index)
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """Singular values (descending) of the matrices in the last two axes."""
    return _la.svd(_inexact_matrix("svdvals", x), compute_uv=False)


def _sv_norm(x, axes, keepdims, ord):
    from ..manipulation import expand_dims, moveaxis
    from ..reductions import max as max_, min as min_, sum as sum_
    x = _inexact_matrix("matrix_norm", x)
    s = _la.svd(moveaxis(x, axes, (-2, -1)), compute_uv=False)
    out = (max_(s, axis=-1, initial=0) if ord == 2   # 0 for an empty matrix, as JAX
           else {-2: min_, "nuc": sum_}[ord](s, axis=-1))
    return expand_dims(out, tuple(sorted(axes))) if keepdims else out


def _cutoff_mask(s, rtol):
    """``s > rtol * max(s)`` per matrix (``rtol`` a number or an array over the batch
    dims), and 1/s there (0 elsewhere, with no NaN in the gradient)."""
    from .. import elementwise as ew
    from ..reductions import max as max_
    if not isinstance(rtol, (int, float)):
        rtol = lax.convert_element_type(to_array(rtol), s.dtype)
        if rtol.ndim:
            rtol = rtol[..., None]
    top = max_(s, axis=-1, keepdims=True) if s.shape[-1] else s
    keep = ew.greater(s, ew.multiply(lax.stop_gradient(top), rtol))
    safe = ew.where(keep, s, 1)
    return keep, ew.where(keep, ew.divide(1, safe), 0)


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """Moore-Penrose pseudo-inverses (through the SVD): singular values up to
    ``rtol * largest`` count as zero (``rtol`` default 10 * max(M, N) * eps, as JAX;
    ``rcond`` is NumPy's older name for it). ``hermitian`` is accepted and ignored. The
    derivative is Golub and Pereyra's formula in ``pinv(a)`` (JAX's), finite where
    singular values repeat."""
    if rtol is not None and rcond is not None:
        raise ValueError("pinv: only one of rtol and rcond may be specified.")
    a = _inexact_matrix("pinv", a)
    m, n = a.shape[-2:]
    if rtol is None:
        rtol = rcond if rcond is not None else 10 * max(m, n) * _eps(a.dtype)
    if m == 0 or n == 0:
        from ..creation import zeros
        return zeros(a.shape[:-2] + (n, m), a.dtype)
    return _pinv(a, rtol)


def _pinv_by_svd(a, rtol):
    from .. import elementwise as ew
    u, s, vh = _la.svd(a, full_matrices=False)
    _, s_inv = _cutoff_mask(s, rtol)
    scaled = ew.multiply(_la.mH(vh), lax.convert_element_type(s_inv, a.dtype)[..., None, :])
    return matmul(scaled, _la.mH(u))


def _pinv_jvp(rtol, primals, tangents):
    """G. H. Golub and V. Pereyra, The Differentiation of Pseudo-Inverses and Nonlinear
    Least Squares Problems Whose Variables Separate (JAX's rule)."""
    from .. import elementwise as ew
    (a,), (da,) = primals, tangents
    da = lax.convert_element_type(da, a.dtype)
    p = _pinv(a, rtol)
    H = _la.mH
    m, n = a.shape[-2:]
    if m >= n:
        s = matmul(matmul(p, H(p)), H(da))
        t = matmul(matmul(H(da), H(p)), p)
        dp = ew.add(ew.subtract(ew.add(ew.subtract(s, matmul(matmul(s, a), p)), t),
                                matmul(matmul(p, a), t)),
                    ew.negative(matmul(matmul(p, da), p)))
    else:
        s = matmul(p, matmul(H(p), H(da)))
        t = matmul(H(da), matmul(H(p), p))
        dp = ew.add(ew.subtract(ew.add(ew.subtract(s, matmul(s, matmul(a, p))), t),
                                matmul(p, matmul(a, t))),
                    ew.negative(matmul(p, matmul(da, p))))
    return p, dp


def _make_pinv():
    from ...transforms.custom import custom_jvp
    f = custom_jvp(lambda a, rtol: _pinv_by_svd(a, rtol), nondiff_argnums=(1,))
    f.defjvp(_pinv_jvp)
    return f


_pinv = _make_pinv()


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least-squares solution of ``a @ x = b`` (a: (M, N); b: (M,) or (M, K)), through the
    SVD: ``(x, residuals, rank, s)``. Singular values up to ``rcond * largest`` count as
    zero (default eps * max(M, N), as NumPy). As in JAX, ``residuals`` is always the sum
    of squared residuals per column (shape (K,), or (1,) for a vector b), where NumPy
    returns an empty array unless rank == N < M; ``numpy_resid=True`` gives NumPy's
    residuals (eagerly: the rank must be concrete)."""
    from .. import elementwise as ew
    from ..manipulation import expand_dims, squeeze
    from ..reductions import sum as sum_
    a, b = promote("lstsq", a, b, to_inexact=True)
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise ShapeError(f"lstsq: needs a matrix a (M, N) and b (M,) or (M, K), got shapes "
                         f"{a.shape} and {b.shape}")
    a = _inexact_matrix("lstsq", a)
    if b.shape[0] != a.shape[0]:
        raise ShapeError(f"lstsq: a {a.shape} and b {b.shape} need the same number of rows")
    vector = b.ndim == 1
    if vector:
        b = expand_dims(b, -1)
    m, n = a.shape
    if rcond is None:
        rcond = _eps(a.dtype) * max(m, n)
    u, s, vh = _la.svd(a, full_matrices=False)
    keep, s_inv = _cutoff_mask(s, rcond)
    ub = ew.multiply(matmul(_la.mH(u), b), lax.convert_element_type(s_inv, a.dtype)[:, None])
    x = matmul(_la.mH(vh), ub)
    r = ew.subtract(b, matmul(a, x))
    resid = sum_(ew.real(ew.multiply(ew.conj(r), r)) if r.dtype.kind == "c"
                 else ew.multiply(r, r), axis=0)
    rank = sum_(keep, axis=-1, dtype=np.int32)
    if numpy_resid and (m <= n or int(rank) < n):
        from ..creation import zeros
        resid = zeros((0,), dtype=resid.dtype)
    if vector:
        x = squeeze(x, -1)
    return x, resid, rank, s


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    """Ranks of the matrices in the last two axes: the singular values above ``tol``
    counted, or by default above ``largest * max(M, N) * eps``. As in JAX 0.10.2, a
    given ``rtol`` is the same absolute threshold as ``tol`` (only one may be given).
    Rank < 2 input: 1 unless all zero (as NumPy)."""
    from .. import elementwise as ew
    from ..reductions import any as any_, sum as sum_
    if tol is not None and rtol is not None:
        raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
    if rtol is not None:
        tol, rtol = rtol, None
    (x,) = promote("matrix_rank", M, to_inexact=True)
    if x.ndim < 2:
        return lax.convert_element_type(any_(ew.not_equal(x, 0)), np.int32)
    a = _inexact_matrix("matrix_rank", x)
    s = _la.svd(a, compute_uv=False)
    if tol is not None:
        t = to_array(tol)
        t = t[..., None] if t.ndim else t
        keep = ew.greater(s, lax.convert_element_type(t, s.dtype))
    else:
        if rtol is None:
            rtol = max(a.shape[-2:]) * _eps(a.dtype)
        keep, _ = _cutoff_mask(s, rtol)
    return sum_(keep, axis=-1, dtype=np.int32)


def matrix_power(a, n):
    """``x`` multiplied by itself ``n`` times (an int; 0: identity, negative: powers of
    the inverse), by repeated squaring."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"matrix_power: n must be a Python int, got {type(n).__name__}")
    (a,) = promote("matrix_power", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"matrix_power: needs square matrices in the last two axes, got "
                         f"shape {a.shape}")
    if n == 0:
        return _identity_like(a)
    if n < 0:
        a, n = inv(a), -n
    out = None
    while n:
        if n & 1:
            out = a if out is None else matmul(out, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return out
