"""Linear algebra (issue 23): fnx's factorizations and solves, eager and under
``fnx.jit``, next to the NumPy / SciPy call doing the same LAPACK work and JAX's jit; and a
Gaussian-process objective with its gradient against JAX and hand-written SciPy. 21
interleaved rounds by default (``--repeats`` to change).

    python -m benchmarks.linalg [--quick] [--json out.json] [--repeats N] [--raw]
                                [--threads N] [--n N ...] [--gp-n N ...] [--ops NAME ...]

Operations (``--ops`` takes these names; default: all), each at n = 100, 300 and 1000
(``--n``; ``--quick``: n = 32), in float32 and in float64 (``... f64`` workloads run with
``jax_enable_x64`` on, as the report says):

* ``solve_vec``: ``fnp.linalg.solve(a, b)``, ``b`` one vector; against ``np.linalg.solve``;
* ``solve_mat``: the same with ``b`` (n, n) (n right-hand sides);
* ``inv``, ``det``, ``slogdet``: ``fnp.linalg.*`` against ``np.linalg.*``;
* ``lu``: ``fnx.scipy.linalg.lu(a)`` (``p, l, u``) against ``scipy.linalg.lu``;
* ``triangular_solve``: ``fnx.lax.linalg.triangular_solve(t, b, left_side=True,
  lower=True)``, ``b`` (n, n); against ``scipy.linalg.solve_triangular(t, b, lower=True)``;
* ``cho_solve``: ``fnx.scipy.linalg.cho_solve((c, True), b)``, ``c`` a lower Cholesky
  factor, ``b`` one vector; against ``scipy.linalg.cho_solve``.

Rows: ``fnx`` (eager), ``fnx jit`` (the same call inside ``fnx.jit``), ``numpy`` or
``scipy`` (the call named above; SciPy's with ``check_finite=False``, since fnx does not
scan its inputs either, so the row is the LAPACK work alone), ``jax jit``
(``jax.numpy`` / ``jax.scipy`` / ``jax.lax`` under ``jax.jit``, when JAX is installed).

The matrices are ``a = P @ L @ U`` with a random permutation ``P``, ``L`` unit lower
triangular and ``U`` upper triangular whose off-diagonal entries are small (scaled by
1/sqrt(n)) and whose diagonal is ``exp(uniform(-0.2, 0.2))`` with random signs: a dense
matrix, well conditioned, whose determinant stays within float32's range at n = 1000,
and whose partial-pivoting LU picks ``P`` with a wide margin at every step (so every
library's ``lu`` gives the same factors, with no near-ties to round differently).

``gp`` (``--gp-n``, default n = 500 and 2000 points; ``--quick``: 64): the negative log
marginal likelihood of a Gaussian process with an RBF kernel on points in 3-D, float64,
as a function of (log lengthscale, log signal variance, log noise variance), value and
gradient. Rows: ``fnx jit(value_and_grad)`` of the objective written with
``fnx.scipy.linalg.cholesky`` / ``cho_solve``; ``jax jit(value_and_grad)`` of the same
code on ``jax.numpy`` / ``jax.scipy.linalg``; ``scipy (by hand)``: ``cho_factor`` /
``cho_solve`` and the gradient by the trace formula
``0.5 * tr((K^-1 - alpha alpha^T) dK/dtheta)``.

Every row is checked against the float64 NumPy / SciPy result before timing. One compute
thread, the process pinned to one CPU, unless ``--threads`` says otherwise. Goals (issue
23), printed under the table with PASS / MISS: every operation within 1.3x of its NumPy /
SciPy call, eager and jitted, at every n and dtype; the GP objective with its gradient no
slower than JAX's jit. See benchmarks/README.md.

Importing this module runs nothing; ``main(["--quick"])`` is a smoke run.
"""
from __future__ import annotations

import math
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

if __package__:
    from . import _harness as H
else:  # run as a script, or loaded by file path
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    import _harness as H

SIZES = (100, 300, 1000)
QUICK_SIZES = (32,)
GP_SIZES = (500, 2000)
QUICK_GP_SIZES = (64,)
REPEATS = 21           # rounds by default (the n = 1000 and GP rows take up to a second)
LIMIT = 1.3            # the goal: within 1.3x of NumPy / SciPy

# op name: (label in the workload names, the NumPy / SciPy row's name, the call it makes)
OPS = {
    "solve_vec": ("linalg.solve (vector rhs)", "numpy", "np.linalg.solve"),
    "solve_mat": ("linalg.solve (n rhs)", "numpy", "np.linalg.solve"),
    "inv": ("linalg.inv", "numpy", "np.linalg.inv"),
    "det": ("linalg.det", "numpy", "np.linalg.det"),
    "slogdet": ("linalg.slogdet", "numpy", "np.linalg.slogdet"),
    "lu": ("scipy.linalg.lu", "scipy", "scipy.linalg.lu"),
    "triangular_solve": ("lax.linalg.triangular_solve (n rhs)", "scipy",
                         "scipy.linalg.solve_triangular"),
    "cho_solve": ("scipy.linalg.cho_solve (vector rhs)", "scipy", "scipy.linalg.cho_solve"),
}
DTYPES = ("f32", "f64")
GP_ROWS = ("fnx jit(value_and_grad)", "jax jit(value_and_grad)", "scipy (by hand)")


def workload_name(op, n, dt):
    return f"{OPS[op][0]} n={n} {dt}"


def gp_name(n):
    return f"gp nll value_and_grad n={n} 3-d f64"


# --- data ---------------------------------------------------------------------------------

def make_matrices(n, seed=0):
    """float64 ``{"a", "b", "v", "t", "c"}``: ``a = P L U`` (see the module docstring),
    ``b`` (n, n) and ``v`` (n,) right-hand sides, ``t`` lower triangular (``L`` with
    ``U``'s diagonal), ``c`` the lower Cholesky factor of ``a a^T / 2 + I``."""
    import numpy as np
    rng = np.random.default_rng(seed + n)
    s = 0.5 / math.sqrt(n)
    l_ = np.tril(rng.uniform(-s, s, (n, n)), -1) + np.eye(n)
    d = np.exp(rng.uniform(-0.2, 0.2, n)) * rng.choice([-1.0, 1.0], n)
    u = np.triu(rng.uniform(-s, s, (n, n)), 1) + np.diag(d)
    a = (l_ @ u)[rng.permutation(n)]
    t = np.tril(l_, -1) + np.diag(d)
    c = np.linalg.cholesky(a @ a.T / 2 + np.eye(n))
    return {"a": a, "b": rng.standard_normal((n, n)), "v": rng.standard_normal(n), "t": t,
            "c": c}


# --- the operations, per library ------------------------------------------------------------

def fnx_ops(fnx, fnp):
    """``{op: function of the op's arguments}`` in fnx (eager; ``fnx.jit`` of these is the
    jitted row)."""
    import fnx.lax.linalg as fll
    import fnx.scipy.linalg as fsl
    return {
        "solve_vec": fnp.linalg.solve, "solve_mat": fnp.linalg.solve,
        "inv": fnp.linalg.inv, "det": fnp.linalg.det, "slogdet": fnp.linalg.slogdet,
        "lu": fsl.lu,
        "triangular_solve": lambda t, b: fll.triangular_solve(t, b, left_side=True,
                                                              lower=True),
        "cho_solve": lambda c, v: fsl.cho_solve((c, True), v),
    }


def jax_ops(jax):
    jnp = jax.numpy
    import jax.scipy.linalg as jsl
    return {
        "solve_vec": jnp.linalg.solve, "solve_mat": jnp.linalg.solve,
        "inv": jnp.linalg.inv, "det": jnp.linalg.det, "slogdet": jnp.linalg.slogdet,
        "lu": jsl.lu,
        "triangular_solve": lambda t, b: jax.lax.linalg.triangular_solve(
            t, b, left_side=True, lower=True),
        "cho_solve": lambda c, v: jsl.cho_solve((c, True), v),
    }


def reference_ops():
    """The NumPy / SciPy calls (the rows the goals compare with). SciPy's with
    ``check_finite=False``: fnx does not scan its inputs for NaNs and infinities, so the
    SciPy row times the LAPACK work alone (the scan is a pass over the matrix, as long as
    the solve itself for one right-hand side)."""
    import numpy as np
    import scipy.linalg as sl
    return {
        "solve_vec": np.linalg.solve, "solve_mat": np.linalg.solve,
        "inv": np.linalg.inv, "det": np.linalg.det,
        "slogdet": lambda a: tuple(np.linalg.slogdet(a)),
        "lu": lambda a: sl.lu(a, check_finite=False),
        "triangular_solve": lambda t, b: sl.solve_triangular(t, b, lower=True,
                                                             check_finite=False),
        "cho_solve": lambda c, v: sl.cho_solve((c, True), v, check_finite=False),
    }


ARGS = {"solve_vec": ("a", "v"), "solve_mat": ("a", "b"), "inv": ("a",), "det": ("a",),
        "slogdet": ("a",), "lu": ("a",), "triangular_solve": ("t", "b"),
        "cho_solve": ("c", "v")}


# --- the Gaussian process ---------------------------------------------------------------------

def gp_data(n, seed=0):
    """``(x (n, 3), y (n,), theta (3,))`` in float64: points in the unit cube, a smooth
    function of them plus noise, and hyperparameters near the data's."""
    import numpy as np
    rng = np.random.default_rng(seed + n)
    x = rng.uniform(0.0, 1.0, (n, 3))
    y = np.sin(3.0 * x[:, 0]) + np.cos(2.0 * x[:, 1]) * x[:, 2] + 0.1 * rng.standard_normal(n)
    theta = np.log(np.array([0.3, 1.0, 0.05]))   # lengthscale, signal var, noise var
    return x, y, theta


def sq_dists(np_, x):
    """Squared distances between the rows of ``x`` (n, n), clipped at 0."""
    sq = np_.sum(x * x, axis=1)
    return np_.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)


def gp_nll(np_, sla):
    """The negative log marginal likelihood ``nll(theta, x, y)`` of an RBF-kernel GP,
    written on ``np_`` (fnx.numpy or jax.numpy) and ``sla`` (its scipy.linalg):
    ``K = s2 exp(-d2 / (2 l^2)) + n2 I``, ``0.5 y^T K^-1 y + sum(log diag(L)) +
    0.5 n log(2 pi)``, ``theta = (log l, log s2, log n2)``."""
    def nll(theta, x, y):
        n = x.shape[0]
        inv_l2 = np_.exp(-2.0 * theta[0])
        k = np_.exp(theta[1]) * np_.exp(-0.5 * inv_l2 * sq_dists(np_, x))
        k = k + np_.exp(theta[2]) * np_.eye(n, dtype=x.dtype)
        chol = sla.cholesky(k, lower=True)
        alpha = sla.cho_solve((chol, True), y)
        return (0.5 * (y @ alpha) + np_.sum(np_.log(np_.diagonal(chol)))
                + 0.5 * n * math.log(2.0 * math.pi))
    return nll


def gp_nll_scipy(theta, x, y):
    """The same value and its gradient by hand with SciPy: ``cho_factor`` / ``cho_solve``,
    and ``dnll/dtheta_j = 0.5 tr((K^-1 - alpha alpha^T) dK/dtheta_j)`` with
    ``dK/dlog l = Kf * d2 / l^2``, ``dK/dlog s2 = Kf``, ``dK/dlog n2 = n2 I``."""
    import numpy as np
    import scipy.linalg as sl
    n = x.shape[0]
    inv_l2, s2, n2 = math.exp(-2.0 * theta[0]), math.exp(theta[1]), math.exp(theta[2])
    d2 = sq_dists(np, x)
    kf = s2 * np.exp(-0.5 * inv_l2 * d2)
    k = kf.copy()
    k.flat[::n + 1] += n2
    cf = sl.cho_factor(k, lower=True)
    alpha = sl.cho_solve(cf, y)
    value = (0.5 * (y @ alpha) + np.sum(np.log(np.diagonal(cf[0])))
             + 0.5 * n * math.log(2.0 * math.pi))
    w = sl.cho_solve(cf, np.eye(n))
    w -= np.outer(alpha, alpha)
    wk = w * kf
    grad = 0.5 * np.array([inv_l2 * np.vdot(wk, d2), wk.sum(), n2 * np.trace(w)])
    return value, grad


# --- building the workloads -----------------------------------------------------------------

def _competitors():
    jax = H.optional_import("jax", "JAX rows")
    if jax is not None:
        jax.config.update("jax_enable_x64", True)  # the f64 workloads; f32 inputs stay f32
    return jax


def build(args):
    """``(workloads, references)``: every (op, n, dtype) of ``args`` and the GP sizes."""
    import numpy as np
    fnx, fnp = H.import_fnx()
    jax = _competitors()
    sizes = args.n or (QUICK_SIZES if args.quick else SIZES)
    gp_sizes = args.gp_n or (QUICK_GP_SIZES if args.quick else GP_SIZES)
    ops = [o for o in OPS if o in args.ops] if args.ops else list(OPS)
    f_ops, r_ops = fnx_ops(fnx, fnp), reference_ops()
    j_ops = jax_ops(jax) if jax is not None else None
    f_jit = {op: fnx.jit(f) for op, f in f_ops.items()}
    j_jit = {op: jax.jit(f) for op, f in j_ops.items()} if jax is not None else None
    W, R = {}, {}
    for n in sizes:
        m = make_matrices(n)
        for dt in DTYPES:
            dtype = np.float32 if dt == "f32" else np.float64
            host = {k: v.astype(dtype) for k, v in m.items()}
            for op in ops:
                wname = workload_name(op, n, dt)
                names = ARGS[op]
                a_np = tuple(host[k] for k in names)
                with H.x64_for(wname):
                    a_fnx = tuple(fnp.asarray(v) for v in a_np)
                    assert all(v.dtype == dtype for v in a_fnx), (wname, a_fnx[0].dtype)
                w = W[wname] = _rows(op, a_np, a_fnx, f_ops[op], f_jit[op], r_ops[op])
                if jax is not None:
                    a_jax = tuple(jax.numpy.asarray(v) for v in a_np)
                    w["jax jit"] = _blocked(jax, j_jit[op], a_jax)
                R[wname] = _as_tuple(r_ops[op](*(m[k] for k in names)))  # float64
    if not args.ops or "gp" in args.ops:
        for n in gp_sizes:
            W[gp_name(n)], R[gp_name(n)] = _gp_rows(fnx, fnp, jax, n)
    return W, R


def _as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else r


def _rows(op, a_np, a_fnx, f, f_jit, ref):
    return {"fnx": lambda: f(*a_fnx), "fnx jit": lambda: f_jit(*a_fnx),
            OPS[op][1]: lambda: ref(*a_np)}


def _blocked(jax, f, args):
    return lambda: jax.block_until_ready(f(*args))


def _gp_rows(fnx, fnp, jax, n):
    import fnx.scipy.linalg as fsl
    x, y, theta = gp_data(n)
    wname = gp_name(n)
    with H.x64_for(wname):
        xf, yf, tf = fnp.asarray(x), fnp.asarray(y), fnp.asarray(theta)
    vg = fnx.jit(fnx.value_and_grad(gp_nll(fnp, fsl)))
    w = {GP_ROWS[0]: lambda: vg(tf, xf, yf)}
    if jax is not None:
        import jax.scipy.linalg as jsl
        jvg = jax.jit(jax.value_and_grad(gp_nll(jax.numpy, jsl)))
        xj, yj, tj = (jax.numpy.asarray(v) for v in (x, y, theta))
        w[GP_ROWS[1]] = lambda: jax.block_until_ready(jvg(tj, xj, yj))
    w[GP_ROWS[2]] = lambda: gp_nll_scipy(theta, x, y)
    return w, gp_nll_scipy(theta, x, y)


def check(workloads, references):
    """Every row computes the float64 NumPy / SciPy result (float32 rows to float32's
    accuracy on these well-conditioned matrices)."""
    for wname in workloads:
        tol = dict(rtol=1e-7, atol=1e-9) if H.is_x64_workload(wname) else \
            dict(rtol=2e-3, atol=2e-4)
        H.check_results({wname: workloads[wname]}, {wname: references[wname]}, **tol,
                        against="NumPy / SciPy in float64")


# --- goals ------------------------------------------------------------------------------------

def _op_workloads(results, op, dt):
    """The workloads of ``op`` in dtype ``dt`` that ran, smallest n first."""
    label = OPS[op][0]
    names = {r.workload for r in results}
    return sorted((w for w in names if w.startswith(label + " n=") and w.endswith(" " + dt)),
                  key=lambda w: int(w[len(label) + 3:].split()[0]))


def goals(results):
    rows = []
    for op, (label, ref_row, call) in OPS.items():
        for row, mode in (("fnx", "eager"), ("fnx jit", "under jit")):
            ratios = [(wname[len(label) + 1:], H.median_of(results, wname, row)
                       / H.median_of(results, wname, ref_row))
                      for dt in DTYPES for wname in _op_workloads(results, op, dt)]
            if not ratios:
                continue
            worst = max(r for _, r in ratios)
            rows.append({"goal": f"{label} {mode} within {LIMIT}x of {call}",
                         "measured": "; ".join(f"{k} {v:.2f}x" for k, v in ratios)
                                     + f" (worst {worst:.2f}x)",
                         "passed": worst <= LIMIT})
    gps = {r.workload for r in results if r.workload.startswith("gp ")}
    for wname in sorted(gps, key=lambda w: int(w.split("n=")[1].split()[0])):
        f = H.median_of(results, wname, GP_ROWS[0])
        j = H.median_of(results, wname, GP_ROWS[1])
        s = H.median_of(results, wname, GP_ROWS[2])
        goal = f"{wname}: fnx jit(value_and_grad) no slower than JAX's jit"
        if j is None:
            rows.append({"goal": goal, "measured": f"fnx {f / 1e6:.2f} ms; JAX not installed",
                         "passed": None})
            continue
        rows.append({"goal": goal, "measured": f"fnx {f / 1e6:.2f} ms vs {j / 1e6:.2f} ms; "
                                               f"ratio {f / j:.2f}x (SciPy by hand "
                                               f"{s / 1e6:.2f} ms)",
                     "passed": f <= j})
    return rows


def _extra_args(p):
    p.add_argument("--n", type=int, nargs="+", metavar="N",
                   help=f"matrix sizes (default {' '.join(map(str, SIZES))}; --quick: "
                        f"{' '.join(map(str, QUICK_SIZES))})")
    p.add_argument("--gp-n", type=int, nargs="+", metavar="N",
                   help=f"GP sizes (default {' '.join(map(str, GP_SIZES))}; --quick: "
                        f"{' '.join(map(str, QUICK_GP_SIZES))})")
    p.add_argument("--ops", nargs="+", choices=list(OPS) + ["gp"], metavar="NAME",
                   help="run only these: " + ", ".join(list(OPS) + ["gp"]))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--quick" not in argv and not any(a.startswith("--repeats") for a in argv):
        argv += ["--repeats", str(REPEATS)]
    return H.run_main(argv, __doc__, "linalg", "linear algebra", build, check, goals,
                      target_ms=5.0, extra_args=_extra_args, fail="MISS")


if __name__ == "__main__":
    main()
