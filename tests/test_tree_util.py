"""Tests for fnx.tree_util (pytrees)."""

import collections
import copy
import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fnx import tree_util
from fnx.tree_util import (
    DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, dotted_name, keystr,
)

# ---------------------------------------------------------------------------
# Node types used throughout (registered once, at import).
# ---------------------------------------------------------------------------

Point = collections.namedtuple("Point", ["x", "y"])
OtherPoint = collections.namedtuple("OtherPoint", ["x", "y"])


@tree_util.register_dataclass
@dataclasses.dataclass
class DC:
    a: Any
    b: Any
    tag: str = dataclasses.field(default="t", metadata={"static": True})


@tree_util.register_pytree_node_class
class Pair:
    """Custom node registered without keys: paths use FlattenedIndexKey."""

    def __init__(self, first, second, label):
        self.first, self.second, self.label = first, second, label

    def tree_flatten(self):
        return (self.first, self.second), self.label

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, aux)

    def __repr__(self):
        return f"Pair({self.first!r}, {self.second!r}, {self.label!r})"


class Box:
    """Custom node registered with keys."""

    def __init__(self, content):
        self.content = content

    def __repr__(self):
        return f"Box({self.content!r})"


tree_util.register_pytree_with_keys(
    Box,
    lambda b: (((GetAttrKey("content"), b.content),), None),
    lambda aux, children: Box(*children),
)


@tree_util.register_static
class Static:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return type(other) is Static and other.v == self.v

    def __hash__(self):
        return hash(("Static", self.v))

    def __repr__(self):
        return f"Static({self.v})"


@tree_util.register_dataclass
@dataclasses.dataclass
class Conv:
    W: Any
    b: Any
    stride: int = dataclasses.field(default=1, metadata={"static": True})


@tree_util.register_dataclass
@dataclasses.dataclass
class Block:
    conv1: Conv
    conv2: Conv


@dataclasses.dataclass
class Marked:
    """Unregistered (so a leaf) wrapper."""
    value: Any


def canon(x):
    """A hashable, type-exact canonical form of a tree (``==`` on trees is
    too lenient: a namedtuple equals a tuple with the same items)."""
    t = type(x)
    if t in (list, tuple) or (isinstance(x, tuple) and hasattr(t, "_fields")):
        return (t, tuple(canon(c) for c in x))
    if t is dict:
        return (t, frozenset((k, canon(v)) for k, v in x.items()))
    if t is collections.OrderedDict:
        return (t, tuple((k, canon(v)) for k, v in x.items()))
    if t is collections.defaultdict:
        return (t, x.default_factory,
                frozenset((k, canon(v)) for k, v in x.items()))
    if t is DC:
        return (t, canon(x.a), canon(x.b), x.tag)
    if t is Pair:
        return (t, canon(x.first), canon(x.second), x.label)
    if t is Box:
        return (t, canon(x.content))
    return (t, x)


# ---------------------------------------------------------------------------
# Hypothesis strategies
# ---------------------------------------------------------------------------

leaf_st = st.one_of(
    st.integers(-100, 100),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=3),
    st.booleans(),
)
# Mixed int/str keys are not mutually comparable: exercises the fallback.
key_st = st.one_of(st.text(max_size=2), st.integers(-3, 3))


def _extend(children):
    kids = st.lists(children, max_size=3)
    return st.one_of(
        kids,
        kids.map(tuple),
        st.dictionaries(key_st, children, max_size=3),
        st.dictionaries(st.text(max_size=2), children, max_size=3).map(
            collections.OrderedDict),
        st.builds(Point, children, children),
        st.builds(DC, children, children, st.sampled_from(["s", "t"])),
        st.builds(Pair, children, children, st.integers(0, 2)),
        st.builds(Box, children),
    )


tree_st = st.recursive(
    st.one_of(leaf_st, st.none(), st.builds(Static, st.integers(0, 3))),
    _extend, max_leaves=12)

hsettings = settings(max_examples=120, deadline=None, database=None)


# ---------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------

@hsettings
@given(tree_st)
def test_roundtrip_flatten_unflatten(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    assert treedef.num_leaves == len(leaves)
    assert tree_util.tree_leaves(tree) == leaves
    assert tree_util.tree_structure(tree) == treedef
    rebuilt = tree_util.tree_unflatten(treedef, leaves)
    assert canon(rebuilt) == canon(tree)
    assert canon(treedef.unflatten(iter(leaves))) == canon(tree)
    # Identity tree_map rebuilds the same tree.
    assert canon(tree_util.tree_map(lambda x: x, tree)) == canon(tree)


@hsettings
@given(tree_st)
def test_structure_independent_of_leaf_values(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    renumbered = tree_util.tree_unflatten(treedef, list(range(len(leaves))))
    assert tree_util.tree_leaves(renumbered) == list(range(len(leaves)))
    td2 = tree_util.tree_structure(renumbered)
    assert td2 == treedef and not (td2 != treedef)
    assert hash(td2) == hash(treedef)
    assert {treedef: 1}[td2] == 1


@hsettings
@given(tree_st)
def test_paths_match_leaves(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    pairs, treedef2 = tree_util.tree_flatten_with_path(tree)
    assert treedef2 == treedef
    assert [x for _, x in pairs] == leaves
    assert tree_util.tree_leaves_with_path(tree) == pairs
    paths = [p for p, _ in pairs]
    assert len(set(paths)) == len(paths)
    assert all(isinstance(p, tuple) for p in paths)
    # tree_map_with_path sees the same paths, in the same order.
    seen = []
    out = tree_util.tree_map_with_path(lambda p, x: seen.append(p) or x, tree)
    assert seen == paths
    assert canon(out) == canon(tree)


@hsettings
@given(tree_st)
def test_treedef_introspection_consistent(tree):
    _, treedef = tree_util.tree_flatten(tree)
    kids = treedef.children()
    if treedef.node_data() is None:  # a leaf
        assert kids == [] and treedef.num_leaves == 1
        assert treedef.num_nodes == 1
    else:
        assert treedef.num_leaves == sum(k.num_leaves for k in kids)
        assert treedef.num_nodes == 1 + sum(k.num_nodes for k in kids)
        assert treedef.node_data()[0] is type(tree)
    assert tree_util.treedef_is_leaf(treedef) == (treedef.num_nodes == 1)
    assert tree_util.treedef_children(treedef) == kids


@hsettings
@given(tree_st)
def test_flatten_up_to_and_prefix_rule(tree):
    leaves, treedef = tree_util.tree_flatten(tree)
    assert treedef.flatten_up_to(tree) == leaves
    # Replace every leaf by a subtree: `tree` is then a prefix of `deeper`.
    deeper = tree_util.tree_map(lambda x: [x, {"k": x}], tree)
    # `Marked` is unregistered, hence a leaf of the result.
    pairs = tree_util.tree_map(lambda x, sub: Marked((x, sub)), tree, deeper)
    got = [m.value for m in tree_util.tree_leaves(pairs)]
    assert got == [(x, [x, {"k": x}]) for x in leaves]
    assert treedef.flatten_up_to(deeper) == [[x, {"k": x}] for x in leaves]


# ---------------------------------------------------------------------------
# Built-in node types
# ---------------------------------------------------------------------------

def test_dict_keys_sorted():
    leaves, treedef = tree_util.tree_flatten({"b": 1, "a": 2, "c": 3})
    assert leaves == [2, 1, 3]
    out = tree_util.tree_unflatten(treedef, [7, 8, 9])
    assert list(out) == ["a", "b", "c"]
    # Insertion order does not matter.
    assert (tree_util.tree_structure({"a": 0, "b": 0})
            == tree_util.tree_structure({"b": 0, "a": 0}))
    assert (tree_util.tree_structure({"a": 0, "b": 0})
            != tree_util.tree_structure({"a": 0, "c": 0}))


def test_dict_incomparable_keys_are_deterministic():
    d1 = {"a": "s", 1: "i", (2,): "t"}
    d2 = {(2,): "t", 1: "i", "a": "s"}
    l1, t1 = tree_util.tree_flatten(d1)
    l2, t2 = tree_util.tree_flatten(d2)
    assert l1 == l2 == ["i", "s", "t"]  # by (type name, repr): int, str, tuple
    assert t1 == t2
    assert tree_util.tree_unflatten(t1, l1) == d1


def test_ordered_dict_keeps_insertion_order():
    od = collections.OrderedDict([("z", 1), ("a", 2), ("m", 3)])
    leaves, treedef = tree_util.tree_flatten(od)
    assert leaves == [1, 2, 3]
    out = tree_util.tree_map(lambda x: x * 10, od)
    assert type(out) is collections.OrderedDict
    assert list(out.items()) == [("z", 10), ("a", 20), ("m", 30)]
    swapped = collections.OrderedDict([("a", 2), ("z", 1), ("m", 3)])
    assert tree_util.tree_structure(swapped) != treedef
    assert tree_util.tree_structure(dict(od)) != treedef
    paths = [keystr(p) for p, _ in tree_util.tree_leaves_with_path(od)]
    assert paths == ["['z']", "['a']", "['m']"]


def test_defaultdict_keeps_factory():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tree_util.tree_flatten(dd)
    assert leaves == [2, 1]
    out = tree_util.tree_unflatten(treedef, [5, 6])
    assert type(out) is collections.defaultdict
    assert out.default_factory is list and dict(out) == {"a": 5, "b": 6}
    assert treedef != tree_util.tree_structure(
        collections.defaultdict(set, {"b": 1, "a": 2}))


def test_none_is_a_node_without_children():
    assert tree_util.tree_leaves(None) == []
    leaves, treedef = tree_util.tree_flatten([None, 1, (None,)])
    assert leaves == [1]
    assert tree_util.tree_unflatten(treedef, [2]) == [None, 2, (None,)]
    assert treedef.num_nodes == 5
    assert tree_util.tree_structure(None).num_leaves == 0
    assert tree_util.tree_unflatten(tree_util.tree_structure(None), []) is None


def test_namedtuple_is_a_node_distinct_from_tuple():
    leaves, treedef = tree_util.tree_flatten(Point(1, (2, 3)))
    assert leaves == [1, 2, 3]
    out = tree_util.tree_unflatten(treedef, [4, 5, 6])
    assert type(out) is Point and out == Point(4, (5, 6))
    assert treedef != tree_util.tree_structure((1, (2, 3)))
    assert treedef != tree_util.tree_structure(OtherPoint(1, (2, 3)))
    paths = [keystr(p) for p, _ in tree_util.tree_leaves_with_path(out)]
    assert paths == [".x", ".y[0]", ".y[1]"]


def test_unregistered_objects_and_subclasses_are_leaves():
    class MyList(list):
        pass

    arr = np.arange(3)
    leaves = tree_util.tree_leaves([arr, MyList([1, 2]), "str", 1.5])
    assert leaves[0] is arr
    assert type(leaves[1]) is MyList
    assert leaves[2:] == ["str", 1.5]


def test_registering_a_type_already_seen_as_leaf():
    class Late:
        def __init__(self, v):
            self.v = v

    assert tree_util.tree_leaves([Late(1)])[0].v == 1  # cached as a leaf
    tree_util.register_pytree_node(
        Late, lambda x: ((x.v,), None), lambda aux, ch: Late(*ch))
    assert tree_util.tree_leaves([Late(1)]) == [1]


# ---------------------------------------------------------------------------
# tree_map, several trees, is_leaf
# ---------------------------------------------------------------------------

def test_tree_map_several_trees():
    a = {"x": [1, 2], "y": (3, None)}
    b = {"x": [10, 20], "y": (30, None)}
    c = {"x": [100, 200], "y": (300, None)}
    out = tree_util.tree_map(lambda p, q, r: p + q + r, a, b, c)
    assert out == {"x": [111, 222], "y": (333, None)}


def test_tree_map_prefix_rule():
    out = tree_util.tree_map(lambda x, y: (x, y), [1, 2], [[3], {"k": 4}])
    assert out == [(1, [3]), (2, {"k": 4})]
    # A leaf of the first tree may match None or an empty container too.
    out = tree_util.tree_map(lambda x, y: y, [1, 2], [None, ()])
    assert out == [None, ()]
    # But the prefix rule is one-directional.
    with pytest.raises(ValueError, match=r"structures differ at \[0\]"):
        tree_util.tree_map(lambda x, y: x, [[3], {"k": 4}], [1, 2])


def test_tree_map_with_numpy_leaves():
    tree = {"w": np.ones((2, 2)), "b": np.zeros(2)}
    out = tree_util.tree_map(lambda x, y: x + 2 * y, tree, tree)
    np.testing.assert_array_equal(out["w"], 3 * np.ones((2, 2)))
    np.testing.assert_array_equal(out["b"], np.zeros(2))


def test_is_leaf():
    tree = [(1, 2), [(3,), 4]]
    leaves, treedef = tree_util.tree_flatten(
        tree, is_leaf=lambda x: isinstance(x, tuple))
    assert leaves == [(1, 2), (3,), 4]
    assert tree_util.tree_unflatten(treedef, leaves) == tree
    out = tree_util.tree_map(len, [(1, 2), [(3,)]],
                             is_leaf=lambda x: isinstance(x, tuple))
    assert out == [2, [1]]
    # is_leaf can turn None into a leaf.
    assert tree_util.tree_leaves([None, 1], is_leaf=lambda x: x is None) == [
        None, 1]
    pairs = tree_util.tree_leaves_with_path(
        {"a": (1, 2)}, is_leaf=lambda x: isinstance(x, tuple))
    assert pairs == [((DictKey("a"),), (1, 2))]


def test_tree_reduce_tree_all_all_leaves():
    tree = {"a": [1, 2], "b": (3, None)}
    assert tree_util.tree_reduce(lambda x, y: x + y, tree) == 6
    assert tree_util.tree_reduce(lambda x, y: x + y, tree, 10) == 16
    assert tree_util.tree_reduce(lambda x, y: x + y, None, initializer=5) == 5
    with pytest.raises(TypeError):
        tree_util.tree_reduce(lambda x, y: x + y, [])
    assert tree_util.tree_all([True, (1, {"x": True})])
    assert not tree_util.tree_all([True, (0, {"x": True})])
    assert tree_util.tree_all([])
    assert tree_util.all_leaves([1, "a", np.zeros(2)])
    assert not tree_util.all_leaves([1, [2]])
    assert not tree_util.all_leaves([None])
    assert tree_util.all_leaves([(1,)], is_leaf=lambda x: isinstance(x, tuple))


# ---------------------------------------------------------------------------
# Key paths and names
# ---------------------------------------------------------------------------

def test_key_entries_str_hash_frozen():
    assert str(SequenceKey(0)) == "[0]"
    assert str(DictKey("a")) == "['a']"
    assert str(DictKey(3)) == "[3]"
    assert str(GetAttrKey("W")) == ".W"
    assert str(FlattenedIndexKey(1)) == "[<flat index 1>]"  # JAX's
    assert hash(FlattenedIndexKey(1)) != hash(SequenceKey(1))
    assert SequenceKey(0) == SequenceKey(0) != FlattenedIndexKey(0)
    assert len({SequenceKey(0), SequenceKey(0), DictKey(0)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        SequenceKey(0).idx = 1


def test_keystr_forms():
    path = (DictKey("blk1"), DictKey("conv1"), GetAttrKey("W"))
    assert keystr(path) == "['blk1']['conv1'].W"
    assert keystr(path, simple=True) == "blk1conv1W"
    assert keystr(path, simple=True, separator=".") == "blk1.conv1.W"
    assert keystr(path, separator="/") == "['blk1']/['conv1']/.W"
    assert keystr(()) == ""
    assert dotted_name((DictKey("layers"), SequenceKey(0), DictKey("W"))) == (
        "layers.0.W")


def test_dotted_names_nested_dicts():
    params = {"blk1": {"conv1": {"W": 0, "b": 1}}, "out": 2}
    pairs = tree_util.tree_leaves_with_path(params)
    assert [keystr(p) for p, _ in pairs] == [
        "['blk1']['conv1']['W']", "['blk1']['conv1']['b']", "['out']"]
    assert [dotted_name(p) for p, _ in pairs] == [
        "blk1.conv1.W", "blk1.conv1.b", "out"]


def test_dotted_names_dataclasses_and_lists():
    params = {"blk1": Block(Conv(W=1, b=2), Conv(W=3, b=4, stride=2)),
              "layers": [{"W": 5}, {"W": 6}]}
    names = tree_util.tree_map_with_path(lambda p, x: dotted_name(p), params)
    assert names["blk1"].conv1.W == "blk1.conv1.W"
    assert names["blk1"].conv2.stride == 2  # static field survives
    flat = [dotted_name(p) for p, _ in tree_util.tree_leaves_with_path(params)]
    assert flat == ["blk1.conv1.W", "blk1.conv1.b", "blk1.conv2.W",
                    "blk1.conv2.b", "layers.0.W", "layers.1.W"]
    first = tree_util.tree_leaves_with_path(params)[0][0]
    assert keystr(first) == "['blk1'].conv1.W"


def test_custom_node_paths():
    pairs = tree_util.tree_leaves_with_path(
        [Pair(1, Box(2), "lab"), Static(3)])
    assert pairs == [((SequenceKey(0), FlattenedIndexKey(0)), 1),
                     ((SequenceKey(0), FlattenedIndexKey(1),
                       GetAttrKey("content")), 2)]
    assert dotted_name(pairs[1][0]) == "0.1.content"


def test_tree_map_with_path_several_trees():
    out = tree_util.tree_map_with_path(
        lambda p, x, y: f"{dotted_name(p)}={x + y}",
        {"a": [1, 2]}, {"a": [10, 20]})
    assert out == {"a": ["a.0=11", "a.1=22"]}
    with pytest.raises(ValueError, match=r"tree_map_with_path: structures "
                                         r"differ at \['a'\]"):
        tree_util.tree_map_with_path(lambda p, x, y: x, {"a": [1, 2]},
                                     {"a": [1]})


# ---------------------------------------------------------------------------
# PyTreeDef
# ---------------------------------------------------------------------------

def test_treedef_equality_and_hash():
    s = tree_util.tree_structure
    # Both operators, since __eq__ and __ne__ are separate methods.
    assert not (s([1, 2]) == s((1, 2)))
    assert not (s({"a": 1}) == s({"b": 1}))
    assert not (s(Pair(1, 2, "a")) == s(Pair(1, 2, "b")))
    assert not (s([1, 2]) != s([3, 4]))
    assert s([1, 2]) == s([3, 4]) and hash(s([1, 2])) == hash(s([3, 4]))
    assert s([1, 2]) != s((1, 2))
    assert s([1, 2]) != s([1, 2, 3])
    assert s([1, [2]]) != s([1, 2])
    assert s([None]) != s([1])
    assert s(Pair(1, 2, "a")) == s(Pair(5, 6, "a"))
    assert s(Pair(1, 2, "a")) != s(Pair(1, 2, "b"))
    assert s(DC(1, 2, "s")) != s(DC(1, 2, "t"))
    assert s(Static(1)) == s(Static(1)) != s(Static(2))
    cache = {s({"a": 1, "b": (2, 3)}): "hit"}
    assert cache[s({"b": (0, 0), "a": 0})] == "hit"
    assert s([1]) != [1]  # comparison with a non-treedef is False
    td = s([1])
    assert copy.copy(td) is td and copy.deepcopy(td) is td


def test_treedef_is_immutable_and_not_constructible():
    td = tree_util.tree_structure([1, 2])
    with pytest.raises(AttributeError):
        td._node = None
    with pytest.raises(AttributeError):
        td.num_leaves = 5
    with pytest.raises(TypeError):
        tree_util.PyTreeDef()


def test_treedef_repr():
    s = tree_util.tree_structure
    assert (repr(s({"a": 1, "b": [2, None]}))
            == "PyTreeDef({'a': *, 'b': [*, None]})")
    assert repr(s((1,))) == "PyTreeDef((*,))"
    assert repr(s(1)) == "PyTreeDef(*)"
    assert repr(s(Point(1, 2))) == "PyTreeDef(Point(x=*, y=*))"
    assert (repr(s(Pair(1, 2, "aux")))
            == "PyTreeDef(CustomNode(Pair[aux], [*, *]))")  # str(aux), as JAX
    assert repr(s(Static(3))) == "PyTreeDef(CustomNode(Static[Static(3)], []))"


def test_treedef_methods():
    td = tree_util.tree_structure({"a": [1, 2], "b": 3})
    assert td.num_leaves == 3
    assert td.num_nodes == 5  # dict, list, 3 leaves
    assert td.node_data() == (dict, ("a", "b"))
    kids = td.children()
    assert kids == [tree_util.tree_structure([0, 0]),
                    tree_util.tree_structure(0)]
    assert tree_util.tree_structure(0).node_data() is None
    assert tree_util.treedef_is_leaf(kids[1])
    assert not tree_util.treedef_is_leaf(kids[0])
    assert td.unflatten([1, 2, 3]) == {"a": [1, 2], "b": 3}
    assert td.flatten_up_to({"a": [(1,), 2], "b": [3]}) == [(1,), 2, [3]]
    composed = tree_util.tree_structure([0, 0]).compose(
        tree_util.tree_structure((0, 0)))
    assert composed == tree_util.tree_structure([(0, 0), (0, 0)])
    assert composed.num_leaves == 4


# ---------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------

def test_unflatten_wrong_number_of_leaves():
    td = tree_util.tree_structure((1, 2, 3))
    with pytest.raises(ValueError, match=r"expected 3 leaves") as e:
        tree_util.tree_unflatten(td, [1, 2])
    assert "2 were given" in str(e.value)
    with pytest.raises(ValueError, match=r"expected 3 leaves.*4 were given"):
        td.unflatten([1, 2, 3, 4])


def test_tree_map_mismatch_messages():
    with pytest.raises(ValueError) as e:
        tree_util.tree_map(lambda x, y: x, {"a": 1, "b": [1, [2, 3]]},
                           {"a": 1, "b": [1, (2, 3, 4)]})
    assert str(e.value) == ("tree_map: structures differ at ['b'][1]: "
                            "expected list of length 2, got tuple of length 3")

    with pytest.raises(ValueError) as e:
        tree_util.tree_map(lambda x, y: x, {"a": 1, "b": 2}, {"a": 1, "c": 2})
    msg = str(e.value)
    assert "at <root>" in msg
    assert "expected dict with keys ['a', 'b']" in msg
    assert "got dict with keys ['a', 'c']" in msg

    with pytest.raises(ValueError) as e:
        tree_util.tree_map(lambda x, y: x, [[1, 2]], [3])
    assert "at [0]: expected list of length 2, got a leaf of type int" in str(
        e.value)

    with pytest.raises(ValueError) as e:
        tree_util.tree_map(lambda x, y: x, [None], [1])
    assert "at [0]: expected None, got a leaf of type int" in str(e.value)

    with pytest.raises(ValueError) as e:
        tree_util.tree_map(lambda x, y: x, {"p": Pair(1, [2], "u")},
                           {"p": Pair(1, [2], "v")})
    assert "at ['p']" in str(e.value)
    assert "aux data 'u'" in str(e.value) and "aux data 'v'" in str(e.value)

    with pytest.raises(ValueError) as e:
        tree_util.tree_map(lambda x, y: x, DC([1, 2], 0), DC([1], 0))
    assert "at .a: expected list of length 2, got list of length 1" in str(
        e.value)


def test_flatten_up_to_message():
    td = tree_util.tree_structure({"a": [1, 2]})
    with pytest.raises(ValueError,
                       match=r"^flatten_up_to: structures differ at "
                             r"\['a'\]: expected list of length 2, "
                             r"got tuple of length 2$"):
        td.flatten_up_to({"a": (1, 2)})


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------

def test_register_dataclass_decorator_with_static_fields():
    leaves, treedef = tree_util.tree_flatten(Conv(W=np.ones(2), b=3, stride=4))
    assert len(leaves) == 2 and leaves[1] == 3
    assert treedef.node_data() == (Conv, (4,))
    out = tree_util.tree_unflatten(treedef, ["w", "b"])
    assert out == Conv(W="w", b="b", stride=4)
    assert (tree_util.tree_structure(Conv(1, 2, stride=1))
            != tree_util.tree_structure(Conv(1, 2, stride=2)))
    mapped = tree_util.tree_map(lambda x: x * 2, Conv(W=1, b=2, stride=5))
    assert mapped == Conv(W=2, b=4, stride=5)


def test_register_dataclass_explicit_fields_and_factory_form():
    @dataclasses.dataclass
    class Explicit:
        x: Any
        name: str

    tree_util.register_dataclass(Explicit, data_fields=["x"],
                                 meta_fields=["name"])
    leaves, td = tree_util.tree_flatten(Explicit(x=[1, 2], name="n"))
    assert leaves == [1, 2] and td.node_data() == (Explicit, ("n",))

    @tree_util.register_dataclass(data_fields=["u", "v"], meta_fields=[])
    class Plain:
        def __init__(self, u, v):
            self.u, self.v = u, v

    out = tree_util.tree_map(lambda x: x + 1, Plain(1, 2))
    assert (type(out), out.u, out.v) == (Plain, 2, 3)
    paths = [keystr(p)
             for p, _ in tree_util.tree_leaves_with_path(Plain(1, 2))]
    assert paths == [".u", ".v"]

    class NotADataclass:
        pass

    with pytest.raises(TypeError, match="not a dataclass"):
        tree_util.register_dataclass(NotADataclass)

    @dataclasses.dataclass
    class Incomplete:
        a: Any
        b: Any

    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        tree_util.register_dataclass(Incomplete, data_fields=["a"],
                                     meta_fields=[])


def test_register_static():
    leaves, td = tree_util.tree_flatten([Static(1), 2])
    assert leaves == [2]
    out = tree_util.tree_unflatten(td, [5])
    assert out == [Static(1), 5]
    assert td.num_nodes == 3


def test_register_pytree_node_class_roundtrip():
    p = Pair([1, 2], {"k": 3}, "lab")
    leaves, td = tree_util.tree_flatten(p)
    assert leaves == [1, 2, 3]
    out = tree_util.tree_unflatten(td, [4, 5, 6])
    assert type(out) is Pair and out.label == "lab"
    assert (out.first, out.second) == ([4, 5], {"k": 6})


def test_register_pytree_with_keys_uses_given_flatten_func():
    calls = []

    class K:
        def __init__(self, a, b):
            self.a, self.b = a, b

    def fwk(k):
        return ((GetAttrKey("a"), k.a), (GetAttrKey("b"), k.b)), None

    def flat(k):
        calls.append(1)
        return (k.a, k.b), None

    tree_util.register_pytree_with_keys(K, fwk, lambda aux, ch: K(*ch), flat)
    assert tree_util.tree_leaves(K(1, 2)) == [1, 2]
    assert calls == [1]
    assert [dotted_name(p) for p, _ in
            tree_util.tree_leaves_with_path(K(1, 2))] == ["a", "b"]
    assert calls == [1]  # the path flattener used fwk


def test_registering_twice_errors():
    class Twice:
        pass

    tree_util.register_pytree_node(Twice, lambda x: ((), None),
                                   lambda aux, ch: Twice())
    with pytest.raises(ValueError, match="Twice"):
        tree_util.register_pytree_node(Twice, lambda x: ((), None),
                                       lambda aux, ch: Twice())
    with pytest.raises(ValueError, match="Twice"):
        tree_util.register_static(Twice)
    with pytest.raises(ValueError, match="list"):
        tree_util.register_pytree_node(list, lambda x: (x, None),
                                       lambda aux, ch: list(ch))
    with pytest.raises(ValueError, match="Conv"):
        tree_util.register_dataclass(Conv)


# ---------------------------------------------------------------------------
# tree_transpose
# ---------------------------------------------------------------------------

def test_tree_transpose():
    outer = tree_util.tree_structure([0, 0, 0])
    inner = tree_util.tree_structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    out = tree_util.tree_transpose(outer, inner, tree)
    assert out == {"a": [1, 3, 5], "b": [2, 4, 6]}
    assert tree_util.tree_transpose(inner, outer, out) == tree
    assert tree_util.tree_transpose(outer, None, tree) == out
    # as JAX: only the number of leaves is checked
    with pytest.raises(TypeError, match="Mismatch"):
        tree_util.tree_transpose(outer, inner, [{"a": 1}, {"a": 3, "b": 4}, {"a": 5, "b": 6}])
    assert tree_util.tree_transpose(outer, inner, [1, 2, 3, 4, 5, 6]) == out
    # a custom node whose children depend on its aux data (JAX's FlatCache)
    @tree_util.register_pytree_node_class
    class Flat:
        def __init__(self, leaves, treedef):
            self.leaves, self.treedef = leaves, treedef

        def tree_flatten(self):
            return self.leaves, self.treedef

        @classmethod
        def tree_unflatten(cls, treedef, leaves):
            return cls(list(leaves), treedef)
    three = tree_util.tree_structure([0, 0, 0])
    got = tree_util.tree_transpose(tree_util.tree_structure(Flat([0], tree_util.tree_structure(0))),
                                   three, Flat([1, 2, 3], three))
    assert [f.leaves for f in got] == [[1], [2], [3]]


def test_jax_checks_and_details():
    import fnx
    import functools
    # a custom node's flatten must give (children, aux) with iterable children: ValueError
    class Bad:
        def __init__(self, out):
            self.out = out
    tree_util.register_pytree_node(Bad, lambda b: b.out, lambda aux, ch: Bad(aux))
    for out, what in [("hello", "tuple, got 'hello'"), ((2, 3, 4), r"tuple, got \(2, 3, 4\)"),
                      ((7, 7), "'children' is iterable")]:
        with pytest.raises(ValueError, match=what):
            tree_util.tree_flatten(Bad(out))
    # fnx.tree.static keeps a caller's own "static" entry
    assert fnx.tree.static(metadata={"static": False}).metadata == {"static": False}
    assert fnx.tree.static(metadata={"k": 1}).metadata == {"static": True, "k": 1}
    # Partial of a functools.partial: .func compares equal to it, both ways
    fun = functools.partial(print, 1)
    p1, p2 = tree_util.Partial(fun, 2), tree_util.Partial(fun, 2)
    assert p1.func == fun and fun == p1.func and p1.func == p2.func
