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
    return Primitive(name, shape_rule=shape_rule, impl=quiet(impl))


reduce_sum_p = _reducer("reduce_sum", np.sum, "num")
reduce_prod_p = _reducer("reduce_prod", np.prod, "num")
reduce_max_p = _reducer("reduce_max", np.max, "any", "max")
reduce_min_p = _reducer("reduce_min", np.min, "any", "min")
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


# --- batching rules ---------------------------------------------------------------------------
from ..transforms.vmap import batch_shifted  # noqa: E402

for _p in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p, reduce_or_p):
    batch_shifted(_p, lambda p, n, x: dict(axes=tuple(a % (x.ndim - 1) + 1 for a in p["axes"])))
for _p in (argmax_p, argmin_p):
    batch_shifted(_p, lambda p, n, x: dict(axes=tuple(a % (x.ndim - 1) + 1 for a in p["axes"]),
                                           index_dtype=p["index_dtype"]))
for _p in (cumsum_p, cumprod_p, cummax_p, cummin_p):
    batch_shifted(_p, lambda p, n, x: dict(axis=p["axis"] % (x.ndim - 1) + 1,
                                           reverse=p.get("reverse", False)))
