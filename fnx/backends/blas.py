"""NumPy's BLAS, fnx's matmul engine on CPU: which OpenBLAS kernels it runs, and a switch.

Every fnx matmul (eager or jitted) ends in NumPy's ``matmul``, so on CPU a training
step runs at the speed of NumPy's BLAS. NumPy's wheels ship OpenBLAS built for many
x86 CPUs at once (``DYNAMIC_ARCH``); when it loads, it picks one kernel set from the
CPU's id, and the pick is not always the fastest. On an AMD EPYC (Zen 4) it picks the
AVX-512 ``SkylakeX`` kernels; there its AVX2 ``Haswell`` kernels ran float32 GEMMs of
a training step's shapes 5-9% faster (float64 GEMMs 0-6% slower). OpenBLAS reads
``OPENBLAS_CORETYPE`` from the environment only when it loads; these functions switch
the kernels at run time, after NumPy is imported:

* :func:`openblas_kernels`: the kernel set in use (None when NumPy does not run an
  OpenBLAS whose kernels can be switched);
* :func:`picked_openblas_kernels`: the one OpenBLAS picked when it loaded;
* :func:`openblas_kernel_choices`: the kernel sets this CPU can run;
* :func:`use_openblas_kernels`: switch to one, returning the previous one;
* :func:`fastest_openblas_kernels`: time the choices on your step (or on GEMMs) and
  keep the fastest.

The switch is process-wide: it changes NumPy's own matmuls too (their speed, and the
rounding of their sums, as any other BLAS would). Switch when no other thread is inside
a BLAS call. Choices never go past the kernel set OpenBLAS picked for this CPU (nor the
one ``OPENBLAS_CORETYPE`` forced at start-up): older kernel sets use a subset of the
newer ones' instructions, newer ones could fault on a CPU without them.
"""
from __future__ import annotations

import ctypes
import glob
import math
import os
import threading
import time

import numpy as np

# x86-64 kernel sets in OpenBLAS, each using a superset of the instructions of the ones
# before it (from SSE4.2's Nehalem; older sets are not offered). ``Zen`` (OpenBLAS's
# name for AMD Zen 1-3) runs at Haswell's level.
_X86_LEVELS = ("Nehalem", "Sandybridge", "Haswell", "SkylakeX", "Cooperlake", "SapphireRapids")
_SAME_LEVEL = {"zen": "haswell"}
# Timed by ``fastest_openblas_kernels`` unless told otherwise: a training step's GEMMs
# (batch 128 through 784- and 512-wide layers: forward, the input gradient against a
# transposed weight, the weight gradient against a transposed activation).
DEFAULT_SHAPES = ((128, 784, 512), (128, 512, 512), (512, 128, 512))
# Multiply-adds a timed shape stands for (smaller products are repeated up to it).
_ROUND_WORK = math.prod(DEFAULT_SHAPES[0])
# A timed round calls the workload at least this long.
_MIN_ROUND_S = 0.01

_lock = threading.Lock()
_state = {}  # "lib": the CDLL or None, "picked": the kernel set in use when first looked at


def numpy_blas():
    """NumPy's build record of its BLAS: ``(name, OpenBLAS configuration string)``, e.g.
    ``("scipy-openblas", "OpenBLAS 0.3.31 ... DYNAMIC_ARCH ...")`` (the string is empty
    for other BLAS libraries)."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except Exception:  # an old NumPy or an unusual build: no record
        return "unknown", ""
    return str(blas.get("name", "unknown")), str(blas.get("openblas configuration", ""))


def _loaded_openblas_paths():
    """Files of OpenBLAS libraries this process has loaded (Linux), else those shipped
    next to NumPy (its wheels' ``numpy.libs`` / ``.dylibs``)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {parts[5].strip() for parts in (ln.split(None, 5) for ln in f)
                     if len(parts) == 6}
        found = sorted(p for p in paths if "openblas" in os.path.basename(p).lower())
        if found:
            return found
    except OSError:
        pass
    here = os.path.dirname(np.__file__)
    pats = [os.path.join(here, ".dylibs", "*openblas*"),
            os.path.join(here, os.pardir, "numpy.libs", "*openblas*")]
    return sorted({p for pat in pats for p in glob.glob(pat)})


def _config_of(lib):
    for sym in ("scipy_openblas_get_config64_", "scipy_openblas_get_config",
                "openblas_get_config64_", "openblas_get_config"):
        fn = getattr(lib, sym, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            fn.argtypes = []
            return (fn() or b"").decode(errors="replace")
    return ""


def _without_core(config):
    """An OpenBLAS configuration string without its kernel-set word (it names the CPU
    of the build in NumPy's record, the one in use at run time)."""
    words = {n.lower() for n in _X86_LEVELS} | set(_SAME_LEVEL)
    return " ".join(w for w in config.split() if w.lower() not in words)


def _library():
    """NumPy's OpenBLAS as a ctypes library with switchable kernels, or None."""
    if "lib" in _state:
        return _state["lib"]
    name, numpy_config = numpy_blas()
    lib = None
    if "openblas" in name.lower():
        libs = []
        for path in _loaded_openblas_paths():
            try:
                cand = ctypes.CDLL(path)
            except OSError:
                continue
            if all(hasattr(cand, s) for s in ("gotoblas_dynamic_init", "gotoblas_dynamic_quit",
                                              "gotoblas_corename")):
                libs.append(cand)
        if len(libs) > 1 and numpy_config:  # e.g. SciPy's own OpenBLAS loaded too
            libs = [c for c in libs
                    if _without_core(_config_of(c)) == _without_core(numpy_config)]
        if len(libs) == 1:
            lib = libs[0]
            lib.gotoblas_corename.restype = ctypes.c_char_p
            lib.gotoblas_corename.argtypes = []
            lib.gotoblas_dynamic_init.restype = None
            lib.gotoblas_dynamic_quit.restype = None
    _state["lib"] = lib
    if lib is not None:
        _state["picked"] = _corename(lib)
    return lib


def _corename(lib):
    return lib.gotoblas_corename().decode()


def _level(name):
    n = name.lower()
    n = _SAME_LEVEL.get(n, n)
    for i, level in enumerate(_X86_LEVELS):
        if level.lower() == n:
            return i
    return None


def _require():
    lib = _library()
    if lib is None:
        name, config = numpy_blas()
        raise RuntimeError(
            f"fnx.backends.blas: NumPy's BLAS is {name!r}"
            + (f" ({config})" if config else "")
            + ", not an OpenBLAS built for several CPUs (DYNAMIC_ARCH) that fnx could find "
            "in this process; its kernels cannot be switched at run time. Install NumPy's "
            "wheel from PyPI (it ships such an OpenBLAS), or leave the kernels as they are.")
    return lib


def openblas_kernels():
    """The name of the OpenBLAS kernel set NumPy's matmuls run now (e.g. ``"Haswell"``,
    ``"SkylakeX"``), or None when NumPy's BLAS is not a switchable OpenBLAS."""
    lib = _library()
    return None if lib is None else _corename(lib)


def picked_openblas_kernels():
    """The kernel set OpenBLAS picked when it loaded (or ``OPENBLAS_CORETYPE`` forced),
    whatever was switched since; None when NumPy's BLAS is not a switchable OpenBLAS."""
    return None if _library() is None else _state["picked"]


def openblas_kernel_choices():
    """The kernel sets :func:`use_openblas_kernels` accepts here, oldest first: the
    one OpenBLAS picked for this CPU and the older x86 ones built into the library
    (``[]`` when the kernels cannot be switched)."""
    lib = _library()
    if lib is None:
        return []
    picked = _state["picked"]
    top = _level(picked)
    if top is None:  # not an x86 kernel set fnx knows: only the one picked
        return [picked]
    out = [n for n in _X86_LEVELS[:top + 1] if hasattr(lib, f"gotoblas_{n.upper()}")]
    if picked not in out:
        out.append(picked)
    return out


def use_openblas_kernels(name):
    """Switch NumPy's OpenBLAS to the kernel set ``name`` (one of
    :func:`openblas_kernel_choices`, any letter case) for the whole process; returns
    the name of the set in use before. Call it when no other thread is inside a BLAS
    call."""
    lib = _require()
    choices = openblas_kernel_choices()
    want = next((c for c in choices if c.lower() == str(name).lower()), None)
    if want is None:
        raise ValueError(
            f"fnx.backends.blas.use_openblas_kernels: no kernel set {name!r} for this CPU; "
            f"choices here are {choices} (OpenBLAS picked {_state['picked']!r} when it "
            f"loaded; newer sets than that one are not offered)")
    with _lock:
        before = _corename(lib)
        if before.lower() != want.lower():
            _switch(lib, want)
            now = _corename(lib)
            if _level(now) != _level(want):
                _switch(lib, before)
                raise RuntimeError(
                    f"fnx.backends.blas.use_openblas_kernels: OpenBLAS ran {now!r} when "
                    f"asked for {want!r}; switched back to {before!r}")
    return before


def _switch(lib, name):
    """OpenBLAS's own start-up selection, run again with ``OPENBLAS_CORETYPE=name``
    (``gotoblas_dynamic_quit`` forgets the kernel table, ``gotoblas_dynamic_init``
    picks one and sets its blocking parameters); the environment is restored."""
    old = os.environ.get("OPENBLAS_CORETYPE")
    os.environ["OPENBLAS_CORETYPE"] = name
    try:
        lib.gotoblas_dynamic_quit()
        lib.gotoblas_dynamic_init()
    finally:
        if old is None:
            del os.environ["OPENBLAS_CORETYPE"]
        else:
            os.environ["OPENBLAS_CORETYPE"] = old


def fastest_openblas_kernels(run=None, *, dtype=np.float32, shapes=DEFAULT_SHAPES,
                             rounds=5, candidates=None):
    """Time the kernel sets and switch to the fastest; returns ``(name, {name:
    seconds})``, seconds being the best round's time.

    ``run``: a zero-argument callable to time, best your own training step (called a
    few times per round; its results are dropped). Which set wins depends on the whole
    step, not only its largest matmuls: on the Zen 4 above, Haswell's kernels won the
    MLP step's GEMMs and the MLP step, won an RNN's GEMMs timed alone, and lost that
    RNN's step by 14%. Without ``run``: GEMMs of ``shapes``, ``(m, k, n)`` triples,
    each timed as ``a @ b`` and ``c @ b.T`` (``a`` m x k, ``b`` k x n, ``c`` m x n) in
    ``dtype``, a small product repeated to weigh as much as a 128x784x512 one.
    ``candidates``: the sets to try (default: those of :func:`openblas_kernel_choices`
    from Haswell's level up, or only the one in use when OpenBLAS picked an older set).
    The candidates take turns within each round so that a drifting machine treats
    them alike; round 0 only warms up."""
    lib = _require()
    if candidates is None:
        choices = openblas_kernel_choices()
        floor = _level("Haswell")
        candidates = [c for c in choices if (_level(c) or 0) >= floor] or [_corename(lib)]
    candidates = list(dict.fromkeys(candidates))
    if run is None:
        run = _gemm_workload(dtype, shapes)
    calls = 1
    best = {c: float("inf") for c in candidates}
    start = _corename(lib)
    try:
        for r in range(rounds + 1):
            for cand in candidates:
                use_openblas_kernels(cand)
                t0 = time.perf_counter()
                for _ in range(calls):
                    run()
                t = time.perf_counter() - t0
                if r:
                    best[cand] = min(best[cand], t / calls)
                elif t < _MIN_ROUND_S:  # round 0 also sizes the rounds
                    calls = max(calls, math.ceil(_MIN_ROUND_S / max(t, 1e-6)))
    except BaseException:
        use_openblas_kernels(start)
        raise
    winner = min(candidates, key=best.__getitem__)
    use_openblas_kernels(winner)
    return winner, best


def _gemm_workload(dtype, shapes):
    rng = np.random.default_rng(0)
    mats = []
    for m, k, n in shapes:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        c = rng.standard_normal((m, n)).astype(dtype)
        mats.append((a, b, c, max(1, round(_ROUND_WORK / max(m * k * n, 1)))))

    def run():
        for a, b, c, reps in mats:
            for _ in range(reps):
                np.matmul(a, b)
                np.matmul(c, b.T)
    return run
