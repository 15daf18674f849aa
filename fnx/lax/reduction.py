"""Reductions, arg-reductions and cumulative primitives.

``reduce_*`` keep the operand's dtype (``fnx.numpy`` chooses accumulation
dtypes before binding). Empty max/min reductions return the identity
(-inf/+inf or the integer extremes), as JAX does, instead of raising.

One block per primitive: the definition, then its jvp, transpose and batching rules, then
its lowering (``"onnx"``, written with ``fnx.core.onnx_rules``), JAX's ``lax.py`` layout;
each family's rule constructors come first.
"""
from __future__ import annotations

import numpy as np

from ..core import array_library as AL
from ..core import dtypes
from ..core import onnx_rules as O
from ..core.backend import register_lowering
from ..core.numpy_rules import REDUCE_PLAN_MIN_SIZE, NumpyRule, reduce_plan
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..transforms.jvp import deflinear, defjvp, defjvp_zero
from ..transforms.vmap import batch_shifted
from .rule_helpers import KINDS, check_kind, describe, normalize_axes, quiet
from . import ops as L  # (rules run after import; ops imports this module)


def _reduced(x, axes, dtype=None):
    return ShapeDtypeStruct(tuple(s for i, s in enumerate(x.shape) if i not in axes),
                            x.dtype if dtype is None else dtype, x.weak_type and dtype is None)


def _identity(dtype, which):
    if dtypes.is_inexact(dtype):   # complex: -inf + 0j / inf + 0j, as JAX; bfloat16 too
        return -np.inf if which == "max" else np.inf
    if dtype.kind == "b":
        return which != "max"
    info = np.iinfo(dtype)
    return info.min if which == "max" else info.max


# === reductions =================================================================================

def _reducer(name, numpy_fn, kinds, which=None, fuses=False, device_fn=None, ufunc=None):
    """``device_fn``: the reduction for device buffers, where CuPy lacks ``numpy_fn``
    (its ufuncs' ``reduce`` is only add's and multiply's). ``ufunc``: the binary ufunc
    ``numpy_fn`` reduces with; on NumPy buffers the reduction runs the plan
    ``reduce_plan`` picks for the shape where NumPy's own ``reduce`` is slow (small
    windows between kept axes: pairwise calls of ``ufunc`` over strided views), eagerly
    and in jit's code alike."""
    def shape_rule(x, *, axes):
        check_kind(name, x, KINDS[kinds])
        return _reduced(x, normalize_axes(name, axes, x.ndim))

    def impl(x, *, axes):
        if which is not None and x.size == 0:
            axes = {a % x.ndim for a in axes}
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
            return AL.full(x, shape, _identity(x.dtype, which), x.dtype)
        if ufunc is not None and x.size >= REDUCE_PLAN_MIN_SIZE and not AL.is_device(x):
            plan = reduce_plan(ufunc, x.shape, x.dtype, tuple(axes))
            if plan is not None:
                return plan(x)
        fn = device_fn if device_fn is not None and AL.is_device(x) else numpy_fn
        out = fn(x, axis=tuple(axes))
        return out if out.dtype == x.dtype else out.astype(x.dtype)
    prim = Primitive(name, shape_rule=shape_rule, impl=quiet(impl))
    if numpy_fn.__name__ == "reduce":  # a ufunc's own reduce: jit calls it directly

        def codegen(ins, params, bind_global, in_avals, out_avals):
            x = in_avals[0]
            if 0 in x.shape:
                return None  # the impl's empty-input fill
            plan = reduce_plan(ufunc, tuple(x.shape), x.dtype, tuple(params["axes"]))
            if plan is not None:
                return f"{bind_global(plan.__name__, plan)}({ins[0]})"
            if x.dtype.kind not in "fc":
                return None  # the impl's dtype cast
            return f"{bind_global(name, numpy_fn)}({ins[0]}, axis={tuple(params['axes'])!r})"
        # ``fuses``: the backend may fuse an elementwise producer into blocks of the reduce
        register_lowering(prim, "numpy", NumpyRule(
            expression=codegen, reducer=numpy_fn.__self__ if fuses else None))
    return prim


def _batch_reduce(prim):
    batch_shifted(prim, lambda p, n, x: dict(axes=tuple(a % (x.ndim - 1) + 1 for a in p["axes"])))


def _onnx_reduce_axes(axes, ndim):
    return sorted({a % ndim for a in axes})


def _onnx_reduction(name, body, identity):
    """The lowering of a reduce_* primitive from ``body(ctx, x, a, axes)`` (``a`` the
    input's aval, ``axes`` normalised and sorted): a reduction over no axes is ``x``
    itself, and one over an empty axis is ``identity(dtype)`` filled in, unless that
    is None (then ``body`` handles it)."""
    def lower(ctx, x, *, axes):
        a, out = ctx.in_avals[0], ctx.out_avals[0]
        axes = _onnx_reduce_axes(axes, a.ndim)
        if not axes:
            return x
        if any(a.shape[d] == 0 for d in axes):
            value = identity(a.dtype)
            if value is not None:
                return O.full(ctx, value, a.dtype, out.shape)
        return body(ctx, x, a, axes)
    lower.__name__ = name
    return lower


def _reduce_arith_onnx(op_type):
    """reduce_sum / reduce_prod. Floats use ReduceSum/ReduceProd; integers a tree of
    Add/Mul, which wraps exactly like NumPy (onnxruntime's integer ReduceSum and
    ReduceProd saturate or round through double)."""
    combine_op = {"ReduceSum": "Add", "ReduceProd": "Mul"}[op_type]
    identity = {"ReduceSum": 0, "ReduceProd": 1}[op_type]

    def body(ctx, x, a, axes):
        if O.is_int(a.dtype):
            return O.tree_reduce(ctx, x, a.shape, axes,
                                 lambda u, v: O.op(ctx, combine_op, u, v))
        xs, back = O.arithmetic(ctx, x, a.dtype, O.REDUCE_ARITH_KERNELS)
        return back(O.op(ctx, op_type, xs, O.ints(ctx, axes), keepdims=0))
    return _onnx_reduction(f"lower_{op_type}", body,
                           lambda dt: identity if O.is_int(dt) else None)


def _reduce_extreme_onnx(which):
    op_type = "ReduceMax" if which == "max" else "ReduceMin"

    def body(ctx, x, a, axes):
        dt = a.dtype
        xs, _, back = O.exact(ctx, x, dt, O.REDUCE_ORDER_KERNELS, ordered=True)
        r = back(O.op(ctx, op_type, xs, O.ints(ctx, axes), keepdims=0))
        if O.is_float(dt):                         # ReduceMax/Min skip NaNs: put them back
            has_nan = O.any_(ctx, O.op(ctx, "IsNaN", x), axes)
            r = O.where(ctx, has_nan, O.scalar(ctx, np.nan, dt), r, dt)
        return r

    def identity(dt):   # an empty reduction: the identity
        return _identity(dt, which)
    return _onnx_reduction(f"lower_reduce_{which}", body, identity)


def _reduce_bitwise_onnx(which):
    """reduce_and / reduce_or: bool via ReduceMin/ReduceMax; integers by a log-depth tree
    of BitwiseAnd/BitwiseOr over the reduced elements (ONNX has no bitwise reduce)."""
    def body(ctx, x, a, axes):
        if a.dtype == O.BOOL:
            op_type = "ReduceMin" if which == "and" else "ReduceMax"
            r = O.op(ctx, op_type, O.cast(ctx, x, O.BOOL, O.U8), O.ints(ctx, axes), keepdims=0)
            return O.cast(ctx, r, O.U8, O.BOOL)
        op_type = "BitwiseAnd" if which == "and" else "BitwiseOr"
        return O.tree_reduce(ctx, x, a.shape, axes, lambda u, v: O.op(ctx, op_type, u, v))

    def identity(dt):   # integers: all bits / none (bool is handled by the body)
        return None if dt == O.BOOL else np.array(-1 if which == "and" else 0).astype(dt)
    return _onnx_reduction(f"lower_reduce_{which}", body, identity)


# the ufuncs' own reduce: what np.sum/prod/max/min call for arrays, without their wrappers
reduce_sum_p = _reducer("reduce_sum", np.add.reduce, "num", fuses=True, ufunc=np.add)
reduce_sum_p.never_aliases_operands = True  # ufunc.reduce copies even over no axes
deflinear(reduce_sum_p)


def _reduce_sum_transpose(ct, x, *, axes):
    kept = tuple(d for d in range(len(x.shape)) if d not in axes)
    return [L.broadcast_in_dim(ct, tuple(x.shape), kept)]


reduce_sum_p.transpose = _reduce_sum_transpose
_batch_reduce(reduce_sum_p)
register_lowering(reduce_sum_p, "onnx", _reduce_arith_onnx("ReduceSum"))


reduce_prod_p = _reducer("reduce_prod", np.multiply.reduce, "num", ufunc=np.multiply)
reduce_prod_p.never_aliases_operands = True


def _reduce_prod_jvp(primals, tangents, *, axes):
    """Sum of g_i times the product of all other elements (exact with zeros: no division)."""
    (x,), (g,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    n = 1
    for d in axes:
        n *= x.shape[d]
    if n == 0:
        return ans, None
    shape = [x.shape[d] for d in kept] + [n]
    last = len(kept)
    flat = [L.reshape(L.transpose(v, kept + list(axes)), shape) for v in (x, g)]
    one = L.convert_element_type(1, x.dtype)
    no_pad = [(0, 0, 0)] * last
    left = L.pad(L.slice_in_dim(L.cumprod(flat[0], last), 0, n - 1, 1, last), one,
                 no_pad + [(1, 0, 0)])
    right = L.pad(L.slice_in_dim(L.cumprod(flat[0], last, reverse=True), 1, n, 1, last), one,
                  no_pad + [(0, 1, 0)])
    return ans, L.reduce_sum(L.mul(flat[1], L.mul(left, right)), (last,))


reduce_prod_p.jvp = _reduce_prod_jvp
_batch_reduce(reduce_prod_p)
register_lowering(reduce_prod_p, "onnx", _reduce_arith_onnx("ReduceProd"))


def _chosen_jvp(g, ans, x, *, axes):
    """Tangent of max/min: the mean of the tangents at the positions that attain it."""
    kept = tuple(d for d in range(x.ndim) if d not in axes)
    hit = L.convert_element_type(L.eq(x, L.broadcast_in_dim(ans, x.shape, kept)), g.dtype)
    return L.div(L.reduce_sum(L.mul(g, hit), axes), L.reduce_sum(hit, axes))


reduce_max_p = _reducer("reduce_max", np.maximum.reduce, "any", "max", fuses=True,
                        device_fn=np.max, ufunc=np.maximum)
reduce_max_p.never_aliases_operands = True
defjvp(reduce_max_p, _chosen_jvp)
_batch_reduce(reduce_max_p)
register_lowering(reduce_max_p, "onnx", _reduce_extreme_onnx("max"))


reduce_min_p = _reducer("reduce_min", np.minimum.reduce, "any", "min", fuses=True,
                        device_fn=np.min, ufunc=np.minimum)
reduce_min_p.never_aliases_operands = True
defjvp(reduce_min_p, _chosen_jvp)
_batch_reduce(reduce_min_p)
register_lowering(reduce_min_p, "onnx", _reduce_extreme_onnx("min"))


reduce_and_p = _reducer("reduce_and", lambda x, axis: np.bitwise_and.reduce(x, axis=axis),
                        "intbool", device_fn=lambda x, axis: _device_bitwise(np.all, x, axis),
                        ufunc=np.bitwise_and)
defjvp_zero(reduce_and_p)
_batch_reduce(reduce_and_p)
register_lowering(reduce_and_p, "onnx", _reduce_bitwise_onnx("and"))


reduce_or_p = _reducer("reduce_or", lambda x, axis: np.bitwise_or.reduce(x, axis=axis),
                       "intbool", device_fn=lambda x, axis: _device_bitwise(np.any, x, axis),
                       ufunc=np.bitwise_or)
defjvp_zero(reduce_or_p)
_batch_reduce(reduce_or_p)
register_lowering(reduce_or_p, "onnx", _reduce_bitwise_onnx("or"))


# === arg-reductions =============================================================================

def _arg_reducer(name, numpy_fn):
    def shape_rule(x, *, axes, index_dtype):
        check_kind(name, x, KINDS["any"])
        axes = normalize_axes(name, axes, x.ndim)
        if len(axes) != 1:
            raise ShapeError(f"{name}: reduces exactly one axis, got axes={axes}")
        if x.shape[axes[0]] == 0:
            raise ShapeError(f"{name}: cannot reduce the empty axis {axes[0]} of {describe(x)}")
        if np.dtype(index_dtype).kind not in "iu":
            raise ShapeError(f"{name}: index_dtype must be an integer dtype, got "
                             f"{index_dtype} (operand {describe(x)})")
        return _reduced(x, axes, index_dtype)

    def impl(x, *, axes, index_dtype):
        return AL.as_array(numpy_fn(x, axis=axes[0])).astype(index_dtype)
    return Primitive(name, shape_rule=shape_rule, impl=impl)


def _batch_arg_reduce(prim):
    batch_shifted(prim, lambda p, n, x: dict(axes=tuple(a % (x.ndim - 1) + 1 for a in p["axes"]),
                                             index_dtype=p["index_dtype"]))


def _arg_extreme_onnx(which):
    op_type = "ArgMax" if which == "max" else "ArgMin"

    def lower(ctx, x, *, axes, index_dtype):
        a = ctx.in_avals[0]
        axis = axes[0] % a.ndim
        xs, _, _ = O.exact(ctx, x, a.dtype, O.ARGMAX_KERNELS, ordered=True)
        idx = O.op(ctx, op_type, xs, axis=axis, keepdims=0, select_last_index=0)
        if O.is_float(a.dtype):                    # the first NaN wins, as np.argmax
            nan = O.cast(ctx, O.op(ctx, "IsNaN", x), O.BOOL, O.U8)
            first_nan = O.op(ctx, "ArgMax", nan, axis=axis, keepdims=0, select_last_index=0)
            has_nan = O.cast(ctx, O.op(ctx, "ReduceMax", nan, O.ints(ctx, [axis]), keepdims=0),
                             O.U8, O.BOOL)
            idx = O.op(ctx, "Where", has_nan, first_nan, idx)
        return O.cast(ctx, idx, O.I64, index_dtype)
    lower.__name__ = f"lower_{op_type}"
    return lower


argmax_p = _arg_reducer("argmax", np.argmax)
defjvp_zero(argmax_p)
_batch_arg_reduce(argmax_p)
register_lowering(argmax_p, "onnx", _arg_extreme_onnx("max"))


argmin_p = _arg_reducer("argmin", np.argmin)
defjvp_zero(argmin_p)
_batch_arg_reduce(argmin_p)
register_lowering(argmin_p, "onnx", _arg_extreme_onnx("min"))


# === cumulative =================================================================================

def _device_bitwise(fn, x, axis):
    if x.dtype != np.bool_:
        raise TypeError(f"a bitwise reduction of a {x.dtype} device array: CuPy has none "
                        "(it runs on the host)")
    return fn(x, axis=axis)


def _device_scan(ufunc, exact):
    """``ufunc.accumulate`` for device buffers (CuPy has no ``accumulate`` but add's and
    multiply's): log2(n) steps, each combining every prefix with the one ``d`` before it
    (earlier operand first, so ties and NaNs resolve as the sequential scan's do). Only
    for ``exact`` ufuncs (max, min), whose result does not depend on the grouping; the
    others raise TypeError (they run on the host)."""
    def scan(x, axis):
        if not exact:
            raise TypeError(f"{ufunc.__name__}.accumulate of a device array: CuPy has none, "
                            "and a parallel scan would round differently (it runs on the host)")
        out = x.copy()
        n, d = x.shape[axis], 1
        head = (slice(None),) * (axis % x.ndim)
        while d < n:
            later, earlier = head + (slice(d, None),), head + (slice(0, n - d),)
            out[later] = ufunc(out[earlier], out[later])
            d *= 2
        return out
    return scan


def _cumulative(name, numpy_fn, kinds, device_fn=None):
    def shape_rule(x, *, axis, reverse=False):
        check_kind(name, x, KINDS[kinds])
        normalize_axes(name, (axis,), x.ndim)
        return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)

    def impl(x, *, axis, reverse=False):
        if reverse:
            x = np.flip(x, axis)
        fn = device_fn if device_fn is not None and AL.is_device(x) else numpy_fn
        out = fn(x, axis=axis)
        out = out if out.dtype == x.dtype else out.astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return Primitive(name, shape_rule=shape_rule, impl=quiet(impl))


def _batch_cumulative(prim):
    batch_shifted(prim, lambda p, n, x: dict(axis=p["axis"] % (x.ndim - 1) + 1,
                                             reverse=p.get("reverse", False)))


def _shifted(v, d, fill, axis, reverse):
    """``v`` moved ``d`` places along ``axis`` in the scan direction (towards higher
    indices, or lower ones when ``reverse``), ``fill`` in the vacated places."""
    config = [(0, 0, 0)] * v.ndim
    config[axis] = (-d, d, 0) if reverse else (d, -d, 0)
    return L.pad(v, fill, config)


def _cum_scan_onnx(which):
    """cumprod / cummax / cummin as a Hillis-Steele scan (``O.hillis_steele``)."""
    def lower(ctx, x, *, axis, reverse=False):
        a = ctx.in_avals[0]
        dt = a.dtype
        if which == "prod":
            fill = np.array(1).astype(dt)
            combine = lambda u, v: O.op(ctx, "Mul", u, v)  # noqa: E731
        else:
            fill = np.array(_identity(dt, which)).astype(dt)
            op_type = "Max" if which == "max" else "Min"
            combine = lambda u, v: O.extremum(ctx, u, v, dt, op_type)  # noqa: E731
        return O.hillis_steele(ctx, x, a.shape, axis, reverse, O.scalar(ctx, fill, dt), combine, dt)
    lower.__name__ = f"lower_cum{which}"
    return lower


cumsum_p = _cumulative("cumsum", np.cumsum, "num")
deflinear(cumsum_p)
cumsum_p.transpose = lambda ct, x, *, axis, reverse=False: [L.cumsum(ct, axis, not reverse)]
_batch_cumulative(cumsum_p)


def _cumsum_onnx(ctx, x, *, axis, reverse=False):
    xs, back = O.arithmetic(ctx, x, ctx.in_avals[0].dtype, O.CUMSUM_KERNELS)
    return back(O.op(ctx, "CumSum", xs, O.scalar(ctx, axis, O.I64), exclusive=0,
                     reverse=int(bool(reverse))))


register_lowering(cumsum_p, "onnx", _cumsum_onnx)


cumprod_p = _cumulative("cumprod", np.cumprod, "num")


def _cumprod_jvp(primals, tangents, *, axis, reverse=False):
    """The product rule pushed through a Hillis-Steele scan of ``mul``.

    Each of the ceil(log2 n) steps multiplies every partial product by the one
    ``d`` places back (``d = 1, 2, 4, ...``), so the tangent obeys
    ``dy <- dy * shift(y) + y * shift(dy)``. This is the tangent of the scan
    itself, written with mul/pad/add only: exact when ``x`` has zeros (there is
    no division), linear in the tangent (so it transposes for reverse mode), and
    differentiable again (grad of grad is the product rule once more). It costs
    O(n log n) work and keeps log2 n partial-product arrays as residuals. The
    primal is ``cumprod`` itself, so it matches the undifferentiated result bitwise.
    """
    (x,), (t,) = primals, tangents
    ans = cumprod_p.bind(x, axis=axis, reverse=reverse)
    if t is None or not dtypes.is_inexact(x.dtype):
        return ans, None
    n = x.shape[axis]
    y, dy, d = x, t, 1
    while d < n:
        y_back = _shifted(y, d, 1, axis, reverse)
        dy = L.add(L.mul(dy, y_back), L.mul(y, _shifted(dy, d, 0, axis, reverse)))
        d *= 2
        if d < n:
            y = L.mul(y, y_back)
    return ans, dy


cumprod_p.jvp = _cumprod_jvp
_batch_cumulative(cumprod_p)
register_lowering(cumprod_p, "onnx", _cum_scan_onnx("prod"))


def _cum_extreme_jvp(prim):
    """cummax/cummin: output ``i`` takes the tangent of the element that holds the
    running extreme there.

    Ties: of the elements equal to the running extreme, the most recent one in
    the scan direction wins (the largest index ``k <= i``, or the smallest
    ``k >= i`` when ``reverse``). Wherever ``x[i]`` itself attains the running
    extreme the output tangent is therefore ``t[i]``: on a nondecreasing input
    cummax is the identity and so is its derivative. (JAX differentiates through
    an associative scan of max, which splits ties between the two halves of
    each combine, so its tie weights depend on the scan tree.) Once a NaN
    appears the output is NaN and takes the tangent of the most recent NaN.

    The winner's index is itself a running extreme (cummax/cummin of the
    indices where ``x`` equals the output), and the tangent is a gather of
    ``t`` there: linear in ``t``, transposed by a scatter-add.
    """
    def rule(primals, tangents, *, axis, reverse=False):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axis=axis, reverse=reverse)
        if t is None or not dtypes.is_inexact(x.dtype):
            return ans, None
        shape = tuple(x.shape)
        if 0 in shape:
            return ans, t
        n = shape[axis]
        hit = L.eq(x, ans)
        hit = L.bitwise_or(hit, L.bitwise_and(L.isnan(x), L.isnan(ans)))
        iota = L.broadcasted_iota(np.int32, shape, axis)
        if reverse:
            where = L.cummin(L.select(hit, iota, L.broadcast_in_dim(np.int32(n), shape, ())),
                             axis, reverse=True)
        else:
            where = L.cummax(L.select(hit, iota, L.broadcast_in_dim(np.int32(-1), shape, ())),
                             axis)
        index = [where if d == axis else L.broadcasted_iota(np.int32, shape, d)
                 for d in range(len(shape))]
        from .indexing import gather_p
        return ans, gather_p.bind(t, *index, spec=tuple(("a", d) for d in range(len(shape))))
    prim.jvp = rule


cummax_p = _cumulative("cummax", np.maximum.accumulate, "real",
                       _device_scan(np.maximum, exact=True))
_cum_extreme_jvp(cummax_p)
_batch_cumulative(cummax_p)
register_lowering(cummax_p, "onnx", _cum_scan_onnx("max"))


cummin_p = _cumulative("cummin", np.minimum.accumulate, "real",
                       _device_scan(np.minimum, exact=True))
_cum_extreme_jvp(cummin_p)
_batch_cumulative(cummin_p)
register_lowering(cummin_p, "onnx", _cum_scan_onnx("min"))


# log(cumsum(exp(x))) without overflow: each step is a logaddexp of the running value
cumlogsumexp_p = _cumulative("cumlogsumexp", np.logaddexp.accumulate, "float",
                            _device_scan(np.logaddexp, exact=False))


def _cumlogsumexp_jvp(primals, tangents, *, axis, reverse=False):
    """``dy_i = sum_{j <= i} exp(x_j - y_i) t_j``, computed as the linear recurrence
    ``dy_i = a_i dy_{i-1} + b_i t_i`` with ``a_i = exp(y_{i-1} - y_i)`` and
    ``b_i = exp(x_i - y_i)``, both in [0, 1] (so nothing overflows), solved by a
    Hillis-Steele scan: each of the ceil(log2 n) steps adds ``a * shift(dy, d)`` and
    composes ``a <- a * shift(a, d)``. Linear in the tangent (mul/pad/add), so it
    transposes for reverse mode. Where the running value is -inf (only -inf so far)
    the weights are 0: a -inf entry gets a zero derivative, not NaN.
    """
    (x,), (t,) = primals, tangents
    y = cumlogsumexp_p.bind(x, axis=axis, reverse=reverse)
    if t is None:
        return y, None
    n = x.shape[axis]
    if n == 0:
        return y, t
    ninf, zero = L.full_like(x, -np.inf), L.full_like(x, 0)
    live = L.gt(y, ninf)                   # the running value is not -inf
    safe_y = L.select(live, y, zero)
    b = L.select(live, L.exp(L.sub(L.select(live, x, zero), safe_y)), zero)
    y_prev = _shifted(y, 1, -np.inf, axis, reverse)
    a = L.select(live, L.exp(L.sub(y_prev, safe_y)), zero)
    dy, d = L.mul(b, t), 1
    while d < n:
        dy = L.add(dy, L.mul(a, _shifted(dy, d, 0, axis, reverse)))
        if 2 * d < n:
            a = L.mul(a, _shifted(a, d, 0, axis, reverse))
        d *= 2
    return y, dy


cumlogsumexp_p.jvp = _cumlogsumexp_jvp
_batch_cumulative(cumlogsumexp_p)


def _cumlogsumexp_onnx(ctx, x, *, axis, reverse=False):
    """A Hillis-Steele scan (the one cummax/cummin use) whose combining step is the
    overflow-free logaddexp lowering, max + log1p(exp(-|a - b|)): ceil(log2 n) steps,
    each accurate to a few ulp however far apart the values are (no global shift, so
    large ranges and infinities are exact where the impl's are). float16/bfloat16
    compute in float32."""
    a = ctx.in_avals[0]
    dt = a.dtype
    cdt = dt if dt in (O.F32, O.F64) else O.F32
    xs = O.cast(ctx, x, dt, cdt)
    y = O.hillis_steele(ctx, xs, a.shape, axis % a.ndim, reverse, O.scalar(ctx, -np.inf, cdt),
                        lambda u, v: O.logaddexp(ctx, u, v, cdt), cdt)
    return O.cast(ctx, y, cdt, dt)


register_lowering(cumlogsumexp_p, "onnx", _cumlogsumexp_onnx)
