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

**How long buffers are kept.** A pool is only worth its memory while its function is
called again and again; a signature used once (the last, smaller batch of an epoch,
an ``init`` function, a shape tried once) would otherwise keep its arena and two or
three copies of every output (for a training step: the model and optimizer state)
for as long as the function lives. So every pool that holds buffers is released, its
arena and rings dropped (Arrays the caller still holds stay valid: the pool only
forgets them), when

* it was **not entered during the last** ``IDLE_CALLS`` **entries of any pool** (one
  global count of pooled calls, checked every ``IDLE_CALLS // 4`` of them: a step
  function's batch-32 signature is released ~1000 calls after the loop moved on to
  batch 4, a function called once is released after as many calls of anything else);
* the buffers all pools hold pass ``MAX_HELD_BYTES``: the least recently entered
  pools (never the one growing) are released until the total is below it;
* its compiled function is collected (the signature was evicted from jit's cache,
  its function or jit wrapper died, ``clear_cache()``), or ``fnx.clear_caches()``
  runs (``release_all``).

A released pool allocates afresh on its next call, as on its first. Per signature
the buffers are bounded by construction: at most ``ARENA_MAX_BYTES`` of scratch and
``RING_SIZE`` buffers per output. The checks cost one counter increment per call;
the sweeps and the budget are computed only every ``IDLE_CALLS // 4`` calls and when a
pool allocates a buffer it keeps.
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
# A pool not entered during this many entries of (any) pools is released.
IDLE_CALLS = 1000
# The most all pools together keep; past it the least recently entered are released.
MAX_HELD_BYTES = 1 << 31

_getrefcount = sys.getrefcount

# Every buffer some ring holds (by id): a donated buffer held by a ring has that one
# reference more than the caller's own. A pool removes its buffers when it releases
# them or is collected, so a buffer here is always one a live ring holds.
RING_HELD: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


def _refcounts(ring):
    return [_getrefcount(b) for b in ring]


def _unreferenced_count():
    """The reference count ``_refcounts`` sees for a buffer only its ring holds (it
    depends on the interpreter; measured once)."""
    return _refcounts([np.empty(1)])[0]


_FREE = _unreferenced_count()


class _Clock:
    """``now``: entries of pools so far; ``sweep_at``: when the next idle sweep runs;
    ``held``: the bytes pools hold (a running estimate, recounted at each sweep)."""
    __slots__ = ("now", "sweep_at", "held")

    def __init__(self):
        self.now = self.held = 0
        self.sweep_at = max(1, IDLE_CALLS // 4)


_CLOCK = _Clock()
_HOLDING: "weakref.WeakSet[BufferPool]" = weakref.WeakSet()  # the pools holding buffers
_REGISTRY = threading.Lock()  # guards _HOLDING's changes and copies


def _holding():
    with _REGISTRY:
        return list(_HOLDING)


def _sweep(current):
    """Release the pools idle for ``IDLE_CALLS`` entries; recount ``held``."""
    c = _CLOCK
    c.sweep_at = c.now + max(1, IDLE_CALLS // 4)
    stale = c.now - IDLE_CALLS
    held = 0
    for p in _holding():
        if p is not current and p.used <= stale:
            p.release()
        held += p.nbytes
    c.held = held


def _evict(current):
    """Release the least recently entered pools (not ``current``) until the buffers held
    fit ``MAX_HELD_BYTES``."""
    pools = _holding()
    held = sum(p.nbytes for p in pools)
    for p in sorted(pools, key=lambda p: p.used):
        if held <= MAX_HELD_BYTES:
            break
        if p is not current:
            n = p.nbytes
            if p.release():
                held -= n
    _CLOCK.held = held


def release_all():
    """Release every pool's buffers (those of pools in use right now excepted); the
    number of bytes released."""
    freed = 0
    for p in _holding():
        n = p.nbytes
        if p.release():
            freed += n
    _CLOCK.held = sum(p.nbytes for p in _holding())
    return freed


def held_bytes():
    """The bytes all pools hold now (arenas and rings)."""
    return sum(p.nbytes for p in _holding())


class BufferPool:
    """The scratch arena and output rings of one compiled function:
    ``scratch, outs = pool.enter()`` at the start of a call (lists of buffers, or of
    None when the pool is in use), ``pool.exit(scratch)`` when it ends;
    ``pool.release()`` drops the buffers it keeps."""
    __slots__ = ("scratch_specs", "out_specs", "donors", "arena", "rings", "lock",
                 "unpooled", "used", "nbytes", "__weakref__")

    def __init__(self, scratch_specs, out_specs, donors=None):
        self.scratch_specs = list(scratch_specs)  # [(shape, dtype)]
        self.out_specs = list(out_specs)
        self.donors = list(donors or [None] * len(self.out_specs))  # per ring: _dn index
        self.arena = None
        self.rings = [[] for _ in self.out_specs]
        self.lock = threading.Lock()
        self.unpooled = ([None] * len(self.scratch_specs), [None] * len(self.out_specs))
        self.used = 0    # _CLOCK.now at the last entry
        self.nbytes = 0  # bytes of the arena and rings

    def enter(self, donated=None):
        """``(scratch, outs)`` for one call; ``donated``: per donated input, its buffer
        when the call may overwrite it, else None."""
        if not self.lock.acquire(blocking=False):
            if donated is None:
                return self.unpooled
            return self.unpooled[0], [None if j is None else donated[j] for j in self.donors]
        c = _CLOCK
        self.used = c.now = now = c.now + 1
        if now >= c.sweep_at:
            _sweep(self)
        if self.arena is None:
            self.arena = [np.empty(s, d) for s, d in self.scratch_specs]
            self._hold(sum(b.nbytes for b in self.arena))
        return self.arena, [donated[j] if donated is not None and j is not None
                            and donated[j] is not None else self._take(ring, s, d)
                            for ring, (s, d), j in zip(self.rings, self.out_specs, self.donors)]

    def exit(self, scratch):
        if scratch is not self.unpooled[0]:
            self.lock.release()

    def _take(self, ring, shape, dtype):
        for b, n in zip(ring, _refcounts(ring)):
            if n == _FREE:
                return b
        b = np.empty(shape, dtype)
        if len(ring) < RING_SIZE:
            ring.append(b)
            RING_HELD[id(b)] = b
            self._hold(b.nbytes)
        return b

    def _hold(self, n):
        """Account for ``n`` more bytes kept (the pool's lock is held)."""
        if not n:
            return
        if not self.nbytes:
            with _REGISTRY:
                _HOLDING.add(self)
        self.nbytes += n
        c = _CLOCK
        c.held += n
        if c.held > MAX_HELD_BYTES:
            _evict(self)

    def _forget(self):
        for ring in self.rings:
            for b in ring:
                if RING_HELD.get(id(b)) is b:
                    del RING_HELD[id(b)]

    def release(self):
        """Drop the arena and the ring buffers (the caller's Arrays stay valid; the next
        call allocates afresh). False, and nothing dropped, if a call is using it."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            self._forget()
            self.arena = None
            self.rings = [[] for _ in self.out_specs]
            self.nbytes = 0
            with _REGISTRY:
                _HOLDING.discard(self)
        finally:
            self.lock.release()
        return True

    def __del__(self):
        # Its buffers the caller still holds are no longer ring-held: a donation must
        # not count a ring's reference that is gone.
        try:
            self._forget()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
