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
   calls with ``time.perf_counter_ns``, the libraries in a fresh (seeded)
   random order each round, so drift of the machine affects all of them alike
   and no library always runs right after the same other one (whose memory
   traffic leaves the caches colder for some successors than for others),
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

:func:`run_main` is a whole script's ``main(argv)``: the common command line
(plus ``--threads N``), thread limits and CPU pinning (undone afterwards),
building the workloads, :func:`check_results` before timing, :func:`bench`,
the goals, the printed report and the ``--json`` dump. A script supplies only
its workloads, their reference results and its goals.

A workload whose name ends in ``f64`` computes in float64: fnx, like JAX, narrows
64-bit inputs to 32 bits unless ``jax_enable_x64`` is on, so the harness turns the
flag on (:func:`x64_for`) around everything that runs such a workload's rows (its
check, its warm-up and its timing, outside the timed batches) and turns it back
off for the others; the report says which workloads ran with it.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.util
import itertools
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

__all__ = ["Result", "optional_import", "optional_torch", "notes", "bench", "format_table",
           "machine_info", "dump_json", "arg_parser", "limit_threads", "pin_cpus", "to_numpy",
           "check_results", "train_step_rows", "jit_train_step", "autograd_train_step",
           "check_train_step", "median_of", "status", "format_report", "run_main",
           "is_x64_workload", "x64_for"]

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
        if not any(n.startswith(f"{name} is not importable ") for n in _NOTES):
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
            with x64_for(wname):
                results.extend(_bench_one(wname, libs, baseline, repeats, warmup_ms,
                                          target_ns, overhead_sub))
    finally:
        if gc_was_enabled:
            gc.enable()
    return results, overhead


def _bench_one(wname, libs, baseline, repeats, warmup_ms, target_ns, overhead_sub):
    """The results of one workload (the collector is on at entry, off on return)."""
    results = []
    names = list(libs)
    for name in names:
        _warm_up(libs[name], warmup_ms)
    gc.disable()
    ns = {name: _calibrate(libs[name], target_ns) for name in names}
    samples = {name: [] for name in names}
    order = random.Random(len(names) * 7919 + repeats)
    for r in range(repeats):
        for name in order.sample(names, len(names)):
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
    return results


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


# --- float64 workloads -------------------------------------------------------------------

def is_x64_workload(wname: str) -> bool:
    """A workload named ``... f64`` computes in float64 (needs ``jax_enable_x64``)."""
    return wname.endswith(" f64")


@contextlib.contextmanager
def x64_for(wname: str):
    """``jax_enable_x64`` on while this runs if ``wname`` is a float64 workload (builders
    create its fnx arrays inside it, the harness runs its rows inside it); nothing
    otherwise. Toggling costs microseconds, so it wraps whole phases, never a timed call."""
    if not is_x64_workload(wname):
        yield
        return
    fnx, _ = import_fnx()
    with fnx.enable_x64(True):
        yield


# --- NumPy's BLAS kernels ----------------------------------------------------------------

def choose_openblas_kernels(how, workloads):
    """Apply ``--openblas-kernels``: ``(kernels before, a line for the report, a dict
    for the JSON)``; the kernels before (to restore afterwards) are None when NumPy's
    BLAS cannot be switched (the line says so). ``fastest`` times the ``fnx`` rows of
    ``workloads`` (one after the other) under each kernel set, as a user tuning for
    their own step would."""
    import_fnx()
    from fnx.backends import blas
    now = blas.openblas_kernels()
    if now is None:
        name, _config = blas.numpy_blas()
        return None, f"NumPy's BLAS: {name} (kernels not switchable; --openblas-kernels " \
                     f"ignored)", {"blas": name}
    picked = blas.picked_openblas_kernels()
    info = {"openblas_picked": picked, "openblas_choices": blas.openblas_kernel_choices()}
    if how == "picked":
        blas.use_openblas_kernels(picked)
        why = "the set OpenBLAS picked (--openblas-kernels picked)"
    elif how == "fastest":
        steps = [(w, rows["fnx"]) for w, rows in workloads.items() if "fnx" in rows]

        def run():
            for w, step in steps:
                with x64_for(w):
                    step()
        _best, times = blas.fastest_openblas_kernels(run)
        info["openblas_fastest_s"] = times
        why = ("fastest for the fnx step (" + ", ".join(
            f"{k} {v * 1e3:.2f} ms" for k, v in sorted(times.items(), key=lambda kv: kv[1]))
            + f"); OpenBLAS picked {picked}")
    else:
        blas.use_openblas_kernels(how)
        why = f"--openblas-kernels {how}; OpenBLAS picked {picked}"
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:  # OpenBLAS's "pick" was the environment's, not its own reading of the CPU
        info["openblas_coretype_env"] = forced
        why += f" (OPENBLAS_CORETYPE={forced} in the environment made that pick)"
    info["openblas_kernels"] = blas.openblas_kernels()
    return now, f"NumPy's OpenBLAS kernels: {info['openblas_kernels']}, {why}", info


# --- threads ---------------------------------------------------------------------------

_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")


def limit_threads(n):
    """Ask every library for ``n`` compute threads: BLAS / OpenMP through the
    environment (read when NumPy, PyTorch and XLA load, so call this first), and
    PyTorch's intra-op pool through :func:`optional_torch`. Returns a note when it
    came too late."""
    n = str(int(n))
    for var in _THREAD_VARS[:3]:
        os.environ[var] = n
    flags = os.environ.get("XLA_FLAGS", "")
    eigen = "false" if n == "1" else "true"
    os.environ["XLA_FLAGS"] = (f"{flags} --xla_cpu_multi_thread_eigen={eigen} "
                               f"intra_op_parallelism_threads={n}").strip()
    late = [m for m in ("numpy", "jax", "torch") if m in sys.modules]
    if late:
        return (f"--threads {n}: {', '.join(late)} already imported, its thread pool may not "
                f"follow (run the script in a fresh process)")
    return None


def pin_cpus(n):
    """Restrict this process to ``n`` of its CPUs, so that ``--threads n`` holds for
    JAX too: XLA:CPU sizes its intra-op thread pool from the affinity mask and no XLA
    flag caps it (unpinned, its jitted MLP step ran on 2 threads: about 1.8x the wall
    time in CPU time). The other libraries already run ``n`` threads. Returns the CPUs,
    or None where the mask cannot be set or already has at most ``n``. (A process that
    imported JAX earlier keeps the pool it made then.)"""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) <= n:
        return None
    os.sched_setaffinity(0, cpus[-n:])
    return cpus[-n:]


def optional_torch(why: str = ""):
    """``optional_import("torch")``, its intra-op pool set to ``$OMP_NUM_THREADS``."""
    torch = optional_import("torch", why)
    if torch is not None and os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    return torch


# --- checking results before timing -------------------------------------------------------

def to_numpy(v):
    """A NumPy array from an fnx / JAX / NumPy array, a torch tensor or a scalar."""
    import numpy as np
    if hasattr(v, "detach"):  # torch
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _leaf_pairs(got, want):
    """``(got leaf, want leaf)`` pairs, walking ``want``'s structure: dicts by its keys,
    tuples and lists item by item."""
    if isinstance(want, dict):
        return [pr for k in want for pr in _leaf_pairs(got[k], want[k])]
    if isinstance(want, (tuple, list)):
        got = list(got)
        if len(got) != len(want):
            raise ValueError(f"{len(got)} items, expected {len(want)}")
        return [pr for g, w in zip(got, want) for pr in _leaf_pairs(g, w)]
    return [(got, want)]


def check_results(workloads, references, *, rtol, atol, against="the reference"):
    """Every callable of a workload computes that workload's reference (same
    structure, shapes, and values to ``rtol``/``atol``), so that every row times the
    same computation. Raises AssertionError naming the workload and library."""
    import numpy as np
    for wname, libs in workloads.items():
        want = references[wname]
        for lib, fn in libs.items():
            try:
                with x64_for(wname):
                    got = fn()
                pairs = _leaf_pairs(got, want)
            except (KeyError, TypeError, ValueError) as e:
                raise AssertionError(f"{wname} / {lib}: result is not shaped like "
                                     f"{against} ({type(e).__name__}: {e})") from None
            for k, (g, w) in enumerate(pairs):
                g = to_numpy(g)
                if g.shape != np.shape(w):
                    raise AssertionError(f"{wname} / {lib}: result {k} has shape {g.shape}, "
                                         f"{against} {np.shape(w)}")
                if not np.allclose(g, w, rtol=rtol, atol=atol):
                    raise AssertionError(f"{wname} / {lib}: result {k} differs from {against} "
                                         f"by up to {np.max(np.abs(g - w)):.3g}")


# --- training-step workloads -------------------------------------------------------------

def train_step_rows(step_module, numpy_row, libs=None, reference=True):
    """``({STEP: rows}, {STEP: reference})`` of a training-step benchmark module: a
    step ``step(params dict, x, y) -> (new params, loss)`` on the module's float32 NumPy
    data (``make_data()``), and the reference: its ``numpy_step`` in float64.

    The module gives its logits per library, ``LOGITS = {"jit": f(np_, lax, p, x),
    "torch": f(torch, p, x), "autograd": f(autograd.numpy, p, x)}``, its parameter
    ``NAMES`` and learning rate ``LR``. Rows: ``fnx`` (``jit_train_step`` on fnx arrays),
    ``numpy_row`` (``numpy_step``), and when installed ``jax jit`` (``jit_train_step``,
    blocked on), ``torch (eager)`` (``torch_train_step``, int64 labels) and ``autograd``
    (``autograd_train_step`` on the NumPy arrays).
    ``libs``: build only the rows named there (``None``: every row), so that a
    process can hold one library's step alone (``benchmarks/run.py``'s memory
    measurement); ``reference=False``: the reference is None (not computed)."""
    m = step_module
    p, x, y = m.make_data()
    numpy_step = m.numpy_step
    import numpy as np

    def want(name):
        return libs is None or name in libs
    w = {}
    if want("fnx"):
        fnx, fnp = import_fnx()
        pf = {k: fnp.asarray(v) for k, v in p.items()}
        xf, yf = fnp.asarray(x), fnp.asarray(y)
        step_fnx = jit_train_step(fnx, fnp, m.LOGITS["jit"], m.NAMES, m.LR)
        w["fnx"] = lambda: step_fnx(pf, xf, yf)
    if want(numpy_row):
        w[numpy_row] = lambda: numpy_step(p, x, y)
    jax = optional_import("jax", "JAX row") if want("jax jit") else None
    if jax is not None:
        jnp = optional_import("jax.numpy")
        pj = {k: jnp.asarray(v) for k, v in p.items()}
        xj, yj = jnp.asarray(x), jnp.asarray(y)
        step_jax = jit_train_step(jax, jnp, m.LOGITS["jit"], m.NAMES, m.LR)
        w["jax jit"] = lambda: jax.block_until_ready(step_jax(pj, xj, yj))
    torch = optional_torch("PyTorch row") if want("torch (eager)") else None
    if torch is not None:
        pt = {k: torch.from_numpy(v.copy()) for k, v in p.items()}
        xt, yt = torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))
        step_torch = torch_train_step(torch, m.LOGITS["torch"], m.NAMES, m.LR)
        w["torch (eager)"] = lambda: step_torch(pt, xt, yt)
    ag = optional_import("autograd", "HIPS autograd row") if want("autograd") else None
    if ag is not None:
        step_ag = autograd_train_step(ag, optional_import("autograd.numpy"),
                                      m.LOGITS["autograd"], m.NAMES, m.LR)
        w["autograd"] = lambda: step_ag(p, x, y)
    if not reference:
        return {m.STEP: w}, {m.STEP: None}
    p64 = {k: v.astype(np.float64) for k, v in p.items()}
    return {m.STEP: w}, {m.STEP: numpy_step(p64, x.astype(np.float64), y)}


def jit_train_step(lib, np_, logits, names, lr):
    """``lib.jit`` (``lib``: fnx or jax, ``np_`` its numpy) of a training step: softmax
    cross-entropy of ``logits(np_, lib.lax, params, x)`` against integer labels (the
    log-sum-exp written out, its max under ``stop_gradient``), ``lib.value_and_grad``
    and the SGD update ``p - lr * g`` of the params ``names``; returns the new params
    and the loss."""
    def loss(p, x, y):
        z = logits(np_, lib.lax, p, x)
        m = lib.lax.stop_gradient(np_.max(z, axis=1, keepdims=True))
        lse = np_.log(np_.sum(np_.exp(z - m), axis=1)) + m[:, 0]
        picked = np_.take_along_axis(z, y[:, None], axis=1)[:, 0]
        return np_.mean(lse - picked)

    @lib.jit
    def step(p, x, y):
        val, g = lib.value_and_grad(loss)(p, x, y)
        return {k: p[k] - lr * g[k] for k in names}, val
    return step


def torch_train_step(torch, logits, names, lr):
    """The same training step in PyTorch eager: ``F.cross_entropy`` of
    ``logits(torch, params, x)``, ``backward()`` and the update under ``no_grad``."""
    cross_entropy = torch.nn.functional.cross_entropy

    def step(p, x, y):
        q = {k: v.detach().requires_grad_(True) for k, v in p.items()}
        loss = cross_entropy(logits(torch, q, x), y)
        loss.backward()
        with torch.no_grad():
            return {k: q[k] - lr * q[k].grad for k in names}, loss.detach()
    return step


def autograd_train_step(ag, agnp, logits, names, lr):
    """The same training step with HIPS autograd (no jit): ``logits(agnp, params, x)``,
    the label logit picked by fancy indexing (``autograd.numpy`` differentiates it)."""
    def loss(p, x, y):
        z = logits(agnp, p, x)
        m = agnp.max(z, axis=1, keepdims=True)
        lse = agnp.log(agnp.sum(agnp.exp(z - m), axis=1)) + m[:, 0]
        return agnp.mean(lse - z[agnp.arange(x.shape[0]), y])

    vg = ag.value_and_grad(loss)

    def step(p, x, y):
        val, g = vg(p, x, y)
        return {k: p[k] - lr * g[k] for k in names}, val
    return step


def check_train_step(workloads, references):
    """Every row of a training step computes the reference (new parameters and loss)."""
    check_results(workloads, references, rtol=2e-4, atol=2e-5,
                  against="the hand-written NumPy step")


# --- goals and the report -----------------------------------------------------------------

def median_of(results, workload, library):
    """The median (ns) of one row, or None when that row did not run."""
    for r in results:
        if r.workload == workload and r.library == library:
            return r.median_ns
    return None


def status(passed, fail="FAIL"):
    return {True: "PASS", False: fail, None: "SKIP"}[passed]


def _version(mod):
    v = getattr(sys.modules[mod], "__version__", None)
    if v is None:
        try:
            from importlib.metadata import version
            v = version(mod)
        except Exception:
            v = "?"
    return v


def format_report(title, results, overhead_ns, goal_rows, *, raw=False, threads=None,
                  pinned=None, fail="FAIL", late=None, sections=(), blas=None, x64=()):
    """The printed report: machine and library versions, how it measured, the threads
    (``threads=None``: the script has no ``--threads``), ``blas`` (a line on NumPy's
    BLAS kernels, from :func:`choose_openblas_kernels`), the table, ``sections`` (more
    text blocks, measured outside :func:`bench`), ``x64`` (the float64 workloads, run with
    ``jax_enable_x64`` on), notes, the goals
    (``{"goal", "measured", "passed"}`` rows; ``passed`` None prints SKIP)."""
    m = machine_info()
    vers = [f"NumPy {m.get('numpy', '?')}"] + [f"{mod} {_version(mod)}"
                                                for mod in ("autograd", "jax", "torch")
                                                if mod in sys.modules]
    lines = [f"fnx {title} benchmark — {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             + ", ".join(vers),
             f"median per-call time over {results[0].repeats if results else 0} interleaved "
             f"rounds; timing loop + empty-lambda call ({overhead_ns:.0f} ns) "
             + ("NOT subtracted (--raw)" if raw else "subtracted"),
             "ratio to fnx = time / fnx time of the same workload (<1: faster than fnx)"]
    if threads is not None:
        lines.append("compute threads per library: "
                     + (f"{threads} (--threads {threads})" if threads
                        else "each library's default (--threads 0)")
                     + (f"; process pinned to CPU {', '.join(map(str, pinned))} (XLA's pool "
                        "follows the affinity mask, not its flags)" if pinned else ""))
    if blas:
        lines.append(blas)
    if x64:
        lines.append("jax_enable_x64: on for the float64 workloads (" + "; ".join(x64)
                     + "), as JAX's rows; off (fnx's default) for the others")
    if results:
        lines += ["", format_table(results)]
    for sec in sections:
        lines += ["", sec]
    if notes():
        lines += [""] + [f"note: {s}" for s in notes()]
    lines += ["", "goals:"]
    lines += [f"  [{status(g['passed'], fail)}] {g['goal']}: {g['measured']}" for g in goal_rows]
    if late:
        lines.append(f"note: {late}")
    return "\n".join(lines)


# --- a script's main() ----------------------------------------------------------------------

def run_main(argv, doc, name, title, build, check, goals, *, target_ms=3.0, extra_args=None,
             threads=True, fail="FAIL", after=None, tune_blas=False):
    """A benchmark script's ``main(argv)``; returns ``{"results", "overhead_ns", "goals"}``.

    ``doc``: the script's docstring (its first paragraph is the ``--help`` text);
    ``name``: the ``benchmark`` field of the JSON; ``title``: the report's first line
    (``fnx {title} benchmark``); ``build(args) -> (workloads, references)``;
    ``check(workloads, references)`` raises when a row computes something else (see
    :func:`check_results`); ``goals(results)`` gives ``{"goal", "measured", "passed"}``
    rows; ``extra_args(parser)`` adds script-specific arguments; ``threads=False``
    leaves out ``--threads``; ``fail`` is the word printed for a missed goal;
    ``after(args)``, called after the timing (threads still set) and before ``goals``,
    measures what the interleaved harness does not and returns ``{"sections": [text
    blocks for the report], "json": {extra JSON keys}}`` (also returned, as "extra").

    ``--openblas-kernels`` picks the kernel set of NumPy's OpenBLAS for the run (and
    restores it): with ``tune_blas`` (a one-workload training step) the default is
    ``fastest``, the fnx step timed under each set, as a user tuning for that model
    would (:func:`fnx.backends.blas.fastest_openblas_kernels`); without, ``picked``
    (OpenBLAS's own pick: one set for workloads whose best sets differ).

    With ``--threads N`` (default 1; 0: each library's own) the thread variables are
    set before the libraries load (:func:`limit_threads`) and the process is pinned
    to N CPUs (:func:`pin_cpus`); both are undone when it returns, so a test process
    can call ``main`` and carry on.
    """
    p = arg_parser(doc.split("\n\n")[0])
    if threads:
        p.add_argument("--threads", type=int, default=1, metavar="N",
                       help="compute threads for every library (BLAS, OpenMP, XLA, PyTorch), "
                            "and the process pinned to N CPUs; default 1 (steady on a small "
                            "shared machine); 0: each library's own default, no pinning")
    default = "fastest" if tune_blas else "picked"
    p.add_argument("--openblas-kernels", default=default, metavar="NAME",
                   help="the kernel set NumPy's OpenBLAS runs (NumPy's matmuls, so fnx's "
                        "and the NumPy rows'): 'fastest' (the fnx rows timed under each set "
                        "the CPU can run, see fnx.backends.blas), 'picked' (the one OpenBLAS "
                        f"picked when it loaded) or a name such as Haswell; default {default}")
    if extra_args is not None:
        extra_args(p)
    args = p.parse_args(argv)
    n = args.threads if threads else None
    env = {k: os.environ.get(k) for k in _THREAD_VARS}
    mask = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    late = limit_threads(n) if n else None
    pinned = pin_cpus(n) if n else None
    kernels_before = None
    try:
        repeats = args.repeats or (9 if args.quick else 51)
        workloads, refs = build(args)
        check(workloads, refs)
        kernels_before, blas_line, blas_json = choose_openblas_kernels(args.openblas_kernels,
                                                                      workloads)
        results, overhead = bench(workloads, repeats=repeats, warmup_ms=2 if args.quick else 20,
                                  target_ms=target_ms, subtract_overhead=not args.raw)
        more = after(args) if after is not None else {}
        goal_rows = goals(results)
        x64 = [w for w in workloads if is_x64_workload(w)]
        print(format_report(title, results, overhead, goal_rows, raw=args.raw, threads=n,
                            pinned=pinned, fail=fail, late=late,
                            sections=more.get("sections", ()), blas=blas_line, x64=x64))
        if args.json:
            extra = {} if n is None else {"threads": n, "pinned_cpus": pinned}
            extra["x64_workloads"] = x64
            dump_json(args.json, results, benchmark=name, overhead_ns=overhead,
                      overhead_subtracted=not args.raw, **extra, **blas_json,
                      **more.get("json", {}),
                      goals=goal_rows, notes=notes() + ([late] if late else []))
        out = {"results": results, "overhead_ns": overhead, "goals": goal_rows}
        if after is not None:
            out["extra"] = more
        return out
    finally:
        if kernels_before is not None:
            from fnx.backends import blas
            blas.use_openblas_kernels(kernels_before)
        if pinned:
            os.sched_setaffinity(0, mask)
        if n:
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
