"""Reductions, arg-reductions and cumulative primitives.

``reduce_*`` keep the operand's dtype (``fnx.numpy`` chooses accumulation
dtypes before binding). Empty max/min reductions return the identity
(-inf/+inf or the integer extremes), as JAX does, instead of raising.
"""
from __future__ import annotations

import numpy as np


from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ._rules import KINDS, check_kind, describe, normalize_axes, quiet


def _reduced(x, axes, dtype=None):
    return ShapeDtypeStruct(tuple(s for i, s in enumerate(x.shape) if i not in axes),
                            x.dtype if dtype is None else dtype, x.weak_type and dtype is None)


def _identity(dtype, which):
    if dtype.kind in "fc":   # complex: -inf + 0j / inf + 0j, as JAX
        return -np.inf if which == "max" else np.inf
    if dtype.kind == "b":
        return which != "max"
    info = np.iinfo(dtype)
    return info.min if which == "max" else info.max


def _reducer(name, numpy_fn, kinds, which=None):
    def shape_rule(x, *, axes):
        check_kind(name, x, KINDS[kinds])
        return _reduced(x, normalize_axes(name, axes, x.ndim))

    def impl(x, *, axes):
        if which is not None and x.size == 0:
            axes = {a % x.ndim for a in axes}
            shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
            return np.full(shape, _identity(x.dtype, which), x.dtype)
        out = numpy_fn(x, axis=tuple(axes))
        return out if out.dtype == x.dtype else out.astype(x.dtype)
    prim = Primitive(name, shape_rule=shape_rule, impl=quiet(impl))
    if numpy_fn.__name__ == "reduce":  # a ufunc's own reduce: jit calls it directly

        def codegen(ins, params, bind_global, in_avals, out_avals):
            x = in_avals[0]
            if x.dtype.kind not in "fc" or 0 in x.shape:
                return None  # the impl's empty-input fill or dtype cast
            return f"{bind_global(name, numpy_fn)}({ins[0]}, axis={tuple(params['axes'])!r})"
        prim.numpy_codegen = codegen
    return prim


# the ufuncs' own reduce: what np.sum/prod/max/min call for arrays, without their wrappers
reduce_sum_p = _reducer("reduce_sum", np.add.reduce, "num")
reduce_prod_p = _reducer("reduce_prod", np.multiply.reduce, "num")
reduce_max_p = _reducer("reduce_max", np.maximum.reduce, "any", "max")
reduce_min_p = _reducer("reduce_min", np.minimum.reduce, "any", "min")
reduce_and_p = _reducer("reduce_and", lambda x, axis: np.bitwise_and.reduce(x, axis=axis),
                        "intbool")
reduce_or_p = _reducer("reduce_or", lambda x, axis: np.bitwise_or.reduce(x, axis=axis),
                       "intbool")


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
        return np.asarray(numpy_fn(x, axis=axes[0])).astype(index_dtype)
    return Primitive(name, shape_rule=shape_rule, impl=impl)


argmax_p = _arg_reducer("argmax", np.argmax)
argmin_p = _arg_reducer("argmin", np.argmin)


def _cumulative(name, numpy_fn, kinds):
    def shape_rule(x, *, axis, reverse=False):
        check_kind(name, x, KINDS[kinds])
        normalize_axes(name, (axis,), x.ndim)
        return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)

    def impl(x, *, axis, reverse=False):
        if reverse:
            x = np.flip(x, axis)
        out = numpy_fn(x, axis=axis)
        out = out if out.dtype == x.dtype else out.astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return Primitive(name, shape_rule=shape_rule, impl=quiet(impl))


cumsum_p = _cumulative("cumsum", np.cumsum, "num")
cumprod_p = _cumulative("cumprod", np.cumprod, "num")
cummax_p = _cumulative("cummax", np.maximum.accumulate, "real")
cummin_p = _cumulative("cummin", np.minimum.accumulate, "real")
# log(cumsum(exp(x))) without overflow: each step is a logaddexp of the running value
cumlogsumexp_p = _cumulative("cumlogsumexp", np.logaddexp.accumulate, "float")




# --- jvp rules -------------------------------------------------------------------------------
from ..transforms.jvp import deflinear, defjvp, defjvp_zero  # noqa: E402
from . import ops as L  # noqa: E402

deflinear(reduce_sum_p)
deflinear(cumsum_p)
for _p in (argmax_p, argmin_p, reduce_and_p, reduce_or_p):
    defjvp_zero(_p)


def _chosen_jvp(g, ans, x, *, axes):
    """Tangent of max/min: the mean of the tangents at the positions that attain it."""
    kept = tuple(d for d in range(x.ndim) if d not in axes)
    hit = L.convert_element_type(L.eq(x, L.broadcast_in_dim(ans, x.shape, kept)), g.dtype)
    return L.div(L.reduce_sum(L.mul(g, hit), axes), L.reduce_sum(hit, axes))


defjvp(reduce_max_p, _chosen_jvp)
defjvp(reduce_min_p, _chosen_jvp)


def _reduce_sum_transpose(ct, x, *, axes):
    kept = tuple(d for d in range(len(x.shape)) if d not in axes)
    return [L.broadcast_in_dim(ct, tuple(x.shape), kept)]


reduce_sum_p.transpose = _reduce_sum_transpose
cumsum_p.transpose = lambda ct, x, *, axis, reverse=False: [L.cumsum(ct, axis, not reverse)]


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


def _shifted(v, d, fill, axis, reverse):
    """``v`` moved ``d`` places along ``axis`` in the scan direction (towards higher
    indices, or lower ones when ``reverse``), ``fill`` in the vacated places."""
    config = [(0, 0, 0)] * v.ndim
    config[axis] = (-d, d, 0) if reverse else (d, -d, 0)
    return L.pad(v, fill, config)


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
    if t is None or x.dtype.kind not in "fc":
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
        if t is None or x.dtype.kind not in "fc":
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


_cum_extreme_jvp(cummax_p)
_cum_extreme_jvp(cummin_p)


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


# --- batching rules ---------------------------------------------------------------------------
from ..transforms.vmap import batch_shifted  # noqa: E402

for _p in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p):
    batch_shifted(_p, lambda p, n, x: dict(axes=tuple(a % (x.ndim - 1) + 1 for a in p["axes"])))
for _p in (argmax_p, argmin_p):
    batch_shifted(_p, lambda p, n, x: dict(axes=tuple(a % (x.ndim - 1) + 1 for a in p["axes"]),
                                           index_dtype=p["index_dtype"]))
for _p in (cumsum_p, cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
    batch_shifted(_p, lambda p, n, x: dict(axis=p["axis"] % (x.ndim - 1) + 1,
                                           reverse=p.get("reverse", False)))


# --- ONNX lowering ----------------------------------------------------------------------------
def _cumlogsumexp_onnx(ctx, x, *, axis, reverse=False):
    """A Hillis-Steele scan (the one cummax/cummin use) whose combining step is the
    overflow-free logaddexp lowering, max + log1p(exp(-|a - b|)): ceil(log2 n) steps,
    each accurate to a few ulp however far apart the values are (no global shift, so
    large ranges and infinities are exact where the impl's are). float16/bfloat16
    compute in float32."""
    from ..onnx import lowerings as O
    a = ctx.in_avals[0]
    dt = a.dtype
    cdt = dt if dt in (O.F32, O.F64) else O.F32
    xs = O._cast(ctx, x, dt, cdt)
    y = O._hillis_steele(ctx, xs, a.shape, axis % a.ndim, reverse, O._k(ctx, -np.inf, cdt),
                         lambda u, v: O._logaddexp(ctx, u, v, cdt), cdt)
    return O._cast(ctx, y, cdt, dt)


cumlogsumexp_p.onnx = _cumlogsumexp_onnx
