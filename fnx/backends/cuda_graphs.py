"""CUDA-graph replay of a compiled GPU program, so a small step is not bound by Python.

The CUDA backend's program is Python that launches each kernel, matmul and unfused
equation through CuPy, at tens of microseconds of host time each. ``GraphReplay`` wraps
a program ``fn(*buffers) -> tuple of buffers``:

1. The first call runs ``fn`` as it is (kernels compile and load, libraries set up).
2. The second call *captures* it: the arguments are copied into input buffers of the
   graph's own, ``fn`` runs once on them on a side stream with a private memory pool
   (a warm-up that fills the pool), then once more under stream capture, which records
   every launch instead of running it. The outputs it leaves are the graph's output
   buffers. The memory pool is kept with the graph: every buffer the recorded launches
   read or write stays theirs.
3. From then on a call is: one grouped-copy launch of the arguments into the input
   buffers (``fnx.kernels.copies``), the graph's launch, and one grouped copy of the
   output buffers into fresh ones (the results must outlive the next replay). Three
   launches, whatever the program's length. A donated argument's buffer, when the call
   offers it, takes an output of its shape and dtype instead of a fresh one.

A program that cannot be captured -- one that reads a device value on the host (a
``while_loop`` predicate, an index read back to size a result, a host fallback), or any
other error under capture -- runs as it is from then on; ``failure`` says why. A
program with a host callback (``io_callback``, ``debug.print``) is never captured:
replays would skip the callback. Calls made while another program is being captured (a
loop body's program inside its loop's) run as they are, and are recorded into that
capture.

Replays of one graph are serialized (the buffers are the graph's); a replay on another
stream than the last one waits for it. ``FNX_GPU_GRAPHS=0`` turns capture off.
"""
from __future__ import annotations

import threading

from ..kernels.copies import BLOCK, copy_view, grid_for, grouped_copy

__all__ = ["GraphReplay", "capturing"]

_thread = threading.local()  # .depth: how many captures this thread is inside


def capturing() -> bool:
    """Whether this thread is capturing a graph now."""
    return getattr(_thread, "depth", 0) > 0


class _GroupedCopy:
    """Copies a list of buffers of fixed shapes and dtypes into another, in one launch."""

    def __init__(self, backend, avals):
        self.xp = backend.xp
        self.items = []  # (position, dtype the kernel sees, needs a reinterpreting view)
        dtypes, counts = [], []
        for i, a in enumerate(avals):
            n = 1
            for d in a.shape:
                n *= d
            if n == 0:
                continue
            dt, count = copy_view(a.dtype, n)
            self.items.append((i, dt, dt != a.dtype))
            dtypes.append(dt)
            counts.append(count)
        self.kernel = None
        if self.items:
            name, source = grouped_copy(dtypes, counts)
            self.kernel = backend.load_module(source, [name])[name]
            self.grid = (grid_for(counts),)

    def __call__(self, sources, destinations):
        if self.kernel is None:
            return
        args = []
        for i, dt, view in self.items:
            s, d = sources[i], destinations[i]
            if not s.flags.c_contiguous:
                s = self.xp.ascontiguousarray(s)
            if view:
                s, d = s.reshape(-1).view(dt), d.reshape(-1).view(dt)
            args.append(s)
            args.append(d)
        self.kernel(self.grid, (BLOCK,), tuple(args))


class GraphReplay:
    """``fn`` (a compiled GPU program) replayed as a CUDA graph after its first call (see
    the module docstring). ``replays``: how many calls a graph served; ``failure``: why
    the program is not captured (None while it may be)."""

    def __init__(self, fn, backend, in_avals, out_avals, donated=()):
        self.fn = fn
        self.backend = backend
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        self.donated = tuple(donated)
        # (output, index in ``_dn``): the donated input whose buffer a replay copies that
        # output into, when the call offers it (one donated input per output)
        self.reuse, free = [], list(enumerate(self.donated))
        for o, a in enumerate(self.out_avals):
            for j, k in free:
                b = self.in_avals[k]
                if b.shape == a.shape and b.dtype == a.dtype:
                    self.reuse.append((o, j))
                    free.remove((j, k))
                    break
        self.calls = 0
        self.replays = 0
        self.graph = None
        self.failure = None
        self._lock = threading.Lock()

    def _run(self, args, dn):
        return self.fn(*args) if dn is None else self.fn(*args, _dn=dn)

    def __call__(self, *args, _dn=None):
        if capturing():  # inside another program's capture: recorded into that one
            return self._run(args, _dn)
        if self.graph is not None:
            return self._replay(args, _dn)
        if self.failure is not None:
            return self._run(args, _dn)
        self.calls += 1
        if self.calls < 2:
            return self._run(args, _dn)
        with self._lock:
            if self.graph is None and self.failure is None:
                self._capture(args)
        if self.graph is None:
            return self._run(args, _dn)
        return self._replay(args, _dn)

    def _capture(self, args):
        b = self.backend
        xp = b.xp
        cuda = xp.cuda
        try:
            copy_in = _GroupedCopy(b, self.in_avals)
            copy_out = _GroupedCopy(b, self.out_avals)
            pool = cuda.MemoryPool()
            current = cuda.get_current_stream()
            side = cuda.Stream(non_blocking=True)
            with cuda.using_allocator(pool.malloc), side:
                side.wait_event(current.record())
                static_in = [xp.empty(a.shape, a.dtype) for a in self.in_avals]
                copy_in([b.put(a) for a in args], static_in)
                warm = self.fn(*static_in)  # fills the pool, sets up libraries on `side`
                del warm
                _thread.depth = getattr(_thread, "depth", 0) + 1
                try:
                    side.begin_capture()
                    try:
                        static_out = [xp.ascontiguousarray(o) for o in self.fn(*static_in)]
                    except BaseException:
                        try:
                            side.end_capture()
                        except Exception:
                            pass
                        raise
                    graph = side.end_capture()
                finally:
                    _thread.depth -= 1
            current.wait_event(side.record())
        except Exception as e:  # not capturable: runs as it is from now on
            self.failure = f"{type(e).__name__}: {e}"
            return
        self.copy_in, self.copy_out = copy_in, copy_out
        self.static_in, self.static_out = static_in, static_out
        self.pool, self.side = pool, side
        self.last_stream = current
        self.graph = graph

    def _replay(self, args, dn=None):
        b = self.backend
        xp = b.xp
        with self._lock:
            current = xp.cuda.get_current_stream()
            if current.ptr != self.last_stream.ptr:
                current.wait_event(self.last_stream.record())
                self.last_stream = current
            self.copy_in([a if b.owns(a) else b.put(a) for a in args], self.static_in)
            self.graph.launch(stream=current)
            outs = [None] * len(self.out_avals)
            if dn is not None:  # donated buffers take outputs (read by the copy in before)
                for o, j in self.reuse:
                    outs[o] = dn[j]
            outs = [xp.empty(a.shape, a.dtype) if o is None else o
                    for o, a in zip(outs, self.out_avals)]
            self.copy_out(self.static_out, outs)
            self.replays += 1
        return tuple(outs)
