"""Collectives over named axes, JAX's ``jax.lax`` parallel operators: ``psum``, ``pmean``,
``pmax``, ``pmin``, ``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``,
``axis_index`` (and ``axis_size``).

A named axis is bound by ``fnx.vmap(f, axis_name=...)`` (the batch is the group: each
collective becomes an operation over the batch dimension, ``named_batch``) or by
``fnx.pmap`` (the group is the processes: the impls call the collectives registered in
``fnx.core.world``, ``fnx.distributed``'s MPI ones). A collective outside any binding
raises ``fnx.errors.UnboundAxisError``.

One block per primitive, JAX's semantics: its shape rule (the group's size is a
parameter, read from the binding when the collective is called), its rules for a batch
that is the group and for one that is not, its derivative (the linear ones are their
own tangent map; their transposes: ``psum`` -> ``psum``, ``all_gather`` <->
``psum_scatter``, ``ppermute`` -> the inverse permutation, ``all_to_all`` -> the swapped
axes), and its impl, which only a process group runs.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from .. import tree_util
from ..core import array_library as AL
from ..core import rings, world
from ..core.array import to_array
from ..core.backend import backend_for, register_lowering
from ..core.axis_env import axis_names, lookup, size_of
from ..core.numpy_rules import NumpyRule
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError, UnboundAxisError
from ..transforms.jvp import deflinear
from ..transforms.vmap import move_to_front
from . import ops as L
from .rule_helpers import normalize_axis

__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute",
           "all_to_all", "axis_index", "axis_size", "psum_p", "pmax_p", "pmin_p",
           "all_gather_p", "psum_scatter_p", "ppermute_p", "all_to_all_p", "axis_index_p"]


def _process_impl(name, run):
    """The impl: the collective over ``pmap``'s processes, ``run(ops, *args, **params)``
    with ``ops`` the registered collectives (``fnx.core.world.collectives()``,
    ``fnx.distributed``'s); only a pmap axis reaches an impl (vmap's batch rules compute
    the others)."""
    def impl(*args, axes, **params):
        # The public functions checked the name when they bound the primitive; a vmap's
        # axis never reaches an impl (its batching rules compute the collective). So
        # this is pmap's, whose frame is gone when a program compiled inside an outer
        # jit runs (jit(pmap(f))).
        ops = world.collectives()
        if len(axes) != 1 or ops is None:
            raise UnboundAxisError(
                f"{name} over {axes}: only one axis bound by fnx.pmap reaches a process "
                "collective" + ("" if ops is not None else
                                " (import fnx.distributed to register them)"))
        if args and AL.is_device(args[0]):
            # GPU buffers: NCCL's collectives (NotImplementedError where the processes
            # could not join one: the CUDA backend then runs this impl on host copies)
            ops = ops.on_device(backend_for(args[:1]))
        return run(ops, *args, **params)
    impl.__name__ = f"_{name}_impl"
    return impl


def _front(x, d):
    """``x`` with its batch dimension ``d`` first."""
    return move_to_front(x, d)


def _check(prim, x, d, params):
    """The shape rule on one member's operand (raises a ShapeError naming the problem)."""
    shape = tuple(x.shape) if d is None else tuple(x.shape[:d]) + tuple(x.shape[d + 1:])
    prim.shape_rule(ShapeDtypeStruct(shape, x.dtype), **params)


def _rebind(prim, x, d, size, **params):
    """The collective over another axis of a value batched on this one: the same
    collective with the value's axes counted past the batch dimension (now first)."""
    return prim.bind(_front(x, d), **params), 0


# === psum, pmax, pmin =============================================================================

def _same_rule(x, *, axes):
    return ShapeDtypeStruct(x.shape, x.dtype, x.weak_type)


_RINGS: dict = {}
_RINGS_LOCK = threading.Lock()


def _reduced(ops, x, op, out=None):
    """``ops.allreduce`` into ``out`` (a C-contiguous buffer that jit's generated code hands
    it: a new one, or ``x`` itself where ``x`` dies), else into one of the last two
    results of this shape that nothing holds any more (``fnx.core.rings``): MPI reduces
    into a fresh buffer about three times slower than into a reused one. Never ``x``
    itself unless handed it as ``out`` (a group of one copies it). A device buffer goes to
    ``ops.allreduce`` (NCCL's) as it is."""
    if AL.is_device(x):
        return ops.allreduce(x, op)
    if out is not None and (out is x or np.may_share_memory(out, x)):
        if not (out is x or (out.ctypes.data == x.ctypes.data and out.shape == x.shape
                             and out.strides == x.strides)):
            x = np.array(x)              # (overlapping, not the same: read it first)
        elif world.process_count() == 1:
            return out
        elif out.flags.c_contiguous:
            return ops.allreduce(out, op, out=out)
        else:
            out[...] = ops.allreduce(np.ascontiguousarray(out), op)   # (a strided view)
            return out
    x = np.ascontiguousarray(x)
    if out is None:
        with _RINGS_LOCK:
            out = rings.take(_RINGS.setdefault((op, x.shape, x.dtype.str), []), x.shape,
                             x.dtype)
    if world.process_count() == 1:
        np.copyto(out, x)                # a group of one: the operand is the result
        return out
    return ops.allreduce(x, op, out=out)


def _numpy_reduction(impl):
    """The NumPy backend's lowering: the impl, which takes ``out=``, so the generated code
    hands the collective a buffer of its scratch arena or output ring, as it does a
    matmul, or the operand's own buffer where the operand dies (``in_place``: the
    gradients of a training step are reduced where the backward pass wrote them, and
    the update then writes into them, with no buffer between)."""
    def specialize(in_avals, params, permutation=None):  # (no transpose fuses in)
        fn = functools.partial(impl, **params)
        fn.takes_out = True
        return fn
    return NumpyRule(specialize=specialize, in_place=True)


def _reducing(name, reduce_batch, unbatched):
    op = name[1:]                        # psum -> "sum", pmax -> "max"
    impl = _process_impl(name, lambda ops, x, out=None: _reduced(ops, x, op, out))
    prim = Primitive(name, shape_rule=_same_rule, impl=impl)
    prim.never_aliases_operands = prim.fresh_result = True
    register_lowering(prim, "numpy", _numpy_reduction(impl))

    def named_batch(vals, dims, size, mine, *, axes):
        (x,), (d,) = vals, dims
        if mine is None:
            return _rebind(prim, x, d, size, axes=axes)
        y = unbatched(x, size) if d is None else reduce_batch(_front(x, d))
        rest = tuple(a for a in axes if a != mine)
        return (prim.bind(y, axes=rest) if rest else y), None
    prim.named_batch = named_batch
    return prim


def _times(x, n):
    return L.mul(x, L.convert_element_type(n, x.dtype))


psum_p = _reducing("psum", lambda x: L.reduce_sum(x, (0,)), _times)
deflinear(psum_p)
psum_p.transpose = lambda ct, x, *, axes: [psum_p.bind(ct, axes=axes)]

pmax_p = _reducing("pmax", lambda x: L.reduce_max(x, (0,)), lambda x, n: x)
pmin_p = _reducing("pmin", lambda x: L.reduce_min(x, (0,)), lambda x, n: x)
for _p in (pmax_p, pmin_p):
    _p.not_needed["jvp"] = ("not differentiable, as in JAX (a tie between members has no "
                            "derivative); psum a masked value to differentiate a maximum")


def _tree_collective(fn, x):
    return tree_util.tree_map(fn, x)


def _reduce_tree(prim, x, axis_name, groups):
    _no_groups(groups, prim.name)
    names = axis_names(axis_name)
    for n in names:
        lookup(n, prim.name)
    return _tree_collective(lambda v: prim.bind(to_array(v), axes=names), x)


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum over the group of the named axis (a pytree of arrays, each summed)."""
    return _reduce_tree(psum_p, x, axis_name, axis_index_groups)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean over the group of the named axis."""
    n = size_of(axis_name, "pmean")
    return tree_util.tree_map(lambda v: L.div(v, L.convert_element_type(n, v.dtype)),
                              psum(x, axis_name, axis_index_groups=axis_index_groups))


def pmax(x, axis_name, *, axis_index_groups=None):
    """The elementwise maximum over the group (not differentiable, as in JAX)."""
    return _reduce_tree(pmax_p, x, axis_name, axis_index_groups)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The elementwise minimum over the group (not differentiable, as in JAX)."""
    return _reduce_tree(pmin_p, x, axis_name, axis_index_groups)


def _no_groups(groups, what):
    if groups is not None:
        raise NotImplementedError(f"{what}: axis_index_groups is not supported; split the "
                                  "group with a second named axis instead")


def _one_name(axis_name, what):
    names = axis_names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"{what} over several axis names {names} is not "
                                  "supported; nest it, one name at a time")
    lookup(names[0], what)
    return names


# === all_gather ===================================================================================

def _joined(what, x, shape, axis, tiled, axis_size):
    """``x``'s aval with the members joined at ``axis`` of ``shape`` (a list): that
    dimension times ``axis_size`` when tiled, else a new one of ``axis_size``."""
    a = normalize_axis(what, axis, len(shape) if tiled else len(shape) + 1)
    if tiled:
        shape[a] *= axis_size
    else:
        shape.insert(a, axis_size)
    return ShapeDtypeStruct(tuple(shape), x.dtype, x.weak_type)


def _all_gather_rule(x, *, axes, axis, tiled, axis_size):
    return _joined("all_gather", x, list(x.shape), axis, tiled, axis_size)


all_gather_p = Primitive("all_gather", shape_rule=_all_gather_rule, impl=_process_impl(
    "all_gather", lambda ops, x, *, axis, tiled, axis_size: ops.allgather(x, axis, tiled)))


def _all_gather_named(vals, dims, size, mine, *, axes, axis, tiled, axis_size):
    (x,), (d,) = vals, dims
    _check(all_gather_p, x, d, dict(axes=axes, axis=axis, tiled=tiled, axis_size=axis_size))
    if mine is None:
        a = axis + 1 if axis >= 0 else axis
        return _rebind(all_gather_p, x, d, size, axes=axes, axis=a, tiled=tiled,
                       axis_size=axis_size)
    xb = _front(x, d) if d is not None else L.broadcast_in_dim(
        x, (size,) + tuple(x.shape), tuple(range(1, 1 + x.ndim)))
    nd = xb.ndim - 1
    a = normalize_axis("all_gather", axis, nd if tiled else nd + 1)
    perm = list(range(1, xb.ndim))
    perm.insert(a, 0)
    y = L.transpose(xb, perm)                 # the members stacked at ``a``
    if tiled:
        shape = list(x.shape if d is None else xb.shape[1:])
        shape[a] *= size
        y = L.reshape(y, tuple(shape))
    return y, None


all_gather_p.named_batch = _all_gather_named
deflinear(all_gather_p)


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
    """Every member's ``x`` stacked along a new ``axis`` (or concatenated along it with
    ``tiled=True``), the same on every member."""
    _no_groups(axis_index_groups, "all_gather")
    names = _one_name(axis_name, "all_gather")
    n = size_of(names, "all_gather")
    return _tree_collective(lambda v: all_gather_p.bind(to_array(v), axes=names, axis=axis,
                                                        tiled=tiled, axis_size=n), x)


# === psum_scatter =================================================================================

def _split(what, x, axis, tiled, axis_size, name="dimension"):
    """``x``'s shape (a list) with ``axis`` divided among the members: its size divided
    by ``axis_size`` when tiled, else removed (it must equal ``axis_size``)."""
    d = normalize_axis(what, axis, len(x.shape))
    shape = list(x.shape)
    if tiled:
        if shape[d] % axis_size:
            raise ShapeError(f"{what}: {name} {d} of {tuple(x.shape)} is not divisible by "
                             f"the axis size {axis_size}")
        shape[d] //= axis_size
    else:
        if shape[d] != axis_size:
            raise ShapeError(f"{what}: {name} {d} of {tuple(x.shape)} must equal the axis "
                             f"size {axis_size} (or pass tiled=True)")
        del shape[d]
    return shape


def _psum_scatter_rule(x, *, axes, scatter_dimension, tiled, axis_size):
    shape = _split("psum_scatter", x, scatter_dimension, tiled, axis_size)
    return ShapeDtypeStruct(tuple(shape), x.dtype, x.weak_type)


psum_scatter_p = Primitive("psum_scatter", shape_rule=_psum_scatter_rule, impl=_process_impl(
    "psum_scatter", lambda ops, x, *, scatter_dimension, tiled, axis_size:
    ops.reduce_scatter(x, scatter_dimension, tiled)))


def _psum_scatter_named(vals, dims, size, mine, *, axes, scatter_dimension, tiled,
                        axis_size):
    (x,), (d,) = vals, dims
    _check(psum_scatter_p, x, d, dict(axes=axes, scatter_dimension=scatter_dimension, tiled=tiled, axis_size=axis_size))
    if mine is None:
        sd = scatter_dimension + 1 if scatter_dimension >= 0 else scatter_dimension
        return _rebind(psum_scatter_p, x, d, size, axes=axes, scatter_dimension=sd,
                       tiled=tiled, axis_size=axis_size)
    s = _times(x, size) if d is None else L.reduce_sum(_front(x, d), (0,))
    sd = normalize_axis("psum_scatter", scatter_dimension, s.ndim)
    shape = list(s.shape)
    chunk = shape[sd] // size
    split = shape[:sd] + [size, chunk] + shape[sd + 1:]
    y = L.reshape(s, tuple(split))            # member i's chunk at index i of axis sd
    perm = [sd] + [k for k in range(len(split)) if k != sd]
    y = L.transpose(y, perm)                  # members first
    if not tiled:                             # the scattered axis (1 per member) goes
        y = L.reshape(y, (size,) + tuple(shape[:sd] + shape[sd + 1:]))
    return y, 0


psum_scatter_p.named_batch = _psum_scatter_named
deflinear(psum_scatter_p)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """The sum over the group, each member keeping its own chunk of ``scatter_dimension``
    (member i: index i of it, or with ``tiled=True`` the i-th of ``axis size`` equal
    slices)."""
    _no_groups(axis_index_groups, "psum_scatter")
    names = _one_name(axis_name, "psum_scatter")
    n = size_of(names, "psum_scatter")
    return _tree_collective(lambda v: psum_scatter_p.bind(
        to_array(v), axes=names, scatter_dimension=scatter_dimension, tiled=tiled,
        axis_size=n), x)


def _all_gather_transpose(ct, x, *, axes, axis, tiled, axis_size):
    return [psum_scatter_p.bind(ct, axes=axes, scatter_dimension=axis, tiled=tiled,
                                axis_size=axis_size)]


def _psum_scatter_transpose(ct, x, *, axes, scatter_dimension, tiled, axis_size):
    return [all_gather_p.bind(ct, axes=axes, axis=scatter_dimension, tiled=tiled,
                              axis_size=axis_size)]


all_gather_p.transpose = _all_gather_transpose
psum_scatter_p.transpose = _psum_scatter_transpose


# === ppermute =====================================================================================

ppermute_p = Primitive("ppermute", shape_rule=lambda x, *, axes, perm: _same_rule(x, axes=axes),
                       impl=_process_impl("ppermute",
                                          lambda ops, x, *, perm: ops.ppermute(x, perm)))


def _ppermute_named(vals, dims, size, mine, *, axes, perm):
    (x,), (d,) = vals, dims
    if mine is None:
        return _rebind(ppermute_p, x, d, size, axes=axes, perm=perm)
    src = np.zeros(size, np.int32)
    received = np.zeros(size, bool)
    for s, t in perm:
        src[t], received[t] = s, True
    xb = _front(x, d) if d is not None else L.broadcast_in_dim(
        x, (size,) + tuple(x.shape), tuple(range(1, 1 + x.ndim)))
    zero = L.full_like(L.slice_in_dim(xb, 0, 1, 1, 0), 0)
    rows = [L.slice_in_dim(xb, int(src[t]), int(src[t]) + 1, 1, 0) if received[t] else zero
            for t in range(size)]             # member t's row: its source's, or zeros
    return L.concatenate(rows, 0), 0


ppermute_p.named_batch = _ppermute_named
deflinear(ppermute_p)
ppermute_p.transpose = lambda ct, x, *, axes, perm: [
    ppermute_p.bind(ct, axes=axes, perm=tuple((t, s) for s, t in perm))]


def ppermute(x, axis_name, perm):
    """Member ``s`` sends its ``x`` to member ``t`` for each ``(s, t)`` in ``perm`` (no
    two pairs with one source or one target); members no pair targets get zeros."""
    names = _one_name(axis_name, "ppermute")
    n = size_of(names, "ppermute")
    perm = tuple((int(s), int(t)) for s, t in perm)
    srcs, dsts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute: perm {list(perm)} repeats a source or a target")
    if any(not 0 <= i < n for i in srcs + dsts):
        raise ValueError(f"ppermute: perm {list(perm)} names a member outside the axis "
                         f"{names[0]!r} of size {n}")
    return _tree_collective(lambda v: ppermute_p.bind(to_array(v), axes=names, perm=perm),
                            x)


# === all_to_all ===================================================================================

def _all_to_all_rule(x, *, axes, split_axis, concat_axis, tiled, axis_size):
    shape = _split("all_to_all", x, split_axis, tiled, axis_size, "split axis")
    return _joined("all_to_all", x, shape, concat_axis, tiled, axis_size)


all_to_all_p = Primitive("all_to_all", shape_rule=_all_to_all_rule, impl=_process_impl(
    "all_to_all", lambda ops, x, *, split_axis, concat_axis, tiled, axis_size:
    ops.alltoall(x, split_axis, concat_axis, tiled)))


def _all_to_all_named(vals, dims, size, mine, *, axes, split_axis, concat_axis, tiled,
                      axis_size):
    (x,), (d,) = vals, dims
    _check(all_to_all_p, x, d, dict(axes=axes, split_axis=split_axis, concat_axis=concat_axis, tiled=tiled, axis_size=axis_size))
    if mine is None:
        shift = (lambda a: a + 1 if a >= 0 else a)
        return _rebind(all_to_all_p, x, d, size, axes=axes, split_axis=shift(split_axis),
                       concat_axis=shift(concat_axis), tiled=tiled, axis_size=axis_size)
    xb = _front(x, d) if d is not None else L.broadcast_in_dim(
        x, (size,) + tuple(x.shape), tuple(range(1, 1 + x.ndim)))
    nd = xb.ndim - 1                      # a member's rank
    s = normalize_axis("all_to_all", split_axis, nd)
    shape = list(xb.shape[1:])
    chunk = shape[s] // size
    # (sender, ..., chunk index j, chunk, ...): member j receives chunk j of every sender
    split = [size] + shape[:s] + [size, chunk] + shape[s + 1:]
    y = L.reshape(xb, tuple(split))
    j = 1 + s
    perm = [j, 0] + [k for k in range(1, len(split)) if k != j]
    y = L.transpose(y, perm)              # (receiver, sender, member axes with chunk at s)
    member = shape[:s] + [chunk] + shape[s + 1:]
    if not tiled:
        member = shape[:s] + shape[s + 1:]
        y = L.reshape(y, (size, size) + tuple(member))
        c = normalize_axis("all_to_all", concat_axis, nd)
        order = [0] + [k + 2 for k in range(c)] + [1] + [k + 2 for k in range(c, nd - 1)]
        return L.transpose(y, order), 0
    c = normalize_axis("all_to_all", concat_axis, nd)
    order = [0] + [k + 2 for k in range(c)] + [1] + [k + 2 for k in range(c, nd)]
    y = L.transpose(y, order)             # sender next to the concat axis, before it
    out = list(member)
    out[c] *= size
    return L.reshape(y, (size,) + tuple(out)), 0


all_to_all_p.named_batch = _all_to_all_named
deflinear(all_to_all_p)
all_to_all_p.transpose = lambda ct, x, *, axes, split_axis, concat_axis, tiled, axis_size: [
    all_to_all_p.bind(ct, axes=axes, split_axis=concat_axis, concat_axis=split_axis,
                      tiled=tiled, axis_size=axis_size)]


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None,
               tiled=False):
    """Member ``i`` splits its ``x`` along ``split_axis`` into one chunk per member and
    sends chunk ``j`` to member ``j``, which stacks what it receives, in member order,
    along a new ``concat_axis`` (with ``tiled=True``: concatenates it along the existing
    ``concat_axis``)."""
    _no_groups(axis_index_groups, "all_to_all")
    names = _one_name(axis_name, "all_to_all")
    n = size_of(names, "all_to_all")
    return _tree_collective(lambda v: all_to_all_p.bind(
        to_array(v), axes=names, split_axis=split_axis, concat_axis=concat_axis, tiled=tiled,
        axis_size=n), x)


# === axis_index ===================================================================================

axis_index_p = Primitive("axis_index",
                         shape_rule=lambda *, axes: ShapeDtypeStruct((), np.dtype(np.int32)),
                         impl=_process_impl("axis_index", lambda ops: np.asarray(
                             world.process_index(), np.int32)))
axis_index_p.not_needed["jvp"] = "an integer index: no tangent"


def _axis_index_named(vals, dims, size, mine, *, axes):
    return L.iota(np.int32, size), 0      # only ever called for its own axis: no operands


axis_index_p.named_batch = _axis_index_named


def axis_index(axis_name):
    """This member's index along the named axis (int32)."""
    names = _one_name(axis_name, "axis_index")
    return axis_index_p.bind(axes=names)


def axis_size(axis_name):
    """The size of the named axis (the product for several names), a Python int."""
    return size_of(axis_name, "axis_size")
