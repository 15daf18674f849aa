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
    import numpy as np

    def as_list(v):
        return list(v) if isinstance(v, (tuple, list)) else [v]

    for wname, libs in workloads.items():
        ref = as_list(references[wname])
        for lib, fn in libs.items():
            out = as_list(fn())
            got = [np.asarray(o.detach().numpy() if hasattr(o, "detach") else o) for o in out]
            if len(got) != len(ref) or not all(
                    g.shape == r.shape and np.allclose(g, r, rtol=1e-5, atol=1e-6)
                    for g, r in zip(got, ref)):
                raise AssertionError(f"{wname} / {lib}: result differs from NumPy's")


def _median(results, workload, library):
    for r in results:
        if r.workload == workload and r.library == library:
            return r.median_ns
    return None


def goals(results):
    """The issue's goals, with PASS/MISS from the measured medians."""
    out = []
    f, n = _median(results, "add (8,) f32", "fnx"), _median(results, "add (8,) f32", "numpy")
    ratio = f / n if n else float("inf")
    out.append({
        "goal": "eager fnp.add on (8,) within 3x of NumPy's own call",
        "measured": f"fnx {f / 1e3:.3f} µs / numpy {n / 1e3:.3f} µs = {ratio:.2f}x "
                    f"(limit {GOAL_EAGER_RATIO:.0f}x)",
        "passed": ratio <= GOAL_EAGER_RATIO,
    })
    f = _median(results, "jit x*2+1 (8,) f32", "fnx")
    j = _median(results, "jit x*2+1 (8,) f32", "jax")
    ref, src = (j, "measured JAX") if j is not None else (JAX_JIT_ANCHOR_NS, "5 µs anchor, "
                                                                              "JAX not installed")
    out.append({
        "goal": "jitted x*2+1 call faster than JAX's jitted call (~5 µs on this machine)",
        "measured": f"fnx {f / 1e3:.3f} µs vs {ref / 1e3:.3f} µs ({src})",
        "passed": f < ref,
    })
    return out


def format_report(results, overhead_ns, goal_rows, *, raw=False):
    m = H.machine_info()
    lines = [f"fnx dispatch benchmark — {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             f"NumPy {m.get('numpy', '?')}",
             f"median per-call time over {results[0].repeats} interleaved rounds; timing loop + "
             f"empty-lambda call ({overhead_ns:.0f} ns) "
             + ("NOT subtracted (--raw)" if raw else "subtracted"),
             "ratio to fnx = time / fnx time of the same workload (<1: faster than fnx)", ""]
    lines.append(H.format_table(results))
    if H.notes():
        lines.append("")
        lines += [f"note: {s}" for s in H.notes()]
    lines.append("")
    lines.append("goals:")
    for g in goal_rows:
        lines.append(f"  [{'PASS' if g['passed'] else 'MISS'}] {g['goal']}: {g['measured']}")
    return "\n".join(lines)


def main(argv=None):
    args = H.arg_parser(__doc__.split("\n\n")[0]).parse_args(argv)
    repeats = args.repeats or (9 if args.quick else 51)
    workloads, refs = build_workloads()
    check(workloads, refs)
    results, overhead = H.bench(workloads, repeats=repeats,
                                warmup_ms=2 if args.quick else 20,
                                subtract_overhead=not args.raw)
    goal_rows = goals(results)
    print(format_report(results, overhead, goal_rows, raw=args.raw))
    if args.json:
        H.dump_json(args.json, results, benchmark="dispatch", overhead_ns=overhead,
                    overhead_subtracted=not args.raw, goals=goal_rows, notes=H.notes())
    return {"results": results, "overhead_ns": overhead, "goals": goal_rows}


if __name__ == "__main__":
    main()
