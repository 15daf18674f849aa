"""``fnx.jit``: trace once per input signature, lower to NumPy, cache.

A signature is the pytree structure of the dynamic arguments, each leaf's
shape, dtype and weak type, the values of static arguments, and the config
flags that change what a trace means (``config.trace_context()``: x64, the
promotion modes, ...). The first call with a signature traces the function
into IR, removes dead code and generates one NumPy function; later calls go
straight to it. As in JAX the traces belong to the function (held weakly,
compared by identity) and the jit options, not to the wrapper, so
``jit(f)(x)`` in a loop traces once. Called under another transformation (or
with tracers), a jitted function binds ``jit_p``, a primitive that carries the
IR, so outer transformations see one call.

Memory is bounded: a function keeps at most ``MAX_SIGNATURES`` signatures (least
recently used evicted first); its traces and code go with the function; the buffers
compiled code keeps between calls are released when idle or over a budget
(``fnx.backends.buffers``); ``clear_caches()`` drops all of it.

Flags read here: ``jax_disable_jit`` (call the function itself),
``jax_debug_nans``/``jax_debug_infs`` (check every float value the compiled
code computes; on a hit, re-run the IR one equation at a time to name the
primitive and line), ``jax_log_compiles`` and ``jax_explain_cache_misses``
(log to the ``"fnx"`` logger at WARNING, as JAX does).
"""
from __future__ import annotations

import functools
import inspect
import logging
import sys
import time
import weakref

import numpy as np

from .. import tree_util
from .._config import TRACE_FLAGS, config
from ..backends import apply_ir, available_backends, get_backend
from ..core.axis_env import bound_frames
from ..core.backend import DEVICE_BACKENDS, place
from ..core import dtypes, profiling
from ..core.array import Array, DeletedBuffer, Tracer, to_array
from ..core.ir import IR, check_ir
from ..core.primitive import Primitive
from ..core.trace import EVAL, check_ir_values, get_trace, nonfinite_kind, user_frame_info
from ..core.primitive import ShapeDtypeStruct
from ..core.tracing import (abstractify, flatten_static, normalize_argnums, rebuild_call,
                            trace_flat)
from ..errors import ShapeError

# --- the call primitive --------------------------------------------------------------------


_NUMPY = get_backend("numpy")


def _jit_rule(*args, ir, name):
    if [(a.shape, a.dtype) for a in args] != [(v.shape, v.dtype) for v in ir.in_avals]:
        raise ShapeError(f"jit[{name}]: called with {[a.shape for a in args]} but traced for "
                         f"{[v.shape for v in ir.in_avals]}")
    return ir.out_avals


def _jit_impl(*args, ir, name):
    return apply_ir(ir, *args)


_LOG = logging.getLogger("fnx")

jit_p = Primitive("jit", shape_rule=_jit_rule, impl=_jit_impl, multiple_results=True)
jit_p.call_body = lambda eqn: eqn.params["ir"]


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

class ArgInfo:
    """One dynamic argument leaf of a staged function (JAX's ``stages.ArgInfo``): its
    abstract value (``shape``, ``dtype``) and whether it is donated."""
    __slots__ = ("_aval", "donated")

    def __init__(self, aval, donated):
        from .._api import ShapedArray
        self._aval = ShapedArray(aval.shape, aval.dtype, aval.weak_type)
        self.donated = bool(donated)

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)

    def __eq__(self, other):
        return (type(other) is ArgInfo and self.donated == other.donated
                and (self.shape, self.dtype) == (other.shape, other.dtype))

    def __hash__(self):
        return hash((self.shape, self.dtype, self.donated))

    def __repr__(self):
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


class _StageInfo:
    """What every stage of an ahead-of-time compiled function tells about it (JAX's
    ``Traced``, ``Lowered`` and ``Compiled`` share these): ``in_tree``/``out_tree``,
    ``args_info`` (the dynamic arguments as a pytree ``(args, kwargs)`` of ``ArgInfo``;
    static ones are not in it), ``out_info`` (the outputs as a pytree of
    ``ShapeDtypeStruct``), ``in_avals`` and ``donate_argnums``."""
    __slots__ = ()

    @property
    def _stage_entry(self):
        return self._entry

    in_tree = property(lambda self: self._stage_entry.in_tree)
    out_tree = property(lambda self: self._stage_entry.out_tree)

    @property
    def args_info(self):
        e = self._stage_entry
        donated = set(e.donated)
        return tree_util.tree_unflatten(e.in_tree, [ArgInfo(a, i in donated)
                                                    for i, a in enumerate(e.ir.in_avals)])

    @property
    def in_avals(self):
        from .._api import ShapedArray
        e = self._stage_entry
        return tree_util.tree_unflatten(e.in_tree, [ShapedArray(a.shape, a.dtype, a.weak_type)
                                                    for a in e.ir.in_avals])

    @property
    def out_info(self):
        e = self._stage_entry
        return tree_util.tree_unflatten(e.out_tree, [
            ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in e.ir.out_avals])

    @property
    def donate_argnums(self):
        return tuple(getattr(self, "_donate_argnums", ()))

    def cost_analysis(self):
        """An estimate of the work the function does, as JAX's dict: ``'flops'`` (one per
        element of each arithmetic result, ``2*M*N*K`` per contraction, ``n - 1`` adds per
        reduced group), ``'transcendentals'`` (one per element of exp, sin, tanh, ...) and
        ``'bytes accessed'`` (the inputs and outputs). Counted on fnx's IR, not XLA's fused
        program, so only the contraction and elementwise counts match JAX's exactly."""
        return _cost_analysis(self._stage_entry.ir)


_ARITH = frozenset("""abs add and clamp copysign div eq floor_divide ge gt le lt max min mul ne
neg not or rem select_n sign square sub xor integer_pow reciprocal ceil floor round
is_finite isinf isnan shift_left shift_right_arithmetic shift_right_logical cumsum cummax
cummin cumprod""".split())
_TRANSCENDENTAL = frozenset("""acos acosh asin asinh atan atan2 atanh cbrt cos cosh erf erf_inv
erfc exp exp2 expm1 lgamma digamma log log10 log1p log2 logaddexp logistic pow rsqrt sin
sinh sqrt tan tanh""".split())


def _size(aval):
    return int(np.prod(aval.shape, dtype=np.int64))


def _cost_analysis(ir):
    flops = trans = 0
    for e in ir.eqns:
        name = e.prim.name
        if name == "dot_general":
            (lc, _), _ = e.params["dimension_numbers"]
            k = int(np.prod([e.inputs[0].aval.shape[d] for d in lc], dtype=np.int64))
            flops += 2 * k * _size(e.outputs[0].aval)
        elif name in _ARITH:
            flops += sum(_size(v.aval) for v in e.outputs)
        elif name in _TRANSCENDENTAL:
            trans += sum(_size(v.aval) for v in e.outputs)
        elif name.startswith("reduce_") and not name.startswith("reduce_window"):
            flops += _size(e.inputs[0].aval) - _size(e.outputs[0].aval)
    nbytes = sum(_size(a) * np.dtype(a.dtype).itemsize for a in (*ir.in_avals, *ir.out_avals))
    return {"flops": float(flops), "transcendentals": float(trans),
            "bytes accessed": float(nbytes)}


class Traced(_StageInfo):
    """What ``jit(f).trace(*args)`` returns (JAX's ``stages.Traced``): the traced function
    as a ``ClosedJaxpr`` (``.jaxpr``; ``str()`` is the jaxpr text), its name
    (``.fun_name``), argument and output types (``.args_info``, ``.out_info``), and
    ``.lower()``, whose ``.compile()`` gives the function compiled for these types."""

    def __init__(self, entry, name, donate_argnums=()):
        self._entry = entry
        self.fun_name = name
        self._donate_argnums = donate_argnums

    @property
    def jaxpr(self):
        from .._api import ClosedJaxpr
        return ClosedJaxpr(self._entry.ir)

    out_avals = property(lambda self: list(self._entry.ir.out_avals))

    def lower(self, *, lowering_platforms=None):
        if lowering_platforms is not None and tuple(lowering_platforms) != ("cpu",):
            raise ValueError(f"jit({self.fun_name}).trace(...).lower: fnx lowers for the CPU "
                             f"only, got lowering_platforms={lowering_platforms!r}")
        return Lowered(self._entry, self.fun_name, self._donate_argnums)

    def __repr__(self):
        return f"<fnx Traced stage of {self.fun_name}>"


class Lowered(_StageInfo):
    """What ``jitted.lower(*args)`` (or ``.trace(*args).lower()``) returns: the IR
    (``.ir``, ``.as_text()``), the generated program (``.source``; on a GPU also
    ``.kernels``, the CUDA source of its kernels) and ``.compile()``, the function compiled
    for these argument types."""

    def __init__(self, entry, name, donate_argnums=()):
        self._entry = entry
        self.ir = entry.ir
        self.name = name
        self._donate_argnums = donate_argnums

    def as_text(self, dialect=None, **kwargs):
        return str(self.ir)

    __str__ = as_text

    @property
    def source(self):
        """The generated program (Python over NumPy, or over CuPy on a GPU)."""
        return self._entry.compiled.source

    @property
    def kernels(self):
        """The CUDA source of each generated kernel (a GPU program; [] on the CPU)."""
        return list(getattr(self._entry.compiled, "kernels", ()))

    @property
    def device_platform(self):
        """The platform of the backend it was lowered for ("cpu", "gpu")."""
        return self._entry.backend.platform

    def compile(self, compiler_options=None):
        return self._entry


class _Entry(_StageInfo):
    """One cached signature: IR, out tree, generated code (also what
    ``jit(f).lower(...).compile()`` returns: call it with arguments of the lowered types)."""
    __slots__ = ("ir", "out_tree", "compiled", "fn", "out_weak", "in_tree", "in_avals", "name",
                 "backend", "single_array", "hoisted", "donated", "ctx", "checked", "hit", "fast_keys")

    def __init__(self, ir, out_tree, in_tree, name, donated=(), backend=None):
        self.backend = backend = _NUMPY if backend is None else backend
        self.ir = ir
        self.out_tree = out_tree
        self.in_tree = in_tree
        self.in_avals = ir.in_avals
        self.name = name
        self.donated = tuple(donated)  # flat positions of donated leaves
        self.compiled = (backend.compile(ir, name, self.donated) if donated
                         else backend.executable(ir))
        self.fn = self.compiled.fn
        self.out_weak = [a.weak_type for a in ir.out_avals]
        self.single_array = out_tree == _SINGLE_LEAF
        self.hoisted = None
        self.ctx = None      # the trace context it was made under (the fast path checks it)
        self.checked = None  # the variant returning intermediates too (jax_debug_nans)
        self.hit = False     # called since the cache's last eviction sweep passed it
        self.fast_keys = set()  # (0: fast, 1: fast_trees, key): the fast-table keys to it

    _stage_entry = property(lambda self: self)

    def as_text(self):
        return str(self.ir)

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
        for x in leaves:
            if isinstance(x, (Tracer, ShapeDtypeStruct)):
                raise TypeError(
                    f"{self.name}: a function lowered and compiled for one signature takes "
                    f"concrete arrays, got a {type(x).__name__} "
                    f"({x.aval.str_short() if isinstance(x, Tracer) else x}); "
                    "transformations (vmap, grad, ...) and placeholders need the jitted "
                    "function itself: apply them to jit(f), not to jit(f).lower(...).compile()")
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
    if isinstance(x, ShapeDtypeStruct):  # a placeholder (trace/lower without data)
        a = abstractify(x, "jit")
        return (a.shape, a.dtype, a.weak_type)
    if type(x) is np.ndarray and x.dtype in dtypes.SUPPORTED_SET:
        # the dtype the call's conversion gives, without copying the data to find it
        return (x.shape, dtypes.NARROW.get(x.dtype, x.dtype), False)
    a = to_array(x)
    return (a.shape, a.dtype, a.weak_type)


# --- the cache: the function's, not the wrapper's --------------------------------------------
# As in JAX, ``jit(f)(x)`` in a loop traces ``f`` once: traces are cached per function
# (held weakly, compared by identity: a new lambda or ``functools.partial`` object is a new
# function, and so is a bound method once the previous one is gone) and per jit options,
# and each signature's key includes ``config.trace_context()`` (x64 and the other flags
# that change what a traced function means).
#
# Each cache keeps at most ``MAX_SIGNATURES`` signatures. Past that, adding one evicts the
# least recently used (approximately: the "clock" scheme, so a call that hits the cache
# only sets a flag on the entry; eviction passes over the entries in insertion order,
# giving each flagged one a second chance). An evicted signature traces again when it
# is next called; its compiled code and buffers are freed. JAX bounds its C++ jit cache
# (an LRU shared by all functions) at 8192 signatures and its Python trace caches at
# 4096 each, with no flag to change them; here it is this module constant.

MAX_SIGNATURES = 4096


# JAX's stages.Compiled: what lowered.compile() returns
Compiled = _Entry


class _Cache:
    """The traces of one (function, jit options): signature key -> _Entry."""
    __slots__ = ("entries", "fast", "fast_trees", "traced", "trace_count", "__weakref__")

    def __init__(self):
        self.entries = {}
        self.fast = {}        # (per-argument keys) -> entry: arguments all Arrays
        self.fast_trees = {}  # (pytree structure, per-leaf keys) -> entry: Array leaves
        self.traced = {}      # key -> (IR, hoisted consts, out tree): traced under a transform
        self.trace_count = 0

    def clear(self):
        self.entries.clear()
        self.fast.clear()
        self.fast_trees.clear()
        self.traced.clear()

    def add(self, key, entry):
        """Cache ``entry`` for ``key``, evicting the least recently used past
        ``MAX_SIGNATURES``."""
        entries = self.entries
        while entries and len(entries) >= max(1, MAX_SIGNATURES):
            old_key = next(iter(entries))
            old = entries.pop(old_key)
            if old.hit:  # used since the last pass: a second chance, at the end
                old.hit = False
                entries[old_key] = old
                continue
            for which, k in old.fast_keys:
                table = self.fast_trees if which else self.fast
                if table.get(k) is old:
                    del table[k]
        entries[key] = entry

    def add_fast(self, which, key, entry):
        """``entry`` in the fast table ``which`` (0: ``fast``, 1: ``fast_trees``);
        remembered on it by name, not by table, so no cycle keeps a dead cache alive."""
        (self.fast_trees if which else self.fast)[key] = entry
        entry.fast_keys.add((which, key))


_FUN_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # fun -> {options: _Cache}
_ALL_CACHES: "weakref.WeakSet[_Cache]" = weakref.WeakSet()


def _per_fun(fun):
    """``fun``'s table: jit options -> _Cache, and the options as given -> resolved."""
    try:
        per_fun = _FUN_CACHES.get(fun)
        if per_fun is None:
            per_fun = _FUN_CACHES[fun] = {}
    except TypeError:  # not weakly referenceable or not hashable: the wrapper's own cache
        per_fun = {}
    return per_fun


def clear_caches():
    """Drop every jit trace and compiled function (``jax.clear_caches``), and the
    buffers compiled functions keep between calls (``fnx.backends.buffers``): the next
    call of each jitted function traces again and allocates afresh."""
    for cache in list(_ALL_CACHES):
        cache.clear()
    for name in available_backends():  # compiled code, and the buffers it keeps (also
        get_backend(name).clear_cache()  # of a Lowered stage the caller holds)
    from . import tape
    for table in ("_SEEN", "_RULES", "_FUSED_SEEN", "_FUSED"):
        d = getattr(tape, table, None)
        if isinstance(d, dict):
            d.clear()


# The fast path (a known signature of plain Arrays) checks that the entry was made under
# the current trace context by identity: ``_CTX[0]`` is the interned context, or a fresh
# object no entry holds while jit is disabled or NaN/inf checks are on (those take the
# full path).
_INTERNED: dict = {}
_CTX = [None]


def _intern_ctx():
    ctx = config.trace_context()
    return _INTERNED.setdefault(ctx, ctx)


def _refresh_ctx(_value=None):
    v = config.values
    if v["jax_disable_jit"] or v["jax_debug_nans"] or v["jax_debug_infs"]:
        _CTX[0] = object()
    else:
        _CTX[0] = _intern_ctx()


for _flag in (*TRACE_FLAGS, "jax_disable_jit", "jax_debug_nans", "jax_debug_infs"):
    config.on_change(_flag, _refresh_ctx)
_refresh_ctx()


# --- static and donated arguments by position and by name ------------------------------------

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _as_names(names):
    if names is None:
        return ()
    return (names,) if isinstance(names, str) else tuple(names)


def _as_nums(nums):
    if nums is None:
        return ()
    return (nums,) if isinstance(nums, int) else tuple(nums)


def _resolve_args(fun, name, nums, names, what):
    """JAX's rule: argnums and argnames each imply the other through ``fun``'s signature,
    so a static (or donated) argument is one however it is passed. Returns (nums, names,
    signature or None)."""
    nums, names = _as_nums(nums), _as_names(names)
    for i in nums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"jit({name}): {what}_argnums must be ints, got {nums!r}")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"jit({name}): {what}_argnames must be strings, got {names!r}")
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):  # a builtin or C function: take them as given
        return tuple(sorted(set(nums))), names, None
    params = sig.parameters
    positional = [p for p in params.values() if p.kind in _POSITIONAL]
    var_pos = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params.values())
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    resolved = []
    for i in nums:
        j = i + len(positional) if i < 0 and not var_pos else i
        if not var_pos and not 0 <= j < len(positional):
            raise ValueError(f"jit({name}) has {what}_argnums={nums!r}, but {name} only "
                             f"accepts {len(positional)} positional arguments "
                             f"({', '.join(p.name for p in positional) or 'none'})")
        resolved.append(j)
    by_name = {p.name: p for p in params.values()
               if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             inspect.Parameter.KEYWORD_ONLY)}
    if not var_kw:
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise ValueError(f"jit({name}) has invalid {what}_argnames {unknown}: {name} "
                             f"takes no such argument (its arguments: "
                             f"{', '.join(params) or 'none'})")
    for i, p in enumerate(positional):
        if p.name in names and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            resolved.append(i)
    names = list(names)
    for j in resolved:
        if 0 <= j < len(positional):
            p = positional[j]
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.name not in names:
                names.append(p.name)
    return tuple(sorted(set(resolved))), tuple(names), sig


class JitFunction:
    """A jit-compiled function (see ``fnx.jit``)."""

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums,
                 donate_argnames=(), keep_unused=False, inline=False):
        if not callable(fun):
            raise TypeError(f"jit: expected a function, got {type(fun).__name__} {fun!r}")
        # fun's name, doc and attributes first (as functools.wraps; a custom_vmap's def_vmap
        # stays reachable through decorators stacked on it), then this object's own fields,
        # so a wrapped custom_jvp's or jit's `fun` never replaces ours
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.name = getattr(fun, "__name__", type(fun).__name__)
        per_fun = _per_fun(fun)
        try:  # the options as given, resolved before for this function?
            given = ("given", _as_nums(static_argnums), _as_names(static_argnames),
                     _as_nums(donate_argnums), _as_names(donate_argnames))
            resolved = per_fun.get(given)
        except TypeError:
            given = resolved = None
        if resolved is None:
            resolved = self._resolve(static_argnums, static_argnames, donate_argnums,
                                     donate_argnames)
            if given is not None:
                per_fun[given] = resolved
        (self.static_argnums, self.static_argnames, self.donate_argnums,
         self.donate_argnames, self._param_names) = resolved
        self._negative = any(i < 0 for i in self.static_argnums)
        self.keep_unused, self.inline = bool(keep_unused), bool(inline)
        options = resolved[:4]
        self._c = per_fun.get(options)
        if self._c is None:
            self._c = per_fun[options] = _Cache()
            _ALL_CACHES.add(self._c)
        self._cache = self._c.entries
        self._fast = self._c.fast
        self._fast_trees = self._c.fast_trees

    def _resolve(self, static_argnums, static_argnames, donate_argnums, donate_argnames):
        static_argnums, static_argnames, sig = _resolve_args(
            self.fun, self.name, static_argnums, static_argnames, "static")
        donate_argnums, donate_argnames, _ = _resolve_args(
            self.fun, self.name, donate_argnums, donate_argnames, "donate")
        overlap = set(static_argnums) & set(donate_argnums)
        if overlap:
            raise ValueError(f"jit({self.name}): argnums {sorted(overlap)} are both static "
                             "and donated; a static argument has no buffer to donate")
        overlap = set(static_argnames) & set(donate_argnames)
        if overlap:
            raise ValueError(f"jit({self.name}): arguments {sorted(overlap)} are both "
                             "static and donated; a static argument has no buffer to donate")
        return (static_argnums, static_argnames, donate_argnums, donate_argnames,
                None if sig is None else list(sig.parameters))

    @property
    def trace_count(self):
        """How many times the function was traced (for this jit's options)."""
        return self._c.trace_count

    def _cache_size(self):
        return len(self._cache)

    def clear_cache(self):
        """Drop this function's traces (for these jit options)."""
        self._c.clear()

    def _static_nums(self, args):
        if not self._negative:
            return self.static_argnums
        return tuple(sorted({i + len(args) if i < 0 else i for i in self.static_argnums}))

    def _signature(self, args, kwargs):
        nums = self._static_nums(args)
        static, leaves, in_tree = flatten_static(args, kwargs, nums, self.static_argnames)
        key = (_intern_ctx(), static, in_tree, tuple(_leaf_key(x) for x in leaves),
               self._backend_name(leaves))
        try:
            hash(key)
        except TypeError:
            self._unhashable(static)
        return key, static, leaves, in_tree

    def _backend_name(self, leaves):
        """The backend the call runs on: NumPy unless a device backend is registered;
        else where its arguments' devices say (``place``, which raises for arguments
        committed to different devices)."""
        if not DEVICE_BACKENDS:
            return "numpy"
        arrays = [x for x in leaves if type(x) is Array]
        return place(f"jit({self.name})", arrays, [x._value for x in arrays])[0].name

    def _arg_name(self, where):
        """``where``: a position or a keyword name."""
        if isinstance(where, str):
            return f"argument {where!r}"
        if self._param_names and where < len(self._param_names):
            return f"argument {where} ({self._param_names[where]!r})"
        return f"argument {where}"

    def _unhashable(self, static):
        static_args, static_kwargs = static
        for where, value in (*static_args, *static_kwargs):
            try:
                hash(value)
            except TypeError as e:
                raise NonHashableStaticArgError(
                    f"jit({self.name}): static {self._arg_name(where)} must be hashable, "
                    f"but got a {type(value).__name__} ({value!r:.80}): {e}. Static "
                    "arguments key the compilation cache, so they must be hashable and "
                    "compare by value: pass a tuple instead of a list, a frozen dataclass "
                    "instead of a dict, or, for an array, pass it as a regular (traced) "
                    "argument by removing it from static_argnums/static_argnames."
                ) from None
        raise NonHashableStaticArgError(f"jit({self.name}): static arguments must be "
                                        f"hashable; got {static}")

    def _trace(self, static, leaves, in_tree, nums=None):
        flat_fun, out_tree = rebuild_call(self.fun, static, in_tree,
                                          self.static_argnums if nums is None else nums)
        avals = [x.aval if isinstance(x, Array) else abstractify(x, "jit") for x in leaves]
        log = config.values["jax_log_compiles"]
        t0 = time.perf_counter()
        t0_ns = time.perf_counter_ns()
        ir = trace_flat(flat_fun, avals, self.name)
        profiling.span(f"trace {self.name}", t0_ns, category="jit")
        self._c.trace_count += 1
        if log:
            _LOG.warning("Finished tracing %s for jit in %.4f sec: %s -> %s", self.name,
                         time.perf_counter() - t0, _avals_str(avals), _avals_str(ir.out_avals))
        return ir, out_tree[0]

    def _entry(self, key, static, leaves, in_tree, args=(), kwargs=None):
        entry = self._cache.get(key)
        if entry is None:
            if config.values["jax_explain_cache_misses"]:
                _LOG.warning("%s", self._explain_miss(key, leaves, in_tree))
            ir, out_tree = self._trace(static, leaves, in_tree, self._static_nums(args))
            if any(isinstance(c, Tracer) for c in ir.consts):
                return None, ir, out_tree  # closes over an outer trace: not cacheable
            check_ir(ir)
            ir.name = self.name
            if config.values["jax_log_compiles"]:
                _LOG.warning("Compiling %s with arguments %s%s", self.name,
                             _avals_str(ir.in_avals),
                             f" and static arguments {_static_str(static)}"
                             if static != ((), ()) else "")
            t0_ns = time.perf_counter_ns()
            entry = _Entry(ir, out_tree, in_tree, self.name,
                           self._donated_positions(args, kwargs or {}), get_backend(key[4]))
            profiling.span(f"compile {self.name}", t0_ns, category="jit")
            entry.ctx = key[0]
            self._c.add(key, entry)
        else:
            entry.hit = True
        return entry, entry.ir, entry.out_tree

    def _explain_miss(self, key, leaves, in_tree):
        """Why ``key`` missed the cache (``jax_explain_cache_misses``): the nearest cached
        signature and what differs from it."""
        head = f"TRACING CACHE MISS of jit({self.name}) at {user_frame_info(3)} because:"
        if not self._cache:
            return f"{head} never seen function (first call of {self.name} with these jit options)"
        ctx, static, tree, lkeys, backend = key

        def nearest():
            best = None
            for k in self._cache:
                score = (k[0] == ctx, k[1] == static, k[2] == tree,
                         sum(a == b for a, b in zip(k[3], lkeys)))
                if best is None or score > best[0]:
                    best = (score, k)
            return best[1]
        old_ctx, old_static, old_tree, old_keys, old_backend = nearest()
        reasons = []
        if old_backend != backend:
            reasons.append(f"the arguments moved from backend {old_backend!r} to {backend!r}")
        if old_ctx != ctx:
            for name, a, b in zip(TRACE_FLAGS, old_ctx, ctx):
                if a != b:
                    reasons.append(f"config {name} changed from {a!r} to {b!r}")
        if old_static != static:
            old = dict((*old_static[0], *old_static[1]))
            for where, v in (*static[0], *static[1]):
                if where not in old:
                    reasons.append(f"static {self._arg_name(where)} was not passed this "
                                   f"way before (now {v!r})")
                elif old[where] != v:
                    reasons.append(f"static {self._arg_name(where)} changed from "
                                   f"{old[where]!r} to {v!r}")
            if not reasons:
                reasons.append(f"static arguments changed from {_static_str(old_static)} "
                               f"to {_static_str(static)}")
        if old_tree != tree:
            reasons.append(f"the argument structure changed from {old_tree} to {tree}")
        elif old_keys != lkeys:
            paths = [p for p, _ in tree_util.tree_flatten_with_path(
                tree_util.tree_unflatten(tree, range(len(lkeys))))[0]]
            for path, a, b in zip(paths, old_keys, lkeys):
                if a != b:
                    reasons.append(f"{self._leaf_name(path)} changed from {_key_str(a)} "
                                   f"to {_key_str(b)}")
        return head + "".join("\n  " + r for r in reasons)

    def _leaf_name(self, path):
        """A dynamic leaf's name from its key path in ``(dyn_args, dyn_kwargs)``."""
        path = list(path)
        if not path:
            return "an argument"
        first = getattr(path[0], "idx", None)
        rest = tree_util.keystr(path[2:]) if len(path) > 2 else ""
        if first == 1 and len(path) > 1:  # keyword
            return f"argument {getattr(path[1], 'key', path[1])!r}{rest}"
        if len(path) > 1:
            i = getattr(path[1], "idx", None)
            if isinstance(i, int):  # position among dynamic args: back to the real one
                real = [j for j in range(i + len(self.static_argnums) + 1)
                        if j not in self.static_argnums][i]
                return self._arg_name(real) + rest
        return "argument " + tree_util.keystr(path)

    def _donated_positions(self, args, kwargs):
        """The flat leaf positions of the donated arguments (leaves of the dynamic
        arguments in order, then of the dynamic keyword arguments in key order; static
        ones are not leaves)."""
        if not self.donate_argnums and not self.donate_argnames:
            return ()
        positions, start = [], 0
        for i, a in enumerate(args):
            if i in self.static_argnums:
                continue
            n = len(tree_util.tree_leaves(a))
            if i in self.donate_argnums:
                positions.extend(range(start, start + n))
            start += n
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        for k in sorted(dyn_kwargs):
            n = len(tree_util.tree_leaves(dyn_kwargs[k]))
            if k in self.donate_argnames:
                positions.extend(range(start, start + n))
            start += n
        return positions

    def _offer_donated(self, entry, raw, leaves, args, kwargs=None):
        """The donated leaves' buffers the call may reuse (those nothing but their Array
        references: no other Array, view or export; None for the others), taken after
        invalidating the donated Arrays."""
        offered = entry.backend.offer_donated(
            raw, [k if type(leaves[k]) is Array else None for k in entry.donated])
        self._donate(args, kwargs)
        return offered

    def __call__(self, *args, **kwargs):
        if not kwargs and get_trace() is EVAL:
            fast = self._fast.get(tuple(map(_fast_key, args)))
            if fast is not None:  # concrete Arrays, known signature
                leaves = args
            elif self._fast_trees:  # pytrees of concrete Arrays, known signature
                leaves, tree = tree_util.tree_flatten(args)
                fast = self._fast_trees.get((tree, tuple(map(_fast_key, leaves))))
            if fast is not None and fast.ctx is _CTX[0]:
                fast.hit = True
                raw = [a._value for a in leaves]
                if fast.donated:
                    outs = fast.fn(*raw, _dn=self._offer_donated(fast, raw, leaves, args))
                else:
                    outs = fast.fn(*raw)
                if fast.single_array:
                    return Array._wrap(outs[0], fast.out_weak[0])
                return tree_util.tree_unflatten(fast.out_tree, [
                    Array._wrap(o, w) for o, w in zip(outs, fast.out_weak)])
        values = config.values
        if values["jax_disable_jit"]:
            return self.fun(*args, **kwargs)
        key, static, leaves, in_tree = self._signature(args, kwargs)
        if get_trace() is EVAL and not any(isinstance(x, Tracer) for x in leaves):
            entry, ir, out_tree = self._entry(key, static, leaves, in_tree, args, kwargs)
            raw = []
            for x in leaves:
                v = x._value if type(x) is Array else _call_value(x, self.name)
                if type(v) is DeletedBuffer:
                    v.dtype  # raises DeletedArrayError
                raw.append(v)
            moved = False
            if entry.backend is not _NUMPY:  # arguments not on its device go there
                placed = [v if entry.backend.owns(v) else entry.backend.put(v) for v in raw]
                moved = any(a is not b for a, b in zip(placed, raw))
                raw = placed
            if values["jax_debug_nans"] or values["jax_debug_infs"]:
                outs = self._run_checked(entry, raw)
                if entry.donated:
                    self._donate(args, kwargs)
                return tree_util.tree_unflatten(out_tree, outs)
            if (not kwargs and not self.static_argnums and not moved
                    and all(type(x) is Array for x in leaves)):
                if all(type(a) is Array for a in args):
                    self._c.add_fast(0, tuple(map(_fast_key, args)), entry)
                else:
                    self._c.add_fast(1, (tree_util.tree_structure(args),
                                         tuple(map(_fast_key, leaves))), entry)
            outs = entry.run(raw, self._offer_donated(entry, raw, leaves, args, kwargs)
                             if entry.donated else None)
            return tree_util.tree_unflatten(out_tree, outs)
        # Under a transformation: bind the call primitive on the current trace.
        entry = self._cache.get(key)
        if entry is not None:
            entry.hit = True
            if entry.hoisted is None:
                entry.hoisted = entry.ir.hoist_consts()
            ir, consts = entry.hoisted
            out_tree = entry.out_tree
        elif not bound_frames() and key in self._c.traced:  # traced before under a
            # transformation (as JAX, a second grad(jit(f)) does not retrace; a trace under
            # named axes may read their sizes, so it is not kept)
            ir, consts, out_tree = self._c.traced[key]
        else:
            ir, out_tree = self._trace(static, leaves, in_tree, self._static_nums(args))
            ir, consts = ir.hoist_consts()
            if not bound_frames() and not any(isinstance(c, Tracer)
                                             for c in (*consts, *ir.consts)):
                traced = self._c.traced
                while traced and len(traced) >= max(1, MAX_SIGNATURES):
                    del traced[next(iter(traced))]
                traced[key] = (ir, consts, out_tree)
        ir.name = self.name
        outs = jit_p.bind(*consts, *[to_array(x) for x in leaves], ir=ir, name=self.name)
        return tree_util.tree_unflatten(out_tree, outs)

    def _run_checked(self, entry, raw):
        """``jax_debug_nans`` / ``jax_debug_infs``: run the compiled function with every
        top-level floating-point intermediate as an extra output (JAX checks only the
        outputs, so a NaN that does not reach them goes unseen there); on a NaN or inf,
        re-run the IR one equation at a time to name the primitive and its source line.
        The donated inputs are not overwritten (the re-run needs them) but are still
        invalidated afterwards."""
        checked = entry.checked
        if checked is None:
            checked = entry.checked = _checked_variant(entry.ir)
        outs = checked.fn(*raw)
        if any(nonfinite_kind(o) for o in outs):
            check_ir_values(entry.ir, [Array._wrap(v) for v in raw], f"jit({self.name})")
        n = len(entry.ir.outvars)
        return [Array._wrap(o, w) for o, w in zip(outs[:n], entry.out_weak)]

    def _donate(self, args, kwargs=None):
        for i in self.donate_argnums:
            if i < len(args):
                for leaf in tree_util.tree_leaves(args[i]):
                    if type(leaf) is Array:
                        leaf._value = DeletedBuffer(f"jit({self.name})")
        if kwargs:
            for k in self.donate_argnames:
                if k in kwargs:
                    for leaf in tree_util.tree_leaves(kwargs[k]):
                        if type(leaf) is Array:
                            leaf._value = DeletedBuffer(f"jit({self.name})")

    def lower(self, *args, **kwargs):
        """The IR (and generated code) for these arguments, without running it."""
        key, static, leaves, in_tree = self._signature(args, kwargs)
        entry, ir, out_tree = self._entry(key, static, leaves, in_tree, args, kwargs)
        if entry is None:
            raise TypeError(f"jit({self.name}).lower: arguments include tracers of an "
                            "enclosing transformation; call lower outside it")
        return Lowered(entry, self.name, self.donate_argnums)

    def trace(self, *args, **kwargs):
        """``jit(f).trace(*args, **kwargs)``: ``f`` traced for arguments like these (arrays,
        Python scalars or ``ShapeDtypeStruct`` placeholders: nothing is computed), as a
        ``Traced`` stage: ``.jaxpr``, ``.out_info``, ``.args_info``, ``.fun_name`` and
        ``.lower()`` (then ``.compile()``). It shares the traces of calls to ``jit(f)``."""
        key, static, leaves, in_tree = self._signature(args, kwargs)
        entry, ir, out_tree = self._entry(key, static, leaves, in_tree, args, kwargs)
        if entry is None:
            raise TypeError(f"jit({self.name}).trace: arguments include tracers of an "
                            "enclosing transformation; call trace outside it")
        return Traced(entry, self.name, self.donate_argnums)

    def eval_shape(self, *args, **kwargs):
        from ..core.tracing import eval_shape
        return eval_shape(self.fun, *args, **kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<fnx.jit of {self.fun!r}>"


class NonHashableStaticArgError(ValueError, TypeError):
    """A static argument of a jitted function is not hashable. Static arguments key the
    compilation cache, so they must be hashable and compare by value::

        f = fnx.jit(f, static_argnames="sizes")
        f(x, sizes=[1, 2])   # wrong: a list is not hashable
        f(x, sizes=(1, 2))   # right

    (A ``ValueError`` as in JAX, and a ``TypeError`` as fnx raised before.)"""


def _checked_variant(ir):
    """``ir`` compiled with every floating-point value it computes at top level also
    returned, so one call can check them all."""
    seen = set(map(id, ir.outvars))
    extra = []
    for e in ir.eqns:
        for v in e.outputs:
            if id(v) not in seen and dtypes.is_inexact(v.aval.dtype):
                seen.add(id(v))
                extra.append(v)
    return _NUMPY.compile(ir.replace(outvars=list(ir.outvars) + extra),
                          getattr(ir, "name", "jit") + "_checked")


def _avals_str(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _static_str(static):
    static_args, static_kwargs = static
    return ", ".join([f"#{i}={v!r}" for i, v in static_args]
                     + [f"{k}={v!r}" for k, v in static_kwargs])


def _key_str(k):
    shape, dt, weak = k[0], np.dtype(k[1]).name, k[2]
    return f"{dt}[{','.join(map(str, shape))}]" + (" (weakly typed)" if weak else "")


def _call_value(x, name):
    if isinstance(x, ShapeDtypeStruct):
        raise TypeError(f"jit({name}): got a ShapeDtypeStruct {x} as an argument; placeholders "
                        "carry no data, so a call needs arrays: pass placeholders to "
                        f"jit({name}).trace(...) or .lower(...), or to fnx.eval_shape")
    return to_array(x)._value


def _fast_key(a):
    if type(a) is not Array:
        return _NO_FAST
    v = a._value
    return (v.shape, v.dtype, a.weak_type, type(v))  # the type: which device holds it


_NO_FAST = object()  # marks a non-Array argument: such calls are never put in the fast table


def jit(fun=None, in_shardings=None, out_shardings=None, static_argnums=None,
        static_argnames=None, donate_argnums=None, donate_argnames=None, keep_unused=False,
        device=None, backend=None, inline=False, **unsupported):
    """Compile ``fun`` for each input signature (shapes, dtypes, pytree structure,
    static argument values, and the flags in ``fnx.config.trace_context()``) and run
    the compiled NumPy code.

    Usable as ``@jit``, ``jit(f, static_argnums=1)`` or
    ``@partial(jit, static_argnames='n')``. As in JAX, ``static_argnums`` and
    ``static_argnames`` each imply the other through ``fun``'s signature (a static
    argument is static however it is passed; likewise donated ones), and the traces
    belong to ``fun``: ``jit(f)(x)`` in a loop traces ``f`` once. Sharding and
    device options exist for porting: a jitted function runs on its arguments' one
    device (several processes map over theirs with ``fnx.pmap``), so only shardings of
    the CPU's one device (``fnx.sharding``) and the defaults are accepted.
    """
    if unsupported:
        raise TypeError(f"jit: unsupported options {sorted(unsupported)} (fnx's jit takes "
                        "JAX's static_argnums, static_argnames, donate_argnums, "
                        "donate_argnames, keep_unused, inline)")
    from ..sharding import check_jit_shardings
    for opt, value in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        check_jit_shardings(opt, value)
    for opt, value in (("device", device), ("backend", backend)):
        if value is not None and str(getattr(value, "platform", value)).lower() != "cpu":
            raise ValueError(f"jit: {opt}={value!r} is not supported: fnx runs on the CPU; "
                             "leave it unset")
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 donate_argnames=donate_argnames, keep_unused=keep_unused,
                                 inline=inline)
    return JitFunction(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                       keep_unused, inline)
