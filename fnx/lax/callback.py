"""Calling Python from traced code: ``debug_callback``, ``pure_callback``, ``io_callback``.

A callback primitive carries a Python function as a param and calls it from its impl
with the NumPy values of its operands, so the call happens when the program *runs*:
eagerly at once, under ``jit`` on every call of the compiled function (the generated
code calls the impl), never at trace time.

- ``debug_callback`` (``fnx.debug.callback``, ``fnx.debug.print``) has no outputs and is
  *effectful* (``effectful = True``): DCE keeps it, CSE never merges two, the lowering
  never folds it, loops never hoist it (``fnx.core.ir.has_effects``). Its jvp calls it on
  the primal values only, so under ``grad`` it runs once, in the forward pass; under
  ``vmap`` it runs once per batch element (as JAX's does), in order.
- ``pure_callback`` (``fnx.pure_callback``) returns arrays of declared shapes and
  dtypes and has no effect: unused results are dropped with the call, as JAX does. It
  has no derivative (wrap it in ``custom_jvp``); under ``vmap`` it follows
  ``vmap_method`` (``"sequential"``, ``"sequential_unrolled"``, ``"expand_dims"``,
  ``"broadcast_all"``), which JAX makes the caller choose.
- ``io_callback`` (``fnx.experimental.io_callback``'s semantics): a ``pure_callback``
  that is effectful (it runs even when its results are unused).

Effects run in program order: fnx's lowering is straight-line code in IR order, so
``ordered=True`` holds for every callback.
"""
from __future__ import annotations

import numpy as np

from .. import tree_util
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError

__all__ = ["debug_callback_p", "pure_callback_p", "io_callback_p", "debug_callback",
           "pure_callback", "io_callback"]


# --- debug_callback --------------------------------------------------------------------------

def _debug_shape(*avals, callback):
    return []


def _debug_impl(*vals, callback):
    callback(*vals)
    return []


debug_callback_p = Primitive("debug_callback", shape_rule=_debug_shape, impl=_debug_impl,
                             multiple_results=True)
debug_callback_p.effectful = True
debug_callback_p.host_callback = True  # the callback sees NumPy values, on any device
debug_callback_p.cache_eager_vjp = False  # a fresh callback object per call: nothing to cache
debug_callback_p.not_needed = {"transpose": "no outputs, and not linear in its operands"}


def _debug_jvp(primals, tangents, *, callback):
    debug_callback_p.bind(*primals, callback=callback)  # the forward pass only
    return [], []


debug_callback_p.jvp = _debug_jvp


def _index(x, i):
    """``x[i]`` along axis 0 (a static ``i``) with lax ops, on any trace."""
    from . import ops as L
    return L.squeeze(L.slice_in_dim(x, i, i + 1, axis=0), (0,))


def _debug_batch(vals, dims, size, *, callback):
    # JAX's rule: one call per batch element, in order, each seeing its own slice.
    for i in range(size):
        debug_callback_p.bind(*[v if d is None else _index(v, i) for v, d in zip(vals, dims)],
                              callback=callback)
    return [], []


debug_callback_p.batch = _debug_batch


class DebugCallback:
    """The ``callback`` param of ``debug_callback``: calls ``fn(*args, **kwargs)`` with the
    call's pytrees rebuilt, array leaves as fnx Arrays (copies: the callback may keep
    them) and the other leaves as given."""
    __slots__ = ("fn", "in_tree", "static", "weak", "__name__")

    def __init__(self, fn, in_tree, static, weak, name):
        self.fn, self.in_tree, self.static, self.weak = fn, in_tree, static, weak
        self.__name__ = name

    def leaves(self, vals):
        it = iter(vals)
        return [next(it) if s is _DYNAMIC else s for s in self.static]

    def __call__(self, *vals):
        arrays = []
        for v, w in zip(vals, self.weak):
            c = np.array(v)
            c.flags.writeable = False
            arrays.append(Array._wrap(c if c.ndim else c[()], w))
        args, kwargs = tree_util.tree_unflatten(self.in_tree, self.leaves(arrays))
        self.fn(*args, **kwargs)

    def __repr__(self):
        return self.__name__


_DYNAMIC = object()


def _is_dynamic(x):
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex))


def split_args(args, kwargs):
    """(dynamic leaves as fnx values, static template, in_tree): array-like leaves
    (arrays, tracers, Python numbers) are operands; others (strings, None, objects) are
    kept as they are in the template."""
    leaves, in_tree = tree_util.tree_flatten((tuple(args), dict(kwargs)))
    dyn, static = [], []
    for x in leaves:
        if _is_dynamic(x):
            dyn.append(to_array(x))
            static.append(_DYNAMIC)
        else:
            static.append(x)
    return dyn, static, in_tree


def debug_callback(fn, *args, name=None, **kwargs):
    """Bind ``fn(*args, **kwargs)`` as an effect (see ``fnx.debug.callback``)."""
    if not callable(fn):
        raise TypeError(f"debug.callback: the callback must be callable, got "
                        f"{type(fn).__name__}")
    dyn, static, in_tree = split_args(args, kwargs)
    label = name or getattr(fn, "__name__", type(fn).__name__)
    cb = DebugCallback(fn, in_tree, static, [a.weak_type for a in dyn], label)
    debug_callback_p.bind(*dyn, callback=cb)


# --- pure_callback / io_callback -----------------------------------------------------------

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


class ResultCallback:
    """The ``callback`` param of ``pure_callback``/``io_callback``: calls ``fn`` with the
    operands as (read-only) NumPy arrays in the call's pytrees and checks what it returns
    against the declared results (cast to the declared dtypes, as JAX does)."""
    __slots__ = ("fn", "in_tree", "static", "out_tree", "what", "__name__")

    def __init__(self, fn, in_tree, static, out_tree, what):
        self.fn, self.in_tree, self.static = fn, in_tree, static
        self.out_tree, self.what = out_tree, what
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, vals, result_avals):
        it = iter(vals)
        leaves = [next(it) if s is _DYNAMIC else s for s in self.static]
        args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
        out = self.fn(*args, **kwargs)
        outs, tree = tree_util.tree_flatten(out)
        if tree != self.out_tree:
            raise TypeError(f"{self.what}: the callback {self.__name__} returned a "
                            f"{tree}, but result_shape_dtypes declares a {self.out_tree}")
        res = []
        for k, (o, a) in enumerate(zip(outs, result_avals)):
            o = np.asarray(o)
            if o.shape != a.shape:
                raise ShapeError(f"{self.what}: the callback {self.__name__} returned an "
                                 f"array of shape {o.shape} for result {k}, declared as "
                                 f"{a.str_short()}; return the declared shape or fix "
                                 f"result_shape_dtypes")
            res.append(o.astype(a.dtype, copy=False))
        return res

    def __repr__(self):
        return self.__name__


def _result_shape(*avals, callback, result_avals, vmap_method):
    return list(result_avals)


def _result_impl(*vals, callback, result_avals, vmap_method):
    ro = []
    for v in vals:
        if isinstance(v, np.ndarray) and v.flags.writeable:
            v = v.view()
            v.flags.writeable = False
        ro.append(v)
    return callback(ro, result_avals)


pure_callback_p = Primitive("pure_callback", shape_rule=_result_shape, impl=_result_impl,
                            multiple_results=True)
io_callback_p = Primitive("io_callback", shape_rule=_result_shape, impl=_result_impl,
                          multiple_results=True)
io_callback_p.effectful = True
for _p in (pure_callback_p, io_callback_p):
    _p.host_callback = True  # the callback gets NumPy arrays and returns host values
    _p.cache_eager_vjp = False
    _p.not_needed = {"transpose": "not differentiable (use custom_jvp/custom_vjp)"}


def _no_jvp(prim, api):
    def rule(primals, tangents, **params):
        raise ValueError(
            f"{api}: a Python callback has no derivative, so it cannot be differentiated "
            f"(jvp, grad). Wrap the function calling it in fnx.custom_jvp or "
            f"fnx.custom_vjp and give the derivative there, or apply "
            f"fnx.lax.stop_gradient to its operands.")
    prim.jvp = rule


_no_jvp(pure_callback_p, "pure_callback")
_no_jvp(io_callback_p, "io_callback")


def _result_batch_rule(prim, api):
    def rule(vals, dims, size, *, callback, result_avals, vmap_method):
        from . import ops as L
        params = dict(callback=callback, result_avals=result_avals, vmap_method=vmap_method)
        if vmap_method in ("sequential", "sequential_unrolled"):
            per = [prim.bind(*[v if d is None else _index(v, i) for v, d in zip(vals, dims)],
                             **params) for i in range(size)]
            outs = [L.concatenate([L.expand_dims(p[k], (0,)) for p in per], 0)
                    for k in range(len(result_avals))]
            return outs, [0] * len(outs)
        if vmap_method in ("expand_dims", "broadcast_all"):
            ins = []
            for v, d in zip(vals, dims):
                if d is None:
                    v = L.expand_dims(v, (0,))
                    if vmap_method == "broadcast_all":
                        v = L.broadcast_in_dim(v, (size,) + tuple(v.shape[1:]),
                                               tuple(range(v.ndim)))
                ins.append(v)
            batched = tuple(ShapeDtypeStruct((size,) + a.shape, a.dtype)
                            for a in result_avals)
            outs = prim.bind(*ins, callback=callback, result_avals=batched,
                             vmap_method=vmap_method)
            return list(outs), [0] * len(outs)
        raise NotImplementedError(
            f"{api} under vmap: pass vmap_method= one of {', '.join(map(repr, _VMAP_METHODS))}"
            f" (got {vmap_method!r}): 'sequential' calls the callback once per batch "
            "element; 'expand_dims' calls it once with the batch as a leading axis (unbatched"
            " operands get a size-1 axis); 'broadcast_all' likewise with every operand "
            "broadcast to the batch size")
    prim.batch = rule


_result_batch_rule(pure_callback_p, "pure_callback")
_result_batch_rule(io_callback_p, "io_callback")


def _result_avals(result_shape_dtypes, what):
    leaves, tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = []
    for x in leaves:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(f"{what}: result_shape_dtypes must be a pytree of objects with "
                            f"shape and dtype (fnx.ShapeDtypeStruct, arrays), got "
                            f"{type(x).__name__}")
        avals.append(ShapeDtypeStruct(tuple(x.shape), dtypes.canonical(x.dtype, what)))
    return tuple(avals), tree


def _bind_result_callback(prim, what, callback, result_shape_dtypes, args, kwargs,
                          vmap_method):
    if not callable(callback):
        raise TypeError(f"{what}: the callback must be callable, got "
                        f"{type(callback).__name__}")
    if vmap_method is not None and vmap_method not in _VMAP_METHODS:
        raise ValueError(f"{what}: vmap_method must be one of "
                         f"{', '.join(map(repr, _VMAP_METHODS))} or None, got {vmap_method!r}")
    avals, out_tree = _result_avals(result_shape_dtypes, what)
    dyn, static, in_tree = split_args(args, kwargs)
    cb = ResultCallback(callback, in_tree, static, out_tree, what)
    outs = prim.bind(*dyn, callback=cb, result_avals=avals, vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """``callback(*args, **kwargs)`` run on NumPy arrays from traced code, returning arrays
    of ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct``). The callback must be
    pure: fnx may drop the call when its results are unused. ``sharding`` is accepted
    and ignored (one device)."""
    return _bind_result_callback(pure_callback_p, "pure_callback", callback,
                                 result_shape_dtypes, args, kwargs, vmap_method)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False,
                **kwargs):
    """Like ``pure_callback`` but with effects: it runs whether or not its results are
    used, once per call (under vmap once per batch element). ``ordered`` holds always."""
    return _bind_result_callback(io_callback_p, "io_callback", callback,
                                 result_shape_dtypes, args, kwargs, "sequential")
