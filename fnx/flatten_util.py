"""``jax.flatten_util``: ``ravel_pytree``, a pytree of arrays as one flat vector.

``flat, unravel = ravel_pytree(tree)``: ``flat`` concatenates the raveled leaves (in
``fnx.tree_util`` order), converted to the leaves' common dtype (``fnx.numpy.result_type``
of their dtypes; Python scalars count as their default dtype, not weakly); ``unravel(v)``
splits a vector like ``flat`` back into the tree, each piece reshaped to its leaf's shape
and converted back to its leaf's dtype. When every leaf has one dtype, ``unravel`` converts
nothing and takes a vector of any dtype (JAX's rule); otherwise it checks ``v``'s dtype.
A tree without leaves gives a float32 vector of length 0. Both parts are made of fnx
primitives, so they trace under jit, grad and vmap.
"""
from __future__ import annotations

import numpy as np

from . import lax as L
from . import numpy as fnp
from .core.array import to_array
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


class _HashablePartial:
    """``functools.partial`` that compares and hashes by its function and arguments (so
    ``unravel`` of two equal trees is the same static argument, as JAX's)."""
    __slots__ = ("func", "args")

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __eq__(self, other):
        return (type(other) is _HashablePartial and self.func is other.func
                and self.args == other.args)

    def __hash__(self):
        return hash((self.func, self.args))

    def __call__(self, *args, **kwargs):
        return self.func(*self.args, *args, **kwargs)

    def __repr__(self):
        return f"<{self.func.__name__.lstrip('_')} function of ravel_pytree>"


def ravel_pytree(pytree):
    """``(flat, unravel)``: the leaves of ``pytree`` raveled and concatenated into one 1-D
    array of their common dtype, and the function that turns such a vector back into a
    tree of ``pytree``'s structure, shapes and dtypes. No leaves: a float32 vector of
    length 0."""
    leaves, treedef = tree_flatten(pytree)
    flat, unravel_list = _ravel_list(leaves)
    return flat, _HashablePartial(_unravel_pytree, treedef, unravel_list)


def _unravel_pytree(treedef, unravel_list, flat):
    return tree_unflatten(treedef, unravel_list(flat))


def _leaf(x, k):
    try:
        a = to_array(x, "ravel_pytree")
    except Exception as e:
        raise TypeError(f"ravel_pytree: leaf {k} ({type(x).__name__} {x!r:.60}) is not an "
                        f"array or a number: {e}") from None
    if a.dtype.kind not in "biufcV":
        raise TypeError(f"ravel_pytree: leaf {k} has dtype {a.dtype}; only numeric arrays "
                        "can be raveled")
    return a


def _ravel_list(leaves):
    if not leaves:
        return L.full((0,), 0, np.float32), _HashablePartial(_unravel_empty)
    arrays = [_leaf(x, k) for k, x in enumerate(leaves)]
    from_dtypes = tuple(a.dtype for a in arrays)
    to_dtype = np.dtype(fnp.result_type(*from_dtypes))
    sizes = tuple(int(a.size) for a in arrays)
    shapes = tuple(tuple(a.shape) for a in arrays)
    if all(dt == to_dtype for dt in from_dtypes):
        parts = [L.reshape(a, (a.size,)) for a in arrays]
        unravel = _HashablePartial(_unravel_list, sizes, shapes, None, None)
    else:
        parts = [L.reshape(L.convert_element_type(a, to_dtype), (a.size,)) for a in arrays]
        unravel = _HashablePartial(_unravel_list, sizes, shapes, from_dtypes, to_dtype)
    flat = parts[0] if len(parts) == 1 else L.concatenate(parts, 0)
    return flat, unravel


def _unravel_empty(flat):
    return []


def _unravel_list(sizes, shapes, from_dtypes, to_dtype, flat):
    if isinstance(flat, (list, tuple)):
        raise TypeError(f"unravel: expected a 1-D array of {sum(sizes)} elements (like the "
                        f"flat vector ravel_pytree returned), got a {type(flat).__name__}; "
                        "wrap it: jnp.asarray(v)")
    flat = to_array(flat, "unravel")
    if to_dtype is not None and flat.dtype != to_dtype:
        raise TypeError(f"unravel function given array of dtype {flat.dtype}, but expected "
                        f"dtype {to_dtype} (the dtype of the flat vector ravel_pytree "
                        f"returned; convert it: v.astype(jnp.{to_dtype.name}))")
    total = sum(sizes)
    if tuple(flat.shape) != (total,):
        raise ValueError(f"unravel: expected a 1-D array of {total} elements (the flat "
                         f"vector's shape ({total},)), got shape {tuple(flat.shape)}")
    out, start = [], 0
    for k, (size, shape) in enumerate(zip(sizes, shapes)):
        piece = L.slice_in_dim(flat, start, start + size, axis=0) if len(sizes) > 1 else flat
        start += size
        piece = L.reshape(piece, shape)
        if from_dtypes is not None and from_dtypes[k] != piece.dtype:
            piece = L.convert_element_type(piece, from_dtypes[k])
        out.append(piece)
    return out
