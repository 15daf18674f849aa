"""The event recorder behind ``fnx.profiler``: while a trace is being collected
(``session`` is not None), spans of host time -- user annotations, and each ``jit``
trace and compile -- are appended as Chrome trace events. Nothing is recorded, and
nothing costs more than one attribute read, when no trace is running."""
from __future__ import annotations

import os
import threading
import time

session = None   # the running Session, or None


class Session:
    def __init__(self, log_dir, perfetto_trace):
        self.log_dir = os.fspath(log_dir)
        self.perfetto_trace = perfetto_trace
        self.start_ns = time.perf_counter_ns()
        self.wall_start = time.time()
        self.events = []
        self.thread_names = {}
        self.lock = threading.Lock()

    def add(self, name, start_ns, end_ns, args=None, category="annotation"):
        event = {"name": name, "cat": category, "ph": "X", "pid": os.getpid(),
                 "tid": threading.get_ident(), "ts": (start_ns - self.start_ns) / 1e3,
                 "dur": (end_ns - start_ns) / 1e3}
        if args:
            event["args"] = {k: v if isinstance(v, (int, float, bool, str)) else repr(v)
                             for k, v in args.items()}
        with self.lock:
            self.events.append(event)
            self.thread_names[event["tid"]] = threading.current_thread().name


def span(name, start_ns, args=None, category="annotation"):
    """Record ``[start_ns, now]`` as ``name`` in the running trace (if one runs)."""
    s = session
    if s is not None:
        s.add(name, start_ns, time.perf_counter_ns(), args, category)
