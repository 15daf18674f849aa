"""``fnx.sharding``: JAX's ``jax.sharding`` names, for a process's one device.

An fnx array lies whole on one device, and each process computes on one device of each
platform (several processes map over theirs with ``fnx.pmap``). So every sharding an fnx
program can use places an array whole on one device: a ``SingleDeviceSharding``, or a
``NamedSharding`` over a mesh of one device, whatever its ``PartitionSpec``. That is
what a JAX program written for many devices does on one, so such a program ports
unchanged and runs on one device: ``make_mesh((device_count(),), ("batch",))``,
``NamedSharding(mesh, P("batch"))``, ``device_put(x, sharding)``, ``reshard``,
``set_mesh`` and jit's ``in_shardings``/``out_shardings`` (JAX's own SPMD MNIST example
runs with its imports changed).

A mesh of several devices (the processes' devices under ``mpiexec``, or a CPU and a GPU)
can be built and inspected, but placing an array over it raises
``NotImplementedError``: that needs arrays spanning devices, which fnx does not have.
``x.sharding`` stays the ``SingleDeviceSharding`` of the array's device.
"""
from __future__ import annotations

import contextlib
import functools
import enum
import math
import threading
from collections import OrderedDict

import numpy as np

from . import tree_util
from .core.array import Sharding, SingleDeviceSharding
from .core.devices import Device

__all__ = ["AxisType", "Mesh", "NamedSharding", "PartitionSpec", "P", "Sharding",
           "SingleDeviceSharding", "get_mesh", "make_array_from_callback",
           "make_array_from_process_local_data", "make_array_from_single_device_arrays",
           "reshard", "set_mesh", "shard_map", "use_mesh"]


class AxisType(enum.Enum):
    """JAX's mesh axis types (how jit treats an axis); recorded, as every fnx mesh that
    places arrays has one device."""
    Auto = "Auto"
    Explicit = "Explicit"
    Manual = "Manual"

    def __repr__(self):
        return self.value


class PartitionSpec(tuple):
    """JAX's ``PartitionSpec`` (``P``): per array dimension, the mesh axis (a name), the
    axes (a tuple of names) it is split over, or None (not split)."""

    def __new__(cls, *parts):
        for part in parts:
            names = part if isinstance(part, (tuple, list)) else (part,)
            if part is not None and not all(isinstance(n, str) for n in names):
                raise TypeError(f"PartitionSpec: each entry is a mesh axis name, a tuple "
                                f"of names or None, got {part!r}")
        return super().__new__(cls, (tuple(p) if isinstance(p, list) else p for p in parts))

    def __repr__(self):
        return "P(" + "".join(f"{p!r}, " for p in self).rstrip(", ") + \
            ("," if len(self) == 1 else "") + ")"

    def axis_names(self):
        """The mesh axes the spec names."""
        out = []
        for part in self:
            out.extend(part if isinstance(part, tuple) else () if part is None else (part,))
        return out

    def __reduce__(self):
        return (PartitionSpec, tuple(self))


P = PartitionSpec


class Mesh:
    """JAX's ``Mesh``: ``devices`` (an array of devices, one dimension per axis) with
    ``axis_names``. ``with mesh:`` sets it as the current mesh, as ``set_mesh`` does."""

    def __init__(self, devices, axis_names, axis_types=None):
        devs = np.empty(np.shape(devices), dtype=object)
        devs[...] = devices
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if devs.ndim != len(names):
            raise ValueError(f"Mesh: {devs.ndim}-dimensional devices {devs.shape} need as "
                             f"many axis names, got {names}")
        if len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"Mesh: axis names must be distinct strings, got {names}")
        flat = list(devs.flat)
        if not all(isinstance(d, Device) for d in flat) or len(set(map(id, flat))) != len(flat):
            raise ValueError(f"Mesh: devices must be distinct devices (fnx.devices()), got "
                             f"{flat}")
        types = (AxisType.Auto,) * len(names) if axis_types is None else (
            (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types))
        if len(types) != len(names) or not all(isinstance(t, AxisType) for t in types):
            raise ValueError(f"Mesh: axis_types must be one AxisType per axis {names}, "
                             f"got {axis_types!r}")
        self.devices, self.axis_names, self.axis_types = devs, names, types
        self._stack = []

    @property
    def shape(self):
        return OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def shape_tuple(self):
        return tuple(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self):
        return tuple(self.devices.shape)

    @property
    def size(self):
        return math.prod(self.devices.shape)

    @property
    def empty(self):
        return self.size == 0

    @property
    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self):
        return list(self.devices.flat)

    def __enter__(self):
        self._stack.append(set_mesh(self))
        return self

    def __exit__(self, *exc):
        self._stack.pop().__exit__(*exc)

    def __eq__(self, other):
        return (isinstance(other, Mesh) and other.axis_names == self.axis_names
                and other.axis_types == self.axis_types
                and other.devices.shape == self.devices.shape
                and all(a is b for a, b in zip(other.devices.flat, self.devices.flat)))

    def __hash__(self):
        return hash((self.axis_names, self.axis_types, self.devices.shape,
                     tuple(map(id, self.devices.flat))))

    def __repr__(self):
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape.items())
        return f"Mesh({axes}, axis_types={self.axis_types!r})"


class NamedSharding(Sharding):
    """JAX's ``NamedSharding``: ``spec`` (a ``PartitionSpec``) laid over ``mesh``. On a
    mesh of one device, the whole array on that device."""
    __slots__ = ("mesh", "spec", "_memory_kind")

    def __init__(self, mesh, spec, *, memory_kind=None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: mesh must be a Mesh, got {type(mesh).__name__}")
        spec = spec if isinstance(spec, PartitionSpec) else (
            PartitionSpec(*spec) if isinstance(spec, (tuple, list)) else None)
        if spec is None:
            raise TypeError("NamedSharding: spec must be a PartitionSpec (P(...))")
        unknown = [n for n in spec.axis_names() if n not in mesh.axis_names]
        if unknown:
            raise ValueError(f"NamedSharding: {spec!r} names {unknown}, which the mesh "
                             f"{mesh!r} does not have")
        if memory_kind not in (None, "device"):
            raise ValueError(f"NamedSharding: memory_kind must be 'device' or None, got "
                             f"{memory_kind!r}")
        self.mesh, self.spec, self._memory_kind = mesh, spec, "device"

    @property
    def memory_kind(self):
        return self._memory_kind

    @property
    def device_set(self):
        return set(self.mesh.devices.flat)

    addressable_devices = device_set

    @property
    def _device_assignment(self):
        return tuple(self.mesh.devices.flat)

    @property
    def num_devices(self):
        return self.mesh.size

    @property
    def is_fully_replicated(self):
        sizes = self.mesh.shape
        return all(sizes[n] == 1 for n in self.spec.axis_names())

    is_fully_addressable = True

    def shard_shape(self, global_shape):
        sizes, out = self.mesh.shape, list(global_shape)
        for k, part in enumerate(self.spec):
            names = part if isinstance(part, tuple) else () if part is None else (part,)
            out[k] //= math.prod(sizes[n] for n in names) or 1
        return tuple(out)

    def __eq__(self, other):
        return (isinstance(other, NamedSharding) and other.mesh == self.mesh
                and _trimmed(other.spec) == _trimmed(self.spec))

    def __hash__(self):
        return hash((NamedSharding, self.mesh, _trimmed(self.spec)))

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r}, memory_kind=device)"


def _trimmed(spec):
    parts = list(spec)
    while parts and parts[-1] is None:
        parts.pop()
    return tuple(parts)


# --- the current mesh --------------------------------------------------------------------------

_current = threading.local()


def get_mesh():
    """The mesh ``set_mesh`` (or ``with mesh:``) made current in this thread, or None."""
    return getattr(_current, "mesh", None)


class _MeshSetting(contextlib.AbstractContextManager):
    def __init__(self, previous):
        self._previous = previous

    def __exit__(self, *exc):
        _current.mesh = self._previous
        return None


def set_mesh(mesh):
    """JAX's ``set_mesh``: makes ``mesh`` this thread's current mesh at once (so raw
    ``PartitionSpec``s stand for ``NamedSharding(mesh, spec)``), and, used as ``with
    set_mesh(mesh):``, restores the previous one on exit."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"set_mesh: expected a Mesh or None, got {type(mesh).__name__}")
    previous = get_mesh()
    _current.mesh = mesh
    return _MeshSetting(previous)


use_mesh = set_mesh   # (the earlier name)


# --- placing arrays -----------------------------------------------------------------------------

def device_of(sharding, what):
    """The one device ``sharding`` (a ``Sharding``, a ``PartitionSpec`` under the current
    mesh, or a ``Device``) places a whole array on."""
    if isinstance(sharding, Device):
        return sharding
    if isinstance(sharding, PartitionSpec):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError(f"{what}: a PartitionSpec {sharding!r} needs a mesh: pass "
                             "NamedSharding(mesh, spec), or set one with set_mesh(mesh)")
        sharding = NamedSharding(mesh, sharding)
    if isinstance(sharding, SingleDeviceSharding):
        return sharding._device
    if isinstance(sharding, NamedSharding):
        if sharding.mesh.size != 1:
            raise NotImplementedError(
                f"{what}: {sharding!r} lays an array over {sharding.mesh.size} devices; fnx "
                "places each array whole on one device. Use a mesh of this process's one "
                "device (make_mesh((1,), names)), or fnx.pmap to map over processes")
        return sharding.mesh.devices.flat[0]
    raise TypeError(f"{what}: expected a device, a Sharding or a PartitionSpec, got "
                    f"{type(sharding).__name__}")


def place(xs, where, what, *, none_stays=False):
    """Every leaf of ``xs`` as an Array on the device ``where`` names (see ``device_of``),
    or a pytree prefix of ``xs`` naming one per subtree; with ``none_stays``, None leaves
    a subtree where it is (``device_put``'s default)."""
    from .core.array import device_put_array, to_array

    def one(leaf, w):
        device = None if w is None and none_stays else device_of(w, what)
        return device_put_array(to_array(leaf, what), device)

    def is_entry(w):
        return w is None or isinstance(w, (Device, Sharding, PartitionSpec))
    if is_entry(where):
        return tree_util.tree_map(lambda leaf: one(leaf, where), xs)
    return tree_util.tree_map(lambda w, sub: tree_util.tree_map(lambda leaf: one(leaf, w), sub),
                              where, xs, is_leaf=is_entry)


def _whole(what, x, shape, dtype):
    from .core.array import to_array
    x = to_array(x, what)
    if dtype is not None:
        x = x.astype(dtype)
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{what}: the data has shape {tuple(x.shape)}, but the array's shape "
                         f"is {tuple(shape)}; on one device the one shard is the whole array")
    return x


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """JAX's ``make_array_from_callback``: the array of ``shape`` whose shards
    ``data_callback(index)`` gives. On one device there is one shard, the whole array:
    the callback is asked once, for the index of every element (a slice(None) per
    axis)."""
    shape = tuple(int(d) for d in shape)
    device = device_of(sharding, "make_array_from_callback")
    data = data_callback(tuple(slice(None) for _ in shape))
    return place(_whole("make_array_from_callback", data, shape, dtype), device,
                 "make_array_from_callback")


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """JAX's ``make_array_from_single_device_arrays``: the array of ``shape`` made of one
    array per device of ``sharding``; on one device, ``arrays`` holds the whole array."""
    device = device_of(sharding, "make_array_from_single_device_arrays")
    arrays = list(arrays)
    if len(arrays) != 1:
        raise ValueError(f"make_array_from_single_device_arrays: {len(arrays)} arrays for "
                         f"{sharding!r}, which has one device; give one array")
    return place(_whole("make_array_from_single_device_arrays", arrays[0], shape, dtype),
                 device, "make_array_from_single_device_arrays")


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """JAX's ``make_array_from_process_local_data``: the global array of which this
    process holds ``local_data``. An fnx array lies on one device of one process, so the
    local data is the whole array (``global_shape``, when given, must be its shape)."""
    device = device_of(sharding, "make_array_from_process_local_data")
    shape = np.shape(local_data) if global_shape is None else tuple(global_shape)
    return place(_whole("make_array_from_process_local_data", local_data, shape, None),
                 device, "make_array_from_process_local_data")


def reshard(xs, out_shardings):
    """JAX's ``reshard``: ``xs`` (a pytree) laid out as ``out_shardings`` says (a sharding
    or a ``PartitionSpec`` under the current mesh, or a pytree prefix of them): on one
    device, placed whole on it."""
    return place(xs, out_shardings, "reshard")


def check_jit_shardings(opt, value):
    """jit's ``in_shardings``/``out_shardings``: a pytree of shardings that lay an array
    whole on the CPU (a ``SingleDeviceSharding`` there, a ``NamedSharding`` over a mesh
    of that one device, a ``PartitionSpec`` under such a current mesh, or None), which is
    where the function runs on CPU arguments; anything else raises."""
    from .core.devices import CPU_DEVICE
    if value is None:
        return
    for leaf in tree_util.tree_leaves(value, is_leaf=lambda s: isinstance(s, PartitionSpec)):
        if isinstance(leaf, PartitionSpec) and get_mesh() is None:
            continue                     # (a mesh set later names it: one device either way)
        try:
            device = device_of(leaf, f"jit({opt}=...)") if isinstance(
                leaf, (Sharding, PartitionSpec)) else None
        except NotImplementedError as e:
            raise ValueError(str(e)) from None
        if device is not CPU_DEVICE:
            raise ValueError(f"jit: {opt}={value!r} is not supported: a jitted function "
                             "runs whole on its arguments' device; leave it unset, or give "
                             "shardings of the CPU's one device (fnx.pmap maps over "
                             "processes; device_put places arguments)")


def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """JAX's ``make_mesh``: a mesh of ``axis_shapes`` over ``devices`` (default: this
    process's devices of the default backend), whose sizes must multiply to their number;
    its axes are ``Explicit`` unless ``axis_types`` says otherwise, as in JAX."""
    from ._api import device_count
    from ._api import devices as all_devices
    shapes = tuple(int(s) for s in axis_shapes)
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    devs = list(all_devices()) if devices is None else list(devices)
    if len(shapes) != len(names):
        raise ValueError(f"make_mesh: {len(shapes)} axis sizes {shapes} but {len(names)} "
                         f"names {names}")
    if math.prod(shapes) != len(devs):
        more = ("" if devices is not None or device_count() == len(devs) else
                f" (the {device_count()} devices of all processes are not this process's "
                "to lay arrays over: fnx.pmap maps over processes)")
        raise ValueError(f"make_mesh: axis sizes {shapes} make {math.prod(shapes)} devices, "
                         f"but there are {len(devs)}: {devs}{more}")
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(names)
    return Mesh(np.array(devs, dtype=object).reshape(shapes), names, axis_types)


# --- shard_map ---------------------------------------------------------------------------------
# JAX's ``jax.shard_map`` on the meshes fnx can place arrays on: one device, so every mesh
# axis has size 1. Each input's shard is the whole input, the function runs once on it, and
# every output is its own concatenation. The mesh's axis names are bound while it runs (as
# ``vmap(axis_name=...)`` of size 1 binds them), so the collectives of a shard_map body give
# what they give over one member: psum and pmean the value, axis_index 0, all_gather a new
# axis of size 1. A JAX program written for many devices runs on one, unchanged, as its
# NamedShardings do. The specs are checked against the mesh and the arguments; replication
# (check_vma) is accepted and not enforced: on one device every value is replicated. A mesh
# of several devices raises, as placing arrays over one does.

def _spec_names(spec):
    """The mesh axis names a ``PartitionSpec`` entry list mentions."""
    names = []
    for entry in tuple(spec):
        if entry is None:
            continue
        names.extend(entry if isinstance(entry, tuple) else (entry,))
    return names


def _check_specs(what, pairs, mesh_names):
    """Each (spec, value) of ``pairs``: the spec names only mesh axes and has no more
    entries than the value has dimensions."""
    for spec, leaf in pairs:
        if spec is None:
            continue
        unknown = [n for n in _spec_names(spec) if n not in mesh_names]
        if unknown:
            raise ValueError(f"shard_map: {what} spec {spec} names mesh axes {unknown} that "
                             f"the mesh does not have (its axes: {mesh_names})")
        if leaf is not None and len(tuple(spec)) > getattr(leaf, "ndim", 0):
            raise ValueError(f"shard_map: {what} spec {spec} has {len(tuple(spec))} entries, "
                             f"more than the {getattr(leaf, 'ndim', 0)} dimensions of its "
                             f"value {getattr(leaf, 'shape', ())}")


def _broadcast_specs(specs, tree):
    """One spec per leaf of ``tree``: ``specs`` is a spec prefix of it (a PartitionSpec
    applies to a whole subtree)."""
    return tree_util.tree_flatten(
        tree_util.tree_map(lambda s, sub: tree_util.tree_map(lambda _: s, sub), specs, tree,
                           is_leaf=lambda s: isinstance(s, PartitionSpec) or s is None))[0] \
        if not isinstance(specs, PartitionSpec) else [specs] * len(tree_util.tree_leaves(tree))


def shard_map(f=None, /, *, out_specs, in_specs=None, mesh=None, axis_names=frozenset(),
              check_vma=True):
    """Map ``f`` over the shards of its arguments on ``mesh`` (default: the current mesh
    of ``fnx.sharding.set_mesh``), binding the mesh's axis names for its collectives (see
    the module docstring). Usable as a decorator: ``shard_map(out_specs=..., mesh=...)``."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    if mesh is None:
        mesh = get_mesh()
        if mesh is None or not getattr(mesh, "axis_names", ()):
            raise ValueError("shard_map: no mesh: pass mesh=..., or set one with "
                             "fnx.sharding.set_mesh(mesh)")
    names = tuple(mesh.axis_names)
    if mesh.devices.size != 1:
        raise NotImplementedError(
            f"shard_map: the mesh has {mesh.devices.size} devices {mesh.devices.shape}; fnx "
            "arrays lie whole on one device, so it maps over one-device meshes (every axis "
            "of size 1). Across processes, use fnx.pmap (one device per process).")
    bound = tuple(n for n in names if not axis_names or n in axis_names)

    @functools.wraps(f)
    def mapped(*args):
        if in_specs is not None:
            per_arg = isinstance(in_specs, tuple) and not isinstance(in_specs, PartitionSpec)
            specs = in_specs if per_arg else (in_specs,) * len(args)
            if per_arg and len(specs) != len(args):
                raise ValueError(f"shard_map: in_specs has {len(specs)} entries for "
                                 f"{len(args)} arguments")
            flat = []
            for s, a in zip(specs, args):
                leaves = tree_util.tree_leaves(a)
                flat.extend(zip(_broadcast_specs(s, a), leaves))
            _check_specs("in_specs", flat, names)
        body = f
        for name in reversed(bound):   # every mesh axis: a size-1 vmap that names it
            body = _size_one_axis(body, name)
        out = body(*args)
        flat = list(zip(_broadcast_specs(out_specs, out), tree_util.tree_leaves(out)))
        _check_specs("out_specs", flat, names)
        return out
    return mapped


def _size_one_axis(f, name):
    """``f`` run under a named axis of size 1 (``vmap`` of unmapped arguments with
    ``axis_size=1``), its results without that axis."""
    from .lax import ops as L
    from .transforms.vmap import vmap

    def g(*args):
        out = vmap(f, in_axes=None, axis_size=1, axis_name=name)(*args)
        return tree_util.tree_map(lambda x: L.squeeze(x, (0,)), out)
    return g
