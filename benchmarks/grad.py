"""Gradients: fnx's eager reverse mode on a tiny function, and jitted per-example
gradients, next to hand-written NumPy (and HIPS autograd / JAX / PyTorch when
they are installed).

    python -m benchmarks.grad [rosenbrock] [per_example] [--quick] [--json out.json]
                              [--repeats N] [--raw] [--threads N]
    python benchmarks/grad.py rosenbrock          # just the eager Rosenbrock row

Workloads (all by default; name one or more to run only those):

* ``rosenbrock``: ``fnx.grad`` (eager, no jit) of the 10-d Rosenbrock function
  ``sum(100*(x[1:]-x[:-1]**2)**2 + (1-x[:-1])**2)`` on a float64 vector (fnx and
  JAX with ``jax_enable_x64`` on, as the report says; the harness switches it on
  for this workload only). On 10
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
anything is timed. Every library runs with one compute thread, the process
pinned to one CPU, unless ``--threads`` says otherwise (``--threads 0``: each
library's default, no pinning): on a small shared machine, multi-threaded BLAS /
OpenMP pools on these small arrays turn any other load into rounds many times
slower. The goals from the issue are printed under the table with PASS/FAIL. See
benchmarks/README.md.

Importing this module runs nothing; ``main(["--quick"])`` is a smoke run (a few
seconds) that returns the results.
"""
from __future__ import annotations

import argparse
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


def _competitors():
    """``(autograd, autograd.numpy, jax, jax.numpy, torch)``, each None when missing."""
    ag = H.optional_import("autograd", "HIPS autograd rows")
    agnp = H.optional_import("autograd.numpy") if ag is not None else None
    jax = H.optional_import("jax", "JAX rows")
    jnp = H.optional_import("jax.numpy") if jax is not None else None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)  # float64 Rosenbrock; f32 inputs stay f32
    torch = H.optional_torch("PyTorch rows")
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

def build_rosenbrock(W, R, mods):
    import numpy as np
    fnx, fnp = H.import_fnx()
    ag, agnp, jax, jnp, torch = mods
    a = np.random.default_rng(0).uniform(-1.5, 1.5, N_ROSEN)  # float64
    with H.x64_for(ROSEN):   # the harness runs this workload's rows with x64 on, too
        x = fnp.asarray(a)
    assert x.dtype == np.float64
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
    for wname, libs in workloads.items():
        tol = dict(rtol=1e-10, atol=1e-12) if "f64" in wname else dict(rtol=2e-4, atol=2e-5)
        H.check_results({wname: libs}, references, **tol,
                        against="the hand-written NumPy gradient")


# --- goals and report ---------------------------------------------------------------------

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
    f = H.median_of(results, ROSEN, "fnx")
    if f is not None:
        out.append(_vs("eager Rosenbrock grad faster than PyTorch's eager autograd", f,
                       H.median_of(results, ROSEN, "torch"), "PyTorch",
                       anchor_ns=TORCH_ROSEN_ANCHOR_NS))
        out.append(_vs("eager Rosenbrock grad faster than HIPS autograd", f,
                       H.median_of(results, ROSEN, "autograd"), "HIPS autograd",
                       anchor_ns=AUTOGRAD_ROSEN_ANCHOR_NS))
    f = H.median_of(results, PER_EXAMPLE, "fnx")
    if f is not None:
        out.append(_vs("per-example gradients (jit(vmap(grad))) no slower than JAX's "
                       "jitted vmap(grad)", f,
                       H.median_of(results, PER_EXAMPLE, "jax jit(vmap(grad))"), "JAX",
                       strict=False))
    return out


def _workload_name(name):
    if name not in BUILDERS:
        raise argparse.ArgumentTypeError(f"unknown workload {name!r}; choose from "
                                         f"{', '.join(BUILDERS)}")
    return name


def _extra_args(p):
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD", type=_workload_name,
                   help=f"run only these ({', '.join(BUILDERS)}); default: all")


def main(argv=None):
    return H.run_main(argv, __doc__, "grad", "grad",
                      lambda args: build_workloads(list(dict.fromkeys(args.workloads))),
                      check, goals, extra_args=_extra_args)


if __name__ == "__main__":
    main()
