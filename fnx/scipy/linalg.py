"""``fnx.scipy.linalg``: JAX's ``jax.scipy.linalg`` (SciPy's signatures and conventions).

Everything is built on the primitives of ``fnx.lax.linalg`` (``cholesky``,
``triangular_solve``, ``lu``, ``qr``, ``eigh``, ``svd``) and ``fnx.numpy``, so it
differentiates, jits and vmaps, and takes stacks of matrices in the last two axes.
SciPy's conventions hold where they differ from NumPy's: ``cholesky`` returns the
*upper* factor by default and reads only the triangle it is asked for; ``lu`` returns
``(p, l, u)`` with ``a = p @ l @ u``; ``qr`` defaults to ``mode='full'`` and returns
tuples (``(r,)`` for ``mode='r'``); ``eigh`` returns ``(w, v)``. ``overwrite_*``,
``check_finite``, ``turbo``, ``lwork`` and ``lapack_driver`` are accepted and ignored,
as in JAX.

Where JAX raises, fnx does more where it is cheap: ``eigh`` takes ``b`` (the generalized
problem ``a v = w b v``, type 1, through the Cholesky factor of ``b``); ``polar`` takes
any shape and side (through the SVD; JAX's QDWH iteration refuses some); ``lu`` of
rectangular matrices gives LAPACK's factors. ``hessenberg`` is Householder with LAPACK's
conventions in fnx ops (differentiable). Done differently from JAX: ``solve_sylvester``
solves the Kronecker-product system (up to 4096 unknowns) instead of Bartels-Stewart, and
``sqrtm`` and ``funm`` go through an eigendecomposition instead of a Schur decomposition,
so they need a diagonalizable matrix (``funm`` has no derivative:
``fnx.numpy.linalg.eig`` has none; ``sqrtm``'s comes from the Sylvester equation). Not
provided: ``schur``, ``rsf2csf``, ``qr(pivoting=True)``, ``eigh(eigvals=...)``,
rectangular ``lu_factor``.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..lax import linalg as lax_linalg
from ..numpy.util import compiled_when_eager, promote
from ..transforms.vjp import is_linear

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "lu", "lu_factor",
           "lu_solve", "solve", "inv", "det", "eigh", "eigh_tridiagonal", "qr", "svd", "polar",
           "expm", "expm_frechet", "block_diag", "toeplitz", "hankel", "circulant",
           "companion", "leslie", "fiedler", "convolution_matrix", "hilbert", "pascal",
           "helmert", "dft", "qr_multiply", "solve_sylvester", "invhilbert", "invpascal",
           "sqrtm", "funm", "hadamard", "fiedler_companion", "hessenberg"]


def _matrix(name, a, square=True):
    (a,) = promote(name, a, to_inexact=True)
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        what = "square matrices" if square else "matrices"
        raise ShapeError(f"{name}: needs a stack of {what} in the last two axes, got shape "
                         f"{a.shape}")
    return a


def _mH(x):
    x = fnp.swapaxes(x, -1, -2)
    return fnp.conj(x) if x.dtype.kind == "c" else x


def _rhs(name, a, b):
    """``b`` as (..., n, k) broadcast with ``a``'s batch dims, and whether it was one
    vector ((n,), as SciPy; a stack of vectors is ``b[..., None]``)."""
    a, b = promote(name, a, b, to_inexact=True)
    n = a.shape[-1]
    vector = b.ndim == 1
    if b.ndim == 0 or (b.shape[0] if vector else b.shape[-2]) != n:
        raise ShapeError(f"{name}: b must have shape ({n},) or (..., {n}, K) to match a of "
                         f"shape {a.shape}; got b of shape {b.shape}")
    if vector:
        b = b[:, None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return (fnp.broadcast_to(a, batch + a.shape[-2:]), fnp.broadcast_to(b, batch + b.shape[-2:]),
            vector)


# --- Cholesky ---------------------------------------------------------------------------

def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of Hermitian positive definite ``a``: upper ``u`` with
    ``a = u^H u`` (default, as SciPy), or lower ``l`` with ``a = l l^H``. Only that
    triangle of ``a`` is read; a matrix that is not positive definite gives NaNs."""
    del overwrite_a, check_finite
    a = _matrix("cholesky", a)
    if lower:
        return lax_linalg.cholesky(a, symmetrize_input=False)
    return _mH(lax_linalg.cholesky(_mH(a), symmetrize_input=False))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve``: ``c`` is ``cholesky(a, lower)`` (zeros in the
    other triangle, as JAX; SciPy leaves it unspecified)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` given ``cho_factor(a)``."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    return _cho_solve(c, b, bool(lower))


@compiled_when_eager(static_argnums=(2,))
def _cho_solve(c, b, lower):
    c = _matrix("cho_solve", c)
    c, b, vector = _rhs("cho_solve", c, b)
    if lower:    # l l^H x = b
        y = lax_linalg.triangular_solve(c, b, left_side=True, lower=True)
        x = lax_linalg.triangular_solve(c, y, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=True)
    else:        # u^H u x = b
        y = lax_linalg.triangular_solve(c, b, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=True)
        x = lax_linalg.triangular_solve(c, y, left_side=True, lower=False)
    return x[..., 0] if vector else x


# --- triangular solves ------------------------------------------------------------------

_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """Solve ``op(a) x = b`` for triangular ``a``, ``op`` per ``trans``: 0/'N' (``a``),
    1/'T' (``a^T``), 2/'C' (``a^H``). Only the ``lower`` (default: upper) triangle is
    read; ``unit_diagonal`` takes the diagonal to be ones. ``b``: (n,) or (..., n, k)."""
    del overwrite_b, debug, check_finite
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}")
    transpose, conjugate = _TRANS[trans]
    a = _matrix("solve_triangular", a)
    a, b, vector = _rhs("solve_triangular", a, b)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose,
                                    conjugate_a=conjugate, unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


# --- LU -----------------------------------------------------------------------------------

def _perm_matrix_t(perm, dtype):
    """The transpose of ``_perm_matrix``: ``p[..., j, i] = (perm[..., i] == j)`` (SciPy's
    ``p`` with ``a = p @ l @ u``), as one broadcast and compare."""
    m = perm.shape[-1]
    shape = tuple(perm.shape[:-1]) + (m, m)
    nd = len(shape)
    cols = lax.broadcast_in_dim(perm, shape, tuple(range(nd - 2)) + (nd - 1,))
    rows = lax.broadcasted_iota(perm.dtype, shape, nd - 2)
    return lax.convert_element_type(lax.eq(cols, rows), dtype)


@functools.lru_cache(maxsize=4)
def _tri_masks(m, n, k, dtype):
    """Read-only constants of ``_tri_split`` for one shape and dtype (kept for the next
    eager call: building them costs as much as the selects)."""
    strict, eye = np.tri(m, k, -1, dtype=bool), np.eye(m, k, dtype=dtype)
    upper = ~np.tri(k, n, -1, dtype=bool)
    for c in (strict, eye, upper):
        c.flags.writeable = False
    return strict, eye, upper


def _tri_split(lu_, m, n, k):
    """``(l, u)`` of a packed ``lu`` (..., m, n): ``l`` (..., m, k) unit lower triangular,
    ``u`` (..., k, n) upper triangular; one select each, against constant masks."""
    shape = tuple(lu_.shape[:-2])
    low = lu_ if n == k else lu_[..., :, :k]
    up = lu_ if m == k else lu_[..., :k, :]
    strict, eye, upper = _tri_masks(m, n, k, np.dtype(lu_.dtype))
    zeros = np.broadcast_to(np.zeros((), lu_.dtype), shape + (k, n))
    l_ = lax.select_n(fnp.asarray(np.broadcast_to(strict, shape + (m, k))),
                      fnp.asarray(np.broadcast_to(eye, shape + (m, k))), low)
    u = lax.select_n(fnp.asarray(np.broadcast_to(upper, shape + (k, n))), fnp.asarray(zeros),
                     up)
    return l_, u


def _lu_any(a):
    """(lu, perm) with ``a[perm] = L U`` for square or rectangular ``a``: a rectangular
    matrix is padded to a square one whose LU holds ``a``'s (``[a | 0; I]`` columns for a
    tall ``a``, ``[a; 0 I]`` rows for a wide one: the pivots of ``a``'s own columns never
    fall on the padding, which is zero there)."""
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    if m == n:
        lu_, _, perm = lax_linalg.lu(a)
        return lu_, perm
    if m < n:   # wide: rows [0 I] under a (rows m.. of the n x n identity)
        pad = fnp.broadcast_to(fnp.eye(n, dtype=a.dtype)[m:], batch + (n - m, n))
        lu_, _, perm = lax_linalg.lu(fnp.concatenate([a, pad], axis=-2))
        return lu_[..., :m, :], perm[..., :m]
    # tall: columns [0; I] right of a (columns n.. of the m x m identity). The padding's
    # own steps swap rows below n as well; undo those so that the rows of l come in the
    # order of a's n steps alone (LAPACK's getrf on a)
    pad = fnp.broadcast_to(fnp.eye(m, dtype=a.dtype)[:, n:], batch + (m, m - n))
    lu_, piv, perm = lax_linalg.lu(fnp.concatenate([a, pad], axis=-1))
    perm_n = lax_linalg.lu_pivots_to_permutation(piv[..., :n], m)
    rows = fnp.take_along_axis(fnp.argsort(perm, axis=-1), perm_n, axis=-1)
    return lax_linalg.permute_rows(lu_[..., :, :n], rows), perm_n


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """LU decomposition with partial pivoting of (m, n) matrices: ``(p, l, u)`` with
    ``a = p @ l @ u``, ``p`` (m, m) a permutation matrix (``a``'s dtype), ``l`` (m, k) unit
    lower triangular, ``u`` (k, n) upper triangular, ``k = min(m, n)``; or
    ``(p @ l, u)`` with ``permute_l``."""
    del overwrite_a, check_finite
    return _lu(a, bool(permute_l))


@compiled_when_eager(static_argnums=(1,))
def _lu(a, permute_l):
    a = _matrix("lu", a, square=False)
    m, n = a.shape[-2:]
    k = min(m, n)
    lu_, perm = _lu_any(a)
    l_, u = _tri_split(lu_, m, n, k)
    if permute_l:    # p @ l: row perm[i] of the result is row i of l
        inverse = fnp.argsort(perm, axis=-1).astype(perm.dtype)
        return lax_linalg.permute_rows(l_, inverse), u
    return _perm_matrix_t(perm, a.dtype), l_, u


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``(lu, piv)`` of square matrices as LAPACK's getrf: ``lu`` holds ``l`` (unit
    diagonal implied) and ``u``; row ``i`` was swapped with row ``piv[i]`` (int32) at
    step ``i``."""
    del overwrite_a, check_finite
    a = _matrix("lu_factor", a)
    lu_, piv, _ = lax_linalg.lu(a)
    return lu_, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve ``op(a) x = b`` given ``lu_factor(a)``; ``trans``: 0 (``a``), 1 (``a^T``),
    2 (``a^H``). As LAPACK's getrs: the pivots' row swaps (as one permutation, from
    ``lax.linalg.lu_pivots_to_permutation``) and two triangular solves."""
    del overwrite_b, check_finite
    lu_, piv = lu_and_piv
    lu_ = _matrix("lu_solve", lu_)
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    n = lu_.shape[-1]
    lu_, b, vector = _rhs("lu_solve", lu_, b)
    piv = fnp.broadcast_to(fnp.asarray(piv).astype(np.int32), lu_.shape[:-1])
    perm = lax_linalg.lu_pivots_to_permutation(piv, n)
    ts = lax_linalg.triangular_solve
    if trans == 0:     # l u x = b[perm]
        y = ts(lu_, lax_linalg.permute_rows(b, perm), left_side=True, lower=True,
               unit_diagonal=True)
        x = ts(lu_, y, left_side=True, lower=False)
    else:              # u^T l^T (P x) = b, P x = x[perm]: x = y[perm^-1]
        conj = trans == 2
        y = ts(lu_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
        y = ts(lu_, y, left_side=True, lower=True, transpose_a=True, conjugate_a=conj,
               unit_diagonal=True)
        inverse = fnp.argsort(perm, axis=-1).astype(perm.dtype)
        x = lax_linalg.permute_rows(y, inverse)
    return x[..., 0] if vector else x


# --- solve, inv, det ----------------------------------------------------------------------

def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """Solve ``a x = b``. ``assume_a``: 'gen', 'sym' or 'her' (LU with partial pivoting),
    'pos' (Cholesky, reading the ``lower`` or upper triangle). ``b``: (n,) or
    (..., n, k), its batch dims broadcasting with ``a``'s."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', got "
                         f"{assume_a!r}")
    a = _matrix("solve", a)
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    a2, b2, vector = _rhs("solve", a, b)
    x = fnp.linalg.solve(a2, b2)
    return x[..., 0] if vector else x


def inv(a, overwrite_a=False, check_finite=True):
    """The inverse of square matrices (through an LU decomposition)."""
    return fnp.linalg.inv(_matrix("inv", a))


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of square matrices (through an LU decomposition)."""
    return fnp.linalg.det(_matrix("det", a))


# --- eigh, qr, svd --------------------------------------------------------------------------

def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):
    """Eigenvalues (ascending) and eigenvectors (columns) of Hermitian ``a``: ``(w, v)``,
    or ``w`` with ``eigvals_only``. As JAX, ``a`` is symmetrized (``(a + a^H) / 2``), so
    ``lower`` changes nothing. With ``b`` (Hermitian positive definite), the generalized
    problem ``a v = w b v`` (``type=1``; JAX raises), with ``v^H b v = I``."""
    del overwrite_a, overwrite_b, turbo, check_finite
    if eigvals is not None:
        raise NotImplementedError("eigh: eigvals (a subset of eigenvalues) is not supported "
                                  "(as in JAX); slice the full result instead")
    a = _matrix("eigh", a)
    if b is None:
        v, w = lax_linalg.eigh(a, lower=lower)
        return w if eigvals_only else (w, v)
    if type != 1:
        raise NotImplementedError(f"eigh: only type=1 (a v = w b v) is supported, got "
                                  f"type={type}")
    a, b = promote("eigh", a, _matrix("eigh", b), to_inexact=True)
    if b.shape[-2:] != a.shape[-2:]:
        raise ShapeError(f"eigh: b must have a's matrix shape {a.shape[-2:]}, got {b.shape}")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = fnp.broadcast_to(a, batch + a.shape[-2:])
    chol = fnp.broadcast_to(lax_linalg.cholesky(b), a.shape)   # b = l l^H
    ts = lax_linalg.triangular_solve
    c = ts(chol, a, left_side=True, lower=True)                                  # l^-1 a
    c = ts(chol, c, left_side=False, lower=True, transpose_a=True, conjugate_a=True)  # .. l^-H
    y, w = lax_linalg.eigh(c)
    if eigvals_only:
        return w
    v = ts(chol, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
    return w, v


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """QR decomposition: ``mode='full'`` (``q`` (m, m)), 'economic' (``q`` (m, k)), 'r'
    (``(r,)``, a one-element tuple as SciPy); returns ``(q, r)`` otherwise."""
    del overwrite_a, lwork, check_finite
    if pivoting:
        raise NotImplementedError("qr: pivoting=True (column-pivoted QR) is not supported "
                                  "in fnx")
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"qr: mode must be 'full', 'r' or 'economic', got {mode!r}")
    a = _matrix("qr", a, square=False)
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """``(u, s, vh)`` with ``a = u @ diag(s) @ vh`` (``s`` descending), or ``s``."""
    del overwrite_a, check_finite
    if lapack_driver not in ("gesdd", "gesvd"):
        raise ValueError(f"svd: lapack_driver must be 'gesdd' or 'gesvd', got "
                         f"{lapack_driver!r}")
    a = _matrix("svd", a, square=False)
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """Eigenvalues (ascending) and, unless ``eigvals_only``, eigenvectors of the symmetric
    tridiagonal matrix with diagonal ``d`` (n,) and off-diagonal ``e`` (n - 1,) (through
    ``eigh`` of the assembled matrix). ``select``: 'a' (all) or 'i' (the eigenvalues
    with indices ``select_range = (lo, hi)``, inclusive, static ints); 'v' (a value
    range, a data-dependent count) is not supported. ``tol`` and ``key`` are accepted
    and ignored."""
    del tol, key
    d, e = promote("eigh_tridiagonal", d, e, to_inexact=True)
    if d.ndim != 1 or e.shape != (max(d.shape[0] - 1, 0),):
        raise ShapeError(f"eigh_tridiagonal: d must be 1-D (n,) and e (n - 1,); got d "
                         f"{d.shape}, e {e.shape}")
    if select not in ("a", "i"):
        raise NotImplementedError(f"eigh_tridiagonal: select={select!r} is not supported "
                                  "('a' or 'i'; a value range has a data-dependent size)")
    n = d.shape[0]
    ec = fnp.conj(e) if e.dtype.kind == "c" else e
    m = _band(d, 0, n) + _band(e, -1, n) + _band(ec, 1, n)
    v, w = lax_linalg.eigh(m)
    if select == "i":
        lo, hi = (0, n - 1) if select_range is None else (int(select_range[0]),
                                                          int(select_range[1]))
        w, v = w[lo:hi + 1], v[:, lo:hi + 1]
    return w if eigvals_only else (w, v)


def _band(v, k, n):
    """The n x n matrix with ``v`` on diagonal ``k`` (0, -1 or 1) and zeros elsewhere."""
    if v.shape[0] < n:
        v = fnp.concatenate([v, fnp.zeros((n - v.shape[0],), dtype=v.dtype)])
    eye = fnp.eye(n, k=k, dtype=v.dtype)
    return eye * (v[:, None] if k > 0 else v[None, :])


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """The polar decomposition ``a = u p`` (``side='right'``) or ``a = p u`` ('left'):
    ``u`` has orthonormal columns (rows), ``p`` is Hermitian positive semidefinite. From
    the SVD ``a = U S V^H``: ``u = U V^H``, ``p = V S V^H`` (right) or ``U S U^H`` (left),
    for every shape (``method``, ``eps`` and ``max_iterations`` are accepted; JAX's
    'qdwh' refuses some shapes)."""
    del eps, max_iterations
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"polar: method must be 'qdwh' or 'svd', got {method!r}")
    a = _matrix("polar", a, square=False)
    u_, s_, vh = lax_linalg.svd(a, full_matrices=False)
    u = fnp.matmul(u_, vh)
    sc = s_.astype(a.dtype)
    if side == "right":
        p = fnp.matmul(_mH(vh) * sc[..., None, :], vh)
    else:
        p = fnp.matmul(u_ * sc[..., None, :], _mH(u_))
    return u, p


# --- expm ---------------------------------------------------------------------------------

# Pade (13, 13) coefficients and the 1-norm up to which it is accurate to double precision
# without scaling (Higham, "The scaling and squaring method for the matrix exponential
# revisited", SIAM J. Matrix Anal. Appl. 26 (2005)). float32 runs the (7, 7) approximant.
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152
_PADE7 = (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.)
_THETA7 = 3.925724783138660   # float32: 7 reaches single precision up to here


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential by scaling and squaring: ``A`` is scaled by ``2^-s`` so its
    1-norm is at most theta (``s <= max_squarings``), its Pade approximant taken (degree
    13 in float64, 7 in float32), and squared ``s`` times (a ``fori_loop`` of
    ``max_squarings`` steps that squares only while ``i < s``, so it differentiates).
    ``upper_triangular`` is accepted for JAX compatibility (the result is the same)."""
    del upper_triangular
    A = _matrix("expm", A)
    n = A.shape[-1]
    wide = np.finfo(A.real.dtype if A.dtype.kind == "c" else A.dtype).bits >= 64
    coef, theta = (_PADE13, _THETA13) if wide else (_PADE7, _THETA7)
    norm = fnp.max(fnp.sum(fnp.abs(A), axis=-2), axis=-1)
    s = fnp.ceil(fnp.log2(fnp.maximum(norm, 1e-30) / theta))
    s = lax.stop_gradient(fnp.clip(s, 0, max_squarings))
    scale = fnp.exp2(-s).astype(A.dtype)[..., None, None]
    X = A * scale
    eye = fnp.broadcast_to(fnp.eye(n, dtype=A.dtype), A.shape)
    X2 = fnp.matmul(X, X)
    if wide:
        X4 = fnp.matmul(X2, X2)
        X6 = fnp.matmul(X4, X2)
        c = coef
        u = fnp.matmul(X6, c[13] * X6 + c[11] * X4 + c[9] * X2) \
            + c[7] * X6 + c[5] * X4 + c[3] * X2 + c[1] * eye
        U = fnp.matmul(X, u)
        V = fnp.matmul(X6, c[12] * X6 + c[10] * X4 + c[8] * X2) \
            + c[6] * X6 + c[4] * X4 + c[2] * X2 + c[0] * eye
    else:
        X4 = fnp.matmul(X2, X2)
        X6 = fnp.matmul(X4, X2)
        c = coef
        U = fnp.matmul(X, c[7] * X6 + c[5] * X4 + c[3] * X2 + c[1] * eye)
        V = c[6] * X6 + c[4] * X4 + c[2] * X2 + c[0] * eye
    R = fnp.linalg.solve(V - U, V + U)

    def square(i, r):
        keep = (i < s)[..., None, None]
        return fnp.where(keep, fnp.matmul(r, r), r)

    return lax.fori_loop(0, int(max_squarings), square, R)


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Frechet derivative ``L(A, E)`` of the matrix exponential at ``A`` in the
    direction ``E`` (the upper right block of ``expm([[A, E], [0, A]])``), with
    ``expm(A)`` first when ``compute_expm``: ``(expm(A), L)`` or ``L``."""
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"expm_frechet: method must be None, 'SPS' or 'blockEnlarge', got "
                         f"{method!r}")
    A, E = promote("expm_frechet", A, E, to_inexact=True)
    A, E = _matrix("expm_frechet", A), _matrix("expm_frechet", E)
    if A.shape != E.shape:
        raise ShapeError(f"expm_frechet: A and E must have one shape, got {A.shape} and "
                         f"{E.shape}")
    n = A.shape[-1]
    top = fnp.concatenate([A, E], axis=-1)
    bottom = fnp.concatenate([fnp.zeros_like(A), A], axis=-1)
    big = expm(fnp.concatenate([top, bottom], axis=-2))
    L = big[..., :n, n:]
    return (big[..., :n, :n], L) if compute_expm else L


# --- constructors -------------------------------------------------------------------------

def block_diag(*arrs):
    """The block diagonal matrix of ``arrs`` (scalars and 1-D arrays are 1-row blocks),
    in their promoted dtype."""
    if not arrs:
        return fnp.zeros((1, 0))
    arrs = promote("block_diag", *arrs)
    blocks = []
    for x in arrs:
        if x.ndim > 2:
            raise ShapeError(f"block_diag: arguments must have rank 2 or less, got shape "
                             f"{x.shape}")
        blocks.append(fnp.reshape(x, (1, -1)) if x.ndim < 2 else x)
    cols = sum(b.shape[1] for b in blocks)
    rows, at = [], 0
    for b in blocks:
        rows.append(fnp.pad(b, ((0, 0), (at, cols - at - b.shape[1]))))
        at += b.shape[1]
    return fnp.concatenate(rows, axis=0)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (default:
    ``conj(c)``; ``r[0]`` is ignored, as SciPy). Batched over leading axes of ``c`` and
    ``r`` (as JAX)."""
    if r is None:
        (c,) = promote("toeplitz", c)
        r = fnp.conj(c) if c.dtype.kind == "c" else c
    c, r = promote("toeplitz", c, r)
    c, r = fnp.atleast_1d(c), fnp.atleast_1d(r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c = fnp.broadcast_to(c, batch + (m,))
    r = fnp.broadcast_to(r, batch + (n,))
    # values along the anti-diagonal order: c reversed, then r[1:]
    vals = fnp.concatenate([fnp.flip(c, -1), r[..., 1:]], axis=-1)
    idx = (m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]
    return vals[..., idx.astype(np.int32)]


def hankel(c, r=None):
    """The Hankel matrix with first column ``c`` and last row ``r`` (default: zeros;
    ``r[0]`` is ignored, as SciPy). Batched over the leading axes of ``c`` and ``r`` (as
    JAX 0.10.2; SciPy ravels them)."""
    c = fnp.asarray(c)
    r = fnp.zeros_like(c) if r is None else fnp.asarray(r)
    if c.ndim == 0:
        raise ValueError("hankel: c must be at least 1-dimensional, got a scalar.")
    if r.ndim == 0:
        raise ValueError("hankel: r must be at least 1-dimensional, got a scalar.")
    c, r = promote("hankel", c, r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c = fnp.broadcast_to(c, batch + (m,))
    r = fnp.broadcast_to(r, batch + (n,))
    if m == 0 or n == 0:
        return fnp.zeros(batch + (m, n), dtype=c.dtype)
    vals = fnp.concatenate([c, r[..., 1:]], axis=-1)
    return vals[..., (np.arange(m)[:, None] + np.arange(n)[None, :]).astype(np.int32)]

def circulant(c):
    """The circulant matrix with first column ``c``: ``C[i, j] = c[(i - j) mod n]``
    (batched over leading axes of ``c``)."""
    (c,) = promote("circulant", c)
    c = fnp.atleast_1d(c)
    n = c.shape[-1]
    return c[..., ((np.arange(n)[:, None] - np.arange(n)[None, :]) % n).astype(np.int32)]


def companion(a):
    """The companion matrix of the polynomial with coefficients ``a`` (highest first):
    first row ``-a[1:] / a[0]``, ones on the subdiagonal. Batched over the leading axes
    of ``a`` (as JAX)."""
    (a,) = promote("companion", a, to_inexact=True)
    a = fnp.atleast_1d(a)
    if a.shape[-1] < 2:
        raise ValueError("The length of `a` along the last axis must be at least 2; "
                         f"got shape {a.shape}.")
    n = a.shape[-1] - 1
    first = -a[..., 1:] / a[..., :1]
    below = fnp.broadcast_to(fnp.eye(n - 1, n, dtype=a.dtype), a.shape[:-1] + (n - 1, n))
    return fnp.concatenate([first[..., None, :], below], axis=-2)

def leslie(f, s):
    """The Leslie matrix: fecundities ``f`` (..., n) in the first row, survival rates
    ``s`` (..., n - 1) on the subdiagonal (batched over the leading axes, in the dtype
    of ``f`` and ``s`` promoted, as JAX)."""
    f, s = promote("leslie", f, s)
    f, s = fnp.atleast_1d(f), fnp.atleast_1d(s)
    if f.shape[-1] < 2:
        raise ValueError("The length of f along the last axis must be at least 2; "
                         f"got shape {f.shape}.")
    if s.shape[-1] != f.shape[-1] - 1:
        raise ValueError("Incorrect lengths for f and s. The length of s along the last "
                         "axis must be one less than the length of f; got f shape "
                         f"{f.shape} and s shape {s.shape}.")
    n = f.shape[-1]
    batch = np.broadcast_shapes(f.shape[:-1], s.shape[:-1])
    f = fnp.broadcast_to(f, batch + (n,))
    s = fnp.broadcast_to(s, batch + (n - 1,))
    i = np.arange(1, n)[:, None]
    j = np.arange(n)[None, :]
    below = fnp.where(j == i - 1, s[..., :, None], fnp.zeros((), dtype=s.dtype))
    return fnp.concatenate([f[..., None, :], below], axis=-2)

def fiedler(a):
    """The symmetric Fiedler matrix ``|a_i - a_j|`` (batched over the leading axes of
    ``a``, as JAX)."""
    a = fnp.atleast_1d(fnp.asarray(a))
    return fnp.abs(a[..., :, None] - a[..., None, :])

def convolution_matrix(a, n, mode="full"):
    """The matrix ``A`` with ``A @ v == numpy.convolve(a, v, mode)`` for ``v`` of length
    ``n``; ``mode``: 'full' (m + n - 1 rows), 'same' (max(m, n), centred), 'valid'
    (max(m, n) - min(m, n) + 1). Batched over the leading axes of ``a`` (as JAX)."""
    import operator
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    (a,) = promote("convolution_matrix", a)
    if a.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a "
                         "scalar.")
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"len(a) must be at least 1; got shape {a.shape}.")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    i = np.arange(m + n - 1)[:, None] - np.arange(n)[None, :]
    inside = (i >= 0) & (i < m)
    full = fnp.where(inside, a[..., np.clip(i, 0, m - 1).astype(np.int32)],
                     fnp.zeros((), dtype=a.dtype))
    if mode == "full":
        return full
    if mode == "same":
        start = (min(m, n) - 1) // 2
        return full[..., start:start + max(m, n), :]
    return full[..., min(m, n) - 1:max(m, n), :]

def _default_float():
    return dtypes.default_float()


def hilbert(n):
    """The Hilbert matrix ``1 / (i + j + 1)`` (default float)."""
    n = int(n)
    i = np.arange(n)
    return fnp.asarray(1.0 / (i[:, None] + i[None, :] + 1.0), dtype=_default_float())


def pascal(n, kind=None):
    """The Pascal matrix: 'symmetric' (default) ``C(i + j, i)``, 'lower' or 'upper'
    (default float; exact integers up to the dtype's precision)."""
    from math import comb as _comb
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"pascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    n = int(n)
    if kind == "symmetric":
        m = [[_comb(i + j, i) for j in range(n)] for i in range(n)]
    else:
        m = [[_comb(i, j) for j in range(n)] for i in range(n)]
    m = np.array(m, dtype=np.float64).reshape(n, n)
    return fnp.asarray(m.T if kind == "upper" else m, dtype=_default_float())


def helmert(n, full=False):
    """The Helmert matrix of order ``n``: ``(n - 1, n)``, or ``(n, n)`` with ``full`` (its
    first row ``1 / sqrt(n)``)."""
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1.0
    d[0] = n
    h = h / np.sqrt(d)[:, None]
    return fnp.asarray(h if full else h[1:], dtype=_default_float())


def dft(n, scale=None, *, dtype=None):
    """The ``n``-point DFT matrix ``exp(-2 pi i j k / n)``; ``scale``: None, 'sqrtn'
    (divide by sqrt(n)) or 'n' (by n); the default complex dtype unless ``dtype``."""
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    n = int(n)
    k = np.arange(n)
    m = np.exp(-2j * np.pi * ((k[:, None] * k[None, :]) % max(n, 1)) / max(n, 1))
    if scale == "sqrtn":
        m = m / np.sqrt(n)
    elif scale == "n":
        m = m / n
    dtype = dtypes.default_complex() if dtype is None else dtypes.canonical(dtype)
    if np.dtype(dtype).kind != "c":
        raise ValueError(f"dft: dtype must be a complex floating-point type; got {dtype}.")
    return fnp.asarray(m, dtype=dtype)


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """``(c @ q, r)`` (``mode='right'``) or ``(q @ c, r)`` ('left') with the economic QR
    decomposition ``a = q r``; ``conjugate`` uses ``conj(q)``."""
    if pivoting:
        raise NotImplementedError("qr_multiply: pivoting=True is not supported in fnx")
    if mode not in ("right", "left"):
        raise ValueError(f"qr_multiply: mode must be 'right' or 'left', got {mode!r}")
    a, c = promote("qr_multiply", a, c, to_inexact=True)
    a = _matrix("qr_multiply", a, square=False)
    q, r = lax_linalg.qr(a, full_matrices=False)
    if conjugate and q.dtype.kind == "c":
        q = fnp.conj(q)
    vector = c.ndim == 1
    if mode == "right":
        out = fnp.matmul(c, q)
    else:
        out = fnp.matmul(q, c[:, None] if vector else c)
        out = out[:, 0] if vector else out
    return out, r


_SYLVESTER_MAX = 4096


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """The solution ``X`` of ``A X + X B = C`` (``A`` (..., m, m), ``B`` (..., n, n),
    ``C`` (..., m, n), batch axes broadcast), through the Kronecker system
    ``(I_n (x) A + B^T (x) I_m) vec(X) = vec(C)`` with an LU solve (exact and
    differentiable; limited to ``m n <= 4096`` unknowns). As JAX, NaNs where some
    eigenvalues of ``A`` and ``B`` sum to less than ``tol`` in modulus (no unique
    solution). ``method`` is accepted for JAX compatibility."""
    if method not in ("schur", "eigen"):
        raise ValueError(f"solve_sylvester: method must be 'schur' or 'eigen', got {method!r}")
    A, B, C = promote("solve_sylvester", A, B, C, to_inexact=True)
    if C.ndim < 2:
        raise ShapeError(f"solve_sylvester: C must be (..., m, n), got shape {C.shape}")
    m, n = C.shape[-2:]
    if A.shape[-2:] != (m, m) or B.shape[-2:] != (n, n):
        raise ShapeError(f"solve_sylvester: A must be (..., m, m), B (..., n, n) and C "
                         f"(..., m, n); got {A.shape}, {B.shape}, {C.shape}")
    if m * n > _SYLVESTER_MAX:
        raise NotImplementedError(f"solve_sylvester: {m * n} unknowns; fnx solves the dense "
                                  f"Kronecker system, up to {_SYLVESTER_MAX} unknowns")
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2])
    A = fnp.broadcast_to(A, batch + (m, m))
    B = fnp.broadcast_to(B, batch + (n, n))
    C = fnp.broadcast_to(C, batch + (m, n))
    # K[(j, i), (l, k)] = delta_jl A[i, k] + B[l, j] delta_ik  (vec is column-major)
    eye_m, eye_n = np.eye(m), np.eye(n)
    bt = fnp.swapaxes(B, -1, -2)
    k = (A[..., None, :, None, :] * fnp.asarray(eye_n[:, None, :, None], dtype=A.dtype)
         + bt[..., :, None, :, None] * fnp.asarray(eye_m[None, :, None, :], dtype=A.dtype))
    k = fnp.reshape(k, batch + (n * m, n * m))
    vec_c = fnp.reshape(fnp.swapaxes(C, -1, -2), batch + (n * m, 1))
    x = fnp.linalg.solve(k, vec_c)[..., 0]
    x = fnp.swapaxes(fnp.reshape(x, batch + (n, m)), -1, -2)
    wa = fnp.linalg.eigvals(lax.stop_gradient(A))
    wb = fnp.linalg.eigvals(lax.stop_gradient(B))
    singular = fnp.any(fnp.abs(wa[..., :, None] + wb[..., None, :]) < tol, axis=(-2, -1))
    return fnp.where(singular[..., None, None], fnp.asarray(np.nan, dtype=x.dtype), x)

def invhilbert(n, exact=False):
    """The inverse of the ``n`` x ``n`` Hilbert matrix, from its closed form (integers,
    exact in float64 up to n = 14; the default float)."""
    from math import comb as _comb
    if exact:
        raise NotImplementedError("invhilbert: exact=True (Python integers) is not supported; "
                                  "the result is the default float")
    n = int(n)
    m = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            m[i, j] = ((-1) ** (i + j) * (i + j + 1) * _comb(n + i, n - j - 1)
                       * _comb(n + j, n - i - 1) * _comb(i + j, i) ** 2)
    return fnp.asarray(m, dtype=_default_float())


def invpascal(n, kind=None):
    """The inverse of ``pascal(n, kind)`` (integers; the default float): the lower (upper)
    Pascal matrix with alternating signs, and for 'symmetric' the product of the two."""
    from math import comb as _comb
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError("invpascal: Expected kind to be one of: ['symmetric', 'lower', "
                         f"'upper']; got {kind}")
    n = int(n)
    lo = np.array([[(-1) ** (i + j) * _comb(i, j) for j in range(n)] for i in range(n)],
                  dtype=np.float64).reshape(n, n)
    m = lo if kind == "lower" else lo.T if kind == "upper" else lo.T @ lo
    return fnp.asarray(m, dtype=_default_float())


# --- sqrtm ----------------------------------------------------------------------------------

def _sqrtm_rule(a):
    if a.dtype.kind != "c" or a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"sqrtm: needs complex square matrices, got {a.dtype}{list(a.shape)}; "
                         "call fnx.scipy.linalg.sqrtm, which converts")
    return ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)


def _sqrtm_impl(a):
    """The principal square root V diag(sqrt(w)) V^-1 from LAPACK's geev (complex128)."""
    with np.errstate(all="ignore"):
        w, v = np.linalg.eig(np.asarray(a, np.complex128))
        out = (v * np.sqrt(w)[..., None, :]) @ np.linalg.inv(v)
    return out.astype(a.dtype)


sqrtm_p = Primitive("sqrtm", shape_rule=_sqrtm_rule, impl=_sqrtm_impl)


def _sqrtm_batch(vals, dims, size):
    return sqrtm_p.bind(vals[0]), 0


def _sqrtm_jvp(primals, tangents):
    # X dX + dX X = dA, solved with X itself (differentiable), so every order is right
    (a,), (t,) = primals, tangents
    x = sqrtm_p.bind(a)
    if t is None:
        return x, None
    return x, sqrt_sylvester_p.bind(x, t)


# The solution d of  x d + d x = t  (x a matrix square root: eigenvalues with positive real
# parts, so the equation has one solution), through x's eigendecomposition:
# (V^-1 d V)_ij = (V^-1 t V)_ij / (s_i + s_j). Linear in t; its jvp in x differentiates the
# equation: x dd + dd x = dt - (dx d + d dx), so derivatives of sqrtm of any order hold.

def _sqrt_sylvester_rule(x, t):
    if x.shape != t.shape or x.dtype != t.dtype:
        raise ShapeError(f"sqrt_sylvester: x and t need one shape and dtype, got "
                         f"{x.dtype}{list(x.shape)} and {t.dtype}{list(t.shape)}")
    return ShapeDtypeStruct(t.shape, t.dtype, t.weak_type)


def _sqrt_sylvester_impl(x, t):
    with np.errstate(all="ignore"):
        s, v = np.linalg.eig(np.asarray(x, np.complex128))
        vinv = np.linalg.inv(v)
        inner = (vinv @ t @ v) / (s[..., :, None] + s[..., None, :])
        return (v @ inner @ vinv).astype(t.dtype)


sqrt_sylvester_p = Primitive("sqrt_sylvester", shape_rule=_sqrt_sylvester_rule,
                             impl=_sqrt_sylvester_impl)


def _sqrt_sylvester_jvp(primals, tangents):
    (x, t), (dx, dt) = primals, tangents
    d = sqrt_sylvester_p.bind(x, t)
    rhs = dt
    if dx is not None:
        move = fnp.matmul(dx, d) + fnp.matmul(d, dx)
        rhs = -move if rhs is None else rhs - move
    return d, None if rhs is None else sqrt_sylvester_p.bind(x, rhs)


def _sqrt_sylvester_transpose(ct, x, t):
    # <c, S^-1 t> = <S^-T c, t> with S(d) = x d + d x, whose transpose is d -> x^T d + d x^T
    if is_linear(x):
        raise ValueError("sqrt_sylvester: transpose with respect to x (it is not linear in x)")
    if ct is None:
        return [None, None]
    return [None, sqrt_sylvester_p.bind(fnp.matrix_transpose(x), ct)]


def _sqrt_sylvester_batch(vals, dims, size):
    moved = [v if d is None else fnp.moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    shape = (size,) + (vals[1] if dims[0] is None else vals[0]).shape[-2:]
    moved = [m if d is not None else fnp.broadcast_to(m, shape[:1] + m.shape)
             for m, d in zip(moved, dims)]
    return sqrt_sylvester_p.bind(*moved), 0


sqrt_sylvester_p.jvp = _sqrt_sylvester_jvp
sqrt_sylvester_p.transpose = _sqrt_sylvester_transpose
sqrt_sylvester_p.batch = _sqrt_sylvester_batch


sqrtm_p.batch = _sqrtm_batch
sqrtm_p.jvp = _sqrtm_jvp


def sqrtm(A, blocksize=1):
    """The principal matrix square root (complex, as JAX: float32 gives complex64), from
    an eigendecomposition ``A = V diag(w) V^-1`` as ``V diag(sqrt(w)) V^-1`` (the principal
    ``sqrt`` of each eigenvalue). It needs a diagonalizable matrix: a defective one gives
    NaNs or inaccurate values (JAX's Schur method handles those, except nilpotent ones,
    where it gives NaNs too). Differentiable: the derivative solves the Sylvester
    equation ``X dX + dX X = dA`` in the eigenbasis. ``blocksize`` is accepted."""
    del blocksize
    a = _matrix("sqrtm", A)
    if a.dtype.kind != "c":
        a = a.astype(np.result_type(a.dtype, np.complex64))
    return sqrtm_p.bind(a)


def funm(A, func, disp=True):
    """The matrix function ``f(A) = V diag(func(w)) V^-1`` for diagonalizable ``A``
    (``func`` elementwise on the complex eigenvalues); complex, as JAX. With
    ``disp=False`` also an error estimate: the relative residual of ``f(A) A = A f(A)``
    (JAX's Schur-Parlett method estimates its own error; it handles defective matrices).
    Not differentiable (the eigendecomposition has no derivative rule)."""
    a = _matrix("funm", A)
    if a.ndim != 2:
        raise ShapeError(f"funm: needs one square matrix, got shape {a.shape}")
    w, v = fnp.linalg.eig(a)
    fw = fnp.asarray(func(w)).astype(w.dtype)
    f = fnp.matmul(v * fw[None, :], fnp.linalg.inv(v))
    if disp:
        return f
    ac = a.astype(f.dtype)
    commute = fnp.matmul(f, ac) - fnp.matmul(ac, f)
    err = fnp.linalg.norm(commute, 1) / fnp.maximum(
        fnp.linalg.norm(f, 1) * fnp.linalg.norm(ac, 1), np.finfo(f.real.dtype).tiny)
    return f, err


def hadamard(n, dtype=int):
    """The Sylvester-Hadamard matrix of order ``n`` (a power of 2); ``int`` gives the
    default int (as JAX)."""
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2, got {n}")
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    dt = dtypes.default_int() if dtype is int else (
        dtypes.default_float() if dtype is float else dtypes.canonical(dtype))
    return fnp.asarray(h, dtype=dt)


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial with coefficients ``a`` (highest
    first; pentadiagonal, with the same eigenvalues as ``companion(a)``). Batched over
    the leading axes of ``a``; one coefficient gives a (0, 0) matrix (as JAX)."""
    (a,) = promote("fiedler_companion", a, to_inexact=True)
    a = fnp.atleast_1d(a)
    if a.shape[-1] == 0:
        raise ValueError("fiedler_companion requires the last axis of 'a' to have nonzero "
                         f"length, but got an array of shape {a.shape}.")
    n = a.shape[-1] - 1
    batch = a.shape[:-1]
    if n == 0:
        return fnp.zeros(batch + (0, 0), dtype=a.dtype)
    c = -a[..., 1:] / a[..., :1]                        # -a_1 ... -a_n, normalized
    rows, cols = [0], [0]                               # where -a_k goes, k = 1..n
    for k in range(2, n + 1):
        rows.append(2 * ((k - 1) // 2))
        cols.append(2 * (k // 2) - 1)
    ones = [(1, 0)] if n > 1 else []
    ones += [(r, r - 2) for r in range(3, n, 2)] + [(r, r + 2) for r in range(0, n - 2, 2)]
    m = fnp.zeros(batch + (n, n), dtype=a.dtype).at[..., np.array(rows, np.int32),
                                                    np.array(cols, np.int32)].set(c)
    if ones:
        r1, c1 = np.array(ones, np.int32).T
        m = m.at[..., r1, c1].set(1)
    return m

def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """The upper Hessenberg form ``h = q^H a q`` by Householder reflections with LAPACK's
    conventions (gehrd: ``beta = -sign(Re alpha) |x|``, unit-leading vectors), so ``h`` and
    ``q`` match SciPy's; ``(h, q)`` with ``calc_q``. Written with fnx ops (one reflection
    per column), so it differentiates, jits and vmaps."""
    del overwrite_a, check_finite
    h = _matrix("hessenberg", a)
    n = h.shape[-1]
    q = fnp.broadcast_to(fnp.eye(n, dtype=h.dtype), h.shape)
    cplx = h.dtype.kind == "c"
    # n - 1 reflections: the last acts on one entry (for complex input it makes the last
    # subdiagonal entry real, as LAPACK; for real input it is the identity)
    for k in range(n - 1):
        x = h[..., k + 1:, k]
        alpha = x[..., 0]
        rest = x[..., 1:]
        xnorm2 = fnp.sum(fnp.real(rest * fnp.conj(rest)) if cplx else rest * rest, axis=-1)
        trivial = xnorm2 == 0
        if cplx:
            trivial = trivial & (fnp.imag(alpha) == 0)
        anorm = fnp.sqrt(fnp.real(alpha * fnp.conj(alpha)) + xnorm2 if cplx
                         else alpha * alpha + xnorm2)
        re = fnp.real(alpha) if cplx else alpha
        beta = -fnp.where(re >= 0, 1.0, -1.0).astype(anorm.dtype) * anorm
        beta = fnp.where(trivial, fnp.ones_like(beta), beta)
        alpha_s = fnp.where(trivial, fnp.zeros_like(alpha), alpha)
        tau = ((beta.astype(h.dtype) - alpha_s) / beta.astype(h.dtype))
        tau = fnp.where(trivial, fnp.zeros_like(tau), tau)
        denom = fnp.where(trivial, fnp.ones_like(alpha), alpha_s - beta.astype(h.dtype))
        v = fnp.concatenate([fnp.ones_like(alpha)[..., None], rest / denom[..., None]], axis=-1)
        vc = fnp.conj(v) if cplx else v
        # H_k = I - tau v v^H on rows/columns k+1..; a <- H_k^H a H_k, q <- q H_k
        top = h[..., :k + 1, :]
        low = h[..., k + 1:, :]
        taus = tau[..., None, None]
        low = low - (fnp.conj(taus) if cplx else taus) * v[..., :, None] * fnp.sum(
            vc[..., :, None] * low, axis=-2, keepdims=True)
        h = fnp.concatenate([top, low], axis=-2)
        left = h[..., :, :k + 1]
        right = h[..., :, k + 1:]
        right = right - taus * fnp.sum(right * v[..., None, :], axis=-1,
                                       keepdims=True) * vc[..., None, :]
        h = fnp.concatenate([left, right], axis=-1)
        qleft, qright = q[..., :, :k + 1], q[..., :, k + 1:]
        qright = qright - taus * fnp.sum(qright * v[..., None, :], axis=-1,
                                         keepdims=True) * vc[..., None, :]
        q = fnp.concatenate([qleft, qright], axis=-1)
    h = fnp.triu(h, -1)
    return (h, q) if calc_q else h
