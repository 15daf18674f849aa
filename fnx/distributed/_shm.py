"""Allreduce of large buffers through memory that the processes of one machine share.

When every process of a communicator runs on one machine, a large allreduce goes through
one MPI-3 shared window (``MPI_Win_allocate_shared``) instead of MPI's message channel,
which moves a message through small shared cells with a copy on each side. Each call
works chunk by chunk. Two processes:

1. each process copies its chunk into its own slot of the window;
2. after a barrier, each reduces the whole chunk, its own operand and the other's slot in
   process order, straight into its result.

More processes (a reduce-scatter, then an all-gather, so no process reads every slot):

1. every process copies its chunk into its own slot of the window;
2. after a barrier, process ``p`` reduces part ``p`` of the chunk over the slots, in
   process order, into the window's result row;
3. after a second barrier, every process copies the whole result row out.

Either way every process receives the same bits (MPI's allreduce promises that for its
predefined operations only as a quality of implementation). The window holds two
regions, used in turn: a process writes a region again only after the barrier of the
chunk between, which no process passes before it has read the region, so one barrier a
chunk for two processes and two for more, and none trailing.

Measured on a 2-core machine (2 processes, the 2.7 MB of an MLP's gradients): 0.19 ms
against 0.38 ms for ``MPI_Allreduce`` between steps, with the three passes; inside a
training step, where the gradients were just computed, the two-pass way for two processes
takes 0.21 ms against the three passes' 0.39 ms.

Used by ``fnx.distributed.allreduce`` for buffers of ``MIN_BYTES`` or more (``PAIR_MIN_BYTES``
for two processes: 20 KB take 7 µs here against MPI's 14) when the whole
communicator shares a machine; ``FNX_MPI_SHARED_MEMORY=0`` (the same in every process)
turns it off. Every decision here depends only on what every process passes alike (the
communicator, the buffer's size and dtype), so the processes always take the same path.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["reducer", "MIN_BYTES", "PAIR_MIN_BYTES", "CHUNK_BYTES"]

MIN_BYTES = 1 << 16          # below this MPI's own allreduce is as fast (measured)
PAIR_MIN_BYTES = 1 << 13     # the same for two processes (one barrier a chunk)
CHUNK_BYTES = 1 << 19        # one process's slot: the window is 2 x (P + 1) of these
_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}
_keyval = None               # the MPI attribute each communicator keeps its reducer in


def enabled() -> bool:
    return os.environ.get("FNX_MPI_SHARED_MEMORY", "1") != "0"


def reducer(comm, nbytes):
    """The shared-memory reducer of ``comm`` for a buffer of ``nbytes``, or None where MPI's
    allreduce serves (small buffers, processes on several machines, turned off). The
    first call for a communicator is collective: every process of ``comm`` makes it, as
    every process calls the same allreduce."""
    global _keyval
    size = comm.Get_size()
    if size < 2 or nbytes < (PAIR_MIN_BYTES if size == 2 else MIN_BYTES) or not enabled():
        return None
    if _keyval is None:
        # an attribute of the communicator (not a table keyed by its handle, which MPI
        # hands out again once a communicator is freed): freeing it frees the window
        from mpi4py import MPI
        _keyval = MPI.Comm.Create_keyval(delete_fn=lambda comm, key, r: r and r.free())
    found = comm.Get_attr(_keyval)
    if found is None:
        found = _Reducer.create(comm) or False   # False: the processes span machines
        comm.Set_attr(_keyval, found)
    return found or None


class _Reducer:
    """A two-region shared window over the processes of ``comm``, all on one machine."""

    @classmethod
    def create(cls, comm):
        from mpi4py import MPI
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        if node.Get_size() != comm.Get_size():   # alike on every process: some machine
            node.Free()                          # holds fewer than all of them
            return None
        return cls(node, MPI)

    def __init__(self, node, MPI):
        self.node, self.me, self.size = node, node.Get_rank(), node.Get_size()
        total = 2 * (self.size + 1) * CHUNK_BYTES
        self.win = MPI.Win.Allocate_shared(total if self.me == 0 else 0, 1, comm=node)
        buf, _ = self.win.Shared_query(0)
        self.regions = np.ndarray((2, self.size + 1, CHUNK_BYTES), np.uint8, buffer=buf)
        self.win.Lock_all(MPI.MODE_NOCHECK)   # passive target: Sync orders the stores
        self.turn = 0

    def free(self):
        """Give the window and the node's communicator back (collective, as freeing the
        communicator they belong to is)."""
        self.win.Unlock_all()
        self.win.Free()
        self.node.Free()

    def _everyone_has_written(self):
        self.win.Sync()
        self.node.Barrier()
        self.win.Sync()

    def allreduce(self, src, out, op):
        """``out`` (C-contiguous, ``src``'s shape and dtype; may be ``src`` itself) becomes
        the ``op`` of every process's ``src``."""
        ufunc, dtype, size, me = _UFUNCS[op], src.dtype, self.size, self.me
        flat_src, flat_out = src.reshape(-1), out.reshape(-1)
        per = CHUNK_BYTES // dtype.itemsize
        for start in range(0, flat_src.size, per):
            stop = min(flat_src.size, start + per)
            m = stop - start
            region = self.regions[self.turn].view(dtype)
            self.turn ^= 1
            slots, result = region[:size, :m], region[size, :m]
            mine = flat_src[start:stop]
            slots[me] = mine
            self._everyone_has_written()
            if size == 2:                # the whole chunk, (s0 op s1), read from where
                first, second = (mine, slots[1]) if me == 0 else (slots[0], mine)
                ufunc(first, second, out=flat_out[start:stop])   # it is nearest
                continue
            lo, hi = _part(m, size, me)
            if hi > lo:                  # in process order: ((s0 + s1) + s2) + ...
                part = result[lo:hi]
                ufunc(slots[0, lo:hi], slots[1, lo:hi], out=part)
                for q in range(2, size):
                    ufunc(part, slots[q, lo:hi], out=part)
            self._everyone_has_written()
            flat_out[start:stop] = result
        return out


def _part(m, parts, p):
    """Part ``p`` of ``m`` elements split into ``parts`` runs, each a multiple of 16
    elements long (whole cache lines of 4-byte items) but the last."""
    step = -(-m // parts)
    step = -(-step // 16) * 16
    return min(m, p * step), min(m, (p + 1) * step)
