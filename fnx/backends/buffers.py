"""Buffers a compiled function keeps between calls, so that a steady stream of calls
allocates (and page-faults) nothing.

The NumPy lowering plans, at compile time, where each large result of a ufunc or a
matmul goes (``out=``):

* **scratch**: an intermediate that never escapes (not an output, and read only by
  ops that never return a view of it) gets a slot of the function's scratch arena.
  Slots are planned from liveness: a slot whose value is dead is handed to the next
  result of the same shape and dtype. The arena is allocated on the first call and
  kept (at most ``ARENA_MAX_BYTES`` per compiled function; results past that budget
  are allocated per call as before).
* **outputs**: each output gets a small ring of buffers. A call takes a ring buffer
  that nothing references any more (the caller dropped the Array, and every view of
  it: views hold a reference to the buffer), otherwise a new one. So a training loop
  (``params = step(params, batch)``) cycles through two buffers per output instead of
  allocating one per call.
* **donated inputs** (``jit(..., donate_argnums=...)``): an output may be planned into
  a donated input's buffer, written once nothing reads that input (or a view of it)
  any more. The caller passes the donated buffers that nothing else references
  (``_dn``); for the others the output falls back to its ring.

A call that finds the pool in use (another thread, or a re-entrant call) allocates
everything afresh, as if there were no pool.
"""
from __future__ import annotations

import sys
import threading
import weakref

import numpy as np

# Results smaller than this are left to NumPy's allocator (they come from the heap's
# free lists and rarely touch fresh pages).
MIN_BYTES = 1 << 14
# Scratch memory a compiled function may keep between calls.
ARENA_MAX_BYTES = 1 << 28
# Buffers kept per output.
RING_SIZE = 3

_getrefcount = sys.getrefcount

# Every buffer some ring holds (by id): a donated buffer held by a ring has that one
# reference more than the caller's own.
RING_HELD: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


def _refcounts(ring):
    return [_getrefcount(b) for b in ring]


def _unreferenced_count():
    """The reference count ``_refcounts`` sees for a buffer only its ring holds (it
    depends on the interpreter; measured once)."""
    return _refcounts([np.empty(1)])[0]


_FREE = _unreferenced_count()


class BufferPool:
    """The scratch arena and output rings of one compiled function:
    ``scratch, outs = pool.enter()`` at the start of a call (lists of buffers, or of
    None when the pool is in use), ``pool.exit(scratch)`` when it ends."""
    __slots__ = ("scratch_specs", "out_specs", "donors", "arena", "rings", "lock",
                 "unpooled")

    def __init__(self, scratch_specs, out_specs, donors=None):
        self.scratch_specs = list(scratch_specs)  # [(shape, dtype)]
        self.out_specs = list(out_specs)
        self.donors = list(donors or [None] * len(self.out_specs))  # per ring: _dn index
        self.arena = None
        self.rings = [[] for _ in self.out_specs]
        self.lock = threading.Lock()
        self.unpooled = ([None] * len(self.scratch_specs), [None] * len(self.out_specs))

    def enter(self, donated=None):
        """``(scratch, outs)`` for one call; ``donated``: per donated input, its buffer
        when the call may overwrite it, else None."""
        if not self.lock.acquire(blocking=False):
            if donated is None:
                return self.unpooled
            return self.unpooled[0], [None if j is None else donated[j] for j in self.donors]
        if self.arena is None:
            self.arena = [np.empty(s, d) for s, d in self.scratch_specs]
        return self.arena, [donated[j] if donated is not None and j is not None
                            and donated[j] is not None else self._take(ring, s, d)
                            for ring, (s, d), j in zip(self.rings, self.out_specs, self.donors)]

    def exit(self, scratch):
        if scratch is not self.unpooled[0]:
            self.lock.release()

    @staticmethod
    def _take(ring, shape, dtype):
        for b, n in zip(ring, _refcounts(ring)):
            if n == _FREE:
                return b
        b = np.empty(shape, dtype)
        if len(ring) < RING_SIZE:
            ring.append(b)
            RING_HELD[id(b)] = b
        return b
