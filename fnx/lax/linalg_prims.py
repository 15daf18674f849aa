"""``dot_general``: the one contraction primitive (matmul, einsum, tensordot...).

The NumPy impl picks a strategy per operand shapes (``plan``, cached): a
broadcast multiply for contractions of size 1 (outer products, per-example
weight gradients), zeros for size 0, else batch dims first and contracting
dims last on the lhs (first on the rhs) and one ``matmul``, so BLAS runs on the
contraction. The jit backend binds the same plans (its ``"numpy"`` rule's ``specialize``).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..core import array_library as AL
from ..core import onnx_rules as O
from ..core.backend import register_lowering
from ..core.numpy_rules import NumpyRule
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.jvp import defjvp
from ..transforms.vjp import is_linear
from .rule_helpers import describe, kind_of, quiet


def _free(ndim, *used):
    used = set(used[0]) | set(used[1])
    return [d for d in range(ndim) if d not in used]


def _dot_general_rule(lhs, rhs, *, dimension_numbers, preferred_element_type=None,
                      precision=None):
    (lc, rc), (lb, rb) = dimension_numbers
    def bad(why):
        raise ShapeError(f"dot_general: {why}; lhs {describe(lhs)}, rhs {describe(rhs)}, "
                         f"dimension_numbers={dimension_numbers}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        bad("contracting and batch dimension lists must pair up")
    for dims, x in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < x.ndim for d in dims):
            bad("dimensions out of range or repeated")
    if any(lhs.shape[a] != rhs.shape[b] for a, b in zip(lc + lb, rc + rb)):
        bad("paired dimensions have different sizes")
    if lhs.dtype != rhs.dtype:
        bad("operands must have one dtype (use fnx.numpy.matmul/einsum to promote)")
    out_dtype = lhs.dtype if preferred_element_type is None else preferred_element_type
    if preferred_element_type is not None:
        # JAX's combinations: (integral, integral), (integral, floating),
        # (floating, floating), (complex, complex); integers never narrow.
        k_in, k_out = kind_of(lhs.dtype), kind_of(out_dtype)
        ok = {"b": "biuf", "i": "iuf", "u": "iuf", "f": "f", "c": "c"}[k_in]
        if k_out not in ok or (k_in in "iu" and k_out in "iu"
                               and out_dtype.itemsize < lhs.dtype.itemsize):
            bad(f"preferred_element_type={out_dtype} is incompatible with {lhs.dtype} "
                "operands (allowed: integral -> integral (not narrower) or floating, "
                "floating -> floating, complex -> complex)")
    shape = ([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in _free(lhs.ndim, lc, lb)]
             + [rhs.shape[d] for d in _free(rhs.ndim, rc, rb)])
    return ShapeDtypeStruct(shape, out_dtype,
                            lhs.weak_type and rhs.weak_type and preferred_element_type is None)


def _dot_general_impl(lhs, rhs, *, dimension_numbers, preferred_element_type=None,
                      precision=None):
    return plan(lhs.shape, rhs.shape, dimension_numbers, preferred_element_type,
                precision=precision)(lhs, rhs)


def plan(lhs_shape, rhs_shape, dimension_numbers, preferred_element_type=None,
         permutation=None, precision=None):
    """The NumPy computation of ``dot_general`` for these operand shapes, chosen once:
    ``fn(lhs, rhs) -> ndarray``; with ``permutation``, the result comes transposed by it
    (``np.transpose(out, permutation)``, the same values, possibly laid out better).

    Eager calls and jit (which binds the plan of each equation, and fuses a
    ``transpose`` that is the only use of a ``dot_general`` into it) use the same
    plans, so they agree bitwise. Strategies:

    * contraction of size 1 (or no contracting dims: an outer product): one product
      per element, so a broadcast ``np.multiply``, written C-contiguous in the
      (permuted) output order. Batched ``np.matmul`` with k == 1 makes one BLAS call
      per batch element and is several times slower. The product keeps IEEE signs
      (``-1 * 0 = -0``, like XLA, which also rewrites these dots to multiplies);
      ``matmul`` adds it to a zero accumulator and returns ``+0``. For complex
      operands the product is NumPy's complex multiply, which can differ from a
      BLAS kernel's fused multiply-add by an ulp.
    * contraction of size 0: zeros.
    * otherwise batch dims first, free dims merged, contracting dims merged, and one
      (batched) ``np.matmul``: BLAS GEMM; without batch dims a single 2-D GEMM (batch
      dims that vmap put on one operand only are free dims there).
    """
    (lc, rc), (lb, rb) = dimension_numbers
    key = (tuple(lhs_shape), tuple(rhs_shape),
           ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
           None if preferred_element_type is None else np.dtype(preferred_element_type),
           None if permutation is None else tuple(permutation), precision)
    return _plan(*key)


def _view(shape, transpose, target):
    """``x -> x.transpose(transpose).reshape(target)`` for an ``x`` of ``shape``, without
    the steps that do nothing; None when nothing is left to do. Both steps are views
    wherever NumPy can manage (reshape copies only when merging dims that a
    transpose made non-adjacent in memory)."""
    moved = tuple(shape[d] for d in transpose)
    if transpose == tuple(range(len(transpose))):
        transpose = None
    if target == moved:
        target = None
    if transpose is None:
        return None if target is None else (lambda x: x.reshape(target))
    if target is None:
        return lambda x: x.transpose(transpose)
    return lambda x: x.transpose(transpose).reshape(target)


def _apply(f, g, op, pet):
    """``(lhs, rhs) -> op(f(lhs), g(rhs))`` (None: as is), operands cast to ``pet`` first."""
    if pet is not None:
        f0, g0 = f or (lambda x: x), g or (lambda x: x)
        return lambda lhs, rhs: op(f0(lhs.astype(pet, copy=False)),
                                   g0(rhs.astype(pet, copy=False)))
    if f is None and g is None:
        return op
    if f is None:
        return lambda lhs, rhs: op(lhs, g(rhs))
    if g is None:
        return lambda lhs, rhs: op(f(lhs), rhs)
    return lambda lhs, rhs: op(f(lhs), g(rhs))


def _matmul(a, b, precision=None):
    """``AL.matmul`` in the operands' dtype (ml_dtypes' bfloat16 matmul returns float32);
    ``precision``: the reduced precision a device product may use."""
    out = AL.matmul(a, b, precision)
    return out if out.dtype == a.dtype else out.astype(a.dtype)


@functools.lru_cache(maxsize=4096)
def _plan(lshape, rshape, dn, pet, perm, precision=None):
    (lc, rc), (lb, rb) = dn
    lf, rf = _free(len(lshape), lc, lb), _free(len(rshape), rc, rb)
    bshape = tuple(lshape[d] for d in lb)
    mshape = tuple(lshape[d] for d in lf)
    nshape = tuple(rshape[d] for d in rf)
    out_shape = bshape + mshape + nshape
    nout = len(out_shape)
    if perm is None:
        perm = tuple(range(nout))
    final_shape = tuple(out_shape[p] for p in perm)
    k = math.prod(lshape[d] for d in lc)

    if k == 0:  # an empty sum
        def zeros(lhs, rhs):
            return AL.zeros(lhs, final_shape, lhs.dtype if pet is None else pet)
        return zeros

    if k == 1:
        # Each operand as a view with one dim per output dim, in the final order: its
        # own dims where they land, size 1 where the other operand's land.
        where = {i: p for p, i in enumerate(perm)}  # output dim -> final position

        def spread(shape, batch, free, contract, first_free):
            pos = {d: where[j] for j, d in enumerate(batch)}
            pos.update((d, where[first_free + j]) for j, d in enumerate(free))
            mine = set(pos.values())
            target = tuple(final_shape[i] if i in mine else 1 for i in range(nout))
            return _view(shape, tuple(sorted(pos, key=pos.get)) + tuple(contract), target)

        multiply = np.multiply
        if nout == 0:
            def product(a, b):
                return AL.as_array(multiply(a, b))  # a 0-d array, not a NumPy scalar
        else:
            def product(a, b):
                if AL.is_device(a):  # CuPy's ufuncs take no order= (and write C order)
                    return multiply(a, b)
                return multiply(a, b, order="C")
        return _apply(spread(lshape, lb, lf, lc, len(lb)),
                      spread(rshape, rb, rf, rc, len(lb) + len(lf)), product, pet)

    m, n = math.prod(mshape), math.prod(nshape)
    views = (_view(lshape, tuple(lb) + tuple(lf) + tuple(lc), bshape + (m, k)),
             _view(rshape, tuple(rb) + tuple(rc) + tuple(rf), bshape + (k, n)))
    mm = _apply(*views, _matmul if precision is None else functools.partial(
        _matmul, precision=precision), pet)
    back = None if bshape + (m, n) == out_shape else out_shape
    if perm == tuple(range(nout)):
        perm = None
    if back is None and perm is None:
        if pet is None and precision is None:  # one matmul of these views
            mm.matmul_views = views
        return mm
    if perm is None:
        return lambda lhs, rhs: mm(lhs, rhs).reshape(back)
    if back is None:
        return lambda lhs, rhs: mm(lhs, rhs).transpose(perm)
    return lambda lhs, rhs: mm(lhs, rhs).reshape(back).transpose(perm)


dot_general_p = Primitive("dot_general", shape_rule=_dot_general_rule,
                          impl=quiet(_dot_general_impl))
dot_general_p.never_aliases_operands = dot_general_p.fresh_result = True  # a new buffer


def _numpy_specialize(in_avals, params, permutation=None):
    """For the jit backend: the plan for these avals (run inside jit's floating-point
    "ignore" state); ``permutation``: a ``transpose`` of the result fused in. A plan
    that is one float ``matmul`` in NumPy's own dtypes takes ``out=`` (``np.matmul``
    itself, or a function with ``takes_out``), so the lowering can hand it a buffer."""
    lhs, rhs = in_avals
    fn = plan(lhs.shape, rhs.shape, params["dimension_numbers"],
              params.get("preferred_element_type"), permutation)  # (the CPU: full precision)
    views = getattr(fn, "matmul_views", None)
    if views is not None and lhs.dtype.kind in "fc" and lhs.dtype.type.__module__ == "numpy":
        return _matmul_with_out(*views)  # matmul keeps these dtypes: no wrapper needed
    return fn


def _matmul_with_out(f, g):
    """``(lhs, rhs, out=None) -> np.matmul(f(lhs), g(rhs), out=out)`` (None: as is)."""
    mm = np.matmul
    if f is None and g is None:
        return mm
    if f is None:
        fn = lambda lhs, rhs, out=None: mm(lhs, g(rhs), out=out)  # noqa: E731
    elif g is None:
        fn = lambda lhs, rhs, out=None: mm(f(lhs), rhs, out=out)  # noqa: E731
    else:
        fn = lambda lhs, rhs, out=None: mm(f(lhs), g(rhs), out=out)  # noqa: E731
    fn.takes_out = True
    return fn


register_lowering(dot_general_p, "numpy", NumpyRule(specialize=_numpy_specialize,
                                                    transposes=True))


# --- jvp rule: bilinear ----------------------------------------------------------------------
defjvp(dot_general_p,
       lambda g, ans, x, y, **p: dot_general_p.bind(g, y, **p),
       lambda g, ans, x, y, **p: dot_general_p.bind(x, g, **p))


# --- transpose rule --------------------------------------------------------------------------

def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, preferred_element_type=None,
                           precision=None):
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    if is_linear(lhs):
        x, y, xc, yc, xb, yb = lhs, rhs, lc, rc, lb, rb
    else:
        x, y, xc, yc, xb, yb = rhs, lhs, rc, lc, rb, lb
    xf = _free(len(x.shape), xc, xb)
    yf = _free(len(y.shape), yc, yb)
    # Output dims: batch, then lhs free, then rhs free.
    if is_linear(lhs):
        ct_yf = list(range(nb + len(xf), nb + len(xf) + len(yf)))
    else:
        ct_yf = list(range(nb, nb + len(yf)))
    ct_b = list(range(nb))
    from . import ops as L
    if y.dtype != ct.dtype:  # preferred_element_type wider than the operands
        y = L.convert_element_type(y, ct.dtype)
    # ct_x[b, xf, yc-order] = sum over y free of ct[b, ..] * y[b, yc, yf]: as
    # dot_general(ct, y), whose dims are batch (x's batch order), x free (in xf order),
    # then y's remaining dims (the contracted ones, in increasing y index), which pair
    # with xc; or as dot_general(y, ct): batch, y's remaining dims, x free. The second
    # is taken when it comes out in x's own layout and the first does not (a weight
    # gradient ``x.T @ ct``: BLAS reads the transposed operand in place, and the result
    # is C-contiguous instead of a transposed view that slows every later op on it).
    y_rest = sorted(yc)
    paired = [xc[list(yc).index(d)] for d in y_rest]
    ident = list(range(len(x.shape)))
    perm = _perm_to(list(xb) + xf + paired)
    if perm != ident and _perm_to(list(xb) + paired + xf) == ident:
        res = dot_general_p.bind(y, ct, dimension_numbers=((tuple(yf), tuple(ct_yf)),
                                                    (tuple(yb), tuple(ct_b))),
                                 preferred_element_type=None, **_kept(precision))
        perm = ident
    else:
        res = dot_general_p.bind(ct, y, dimension_numbers=((tuple(ct_yf), tuple(yf)),
                                                    (tuple(ct_b), tuple(yb))),
                                 preferred_element_type=None, **_kept(precision))
    out = L.transpose(res, perm)
    if out.dtype != x.dtype:
        out = L.convert_element_type(out, x.dtype)
    return [out, None] if is_linear(lhs) else [None, out]


def _kept(precision):
    """A reduced ``precision`` param carried to the products a rule makes (none when full,
    so full-precision programs keep their params as they were)."""
    return {} if precision is None else {"precision": precision}


def _perm_to(dims):
    """The permutation putting dims listed in order ``dims`` back in increasing order."""
    return [dims.index(d) for d in range(len(dims))]


dot_general_p.transpose = _dot_general_transpose


# --- batching rule -----------------------------------------------------------------------------
def _dot_general_batch(vals, dims, size, *, dimension_numbers, preferred_element_type=None,
                       precision=None):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = vals
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    if dims[0] is not None and dims[1] is not None:
        dn = ((up(lc), up(rc)), ((0,) + up(lb), (0,) + up(rb)))
        out_dim = 0
    elif dims[0] is not None:
        dn = ((up(lc), rc), (up(lb), rb))
        out_dim = len(lb)  # lhs dim 0 is the first lhs free dim
    else:
        dn = ((lc, up(rc)), (lb, up(rb)))
        out_dim = len(lb) + (lhs.ndim - len(lc) - len(lb))
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                             preferred_element_type=preferred_element_type, **_kept(precision))
    return out, out_dim


dot_general_p.batch = _dot_general_batch


# --- ONNX lowering ----------------------------------------------------------------------------

_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_equation(lhs_ndim, rhs_ndim, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs_ndim + rhs_ndim > len(_EINSUM_LETTERS):
        raise ValueError("dot_general: too many dimensions for an ONNX Einsum equation")
    letters = iter(_EINSUM_LETTERS)
    lhs = [next(letters) for _ in range(lhs_ndim)]
    rhs = [None] * rhs_ndim
    for a, b in zip(lc, rc):
        rhs[b] = lhs[a]
    for a, b in zip(lb, rb):
        rhs[b] = lhs[a]
    rhs = [r if r is not None else next(letters) for r in rhs]
    lf = [d for d in range(lhs_ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs_ndim) if d not in rc and d not in rb]
    out = [lhs[d] for d in lb] + [lhs[d] for d in lf] + [rhs[d] for d in rf]
    return f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"


def _dot_general_onnx(ctx, lhs, rhs, *, dimension_numbers, preferred_element_type=None,
                      precision=None):
    la, ra = ctx.in_avals
    dt = ctx.out_avals[0].dtype             # the impl casts the operands to it first
    lhs, rhs = O.cast(ctx, lhs, la.dtype, dt), O.cast(ctx, rhs, ra.dtype, dt)
    eq = _einsum_equation(la.ndim, ra.ndim, dimension_numbers)
    if dt in O.EINSUM_KERNELS:
        return O.op(ctx, "Einsum", lhs, rhs, equation=eq)
    if dt == O.BOOL:                        # or of ands: a sum of 0/1 products > 0
        r = O.op(ctx, "Einsum", O.cast(ctx, lhs, O.BOOL, O.I64), O.cast(ctx, rhs, O.BOOL, O.I64),
                 equation=eq)
        return O.op(ctx, "Greater", r, O.scalar(ctx, 0, O.I64))
    # narrow or unsigned integers wrap: int64 and back gives the same value mod 2**bits;
    # float16/bfloat16 accumulate in float32
    wide = O.I64 if O.is_int(dt) else O.F32
    r = O.op(ctx, "Einsum", O.cast(ctx, lhs, dt, wide), O.cast(ctx, rhs, dt, wide), equation=eq)
    return O.cast(ctx, r, wide, dt)


register_lowering(dot_general_p, "onnx", _dot_general_onnx)
