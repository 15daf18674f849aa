"""Every fnx benchmark workload in one run, next to hand-written NumPy and, when they
are installed, JAX (jit), PyTorch (eager) and HIPS autograd; one table, every goal.

    python benchmarks/run.py [--only NAME ...] [--json out.json] [--quick] [--threads N]
                             [--repeats N] [--raw]

Workloads (``--only`` takes these names; default: all):

* ``dispatch``: eager ``fnp.add`` and a jitted ``x * 2 + 1`` on (8,) float32
  (``dispatch.py``'s rows);
* ``eager_chain``: 50 mixed elementwise ops (add, mul, tanh, exp of small values, sub,
  maximum, sqrt of abs) on (100,) float32, no jit, in every library's eager mode;
* ``mlp``, ``cnn``, ``rnn``: the jitted training steps of ``mlp_step.py``,
  ``cnn_step.py`` (two rows: pooling by ``reduce_window``, and the common way, by
  reshape and ``max``), ``rnn_step.py``;
* ``elementwise``: ``gelu(x) * w + layernorm(x)`` over (4096, 1024) float32 under
  ``fnx.jit``; the floor is NumPy by hand with in-place ops; and ``selu`` over 1M float32
  elements, jitted and eager (with a C++ compiler both jitted ones are native loops);
* ``compile``: first call (trace + compile + run) and steady call of
  ``jit(value_and_grad)`` of a 50-layer tanh MLP of width 256, a fresh function per
  measurement (not the interleaved harness: a few repetitions, median);
* ``rosenbrock``, ``per_example``: ``grad.py``'s eager Rosenbrock gradient and
  jitted per-example gradients;
* ``memory``: peak resident-set growth of the MLP and CNN steps, one subprocess per
  library (VmHWM reset through ``/proc/self/clear_refs`` after the data is built, then
  the first and some steady calls; growth = VmHWM - VmRSS before the first call).

Every timed row is checked against its workload's reference before timing (as in the
other scripts). Goals print under the table with PASS / FAIL, against the library
measured in the same run, else the anchor figure for the 2-core reference machine.
Importing this module runs nothing; ``main(["--quick", "--only", "dispatch"])`` is a
smoke run. See benchmarks/README.md.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))

if __package__:
    from . import _harness as H
    from . import cnn_step, dispatch, grad, mlp_step, rnn_step
else:  # run as a script, or loaded by file path
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    import _harness as H
    import cnn_step
    import dispatch
    import grad
    import mlp_step
    import rnn_step

# Goals (from the issue) and the anchors used when the compared library is missing.
JIT_CALL_NS = 4_000            # jitted x*2+1 on (8,)
EAGER_OP_NS = 3_600            # eager fnp.add on (8,)
EAGER_CHAIN_NS = 50_000        # 50 eager elementwise ops on (100,)
COMPILE_FIRST_S = 0.08         # first call of jit(value_and_grad) of the 50-layer MLP
ROSEN_NS = 100_000             # eager Rosenbrock gradient
MLP_VS_NUMPY = 1.1
ELEMENTWISE_VS_NUMPY = 1.1

ADD, JIT = "add (8,) f32", "jit x*2+1 (8,) f32"
CHAIN = "eager chain 50 ops (100,) f32"
CHAIN_N, CHAIN_BLOCKS = 100, 5
ELEM = "gelu(x)*w + layernorm(x) (4096,1024) f32"
SELU = "selu (1048576,) f32"
ELEM_SHAPE = (4096, 1024)


def _last_level_cache_bytes():
    """The CPU's largest cache (Linux's sysfs), or 0 where it does not say."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for entry in (os.listdir(base) if os.path.isdir(base) else ()):
        try:
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=0)


# The machine's memory bandwidth: a copy whose source and destination are each at least 8
# times the largest cache (and 256 MiB), so it streams from memory. A copy of the
# workload's own size (2 x 16 MiB) is timed too: on a CPU with a 32 MiB L3 it runs from
# the cache, about 1.7 times faster than from memory.
MEMORY_COPY_ELEMS = max(256 << 20, 8 * _last_level_cache_bytes()) // 4
COPY = f"np.copyto ({MEMORY_COPY_ELEMS},) f32 (memory bandwidth)"
COPY_SPLIT = f"np.copyto ({MEMORY_COPY_ELEMS},) f32, a slice per CPU (memory bandwidth)"
COPY_SMALL = "np.copyto (4096,1024) f32 (the workload's bytes)"
DEPTH, WIDTH, DEEP_BATCH = 50, 256, 32

NAMES = ("dispatch", "eager_chain", "mlp", "cnn", "rnn", "elementwise", "compile",
         "rosenbrock", "per_example", "memory")


# --- eager chain --------------------------------------------------------------------------

def chain(ns, x, y):
    """50 elementwise ops: 5 blocks of add, mul, tanh, mul, exp, sub, maximum, abs, sqrt,
    add. ``ns`` is the library's namespace (fnx.numpy, numpy, jax.numpy, torch, ...)."""
    for _ in range(CHAIN_BLOCKS):
        a = (x + y) * 0.5
        a = ns.tanh(a)
        a = a - ns.exp(a * 0.1)
        a = ns.sqrt(ns.abs(ns.maximum(a, y)))
        x = a + x
    return x


def build_eager_chain(W, R, mods):
    import numpy as np
    fnx, fnp = H.import_fnx()
    rng = np.random.default_rng(0)
    a = rng.standard_normal(CHAIN_N).astype(np.float32)
    b = rng.standard_normal(CHAIN_N).astype(np.float32)
    x, y = fnp.asarray(a), fnp.asarray(b)
    w = W[CHAIN] = {"fnx": lambda: chain(fnp, x, y), "numpy": lambda: chain(np, a, b)}
    R[CHAIN] = chain(np, a.astype(np.float64), b.astype(np.float64))
    if mods["torch"] is not None:
        torch = mods["torch"]
        xt, yt = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        w["torch (eager)"] = lambda: chain(torch, xt, yt)
    if mods["jnp"] is not None:
        jnp = mods["jnp"]
        xj, yj = jnp.asarray(a), jnp.asarray(b)
        w["jax (eager, no jit)"] = lambda: chain(jnp, xj, yj).block_until_ready()
    if mods["agnp"] is not None:
        agnp = mods["agnp"]
        w["autograd.numpy"] = lambda: chain(agnp, a, b)


# --- elementwise-heavy --------------------------------------------------------------------

_C = 0.7978845608028654  # sqrt(2 / pi)


def gelu_ln(ns, x, w):
    """tanh-GELU(x) * w + layernorm(x) over the last axis (no affine, eps 1e-5)."""
    g = 0.5 * x * (1.0 + ns.tanh(_C * (x + 0.044715 * x * x * x)))
    d = x - ns.mean(x, axis=-1, keepdims=True)
    var = ns.mean(d * d, axis=-1, keepdims=True)
    return g * w + d / ns.sqrt(var + 1e-5)


def gelu_ln_numpy_inplace(x, w):
    """The same by hand: two fresh arrays, every other op in place (the floor)."""
    import numpy as np
    g = x * x
    g *= x
    g *= 0.044715
    g += x
    g *= _C
    np.tanh(g, out=g)
    g += 1.0
    g *= x
    g *= 0.5
    g *= w
    d = x - x.mean(-1, keepdims=True)
    var = np.einsum("ij,ij->i", d, d)
    var /= x.shape[-1]
    var += 1e-5
    np.sqrt(var, out=var)
    np.divide(1.0, var, out=var)
    d *= var[:, None]
    g += d
    return g


def _selu_float64(np, x):
    x = x.astype(np.float64)
    return 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))


def build_elementwise(W, R, mods):
    import numpy as np
    fnx, fnp = H.import_fnx()
    rng = np.random.default_rng(0)
    a = rng.standard_normal(ELEM_SHAPE).astype(np.float32)
    v = rng.standard_normal(ELEM_SHAPE[-1]).astype(np.float32)
    x, wf = fnp.asarray(a), fnp.asarray(v)
    f_fnx = fnx.jit(lambda x, w: gelu_ln(fnp, x, w))
    w = W[ELEM] = {"fnx": lambda: f_fnx(x, wf),
                   "numpy in place (by hand)": lambda: gelu_ln_numpy_inplace(a, v)}
    R[ELEM] = gelu_ln(np, a.astype(np.float64), v.astype(np.float64))
    # the machine's memory bandwidth in the same run: a large copy (bytes read + written)
    big = np.ones(MEMORY_COPY_ELEMS, np.float32)
    big_dst = np.empty_like(big)
    W[COPY] = {"numpy": lambda: (np.copyto(big_dst, big), big_dst)[1]}
    R[COPY] = big
    # the same copy on every CPU the process may use (--threads N pins it to N), a slice
    # each, in case one thread does not reach the memory's bandwidth
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if cpus > 1:
        from concurrent.futures import ThreadPoolExecutor
        pool = ThreadPoolExecutor(cpus)
        cuts = [MEMORY_COPY_ELEMS * k // cpus for k in range(cpus + 1)]
        slices = [slice(lo, hi) for lo, hi in zip(cuts, cuts[1:])]

        def split_copy():
            for _ in pool.map(lambda s: np.copyto(big_dst[s], big[s]), slices):
                pass
            return big_dst
        W[COPY_SPLIT] = {"numpy": split_copy}
        R[COPY_SPLIT] = big
    dst = np.empty_like(a)
    W[COPY_SMALL] = {"numpy": lambda: (np.copyto(dst, a), dst)[1]}
    R[COPY_SMALL] = a
    if mods["jax"] is not None:
        jax, jnp = mods["jax"], mods["jnp"]
        xj, wj = jnp.asarray(a), jnp.asarray(v)
        f_jax = jax.jit(lambda x, w: gelu_ln(jnp, x, w))
        w["jax jit"] = lambda: f_jax(xj, wj).block_until_ready()
    # selu over 1M elements: jit against eager (no jitted function slower than its eager
    # run) and JAX's jit
    s_np = rng.standard_normal(1 << 20).astype(np.float32)
    s_fnx = fnp.asarray(s_np)
    selu_jit = fnx.jit(fnx.nn.selu)
    ws = W[SELU] = {"fnx": lambda: selu_jit(s_fnx), "fnx eager": lambda: fnx.nn.selu(s_fnx)}
    R[SELU] = _selu_float64(np, s_np)
    if mods["jax"] is not None:
        jax = mods["jax"]
        s_jax, selu_jax = jax.numpy.asarray(s_np), jax.jit(jax.nn.selu)
        ws["jax jit"] = lambda: selu_jax(s_jax).block_until_ready()
    if mods["torch"] is not None:
        torch = mods["torch"]
        F = torch.nn.functional
        xt, wt = torch.from_numpy(a.copy()), torch.from_numpy(v.copy())
        n = ELEM_SHAPE[-1]
        w["torch (eager)"] = lambda: (F.gelu(xt, approximate="tanh") * wt
                                      + F.layer_norm(xt, (n,), eps=1e-5))


# --- reused scripts' builders -------------------------------------------------------------

def build_dispatch(W, R, mods):
    w, r = dispatch.build_workloads()
    for k in (ADD, JIT):
        W[k], R[k] = w[k], r[k]


def _from(mod_build):
    def build(W, R, mods):
        w, r = mod_build()
        W.update(w)
        R.update(r)
    return build


def _from_grad(name):
    def build(W, R, mods):
        grad.BUILDERS[name](W, R, mods["grad"])
    return build


BUILDERS = {
    "dispatch": build_dispatch,
    "eager_chain": build_eager_chain,
    "mlp": _from(mlp_step.build_workloads),
    "cnn": _from(cnn_step.build_workloads),
    "rnn": _from(rnn_step.build),
    "elementwise": build_elementwise,
    "rosenbrock": _from_grad("rosenbrock"),
    "per_example": _from_grad("per_example"),
}
CHECKS = {
    "dispatch": dispatch.check, "mlp": mlp_step.check, "cnn": cnn_step.check,
    "rnn": rnn_step.check, "rosenbrock": grad.check, "per_example": grad.check,
    "eager_chain": lambda W, R: H.check_results(W, R, rtol=1e-4, atol=1e-5,
                                                against="NumPy in float64"),
    "elementwise": lambda W, R: H.check_results(W, R, rtol=1e-3, atol=1e-3,
                                                against="NumPy in float64"),
}


def _competitors(names):
    """The optional libraries, imported once. JAX's x64 mode (which grad.py's float64
    Rosenbrock needs) is switched on only when a grad workload runs; float32 inputs stay
    float32 under it."""
    mods = {"jax": None, "jnp": None, "torch": None, "ag": None, "agnp": None, "grad": None}
    if {"rosenbrock", "per_example"} & set(names):
        mods["grad"] = grad._competitors()
    mods["jax"] = H.optional_import("jax", "JAX rows")
    if mods["jax"] is not None:
        mods["jnp"] = H.optional_import("jax.numpy")
    mods["torch"] = H.optional_torch("PyTorch rows")
    mods["ag"] = H.optional_import("autograd", "HIPS autograd rows")
    if mods["ag"] is not None:
        mods["agnp"] = H.optional_import("autograd.numpy")
    return mods


# --- compile time: outside the interleaved harness ----------------------------------------

def _deep_data():
    import numpy as np
    rng = np.random.default_rng(0)
    f32 = np.float32
    params = [((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(f32),
               (rng.standard_normal(WIDTH) * 0.01).astype(f32)) for _ in range(DEPTH)]
    x = rng.standard_normal((DEEP_BATCH, WIDTH)).astype(f32)
    return params, x


def deep_loss(ns):
    """A fresh loss function (a new closure every call, so no jit cache can hit)."""
    def loss(params, x):
        h = x
        for w, b in params:
            h = ns.tanh(h @ w + b)
        return ns.mean(h * h)
    return loss


def time_compile(make, args, block, reps, steady):
    """(median first-call s, median steady-call s, last result): ``make()`` gives a fresh
    jitted function each repetition; first call, then ``steady`` timed calls."""
    pc = time.perf_counter
    firsts, steadies, out = [], [], None
    for _ in range(reps):
        f = make()
        t0 = pc()
        out = block(f(*args))
        firsts.append(pc() - t0)
        ts = []
        for _ in range(steady):
            t0 = pc()
            block(f(*args))
            ts.append(pc() - t0)
        steadies.append(statistics.median(ts))
    return statistics.median(firsts), statistics.median(steadies), out


def measure_compile(args, mods):
    import numpy as np
    fnx, fnp = H.import_fnx()
    params, x = _deep_data()
    ref = deep_loss(np)([(w.astype(np.float64), b.astype(np.float64)) for w, b in params],
                        x.astype(np.float64))
    reps, steady = (2, 3) if args.quick else (5, 10)
    rows = {}
    pf = [(fnp.asarray(w), fnp.asarray(b)) for w, b in params]
    rows["fnx"] = time_compile(lambda: fnx.jit(fnx.value_and_grad(deep_loss(fnp))),
                               (pf, fnp.asarray(x)), lambda r: r, reps, steady)
    if mods["jax"] is not None:
        jax, jnp = mods["jax"], mods["jnp"]
        pj = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
        rows["jax jit"] = time_compile(lambda: jax.jit(jax.value_and_grad(deep_loss(jnp))),
                                       (pj, jnp.asarray(x)), jax.block_until_ready, reps,
                                       steady)
    for lib, (_, _, out) in rows.items():
        val = float(H.to_numpy(out[0]))
        if not np.isclose(val, ref, rtol=1e-3):
            raise AssertionError(f"compile / {lib}: loss {val} differs from NumPy's {ref}")
        if len(out[1]) != DEPTH:
            raise AssertionError(f"compile / {lib}: {len(out[1])} gradient pairs, not {DEPTH}")
    return {lib: {"first_s": r[0], "steady_ms": r[1] * 1e3, "reps": reps, "steady_calls": steady}
            for lib, r in rows.items()}


# --- peak memory: one subprocess per library ----------------------------------------------

MEM_MODS = {"mlp": mlp_step, "cnn": cnn_step}
MEM_LIBS = {"mlp": ("fnx", "numpy (by hand)", "jax jit", "torch (eager)", "autograd"),
            "cnn": ("fnx", "numpy im2col (by hand)", "jax jit", "torch (eager)", "autograd")}


def _status_kb(key):
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    raise KeyError(key)


def memory_child(workload, lib, calls):
    """In a fresh process: build one library's step, reset the peak RSS, run the step;
    prints one JSON line ``{"growth_mb", "hwm_reset"}`` (``null`` when the row is missing)."""
    import resource
    w, _ = MEM_MODS[workload].build_workloads(libs={lib}, reference=False)
    fn = w[MEM_MODS[workload].STEP].get(lib)
    if fn is None:
        print(json.dumps(None))
        return
    try:
        base = _status_kb("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset VmHWM to the current RSS
            reset = True
        except OSError:
            reset = False
        for _ in range(calls):
            fn()
        peak = _status_kb("VmHWM")
    except (OSError, KeyError):  # no /proc: ru_maxrss (KiB on Linux) cannot be reset
        base, reset = 0, False
        for _ in range(calls):
            fn()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"growth_mb": max(peak - base, 0) / 1024, "hwm_reset": reset}))


def measure_memory(args):
    calls = 3 if args.quick else 10
    out = {}
    for workload, libs in MEM_LIBS.items():
        for lib in libs:
            cmd = [sys.executable, os.path.abspath(__file__), "--memory-child", workload, lib,
                   str(calls)]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"memory / {workload} / {lib} failed:\n{p.stderr[-2000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            if r is not None:
                out.setdefault(workload, {})[lib] = r
    return out


# --- goals ----------------------------------------------------------------------------------

def _fmt(ns):
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.2f} µs"


def _under(goal, value_ns, limit_ns):
    if value_ns is None:
        return None
    return {"goal": goal, "measured": f"fnx {_fmt(value_ns)} (limit {_fmt(limit_ns)})",
            "passed": value_ns < limit_ns}


def _vs(goal, f, other, label, *, factor=1.0, anchor=None, anchor_label=""):
    if f is None:
        return None
    src = f"measured {label}"
    if other is None and anchor is not None:
        other, src = anchor, anchor_label
    if other is None:
        return {"goal": goal, "measured": f"fnx {_fmt(f)}; {label} not installed",
                "passed": None}
    return {"goal": goal, "measured": f"fnx {_fmt(f)} vs {_fmt(other)} ({src}); ratio "
                                      f"{f / other:.2f}x" + (f" (limit {factor}x)"
                                                            if factor != 1.0 else ""),
            "passed": f < factor * other}


def _bandwidth(t_fnx, t_copy, t_split_copy, t_small_copy):
    """gelu+layernorm moves x in and the result out (2 x 16 MiB, w is 4 KiB): its bytes per
    second against the memory bandwidth, goal at least 70%. The memory bandwidth is the
    faster of the large np.copyto and the same copy a slice per CPU: on this VM one thread
    streams about 40 GB/s, and two threads reach 40-78 GB/s from run to run. The copy of
    the workload's own bytes, which may run from the cache, is reported beside it."""
    if t_fnx is None or t_copy is None:
        return None
    nbytes = 2 * 4 * ELEM_SHAPE[0] * ELEM_SHAPE[1]
    big = 2 * 4 * MEMORY_COPY_ELEMS
    bw = nbytes / t_fnx  # bytes per ns = GB/s
    memory = big / min(t for t in (t_copy, t_split_copy) if t)

    def vs(label, t, n):
        return f"{label} {n / t:.1f} GB/s ({100 * bw * t / n:.0f}%)"
    copies = [vs("one thread", t_copy, big)]
    copies += [vs("a slice per CPU", t_split_copy, big)] if t_split_copy else []
    copies += [vs("of its own 32 MiB", t_small_copy, nbytes)] if t_small_copy else []
    return {"goal": "gelu+layernorm at least 70% of the memory bandwidth (a large np.copyto, "
                    "the faster of one thread and a slice per CPU)",
            "measured": f"fnx {bw:.1f} GB/s; copies: {', '.join(copies)}",
            "passed": bw >= 0.7 * memory}


def make_goals(extra):
    def goals(results):
        def m(w, lib):
            return H.median_of(results, w, lib)
        rows = [
            _under("jitted x*2+1 call on (8,) under 4 µs", m(JIT, "fnx"), JIT_CALL_NS),
            _under("eager small op (fnp.add on (8,)) under 3.6 µs", m(ADD, "fnx"), EAGER_OP_NS),
            _under("eager chain of 50 ops on (100,) under 50 µs", m(CHAIN, "fnx"),
                   EAGER_CHAIN_NS),
            _vs("MLP step within 1.1x of NumPy by hand", m(mlp_step.STEP, "fnx"),
                m(mlp_step.STEP, "numpy (by hand)"), "NumPy", factor=MLP_VS_NUMPY),
            _vs("elementwise-heavy within 1.1x of NumPy in place", m(ELEM, "fnx"),
                m(ELEM, "numpy in place (by hand)"), "NumPy", factor=ELEMENTWISE_VS_NUMPY),
            _vs("gelu+layernorm faster than JAX's jit", m(ELEM, "fnx"), m(ELEM, "jax jit"),
                "JAX"),
            _bandwidth(m(ELEM, "fnx"), m(COPY, "numpy"), m(COPY_SPLIT, "numpy"),
                       m(COPY_SMALL, "numpy")),
            _vs("selu on 1M elements faster than JAX's jit", m(SELU, "fnx"),
                m(SELU, "jax jit"), "JAX"),
            _vs("jitted selu no slower than eager", m(SELU, "fnx"), m(SELU, "fnx eager"),
                "fnx eager", factor=1.05),
            _vs("CNN step faster than JAX's jitted step", m(cnn_step.STEP, "fnx"),
                m(cnn_step.STEP, "jax jit"), "JAX", anchor=cnn_step.JAX_ANCHOR_NS,
                anchor_label="9 ms anchor, JAX not installed"),
            _vs("CNN step with reshape+max pooling faster than JAX's jitted step",
                m(cnn_step.STEP_COMMON, "fnx"), m(cnn_step.STEP_COMMON, "jax jit"), "JAX",
                anchor=cnn_step.JAX_ANCHOR_NS, anchor_label="9 ms anchor, JAX not installed"),
        ]
        comp = extra.get("compile")
        if comp:
            s = comp["fnx"]["first_s"]
            rows.append({"goal": "compile: first call of jit(value_and_grad) of the 50-layer "
                                 "MLP under 0.08 s",
                         "measured": f"fnx {s:.3f} s" + (f" (JAX {comp['jax jit']['first_s']:.3f}"
                                                          " s)" if "jax jit" in comp else ""),
                         "passed": s < COMPILE_FIRST_S})
        rows += [
            _under("eager Rosenbrock grad under 100 µs", m(grad.ROSEN, "fnx"), ROSEN_NS),
            _vs("per-example grads faster than JAX's jit(vmap(grad))",
                m(grad.PER_EXAMPLE, "fnx"), m(grad.PER_EXAMPLE, "jax jit(vmap(grad))"), "JAX"),
            _vs("RNN scan grad faster than JAX's", m(rnn_step.WORKLOAD, "fnx"),
                m(rnn_step.WORKLOAD, "jax jit(grad) scan"), "JAX"),
        ]
        mem = extra.get("memory", {}).get("mlp")
        if mem:
            f, t = mem["fnx"]["growth_mb"], mem.get("torch (eager)", {}).get("growth_mb")
            rows.append({"goal": "peak memory growth of the MLP step below PyTorch's",
                         "measured": f"fnx {f:.1f} MB" + (f" vs {t:.1f} MB (measured PyTorch)"
                                                          if t is not None
                                                          else "; PyTorch not installed"),
                         "passed": None if t is None else f < t})
        return [r for r in rows if r is not None]
    return goals


# --- report sections for compile and memory -------------------------------------------------

def _table(header, rows):
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r).rstrip()
                     for r in [header, ["-" * w for w in widths], *rows])


def compile_section(comp):
    rows = [("jit(value_and_grad) 50x256 tanh MLP", lib, f"{r['first_s']:.3f}",
             f"{r['steady_ms']:.3f}", f"{r['first_s'] / comp['fnx']['first_s']:.2f}x")
            for lib, r in comp.items()]
    reps = comp["fnx"]["reps"]
    return (f"compile time (fresh function per repetition, median of {reps}; steady = median "
            f"of {comp['fnx']['steady_calls']} calls after the first)\n"
            + _table(("workload", "library", "first call s", "steady ms", "first ratio to fnx"),
                     rows))


def memory_section(mem):
    rows = []
    for workload, libs in mem.items():
        base = libs.get("fnx", {}).get("growth_mb")
        for i, (lib, r) in enumerate(libs.items()):
            g = r["growth_mb"]
            rows.append((f"{workload} step" if i == 0 else "", lib, f"{g:.1f}",
                         f"{g / base:.2f}x" if base else "-"))
    note = ("" if all(r["hwm_reset"] for libs in mem.values() for r in libs.values())
            else "\n(some peaks could not be reset: they include the imports)")
    return ("peak resident-set growth (one subprocess per library: VmHWM after the first "
            "and steady calls - VmRSS before)\n"
            + _table(("workload", "library", "growth MB", "ratio to fnx"), rows) + note)


# --- main -----------------------------------------------------------------------------------

def _extra_args(p):
    p.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME",
                   help=f"run only these workloads ({', '.join(NAMES)}); default: all")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--memory-child"]:
        return memory_child(argv[1], argv[2], int(argv[3]))
    state = {"names": NAMES, "mods": None}
    extra = {}

    def build(args):
        names = list(dict.fromkeys(args.only or NAMES))
        state["names"] = names
        state["mods"] = mods = _competitors(names)
        W, R = {}, {}
        for name in names:
            if name in BUILDERS:
                w, r = {}, {}
                BUILDERS[name](w, r, mods)
                W.update(w)
                R.update(r)
                state.setdefault("by_name", {})[name] = (w, r)
        return W, R

    def check(W, R):
        for name, (w, r) in state.get("by_name", {}).items():
            CHECKS[name](w, r)

    def after(args):
        sections, js = [], {}
        if "compile" in state["names"]:
            extra["compile"] = js["compile"] = measure_compile(args, state["mods"])
            sections.append(compile_section(extra["compile"]))
        if "memory" in state["names"]:
            extra["memory"] = js["memory"] = measure_memory(args)
            sections.append(memory_section(extra["memory"]))
        return {"sections": sections, "json": js}

    return H.run_main(argv, __doc__, "run", "all-workloads", build, check, make_goals(extra),
                      extra_args=_extra_args, after=after)


if __name__ == "__main__":
    main()
