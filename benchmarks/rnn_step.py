"""RNN training step: ``fnx.jit(fnx.grad(loss))`` of an Elman RNN written with
``fnx.lax.scan``, next to JAX (jit), PyTorch eager autograd and HIPS autograd when they
are installed.

    python -m benchmarks.rnn_step [--quick] [--json out.json] [--repeats N] [--raw]
                                  [--threads N]

The workload: hidden size 128, input size 64, sequence length 100, batch 16, float32,
``h_t = tanh(x_t @ Wx + h_{t-1} @ Wh + b)``, loss ``mean(h_t ** 2)`` over every step;
the gradient with respect to ``(Wx, Wh, b)``. fnx and JAX run the loop as a ``scan``
inside one jitted function; PyTorch and autograd run a Python loop over the steps
(their idiom). Every row's gradient is checked against fnx's before timing, and one
compute thread is used, the process pinned to one CPU, unless ``--threads`` says
otherwise (see benchmarks/README.md). The goal (fnx no slower than JAX's jitted step)
is printed under the table with PASS/MISS.

Importing this module runs nothing; ``main(["--quick"])`` is a smoke run.
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

T, B, N_IN, N_HID = 100, 16, 64, 128
WORKLOAD = f"rnn jit(grad) scan T={T} B={B} in={N_IN} hid={N_HID} f32"


def _data():
    import numpy as np
    rng = np.random.default_rng(0)
    f32 = np.float32
    return {"wx": (rng.normal(size=(N_IN, N_HID)) * 0.1).astype(f32),
            "wh": (rng.normal(size=(N_HID, N_HID)) * 0.1).astype(f32),
            "b": np.zeros(N_HID, f32),
            "xs": rng.normal(size=(T, B, N_IN)).astype(f32),
            "h0": np.zeros((B, N_HID), f32)}


def scan_loss(np_, scan):
    """The loss ``mean(h_t ** 2)`` of the Elman RNN run by ``scan`` (fnx's or JAX's)."""
    def loss(p, xs, h0):
        wx, wh, b = p

        def cell(h, x):
            h = np_.tanh(x @ wx + h @ wh + b)
            return h, h
        _, hs = scan(cell, h0, xs)
        return (hs ** 2).mean()
    return loss


def build():
    d = _data()
    fnx, fnp = H.import_fnx()
    loss = scan_loss(fnp, fnx.lax.scan)
    p = tuple(fnp.asarray(d[k]) for k in ("wx", "wh", "b"))
    xs, h0 = fnp.asarray(d["xs"]), fnp.asarray(d["h0"])
    step = fnx.jit(fnx.grad(loss))
    libs = {"fnx": lambda: step(p, xs, h0)}

    jax = H.optional_import("jax", "JAX rows")
    if jax is not None:
        jnp = jax.numpy
        jstep = jax.jit(jax.grad(scan_loss(jnp, jax.lax.scan)))
        jp = tuple(jnp.asarray(d[k]) for k in ("wx", "wh", "b"))
        jxs, jh0 = jnp.asarray(d["xs"]), jnp.asarray(d["h0"])
        libs["jax jit(grad) scan"] = lambda: jax.block_until_ready(jstep(jp, jxs, jh0))

    torch = H.optional_torch("PyTorch rows")
    if torch is not None:
        tp = [torch.tensor(d[k]) for k in ("wx", "wh", "b")]
        txs, th0 = torch.tensor(d["xs"]), torch.tensor(d["h0"])

        def tstep():
            leaves = [t.clone().requires_grad_(True) for t in tp]
            wx, wh, b = leaves
            h, tot = th0, 0.0
            for t in range(T):
                h = torch.tanh(txs[t] @ wx + h @ wh + b)
                tot = tot + (h ** 2).sum()
            (tot / (T * B * N_HID)).backward()
            return [t.grad for t in leaves]
        libs["torch eager autograd"] = tstep

    ag = H.optional_import("autograd", "HIPS autograd rows")
    if ag is not None:
        agnp = H.optional_import("autograd.numpy")

        def agloss(p):
            wx, wh, b = p
            h, tot = d["h0"], 0.0
            for t in range(T):
                h = agnp.tanh(agnp.dot(d["xs"][t], wx) + agnp.dot(h, wh) + b)
                tot = tot + agnp.sum(h ** 2)
            return tot / (T * B * N_HID)
        agstep = ag.grad(agloss)
        ap = [d[k] for k in ("wx", "wh", "b")]
        libs["autograd (HIPS)"] = lambda: agstep(ap)

    return {WORKLOAD: libs}, {WORKLOAD: [H.to_numpy(g) for g in step(p, xs, h0)]}


def check(workloads, references):
    """Every row's gradient is fnx's (the reference ``build`` returns)."""
    H.check_results(workloads, references, rtol=2e-3, atol=1e-6, against="fnx's gradient")


def goals(results):
    f = H.median_of(results, WORKLOAD, "fnx")
    j = H.median_of(results, WORKLOAD, "jax jit(grad) scan")
    goal = "fnx jit(grad) no slower than JAX jit(grad)"
    if j is None:
        return [{"goal": goal, "measured": "JAX not installed", "passed": None}]
    return [{"goal": goal, "measured": f"fnx {f / 1e6:.2f} ms vs {j / 1e6:.2f} ms; ratio "
                                       f"{f / j:.2f}x", "passed": f <= j}]


def main(argv=None):
    return H.run_main(argv, __doc__, "rnn_step", "RNN step", lambda args: build(), check, goals,
                      target_ms=30.0, fail="MISS", tune_blas=True)


if __name__ == "__main__":
    main()
