"""A small timing harness for fnx's micro-benchmarks.

A benchmark script builds, per workload, a dict ``{library name: zero-arg
callable}`` and hands the workloads to :func:`bench`. For each workload the
harness

1. warms every callable up (the first call compiles, for jit-style libraries;
   then it keeps calling for a few milliseconds so caches and branch
   predictors settle),
2. picks a batch size N per callable so that one batch of N calls takes about
   ``target_ms`` (default 3 ms, i.e. within the 2-5 ms band),
3. runs ``repeats`` rounds; in each round every library times one batch of N
   calls with ``time.perf_counter_ns`` (libraries interleaved round-robin, the
   starting library rotating from round to round, so drift of the machine
   affects all of them alike),
4. reports the median per-call time (batch time / N) over the rounds and its
   ratio to the baseline library (``"fnx"``) of the same workload.

The cost of the timing loop itself plus one call of an empty zero-arg
``lambda`` is measured the same way and subtracted (so the numbers are the
cost of the expression inside the lambda, as a user would write it); pass
``subtract_overhead=False`` (``--raw`` on the command line) to keep it.
The garbage collector is disabled while timing, as ``timeit`` does.

Optional libraries (JAX, PyTorch, ...) are found with :func:`optional_import`,
which returns ``None`` and records a note instead of raising when a library
is missing, so a script can leave those rows out and say why.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import itertools
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

__all__ = ["Result", "optional_import", "notes", "bench", "format_table", "machine_info",
           "dump_json", "arg_parser"]

_perf_ns = time.perf_counter_ns
_NOTES: list[str] = []


def import_fnx():
    """``fnx`` and ``fnx.numpy``, from the repo root when fnx is not installed."""
    try:
        import fnx
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import fnx
    import fnx.numpy as fnp
    return fnx, fnp


def optional_import(name: str, why: str = ""):
    """The module ``name`` if it can be imported, else ``None`` (and a note saying so)."""
    try:
        if importlib.util.find_spec(name.split(".")[0]) is None:
            raise ImportError(f"No module named {name!r}")
        return importlib.import_module(name)
    except Exception as e:  # ImportError, or a broken install raising something else
        note = f"{name} is not importable ({type(e).__name__}: {e}); {why or 'its rows'} skipped"
        if note not in _NOTES:
            _NOTES.append(note)
        return None


def notes() -> list[str]:
    """The notes recorded so far (skipped libraries)."""
    return list(_NOTES)


@dataclass
class Result:
    workload: str
    library: str
    median_ns: float          # median per-call time, overhead subtracted unless raw
    ratio: float | None       # median_ns / baseline median_ns of the same workload
    n: int                    # calls per timed batch
    repeats: int
    p25_ns: float
    p75_ns: float
    min_ns: float
    samples_ns: list[float] = field(repr=False, default_factory=list)

    @property
    def median_us(self):
        return self.median_ns / 1e3


# --- timing primitives -------------------------------------------------------------------

def _time_batch(fn, n: int) -> int:
    """Nanoseconds for ``n`` calls of ``fn``."""
    loop = itertools.repeat(None, n)
    t0 = _perf_ns()
    for _ in loop:
        fn()
    return _perf_ns() - t0


def _warm_up(fn, ms: float):
    fn()  # first call: compile / trace / fill caches
    deadline = _perf_ns() + ms * 1e6
    while _perf_ns() < deadline:
        for _ in range(10):
            fn()


def _calibrate(fn, target_ns: float) -> int:
    """Calls per batch so that a batch takes about ``target_ns``."""
    n = 1
    while True:
        t = _time_batch(fn, n)
        if t >= min(target_ns / 10, 2e5) or n >= 1 << 24:
            break
        n *= 2
    best = min(_time_batch(fn, n) for _ in range(3))  # least disturbed estimate
    return max(1, round(target_ns * n / max(best, 1)))


def _null():
    return None


# --- the benchmark driver ----------------------------------------------------------------

def bench(workloads: dict, *, baseline: str = "fnx", repeats: int = 51, warmup_ms: float = 10,
          target_ms: float = 3.0, subtract_overhead: bool = True, verbose: bool = False):
    """Time every workload; returns ``(results, overhead_ns)``.

    ``workloads``: ``{workload name: {library name: zero-arg callable}}``. The
    ratio column divides by the library named ``baseline`` in the same
    workload (or by the first library when that name is absent).
    """
    target_ns = target_ms * 1e6
    results: list[Result] = []
    gc_was_enabled = gc.isenabled()
    try:
        # Cost of the loop plus one call of an empty lambda, timed like the rest.
        _warm_up(_null, warmup_ms)
        n0 = _calibrate(_null, target_ns)
        gc.disable()
        overhead = statistics.median(_time_batch(_null, n0) / n0
                                     for _ in range(max(repeats, 11)))
        if not subtract_overhead:
            overhead_sub = 0.0
        else:
            overhead_sub = overhead
        for wname, libs in workloads.items():
            if verbose:
                print(f"  timing {wname} ...", file=sys.stderr, flush=True)
            gc.enable()
            gc.collect()
            names = list(libs)
            for name in names:
                _warm_up(libs[name], warmup_ms)
            gc.disable()
            ns = {name: _calibrate(libs[name], target_ns) for name in names}
            samples = {name: [] for name in names}
            k = len(names)
            for r in range(repeats):
                for j in range(k):  # round-robin, rotating the start
                    name = names[(r + j) % k]
                    n = ns[name]
                    samples[name].append(_time_batch(libs[name], n) / n - overhead_sub)
            base = baseline if baseline in libs else names[0]
            base_med = statistics.median(samples[base])
            for name in names:
                s = samples[name]
                q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0]] * 3
                med = statistics.median(s)
                results.append(Result(
                    workload=wname, library=name, median_ns=med,
                    ratio=med / base_med if base_med > 0 else None, n=ns[name],
                    repeats=repeats, p25_ns=q[0], p75_ns=q[2], min_ns=min(s), samples_ns=s))
    finally:
        if gc_was_enabled:
            gc.enable()
    return results, overhead


# --- reporting ---------------------------------------------------------------------------

def format_table(results, baseline: str = "fnx") -> str:
    """An aligned text table: workload, library, median µs, ratio to fnx, spread, N."""
    header = ("workload", "library", "median µs", f"ratio to {baseline}", "IQR µs",
              "calls/batch")
    rows = []
    last = None
    for r in results:
        rows.append((r.workload if r.workload != last else "", r.library,
                     f"{r.median_us:.3f}",
                     "" if r.ratio is None else f"{r.ratio:.2f}x",
                     f"{(r.p75_ns - r.p25_ns) / 1e3:.3f}", str(r.n)))
        last = r.workload
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    right = {2, 3, 4, 5}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    last = None
    for r, row in zip(results, rows):
        if last is not None and r.workload != last:
            out.append("")
        out.append(line(row))
        last = r.workload
    return "\n".join(out)


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count()}
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except ImportError:  # pragma: no cover
        pass
    return info


def dump_json(path: str, results, **extra):
    """Write the results (and ``extra`` keys) as JSON to ``path``."""
    doc = {"machine": machine_info(), **extra,
           "results": [{**asdict(r), "median_us": r.median_us} for r in results]}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
        f.write("\n")


def arg_parser(description: str) -> argparse.ArgumentParser:
    """The common command line: ``--json PATH``, ``--quick``, ``--repeats``, ``--raw``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    p.add_argument("--quick", action="store_true",
                   help="fewer rounds and shorter warm-up (a smoke run, a few seconds)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed rounds per library (default 51, 9 with --quick)")
    p.add_argument("--raw", action="store_true",
                   help="do not subtract the timing loop + empty-lambda call overhead")
    return p
