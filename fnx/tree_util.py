"""Pytrees: nested containers of leaves, and functions over them.

A *pytree* is any nesting of container nodes -- lists, tuples, namedtuples,
dicts, ``None`` and any type registered with this module -- whose other
elements are *leaves* (arrays, scalars, any unregistered object).  Users hand
fnx's transformations (jit, grad, vmap, ...) whole pytrees of arrays: model
parameters as nested dicts, optimizer state as namedtuples, and so on.

The transformations flatten such arguments once, at the API boundary, into a
flat list of leaves plus a ``PyTreeDef`` that records the structure.  Inside,
everything works on flat lists of leaves; the structure is restored with
``tree_unflatten`` on the way out.  A ``PyTreeDef`` is immutable, hashable and
cheap to compare, so it serves as (part of) a compilation cache key.  Since
the jit call path flattens its arguments on every call, flattening is written
to cost a few microseconds for small trees.

The semantics follow ``jax.tree_util`` (dicts flatten in sorted key order,
``None`` is a node with no children, registered types dispatch on their exact
type, ``tree_map`` accepts trees that have the first tree's structure as a
prefix).  This module is pure Python and depends only on the standard library.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import operator
from typing import Any, Callable, Iterable

__all__ = [
    # key path entries
    "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey",
    "keystr", "dotted_name",
    # structure
    "PyTreeDef", "tree_flatten", "tree_unflatten", "tree_leaves",
    "tree_structure", "treedef_is_leaf", "treedef_children", "all_leaves",
    # functions over trees
    "tree_map", "tree_map_with_path", "tree_flatten_with_path",
    "tree_leaves_with_path", "tree_reduce", "tree_all", "tree_transpose",
    # registration
    "register_pytree_node", "register_pytree_with_keys",
    "register_pytree_node_class", "register_static", "register_dataclass",
    "register_pytree_with_keys_class", "Partial", "KeyEntry", "KeyPath",
    "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node",
    "tree_broadcast", "tree_reduce_associative", "treedef_tuple",
]


# ---------------------------------------------------------------------------
# Key path entries
# ---------------------------------------------------------------------------
#
# A key path is a tuple of these entries, leading from the root of a tree to
# one of its leaves.  They are small frozen value objects.

@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """Index into a list or tuple: ``str`` is ``[0]``."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """Key of a dict (or OrderedDict / defaultdict): ``str`` is ``['a']``."""
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """Attribute of a namedtuple or dataclass: ``str`` is ``.name``."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """Position among the children of a custom node registered without keys:
    ``str`` is ``[0]``."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key!r}>]"

    def __hash__(self) -> int:  # not SequenceKey(i)'s (JAX's)
        return hash((FlattenedIndexKey, self.key))


def _simple_key(k: Any) -> str:
    if isinstance(k, SequenceKey):
        return str(k.idx)
    if isinstance(k, DictKey):
        return str(k.key)
    if isinstance(k, GetAttrKey):
        return k.name
    if isinstance(k, FlattenedIndexKey):
        return str(k.key)
    return str(k)


def keystr(keys: Iterable[Any], *, simple: bool = False,
           separator: str | None = None) -> str:
    """Render a key path.

    By default each entry is rendered with ``str`` and the pieces are
    concatenated: ``['blk1']['conv1'].W``.  With ``simple=True`` only the bare
    keys are rendered (``blk1``, ``0``, ``W``), joined by ``separator``
    (default ``''``): ``keystr(path, simple=True, separator='.')`` gives
    ``blk1.conv1.W``.
    """
    sep = "" if separator is None else separator
    render = _simple_key if simple else str
    return sep.join([render(k) for k in keys])


def dotted_name(path: Iterable[Any]) -> str:
    """The dotted name of a key path, e.g. ``blk1.conv1.W`` or ``layers.0.W``.

    Used to give model parameters stable, human-readable names.
    """
    return keystr(path, simple=True, separator=".")


def _path_str(path: Iterable[Any]) -> str:
    s = keystr(path)
    return s if s else "<root>"


# ---------------------------------------------------------------------------
# Node handlers and the type registry
# ---------------------------------------------------------------------------
#
# A node handler knows how to take one node type apart and put it back
# together.  The `code` attribute selects an inlined fast path in the
# flattening loop:
#   _SEQ:     children are the node itself (tuple, list, namedtuple), aux None
#   _DICT:    children are values in sorted key order, aux is the key tuple
#   _NONE:    no children (the `None` node)
#   _GENERIC: call handler.flatten(x) -> (children, aux)

_SEQ, _DICT_CODE, _NONE_CODE, _GENERIC = 0, 1, 2, 3


class _NodeHandler:
    __slots__ = ("type", "kind", "code", "flatten", "unflatten",
                 "flatten_with_keys")

    def __init__(self, type_, kind, code, flatten, unflatten,
                 flatten_with_keys):
        self.type = type_
        self.kind = kind
        self.code = code
        self.flatten = flatten                  # x -> (children, aux)
        self.unflatten = unflatten              # (aux, children) -> x
        # x -> ([(key, child), ...], aux)
        self.flatten_with_keys = flatten_with_keys

    def __repr__(self) -> str:
        return f"<pytree node handler {self.kind} {self.type.__qualname__}>"


def _fallback_sort_key(k):
    return (type(k).__name__, repr(k))


def _sorted_keys(d) -> tuple:
    """Dict keys in sorted order; if the keys are not mutually comparable,
    sort by (type name, repr) so the order is still deterministic."""
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(sorted(d, key=_fallback_sort_key))


def _seq_with_keys(x):
    return [(SequenceKey(i), c) for i, c in enumerate(x)], None


def _dict_flatten(x):
    keys = _sorted_keys(x)
    return [x[k] for k in keys], keys


def _dict_with_keys(x):
    keys = _sorted_keys(x)
    return [(DictKey(k), x[k]) for k in keys], keys


def _odict_flatten(x):
    keys = tuple(x)
    return [x[k] for k in keys], keys


def _odict_with_keys(x):
    keys = tuple(x)
    return [(DictKey(k), x[k]) for k in keys], keys


def _ddict_flatten(x):
    keys = _sorted_keys(x)
    return [x[k] for k in keys], (x.default_factory, keys)


def _ddict_with_keys(x):
    keys = _sorted_keys(x)
    return [(DictKey(k), x[k]) for k in keys], (x.default_factory, keys)


_TUPLE_H = _NodeHandler(
    tuple, "tuple", _SEQ, lambda x: (x, None),
    lambda aux, ch: tuple(ch), _seq_with_keys)
_LIST_H = _NodeHandler(
    list, "list", _SEQ, lambda x: (x, None),
    lambda aux, ch: list(ch), _seq_with_keys)
_DICT_H = _NodeHandler(
    dict, "dict", _DICT_CODE, _dict_flatten,
    lambda aux, ch: dict(zip(aux, ch)), _dict_with_keys)
_NONE_H = _NodeHandler(
    type(None), "None", _NONE_CODE, lambda x: ((), None),
    lambda aux, ch: None, lambda x: ([], None))
_ODICT_H = _NodeHandler(
    collections.OrderedDict, "OrderedDict", _GENERIC, _odict_flatten,
    lambda aux, ch: collections.OrderedDict(zip(aux, ch)), _odict_with_keys)
_DDICT_H = _NodeHandler(
    collections.defaultdict, "defaultdict", _GENERIC, _ddict_flatten,
    lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch)),
    _ddict_with_keys)

# The structure of the `None` node is always this same object.
_NONE_NODE = (_NONE_H, None, ())

# Explicitly registered types (builtins included): used to reject duplicates.
_registry: dict[type, _NodeHandler] = {
    h.type: h
    for h in (_TUPLE_H, _LIST_H, _DICT_H, _NONE_H, _ODICT_H, _DDICT_H)
}

# Exact type -> handler, or None for "this type is a leaf".  Seeded with the
# registry, extended lazily with namedtuple handlers and leaf types.
_dispatch: dict[type, _NodeHandler | None] = dict(_registry)
_dispatch_get = _dispatch.get
_MISS = object()


def _namedtuple_handler(t: type) -> _NodeHandler:
    fields = tuple(t._fields)
    keys = tuple(GetAttrKey(f) for f in fields)

    def with_keys(x):
        return list(zip(keys, x)), None

    return _NodeHandler(t, "namedtuple", _SEQ, lambda x: (x, None),
                        lambda aux, ch: t(*ch), with_keys)


def _resolve(t: type) -> _NodeHandler | None:
    """Slow path of dispatch for a type not yet in `_dispatch`."""
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        h = _namedtuple_handler(t)
    else:
        h = None
    _dispatch[t] = h
    return h


def _handler_for(x) -> _NodeHandler | None:
    t = type(x)
    h = _dispatch_get(t, _MISS)
    if h is _MISS:
        h = _resolve(t)
    return h


def _register(h: _NodeHandler) -> None:
    t = h.type
    if not isinstance(t, type):
        raise TypeError(f"pytree node type must be a class, got {t!r}")
    if t in _registry:
        raise ValueError(
            f"Duplicate pytree node registration: type {t.__module__}."
            f"{t.__qualname__} is already registered as a pytree node.")
    _registry[t] = h
    _dispatch[t] = h   # overrides a cached "leaf" or namedtuple entry


# ---------------------------------------------------------------------------
# Registration API
# ---------------------------------------------------------------------------

def register_pytree_node(nodetype: type, flatten_func: Callable,
                         unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None):
    """Register `nodetype` as a pytree node.

    ``flatten_func(x) -> (children, aux_data)``;
    ``unflatten_func(aux_data, children) -> x`` (children is a tuple).
    ``aux_data`` must be hashable and comparable: it is part of the treedef.
    ``flatten_with_keys_func(x) -> (((key, child), ...), aux_data)``
    optionally gives key path entries; without it children are keyed by
    ``FlattenedIndexKey(i)``.  Dispatch is on the exact type (subclasses are
    leaves unless registered themselves).
    """
    if flatten_with_keys_func is None:
        def flatten_with_keys_func(x, _flatten=flatten_func):
            children, aux = _flatten(x)
            keyed = [(FlattenedIndexKey(i), c)
                     for i, c in enumerate(children)]
            return keyed, aux
    _register(_NodeHandler(nodetype, "custom", _GENERIC, flatten_func,
                           unflatten_func, flatten_with_keys_func))
    return nodetype


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable,
                              flatten_func: Callable | None = None):
    """Register `nodetype` with a key-aware flatten function.

    ``flatten_with_keys(x) -> (((key, child), ...), aux_data)``.  Plain
    flattening uses ``flatten_func`` when given (faster), else derives the
    children from ``flatten_with_keys``.
    """
    if flatten_func is None:
        def flatten_func(x, _fwk=flatten_with_keys):
            keyed, aux = _fwk(x)
            return [c for _, c in keyed], aux
    _register(_NodeHandler(nodetype, "custom", _GENERIC, flatten_func,
                           unflatten_func, flatten_with_keys))
    return nodetype


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: register `cls` using its ``tree_flatten(self)``
    method and ``tree_unflatten(cls, aux_data, children)`` classmethod."""
    register_pytree_node(cls, operator.methodcaller("tree_flatten"),
                         cls.tree_unflatten)
    return cls


def _static_flatten(x):
    return (), x


def _static_unflatten(aux, children):
    return aux


def register_static(cls: type) -> type:
    """Register `cls` so that its instances are nodes with no children whose
    value is carried in the treedef's aux data (so instances must be
    hashable and comparable).  Usable as a class decorator."""
    register_pytree_node(cls, _static_flatten, _static_unflatten)
    return cls


def _tuple_getter(names: tuple) -> Callable:
    if not names:
        return lambda x: ()
    if len(names) == 1:
        name = names[0]
        return lambda x: (getattr(x, name),)
    return operator.attrgetter(*names)


def register_dataclass(nodetype: type | None = None,
                       data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None,
                       drop_fields: Iterable[str] = ()):
    """Register a dataclass-like type as a pytree node.

    ``data_fields`` are children (leaves or subtrees), keyed by
    ``GetAttrKey(name)``; ``meta_fields`` are static and go into the aux
    data (hashable values only).  Unflattening calls
    ``nodetype(**fields)``.

    Works as a bare class decorator on a dataclass: then data fields are its
    ``init`` fields without ``metadata={'static': True}`` and meta fields
    those with it.  ``drop_fields``: init fields left out of the tree
    (unflattening leaves them to their defaults).
    ``register_dataclass(data_fields=..., meta_fields=...)`` returns a decorator.
    """
    if nodetype is None:
        return functools.partial(register_dataclass, data_fields=data_fields,
                                 meta_fields=meta_fields, drop_fields=drop_fields)
    drop = set(drop_fields)
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(
                f"register_dataclass: {nodetype!r} is not a dataclass, so "
                f"data_fields and meta_fields must be given explicitly.")
        data, meta = [], []
        for f in dataclasses.fields(nodetype):
            if f.init and f.name not in drop:
                (meta if f.metadata.get("static", False) else data).append(
                    f.name)
    else:
        data = list(data_fields or ())
        meta = list(meta_fields or ())
        for name in data + meta:
            if not isinstance(name, str):
                raise TypeError(f"register_dataclass: field names must be "
                                f"strings, got {name!r}")
    data_t, meta_t = tuple(data), tuple(meta)
    if len(set(data_t + meta_t)) != len(data_t + meta_t):
        raise ValueError(f"register_dataclass: data_fields {list(data_t)} and "
                         f"meta_fields {list(meta_t)} must be disjoint and "
                         f"without repeats")
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init}
        missing = init - set(data_t + meta_t) - drop
        extra = set(data_t + meta_t) - init
        if missing or extra:
            raise ValueError(
                f"register_dataclass: for {nodetype.__qualname__}, "
                f"data_fields + meta_fields must be exactly the dataclass's "
                f"init fields; missing {sorted(missing)}, "
                f"not init fields {sorted(extra)}")

    get_data = _tuple_getter(data_t)
    get_meta = _tuple_getter(meta_t)
    all_names = data_t + meta_t
    keys = tuple(GetAttrKey(n) for n in data_t)

    def flatten(x):
        return get_data(x), get_meta(x)

    def flatten_with_keys(x):
        return list(zip(keys, get_data(x))), get_meta(x)

    def unflatten(aux, children):
        return nodetype(**dict(zip(all_names, (*children, *aux))))

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype


# ---------------------------------------------------------------------------
# Structure nodes
# ---------------------------------------------------------------------------
#
# The structure of a tree is a nested tuple: a leaf is `None`, an inner node
# is `(handler, aux_data, child_structures)`.  Handlers compare by identity,
# so equality and hashing of these tuples run at C speed.

def count_leaves(node) -> int:
    """The number of leaves of a structure node (``PyTreeDef._node``)."""
    if node is None:
        return 1
    n = 0
    for c in node[2]:
        n += 1 if c is None else count_leaves(c)
    return n


def _count_nodes(node) -> int:
    if node is None:
        return 1
    n = 1
    for c in node[2]:
        n += 1 if c is None else _count_nodes(c)
    return n


def _custom_flatten(h, x):
    """A custom node's ``(children, aux)``, checked as JAX checks them (ValueError)."""
    out = h.flatten(x)
    if isinstance(out, str) or not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError("The to_iterable function for a custom PyTree node should return "
                         f"a (children, aux_data) tuple, got {out!r}")
    children, aux = out
    if not isinstance(children, (tuple, list)):
        try:
            children = list(children)
        except TypeError:
            raise ValueError("The to_iterable function for a custom PyTree node should "
                             "return a (children, aux_data) tuple where 'children' is "
                             f"iterable, got {out!r}") from None
    return children, aux


def _flatten(x, leaves):
    """Append the leaves of `x` to `leaves` and return its structure."""
    t = type(x)
    h = _dispatch_get(t, _MISS)
    if h is _MISS:
        h = _resolve(t)
    if h is None:
        leaves.append(x)
        return None
    code = h.code
    if code == _SEQ:
        children = x
        aux = None
    elif code == _DICT_CODE:
        try:
            aux = tuple(sorted(x))
        except TypeError:
            aux = tuple(sorted(x, key=_fallback_sort_key))
        children = [x[k] for k in aux]
    elif code == _NONE_CODE:
        return _NONE_NODE
    else:
        children, aux = _custom_flatten(h, x)
    nodes = []
    append = nodes.append
    for c in children:
        hc = _dispatch_get(type(c), _MISS)
        if hc is None:
            leaves.append(c)
            append(None)
        else:
            append(_flatten(c, leaves))
    return (h, aux, tuple(nodes))


def _flatten_is_leaf(x, leaves, is_leaf):
    if is_leaf(x):
        leaves.append(x)
        return None
    h = _handler_for(x)
    if h is None:
        leaves.append(x)
        return None
    children, aux = _custom_flatten(h, x)
    return (h, aux,
            tuple([_flatten_is_leaf(c, leaves, is_leaf) for c in children]))


def _flatten_with_path(x, path, out, is_leaf, takes_path=False):
    if is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x)):
        out.append((path, x))
        return None
    h = _handler_for(x)
    if h is None:
        out.append((path, x))
        return None
    keyed, aux = h.flatten_with_keys(x)
    return (h, aux, tuple([_flatten_with_path(c, path + (k,), out, is_leaf, takes_path)
                           for k, c in keyed]))


def _unflatten(node, it):
    h, aux, children = node
    vals = [next(it) if c is None else _unflatten(c, it) for c in children]
    if h is _TUPLE_H:
        return tuple(vals)
    if h is _LIST_H:
        return vals
    if h is _DICT_H:
        return dict(zip(aux, vals))
    return h.unflatten(aux, tuple(vals))


class _Mismatch(Exception):
    """Internal: raised by `_flatten_up_to`; collects the path on the way
    up.  `frames` holds (handler, aux, value, child index), innermost first."""

    def __init__(self, node, value):
        super().__init__()
        self.node = node
        self.value = value
        self.frames = []


def _flatten_up_to(node, x, out):
    """Append to `out` the subtrees of `x` at the leaves of `node`."""
    if node is None:
        out.append(x)
        return
    h, aux, children = node
    t = type(x)
    xh = _dispatch_get(t, _MISS)
    if xh is _MISS:
        xh = _resolve(t)
    if xh is not h:
        raise _Mismatch(node, x)
    code = h.code
    if code == _SEQ:
        xc = x
        if len(x) != len(children):
            raise _Mismatch(node, x)
    elif code == _DICT_CODE:
        if len(x) != len(aux):
            raise _Mismatch(node, x)
        try:
            xc = [x[k] for k in aux]
        except KeyError:
            raise _Mismatch(node, x) from None
    elif code == _NONE_CODE:
        return
    else:
        xc, xaux = h.flatten(x)
        xc = list(xc)
        if len(xc) != len(children) or xaux != aux:
            raise _Mismatch(node, x)
    i = 0
    for c, v in zip(children, xc):
        if c is None:
            out.append(v)
        else:
            try:
                _flatten_up_to(c, v, out)
            except _Mismatch as e:
                e.frames.append((h, aux, x, i))
                raise
        i += 1


def _child_key(h, aux, x, i):
    if h.code == _SEQ and h.kind != "namedtuple":
        return SequenceKey(i)
    if h.code == _DICT_CODE:
        return DictKey(aux[i])
    return h.flatten_with_keys(x)[0][i][0]


def node_description(h, aux, n) -> str:
    """What a node of handler ``h``, aux data ``aux`` and ``n`` children is, for messages
    (``tuple of length 2``, ``dict with keys ['a', 'b']``)."""
    kind = h.kind
    if kind in ("tuple", "list"):
        return f"{kind} of length {n}"
    if kind == "dict" or kind == "OrderedDict":
        return f"{kind} with keys {list(aux)!r}"
    if kind == "defaultdict":
        return f"defaultdict({aux[0]!r}) with keys {list(aux[1])!r}"
    if kind == "None":
        return "None"
    if kind == "namedtuple":
        return f"namedtuple {h.type.__qualname__} of length {n}"
    return (f"{h.type.__qualname__} node with {n} "
            f"{'child' if n == 1 else 'children'} and aux data {aux!r}")


def _describe_value(x) -> str:
    h = _handler_for(x)
    if h is None:
        return f"a leaf of type {type(x).__qualname__}"
    try:
        children, aux = _custom_flatten(h, x)
        return node_description(h, aux, len(list(children)))
    except Exception:  # pragma: no cover - only for error messages
        return f"a {type(x).__qualname__} node"


def _mismatch_message(e: _Mismatch) -> str:
    path = tuple(_child_key(h, aux, x, i) for h, aux, x, i in
                 reversed(e.frames))
    h, aux, children = e.node
    expected = node_description(h, aux, len(children))
    return (f"structures differ at {_path_str(path)}: expected {expected}, "
            f"got {_describe_value(e.value)}")


def _flatten_up_to_checked(node, tree, what: str) -> list:
    out = []
    try:
        _flatten_up_to(node, tree, out)
    except _Mismatch as e:
        raise ValueError(f"{what}: {_mismatch_message(e)}") from None
    return out


def _node_repr(node) -> str:
    if node is None:
        return "*"
    h, aux, children = node
    kind = h.kind
    parts = [_node_repr(c) for c in children]
    if kind == "tuple":
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    if kind == "list":
        return "[" + ", ".join(parts) + "]"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts)) + "}"
    if kind == "None":
        return "None"
    if kind == "namedtuple":
        fields = h.type._fields
        return (h.type.__name__ + "("
                + ", ".join(f"{f}={p}" for f, p in zip(fields, parts)) + ")")
    if kind == "OrderedDict":
        return ("OrderedDict({"
                + ", ".join(f"{k!r}: {p}" for k, p in zip(aux, parts)) + "})")
    if kind == "defaultdict":
        return (f"defaultdict({aux[0]!r}, {{"
                + ", ".join(f"{k!r}: {p}" for k, p in zip(aux[1], parts))
                + "})")
    return f"CustomNode({h.type.__name__}[{aux}], [{', '.join(parts)}])"


def _hash_skeleton(node):
    """``node`` with each unhashable aux data replaced by its type (for ``__hash__``)."""
    if node is None:
        return None
    h, aux, children = node
    try:
        hash(aux)
    except TypeError:
        aux = ("<unhashable>", type(aux))
    return (h, aux, tuple([_hash_skeleton(c) for c in children]))


def _compose(outer, inner):
    if outer is None:
        return inner
    h, aux, children = outer
    return (h, aux, tuple([_compose(c, inner) for c in children]))


# ---------------------------------------------------------------------------
# PyTreeDef
# ---------------------------------------------------------------------------

class PyTreeDef:
    """The structure of a pytree: everything but the leaves.

    Immutable, hashable and equality-comparable (two treedefs are equal when
    they have the same node types, aux data and shape).  Built by
    ``tree_flatten`` / ``tree_structure``; not constructible directly.
    """

    __slots__ = ("_node", "_num_leaves", "_hash")

    def __init__(self, *args, **kwargs):
        raise TypeError("PyTreeDef cannot be constructed directly; use "
                        "tree_structure() or tree_flatten().")

    def __setattr__(self, name, value):
        raise AttributeError("PyTreeDef is immutable")

    def __delattr__(self, name):
        raise AttributeError("PyTreeDef is immutable")

    @property
    def num_leaves(self) -> int:
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """Number of nodes, leaves and ``None`` nodes included."""
        return _count_nodes(self._node)

    def children(self) -> list[PyTreeDef]:
        """Treedefs of the immediate children (empty for a leaf)."""
        node = self._node
        if node is None:
            return []
        return [_make_treedef(c, count_leaves(c)) for c in node[2]]

    def node_data(self):
        """``(node type, aux data)`` of the root node, or None for a leaf."""
        node = self._node
        if node is None:
            return None
        return node[0].type, node[1]

    def unflatten(self, leaves: Iterable[Any]):
        """Build a tree of this structure from `leaves`."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree) -> list:
        """Flatten `tree` up to this structure: return the subtrees of `tree`
        found at this treedef's leaves.  `tree` must have exactly this
        treedef's nodes; where this treedef has a leaf, `tree` may have any
        subtree.  Raises ValueError naming the key path of a mismatch."""
        return _flatten_up_to_checked(self._node, tree, "flatten_up_to")

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """The treedef obtained by putting `inner` at every leaf of self."""
        return _make_treedef(_compose(self._node, inner._node),
                             self._num_leaves * inner._num_leaves)

    def __eq__(self, other):
        if type(other) is not PyTreeDef:
            return NotImplemented
        return self is other or self._node == other._node

    def __ne__(self, other):
        if type(other) is not PyTreeDef:
            return NotImplemented
        return not (self is other or self._node == other._node)

    def __hash__(self):
        h = self._hash
        if h is None:
            try:
                h = hash(self._node)
            except TypeError:  # unhashable aux data (a dict of settings): as JAX, the
                h = hash(_hash_skeleton(self._node))  # hash skips it; == still compares it
            _set_hash(self, h)
        return h

    def __repr__(self) -> str:
        return f"PyTreeDef({_node_repr(self._node)})"

    def __reduce__(self):
        raise TypeError("PyTreeDef objects are not picklable (node handlers "
                        "hold arbitrary registered functions)")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


_set_node = PyTreeDef._node.__set__
_set_num_leaves = PyTreeDef._num_leaves.__set__
_set_hash = PyTreeDef._hash.__set__
_new = object.__new__


def _make_treedef(node, num_leaves: int) -> PyTreeDef:
    td = _new(PyTreeDef)
    _set_node(td, node)
    _set_num_leaves(td, num_leaves)
    _set_hash(td, None)   # computed on first use, then cached
    return td


def _short_repr(treedef: PyTreeDef, limit: int = 200) -> str:
    r = repr(treedef)
    return r if len(r) <= limit else r[:limit - 4] + " ...)"


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def tree_flatten(tree, is_leaf: Callable[[Any], bool] | None = None):
    """Return ``(leaves, treedef)``.  `is_leaf(x)` returning True makes `x` a
    leaf even if it is a registered node (``None`` included)."""
    leaves = []
    if is_leaf is None:
        node = _flatten(tree, leaves)
    else:
        node = _flatten_is_leaf(tree, leaves, is_leaf)
    return leaves, _make_treedef(node, len(leaves))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]):
    """Inverse of `tree_flatten`: build a tree of structure `treedef`."""
    if type(treedef) is not PyTreeDef:
        raise TypeError(f"tree_unflatten: expected a PyTreeDef, got "
                        f"{type(treedef).__qualname__}")
    if type(leaves) is not list and type(leaves) is not tuple:
        leaves = list(leaves)
    n = treedef._num_leaves
    if len(leaves) != n:
        raise ValueError(
            f"tree_unflatten: expected {n} {'leaf' if n == 1 else 'leaves'}"
            f" for {_short_repr(treedef)}, but {len(leaves)} "
            f"{'was' if len(leaves) == 1 else 'were'} given")
    node = treedef._node
    if node is None:
        return leaves[0]
    return _unflatten(node, iter(leaves))


def tree_leaves(tree, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of `tree`, in flattening order."""
    leaves = []
    if is_leaf is None:
        _flatten(tree, leaves)
    else:
        _flatten_is_leaf(tree, leaves, is_leaf)
    return leaves


def tree_structure(tree,
                   is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The treedef of `tree`."""
    return tree_flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True when `treedef` has a single node (as in JAX, this includes the
    childless nodes ``None`` and ``()``)."""
    node = treedef._node
    return node is None or not node[2]


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return treedef.children()


def all_leaves(iterable: Iterable[Any],
               is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every element of `iterable` is a leaf."""
    for x in iterable:
        if is_leaf is not None and is_leaf(x):
            continue
        if _handler_for(x) is not None:
            return False
    return True


def tree_map(f: Callable, tree, *rest,
             is_leaf: Callable[[Any], bool] | None = None):
    """Apply `f` leafwise: ``f(x, *xs)`` for each leaf `x` of `tree` and the
    corresponding entries `xs` of the trees in `rest`.

    Each tree in `rest` must have `tree`'s structure as a prefix: the same
    nodes, except that where `tree` has a leaf it may have a whole subtree,
    which is passed to `f` as is.  On mismatch raises ValueError naming the
    key path where the structures differ.
    """
    leaves = []
    node = (_flatten(tree, leaves) if is_leaf is None
            else _flatten_is_leaf(tree, leaves, is_leaf))
    if rest:
        others = [_flatten_up_to_checked(node, r, "tree_map") for r in rest]
        new = list(map(f, leaves, *others))
    else:
        new = list(map(f, leaves))
    if node is None:
        return new[0]
    return _unflatten(node, iter(new))


def tree_flatten_with_path(tree, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False):
    """Return ``([(key_path, leaf), ...], treedef)``. With ``is_leaf_takes_path``,
    `is_leaf` is called as ``is_leaf(key_path, x)``."""
    out = []
    node = _flatten_with_path(tree, (), out, is_leaf, is_leaf_takes_path)
    return out, _make_treedef(node, len(out))


def tree_leaves_with_path(tree, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False):
    """Return ``[(key_path, leaf), ...]``."""
    out = []
    _flatten_with_path(tree, (), out, is_leaf, is_leaf_takes_path)
    return out


def tree_map_with_path(f: Callable, tree, *rest,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False):
    """Like `tree_map`, but calls ``f(key_path, x, *xs)``."""
    pairs = []
    node = _flatten_with_path(tree, (), pairs, is_leaf, is_leaf_takes_path)
    others = [_flatten_up_to_checked(node, r, "tree_map_with_path")
              for r in rest]
    new = [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)]
    if node is None:
        return new[0]
    return _unflatten(node, iter(new))


class _NoInitializer:
    def __repr__(self):
        return "<no initializer>"


_NO_INITIALIZER = _NoInitializer()


def tree_reduce(function: Callable, tree, initializer: Any = _NO_INITIALIZER,
                is_leaf: Callable[[Any], bool] | None = None):
    """``functools.reduce(function, tree_leaves(tree), [initializer])``."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        if not leaves:
            raise TypeError("tree_reduce: tree has no leaves and no "
                            "initializer was given")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """``all(tree_leaves(tree))``."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose):
    """Turn a tree of structure ``outer.compose(inner)`` into one of
    structure ``inner.compose(outer)``.  `inner_treedef` may be None, then it
    is inferred from the first outer leaf position."""
    if inner_treedef is None:
        first = outer_treedef.flatten_up_to(pytree_to_transpose)
        if not first:
            raise ValueError("tree_transpose: cannot infer inner_treedef "
                             "from an outer treedef without leaves")
        inner_treedef = tree_structure(first[0])
    leaves, treedef = tree_flatten(pytree_to_transpose)
    expected = outer_treedef.compose(inner_treedef)
    # as JAX: only the number of leaves is checked (a custom node's children may depend
    # on its aux data, which may differ between the outer positions)
    if treedef.num_leaves != expected.num_leaves:
        raise TypeError(f"tree_transpose: Mismatch (tree structure mismatch); got\n"
                        f"  {treedef!r}\nexpected outer.compose(inner) =\n"
                        f"  {expected!r}")
    n_in = inner_treedef._num_leaves
    # leaves are laid out outer-major: leaves[o * n_in + i]
    subtrees = [tree_unflatten(outer_treedef, leaves[i::n_in])
                for i in range(n_in)]
    return tree_unflatten(inner_treedef, subtrees)


def tree_reduce_associative(operation: Callable, tree, *,
                            identity: Any = _NO_INITIALIZER,
                            is_leaf: Callable[[Any], bool] | None = None):
    """Reduce the leaves with an associative `operation`, as a balanced tree of
    calls: the leaves are halved (the first half has ``n // 2``), each half
    reduced, then the two combined.  `identity` is returned for a tree without
    leaves (a TypeError without it)."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise TypeError("tree_reduce_associative: the tree has no leaves; pass "
                            "identity= (the operation's neutral element) to reduce "
                            "an empty tree")
        return identity

    def halves(xs):
        if len(xs) == 1:
            return xs[0]
        mid = len(xs) // 2
        return operation(halves(xs[:mid]), halves(xs[mid:]))

    return halves(leaves)


def tree_broadcast(prefix_tree, full_tree,
                   is_leaf: Callable[[Any], bool] | None = None):
    """`full_tree`'s structure with each leaf of `prefix_tree` repeated over the
    leaves of the subtree of `full_tree` at its place (`prefix_tree` must be a
    prefix of `full_tree`)."""
    leaves, node = [], None
    node = (_flatten(prefix_tree, leaves) if is_leaf is None
            else _flatten_is_leaf(prefix_tree, leaves, is_leaf))
    subtrees = _flatten_up_to_checked(node, full_tree, "tree_broadcast")
    out = []
    for leaf, sub in zip(leaves, subtrees):
        sub_leaves, sub_def = tree_flatten(sub, is_leaf)
        out.append(tree_unflatten(sub_def, [leaf] * len(sub_leaves)))
    return out[0] if node is None else _unflatten(node, iter(out))


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The treedef of a tuple whose children have the given treedefs."""
    treedefs = list(treedefs)
    for t in treedefs:
        if type(t) is not PyTreeDef:
            raise TypeError(f"treedef_tuple: expected PyTreeDefs, got "
                            f"{type(t).__qualname__}")
    return _make_treedef((_TUPLE_H, None, tuple(t._node for t in treedefs)),
                         sum(t._num_leaves for t in treedefs))


def _node_handler_or_raise(tree, what):
    h = _handler_for(tree)
    if h is None:
        raise ValueError(f"{what}: can't flatten a leaf of type "
                         f"{type(tree).__qualname__} by one level; it is not a "
                         f"registered pytree node (register it with "
                         f"register_pytree_node)")
    return h


def flatten_one_level(tree):
    """``(children, aux_data)`` of the pytree node `tree` (its direct children,
    not flattened further).  A leaf raises ValueError."""
    h = _node_handler_or_raise(tree, "flatten_one_level")
    children, aux = _custom_flatten(h, tree)
    if h.kind == "namedtuple":  # as JAX: the fields as a list, the type as the aux data
        return list(children), h.type
    if h.code == _DICT_CODE:
        return tuple(children), aux
    return children, aux


def flatten_one_level_with_keys(tree):
    """``(((key, child), ...), aux_data)`` of the pytree node `tree`."""
    h = _node_handler_or_raise(tree, "flatten_one_level_with_keys")
    keyed, aux = h.flatten_with_keys(tree)
    return tuple(tuple(kc) for kc in keyed), aux


def is_tree_node(typ: type) -> bool:
    """True when instances of `typ` are pytree nodes (built in, registered or a
    namedtuple), not leaves."""
    if not isinstance(typ, type):
        raise TypeError(f"is_tree_node: expected a type, got {typ!r}")
    h = _dispatch_get(typ, _MISS)
    if h is _MISS:
        h = _resolve(typ)
    return h is not None


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: register `cls` with its ``tree_flatten_with_keys(self)``
    method (``(((key, child), ...), aux_data)``) and its
    ``tree_unflatten(cls, aux_data, children)`` classmethod (and
    ``tree_flatten`` when it has one)."""
    flat = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(
        cls, operator.methodcaller("tree_flatten_with_keys"), cls.tree_unflatten,
        operator.methodcaller("tree_flatten") if flat is not None else None)
    return cls


def static(**kwargs):
    """``dataclasses.field(...)`` marked ``metadata={'static': True}``: a meta field
    of a dataclass registered with `register_dataclass` (public as ``fnx.tree.static``,
    where JAX has it)."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


KeyEntry = Any          # one step of a key path (SequenceKey, DictKey, ...)
KeyPath = tuple         # a tuple of KeyEntry


class _CallableShim:
    """Holds a ``functools.partial`` as the function of a `Partial` without
    ``functools.partial`` merging its arguments into the new one (the
    arguments of each level must stay where they are in the tree)."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __eq__(self, other):  # as JAX's: equal to its partial too (p.func == fn)
        return self.fn == (other.fn if isinstance(other, _CallableShim) else other)

    def __hash__(self):
        return id(self.fn)

    def __repr__(self):
        return repr(self.fn)


class Partial(functools.partial):
    """``functools.partial`` that is a pytree: the bound positional and keyword
    arguments are its children (arrays there are traced by jit, differentiated,
    batched), the function is static aux data.  Use it to pass a function with
    array arguments already bound through a transformation::

        step = Partial(fnp.add, fnp.ones(3))
        fnx.jit(lambda f, x: f(x))(step, 1.0)
    """

    def __new__(cls, func, *args, **kw):
        if isinstance(func, functools.partial):
            func = _CallableShim(func)
        return super().__new__(cls, func, *args, **kw)


def _partial_flatten(p):
    return (p.args, p.keywords), p.func


def _partial_flatten_with_keys(p):
    return ([(GetAttrKey("args"), p.args), (GetAttrKey("keywords"), p.keywords)],
            p.func)


def _partial_unflatten(func, children):
    args, keywords = children
    if isinstance(func, _CallableShim):
        func = func.fn
    return Partial(func, *args, **keywords)


register_pytree_with_keys(Partial, _partial_flatten_with_keys, _partial_unflatten,
                          _partial_flatten)
