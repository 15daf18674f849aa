"""Collectives over the processes of the world, on NumPy buffers.

Each process holds one value ``x`` (its one device's value); a collective combines the
values of every process along the *process axis*, whose size ``P`` is the number of
processes and whose index is ``fnx.process_index()``. The shapes and results are those of
JAX's ``psum``/``all_gather``/``psum_scatter``/``all_to_all``/``ppermute`` over a mapped
axis of size ``P`` whose position ``p`` is process ``p``.

Every call uses MPI's buffer interface (no pickling). Inputs are read where they lie when
C-contiguous (else copied once); results go straight into a new array in their final
layout: strided MPI datatypes place each process's block where it belongs, so a gather or
an exchange along an inner axis costs no rearranging copy. Only ``reduce_scatter`` along an
axis other than the first copies its input once into per-process blocks (MPI reduces with
one datatype for both sides).

Every process must call the same collective with the same arguments and the same shapes
and dtypes, as with MPI. With no communicator (the single-process world) the same results
come from NumPy alone.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..core import world
from . import _shm

__all__ = ["allreduce", "allgather", "reduce_scatter", "alltoall", "ppermute", "barrier",
           "broadcast", "REDUCTIONS"]

REDUCTIONS = ("sum", "max", "min")
_PPERMUTE_TAG = 0x6678  # "fx"


def _mpi():
    from mpi4py import MPI
    return MPI


def _comm_of(comm):
    """The communicator to use (``comm``, else the world's) and its size; ``(None, 1)`` for
    the single-process world without a communicator."""
    if comm is None:
        comm = world.communicator()
    if comm is None:
        return None, 1
    return comm, comm.Get_size()


def _rank(comm):
    return 0 if comm is None else comm.Get_rank()


def _as_c(x, what):
    """``x`` as a C-contiguous NumPy array: itself when it already is one (no copy)."""
    try:
        return np.asarray(x, order="C")
    except Exception as e:  # noqa: BLE001  (anything NumPy cannot hold)
        raise TypeError(f"{what}: expected an array, got {type(x).__name__} ({e})") from None


def _axis(axis, ndim, what, name="axis"):
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{what}: {name} must be an int, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise ValueError(f"{what}: {name}={axis} is out of range for {ndim} position(s) "
                         f"(-{ndim}..{ndim - 1})")
    return a % ndim


# --- datatypes ------------------------------------------------------------------------------
# A NumPy dtype's MPI datatype: MPI's own where mpi4py maps it (reductions need it), else
# one contiguous run of the item's bytes (moving data needs nothing more).
_BASE = {}
_BLOCKS = {}
_MAX_BLOCK_TYPES = 128


def _predefined(dtype):
    """MPI's predefined datatype for a numeric NumPy dtype in native byte order, or None.
    Not float16: mpi4py names one for it where Open MPI then refuses it (MPI_ERR_TYPE), and
    MPI reduces none (float16 is moved as bytes and reduced in float32)."""
    if dtype.kind not in "biufc" or not dtype.isnative or dtype == np.float16:
        return None
    try:
        return _mpi().Datatype.fromcode(dtype.char)
    except (ValueError, KeyError, TypeError):
        return None


def _base(dtype):
    t = _BASE.get(dtype)
    if t is None:
        t = _predefined(dtype)
        if t is None:
            t = _mpi().BYTE.Create_contiguous(dtype.itemsize).Commit()
        _BASE[dtype] = t
    return t


def _block(dtype, outer, block, stride):
    """A datatype for ``outer`` runs of ``block`` items ``stride`` items apart, whose extent
    is one run, so that process ``p``'s block starts ``p`` runs into the buffer: block
    ``p`` of an axis split into equal parts, every row of the outer axes."""
    key = (dtype, outer, block, stride)
    t = _BLOCKS.get(key)
    if t is None:
        if len(_BLOCKS) >= _MAX_BLOCK_TYPES:
            _BLOCKS.pop(next(iter(_BLOCKS))).Free()
        base = _base(dtype)
        vec = base.Create_vector(outer, block, stride)
        t = vec.Create_resized(0, block * dtype.itemsize).Commit()
        vec.Free()
        _BLOCKS[key] = t
    return t


def _blocks_spec(arr, shape, axis, parts):
    """The MPI buffer spec for ``arr`` (C order, of ``shape``) seen as ``parts`` equal
    blocks along ``axis``, one per process: plain counts when the blocks are contiguous
    (``axis`` is the first axis of more than one element), else one strided block each."""
    outer = math.prod(shape[:axis])
    block = shape[axis] // parts * math.prod(shape[axis + 1:])
    if outer == 1:
        return [arr, block, _base(arr.dtype)]
    return [arr, 1, _block(arr.dtype, outer, block, parts * block)]


# --- reductions -----------------------------------------------------------------------------
def _op(op, dtype, what):
    MPI = _mpi()
    if op not in REDUCTIONS:
        raise ValueError(f"{what}: op must be one of {REDUCTIONS}, got {op!r}")
    if dtype == np.bool_:
        if op == "sum":
            raise TypeError(f"{what}: cannot sum booleans across processes; cast to an "
                            "integer dtype first (x.astype(np.int32)), or use max/min for "
                            "any/all")
        return MPI.LOR if op == "max" else MPI.LAND
    if dtype.kind == "c" and op != "sum":
        raise TypeError(f"{what}: {op} of complex values ({dtype}) is not defined")
    return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]


def _reduce_local(xs, op):
    if op == "sum":
        return xs.sum(axis=0, dtype=xs.dtype)
    return xs.max(axis=0) if op == "max" else xs.min(axis=0)


def _reducible(x):
    """Whether MPI reduces ``x``'s dtype itself; others (bfloat16, and float16, which not
    every MPI reduces) are reduced in float32 and rounded back once."""
    return _predefined(x.dtype) is not None


def allreduce(x, op="sum", *, inplace=False, out=None, comm=None):
    """The ``op`` ("sum", "max", "min") of ``x`` over every process, on every process:
    JAX's ``psum``/``pmax``/``pmin`` over the process axis (``pmean`` is the sum divided
    by ``process_count()``). Same shape and dtype as ``x``; a new array, or with
    ``inplace=True`` ``x`` itself (a writable C-contiguous NumPy array) overwritten.
    ``out``: a writable C-contiguous NumPy array of ``x``'s shape and dtype to write the
    result into and return; ``x`` itself is ``inplace=True``. (A caller that reuses one
    buffer across steps saves the allocation, which costs MPI more than the copy: a fresh
    16 MB result takes about twice as long as a reused one.) Booleans: max is any, min is
    all. Dtypes MPI does not reduce (bfloat16, float16) are reduced in float32 and rounded
    back."""
    what = "fnx.distributed.allreduce"
    if inplace:
        if not (isinstance(x, np.ndarray) and x.flags.c_contiguous and x.flags.writeable):
            raise ValueError(f"{what}: inplace=True needs a writable C-contiguous NumPy "
                             f"array, got {type(x).__name__}"
                             + (f" (contiguous={x.flags.c_contiguous}, writable="
                                f"{x.flags.writeable})" if isinstance(x, np.ndarray) else ""))
        src = x
    else:
        src = _as_c(x, what)
    if out is not None:
        if inplace:
            raise ValueError(f"{what}: pass inplace=True or out=, not both")
        if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and
                out.flags.writeable and out.shape == src.shape and out.dtype == src.dtype):
            raise ValueError(f"{what}: out must be a writable C-contiguous NumPy array of "
                             f"x's shape {src.shape} and dtype {src.dtype}, got "
                             f"{type(out).__name__} {getattr(out, 'shape', '')} "
                             f"{getattr(out, 'dtype', '')}")
        if out is src:                   # reduced where it lies
            inplace, out = True, None
    comm, size = _comm_of(comm)
    if op not in REDUCTIONS:
        raise ValueError(f"{what}: op must be one of {REDUCTIONS}, got {op!r}")
    if comm is None or src.size == 0:
        if inplace:
            return src
        if out is None:
            return src.copy()
        out[...] = src
        return out
    if not _reducible(src):
        wide = allreduce(src.astype(np.float32), op, inplace=True, comm=comm)
        dest = src if inplace else (np.empty_like(src) if out is None else out)
        dest[...] = wide
        return dest
    mop = _op(op, src.dtype, what)
    shared = _shm.reducer(comm, src.nbytes)
    if shared is not None:
        return shared.allreduce(src, src if inplace else
                                (np.empty_like(src) if out is None else out), op)
    base = _base(src.dtype)
    if inplace:
        comm.Allreduce(_mpi().IN_PLACE, [src, src.size, base], mop)
        return src
    if out is None:
        out = np.empty_like(src)
    comm.Allreduce([src, src.size, base], [out, out.size, base], mop)
    return out


def reduce_scatter(x, axis=0, tiled=False, *, op="sum", comm=None):
    """JAX's ``psum_scatter(x, axis_name, scatter_dimension=axis, tiled=tiled)`` over the
    process axis: the sum over processes, of which process ``p`` keeps part ``p`` along
    ``axis``. Not tiled: ``x.shape[axis]`` must be ``process_count()`` and that axis goes
    (process ``p`` gets ``sum_q x_q[..., p, ...]``); tiled: ``x.shape[axis]`` must divide
    by it and keeps ``x.shape[axis] // process_count()`` (process ``p`` gets the sum of
    the ``p``-th equal slice). ``op`` may also be "max" or "min"."""
    what = "fnx.distributed.reduce_scatter"
    src = _as_c(x, what)
    comm, size = _comm_of(comm)
    if src.ndim == 0:
        raise ValueError(f"{what}: x must have an axis to scatter, got a 0-d array")
    axis = _axis(axis, src.ndim, what)
    n = src.shape[axis]
    if (n != size) if not tiled else (n % size):
        need = f"equal to the {size} process(es)" if not tiled else \
            f"a multiple of the {size} process(es)"
        raise ValueError(f"{what}: x.shape[{axis}] = {n} (x of shape {src.shape}) must be "
                         f"{need}" + ("" if tiled else "; or pass tiled=True"))
    if op not in REDUCTIONS:
        raise ValueError(f"{what}: op must be one of {REDUCTIONS}, got {op!r}")
    m = n // size
    kept = src.shape[:axis] + (m,) + src.shape[axis + 1:]
    final = kept if tiled else src.shape[:axis] + src.shape[axis + 1:]
    if comm is None or src.size == 0:
        return np.array(src.reshape(kept).reshape(final), copy=True)
    if not _reducible(src):
        return reduce_scatter(src.astype(np.float32), axis, tiled, op=op,
                              comm=comm).astype(src.dtype)
    if math.prod(src.shape[:axis]) > 1:
        # process p's part must be contiguous: [P, *kept], one copy
        parts = src.reshape(src.shape[:axis] + (size, m) + src.shape[axis + 1:])
        src = np.ascontiguousarray(np.moveaxis(parts, axis, 0))
    out = np.empty(kept, src.dtype)
    base = _base(src.dtype)
    comm.Reduce_scatter_block([src, out.size, base], [out, out.size, base],
                              _op(op, src.dtype, what))
    return out.reshape(final)


# --- data movement --------------------------------------------------------------------------
def allgather(x, axis=0, tiled=False, *, comm=None):
    """JAX's ``all_gather(x, axis_name, axis=axis, tiled=tiled)`` over the process axis:
    every process's ``x``, in process order, on every process. Not tiled: a new axis of
    size ``process_count()`` at ``axis`` (``-x.ndim - 1 <= axis <= x.ndim``); tiled: the
    values concatenated along the existing ``axis``, which grows ``process_count()``
    times."""
    what = "fnx.distributed.allgather"
    src = _as_c(x, what)
    comm, size = _comm_of(comm)
    if tiled:
        if src.ndim == 0:
            raise ValueError(f"{what}: tiled=True concatenates along an axis, and x is "
                             "0-d; use tiled=False to stack")
        axis = _axis(axis, src.ndim, what)
        shape = src.shape[:axis] + (size * src.shape[axis],) + src.shape[axis + 1:]
        stacked = src.shape[:axis] + (size,) + src.shape[axis:]
    else:
        axis = _axis(axis, src.ndim + 1, what)
        shape = stacked = src.shape[:axis] + (size,) + src.shape[axis:]
    if comm is None:
        return np.array(src.reshape(shape), copy=True)
    out = np.empty(stacked, src.dtype)
    if out.size:
        comm.Allgather([src, src.size, _base(src.dtype)], _blocks_spec(out, stacked, axis, size))
    return out.reshape(shape)


def alltoall(x, split_axis, concat_axis, tiled=False, *, comm=None):
    """JAX's ``all_to_all(x, axis_name, split_axis, concat_axis, tiled=tiled)`` over the
    process axis: each process cuts ``x`` into ``process_count()`` equal parts along
    ``split_axis`` and sends part ``q`` to process ``q``; what process ``p`` receives from
    process ``q`` sits at position ``q`` along ``concat_axis``. Tiled: ``split_axis``
    shrinks and ``concat_axis`` grows ``process_count()`` times. Not tiled:
    ``x.shape[split_axis]`` must be ``process_count()``; the shape is
    ``np.insert(np.delete(x.shape, split_axis), concat_axis, process_count())``."""
    what = "fnx.distributed.alltoall"
    src = _as_c(x, what)
    comm, size = _comm_of(comm)
    if src.ndim == 0:
        raise ValueError(f"{what}: x must have an axis to split, got a 0-d array")
    split = _axis(split_axis, src.ndim, what, "split_axis")
    concat = _axis(concat_axis, src.ndim, what, "concat_axis")
    n = src.shape[split]
    if (n != size) if not tiled else (n % size):
        need = f"equal to the {size} process(es)" if not tiled else \
            f"a multiple of the {size} process(es)"
        raise ValueError(f"{what}: x.shape[split_axis={split}] = {n} (x of shape "
                         f"{src.shape}) must be {need}"
                         + ("" if tiled else "; or pass tiled=True"))
    split, concat, squeeze = untiled_as_tiled(split, concat, tiled)
    if squeeze is not None:
        src = np.expand_dims(src, concat)
    part = list(src.shape)
    part[split] //= size
    shape = list(part)
    shape[concat] *= size
    out = np.empty(shape, src.dtype)
    if comm is None:
        out[...] = src
    elif out.size:
        comm.Alltoall(_blocks_spec(src, src.shape, split, size),
                      _blocks_spec(out, tuple(shape), concat, size))
    return out if squeeze is None else out.squeeze(squeeze)


def untiled_as_tiled(split, concat, tiled):
    """An all_to_all's axes (non-negative) as a tiled one's: ``(split, concat, squeeze)``.
    JAX's reading of an untiled one whose axes differ: a new axis of size 1 at
    ``concat`` (counted after ``split`` is removed) receives the parts, and ``split``,
    left of size 1, then goes; ``squeeze`` is that axis (None: x is taken as it is)."""
    if tiled or split == concat:
        return split, concat, None
    if split < concat:
        concat += 1
    else:
        split += 1
    return split, concat, split


def ppermute(x, perm, *, comm=None):
    """JAX's ``ppermute(x, axis_name, perm)`` over the process axis: for each ``(src, dst)``
    pair of ``perm``, process ``dst`` receives process ``src``'s ``x``; a process no pair
    sends to gets zeros. Each index may be a source once and a destination once."""
    what = "fnx.distributed.ppermute"
    src = _as_c(x, what)
    comm, size = _comm_of(comm)
    pairs = _check_perm(perm, size, what)
    me = _rank(comm)
    sender = next((s for s, d in pairs if d == me), None)
    out = np.zeros_like(src) if sender is None else np.empty_like(src)
    if sender == me:
        out[...] = src
    if comm is None or src.size == 0:
        return out
    base = _base(src.dtype)
    MPI = _mpi()
    requests = []
    if sender is not None and sender != me:
        requests.append(comm.Irecv([out, out.size, base], source=sender, tag=_PPERMUTE_TAG))
    for s, d in pairs:
        if s == me and d != me:
            requests.append(comm.Isend([src, src.size, base], dest=d, tag=_PPERMUTE_TAG))
    MPI.Request.Waitall(requests)
    return out


def _check_perm(perm, size, what):
    try:
        pairs = [(operator.index(s), operator.index(d)) for s, d in perm]
    except (TypeError, ValueError):
        raise TypeError(f"{what}: perm must be a sequence of (source, destination) index "
                        f"pairs, got {perm!r}") from None
    for s, d in pairs:
        if not (0 <= s < size and 0 <= d < size):
            raise ValueError(f"{what}: perm pair ({s}, {d}) names a process outside "
                             f"0..{size - 1}")
    for i, role in ((0, "source"), (1, "destination")):
        seen = [p[i] for p in pairs]
        if len(set(seen)) != len(seen):
            twice = sorted({v for v in seen if seen.count(v) > 1})
            raise ValueError(f"{what}: perm names {twice} as a {role} more than once; "
                             "each process may send once and receive once")
    return pairs


def broadcast(x, root=0, *, comm=None):
    """Process ``root``'s ``x`` on every process (the others' ``x`` gives only the shape and
    dtype, which must match ``root``'s). A new array."""
    what = "fnx.distributed.broadcast"
    src = _as_c(x, what)
    comm, size = _comm_of(comm)
    if comm is None:
        return src.copy()
    out = src.copy() if comm.Get_rank() == root else np.empty_like(src)
    if out.size:
        comm.Bcast([out, out.size, _base(out.dtype)], root=root)
    return out


def on_device(backend):
    """These collectives for ``backend``'s device buffers (NCCL, ``_nccl``), which the
    collective primitives' impls call under ``pmap`` of device Arrays; raises
    ``NotImplementedError`` where the processes keep the host path."""
    from ._nccl import collectives_for
    return collectives_for(backend)


def barrier(*, comm=None):
    """Wait until every process has reached this call."""
    comm, _ = _comm_of(comm)
    if comm is not None:
        comm.Barrier()
