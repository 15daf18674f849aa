"""``fnx.lax.linalg``: matrix factorizations and solves as primitives (JAX's ``jax.lax.linalg``).

Every primitive works on stacks of matrices (the last two axes; leading axes are batch
axes) of float32, float64, complex64 or complex128, and has a shape rule, a NumPy impl
(``numpy.linalg`` on the whole stack where NumPy has the LAPACK routine; LAPACK's
``getrf`` and BLAS's ``trsm`` through ``scipy.linalg.lapack``/``blas`` for ``lu`` and
``triangular_solve``, one call per matrix of the stack), a jvp rule (reverse mode is
derived from it), a batching rule (the batch axis goes to the front: the impls are
natively batched), and, for ``triangular_solve``, which is linear in ``b``, a transpose
rule.

- ``cholesky(x, symmetrize_input=True)``: lower ``L`` with ``x = L L^H``; the primitive
  reads the lower triangle only (NaNs where ``x`` is not positive definite, as JAX).
- ``triangular_solve(a, b, left_side=False, lower=False, transpose_a=False,
  conjugate_a=False, unit_diagonal=False)``: ``op(a) x = b`` (left) or ``x op(a) = b``.
- ``lu(x)``: ``(lu, pivots, permutation)`` with ``x[permutation] = L U`` (square only).
- ``qr(x, full_matrices=True)``: ``(q, r)``.
- ``eigh(x, lower=True, symmetrize_input=True)``: ``(v, w)``, ascending ``w``.
- ``svd(x, full_matrices=True, compute_uv=True)``: ``(u, s, vh)`` or ``s``.

The jvp rules are the standard matrix-calculus ones: cholesky
``dL = L Phi(L^-1 dA L^-H)``; eigh ``dw = diag(V^H dA V)``,
``dV = V (F o V^H dA V)`` with ``F_ij = 1 / (w_j - w_i)``; svd (reduced, and full for
square matrices); qr (any shape with reduced ``q``, and ``full_matrices`` where
``m <= n``); lu ``dL = L tril(X, -1)``, ``dU = triu(X) U`` with ``X = L^-1 P dA U^-1``.
Eigenvectors and singular vectors are defined up to a sign (a phase for complex input):
differentiate functions that do not depend on that choice. The rules of eigh and svd
divide by eigenvalue (singular value) gaps, so repeated values give infinite
derivatives, as in JAX.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from ..core import array_library as AL
from ..core.array import to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from . import ops as L
from .rule_helpers import describe, quiet

__all__ = ["cholesky", "triangular_solve", "lu", "qr", "eigh", "svd", "permute_rows",
           "lu_pivots_to_permutation",
           "matrix_diagonal",
           "cholesky_p", "triangular_solve_p", "lu_p", "qr_p", "eigh_p", "svd_p",
           "SvdAlgorithm", "EighImplementation", "EigImplementation"]


class SvdAlgorithm(enum.Enum):
    """JAX's choice of SVD algorithm (fnx always runs LAPACK's ``gesdd`` through NumPy)."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


class EighImplementation(enum.Enum):
    """JAX's choice of eigh algorithm (fnx always runs LAPACK's ``syevd``/``heevd``)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class EigImplementation(enum.Enum):
    """JAX's choice of eig backend (fnx always runs LAPACK's ``geev``)."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


def _subset(name, subset_by_index, size):
    """``(lo, hi)`` of a ``subset_by_index`` argument (None: the whole range)."""
    if subset_by_index is None:
        return 0, size
    try:
        lo, hi = (int(i) for i in subset_by_index)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: subset_by_index must be a pair of ints (start, end), got "
                         f"{subset_by_index!r}") from None
    if not 0 <= lo <= hi <= size:
        raise ValueError(f"{name}: subset_by_index {subset_by_index!r} must satisfy "
                         f"0 <= start <= end <= {size}")
    return lo, hi


def _last_slice(x, lo, hi, axis):
    """``x`` sliced to ``[lo, hi)`` along ``axis`` (counted from the end)."""
    if (lo, hi) == (0, x.shape[axis]):
        return x
    start = [0] * x.ndim
    limit = list(x.shape)
    start[axis], limit[axis] = lo, hi
    return L.slice(x, tuple(start), tuple(limit))


_DTYPES = tuple(map(np.dtype, ("float32", "float64", "complex64", "complex128")))


# --- shape-rule helpers ----------------------------------------------------------------------

def check_matrix(name, x, square=True):
    if x.dtype not in _DTYPES:
        raise ShapeError(f"{name} does not accept dtype {x.dtype}: it needs a float32, "
                         f"float64, complex64 or complex128 operand, got {describe(x)}; "
                         "convert it with .astype('float32') first")
    if x.ndim < 2:
        raise ShapeError(f"{name}: needs a matrix or a stack of matrices (rank >= 2), got "
                         f"{describe(x)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: needs square matrices in the last two axes, got "
                         f"{describe(x)}")


def real_dtype(dtype):
    """The real dtype of a float or complex ``dtype``'s matrices' singular values and
    eigenvalues (float32 for float32 and complex64, else float64)."""
    return np.dtype(np.float32) if dtype in (np.complex64, np.float32) else \
        np.dtype(np.float64)


def _sds(shape, dtype):
    return ShapeDtypeStruct(tuple(shape), np.dtype(dtype), False)


# --- helpers on fnx arrays (the rules are written with them, so they differentiate) -----------

def _is_complex(x):
    return np.dtype(x.dtype).kind == "c"


def _mT(x):
    nd = x.ndim
    return L.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def mH(x):
    """The conjugate transpose of the matrices in ``x``'s last two axes (JAX's ``x.mH``)."""
    return L.conj(_mT(x)) if _is_complex(x) else _mT(x)


def _cast(x, dtype):
    return x if x.dtype == dtype else L.convert_element_type(x, dtype)


def _mm(x, y):
    """Batched matrix product of (..., m, k) and (..., k, n) with equal batch dims."""
    dtype = np.result_type(x.dtype, y.dtype)
    x, y = _cast(x, dtype), _cast(y, dtype)
    nd = x.ndim
    batch = tuple(range(nd - 2))
    return L.dot_general(x, y, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _mask(shape, k, lower):
    """Boolean (..., m, n): True on and below diagonal k (``lower``), else on and above."""
    nd = len(shape)
    rows = L.broadcasted_iota(np.int32, shape, nd - 2)
    cols = L.broadcasted_iota(np.int32, shape, nd - 1)
    return L.ge(L.add(rows, int(k)), cols) if lower else L.le(L.add(rows, int(k)), cols)


def _tril(x, k=0):
    return L.select(_mask(x.shape, k, True), x, L.full(x.shape, 0, x.dtype))


def _triu(x, k=0):
    return L.select(_mask(x.shape, k, False), x, L.full(x.shape, 0, x.dtype))


def _eye_mask(shape):
    nd = len(shape)
    return L.eq(L.broadcasted_iota(np.int32, shape, nd - 2),
                L.broadcasted_iota(np.int32, shape, nd - 1))


def _eye(shape, dtype):
    return L.convert_element_type(_eye_mask(shape), dtype)


def _diag_part(x):
    """x with everything off the diagonal set to 0."""
    return L.select(_eye_mask(x.shape), x, L.full(x.shape, 0, x.dtype))


def _diag(x):
    """The diagonal of square (..., n, n) matrices, as (..., n)."""
    return L.reduce_sum(_diag_part(x), (x.ndim - 1,))


def _diag_matrix(v, n_cols=None):
    """(..., k) -> (..., k, n_cols) with v on the diagonal."""
    k = v.shape[-1]
    shape = tuple(v.shape) + (k if n_cols is None else n_cols,)
    nd = len(shape)
    full = L.broadcast_in_dim(v, shape, tuple(range(nd - 2)) + (nd - 2,))
    return L.select(_eye_mask(shape), full, L.full(shape, 0, v.dtype))


def _col(v, n_rows):
    """(..., k) -> (..., n_rows, k): v along the last axis, repeated over rows."""
    shape = tuple(v.shape[:-1]) + (n_rows, v.shape[-1])
    nd = len(shape)
    return L.broadcast_in_dim(v, shape, tuple(range(nd - 2)) + (nd - 1,))


def _row(v, n_cols):
    """(..., k) -> (..., k, n_cols): v along the second-to-last axis."""
    shape = tuple(v.shape) + (n_cols,)
    nd = len(shape)
    return L.broadcast_in_dim(v, shape, tuple(range(nd - 2)) + (nd - 2,))


def _hermitian_from(x, lower):
    """The Hermitian matrix whose ``lower`` (else upper) triangle is x's: what the
    factorizations that read one triangle (cholesky, eigh) see."""
    t = _tril(x, -1) if lower else _triu(x, 1)
    d = _diag_part(x)
    if _is_complex(x):
        d = L.convert_element_type(L.real(d), x.dtype)
    return L.add(L.add(t, mH(t)), d)


def _batch_front(vals, dims, size):
    """Every operand batched at axis 0 (unbatched ones broadcast)."""
    from ..transforms.vmap import materialize_batch_axis
    return [v if d == 0 else materialize_batch_axis(v, None, size, v.shape)
            for v, d in zip(vals, dims)]


def _batch_unary(prim):
    def rule(vals, dims, size, **params):
        out = prim.bind(vals[0], **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    prim.batch = rule


# --- LAPACK/BLAS routines NumPy does not expose (SciPy's wrappers, imported on first use) ----

_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
           np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}
_ROUTINES = {}


def _routine(name, dtype):
    """SciPy's wrapper of the LAPACK (``getrf``, ``laswp``) or BLAS (``trsm``) routine
    ``name`` for ``dtype`` (s/d/c/z), imported on first use so ``import fnx`` does not
    import SciPy."""
    key = (name, dtype)
    f = _ROUTINES.get(key)
    if f is None:
        from scipy.linalg import blas, lapack
        module = blas if name in ("trsm", "trsv") else lapack
        f = _ROUTINES[key] = getattr(module, _PREFIX[dtype] + name)
    return f


def _lapack_dtype(dtype):
    """The dtype LAPACK computes ``dtype`` in: itself, or float32 for float16/bfloat16."""
    dtype = np.dtype(dtype)
    return dtype if dtype in _PREFIX else np.dtype(np.float32)


def _fortran_view(x):
    """``x`` (k, m, n) as k Fortran-ordered matrices: ``(view, transposed)``, where
    ``view[i]`` is Fortran-contiguous and is ``x[i]`` (``transposed`` False) or
    ``x[i]``'s transpose (True), whichever needs no copy (a copy when neither does)."""
    if x.ndim == 3 and x.shape[0] > 0 and x[0].flags.f_contiguous \
            and (x.shape[0] == 1 or x.strides[0] >= x[0].nbytes):
        return x, False
    x = np.ascontiguousarray(x)
    return np.swapaxes(x, -1, -2), True


# --- cholesky --------------------------------------------------------------------------------

def _cholesky_rule(x):
    check_matrix("cholesky", x)
    return _sds(x.shape, x.dtype)


def _cholesky_impl(x):
    try:
        return np.linalg.cholesky(x).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError:   # not positive definite: NaN for those matrices, as JAX
        flat = x.reshape((-1,) + x.shape[-2:])
        out = np.empty_like(flat)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                out[i] = np.nan
        return out.reshape(x.shape)


cholesky_p = Primitive("cholesky", shape_rule=_cholesky_rule, impl=quiet(_cholesky_impl))


def _cholesky_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    chol = cholesky_p.bind(x)
    if dx is None:
        return chol, None
    da = _hermitian_from(dx, lower=True)
    tmp = triangular_solve(chol, da, left_side=True, lower=True)
    phi = triangular_solve(chol, tmp, left_side=False, lower=True, transpose_a=True,
                           conjugate_a=True)                       # L^-1 dA L^-H
    phi = L.add(_tril(phi, -1), L.mul(_diag_part(phi), 0.5))
    return chol, _mm(chol, phi)


cholesky_p.jvp = _cholesky_jvp
_batch_unary(cholesky_p)


def cholesky(x, *, symmetrize_input=True):
    """Lower Cholesky factor ``L`` of Hermitian positive definite ``x`` (``x = L L^H``).

    ``symmetrize_input``: factor ``(x + x^H) / 2`` (so gradients are symmetric); else
    only the lower triangle of ``x`` is read. Not positive definite: NaNs."""
    x = to_array(x)
    if symmetrize_input:
        check_matrix("cholesky", x)
        x = L.mul(L.add(x, mH(x)), 0.5)
    return cholesky_p.bind(x)


# --- triangular_solve ------------------------------------------------------------------------

def _ts_rule(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    check_matrix("triangular_solve", a)
    if b.ndim < 2:
        raise ShapeError(f"triangular_solve: b must be a matrix or a stack of matrices "
                         f"(rank >= 2), got a {describe(a)}, b {describe(b)}")
    if a.dtype != b.dtype:
        raise ShapeError(f"triangular_solve: a and b must have one dtype, got a {describe(a)}, "
                         f"b {describe(b)}")
    m = a.shape[-1]
    k = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[:-2] != b.shape[:-2] or k != m:
        side = "b.shape[-2]" if left_side else "b.shape[-1]"
        raise ShapeError(f"triangular_solve: a (..., m, m) and b need equal batch dims and "
                         f"{side} == m (left_side={left_side}), got a {describe(a)}, "
                         f"b {describe(b)}")
    return _sds(b.shape, b.dtype)


def _substitute(t, b, lower):
    """Solve t x = b by substitution (t triangular, stacks), for singular t: inf/NaN."""
    n = t.shape[-1]
    x = AL.zeros(b, np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                 np.result_type(t.dtype, b.dtype))
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:
        acc = b[..., i, :] - np.einsum("...j,...jk->...k", t[..., i, :], x)
        x[..., i, :] = acc / t[..., i, i, None]
    return x


def _ts_generic(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """``_ts_impl`` in NumPy calls that dispatch to a device buffer's library."""
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        idx = AL.arange(a, a.shape[-1])
        t[..., idx, idx] = 1
    is_lower = lower
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
        is_lower = not is_lower
    if conjugate_a and t.dtype.kind == "c":
        t = t.conj()
    if not left_side:           # x t = b  <=>  t^T x^T = b^T
        t, b = np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)
        is_lower = not is_lower
    try:
        x = np.linalg.solve(t, b)
    except np.linalg.LinAlgError:   # singular: substitution gives inf/NaN, as XLA
        x = _substitute(t, b, is_lower)
    if not left_side:
        x = np.swapaxes(x, -1, -2)
    return AL.ascontiguous(x, b.dtype)


def _ts_vector(a, b, left_side, lower, transpose_a, unit_diagonal, wd):
    """One right-hand side per matrix (real): BLAS-2 ``trsv``, three times faster than
    ``trsm`` on one column at n = 300. A right-side ``x op(a) = b`` is the left-side
    ``op(a)^T x^T = b^T``."""
    m = a.shape[-1]
    x = np.array(b, dtype=wd, order="C").reshape(-1, m)   # each solution, contiguous
    mats, flipped = _fortran_view(a.reshape((-1, m, m)).astype(wd, copy=False))
    trans = transpose_a if left_side else not transpose_a
    is_lower = lower
    if flipped:                                      # mats[i] = a[i]^T
        trans, is_lower = not trans, not lower
    trsv = _routine("trsv", wd)
    for i in range(x.shape[0]):
        r = trsv(mats[i], x[i], lower=int(is_lower), trans=int(trans),
                 diag=int(unit_diagonal), overwrite_x=1)
        if r is not x[i] and not np.shares_memory(r, x[i]):
            x[i] = r
    return x.reshape(b.shape).astype(b.dtype, copy=False)


def _many_tiny(x):
    """A stack of many tiny matrices: the vectorized NumPy impls beat one LAPACK call per
    matrix there (1000 4x4 LU factorizations: 0.35 ms against 1.5 ms; from 16x16 on,
    LAPACK wins)."""
    return x.shape[-1] <= 8 and math.prod(x.shape[:-2]) > 16


def _ts_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """BLAS's ``trsm`` on each matrix of the stack (a singular ``a`` gives inf/NaN, as
    XLA; LAPACK's ``trtrs`` would refuse it). The result is C-ordered: each ``x`` is
    solved as the Fortran-ordered ``x^T`` (``x^T op(a)^T = b^T`` for a left-side solve),
    and ``a`` is read in whichever of its two orientations needs no copy."""
    if AL.is_device(a) or AL.is_device(b) or _many_tiny(a):
        return _ts_generic(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                           conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    dtype = b.dtype
    wd = _lapack_dtype(dtype)
    m = a.shape[-1]
    if wd.kind == "f" and m and b.size and b.shape[-1 if left_side else -2] == 1:
        return _ts_vector(a, b, left_side, lower, transpose_a, unit_diagonal, wd)
    out = np.array(b, dtype=wd, order="C")           # overwritten by trsm, matrix by matrix
    if out.size == 0 or m == 0:
        return out.astype(dtype, copy=False)
    conj = conjugate_a and wd.kind == "c"
    # x^T is Fortran-ordered in out; the equation for it is on the other side, with op(a)^T
    side = 0 if not left_side else 1
    trans = not transpose_a                          # op(a)^T transposes a iff op(a) did not
    mats, flipped = _fortran_view(a.reshape((-1, m, m)).astype(wd, copy=False))
    if flipped:                                      # mats[i] = a[i]^T
        trans, is_lower = not trans, not lower
    else:
        is_lower = lower
    conj_only = conj and not trans                   # conj(M) y = c  <=>  M conj(y) = conj(c)
    code = (2 if conj else 1) if trans else 0
    xt = np.swapaxes(out.reshape((-1,) + out.shape[-2:]), -1, -2)
    if conj_only:
        np.conjugate(xt, out=xt)
    trsm = _routine("trsm", wd)
    one = wd.type(1)
    for i in range(xt.shape[0]):
        r = trsm(one, mats[i], xt[i], side=side, lower=is_lower, trans_a=code,
                 diag=int(unit_diagonal), overwrite_b=1)
        if r is not xt[i] and not np.shares_memory(r, xt[i]):
            xt[i] = r
    if conj_only:
        np.conjugate(xt, out=xt)
    return out.astype(dtype, copy=False)


triangular_solve_p = Primitive("triangular_solve", shape_rule=_ts_rule, impl=quiet(_ts_impl))


def _op(x, transpose_a, conjugate_a):
    if transpose_a:
        x = _mT(x)
    if conjugate_a and _is_complex(x):
        x = L.conj(x)
    return x


def _ts_jvp(primals, tangents, **p):
    a, b = primals
    da, db = tangents
    x = triangular_solve_p.bind(a, b, **p)
    out = None
    if db is not None:
        out = triangular_solve_p.bind(a, db, **p)
    if da is not None:
        da = _tril(da) if p["lower"] else _triu(da)
        if p["unit_diagonal"]:
            da = L.select(_eye_mask(da.shape), L.full(da.shape, 0, da.dtype), da)
        dop = _op(da, p["transpose_a"], p["conjugate_a"])
        rhs = _mm(dop, x) if p["left_side"] else _mm(x, dop)       # d(op a) x  or  x d(op a)
        t = L.neg(triangular_solve_p.bind(a, rhs, **p))
        out = t if out is None else L.add(out, t)
    return x, out


def _ts_transpose(ct, a, b, **p):
    from ..transforms.vjp import is_linear
    if is_linear(a):
        raise ValueError("triangular_solve: transpose with respect to a (it is not linear in a)")
    if ct is None:
        return [None, None]
    q = dict(p, transpose_a=not p["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **q)]


def _batch_operands(prim):
    """The batching rule of a primitive of two operands batched alike: both at axis 0."""
    def rule(vals, dims, size, **p):
        a, b = _batch_front(vals, dims, size)
        return prim.bind(a, b, **p), 0
    return rule


triangular_solve_p.jvp = _ts_jvp
triangular_solve_p.transpose = _ts_transpose
triangular_solve_p.batch = _batch_operands(triangular_solve_p)


def triangular_solve(a, b, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
    """Solve ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for triangular ``a``.

    ``op(a)`` is ``a``, ``a^T`` (``transpose_a``), ``conj(a)`` (``conjugate_a``) or ``a^H``
    (both); only the ``lower`` (else upper) triangle of ``a`` is read, and with
    ``unit_diagonal`` its diagonal is taken to be ones. ``a``: (..., m, m); ``b``:
    (..., m, n) for ``left_side``, else (..., n, m), with the same batch dims; a ``b`` of
    one rank less is one vector per matrix (..., m), as JAX."""
    a, b = to_array(a), to_array(b)
    vector = b.ndim == a.ndim - 1
    if vector:
        b = L.expand_dims(b, (b.ndim if left_side else b.ndim - 1,))
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side),
                                  lower=bool(lower), transpose_a=bool(transpose_a),
                                  conjugate_a=bool(conjugate_a),
                                  unit_diagonal=bool(unit_diagonal))
    if vector:
        out = L.squeeze(out, (out.ndim - 1 if left_side else out.ndim - 2,))
    return out


# --- linear_solve: a general square system, in one LAPACK call ------------------------------

def _ls_rule(a, b, *, transpose_a):
    check_matrix("linear_solve", a)
    if len(b.shape) < 2 or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"linear_solve: b must be (..., {a.shape[-1]}, K) with a's batch dims "
                         f"{a.shape[:-2]}, got {describe(a, b)}")
    return _sds(b.shape, b.dtype)


def _ls_impl(a, b, *, transpose_a):
    """``op(a) x = b`` (``op``: ``a``, or ``a^T`` with ``transpose_a``) by LAPACK's
    ``gesv`` per matrix (getrf and getrs in one call, as NumPy's ``solve``). A singular
    ``a`` (gesv's ``info > 0``), a device buffer or a stack of many tiny matrices goes
    through ``lu`` and two triangular solves instead, which give inf/NaN where ``a`` is
    singular (as JAX)."""
    n = a.shape[-1]
    if AL.is_device(a) or AL.is_device(b) or _many_tiny(a) or n == 0 or b.size == 0:
        return _ls_by_lu(a, b, transpose_a)
    wd = _lapack_dtype(b.dtype)
    op = np.swapaxes(a, -1, -2) if transpose_a else a
    mats = op.reshape((-1, n, n))
    rhs = b.reshape((-1,) + b.shape[-2:])
    out = np.empty(rhs.shape, wd)
    gesv = _routine("gesv", wd)
    for i in range(mats.shape[0]):
        _lu, _piv, x, info = gesv(mats[i].astype(wd, copy=False), rhs[i].astype(wd, copy=False))
        if info > 0:
            return _ls_by_lu(a, b, transpose_a)
        out[i] = x
    return out.reshape(b.shape).astype(b.dtype, copy=False)


def _ls_by_lu(a, b, transpose_a):
    lu_, _, perm = _lu_impl(a)
    if transpose_a:                      # a^T x = b: U^T L^T P x = b
        y = _ts_impl(lu_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=False,
                     unit_diagonal=False)
        z = _ts_impl(lu_, y, left_side=True, lower=True, transpose_a=True, conjugate_a=False,
                     unit_diagonal=True)
        inv = np.argsort(perm, axis=-1)
        return np.take_along_axis(z, inv[..., :, None], axis=-2)
    pb = np.take_along_axis(b, perm[..., :, None], axis=-2)
    y = _ts_impl(lu_, pb, left_side=True, lower=True, transpose_a=False, conjugate_a=False,
                 unit_diagonal=True)
    return _ts_impl(lu_, y, left_side=True, lower=False, transpose_a=False, conjugate_a=False,
                    unit_diagonal=False)


linear_solve_p = Primitive("linear_solve", shape_rule=_ls_rule, impl=quiet(_ls_impl))


def _ls_jvp(primals, tangents, *, transpose_a):
    a, b = primals
    da, db = tangents
    x = linear_solve_p.bind(a, b, transpose_a=transpose_a)
    rhs = db
    if da is not None:                   # d(op a) x moved to the right-hand side
        dop = _mT(da) if transpose_a else da
        t = L.neg(_mm(dop, x))
        rhs = t if rhs is None else L.add(rhs, t)
    if rhs is None:
        return x, None
    return x, linear_solve_p.bind(a, rhs, transpose_a=transpose_a)


def _ls_transpose(ct, a, b, *, transpose_a):
    from ..transforms.vjp import is_linear
    if is_linear(a):
        raise ValueError("linear_solve: transpose with respect to a (it is not linear in a)")
    if ct is None:
        return [None, None]
    # x = op(a)^-1 b is linear in b; its (unconjugated) transpose is op(a)^-T ct
    return [None, linear_solve_p.bind(a, ct, transpose_a=not transpose_a)]


linear_solve_p.jvp = _ls_jvp
linear_solve_p.transpose = _ls_transpose
linear_solve_p.batch = _batch_operands(linear_solve_p)


def linear_solve(a, b, *, transpose_a=False):
    """``x`` with ``a x = b`` (``a^T x = b`` with ``transpose_a``) for square ``a``
    (..., m, m) and ``b`` (..., m, k) with the same batch dims: one LAPACK ``gesv`` per
    matrix, differentiable in both (``fnx.numpy.linalg.solve`` and ``inv`` use it)."""
    return linear_solve_p.bind(to_array(a), to_array(b), transpose_a=bool(transpose_a))


# --- lu --------------------------------------------------------------------------------------

def _lu_rule(x):
    check_matrix("lu", x)
    batch, n = x.shape[:-2], x.shape[-1]
    return [_sds(x.shape, x.dtype), _sds(batch + (n,), np.int32),
            _sds(batch + (n,), np.int32)]


_LU_PANEL = 32


def _lu_generic(x):
    """``_lu_impl`` in NumPy calls that dispatch to a device buffer's library:
    partial-pivoting LU over the whole stack, blocked (right-looking, as LAPACK's
    getrf): each panel of 32 columns is eliminated a column at a time, pivoting on
    |re| + |im| for complex as getrf does and swapping whole rows; then the panel's rows
    of U come from one unit-lower solve and the trailing matrix takes one matmul update.
    A zero column stays zero (its pivot is taken as 1), as the unblocked form did."""
    n = x.shape[-1]
    batch = x.shape[:-2]
    a = AL.copy(x.reshape((math.prod(batch), n, n)))
    rows = AL.arange(a, a.shape[0])
    pivots = AL.zeros(a, (a.shape[0], n), np.int32)
    perm = np.tile(AL.arange(a, n, np.int32), (a.shape[0], 1))
    for k0 in range(0, n, _LU_PANEL):
        k1 = min(k0 + _LU_PANEL, n)
        for k in range(k0, k1):
            col = a[:, k:, k]
            mag = np.abs(col.real) + np.abs(col.imag) if a.dtype.kind == "c" else np.abs(col)
            p = k + np.argmax(mag, axis=1)
            pivots[:, k] = p
            a[rows, k], a[rows, p] = a[rows, p], a[rows, k]   # advanced indexing copies
            perm[rows, k], perm[rows, p] = perm[rows, p], perm[rows, k]
            piv = a[:, k, k]
            piv = np.where(piv == 0, a.dtype.type(1), piv)
            a[:, k + 1:, k] /= piv[:, None]
            a[:, k + 1:, k + 1:k1] -= a[:, k + 1:, k, None] * a[:, k, None, k + 1:k1]
        if k1 < n:
            unit_lower = np.tril(a[:, k0:k1, k0:k1], -1) + AL.eye(a, k1 - k0, a.dtype)
            a[:, k0:k1, k1:] = np.linalg.solve(unit_lower, a[:, k0:k1, k1:])
            a[:, k1:, k1:] -= a[:, k1:, k0:k1] @ a[:, k0:k1, k1:]
    return [a.reshape(x.shape), pivots.reshape(batch + (n,)), perm.reshape(batch + (n,))]


def _permutation_of_pivots(pivots, size):
    """The permutations of ``size`` rows that the row swaps ``pivots`` (..., k) (row
    ``i`` with row ``pivots[i]``, in order) make: LAPACK's ``laswp`` applied to
    0..size-1, one call per pivot vector (NumPy arrays in and out, int32)."""
    pivots = np.asarray(pivots)
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    flat = np.clip(pivots.reshape((-1, k)), 0, max(size - 1, 0)).astype(np.int32)
    out = np.empty((flat.shape[0], size), np.int32)
    out[...] = np.arange(size, dtype=np.int32)
    if size and k:
        laswp = _routine("laswp", np.dtype(np.float64))
        rows = np.arange(size, dtype=np.float64)[:, None]   # laswp copies it
        for i in range(flat.shape[0]):
            out[i] = laswp(rows, flat[i])[:, 0]
    return out.reshape(batch + (size,))


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation (..., permutation_size) int32 that the row swaps ``pivots``
    (..., k) of an LU decomposition make (row ``i`` swapped with row ``pivots[i]`` at step
    ``i``), as JAX's: ``lu``'s third output from its second. A host computation
    (``laswp`` through ``pure_callback``): it works under jit and vmap; integer, so it
    has no derivative."""
    from .callback import pure_callback
    pivots = L.convert_element_type(to_array(pivots), np.int32)
    size = int(permutation_size)
    if pivots.ndim < 1 or pivots.shape[-1] > size:
        raise ShapeError(f"lu_pivots_to_permutation: pivots must be (..., k) with k <= "
                         f"permutation_size = {size}, got {describe(pivots)}")
    shape = tuple(pivots.shape[:-1]) + (size,)
    return pure_callback(lambda p: _permutation_of_pivots(p, size),
                         _sds(shape, np.int32), pivots, vmap_method="expand_dims")


def _lu_impl(x):
    """LAPACK's ``getrf`` on each matrix of the stack, in place in one Fortran-ordered
    copy of ``x`` (``lu`` comes back as a transposed view of it, Fortran-ordered per
    matrix, as the ``trsm`` calls of ``triangular_solve`` read it without a copy). The
    pivots are getrf's (0-based); ``permutation`` is those row swaps applied to
    0..n-1 by ``laswp``. Singular matrices are factored all the same (getrf's
    ``info > 0`` says where ``U`` has a zero pivot; not an error here, as JAX)."""
    if AL.is_device(x) or _many_tiny(x):
        return _lu_generic(x)
    n = x.shape[-1]
    batch = x.shape[:-2]
    count = math.prod(batch)
    dtype = x.dtype
    wd = _lapack_dtype(dtype)
    buf = np.empty((count, n, n), wd)
    lu_ = np.swapaxes(buf, -1, -2)                   # lu_[i] Fortran-ordered
    lu_[...] = x.reshape((count, n, n))
    pivots = np.empty((count, n), np.int32)
    perm = np.empty((count, n), np.int32)
    if n:
        getrf, laswp = _routine("getrf", wd), _routine("laswp", wd)
        rows = np.arange(n, dtype=wd)[:, None]      # laswp copies it (no overwrite_a)
        for i in range(count):
            m = lu_[i]
            f, piv, _ = getrf(m, overwrite_a=1)
            if f is not m and not np.shares_memory(f, m):
                m[...] = f
            pivots[i] = piv
            perm[i] = laswp(rows, piv)[:, 0].real
    if wd != dtype:
        lu_ = lu_.astype(dtype)
    return [lu_.reshape(x.shape), pivots.reshape(batch + (n,)), perm.reshape(batch + (n,))]


lu_p = Primitive("lu", shape_rule=_lu_rule, impl=quiet(_lu_impl), multiple_results=True)


def permutation_matrix(perm, dtype):
    """P with P[..., i, j] = (perm[..., i] == j), so (P x)[i] = x[perm[i]]."""
    n = perm.shape[-1]
    shape = tuple(perm.shape) + (n,)
    nd = len(shape)
    p = L.broadcast_in_dim(perm, shape, tuple(range(nd - 1)))
    return L.convert_element_type(L.eq(p, L.broadcasted_iota(np.int32, shape, nd - 1)), dtype)


def permute_rows(x, perm):
    """``x[..., perm[..., i], :]``: the rows of each matrix of ``x`` (..., m, k) in the
    order of the permutations ``perm`` (..., m) (int, ``x``'s batch dims): ``P x`` for
    ``P = permutation_matrix(perm)``, as one gather (linear in ``x``; its transpose is a
    scatter-add) instead of a product with ``P``."""
    from .indexing import gather_p
    batch = tuple(x.shape[:-2])
    idx = [L.broadcasted_iota(np.int32, batch + (1,), d) for d in range(len(batch))]
    idx.append(perm)
    spec = tuple(("a", i) for i in range(len(idx))) + (("s", 0, x.shape[-1], 1),)
    return gather_p.bind(x, *idx, spec=spec)


def matrix_diagonal(x):
    """The diagonals of the matrices in ``x``'s last two axes, as (..., min(m, n)): one
    gather (``fnx.numpy.diagonal`` without its axis handling)."""
    from .indexing import gather_p
    k = min(x.shape[-2:])
    rows = to_array(np.arange(k, dtype=np.int32))
    spec = tuple(("s", 0, d, 1) for d in x.shape[:-2]) + (("a", 0), ("a", 1))
    return gather_p.bind(x, rows, rows, spec=spec)


def _lu_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    lu_, piv, perm = lu_p.bind(x)
    if dx is None:
        return [lu_, piv, perm], [None, None, None]
    pdx = permute_rows(_cast(dx, x.dtype), perm)
    t = triangular_solve(lu_, pdx, left_side=True, lower=True, unit_diagonal=True)
    t = triangular_solve(lu_, t, left_side=False, lower=False)            # L^-1 P dA U^-1
    lower = L.add(_tril(lu_, -1), _eye(lu_.shape, lu_.dtype))
    dlu = L.add(_mm(lower, _tril(t, -1)), _mm(_triu(t), _triu(lu_)))
    return [lu_, piv, perm], [dlu, None, None]


lu_p.jvp = _lu_jvp
_batch_unary(lu_p)


def lu(x):
    """LU decomposition with partial pivoting of square matrices:
    ``(lu, pivots, permutation)`` with ``x[..., permutation, :] = L @ U``, ``L`` the unit
    lower triangle of ``lu`` and ``U`` its upper triangle; ``pivots[i]`` is the row swapped
    with row ``i`` at step ``i`` (int32)."""
    return tuple(lu_p.bind(to_array(x)))


# --- qr --------------------------------------------------------------------------------------

def _qr_rule(x, *, full_matrices):
    check_matrix("qr", x, square=False)
    m, n = x.shape[-2:]
    k = m if full_matrices else min(m, n)
    return [_sds(x.shape[:-2] + (m, k), x.dtype), _sds(x.shape[:-2] + (k, n), x.dtype)]


def _qr_impl(x, *, full_matrices):
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q.astype(x.dtype, copy=False), r.astype(x.dtype, copy=False)]


qr_p = Primitive("qr", shape_rule=_qr_rule, impl=quiet(_qr_impl), multiple_results=True)


def _qr_tall_jvp(q, r, dx):
    """Tangents of a reduced QR with m >= n (r square, invertible)."""
    dx_rinv = triangular_solve(r, dx, left_side=False, lower=False)        # dA R^-1
    qt = _mm(mH(q), dx_rinv)
    low = _tril(qt, -1)
    omega = L.sub(low, mH(low))                                            # skew-Hermitian
    if _is_complex(qt):     # keep diag(R) real (LAPACK's convention): imaginary diagonal
        d = _diag_part(qt)
        omega = L.add(omega, L.sub(d, L.convert_element_type(L.real(d), qt.dtype)))
    dq = L.add(_mm(q, L.sub(omega, qt)), dx_rinv)
    dr = _mm(L.sub(qt, omega), r)
    return dq, dr


def _qr_jvp(primals, tangents, *, full_matrices):
    (x,), (dx,) = primals, tangents
    q, r = qr_p.bind(x, full_matrices=full_matrices)
    if dx is None:
        return [q, r], [None, None]
    m, n = x.shape[-2:]
    if m > n and full_matrices:
        raise NotImplementedError(
            f"qr: the derivative of a full_matrices QR of tall matrices ({describe(x)}) is "
            "not unique (the extra columns of q are arbitrary); use full_matrices=False")
    if m >= n:
        dq, dr = _qr_tall_jvp(q, r, dx)
        return [q, r], [dq, dr]
    # wide: x = q [r1 r2] with q r1 = x1 a square QR; dr2 = q^H (dx2 - dq r2)
    nd = x.ndim
    lead = tuple(x.shape[:-2])

    def cols(a, lo, hi):
        return L.slice(a, (0,) * (nd - 1) + (lo,), lead + (a.shape[-2], hi))

    r1, r2 = cols(r, 0, m), cols(r, m, n)
    dq, dr1 = _qr_tall_jvp(q, r1, cols(dx, 0, m))
    dr2 = _mm(mH(q), L.sub(cols(dx, m, n), _mm(dq, r2)))
    return [q, r], [dq, L.concatenate([dr1, dr2], nd - 1)]


qr_p.jvp = _qr_jvp
_batch_unary(qr_p)


def qr(x, *, full_matrices=True):
    """QR decomposition ``x = q r``: ``q`` (..., m, k) with orthonormal columns and ``r``
    (..., k, n) upper triangular, k = m (``full_matrices``) or min(m, n)."""
    return tuple(qr_p.bind(to_array(x), full_matrices=bool(full_matrices)))


# --- eigh ------------------------------------------------------------------------------------

def _eigh_rule(x, *, lower):
    check_matrix("eigh", x)
    return [_sds(x.shape, x.dtype), _sds(x.shape[:-1], real_dtype(x.dtype))]


def _eigh_impl(x, *, lower):
    w, v = np.linalg.eigh(x, UPLO="L" if lower else "U")
    return [v.astype(x.dtype, copy=False), w.astype(real_dtype(x.dtype), copy=False)]


eigh_p = Primitive("eigh", shape_rule=_eigh_rule, impl=quiet(_eigh_impl), multiple_results=True)


def _gap_inverse(w, plus=None):
    """F with F[..., i, j] = 1 / (w_j - w_i) off the diagonal (1 / (w_j^2 - w_i^2) for
    ``plus``: singular values), 0 on it."""
    n = w.shape[-1]
    wj, wi = _col(w, n), _row(w, n)
    diff = L.sub(wj, wi) if plus is None else L.mul(L.sub(wj, wi), L.add(wj, wi))
    eye = _eye_mask(diff.shape)
    one = L.convert_element_type(eye, diff.dtype)
    return L.select(eye, L.full(diff.shape, 0, diff.dtype), L.div(1.0, L.add(diff, one)))


def _eigh_jvp(primals, tangents, *, lower):
    (x,), (dx,) = primals, tangents
    v, w = eigh_p.bind(x, lower=lower)
    if dx is None:
        return [v, w], [None, None]
    da = _hermitian_from(dx, lower)
    vdv = _mm(mH(v), _mm(da, v))
    dw = _diag(vdv)
    if _is_complex(dw):
        dw = L.real(dw)
    f = L.convert_element_type(_gap_inverse(w), x.dtype)
    dv = _mm(v, L.mul(f, vdv))
    return [v, w], [dv, dw]


eigh_p.jvp = _eigh_jvp
_batch_unary(eigh_p)


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
         subset_by_index=None, implementation=None):
    """Eigendecomposition of Hermitian matrices: ``(v, w)`` with ``x = v diag(w) v^H``,
    ``w`` ascending (real; always sorted, whatever ``sort_eigenvalues``).
    ``symmetrize_input``: decompose ``(x + x^H) / 2``; else only the ``lower`` (else
    upper) triangle of ``x`` is read. ``subset_by_index=(start, end)``: the eigenpairs
    ``start`` to ``end - 1`` only. ``implementation`` (an ``EighImplementation``) is
    accepted; LAPACK runs whatever it is."""
    x = to_array(x)
    check_matrix("eigh", x)
    if implementation is not None and not isinstance(implementation, EighImplementation):
        raise ValueError(f"eigh: implementation must be an EighImplementation or None, got "
                         f"{implementation!r}")
    lo, hi = _subset("eigh", subset_by_index, x.shape[-1])
    if symmetrize_input:
        x = L.mul(L.add(x, mH(x)), 0.5)
    v, w = eigh_p.bind(x, lower=bool(lower))
    return _last_slice(v, lo, hi, -1), _last_slice(w, lo, hi, -1)


# --- svd -------------------------------------------------------------------------------------

def _svd_rule(x, *, full_matrices, compute_uv):
    check_matrix("svd", x, square=False)
    b, (m, n) = x.shape[:-2], x.shape[-2:]
    k = min(m, n)
    s = _sds(b + (k,), real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [_sds(b + (m, ku), x.dtype), s, _sds(b + (kv, n), x.dtype)]


def _svd_impl(x, *, full_matrices, compute_uv):
    rd = real_dtype(x.dtype)
    if not compute_uv:
        return [np.linalg.svd(x, compute_uv=False).astype(rd, copy=False)]
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    return [u.astype(x.dtype, copy=False), s.astype(rd, copy=False),
            vh.astype(x.dtype, copy=False)]


svd_p = Primitive("svd", shape_rule=_svd_rule, impl=quiet(_svd_impl), multiple_results=True)


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (x,), (dx,) = primals, tangents
    outs = svd_p.bind(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if dx is None:
        return outs, [None] * len(outs)
    m, n = x.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            f"svd: the derivative of a full_matrices SVD of non-square matrices "
            f"({describe(x)}) is not unique (the extra singular vectors are arbitrary); "
            "use full_matrices=False")
    if compute_uv:   # full_matrices here only with m == n: the reduced SVD already
        u, s, vh = outs
    else:
        u, s, vh = svd_p.bind(x, full_matrices=False, compute_uv=True)
    v = mH(vh)
    ds_mat = _mm(mH(u), _mm(dx, v))                    # U^H dA V, (..., k, k)
    ds = _diag(ds_mat)
    if _is_complex(ds):
        ds = L.real(ds)
    if not compute_uv:
        return outs, [ds]
    k = s.shape[-1]
    dt = x.dtype
    sc = L.convert_element_type(s, dt)
    f = L.convert_element_type(_gap_inverse(s, plus=True), dt)
    dss = L.mul(ds_mat, _col(sc, k))                   # dS diag(s)
    sds = L.mul(_row(sc, k), ds_mat)                   # diag(s) dS
    zero = L.eq(s, 0.0)
    s_inv = L.convert_element_type(
        L.select(zero, L.full(s.shape, 0, s.dtype),
                 L.div(1.0, L.add(s, L.convert_element_type(zero, s.dtype)))), dt)
    du_core = L.mul(f, L.add(dss, mH(dss)))
    if _is_complex(ds_mat):  # the imaginary diagonal of U^H dA V goes to dU (gauge: dV's is 0)
        d = _diag_part(ds_mat)
        imag = L.sub(d, L.convert_element_type(L.real(d), dt))
        du_core = L.add(du_core, L.mul(imag, _col(s_inv, k)))
    du = _mm(u, du_core)
    dv = _mm(v, L.mul(f, L.add(sds, mH(sds))))
    if m > k:        # the part of dA V outside span(U)
        dav = _mm(dx, v)
        du = L.add(du, L.mul(L.sub(dav, _mm(u, _mm(mH(u), dav))), _col(s_inv, m)))
    if n > k:
        dahu = _mm(mH(dx), u)
        dv = L.add(dv, L.mul(L.sub(dahu, _mm(v, _mm(vh, dahu))), _col(s_inv, n)))
    return outs, [du, ds, mH(dv)]


svd_p.jvp = _svd_jvp
_batch_unary(svd_p)


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """Singular value decomposition ``x = u diag(s) vh``: ``(u, s, vh)``, or ``s`` alone
    (descending, real) when not ``compute_uv``. ``subset_by_index=(start, end)``: the
    singular triplets ``start`` to ``end - 1`` only (not with ``full_matrices``, as JAX).
    ``algorithm`` (an ``SvdAlgorithm``) is accepted; LAPACK runs whatever it is."""
    x = to_array(x)
    if algorithm is not None and not isinstance(algorithm, SvdAlgorithm):
        raise ValueError(f"svd: algorithm must be an SvdAlgorithm or None, got {algorithm!r}")
    check_matrix("svd", x, square=False)
    k = min(x.shape[-2:])
    lo, hi = _subset("svd", subset_by_index, k)
    if (lo, hi) != (0, k):
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        full_matrices = False
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return _last_slice(outs[0], lo, hi, -1)
    u, s, vh = outs
    if (lo, hi) == (0, k):
        return u, s, vh
    return (_last_slice(u, lo, hi, -1), _last_slice(s, lo, hi, -1),
            _last_slice(vh, lo, hi, -2))

