"""Smoke runs of the benchmark scripts (``--quick``: a few rounds, fnx and NumPy rows
only unless competitors are installed), so they keep running as fnx changes. The
numbers are not checked here: speed goals live in ``benchmarks/``, never in tests."""
import importlib
import json
import os

import numpy as np
import pytest

from benchmarks import _harness as H
from mpi_testing import needs_mpi


@pytest.mark.parametrize("name", ["dispatch", "grad", "cnn_step", "rnn_step", "mlp_step"])
def test_benchmark_runs(name, capsys):
    out = importlib.import_module(f"benchmarks.{name}").main(["--quick"])
    assert set(out) == {"results", "overhead_ns", "goals"}
    text = capsys.readouterr().out
    assert "fnx" in text and "µs" in text and "goals:" in text


@pytest.mark.gpu
def test_gpu_benchmark_runs_on_the_emulated_device(gpu, capsys):
    from benchmarks import gpu as gpu_bench
    if not gpu.emulated:
        pytest.skip("a real GPU: run benchmarks/gpu.py itself")
    assert gpu_bench.main(["--emulate"]) == 0
    text = capsys.readouterr().out
    assert "fused gelu*w+layernorm" in text and "mlp b8" in text and "eager add" in text


def test_check_results_catches_a_wrong_row():
    ref = {"w": ({"a": np.ones(3)}, np.float64(2.0))}
    good = {"w": {"fnx": lambda: ({"a": np.ones(3, np.float32)}, 2.0)}}
    H.check_results(good, ref, rtol=1e-6, atol=0)
    for wrong in (lambda: ({"a": np.ones(3)}, 2.1), lambda: ({"a": np.ones(4)}, 2.0),
                  lambda: ({"b": np.ones(3)}, 2.0), lambda: ({"a": np.ones(3)},)):
        with pytest.raises(AssertionError, match="w / bad"):
            H.check_results({"w": {"bad": wrong}}, ref, rtol=1e-6, atol=0)


def test_run_main_restores_threads_affinity_and_blas_kernels(tmp_path, capsys):
    from fnx.backends import blas
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "XLA_FLAGS")}
    mask = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    kernels = blas.openblas_kernels()
    seen = {}

    def build(args):
        seen["omp"] = os.environ.get("OMP_NUM_THREADS")
        return {"w": {"fnx": lambda: 1.0, "numpy": lambda: 1.0}}, {"w": 1.0}

    def check(w, r):
        H.check_results(w, r, rtol=0, atol=0)

    def goals(results):
        return [{"goal": "g", "measured": "m", "passed": None}]

    out = H.run_main(["--quick", "--repeats", "3", "--json", str(tmp_path / "o.json")],
                     "doc", "test", "test", build, check, goals, tune_blas=True)
    assert seen["omp"] == "1" and out["goals"][0]["passed"] is None
    text = capsys.readouterr().out
    assert "[SKIP] g: m" in text
    assert {k: os.environ.get(k) for k in env} == env
    if mask is not None:
        assert os.sched_getaffinity(0) == mask
    assert blas.openblas_kernels() == kernels
    doc = json.loads((tmp_path / "o.json").read_text())
    if kernels is not None:  # the run timed the choices and ran the fastest
        assert doc["openblas_kernels"] in doc["openblas_fastest_s"]
        assert set(doc["openblas_fastest_s"]) <= set(blas.openblas_kernel_choices())
        assert f"NumPy's OpenBLAS kernels: {doc['openblas_kernels']}, fastest" in text
    else:
        assert "kernels not switchable" in text


def test_run_all_entry_point(tmp_path, capsys):
    """``benchmarks/run.py`` on a few cheap workloads (the others are the scripts' own)."""
    from benchmarks import run
    out = run.main(["--quick", "--repeats", "3", "--only", "dispatch", "eager_chain", "compile",
                    "--json", str(tmp_path / "run.json")])
    assert {r.workload for r in out["results"]} == {run.ADD, run.JIT, run.CHAIN}
    assert "fnx" in out["extra"]["json"]["compile"]
    text = capsys.readouterr().out
    assert "compile time" in text and "goals:" in text and "eager chain of 50 ops" in text
    assert (tmp_path / "run.json").exists()


def test_run_chain_and_elementwise_match_numpy():
    """The new workloads' fnx functions compute their NumPy references."""
    from benchmarks import run
    fnx, fnp = H.import_fnx()
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 16)).astype(np.float32)
    np.testing.assert_allclose(run.chain(fnp, fnp.asarray(x), fnp.asarray(y)),
                               run.chain(np, x, y), rtol=1e-5, atol=1e-6)
    a = rng.standard_normal((4, 16)).astype(np.float32)
    want = run.gelu_ln(np, a.astype(np.float64), y.astype(np.float64))
    np.testing.assert_allclose(run.gelu_ln_numpy_inplace(a, y), want, rtol=1e-4, atol=1e-5)
    got = fnx.jit(lambda x, w: run.gelu_ln(fnp, x, w))(fnp.asarray(a), fnp.asarray(y))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bandwidth_goal_is_against_the_faster_copy_from_memory():
    """The copy the goal compares with streams from memory (beyond the last-level cache),
    and the faster of one thread and a slice per CPU is the memory bandwidth."""
    from benchmarks import run
    assert 4 * run.MEMORY_COPY_ELEMS >= max(256 << 20, 8 * run._last_level_cache_bytes())
    nbytes = 2 * 4 * run.ELEM_SHAPE[0] * run.ELEM_SHAPE[1]
    big = 2 * 4 * run.MEMORY_COPY_ELEMS
    t_fnx = nbytes / 30.0                       # 30 GB/s
    one, two = big / 40.0, big / 75.0           # copies at 40 and 75 GB/s
    row = run._bandwidth(t_fnx, one, None, None)
    assert row["passed"] and "one thread 40.0 GB/s (75%)" in row["measured"]
    row = run._bandwidth(t_fnx, one, two, nbytes / 70.0)
    assert not row["passed"], row
    assert "a slice per CPU 75.0 GB/s (40%)" in row["measured"]
    assert "of its own 32 MiB 70.0 GB/s" in row["measured"]
    assert run._bandwidth(None, one, two, None) is None


def test_float64_workloads_run_with_x64_and_only_they():
    """A workload named ``... f64`` is checked and timed with jax_enable_x64 on (fnx would
    narrow its float64 inputs otherwise); the others, and the caller, keep the flag off."""
    import fnx
    seen = []

    def row(wname):
        def call():
            seen.append((wname, fnx.config.jax_enable_x64))
            return fnx.numpy.asarray(np.ones(2)).dtype.itemsize
        return call
    work = {"w f64": {"fnx": row("w f64")}, "w f32": {"fnx": row("w f32")}}
    H.check_results(work, {"w f64": 8, "w f32": 4}, rtol=0, atol=0)
    H.bench(work, repeats=2, warmup_ms=0, target_ms=0.01)
    assert seen and all(on == (w == "w f64") for w, on in seen)
    assert {w for w, _ in seen} == {"w f64", "w f32"}
    assert fnx.config.jax_enable_x64 is False
    text = H.format_report("t", [], 0.0, [], x64=["w f64"])
    assert "jax_enable_x64: on for the float64 workloads (w f64)" in text


@needs_mpi
def test_distributed_benchmark_runs(capsys):
    """One round of the data-parallel benchmark: 1 and 2 processes under ``mpiexec``."""
    from benchmarks import distributed
    out = distributed.main(["--rounds", "1", "--steps", "1", "--repeats", "1",
                            "--jax-python", os.devnull])
    assert set(out["speedups"]) == set(distributed.GLOBAL_BATCHES) and out["jax"] == {}
    assert out["n2"]["processes"] == 2 and out["psum_ratio"] > 0
    text = capsys.readouterr().out
    assert "global batch 128" in text and "goals:" in text
