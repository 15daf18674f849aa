"""``fnx.tree``: JAX's ``jax.tree`` namespace, the short names of ``fnx.tree_util``.

    import fnx
    params = {"w": fnp.ones((3, 2)), "b": fnp.zeros(2)}
    fnx.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    fnx.tree.leaves(params)                  # [b, w]: dicts flatten in sorted key order
    fnx.tree.reduce(lambda a, x: a + x.sum(), params, 0.0)

Each function is the ``tree_util`` function of the long name (``map`` is
``tree_util.tree_map``, ``structure`` is ``tree_util.tree_structure``, ...), with
JAX's signature: ``is_leaf`` is keyword-or-positional where JAX has it so, and
keyword-only in ``map``, ``all`` and ``reduce_associative``.
"""
from __future__ import annotations

from .tree_util import (static, tree_all, tree_broadcast, tree_flatten,  # noqa: F401
                        tree_flatten_with_path, tree_leaves, tree_leaves_with_path,
                        tree_map, tree_map_with_path, tree_reduce, tree_reduce_associative,
                        tree_structure, tree_transpose, tree_unflatten)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]

all = tree_all                          # noqa: A001  (JAX's names shadow builtins here)
broadcast = tree_broadcast
flatten = tree_flatten
flatten_with_path = tree_flatten_with_path
leaves = tree_leaves
leaves_with_path = tree_leaves_with_path
map = tree_map                          # noqa: A001
map_with_path = tree_map_with_path
reduce = tree_reduce
reduce_associative = tree_reduce_associative
structure = tree_structure
transpose = tree_transpose
unflatten = tree_unflatten
