"""Jacobians: ``jacfwd`` (vmap of jvp over input basis vectors), ``jacrev`` (vmap of
the vjp over output basis vectors) and ``hessian`` (jacfwd of jacrev).

For each output leaf of shape ``O`` and input leaf of shape ``I`` the Jacobian
block has shape ``O + I``; with a single array input and output it is one array.

With ``has_aux=True`` the function returns ``(output, aux)``: only ``output`` is
differentiated, and the Jacobian function returns ``(jacobian, aux)`` (JAX's
form), ``aux`` computed once at the primal point and not differentiated.
"""
from __future__ import annotations

import math

import numpy as np

from .. import lax, tree_util
from ..core import dtypes
from ..core.array import Array, to_array
from .jvp import jvp
from ..errors import GradDtypeError
from .vjp import float0, vjp
from .vmap import vmap


def _split(flat, leaves, axis_front):
    """Cut the flat basis axis of ``flat`` into blocks shaped like ``leaves``."""
    out, start = [], 0
    for leaf in leaves:
        n = math.prod(leaf.shape)
        if axis_front:
            block = lax.slice_in_dim(flat, start, start + n, 1, 0)
            out.append(lax.reshape(block, tuple(leaf.shape) + tuple(flat.shape[1:])))
        else:
            block = lax.slice_in_dim(flat, start, start + n, 1, flat.ndim - 1)
            out.append(lax.reshape(block, tuple(flat.shape[:-1]) + tuple(leaf.shape)))
        start += n
    return out


def _argnums_setup(fun, args, argnums):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    diff = tuple(args[n] for n in nums)

    def f_of(*d):
        full = list(args)
        for n, v in zip(nums, d):
            full[n] = v
        return fun(*full)

    target = diff[0] if single else diff
    return (lambda x: f_of(x) if single else f_of(*x)), target


def _basis(leaves):
    n = sum(math.prod(leaf.shape) for leaf in leaves)
    dt = dtypes.result_type(*leaves) if leaves else dtypes.default_float()
    if not dtypes.is_inexact(dt):
        raise GradDtypeError(f"jacobian: inputs must be float arrays, got {dt}")
    return Array._wrap(np.eye(n, dtype=dt)), n


def _check_dtypes(name, what, leaves, holomorphic):
    """JAX's rules: with ``holomorphic`` every leaf is complex; without it, jacfwd's
    inputs and jacrev's outputs are real floats."""
    for leaf in leaves:
        dt = to_array(leaf).dtype
        if holomorphic and dt.kind != "c":
            raise GradDtypeError(
                f"{name} with holomorphic=True requires {what} with complex dtype, but got "
                f"{dt}. Convert with .astype(complex), or drop holomorphic=True.")
        if not holomorphic and not dtypes.is_floating(dt):
            if dt.kind == "c":
                raise GradDtypeError(
                    f"{name} requires real-valued {what} (dtype that is a sub-dtype of "
                    f"np.floating), but got {dt}. For holomorphic differentiation, pass "
                    "holomorphic=True. For other complex functions differentiate the real "
                    "and imaginary parts separately, or use fnx.vjp/fnx.jvp directly.")
            raise GradDtypeError(
                f"{name} requires real-valued {what} (dtype that is a sub-dtype of "
                f"np.floating), but got {dt}. Convert with .astype(float).")


def _assemble(out_tree, in_tree, blocks_per_out):
    """Out-structured pytree of in-structured pytrees (plain arrays for single leaves)."""
    rows = [b[0] if in_tree.num_leaves == 1 and tree_util.treedef_is_leaf(in_tree)
            else tree_util.tree_unflatten(in_tree, b) for b in blocks_per_out]
    return tree_util.tree_unflatten(out_tree, rows)


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian of ``fun`` by forward mode (one batched jvp over input directions).

    ``has_aux``: ``fun`` returns ``(output, aux)``; the result is ``(jacobian, aux)``.
    ``holomorphic``: complex inputs, the complex derivative ``df/dz``.
    """
    def jac(*args):
        f, x = _argnums_setup(fun, args, argnums)
        in_leaves, in_tree = tree_util.tree_flatten(x)
        in_leaves = [to_array(v) for v in in_leaves]
        _check_dtypes("jacfwd", "inputs", in_leaves, holomorphic)
        basis, n = _basis(in_leaves)

        def push(t_flat):
            ts = [lax.reshape(b, tuple(leaf.shape)) for b, leaf in
                  zip(_split(t_flat, in_leaves, True), in_leaves)]
            res = jvp(f, (tree_util.tree_unflatten(in_tree, in_leaves),),
                      (tree_util.tree_unflatten(in_tree, ts),), has_aux=has_aux)
            if not has_aux:
                return res[1]
            # aux depends on the primals only, the same for every basis vector: its
            # arrays leave the vmap unbatched, other leaves (Python values) as they are
            leaves, aux_box[0] = tree_util.tree_flatten(res[2])
            aux_box[1] = leaves
            return res[1], [a for a in leaves if isinstance(a, Array)]

        aux_box = [None, None]
        if has_aux:
            out, aux_arrays = vmap(push, out_axes=(-1, None))(basis)
            it = iter(aux_arrays)
            aux = tree_util.tree_unflatten(aux_box[0], [next(it) if isinstance(a, Array) else a
                                                        for a in aux_box[1]])
        else:
            out = vmap(push, out_axes=-1)(basis)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        jac_ = _assemble(out_tree, in_tree, [_split(o, in_leaves, False) for o in out_leaves])
        return (jac_, aux) if has_aux else jac_
    return jac


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of ``fun`` by reverse mode (one batched vjp over output directions).

    ``has_aux``: ``fun`` returns ``(output, aux)``; the result is ``(jacobian, aux)``.
    ``holomorphic``: complex inputs and outputs, the complex derivative ``df/dz``.
    ``allow_int``: integer inputs allowed (their blocks are float0 zeros).
    """
    def jac(*args):
        f, x = _argnums_setup(fun, args, argnums)
        in_leaves, in_tree = tree_util.tree_flatten(x)
        for leaf in in_leaves:
            dt = to_array(leaf).dtype
            if holomorphic and dt.kind != "c":
                raise GradDtypeError(f"jacrev with holomorphic=True requires inputs with "
                                     f"complex dtype, but got {dt}")
            if not allow_int and not dtypes.is_inexact(dt):
                raise GradDtypeError(
                    f"jacrev requires real- or complex-valued inputs (input dtype that is a "
                    f"sub-dtype of np.inexact), but got {dt}. Convert it with .astype(float), "
                    "or pass allow_int=True")
        if has_aux:
            out, f_vjp, aux = vjp(f, x, has_aux=True)
        else:
            out, f_vjp = vjp(f, x)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_leaves = [to_array(o) for o in out_leaves]
        _check_dtypes("jacrev", "outputs", out_leaves, holomorphic)
        basis, m = _basis(out_leaves)

        def pull(ct_flat):
            cts = [lax.reshape(b, tuple(leaf.shape)) for b, leaf in
                   zip(_split(ct_flat, out_leaves, True), out_leaves)]
            (g,) = f_vjp(tree_util.tree_unflatten(out_tree, cts))
            return tree_util.tree_leaves(g)

        grads = vmap(pull)(basis)  # each input leaf: (m,) + leaf shape
        per_out = []
        for block_idx, o in enumerate(out_leaves):
            start = sum(math.prod(p.shape) for p in out_leaves[:block_idx])
            row = []
            for g, leaf in zip(grads, in_leaves):
                shape = tuple(o.shape) + tuple(to_array(leaf).shape)
                if not dtypes.is_inexact(to_array(leaf).dtype):  # allow_int: no derivative
                    row.append(np.zeros(shape, float0))
                    continue
                b = lax.slice_in_dim(g, start, start + math.prod(o.shape), 1, 0)
                row.append(lax.reshape(b, shape))
            per_out.append(row)
        jac_ = _assemble(out_tree, in_tree, per_out)
        return (jac_, aux) if has_aux else jac_
    return jac


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """Second derivatives: ``jacfwd(jacrev(fun))``; ``has_aux`` and ``holomorphic`` as
    for the Jacobians."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums,
                  has_aux=has_aux, holomorphic=holomorphic)


jacobian = jacrev
