"""Smoke run of ``benchmarks/linalg.py`` (``--quick``: n = 32, the GP on 64 points, a few
rounds). Every row is checked against NumPy / SciPy in float64 before timing, so this
also checks that fnx's linear algebra computes what the benchmark claims it times. The
speed goals are not checked here (see benchmarks/README.md)."""
import json

import numpy as np

from benchmarks import linalg as B


def test_linalg_benchmark_runs(tmp_path, capsys):
    out = B.main(["--quick", "--repeats", "3", "--json", str(tmp_path / "la.json")])
    workloads = {r.workload for r in out["results"]}
    want = {B.workload_name(op, 32, dt) for op in B.OPS for dt in B.DTYPES} | {B.gp_name(64)}
    assert workloads == want
    rows = {}
    for r in out["results"]:
        rows.setdefault(r.workload, set()).add(r.library)
    for op, (_, ref_row, _) in B.OPS.items():
        assert {"fnx", "fnx jit", ref_row} <= rows[B.workload_name(op, 32, "f32")]
    # one goal per operation and mode, one per GP size
    assert len(out["goals"]) == 2 * len(B.OPS) + 1
    text = capsys.readouterr().out
    assert "goals:" in text and "within 1.3x of np.linalg.solve" in text
    doc = json.loads((tmp_path / "la.json").read_text())
    assert doc["benchmark"] == "linalg" and B.gp_name(64) in doc["x64_workloads"]


def test_gp_gradient_by_hand_matches_finite_differences():
    """The SciPy row's trace-formula gradient (the reference the fnx and JAX rows are
    checked against) is the objective's derivative."""
    x, y, theta = B.gp_data(40)
    value, grad = B.gp_nll_scipy(theta, x, y)
    eps = 1e-6
    fd = [(B.gp_nll_scipy(theta + eps * e, x, y)[0]
           - B.gp_nll_scipy(theta - eps * e, x, y)[0]) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)
    assert np.isfinite(value)


def test_lu_test_matrix_pivots_with_a_margin():
    """The benchmark's ``a = P L U``: every library's partial pivoting picks ``P`` (the
    pivot candidates differ by far more than rounding), so their ``lu`` agree."""
    import scipy.linalg as sl
    m = B.make_matrices(50)
    p, l_, u = sl.lu(m["a"].astype(np.float32))
    p64, l64, u64 = sl.lu(m["a"])
    np.testing.assert_array_equal(p, p64)
    assert np.max(np.abs(np.tril(l64, -1))) < 0.2
