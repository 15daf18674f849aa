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
else:  # run as a script, or loaded by file path
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    import _harness as H

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

def _logits(np_, lax, p, x):
    """The MLP's logits, with ``np_`` either fnx's or JAX's numpy."""
    h = np_.maximum(x @ p["w1"] + p["b1"], 0.0)
    h = np_.maximum(h @ p["w2"] + p["b2"], 0.0)
    return h @ p["w3"] + p["b3"]


def _torch_logits(torch, p, x):
    F = torch.nn.functional
    h = F.relu(torch.addmm(p["b1"], x, p["w1"]))
    h = F.relu(torch.addmm(p["b2"], h, p["w2"]))
    return torch.addmm(p["b3"], h, p["w3"])


def _autograd_logits(agnp, p, x):
    h = agnp.maximum(agnp.dot(x, p["w1"]) + p["b1"], 0.0)
    h = agnp.maximum(agnp.dot(h, p["w2"]) + p["b2"], 0.0)
    return agnp.dot(h, p["w3"]) + p["b3"]


LOGITS = {"jit": _logits, "torch": _torch_logits, "autograd": _autograd_logits}


# --- workloads, check, goals ------------------------------------------------------------------

def make_data():
    """The float32 parameters, inputs and int32 labels of the step."""
    import numpy as np
    rng = np.random.default_rng(0)
    p = init_params(rng, np.float32)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    return p, x, y


def build_workloads(libs=None, reference=True):
    """``{STEP: rows}`` and ``{STEP: reference}``; ``libs``: only these rows;
    ``reference=False``: no reference (None)."""
    return H.train_step_rows(sys.modules[__name__], 'numpy (by hand)', libs, reference)


check = H.check_train_step  # every row computes the reference step (new params, loss)


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


def main(argv=None):
    return H.run_main(argv, __doc__, "mlp_step", "MLP step", lambda args: build_workloads(),
                      check, goals, tune_blas=True)


if __name__ == "__main__":
    main()
