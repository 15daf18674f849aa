"""Gradients: fnx's eager reverse mode on a tiny function, and jitted per-example
gradients, next to hand-written NumPy (and HIPS autograd / JAX / PyTorch when
they are installed).

    python -m benchmarks.grad [rosenbrock] [per_example] [--quick] [--json out.json]
                              [--repeats N] [--raw] [--threads N]
    python benchmarks/grad.py rosenbrock          # just the eager Rosenbrock row

Workloads (all by default; name one or more to run only those):

* ``rosenbrock``: ``fnx.grad`` (eager, no jit) of the 10-d Rosenbrock function
  ``sum(100*(x[1:]-x[:-1]**2)**2 + (1-x[:-1])**2)`` on a float64 vector. On 10
  numbers the arithmetic is nothing: the row measures the cost of tracing the
  forward pass, linearizing, transposing and evaluating the backward pass, op
  by op. Against ``autograd.grad`` (HIPS), PyTorch eager autograd (a fresh
  ``requires_grad`` leaf, ``backward()``, ``.grad``), ``jax.grad`` without jit.
* ``per_example``: ``fnx.jit(fnx.vmap(fnx.grad(loss), in_axes=(None, 0, 0)))``
  for a 32-64-1 tanh MLP with squared error, 256 examples of 32 float32
  features: one gradient per example (256 x 2,177 numbers). Against
  ``jax.jit(jax.vmap(jax.grad(loss)))``, ``torch.func.vmap(torch.func.grad(loss))``
  and a Python loop of ``autograd.grad``.

Every row's result is checked against a hand-written NumPy gradient before
anything is timed. Every library runs with one compute thread unless
``--threads`` says otherwise (``--threads 0``: each library's default): on a
small shared machine, multi-threaded BLAS / OpenMP pools on these small arrays
turn any other load into rounds many times slower. The goals from the issue are printed under the table with
PASS/FAIL. See benchmarks/README.md.

Importing this module runs nothing; ``main(["--quick"])`` is a smoke run (a few
seconds) that returns the results.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

if __package__:
    from . import _harness as H
else:  # run as a script, or loaded by file path
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    import _harness as H

# The numbers for this 2-core machine, used only when the library itself
# is not installed (the goal line then says it compared with the anchor).
TORCH_ROSEN_ANCHOR_NS = 130_000      # PyTorch eager autograd, Rosenbrock grad (~130 µs)
AUTOGRAD_ROSEN_ANCHOR_NS = 170_000   # HIPS autograd, Rosenbrock grad (~170 µs)

ROSEN = "eager grad rosenbrock (10,) f64"
PER_EXAMPLE = "per-example grads mlp 32-64-1 x256 f32"
WORKLOADS = {"rosenbrock": ROSEN, "per_example": PER_EXAMPLE}

N_ROSEN = 10
N_EX, N_IN, N_HID = 256, 32, 64


def limit_threads(n):
    """Ask every library for ``n`` compute threads: BLAS / OpenMP through the
    environment (read when NumPy, PyTorch and XLA load, so call this first), and
    PyTorch's intra-op pool directly. Returns a note when it came too late."""
    n = str(int(n))
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
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


def _competitors():
    """``(autograd, autograd.numpy, jax, jax.numpy, torch)``, each None when missing."""
    ag = H.optional_import("autograd", "HIPS autograd rows")
    agnp = H.optional_import("autograd.numpy") if ag is not None else None
    jax = H.optional_import("jax", "JAX rows")
    jnp = H.optional_import("jax.numpy") if jax is not None else None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)  # float64 Rosenbrock; f32 inputs stay f32
    torch = H.optional_import("torch", "PyTorch rows")
    if torch is not None and os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    return ag, agnp, jax, jnp, torch


# --- the functions, written once per library's spelling -----------------------------------

def rosenbrock(x):
    """Works on fnx, NumPy, autograd, JAX and torch arrays alike (operators + .sum())."""
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def rosenbrock_grad_numpy(x):
    """The gradient by hand: the arithmetic floor."""
    import numpy as np
    r = x[1:] - x[:-1] ** 2
    g = np.zeros_like(x)
    g[:-1] = -400.0 * x[:-1] * r - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * r
    return g


def make_mlp_loss(tanh):
    """Per-example loss of a 32-64-1 tanh MLP: params dict, one x (32,), one scalar y."""
    def loss(p, x, y):
        h = tanh(x @ p["w1"] + p["b1"])
        out = (h @ p["w2"] + p["b2"])[0]
        return (out - y) ** 2
    return loss


def mlp_per_example_grads_numpy(p, x, y):
    """Per-example gradients by hand, batched: the arithmetic floor."""
    import numpy as np
    h = np.tanh(x @ p["w1"] + p["b1"])                     # (B, H)
    d = 2.0 * (h @ p["w2"][:, 0] + p["b2"][0] - y)         # (B,)
    dz = (d[:, None] * p["w2"][:, 0]) * (1.0 - h * h)      # (B, H)
    return {"w1": x[:, :, None] * dz[:, None, :], "b1": dz,
            "w2": (d[:, None] * h)[:, :, None], "b2": d[:, None]}


# --- workloads ----------------------------------------------------------------------------

def _to_numpy(v):
    import numpy as np
    if hasattr(v, "detach"):  # torch
        return v.detach().cpu().numpy()
    return np.asarray(v)


def build_rosenbrock(W, R, mods):
    import numpy as np
    fnx, fnp = H.import_fnx()
    ag, agnp, jax, jnp, torch = mods
    a = np.random.default_rng(0).uniform(-1.5, 1.5, N_ROSEN)  # float64
    x = fnp.asarray(a)
    g_fnx = fnx.grad(rosenbrock)
    g_fnx_jit = fnx.jit(fnx.grad(rosenbrock))
    w = W[ROSEN] = {
        "fnx": lambda: g_fnx(x),
        "numpy (by hand)": lambda: rosenbrock_grad_numpy(a),
        "fnx jit(grad)": lambda: g_fnx_jit(x),
    }
    R[ROSEN] = rosenbrock_grad_numpy(a)
    if ag is not None:
        g_ag = ag.grad(rosenbrock)
        w["autograd"] = lambda: g_ag(a)
    if torch is not None:
        xt = torch.from_numpy(a.copy())

        def torch_grad():
            leaf = xt.detach().requires_grad_(True)
            rosenbrock(leaf).backward()
            return leaf.grad
        w["torch"] = torch_grad
    if jax is not None:
        xj = jnp.asarray(a)
        assert xj.dtype == jnp.float64
        g_jax = jax.grad(rosenbrock)
        w["jax (eager)"] = lambda: g_jax(xj).block_until_ready()


def build_per_example(W, R, mods):
    import numpy as np
    fnx, fnp = H.import_fnx()
    ag, agnp, jax, jnp, torch = mods
    rng = np.random.default_rng(1)
    f32 = np.float32
    p = {"w1": (rng.standard_normal((N_IN, N_HID)) / np.sqrt(N_IN)).astype(f32),
         "b1": (rng.standard_normal(N_HID) * 0.1).astype(f32),
         "w2": (rng.standard_normal((N_HID, 1)) / np.sqrt(N_HID)).astype(f32),
         "b2": (rng.standard_normal(1) * 0.1).astype(f32)}
    xs = rng.standard_normal((N_EX, N_IN)).astype(f32)
    ys = rng.standard_normal(N_EX).astype(f32)

    pf = {k: fnp.asarray(v) for k, v in p.items()}
    xf, yf = fnp.asarray(xs), fnp.asarray(ys)
    loss_fnx = make_mlp_loss(fnp.tanh)
    pe_fnx = fnx.jit(fnx.vmap(fnx.grad(loss_fnx), in_axes=(None, 0, 0)))
    pe_fnx_eager = fnx.vmap(fnx.grad(loss_fnx), in_axes=(None, 0, 0))
    w = W[PER_EXAMPLE] = {
        "fnx": lambda: pe_fnx(pf, xf, yf),
        "fnx eager vmap(grad)": lambda: pe_fnx_eager(pf, xf, yf),
        "numpy (by hand)": lambda: mlp_per_example_grads_numpy(p, xs, ys),
    }
    p64 = {k: v.astype(np.float64) for k, v in p.items()}
    R[PER_EXAMPLE] = mlp_per_example_grads_numpy(p64, xs.astype(np.float64),
                                                 ys.astype(np.float64))
    if jax is not None:
        pj = {k: jnp.asarray(v) for k, v in p.items()}
        xj, yj = jnp.asarray(xs), jnp.asarray(ys)
        pe_jax = jax.jit(jax.vmap(jax.grad(make_mlp_loss(jnp.tanh)), in_axes=(None, 0, 0)))
        block = jax.block_until_ready
        w["jax jit(vmap(grad))"] = lambda: block(pe_jax(pj, xj, yj))
    if torch is not None:
        tfunc = H.optional_import("torch.func", "torch.func (vmap/grad) row")
        if tfunc is not None:
            pt = {k: torch.from_numpy(v.copy()) for k, v in p.items()}
            xt, yt = torch.from_numpy(xs.copy()), torch.from_numpy(ys.copy())
            pe_torch = tfunc.vmap(tfunc.grad(make_mlp_loss(torch.tanh)), in_dims=(None, 0, 0))
            w["torch.func vmap(grad)"] = lambda: pe_torch(pt, xt, yt)
    if ag is not None:
        g_ag = ag.grad(make_mlp_loss(agnp.tanh))

        def ag_loop():  # autograd has no vmap: one backward pass per example
            gs = [g_ag(p, xs[i], ys[i]) for i in range(N_EX)]
            return {k: np.stack([g[k] for g in gs]) for k in p}
        w["autograd (loop)"] = ag_loop


BUILDERS = {"rosenbrock": build_rosenbrock, "per_example": build_per_example}


def build_workloads(names=None):
    """``{workload: {library: zero-arg callable}}`` and the reference result of each
    workload (the hand-written NumPy gradient, in float64)."""
    mods = _competitors()
    W, R = {}, {}
    for name in names or list(BUILDERS):
        BUILDERS[name](W, R, mods)
    return W, R


def check(workloads, references):
    """Every callable computes the reference gradient (so the rows time the same thing)."""
    import numpy as np
    for wname, libs in workloads.items():
        ref = references[wname]
        tol = dict(rtol=1e-10, atol=1e-12) if "f64" in wname else dict(rtol=2e-4, atol=2e-5)
        for lib, fn in libs.items():
            out = fn()
            pairs = ([(out[k], ref[k]) for k in ref] if isinstance(ref, dict) else [(out, ref)])
            for got, want in pairs:
                got = _to_numpy(got)
                if got.shape != want.shape or not np.allclose(got, want, **tol):
                    raise AssertionError(f"{wname} / {lib}: result differs from the "
                                         f"hand-written NumPy gradient")


# --- goals and report ---------------------------------------------------------------------

def _median(results, workload, library):
    for r in results:
        if r.workload == workload and r.library == library:
            return r.median_ns
    return None


def _vs(goal, fnx_ns, other_ns, other_label, *, anchor_ns=None, strict=True):
    """One goal row: fnx faster than (or, strict=False, no slower than) ``other``."""
    if other_ns is None and anchor_ns is not None:
        other_ns, src = anchor_ns, f"{anchor_ns / 1e3:.0f} µs anchor from the issue, " \
                                   f"{other_label} not installed"
    else:
        src = f"measured {other_label}"
    if other_ns is None:
        return {"goal": goal, "measured": f"fnx {fnx_ns / 1e3:.1f} µs; {other_label} not "
                                          f"installed, nothing to compare with",
                "passed": None}
    return {"goal": goal,
            "measured": f"fnx {fnx_ns / 1e3:.1f} µs vs {other_ns / 1e3:.1f} µs ({src}); "
                        f"ratio {fnx_ns / other_ns:.2f}x",
            "passed": fnx_ns < other_ns if strict else fnx_ns <= other_ns}


def goals(results):
    """The issue's goals for the workloads that ran, PASS/FAIL from the measured medians."""
    out = []
    f = _median(results, ROSEN, "fnx")
    if f is not None:
        out.append(_vs("eager Rosenbrock grad faster than PyTorch's eager autograd", f,
                       _median(results, ROSEN, "torch"), "PyTorch",
                       anchor_ns=TORCH_ROSEN_ANCHOR_NS))
        out.append(_vs("eager Rosenbrock grad faster than HIPS autograd", f,
                       _median(results, ROSEN, "autograd"), "HIPS autograd",
                       anchor_ns=AUTOGRAD_ROSEN_ANCHOR_NS))
    f = _median(results, PER_EXAMPLE, "fnx")
    if f is not None:
        out.append(_vs("per-example gradients (jit(vmap(grad))) no slower than JAX's "
                       "jitted vmap(grad)", f, _median(results, PER_EXAMPLE,
                                                       "jax jit(vmap(grad))"),
                       "JAX", strict=False))
    return out


def _version(mod):
    v = getattr(sys.modules[mod], "__version__", None)
    if v is None:
        try:
            from importlib.metadata import version
            v = version(mod)
        except Exception:
            v = "?"
    return v


def _status(passed):
    return {True: "PASS", False: "FAIL", None: "SKIP"}[passed]


def format_report(results, overhead_ns, goal_rows, *, raw=False, threads=None):
    m = H.machine_info()
    vers = [f"NumPy {m.get('numpy', '?')}"]
    for mod in ("autograd", "jax", "torch"):
        if mod in sys.modules:
            vers.append(f"{mod} {_version(mod)}")
    lines = [f"fnx grad benchmark — {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             + ", ".join(vers),
             f"median per-call time over {results[0].repeats} interleaved rounds; timing loop + "
             f"empty-lambda call ({overhead_ns:.0f} ns) "
             + ("NOT subtracted (--raw)" if raw else "subtracted"),
             "ratio to fnx = time / fnx time of the same workload (<1: faster than fnx)",
             "compute threads per library: " + (f"{threads} (--threads {threads})" if threads
                                                else "each library's default (--threads 0)"),
             ""]
    lines.append(H.format_table(results))
    if H.notes():
        lines.append("")
        lines += [f"note: {s}" for s in H.notes()]
    lines.append("")
    lines.append("goals:")
    for g in goal_rows:
        lines.append(f"  [{_status(g['passed'])}] {g['goal']}: {g['measured']}")
    return "\n".join(lines)


def main(argv=None):
    p = H.arg_parser(__doc__.split("\n\n")[0])
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                   help=f"run only these ({', '.join(BUILDERS)}); default: all")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="compute threads for every library (BLAS, OpenMP, XLA, PyTorch); "
                        "default 1 (steady on a shared 2-core machine); 0: each library's "
                        "own default")
    args = p.parse_args(argv)
    unknown = [w for w in args.workloads if w not in BUILDERS]
    if unknown:
        p.error(f"unknown workload {unknown[0]!r}; choose from {', '.join(BUILDERS)}")
    names = list(dict.fromkeys(args.workloads)) or list(BUILDERS)
    late = limit_threads(args.threads) if args.threads else None
    repeats = args.repeats or (9 if args.quick else 51)
    workloads, refs = build_workloads(names)
    check(workloads, refs)
    results, overhead = H.bench(workloads, repeats=repeats,
                                warmup_ms=2 if args.quick else 20,
                                subtract_overhead=not args.raw)
    goal_rows = goals(results)
    report = format_report(results, overhead, goal_rows, raw=args.raw, threads=args.threads)
    print(report if late is None else f"{report}\nnote: {late}")
    if args.json:
        H.dump_json(args.json, results, benchmark="grad", overhead_ns=overhead,
                    overhead_subtracted=not args.raw, threads=args.threads, goals=goal_rows,
                    notes=H.notes() + ([late] if late else []))
    return {"results": results, "overhead_ns": overhead, "goals": goal_rows}


if __name__ == "__main__":
    main()
