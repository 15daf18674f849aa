"""Collectives over the processes' GPU buffers, through NCCL (CuPy's ``cupy.cuda.nccl``).

Under ``fnx.pmap`` of device Arrays, the collective primitives' impls call these on the
program's device buffers instead of the host collectives of ``_collectives``: the values
never leave the GPU, and every call is enqueued on the current CUDA stream, so CUDA
graphs capture a jitted step's collectives with its kernels (NCCL 2.9 on).

**The communicator.** One per world and array library, made at the first device
collective: process 0 asks NCCL for a unique id, MPI broadcasts it, and every process
joins as its rank. NCCL wants each rank on its own GPU; where it cannot join (two
processes on one GPU, no NCCL library, an NCCL error), the processes agree over MPI and
all of them keep the host path (copies to the host, MPI, copies back) with one warning
saying why: a collective whose ranks took different paths would wait forever. A world of
one process needs no communicator (``_Local``).

**Layouts.** NCCL moves contiguous buffers, rank ``q``'s block at position ``q``. So
``allgather`` receives ``[P, *x.shape]`` and moves the process axis where it is asked for
(one device copy unless it is the first); ``reduce_scatter`` sends ``[P, *kept]`` (one
copy unless the scattered axis has nothing before it); ``alltoall`` sends blocks of the
same layout and receives ``[P, *part]``, and with ``ppermute`` it is grouped sends and
receives. Shapes and parameters are the primitives' (their shape rules checked them).

**Dtypes NCCL lacks** are carried as ones it has, with the host path's results: bool as
uint8 (max: any, min: all; a sum is refused, as on the host); int16 and uint16 widened to
32 bits (a sum wraps back to the same bits); complex as pairs of reals (sums only);
float16 and bfloat16 reduced in float32 and rounded once, as the host path does.

**Emulated** (``FNX_GPU_EMULATE=1``): ``_EmulatedComm`` takes the same calls and serves
them by MPI over the emulated buffers' host memory, each recorded as one device operation,
so a captured graph replays it as a real graph replays NCCL's kernels; CI runs the same
layouts and bookkeeping under ``mpiexec``.
"""
from __future__ import annotations

import math
import threading
import warnings

import numpy as np

from ..core import world
from ._collectives import untiled_as_tiled

__all__ = ["collectives_for", "DeviceCollectives"]

# NCCL's datatype enum (nccl.h), by the dtype it moves
_NCCL_TYPES = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int32): 2,
               np.dtype(np.uint32): 3, np.dtype(np.int64): 4, np.dtype(np.uint64): 5,
               np.dtype(np.float32): 7, np.dtype(np.float64): 8}
_NCCL_OPS = {"sum": 0, "max": 2, "min": 3}       # ncclSum, ncclMax, ncclMin
_WIDER = {np.dtype(np.int16): np.dtype(np.int32), np.dtype(np.uint16): np.dtype(np.uint32),
          np.dtype(np.float16): np.dtype(np.float32)}

_LOCK = threading.Lock()
_MADE: dict = {}   # (id(xp), id(world communicator)) -> DeviceCollectives, or the reason not


def collectives_for(backend):
    """The collectives over the world's processes for ``backend``'s device buffers (a
    ``DeviceCollectives``); ``NotImplementedError`` where the processes keep the host
    path (the CUDA backend then runs the collective on host copies)."""
    mpi = world.communicator()
    size = world.process_count()
    key = (id(backend.xp), id(mpi), size)
    made = _MADE.get(key)
    if made is None:
        with _LOCK:
            made = _MADE.get(key)
            if made is None:
                made = _MADE[key] = _make(backend, mpi, size)
    if isinstance(made, str):
        raise NotImplementedError(made)
    return made


def _make(backend, mpi, size):
    """The collectives (every process agreeing on it), or why the host path stays."""
    xp = backend.xp
    if size == 1:
        return DeviceCollectives(xp, _Local(xp))
    comm, why = None, None
    try:
        comm = _EmulatedComm(mpi) if backend.emulated else _NcclComm(xp, mpi)
    except Exception as e:  # noqa: BLE001  (no NCCL, a shared GPU, any NCCL error)
        why = f"{type(e).__name__}: {e}"
    joined = mpi.allreduce(why is None, op=_min_op())
    if joined:
        return DeviceCollectives(xp, comm)
    reason = (f"pmap's collectives over GPU buffers go through host copies and MPI: NCCL "
              f"could not join the {size} processes ("
              + (why or "another process failed") + "). NCCL needs one GPU per process "
              "and its library (pip install nvidia-nccl-cu12 or -cu13).")
    warnings.warn("fnx: " + reason, RuntimeWarning, stacklevel=4)
    return reason


def _min_op():
    from mpi4py import MPI
    return MPI.MIN


class DeviceCollectives:
    """``_collectives``' functions for device buffers: the same names, parameters and
    results, computed by ``comm`` (an NCCL communicator, its emulation, or ``_Local``)."""

    def __init__(self, xp, comm):
        self.xp, self.comm = xp, comm
        self.size, self.rank = comm.size, comm.rank

    def allreduce(self, x, op="sum"):
        xp = self.xp
        src = xp.ascontiguousarray(x)
        out = xp.empty(src.shape, src.dtype)
        if src.size:
            self._reduce(src, out, op, self.comm.all_reduce)
        return out

    def reduce_scatter(self, x, axis=0, tiled=False, op="sum"):
        xp, size = self.xp, self.size
        src = xp.ascontiguousarray(x)
        axis %= src.ndim
        m = src.shape[axis] // size
        kept = src.shape[:axis] + (m,) + src.shape[axis + 1:]
        final = kept if tiled else src.shape[:axis] + src.shape[axis + 1:]
        if math.prod(src.shape[:axis]) > 1:
            # process q's part must be contiguous: [P, *kept], one copy
            parts = src.reshape(src.shape[:axis] + (size, m) + src.shape[axis + 1:])
            src = xp.ascontiguousarray(xp.moveaxis(parts, axis, 0))
        out = xp.empty(kept, src.dtype)
        if out.size:
            self._reduce(src, out, op, self.comm.reduce_scatter)
        return out.reshape(final)

    def allgather(self, x, axis=0, tiled=False):
        xp, size = self.xp, self.size
        src = xp.ascontiguousarray(x)
        a = axis % (src.ndim if tiled else src.ndim + 1)
        got = xp.empty((size,) + src.shape, src.dtype)
        if got.size:
            self.comm.all_gather(_movable(xp, src), _movable(xp, got))
        if a:
            got = xp.ascontiguousarray(xp.moveaxis(got, 0, a))
        if tiled:
            return got.reshape(src.shape[:a] + (size * src.shape[a],) + src.shape[a + 1:])
        return got

    def alltoall(self, x, split_axis, concat_axis, tiled=False):
        xp, size = self.xp, self.size
        src = xp.ascontiguousarray(x)
        split, concat = split_axis % src.ndim, concat_axis % src.ndim
        split, concat, squeeze = untiled_as_tiled(split, concat, tiled)
        if squeeze is not None:
            src = xp.expand_dims(src, concat)
        k = src.shape[split] // size
        part = src.shape[:split] + (k,) + src.shape[split + 1:]
        send = xp.ascontiguousarray(xp.moveaxis(
            src.reshape(src.shape[:split] + (size, k) + src.shape[split + 1:]), split, 0))
        got = xp.empty((size,) + part, src.dtype)
        if got.size:
            self._exchange([(q, send[q]) for q in range(size)],
                           [(q, got[q]) for q in range(size)])
        shape = list(part)
        shape[concat] *= size
        out = xp.ascontiguousarray(xp.moveaxis(got, 0, concat)).reshape(shape)
        return out if squeeze is None else out.squeeze(squeeze)

    def ppermute(self, x, perm):
        xp, me = self.xp, self.rank
        src = xp.ascontiguousarray(x)
        pairs = [(int(s), int(d)) for s, d in perm]
        sender = next((s for s, d in pairs if d == me), None)
        out = (xp.zeros if sender is None else xp.empty)(src.shape, src.dtype)
        if sender == me:
            out[...] = src
        if src.size:
            self._exchange([(d, src) for s, d in pairs if s == me and d != me],
                           [(sender, out)] if sender not in (None, me) else [])
        return out

    # -- dtypes NCCL lacks -----------------------------------------------------------------
    def _reduce(self, src, out, op, call):
        """``call(send, recv, op)`` with ``src``/``out`` carried in a dtype NCCL reduces."""
        xp, dt = self.xp, src.dtype
        if dt == np.bool_:
            if op == "sum":
                raise TypeError("psum over processes: cannot sum booleans; cast to an "
                                "integer dtype first (x.astype(jnp.int32)), or use pmax/pmin "
                                "for any/all")
            call(src.view(np.uint8), out.view(np.uint8), op)
        elif dt.kind == "c":
            if op != "sum":
                raise TypeError(f"p{op} over processes of complex values ({dt}) is not "
                                "defined")
            call(_movable(xp, src), _movable(xp, out), op)
        elif dt in _NCCL_TYPES:
            call(src, out, op)
        else:                               # (int16, uint16, float16, bfloat16)
            wide = _WIDER.get(dt, np.dtype(np.float32))
            w = xp.empty(out.shape, wide)
            call(src.astype(wide), w, op)
            out[...] = w.astype(dt)

    def _exchange(self, sends, receives):
        self.comm.exchange([(q, _movable(self.xp, b)) for q, b in sends],
                           [(q, _movable(self.xp, b)) for q, b in receives])


def _movable(xp, x):
    """``x`` (contiguous) as a 1-d buffer of a dtype NCCL moves: itself when it has one,
    else its bytes seen as unsigned integers of its item size (complex: its float
    parts), so data movement needs no conversion."""
    flat = x.reshape(-1)
    if flat.dtype in _NCCL_TYPES:
        return flat
    if flat.dtype.kind == "c":
        return flat.view(np.float32 if flat.dtype.itemsize == 8 else np.float64)
    return flat.view({4: np.uint32, 8: np.uint64}.get(flat.dtype.itemsize, np.uint8))


# --- communicators: contiguous 1-d buffers in, NCCL's semantics -----------------------------
class _NcclComm:
    """One rank of an NCCL communicator over the MPI communicator ``mpi``'s processes
    (None: a communicator of this one process, which the GPU tests use to run every call
    on a real device with one GPU)."""

    def __init__(self, xp, mpi):
        self.xp = xp
        self.rank = 0 if mpi is None else mpi.Get_rank()
        self.size = 1 if mpi is None else mpi.Get_size()
        uid, failure = None, None
        try:
            from cupy.cuda import nccl
            if not getattr(nccl, "available", True):
                raise ImportError("CuPy finds no NCCL library")
            self.nccl = nccl
            if self.rank == 0:
                uid = nccl.get_unique_id()
        except Exception as e:  # noqa: BLE001
            failure = e
        if mpi is not None:
            # NCCL's own joining waits for every rank: join only if every process can
            uid = mpi.bcast(uid, root=0)
            if not mpi.allreduce(failure is None and uid is not None, op=_min_op()):
                raise failure or RuntimeError("another process could not load NCCL")
        elif failure is not None:
            raise failure
        self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)

    def _stream(self):
        return self.xp.cuda.get_current_stream().ptr

    def all_reduce(self, send, recv, op):
        self.comm.allReduce(send.data.ptr, recv.data.ptr, send.size,
                            _NCCL_TYPES[send.dtype], _NCCL_OPS[op], self._stream())

    def reduce_scatter(self, send, recv, op):
        self.comm.reduceScatter(send.data.ptr, recv.data.ptr, recv.size,
                                _NCCL_TYPES[send.dtype], _NCCL_OPS[op], self._stream())

    def all_gather(self, send, recv):
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size,
                            _NCCL_TYPES[send.dtype], self._stream())

    def exchange(self, sends, receives):
        stream = self._stream()
        self.nccl.groupStart()
        try:
            for peer, b in sends:
                self.comm.send(b.data.ptr, b.size, _NCCL_TYPES[b.dtype], peer, stream)
            for peer, b in receives:
                self.comm.recv(b.data.ptr, b.size, _NCCL_TYPES[b.dtype], peer, stream)
        finally:
            self.nccl.groupEnd()


class _EmulatedComm:
    """NCCL's calls on the emulated GPU: MPI over the buffers' host memory, each one
    recorded device operation (see the module docstring)."""

    _TAG = 0x6e63  # "nc"

    def __init__(self, mpi):
        from ..backends.cuda_emulation import record_call
        self.mpi, self.record = mpi, record_call
        self.rank, self.size = mpi.Get_rank(), mpi.Get_size()

    def all_reduce(self, send, recv, op):
        self.record(self._all_reduce, "ncclAllReduce", (send, recv), {"op": op})

    def reduce_scatter(self, send, recv, op):
        self.record(self._reduce_scatter, "ncclReduceScatter", (send, recv), {"op": op})

    def all_gather(self, send, recv):
        self.record(self._all_gather, "ncclAllGather", (send, recv), {})

    def exchange(self, sends, receives):
        self.record(self._exchange, "ncclSend/ncclRecv", (sends, receives), {})

    @staticmethod
    def _mpi_op(op):
        from mpi4py import MPI
        return {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]

    def _all_reduce(self, send, recv, *, op):
        self.mpi.Allreduce(send, recv, self._mpi_op(op))

    def _reduce_scatter(self, send, recv, *, op):
        self.mpi.Reduce_scatter_block(send, recv, self._mpi_op(op))

    def _all_gather(self, send, recv):
        self.mpi.Allgather(send, recv)

    def _exchange(self, sends, receives):
        from mpi4py import MPI
        pending = [self.mpi.Irecv(b, source=q, tag=self._TAG) for q, b in receives]
        pending += [self.mpi.Isend(b, dest=q, tag=self._TAG) for q, b in sends]
        MPI.Request.Waitall(pending)


class _Local:
    """The communicator of a world of one process: NCCL's results over one rank, by
    device copies (no library needed)."""

    rank, size = 0, 1

    def __init__(self, xp):
        self.xp = xp

    def all_reduce(self, send, recv, op=None):
        recv[...] = send.reshape(recv.shape)

    reduce_scatter = all_reduce
    all_gather = all_reduce

    def exchange(self, sends, receives):
        for (_, s), (_, r) in zip(sends, receives):   # (only to itself)
            r[...] = s
