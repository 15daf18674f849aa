"""``fnx.profiler``, JAX's ``jax.profiler`` for the host: a trace of where a program's
time goes, written where TensorBoard's profile plugin and Perfetto look for it.

``start_trace(log_dir)`` ... ``stop_trace()`` (or ``with trace(log_dir):``) collects, from
every thread of the process:

- the spans of ``TraceAnnotation(name, **kwargs)`` blocks, ``StepTraceAnnotation(name,
  step_num=...)`` blocks and ``@annotate_function`` calls;
- each ``jit`` trace and compile (``trace f`` / ``compile f``), so recompilations show.

``stop_trace`` writes them as Chrome trace events (JSON, gzipped) to
``log_dir/plugins/profile/<date_time>/<host>.trace.json.gz``, and also to
``perfetto_trace.json.gz`` beside it with ``create_perfetto_trace=True``; open either in
https://ui.perfetto.dev or ``chrome://tracing``. There is no device timeline: fnx's
kernels and ufuncs run inside the spans of the host code that calls them. Annotations
cost one attribute read when no trace runs, so they can stay in training loops.
``ProfileOptions`` is accepted for JAX's signature (its tracer levels change nothing
here). JAX's profiler server and device memory profiles are not here."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import gzip
import json
import os
import socket
import threading
import time

from .core import profiling as _rec

__all__ = ["ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function",
           "start_trace", "stop_trace", "trace"]

_LOCK = threading.Lock()


@dataclasses.dataclass
class ProfileOptions:
    """JAX's profiler options (accepted; the host trace here has one level)."""
    host_tracer_level: int = 2
    python_tracer_level: int = 0
    enable_hlo_proto: bool = False
    include_dataset_ops: bool = True
    duration_ms: int = 0
    start_timestamp_ns: int = 0
    repository_path: str = ""
    session_id: str = ""
    raise_error_on_start_failure: bool = False
    advanced_configuration: dict = dataclasses.field(default_factory=dict)


def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
                profiler_options=None):
    """Start collecting a trace, to be written under ``log_dir`` by ``stop_trace``. One
    trace at a time, as in JAX (a RuntimeError otherwise)."""
    if profiler_options is not None and not isinstance(profiler_options, ProfileOptions):
        raise TypeError(f"start_trace: profiler_options must be a ProfileOptions, got "
                        f"{type(profiler_options).__name__}")
    with _LOCK:
        if _rec.session is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be "
                               "run at a time: call fnx.profiler.stop_trace() first.")
        _rec.session = _rec.Session(log_dir, create_perfetto_trace or create_perfetto_link)


def stop_trace():
    """Stop the running trace and write it (see the module's docstring); returns None."""
    with _LOCK:
        s = _rec.session
        if s is None:
            raise RuntimeError("No profile started: call fnx.profiler.start_trace(log_dir) "
                               "first.")
        _rec.session = None
    _write(s)


def _write(s):
    stamp = datetime.datetime.fromtimestamp(s.wall_start).strftime("%Y_%m_%d_%H_%M_%S")
    run_dir = os.path.join(s.log_dir, "plugins", "profile", stamp)
    os.makedirs(run_dir, exist_ok=True)
    pid = os.getpid()
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "fnx (host)"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": t, "args": {"name": n}}
             for t, n in sorted(s.thread_names.items())]
    text = json.dumps({"displayTimeUnit": "ms", "traceEvents": meta + s.events,
                       "metadata": {"start_time_unix": s.wall_start}}).encode()
    paths = [os.path.join(run_dir, f"{socket.gethostname()}.trace.json.gz")]
    if s.perfetto_trace:
        paths.append(os.path.join(run_dir, "perfetto_trace.json.gz"))
    for path in paths:
        with gzip.open(path, "wb") as f:
            f.write(text)


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False,
          profiler_options=None):
    """``start_trace`` on entry, ``stop_trace`` on exit (also when the block raises)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A named span of host time in the running trace (``with TraceAnnotation("load"):``);
    keyword arguments are shown with it. Costs one attribute read when no trace runs."""
    __slots__ = ("name", "kwargs", "_start")

    def __init__(self, name, **kwargs):
        self.name = name
        self.kwargs = kwargs
        self._start = None

    @staticmethod
    def is_enabled():
        """Whether a trace is being collected."""
        return _rec.session is not None

    def set_metadata(self, **kwargs):
        """More arguments to show with the span."""
        self.kwargs.update(kwargs)

    def __enter__(self):
        if _rec.session is not None:
            self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        if self._start is not None:
            _rec.span(self.name, self._start, self.kwargs)
            self._start = None
        return False


class StepTraceAnnotation(TraceAnnotation):
    """A training step's span: ``with StepTraceAnnotation("train", step_num=i):``."""
    __slots__ = ()


def annotate_function(func, name=None, **decorator_kwargs):
    """``func`` with each call recorded as a span named ``name`` (default: its qualified
    name); usable as ``@annotate_function`` or ``functools.partial(annotate_function,
    name=...)``."""
    label = name or getattr(func, "__qualname__", getattr(func, "__name__", "function"))

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with TraceAnnotation(label, **decorator_kwargs):
            return func(*args, **kwargs)
    return wrapper
