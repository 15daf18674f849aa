"""Per-call dispatch overhead of fnx on tiny arrays, next to NumPy (and JAX /
PyTorch when they are installed).

    python benchmarks/dispatch.py [--json out.json] [--quick] [--repeats N] [--raw]

On (8,) float32 arrays the arithmetic itself is a few nanoseconds, so every
row measures what a library spends around it: argument checks, type
promotion, trace lookup, wrapping the result, and for jit the signature /
cache lookup and pytree flatten/unflatten. See benchmarks/README.md.

Importing this module runs nothing; ``main(["--quick"])`` is a smoke run
(a few seconds) that returns the results.
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

GOAL_EAGER_RATIO = 3.0     # eager fnp.add on (8,) within 3x of NumPy's own call
JAX_JIT_ANCHOR_NS = 5000   # JAX's jitted call on this machine (~5 µs), used without JAX


def _affine(x):
    return x * 2 + 1


def _tree_fn(params, x):
    """3 leaves in (a dict of 2 arrays plus one array), a tuple of 2 out."""
    return params["w"] * x + params["b"], x - params["b"]


def build_workloads():
    """``{workload: {library: zero-arg callable}}`` plus the reference result of each
    workload (NumPy's), for a correctness check before timing."""
    import numpy as np
    fnx, fnp = H.import_fnx()
    jax = H.optional_import("jax", "JAX comparison rows")
    jnp = H.optional_import("jax.numpy") if jax is not None else None
    torch = H.optional_import("torch", "PyTorch comparison rows")

    rng = np.random.default_rng(0)
    a = rng.standard_normal(8).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    c = rng.standard_normal(8).astype(np.float32)
    x, y, z = fnp.asarray(a), fnp.asarray(b), fnp.asarray(c)
    np_add, np_tanh = np.add, np.tanh
    fnp_add, fnp_tanh = fnp.add, fnp.tanh

    W, R = {}, {}

    # 1. eager binary op, two arrays
    w = W["add (8,) f32"] = {
        "fnx": lambda: fnp_add(x, y),
        "fnx x + y": lambda: x + y,
        "numpy": lambda: np_add(a, b),
    }
    R["add (8,) f32"] = a + b
    if jnp is not None:
        xj, yj = jnp.asarray(a), jnp.asarray(b)
        jadd = jnp.add
        w["jax"] = lambda: jadd(xj, yj).block_until_ready()
    if torch is not None:
        xt, yt = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        tadd = torch.add
        w["torch"] = lambda: tadd(xt, yt)

    # 2. eager binary op with a Python scalar
    w = W["x * 2.0 (8,) f32"] = {
        "fnx": lambda: x * 2.0,
        "numpy": lambda: a * 2.0,
    }
    R["x * 2.0 (8,) f32"] = a * np.float32(2.0)
    if jnp is not None:
        w["jax"] = lambda: (xj * 2.0).block_until_ready()
    if torch is not None:
        w["torch"] = lambda: xt * 2.0

    # 3. jitted x * 2 + 1
    f_fnx = fnx.jit(_affine)
    w = W["jit x*2+1 (8,) f32"] = {
        "fnx": lambda: f_fnx(x),
        "numpy": lambda: a * 2 + 1,  # hand-written: the same expression, no jit
    }
    R["jit x*2+1 (8,) f32"] = a * 2 + 1
    if jax is not None:
        f_jax = jax.jit(_affine)
        w["jax"] = lambda: f_jax(xj).block_until_ready()

    # 4. jitted pytree function: ({"w", "b"}, x) -> (array, array)
    g_fnx = fnx.jit(_tree_fn)
    p_fnx, p_np = {"w": x, "b": y}, {"w": a, "b": b}
    w = W["jit pytree (dict2, x) -> tuple"] = {
        "fnx": lambda: g_fnx(p_fnx, z),
        "fnx eager (no jit)": lambda: _tree_fn(p_fnx, z),
        "numpy": lambda: _tree_fn(p_np, c),
    }
    R["jit pytree (dict2, x) -> tuple"] = _tree_fn(p_np, c)
    if jax is not None:
        g_jax = jax.jit(_tree_fn)
        p_jax, zj = {"w": xj, "b": yj}, jnp.asarray(c)
        block = jax.block_until_ready
        w["jax"] = lambda: block(g_jax(p_jax, zj))

    # 5. eager unary op
    w = W["tanh (8,) f32"] = {
        "fnx": lambda: fnp_tanh(x),
        "numpy": lambda: np_tanh(a),
    }
    R["tanh (8,) f32"] = np.tanh(a)
    if jnp is not None:
        jtanh = jnp.tanh
        w["jax"] = lambda: jtanh(xj).block_until_ready()
    if torch is not None:
        ttanh = torch.tanh
        w["torch"] = lambda: ttanh(xt)

    return W, R


def check(workloads, references):
    """Every callable computes the reference (so the timings time the right thing)."""
    H.check_results(workloads, references, rtol=1e-5, atol=1e-6, against="NumPy's")


def goals(results):
    """The issue's goals, with PASS/MISS from the measured medians."""
    out = []
    f = H.median_of(results, "add (8,) f32", "fnx")
    n = H.median_of(results, "add (8,) f32", "numpy")
    ratio = f / n if n else float("inf")
    out.append({
        "goal": "eager fnp.add on (8,) within 3x of NumPy's own call",
        "measured": f"fnx {f / 1e3:.3f} µs / numpy {n / 1e3:.3f} µs = {ratio:.2f}x "
                    f"(limit {GOAL_EAGER_RATIO:.0f}x)",
        "passed": ratio <= GOAL_EAGER_RATIO,
    })
    f = H.median_of(results, "jit x*2+1 (8,) f32", "fnx")
    j = H.median_of(results, "jit x*2+1 (8,) f32", "jax")
    ref, src = (j, "measured JAX") if j is not None else (JAX_JIT_ANCHOR_NS, "5 µs anchor, "
                                                                              "JAX not installed")
    out.append({
        "goal": "jitted x*2+1 call faster than JAX's jitted call (~5 µs on this machine)",
        "measured": f"fnx {f / 1e3:.3f} µs vs {ref / 1e3:.3f} µs ({src})",
        "passed": f < ref,
    })
    return out


def main(argv=None):
    return H.run_main(argv, __doc__, "dispatch", "dispatch", lambda args: build_workloads(),
                      check, goals, threads=False, fail="MISS")


if __name__ == "__main__":
    main()
