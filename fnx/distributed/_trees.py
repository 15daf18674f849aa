"""Around the training step: parameters from process 0, gathered results, sharded data,
checkpoints written once."""
from __future__ import annotations

import zlib

import numpy as np

from .. import numpy as fnp
from .. import serialization, tree_util
from ..core import world
from ..core.array import Array, device_put_array
from . import _collectives as C

__all__ = ["broadcast_params", "process_allgather", "shard", "shard_indices", "save",
           "save_states", "load", "load_states"]

_ALIGN = 64  # each leaf's bytes start at a multiple of this in a packed buffer


def _leaves(tree, what):
    """The leaves of ``tree`` as C-contiguous NumPy arrays, with how to give each back in
    its own kind (fnx Array on its device, NumPy array, Python or NumPy scalar)."""
    leaves, treedef = tree_util.tree_flatten(tree)
    arrays, kinds = [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Array):
            device = leaf.device
            kind = ("fnx", None if device.platform == "cpu" else device)
        elif isinstance(leaf, np.ndarray):
            kind = "numpy"
        elif isinstance(leaf, (bool, int, float, complex, np.generic)):
            kind = type(leaf)
        else:
            raise TypeError(f"fnx.distributed.{what}: leaf {i} of the tree is a "
                            f"{type(leaf).__name__}; only arrays and numbers cross processes")
        arr = np.asarray(leaf, order="C")
        if arr.dtype == object:
            raise TypeError(f"fnx.distributed.{what}: leaf {i} holds Python objects "
                            f"({type(leaf).__name__}); only numeric arrays cross processes")
        arrays.append(arr)
        kinds.append(kind)
    return arrays, kinds, treedef


def _give_back(arr, kind):
    if type(kind) is tuple:   # an fnx Array: on the device the leaf was on (a GPU's stays)
        device = kind[1]
        return device_put_array(fnp.asarray(arr), device)
    if kind == "numpy":
        return arr
    return kind(arr.item()) if kind in (bool, int, float, complex) else arr[()]


def _check_same(arrays, treedef, what, comm, describe_shapes=True):
    """Raise the same error on every process when the trees' structures (or leaf shapes and
    dtypes) differ between processes, which would otherwise corrupt or hang MPI."""
    sig = repr(treedef) + "|" + "|".join(
        (f"{a.shape}{a.dtype.str}" if describe_shapes else a.dtype.str) for a in arrays)
    mine = np.array([zlib.crc32(sig.encode()), len(arrays)], np.int64)
    lo = C.allreduce(mine, "min", comm=comm)
    hi = C.allreduce(mine, "max", comm=comm)
    if (lo != hi).any():
        raise ValueError(f"fnx.distributed.{what}: the processes passed different trees "
                         f"(structure, leaf shapes or dtypes differ; this is process "
                         f"{comm.Get_rank()} with {len(arrays)} leaves, shapes "
                         f"{[a.shape for a in arrays][:8]}). Every process must pass the "
                         "same structure with the same shapes and dtypes.")


def broadcast_params(tree, *, root=0, comm=None):
    """Process ``root``'s (0's) values of ``tree`` on every process: after
    ``params = broadcast_params(params)`` every process starts from the same parameters.
    Any pytree of arrays and numbers; every process passes the same structure, shapes and
    dtypes (their values are ignored: initialize them any way). Leaves come back in their
    own kind (an fnx Array on its device, NumPy array, number). One ``MPI_Bcast`` of all
    leaves packed together."""
    comm = comm if comm is not None else world.communicator()
    if comm is None or comm.Get_size() == 1:
        return tree
    arrays, kinds, treedef = _leaves(tree, "broadcast_params")
    _check_same(arrays, treedef, "broadcast_params", comm)
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-a.nbytes // _ALIGN) * _ALIGN
    is_root = comm.Get_rank() == root
    buf = np.empty(total, np.uint8)
    if is_root:
        for a, off in zip(arrays, offsets):
            buf[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
    if total:
        comm.Bcast([buf, total, C._base(buf.dtype)], root=root)
    if is_root:
        return tree
    out = [_give_back(buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape), kind)
           for a, off, kind in zip(arrays, offsets, kinds)]
    return tree_util.tree_unflatten(treedef, out)


def process_allgather(tree, tiled=False, *, comm=None):
    """JAX's ``multihost_utils.process_allgather``: every process's value of each leaf of
    ``tree``, in process order, as NumPy arrays on every process. Not tiled: stacked along
    a new first axis of size ``process_count()``; tiled: concatenated along the first axis
    (a 0-d leaf is stacked either way). Every process passes the same structure, shapes and
    dtypes."""
    comm = comm if comm is not None else world.communicator()
    arrays, _, treedef = _leaves(tree, "process_allgather")
    if comm is not None and comm.Get_size() > 1:
        _check_same(arrays, treedef, "process_allgather", comm)
    out = [C.allgather(a, 0, tiled and a.ndim > 0, comm=comm) for a in arrays]
    return tree_util.tree_unflatten(treedef, out)


# --- data -----------------------------------------------------------------------------------
def shard_indices(n, *, seed=None, epoch=0, even=False, process_index=None,
                  process_count=None):
    """The indices of ``n`` samples that this process takes in ``epoch``: a permutation of
    ``range(n)`` drawn from ``(seed, epoch)`` (``seed=None``: the natural order), the same
    on every process, of which process ``p`` of ``P`` takes positions ``p, p + P, ...``.
    So the processes' slices are disjoint and together hold every sample once; batch ``t``
    of size ``b`` of every process together is batch ``t`` of size ``b * P`` of the whole
    permutation, which one process would take. ``even=True`` drops the last ``n % P`` of
    the permutation so that every process gets ``n // P`` (processes stepping in lockstep
    need equal counts); which ones are dropped changes with the epoch when shuffled."""
    index = world.process_index() if process_index is None else process_index
    count = world.process_count() if process_count is None else process_count
    if not (isinstance(count, (int, np.integer)) and count >= 1 and 0 <= index < count):
        raise ValueError(f"fnx.distributed.shard_indices: process {index} of {count} is not "
                         "a process of a world")
    if seed is None:
        order = np.arange(n)
    else:
        order = np.random.default_rng([int(seed), int(epoch)]).permutation(n)
    if even:
        order = order[:n - n % count]
    return order[index::count]


def shard(*arrays, seed=None, epoch=0, even=False):
    """This process's share of a data set: ``arrays`` (equal-length along the first axis,
    e.g. images and labels) indexed by ``shard_indices(len, seed=..., epoch=...,
    even=...)``; one array for one argument, else a tuple. Disjoint across processes, every
    sample used once per epoch (all but ``n % P`` with ``even=True``)."""
    if not arrays:
        raise TypeError("fnx.distributed.shard: pass at least one array")
    lengths = [len(a) for a in arrays]
    if len(set(lengths)) != 1:
        raise ValueError(f"fnx.distributed.shard: the arrays have different lengths "
                         f"{lengths}; they must be the same samples")
    idx = shard_indices(lengths[0], seed=seed, epoch=epoch, even=even)
    out = tuple(a[idx] if isinstance(a, (Array, np.ndarray)) else np.asarray(a)[idx]
                for a in arrays)
    return out[0] if len(out) == 1 else out


# --- checkpoints ----------------------------------------------------------------------------
def _on_process_zero(what, path, write):
    """``write()`` on process 0 only; the others wait until it has finished, and every
    process raises when it failed."""
    comm = world.communicator()
    if comm is None or comm.Get_size() == 1:
        write()
        return
    error, message = None, b""
    if comm.Get_rank() == 0:
        try:
            write()
        except Exception as e:  # noqa: BLE001  (re-raised below, after telling the others)
            error, message = e, f"{type(e).__name__}: {e}".encode()
    length = C.broadcast(np.array([len(message)], np.int64), comm=comm)[0]
    if length:
        text = C.broadcast(np.frombuffer(message, np.uint8) if error is not None
                           else np.zeros(length, np.uint8), comm=comm)
        if error is not None:
            raise error
        raise RuntimeError(f"fnx.distributed.{what}: process 0 failed to write {path!s}: "
                           f"{text.tobytes().decode(errors='replace')}")


def save(path, tree):
    """``fnx.serialization.save(path, tree)`` from process 0 only, while the others wait
    until the file is complete (then every process may ``load`` it). An error in writing
    raises on every process."""
    _on_process_zero("save", path, lambda: serialization.save(path, tree))


def save_states(path, module, aux_states=None):
    """``fnx.serialization.save_states`` from process 0 only; the others wait for it."""
    _on_process_zero("save_states", path,
                     lambda: serialization.save_states(path, module, aux_states))


def load(path, target=None):
    """``fnx.serialization.load(path, target)`` on every process (each reads the file)."""
    return serialization.load(path, target)


def load_states(path, module, strict=True, *, aux_target=None):
    """``fnx.serialization.load_states`` on every process."""
    return serialization.load_states(path, module, strict, aux_target=aux_target)
