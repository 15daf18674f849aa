"""``fnx.nn.Module``: immutable pytree modules with params, states and static config.

A Module is a pytree.  Its *children* (pytree leaves, seen by ``jit``/``grad``/``vmap``)
are the arrays it holds -- **params** (trained) and **states** (not trained: BatchNorm
running statistics, counters) -- and its submodules (also inside lists, tuples and
dicts).  Everything else (sizes, strides, flags such as ``training``, initializers) is
static config carried in the treedef's aux data, so changing it retraces under ``jit``.

Which attributes are children is fixed when the constructor returns: the names listed
in the class's ``__params__`` and ``__states__`` tuples plus every attribute whose
value holds an array or a Module.  A leaf is a *state* when the attribute holding it is
named in its owning module's ``__states__``; every other leaf is a *param*.

Modules are immutable: ``m.replace(name=value)`` returns an updated copy; ``m.train()``
and ``m.eval()`` return copies with ``training`` flipped in every submodule.

**Calling convention.**  ``module(x)`` is a pure forward pass returning only the output
(in train mode BatchNorm normalizes with batch statistics; the updated running
statistics are dropped).  ``fnx.nn.apply(module, *args, key=None, **kwargs)`` works for
every module and returns ``(output, new_module)``: inside it stateful layers record their
new states, and layers that need randomness (Dropout) draw keys derived from ``key``.
It is a pure function of its inputs, so it works under ``fnx.jit`` and inside a loss
differentiated with ``fnx.grad(..., has_aux=True)``.  (A module object used twice in one
call, i.e. shared weights, keeps the states of its last use.)

**Shape inference.**  ``fnx.nn.init(model_def, key, *placeholders)`` runs the model
abstractly (``fnx.eval_shape``: no data, no real forward pass) on placeholders
(``fnx.ShapeDtypeStruct`` or arrays); each layer whose params are not yet created
records its input shape, then its params are created with its initializers from a key
folded per layer (in the order of the layers' dotted names).
"""
from __future__ import annotations

import contextvars
import math

import numpy as np

from .. import numpy as fnp
from .. import random, tree_util
from ..core.primitive import ShapeDtypeStruct
from ..core.tracing import eval_shape
from ..tree_util import GetAttrKey

__all__ = ["Module", "apply", "init", "partition", "combine", "summary", "is_array",
           "next_key", "record_states"]


def is_array(x) -> bool:
    """True for arrays (fnx, NumPy, tracers, ShapeDtypeStructs): leaves of modules."""
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)


def _holds_dynamic(v) -> bool:
    if isinstance(v, Module) or is_array(v):
        return True
    if isinstance(v, (list, tuple)):
        return any(_holds_dynamic(c) for c in v)
    if isinstance(v, dict):
        return any(_holds_dynamic(c) for c in v.values())
    return False


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(c) for c in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(c)) for k, c in v.items()))
    return v


# --- contexts used by apply() and init() --------------------------------------------------

class _ApplyCtx:
    def __init__(self, key):
        self.key = key
        self.count = 0
        self.updates = {}      # id(module) -> (module, {name: value})


class _InitCtx:
    def __init__(self):
        self.records = {}      # id(module) -> (module, input ShapeDtypeStructs)


_apply_ctx: contextvars.ContextVar = contextvars.ContextVar("fnx_nn_apply", default=None)
_init_ctx: contextvars.ContextVar = contextvars.ContextVar("fnx_nn_init", default=None)


def next_key(key=None):
    """The key a layer uses: ``key`` when given, else a fresh key derived from the one
    passed to ``fnx.nn.apply`` (``fold_in(key, n)`` for the n-th draw of the call)."""
    if key is not None:
        return key
    ctx = _apply_ctx.get()
    if ctx is None or ctx.key is None:
        return None
    k = random.fold_in(ctx.key, ctx.count)
    ctx.count += 1
    return k


def record_states(module, **states):
    """Called by a stateful module in train mode (a BatchNorm, an imported ONNX model):
    inside ``fnx.nn.apply`` the module it returns has these attributes replaced
    (``states``: attribute name -> new value); outside, nothing happens."""
    ctx = _apply_ctx.get()
    if ctx is not None:
        ctx.updates[id(module)] = (module, states)


_record_states = record_states


# --- the Module class ------------------------------------------------------------------

class _ModuleMeta(type):
    """Registers every subclass as a pytree node; freezes instances after __init__."""

    def __init__(cls, name, bases, ns, **kw):
        super().__init__(name, bases, ns, **kw)
        tree_util.register_pytree_with_keys(cls, _flatten_with_keys, _make_unflatten(cls),
                                            _flatten)

    def __call__(cls, *args, **kwargs):
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_frozen", False)
        object.__setattr__(obj, "training", True)
        obj.__init__(*args, **kwargs)
        obj._finalize()
        return obj


def _flatten(m):
    d = m.__dict__
    dyn = d["_dynamic"]
    return [d[n] for n in dyn], (dyn, d["_static"])


def _flatten_with_keys(m):
    d = m.__dict__
    dyn = d["_dynamic"]
    return [(GetAttrKey(n), d[n]) for n in dyn], (dyn, d["_static"])


def _make_unflatten(cls):
    def unflatten(aux, children):
        dyn, static = aux
        obj = object.__new__(cls)
        d = obj.__dict__
        d.update(static)
        d.update(zip(dyn, children))
        d["_dynamic"] = dyn
        d["_static"] = static
        d["_frozen"] = True
        return obj
    return unflatten


class Module(metaclass=_ModuleMeta):
    """Base class of layers and models (see the module docstring).

    Subclass it, set attributes in ``__init__`` (submodules, arrays, config) and define
    ``__call__``.  A layer whose params depend on the input size defines
    ``_create(self, key, *input_avals) -> {name: array}`` and calls
    ``self._lazy(x)`` at the start of ``__call__`` (see ``Linear``).
    """

    __params__: tuple = ()
    __states__: tuple = ()

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen", False):
            raise AttributeError(
                f"{type(self).__name__} is immutable: use module.replace({name}=...) to get "
                "an updated copy")
        object.__setattr__(self, name, value)

    def _finalize(self):
        d = self.__dict__
        declared = set(self.__params__) | set(self.__states__)
        dyn = tuple(n for n in d if not n.startswith("_")
                    and (n in declared or _holds_dynamic(d[n])))
        static = tuple((n, _hashable(d[n])) for n in d
                       if n not in dyn and n not in ("_frozen",))
        # static values must be hashable (they are part of the treedef)
        for n, v in static:
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"{type(self).__name__}.{n} = {v!r} is static config and must "
                                "be hashable (use a tuple instead of a list)") from None
        d.update(static)
        d["_dynamic"] = dyn
        d["_static"] = static
        d["_frozen"] = True

    # functional updates
    def replace(self, **changes):
        """A copy with the given attributes changed (new array-valued names become
        children)."""
        d = self.__dict__
        obj = object.__new__(type(self))
        nd = obj.__dict__
        nd.update(d)
        dyn = list(d["_dynamic"])
        static = dict(d["_static"])
        for n, v in changes.items():
            if n not in dyn:
                if _holds_dynamic(v):
                    static.pop(n, None)
                    dyn.append(n)
                else:
                    v = _hashable(v)
                    static[n] = v
            nd[n] = v
        nd["_dynamic"] = tuple(dyn)
        nd["_static"] = tuple(static.items())
        return obj

    def _set_training(self, flag):
        def sub(v):
            return v._set_training(flag) if isinstance(v, Module) else v
        changes = {n: tree_util.tree_map(sub, self.__dict__[n],
                                         is_leaf=lambda v: isinstance(v, Module))
                   for n in self._dynamic}
        changes["training"] = bool(flag)
        return self.replace(**changes)

    def train(self, mode: bool = True):
        """A copy in training mode (every submodule too)."""
        return self._set_training(mode)

    def eval(self):
        """A copy in evaluation mode (every submodule too)."""
        return self._set_training(False)

    # params / states
    def _labels(self):
        states = set(self.__states__)

        def sub(v):
            return v._labels() if isinstance(v, Module) else "param"
        ch = {}
        for n in self._dynamic:
            v = self.__dict__[n]
            if n in states:
                ch[n] = tree_util.tree_map(lambda _: "state", v)
            else:
                ch[n] = tree_util.tree_map(sub, v, is_leaf=lambda x: isinstance(x, Module))
        return self.replace(**ch) if ch else self

    def _named(self, kind):
        leaves = tree_util.tree_leaves_with_path(self)
        labels = tree_util.tree_leaves(self._labels())
        return {tree_util.dotted_name(p): v for (p, v), lab in zip(leaves, labels)
                if lab == kind}

    def params(self) -> dict:
        """``{dotted name: array}`` of the trained leaves, e.g. ``blk1.conv1.weight``."""
        return self._named("param")

    def states(self) -> dict:
        """``{dotted name: array}`` of the untrained leaves (running statistics...)."""
        return self._named("state")

    def modules(self):
        """``[(dotted name, module)]`` of this module and all submodules, depth first."""
        out = []

        def walk(m, prefix):
            out.append((prefix, m))
            for n in m._dynamic:
                for p, v in tree_util.tree_leaves_with_path(
                        m.__dict__[n], is_leaf=lambda x: isinstance(x, Module)):
                    if isinstance(v, Module):
                        name = tree_util.dotted_name((GetAttrKey(n),) + tuple(p))
                        walk(v, f"{prefix}.{name}" if prefix else name)
        walk(self, "")
        return out

    # lazy params
    def _initialized(self):
        return all(self.__dict__.get(n) is not None for n in self._required_params())

    def _required_params(self):
        return tuple(n for n in self.__params__ if n != "bias" or self.__dict__.get("use_bias",
                                                                                     True))

    def _lazy(self, *inputs):
        """Called first by layers with shape-inferred params: returns the module to use
        (``self`` when initialized; under ``fnx.nn.init``'s abstract pass, a stand-in
        with zero params, after recording the input shapes)."""
        if self._initialized():
            return self
        ctx = _init_ctx.get()
        if ctx is None:
            raise ValueError(
                f"{type(self).__name__}'s params are not created yet: build the model with "
                "fnx.nn.init(model, key, *placeholders) or pass the input size to the "
                "constructor with key=...")
        avals = tuple(ShapeDtypeStruct(tuple(x.shape), x.dtype) for x in inputs)
        ctx.records[id(self)] = (self, avals)
        shapes = eval_shape(lambda k: self._create(k, *avals), random.PRNGKey(0))
        zeros = tree_util.tree_map(lambda s: fnp.zeros(tuple(s.shape), s.dtype), shapes)
        return self.replace(**zeros)

    def _create(self, key, *avals):  # pragma: no cover - overridden
        raise NotImplementedError

    # printing
    def _config(self):
        return ", ".join(f"{n}={v}" if isinstance(v, np.dtype) else f"{n}={v!r}"
                         for n, v in self._static if not n.startswith("_") and v is not None
                         and not callable(v) and n != "training")

    def _repr_lines(self, name, indent):
        pad = "  " * indent
        head = f"{pad}{name + ': ' if name else ''}{type(self).__name__}({self._config()})"
        lines = [head]
        states = set(self.__states__)
        for n in self._dynamic:
            for p, v in tree_util.tree_leaves_with_path(
                    self.__dict__[n], is_leaf=lambda x: isinstance(x, Module) or x is None):
                nm = tree_util.dotted_name((GetAttrKey(n),) + tuple(p))
                if isinstance(v, Module):
                    lines.extend(v._repr_lines(nm, indent + 1))
                elif v is None:
                    lines.append(f"{pad}  {nm}: None")
                else:
                    kind = "state" if n in states else "param"
                    lines.append(f"{pad}  {nm}: {kind} {_fmt(v)}")
        return lines

    def __repr__(self):
        lines = self._repr_lines("", 0)
        np_, ns = _count(self.params()), _count(self.states())
        lines.append(f"Total: {np_:,} params, {ns:,} state values")
        return "\n".join(lines)

    def __init__(self):
        pass


def _fmt(v):
    dt = np.dtype(v.dtype).name if hasattr(v, "dtype") else "?"
    return f"{dt}{list(v.shape)} ({math.prod(v.shape):,})"


def _count(d):
    return sum(math.prod(v.shape) for v in d.values())


def summary(module) -> str:
    """A table of every param and state: dotted name, kind, shape, dtype and size, with
    totals.  Returns the text (print it)."""
    params, states = module.params(), module.states()
    rows = [(n, "param", v) for n, v in params.items()]
    rows += [(n, "state", v) for n, v in states.items()]
    w = max([len(r[0]) for r in rows] + [4])
    out = [f"{'name':<{w}}  kind   {'shape':<18} {'dtype':<8} {'count':>10}"]
    out.append("-" * len(out[0]))
    for n, k, v in rows:
        out.append(f"{n:<{w}}  {k:<5}  {str(tuple(v.shape)):<18} {np.dtype(v.dtype).name:<8} "
                   f"{math.prod(v.shape):>10,}")
    out.append("-" * len(out[0]))
    np_, ns = _count(params), _count(states)
    out.append(f"Total params: {np_:,}   Total states: {ns:,}   "
               f"({type(module).__name__}, {len(module.modules())} modules)")
    return "\n".join(out)


# --- rebuilding a tree with some modules replaced ------------------------------------------

def _rebuild(tree, fn):
    """Rebuild a tree of modules bottom-up; ``fn(module) -> module`` is applied to every
    module after its children have been rebuilt."""
    def rec(v):
        if isinstance(v, Module):
            ch = {n: tree_util.tree_map(rec, v.__dict__[n], is_leaf=lambda x: isinstance(
                x, Module)) for n in v._dynamic}
            return fn(v, v.replace(**ch) if ch else v)
        return v
    return tree_util.tree_map(rec, tree, is_leaf=lambda x: isinstance(x, Module))


def apply(module, *args, key=None, **kwargs):
    """Run ``module(*args, **kwargs)`` and return ``(output, new_module)``: the new module
    carries the states the call updated (BatchNorm running statistics in train mode).
    ``key`` feeds layers that need randomness (Dropout): the n-th key drawn in the call
    is ``fnx.random.fold_in(key, n)``.  Works under ``fnx.jit`` and ``fnx.grad``."""
    ctx = _ApplyCtx(key)
    tok = _apply_ctx.set(ctx)
    try:
        out = module(*args, **kwargs)
    finally:
        _apply_ctx.reset(tok)
    if not ctx.updates:
        return out, module
    ups = ctx.updates

    def fn(orig, new):
        u = ups.get(id(orig))
        return new.replace(**u[1]) if u is not None and u[0] is orig else new
    return out, _rebuild(module, fn)


def init(model_def, key, *placeholders, **kwargs):
    """Create the params of every layer of ``model_def`` that needs the input size, by
    abstract evaluation on ``placeholders`` (``fnx.ShapeDtypeStruct``s or arrays), each
    layer from its own key (``fold_in(key, i)`` for the i-th such layer by dotted name).
    Returns the initialized module (``model_def`` is not changed)."""
    ctx = _InitCtx()

    def run(*xs):
        tok = _init_ctx.set(ctx)
        actx = _ApplyCtx(random.PRNGKey(0))
        atok = _apply_ctx.set(actx)
        try:
            return model_def(*xs, **kwargs)
        finally:
            _apply_ctx.reset(atok)
            _init_ctx.reset(tok)
    eval_shape(run, *placeholders)
    recs = ctx.records
    order = {id(m): i for i, (_, m) in enumerate(model_def.modules())}
    ids = sorted((i for i in recs), key=lambda i: order.get(i, len(order)))
    keys = {i: random.fold_in(key, n) for n, i in enumerate(ids)}

    def fn(orig, new):
        r = recs.get(id(orig))
        if r is None or r[0] is not orig:
            return new
        return new.replace(**orig._create(keys[id(orig)], *r[1]))
    return _rebuild(model_def, fn)


# --- partition / combine -----------------------------------------------------------------

def partition(module):
    """Split into ``(params, rest)``: two modules of the same shape, the first holding only
    the params (states replaced by ``None``), the second everything else (params replaced
    by ``None``).  ``fnx.grad(loss)(params, rest, ...)`` then differentiates the params
    only; ``combine(params, rest)`` merges them back."""
    labels = module._labels()
    params = tree_util.tree_map(lambda x, lab: x if lab == "param" else None, module, labels)
    rest = tree_util.tree_map(lambda x, lab: None if lab == "param" else x, module, labels)
    return params, rest


def combine(*trees):
    """Merge trees split by ``partition``: at each leaf the first non-None value."""
    def pick(*xs):
        for x in xs:
            if x is not None:
                return x
        return None
    return tree_util.tree_map(pick, *trees, is_leaf=lambda x: x is None)
