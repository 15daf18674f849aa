"""fnx.tree (JAX's ``jax.tree``) and the tree_util names added for it; expected values are
JAX 0.10's results for the same programs."""
import collections
import dataclasses
import functools

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import tree_util
from fnx.tree_util import DictKey, GetAttrKey, Partial, SequenceKey, keystr


def test_tree_namespace_has_jax_names():
    for name in ["all", "broadcast", "flatten", "flatten_with_path", "leaves",
                 "leaves_with_path", "map", "map_with_path", "reduce", "reduce_associative",
                 "static", "structure", "transpose", "unflatten"]:
        assert callable(getattr(fnx.tree, name)), name


def test_map_leaves_structure_over_params():
    params = {"w": np.ones((2, 2)), "b": np.zeros(2), "extra": None}
    grads = {"w": np.full((2, 2), 2.0), "b": np.ones(2), "extra": None}
    new = fnx.tree.map(lambda p, g: p - 0.5 * g, params, grads)
    assert new["extra"] is None
    np.testing.assert_array_equal(new["w"], np.zeros((2, 2)))
    np.testing.assert_array_equal(new["b"], -0.5 * np.ones(2))
    assert [x.shape for x in fnx.tree.leaves(params)] == [(2,), (2, 2)]   # sorted keys
    assert repr(fnx.tree.structure(params)) == "PyTreeDef({'b': *, 'extra': None, 'w': *})"
    leaves, td = fnx.tree.flatten([None, 1, (2, 3)])
    assert leaves == [1, 2, 3]
    assert fnx.tree.unflatten(td, ["a", "b", "c"]) == [None, "a", ("b", "c")]
    assert fnx.tree.leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
    with pytest.raises(ValueError, match="structures differ"):
        fnx.tree.map(lambda x, y: x + y, {"a": 1}, {"b": 1})


def test_reduce_all_transpose():
    assert fnx.tree.reduce(lambda a, x: a + x, {"a": 1, "b": [2, 3]}, 10) == 16
    with pytest.raises(TypeError):
        fnx.tree.reduce(lambda a, b: a + b, [])
    assert fnx.tree.all([1, True, 0]) is False and fnx.tree.all([]) is True
    outer, inner = fnx.tree.structure([0, 0]), fnx.tree.structure((0, 0, 0))
    assert fnx.tree.transpose(outer, inner, [(1, 2, 3), (4, 5, 6)]) == ([1, 4], [2, 5], [3, 6])


def test_reduce_associative_is_a_balanced_tree():
    # JAX: ((1+2)+(3+(4+5)))
    assert fnx.tree.reduce_associative(lambda a, b: f"({a}+{b})", [1, 2, 3, 4, 5]) == \
        "((1+2)+(3+(4+5)))"
    assert fnx.tree.reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    assert fnx.tree.reduce_associative(lambda a, b: a + b, [7], identity=0) == 7
    with pytest.raises(TypeError, match="identity"):
        fnx.tree.reduce_associative(lambda a, b: a + b, [])


def test_broadcast():
    assert fnx.tree.broadcast((1, 2, 3), (0, {"a": 0, "b": 0}, (0, 0))) == \
        (1, {"a": 2, "b": 2}, (3, 3))
    assert fnx.tree.broadcast([1, {"x": 2}], [[0, 0], {"x": (0, 0)}]) == \
        [[1, 1], {"x": (2, 2)}]
    with pytest.raises(ValueError, match="tree_broadcast"):
        fnx.tree.broadcast([1, 2], [0, 0, 0])


def test_paths():
    tree = {"a": [1, (2, 3)], "b": 4}
    pairs = fnx.tree.leaves_with_path(tree)
    assert [keystr(p) for p, _ in pairs] == ["['a'][0]", "['a'][1][0]", "['a'][1][1]", "['b']"]
    assert keystr(pairs[1][0], simple=True, separator="/") == "a/1/0"
    assert pairs[1][0] == (DictKey("a"), SequenceKey(1), SequenceKey(0))
    cut = fnx.tree.leaves_with_path(tree, is_leaf=lambda p, x: len(p) == 2,
                                    is_leaf_takes_path=True)
    assert cut[1] == ((DictKey("a"), SequenceKey(1)), (2, 3))
    flat, td = fnx.tree.flatten_with_path(tree)
    assert flat == pairs and td == fnx.tree.structure(tree)
    named = fnx.tree.map_with_path(lambda p, x: keystr(p), {"a": [1, 2], "b": (3,)})
    assert named == {"a": ["['a'][0]", "['a'][1]"], "b": ("['b'][0]",)}
    assert repr(GetAttrKey("w")) == "GetAttrKey(name='w')"


def test_dataclass_static_and_drop_fields():
    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        kind: str = fnx.tree.static(default="add")

    leaves, td = fnx.tree.flatten(Op(3))
    assert leaves == [3] and repr(td) == "PyTreeDef(CustomNode(Op[('add',)], [*]))"

    @functools.partial(tree_util.register_dataclass, data_fields=["x"], meta_fields=["op"],
                       drop_fields=["z"])
    @dataclasses.dataclass
    class A:
        x: int
        op: str
        z: int = 5

    leaves, td = fnx.tree.flatten(A(1, "add", 7))
    assert leaves == [1] and fnx.tree.unflatten(td, leaves) == A(1, "add", 5)


def test_one_level_node_queries_and_treedef_tuple():
    assert tree_util.flatten_one_level({"a": [1, 2], "b": {"c": 3}}) == \
        (([1, 2], {"c": 3}), ("a", "b"))
    assert tree_util.flatten_one_level_with_keys({"a": 1}) == (((DictKey("a"), 1),), ("a",))
    P = collections.namedtuple("P", "a b")
    assert tree_util.flatten_one_level(P(1, 2)) == ([1, 2], P)
    with pytest.raises(ValueError, match="not a registered pytree node"):
        tree_util.flatten_one_level(3)
    assert tree_util.is_tree_node(list) and tree_util.is_tree_node(type(None))
    assert not tree_util.is_tree_node(int)
    td = tree_util.treedef_tuple([fnx.tree.structure([1, 2]), fnx.tree.structure({"a": 1})])
    assert repr(td) == "PyTreeDef(([*, *], {'a': *}))" and td.num_leaves == 3


def test_register_with_keys_class():
    @tree_util.register_pytree_with_keys_class
    class C:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten_with_keys(self):
            return ((GetAttrKey("a"), self.a), (GetAttrKey("b"), self.b)), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert [keystr(k) for k, _ in fnx.tree.leaves_with_path(C(1, [2]))] == [".a", ".b[0]"]
    assert fnx.tree.leaves(C(1, [2])) == [1, 2]


def test_partial_is_a_pytree_through_jit():
    p = Partial(fnp.add, fnp.ones(2))
    leaves, _ = fnx.tree.flatten(p)
    assert len(leaves) == 1
    np.testing.assert_array_equal(fnx.tree.map(lambda x: x * 2, p)(1.0), [3.0, 3.0])
    out = fnx.jit(lambda f, x: f(x))(p, fnp.full(2, 5.0))
    np.testing.assert_array_equal(out, [6.0, 6.0])
    # as JAX: the inner partial is the function (aux data); only 3.0 is a leaf
    q = Partial(Partial(lambda a, b, c: a * b + c, 2.0), 3.0)
    assert fnx.tree.leaves(q) == [3.0] and q(1.0) == 7.0


def test_jit_method_of_pytree_with_dict_aux_data():
    class Model:
        def __init__(self, w, cfg):
            self.w, self.cfg = w, cfg

        def tree_flatten(self):
            return (self.w,), self.cfg

        @classmethod
        def tree_unflatten(cls, cfg, children):
            return cls(children[0], cfg)

        @fnx.jit
        def apply(self, x):
            return self.w * x * self.cfg["scale"]

    tree_util.register_pytree_node_class(Model)
    m = Model(fnp.ones(3), {"scale": 2.0})
    np.testing.assert_array_equal(m.apply(fnp.ones(3)), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(m.apply(fnp.ones(3)), [2.0, 2.0, 2.0])
    # a different dict is a different structure: retraced with the new setting
    np.testing.assert_array_equal(Model(fnp.ones(3), {"scale": 3.0}).apply(fnp.ones(3)),
                                  [3.0, 3.0, 3.0])
    td, td2 = fnx.tree.structure(m), fnx.tree.structure(Model(fnp.ones(3), {"scale": 2.0}))
    assert td == td2 and hash(td) == hash(td2)
