"""An MLP's training step: fnx's jitted value_and_grad + SGD update against JAX (jit),
PyTorch (eager), HIPS autograd (when installed) and a hand-written NumPy
forward/backward.

    python -m benchmarks.mlp_step [--quick] [--json out.json] [--repeats N] [--raw]
                                  [--threads N]
    python benchmarks/mlp_step.py                 # same, by path

The model (float32): a batch of 128 784-vectors -> dense 512 -> relu -> dense 512 ->
relu -> dense 10 -> softmax cross-entropy (mean over the batch). One step is the loss,
its gradient with respect to every parameter and the SGD update ``p - 0.1 * g``; it
returns the new parameters and the loss.

Rows:

* ``fnx``: ``fnx.jit(step)``, ``step`` calling ``fnx.value_and_grad(loss)``, the
  log-softmax written with ``fnx.numpy``;
* ``jax jit``: the same step with ``jax.numpy``, ``jax.jit``;
* ``torch (eager)``: ``F.linear``/``F.relu``/``F.cross_entropy``, ``backward()`` and
  the update under ``no_grad``;
* ``autograd``: the same loss with ``autograd.numpy``;
* ``numpy (by hand)``: forward and backward written out with matmuls.

Every row's new parameters and loss are compared with the hand-written NumPy step
computed in float64 before anything is timed. With ``--threads N`` (default 1) the
process is pinned to N CPUs while it runs, the one way to hold XLA to N threads. Goals
printed under the table: the fnx step faster than JAX's jitted step and than PyTorch
eager (each when installed), and within 1.1x of the hand-written NumPy step. Importing
the module runs nothing; ``main(["--quick"])`` is a smoke run.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

if __package__:
    from . import _harness as H
    from .grad import _status, _version, limit_threads
else:  # run as a script, or loaded by file path
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    import _harness as H
    from grad import _status, _version, limit_threads

STEP = "mlp train step b128 784-512-512-10 f32"
BATCH, LR = 128, 0.1
SIZES = (784, 512, 512, 10)
NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")


def init_params(rng, dtype):
    import numpy as np
    p = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        p[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(dtype)
        p[f"b{i}"] = np.full(b, 0.01, dtype)
    return p


# --- the hand-written NumPy step: reference and floor -------------------------------------

def numpy_step(p, x, y):
    """Loss, gradients by hand, SGD update."""
    import numpy as np
    z1 = x @ p["w1"] + p["b1"]
    a1 = np.maximum(z1, 0)
    z2 = a1 @ p["w2"] + p["b2"]
    a2 = np.maximum(z2, 0)
    logits = a2 @ p["w3"] + p["b3"]
    m = logits.max(1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(1, keepdims=True)
    n = x.shape[0]
    rows = np.arange(n)
    loss = np.mean(m[:, 0] + np.log(s[:, 0]) - logits[rows, y])
    d3 = e / s
    d3[rows, y] -= 1
    d3 /= n
    d2 = d3 @ p["w3"].T
    d2 *= z2 > 0
    d1 = d2 @ p["w2"].T
    d1 *= z1 > 0
    g = {"w3": a2.T @ d3, "b3": d3.sum(0), "w2": a1.T @ d2, "b2": d2.sum(0),
         "w1": x.T @ d1, "b1": d1.sum(0)}
    return {k: p[k] - LR * g[k] for k in NAMES}, loss


# --- the step in each library -------------------------------------------------------------

def _loss(np_, p, x, y, stop=lambda v: v):
    h = np_.maximum(x @ p["w1"] + p["b1"], 0.0)
    h = np_.maximum(h @ p["w2"] + p["b2"], 0.0)
    logits = h @ p["w3"] + p["b3"]
    m = stop(np_.max(logits, axis=1, keepdims=True))
    lse = np_.log(np_.sum(np_.exp(logits - m), axis=1)) + m[:, 0]
    picked = np_.take_along_axis(logits, y[:, None], axis=1)[:, 0]
    return np_.mean(lse - picked)


def make_fnx_step():
    fnx, fnp = H.import_fnx()

    def loss(p, x, y):
        return _loss(fnp, p, x, y, fnx.lax.stop_gradient)

    @fnx.jit
    def step(p, x, y):
        val, g = fnx.value_and_grad(loss)(p, x, y)
        return {k: p[k] - LR * g[k] for k in NAMES}, val
    return step


def make_jax_step(jax, jnp):
    def loss(p, x, y):
        return _loss(jnp, p, x, y, jax.lax.stop_gradient)

    @jax.jit
    def step(p, x, y):
        val, g = jax.value_and_grad(loss)(p, x, y)
        return {k: p[k] - LR * g[k] for k in NAMES}, val
    return step


def make_torch_step(torch):
    F = torch.nn.functional

    def step(p, x, y):
        q = {k: v.detach().requires_grad_(True) for k, v in p.items()}
        h = F.relu(torch.addmm(q["b1"], x, q["w1"]))
        h = F.relu(torch.addmm(q["b2"], h, q["w2"]))
        loss = F.cross_entropy(torch.addmm(q["b3"], h, q["w3"]), y)
        loss.backward()
        with torch.no_grad():
            return {k: q[k] - LR * q[k].grad for k in NAMES}, loss.detach()
    return step


def make_autograd_step(ag, agnp):
    def loss(p, x, y):
        h = agnp.maximum(agnp.dot(x, p["w1"]) + p["b1"], 0.0)
        h = agnp.maximum(agnp.dot(h, p["w2"]) + p["b2"], 0.0)
        logits = agnp.dot(h, p["w3"]) + p["b3"]
        m = agnp.max(logits, axis=1, keepdims=True)
        lse = agnp.log(agnp.sum(agnp.exp(logits - m), axis=1)) + m[:, 0]
        return agnp.mean(lse - logits[agnp.arange(x.shape[0]), y])

    vg = ag.value_and_grad(loss)

    def step(p, x, y):
        val, g = vg(p, x, y)
        return {k: p[k] - LR * g[k] for k in NAMES}, val
    return step


# --- workloads, check, goals ------------------------------------------------------------------

def _to_numpy(v):
    import numpy as np
    if hasattr(v, "detach"):
        return v.detach().cpu().numpy()
    return np.asarray(v)


def build_workloads():
    import numpy as np
    fnx, fnp = H.import_fnx()
    rng = np.random.default_rng(0)
    p = init_params(rng, np.float32)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    pf = {k: fnp.asarray(v) for k, v in p.items()}
    xf, yf = fnp.asarray(x), fnp.asarray(y)
    step_fnx = make_fnx_step()
    w = {"fnx": lambda: step_fnx(pf, xf, yf),
         "numpy (by hand)": lambda: numpy_step(p, x, y)}
    jax = H.optional_import("jax", "JAX row")
    if jax is not None:
        jnp = H.optional_import("jax.numpy")
        pj = {k: jnp.asarray(v) for k, v in p.items()}
        xj, yj = jnp.asarray(x), jnp.asarray(y)
        step_jax = make_jax_step(jax, jnp)
        w["jax jit"] = lambda: jax.block_until_ready(step_jax(pj, xj, yj))
    torch = H.optional_import("torch", "PyTorch row")
    if torch is not None:
        if os.environ.get("OMP_NUM_THREADS"):
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        pt = {k: torch.from_numpy(v.copy()) for k, v in p.items()}
        xt, yt = torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))
        step_torch = make_torch_step(torch)
        w["torch (eager)"] = lambda: step_torch(pt, xt, yt)
    ag = H.optional_import("autograd", "HIPS autograd row")
    if ag is not None:
        agnp = H.optional_import("autograd.numpy")
        step_ag = make_autograd_step(ag, agnp)
        w["autograd"] = lambda: step_ag(p, x, y)
    p64 = {k: v.astype(np.float64) for k, v in p.items()}
    ref = numpy_step(p64, x.astype(np.float64), y)
    return {STEP: w}, {STEP: ref}


def check(workloads, references):
    """Every row computes the reference step (new parameters and loss)."""
    import numpy as np
    for wname, libs in workloads.items():
        ref_p, ref_loss = references[wname]
        for lib, fn in libs.items():
            new_p, loss = fn()
            pairs = [(new_p[k], ref_p[k]) for k in NAMES] + [(loss, ref_loss)]
            for got, want in pairs:
                got = _to_numpy(got)
                if got.shape != np.shape(want) or not np.allclose(got, want, rtol=2e-4,
                                                                  atol=2e-5):
                    raise AssertionError(f"{wname} / {lib}: result differs from the "
                                         "hand-written NumPy step")


def goals(results):
    t = {r.library: r.median_ns for r in results if r.workload == STEP}
    f = t["fnx"]
    rows = []
    for lib, what in (("jax jit", "JAX's jitted step"), ("torch (eager)", "PyTorch eager")):
        if lib in t:
            rows.append({"goal": f"fnx jit(value_and_grad) MLP step faster than {what}",
                         "measured": f"fnx {f / 1e3:.0f} µs vs {t[lib] / 1e3:.0f} µs; ratio "
                                     f"{f / t[lib]:.2f}x", "passed": f < t[lib]})
    n = t["numpy (by hand)"]
    rows.append({"goal": "fnx within 1.1x of the hand-written NumPy step",
                 "measured": f"fnx {f / 1e3:.0f} µs vs {n / 1e3:.0f} µs; ratio {f / n:.2f}x",
                 "passed": f <= 1.1 * n})
    return rows


def format_report(results, overhead_ns, goal_rows, *, raw=False, threads=None, pinned=None):
    m = H.machine_info()
    vers = [f"NumPy {m.get('numpy', '?')}"]
    for mod in ("autograd", "jax", "torch"):
        if mod in sys.modules:
            vers.append(f"{mod} {_version(mod)}")
    lines = [f"fnx MLP step benchmark — {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             + ", ".join(vers),
             f"median per-call time over {results[0].repeats} interleaved rounds; timing loop "
             f"+ empty-lambda call ({overhead_ns:.0f} ns) "
             + ("NOT subtracted (--raw)" if raw else "subtracted"),
             "ratio to fnx = time / fnx time of the same workload (<1: faster than fnx)",
             "compute threads per library: " + (f"{threads} (--threads {threads})" if threads
                                                else "each library's default (--threads 0)")
             + (f"; process pinned to CPU {', '.join(map(str, pinned))} (XLA's pool follows "
                "the affinity mask, not its flags)" if pinned else ""),
             "", H.format_table(results)]
    if H.notes():
        lines += [""] + [f"note: {s}" for s in H.notes()]
    lines += ["", "goals:"]
    for g in goal_rows:
        lines.append(f"  [{_status(g['passed'])}] {g['goal']}: {g['measured']}")
    return "\n".join(lines)


def pin_cpus(n):
    """Restrict this process to ``n`` of its CPUs, so that ``--threads n`` holds for
    JAX too: XLA:CPU sizes its intra-op thread pool from the affinity mask and no XLA
    flag caps it (unpinned, its jitted step ran on 2 threads: about 1.8x the wall time
    in CPU time). The other libraries already run ``n`` threads. Returns the CPUs, or
    None where the mask cannot be set or already has at most ``n``. (A process that
    imported JAX earlier keeps the pool it made then.)"""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) <= n:
        return None
    os.sched_setaffinity(0, cpus[-n:])
    return cpus[-n:]


def main(argv=None):
    p = H.arg_parser(__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="compute threads for every library (BLAS, OpenMP, XLA, PyTorch); "
                        "default 1; 0: each library's own default")
    args = p.parse_args(argv)
    late = limit_threads(args.threads) if args.threads else None
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    pinned = pin_cpus(args.threads) if args.threads else None
    try:
        return _run(args, late, pinned)
    finally:
        if pinned:  # main() called in a longer-lived process (tests): give the CPUs back
            os.sched_setaffinity(0, before)


def _run(args, late, pinned):
    repeats = args.repeats or (9 if args.quick else 51)
    workloads, refs = build_workloads()
    check(workloads, refs)
    results, overhead = H.bench(workloads, repeats=repeats,
                                warmup_ms=2 if args.quick else 20,
                                subtract_overhead=not args.raw)
    goal_rows = goals(results)
    report = format_report(results, overhead, goal_rows, raw=args.raw, threads=args.threads,
                           pinned=pinned)
    print(report if late is None else f"{report}\nnote: {late}")
    if args.json:
        H.dump_json(args.json, results, benchmark="mlp_step", overhead_ns=overhead,
                    overhead_subtracted=not args.raw, threads=args.threads, pinned_cpus=pinned,
                    goals=goal_rows,
                    notes=H.notes() + ([late] if late else []))
    return {"results": results, "overhead_ns": overhead, "goals": goal_rows}


if __name__ == "__main__":
    main()
