"""``fnx.jit``: trace once per input signature, lower to NumPy, cache.

A signature is the pytree structure of the dynamic arguments, each leaf's
shape, dtype and weak type, and the values of static arguments. The first
call with a signature traces the function into IR, removes dead code and
generates one NumPy function; later calls go straight to it. Called under
another transformation (or with tracers), a jitted function binds ``jit_p``,
a primitive that carries the IR, so outer transformations see one call.
"""
from __future__ import annotations

import functools
import sys
import weakref

import numpy as np

from .. import tree_util
from ..backends.buffers import RING_HELD
from ..backends.numpy_codegen import compile_ir
from ..core import dtypes
from ..core.array import Array, Tracer, _Deleted, to_array
from ..core.ir import IR, check_ir
from ..core.primitive import Primitive
from ..core.trace import EVAL, get_trace
from ..core.tracing import flatten_static, rebuild_call, trace_flat, _normalize_argnums
from ..errors import ShapeError

# --- the call primitive --------------------------------------------------------------------


def _compiled(ir: IR):
    c = _COMPILED.get(ir)
    if c is None:
        c = _COMPILED[ir] = compile_ir(ir, getattr(ir, "name", "jit"))
    return c


_COMPILED: "weakref.WeakKeyDictionary[IR, object]" = weakref.WeakKeyDictionary()


def _jit_rule(*args, ir, name):
    if [(a.shape, a.dtype) for a in args] != [(v.shape, v.dtype) for v in ir.in_avals]:
        raise ShapeError(f"jit[{name}]: called with {[a.shape for a in args]} but traced for "
                         f"{[v.shape for v in ir.in_avals]}")
    return ir.out_avals


def _jit_impl(*args, ir, name):
    return _compiled(ir)(*args)


jit_p = Primitive("jit", shape_rule=_jit_rule, impl=_jit_impl, multiple_results=True)


def _jit_jvp(primals, tangents, *, ir, name):
    """Differentiate a jitted call by evaluating its IR under the enclosing jvp trace.

    The derivative is inlined into the caller (it is recompiled with the caller when
    that is jitted); a call primitive of its own for the tangent comes with issue 3."""
    from ..core.ir import eval_ir
    from .jvp import jvp
    return jvp(lambda *xs: eval_ir(ir, *xs), tuple(primals),
               tuple(t if t is not None else _zeros(p) for p, t in zip(primals, tangents)))


def _zeros(p):
    from .jvp import zeros_like_tangent
    return zeros_like_tangent(p)


jit_p.jvp = _jit_jvp


def _jit_body(params):
    from ..core.ir import eval_ir
    return lambda *xs: eval_ir(params["ir"], *xs)


from .vmap import batch_by_inlining  # noqa: E402

batch_by_inlining(jit_p, _jit_body)


# --- the user-facing wrapper -----------------------------------------------------------------

class Lowered:
    """What ``jitted.lower(*args)`` returns: the IR and the generated NumPy code."""

    def __init__(self, entry, name):
        self._entry = entry
        self.ir = entry.ir
        self.name = name

    def as_text(self):
        return str(self.ir)

    __str__ = as_text

    @property
    def source(self):
        return self._entry.compiled.source

    def compile(self):
        return self._entry


class _Entry:
    """One cached signature: IR, out tree, generated code."""
    __slots__ = ("ir", "out_tree", "compiled", "fn", "out_weak", "in_tree", "in_avals", "name",
                 "single_array", "hoisted", "donated")

    def __init__(self, ir, out_tree, in_tree, name, donated=()):
        self.ir = ir
        self.out_tree = out_tree
        self.in_tree = in_tree
        self.in_avals = ir.in_avals
        self.name = name
        self.donated = tuple(donated)  # flat positions of donated leaves
        self.compiled = compile_ir(ir, name, self.donated) if donated else _compiled(ir)
        self.fn = self.compiled.fn
        self.out_weak = [a.weak_type for a in ir.out_avals]
        self.single_array = out_tree == _SINGLE_LEAF
        self.hoisted = None

    def run(self, raw, offered=None):
        """The outputs as Arrays; ``offered``: the donated buffers the call may reuse."""
        outs = self.fn(*raw) if offered is None else self.fn(*raw, _dn=offered)
        return [Array._wrap(o, w) for o, w in zip(outs, self.out_weak)]

    def __call__(self, *args, **kwargs):
        """Call the compiled function; arguments must match the lowered signature."""
        leaves, in_tree = tree_util.tree_flatten((args, kwargs))
        if in_tree != self.in_tree:
            raise TypeError(f"{self.name}: compiled for arguments structured as {self.in_tree}, "
                            f"called with {in_tree}")
        arrays = [to_array(x) for x in leaves]
        for i, (a, want) in enumerate(zip(arrays, self.in_avals)):
            if a.shape != want.shape or a.dtype != want.dtype:
                raise TypeError(f"{self.name}: argument leaf {i} is {a.aval.str_short()} but "
                                f"the function was compiled for {want.str_short()}")
        return tree_util.tree_unflatten(self.out_tree, self.run([a._value for a in arrays]))


_SINGLE_LEAF = tree_util.tree_structure(0)


def _leaf_key(x):
    if type(x) is Array:
        v = x._value
        return (v.shape, v.dtype, x.weak_type)
    r = dtypes.python_scalar_dtype(x)
    if r is not None:
        return ((), r[0], r[1])
    if isinstance(x, Tracer):
        return (x.shape, x.dtype, x.weak_type, "tracer")
    a = to_array(x)
    return (a.shape, a.dtype, a.weak_type)


class JitFunction:
    """A jit-compiled function (see ``fnx.jit``)."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums):
        self.fun = fun
        self.name = getattr(fun, "__name__", "fun")
        self.static_argnums = _normalize_argnums(static_argnums)
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) \
            else tuple(static_argnames or ())
        self.donate_argnums = _normalize_argnums(donate_argnums)
        overlap = set(self.static_argnums) & set(self.donate_argnums)
        if overlap:
            raise ValueError(f"jit({self.name}): argnums {sorted(overlap)} are both static "
                             "and donated; a static argument has no buffer to donate")
        self._cache = {}
        self._fast = {}        # (per-argument keys) -> entry: arguments all Arrays
        self._fast_trees = {}  # (pytree structure, per-leaf keys) -> entry: Array leaves
        self.trace_count = 0
        functools.update_wrapper(self, fun)

    def _cache_size(self):
        return len(self._cache)

    def _signature(self, args, kwargs):
        try:
            static, leaves, in_tree = flatten_static(args, kwargs, self.static_argnums,
                                                     self.static_argnames)
            key = (static, in_tree, tuple(_leaf_key(x) for x in leaves))
            hash(key)
        except TypeError as e:
            if "unhashable" in str(e):
                raise TypeError(f"jit({self.name}): static arguments must be hashable; got "
                                f"{static}. Pass arrays as regular (traced) arguments.") \
                    from None
            raise
        return key, static, leaves, in_tree

    def _trace(self, static, leaves, in_tree):
        flat_fun, out_tree = rebuild_call(self.fun, static, in_tree, self.static_argnums)
        avals = [x.aval if isinstance(x, Array) else to_array(x).aval for x in leaves]
        ir = trace_flat(flat_fun, avals, self.name)
        self.trace_count += 1
        return ir, out_tree[0]

    def _entry(self, key, static, leaves, in_tree, args=()):
        entry = self._cache.get(key)
        if entry is None:
            ir, out_tree = self._trace(static, leaves, in_tree)
            if any(isinstance(c, Tracer) for c in ir.consts):
                return None, ir, out_tree  # closes over an outer trace: not cacheable
            check_ir(ir)
            ir.name = self.name
            entry = self._cache[key] = _Entry(ir, out_tree, in_tree, self.name,
                                              self._donated_positions(args))
        return entry, entry.ir, entry.out_tree

    def _donated_positions(self, args):
        """The flat leaf positions of the donated arguments (leaves of the dynamic
        arguments in order; static ones are not leaves)."""
        if not self.donate_argnums:
            return ()
        positions, start = [], 0
        for i, a in enumerate(args):
            if i in self.static_argnums:
                continue
            n = len(tree_util.tree_leaves(a))
            if i in self.donate_argnums:
                positions.extend(range(start, start + n))
            start += n
        return positions

    def _offer_donated(self, entry, raw, leaves, args):
        """The donated leaves' buffers the call may reuse (those nothing but their Array
        references: no other Array, view or export; None for the others), taken after
        invalidating the donated Arrays."""
        offered = [raw[k] if type(leaves[k]) is Array and _sole_buffer(raw, k) else None
                   for k in entry.donated]
        self._donate(args)
        return offered

    def __call__(self, *args, **kwargs):
        if not kwargs and get_trace() is EVAL:
            fast = self._fast.get(tuple(map(_fast_key, args)))
            if fast is not None:  # concrete Arrays, known signature
                leaves = args
            elif self._fast_trees:  # pytrees of concrete Arrays, known signature
                leaves, tree = tree_util.tree_flatten(args)
                fast = self._fast_trees.get((tree, tuple(map(_fast_key, leaves))))
            if fast is not None:
                raw = [a._value for a in leaves]
                if fast.donated:
                    outs = fast.fn(*raw, _dn=self._offer_donated(fast, raw, leaves, args))
                else:
                    outs = fast.fn(*raw)
                if fast.single_array:
                    return Array._wrap(outs[0], fast.out_weak[0])
                return tree_util.tree_unflatten(fast.out_tree, [
                    Array._wrap(o, w) for o, w in zip(outs, fast.out_weak)])
        key, static, leaves, in_tree = self._signature(args, kwargs)
        if get_trace() is EVAL and not any(isinstance(x, Tracer) for x in leaves):
            entry, ir, out_tree = self._entry(key, static, leaves, in_tree, args)
            raw = []
            for x in leaves:
                v = x._value if type(x) is Array else to_array(x)._value
                if type(v) is _Deleted:
                    v.dtype  # raises DeletedArrayError
                raw.append(v)
            if not kwargs and not self.static_argnums and all(type(x) is Array for x in leaves):
                if all(type(a) is Array for a in args):
                    self._fast[tuple(map(_fast_key, args))] = entry
                else:
                    self._fast_trees[(tree_util.tree_structure(args),
                                      tuple(map(_fast_key, leaves)))] = entry
            outs = entry.run(raw, self._offer_donated(entry, raw, leaves, args)
                             if entry.donated else None)
            return tree_util.tree_unflatten(out_tree, outs)
        # Under a transformation: bind the call primitive on the current trace.
        entry = self._cache.get(key)
        if entry is not None:
            if entry.hoisted is None:
                entry.hoisted = entry.ir.hoist_consts()
            ir, consts = entry.hoisted
            out_tree = entry.out_tree
        else:
            ir, out_tree = self._trace(static, leaves, in_tree)
            ir, consts = ir.hoist_consts()
        ir.name = self.name
        outs = jit_p.bind(*consts, *[to_array(x) for x in leaves], ir=ir, name=self.name)
        return tree_util.tree_unflatten(out_tree, outs)

    def _donate(self, args):
        for i in self.donate_argnums:
            if i < len(args):
                for leaf in tree_util.tree_leaves(args[i]):
                    if type(leaf) is Array:
                        leaf._value = _Deleted(f"jit({self.name})")

    def lower(self, *args, **kwargs):
        """The IR (and generated code) for these arguments, without running it."""
        key, static, leaves, in_tree = self._signature(args, kwargs)
        entry, ir, out_tree = self._entry(key, static, leaves, in_tree, args)
        if entry is None:
            raise TypeError(f"jit({self.name}).lower: arguments include tracers of an "
                            "enclosing transformation; call lower outside it")
        return Lowered(entry, self.name)

    def eval_shape(self, *args, **kwargs):
        from ..core.tracing import eval_shape
        return eval_shape(self.fun, *args, **kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


def _buffer_refs(raw, k):
    return sys.getrefcount(raw[k])


def _sole_buffer(raw, k):
    """Whether ``raw[k]`` is a C-contiguous ndarray owning its memory that nothing
    references but ``raw``, the one Array holding it and (for an earlier output) the
    ring it came from; if so it is made writeable."""
    refs = _buffer_refs(raw, k)
    if refs != _SOLE_REFS and not (refs == _SOLE_REFS + 1
                                   and RING_HELD.get(id(raw[k])) is raw[k]):
        return False
    v = raw[k]
    if type(v) is not np.ndarray or v.base is not None or not v.flags.c_contiguous:
        return False
    v.flags.writeable = True  # read-only only to keep others from writing: none are left
    return True


def _sole_refs():
    """``_buffer_refs`` of a buffer held by a list and one Array only (it depends on the
    interpreter, so it is measured)."""
    a = Array._wrap(np.empty(1))
    raw = [a._value]
    return _buffer_refs(raw, 0)


_SOLE_REFS = _sole_refs()


def _fast_key(a):
    if type(a) is not Array:
        return _NO_FAST
    v = a._value
    return (v.shape, v.dtype, a.weak_type)


_NO_FAST = object()  # marks a non-Array argument: such calls are never put in the fast table


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=()):
    """Compile ``fun`` for each input signature (shapes, dtypes, pytree structure,
    static argument values) and run the compiled NumPy code.

    Usable as ``@jit``, ``jit(f, static_argnums=1)`` or
    ``@partial(jit, static_argnames='n')``.
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums)
    return JitFunction(fun, static_argnums, static_argnames, donate_argnums)
