"""``fnx.backends.blas``: the OpenBLAS kernel set NumPy's matmuls run, switched at run
time. Where NumPy's BLAS is not a switchable OpenBLAS, only the refusals are checked."""
import os

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.backends import blas

SWITCHABLE = blas.openblas_kernels() is not None
needs_openblas = pytest.mark.skipif(not SWITCHABLE, reason="NumPy's BLAS is not a "
                                    "DYNAMIC_ARCH OpenBLAS whose kernels can be switched")


@pytest.fixture
def restore_kernels():
    before = blas.openblas_kernels()
    yield before
    if before is not None:
        blas.use_openblas_kernels(before)
    assert blas.openblas_kernels() == before


def test_numpy_blas_record():
    name, config = blas.numpy_blas()
    assert isinstance(name, str) and isinstance(config, str)
    if SWITCHABLE:
        assert "openblas" in name.lower() and "DYNAMIC_ARCH" in config


def test_not_switchable_is_refused_with_what_numpy_runs(monkeypatch):
    monkeypatch.setitem(blas._state, "lib", None)
    assert blas.openblas_kernels() is None and blas.picked_openblas_kernels() is None
    assert blas.openblas_kernel_choices() == []
    name, _ = blas.numpy_blas()
    for call in (lambda: blas.use_openblas_kernels("Haswell"),
                 lambda: blas.fastest_openblas_kernels()):
        with pytest.raises(RuntimeError, match=f"NumPy's BLAS is '{name}'.*cannot be switched"):
            call()


@needs_openblas
def test_choices_end_at_the_picked_set_and_are_ordered():
    picked = blas.picked_openblas_kernels()
    choices = blas.openblas_kernel_choices()
    assert choices[-1] == picked or blas._level(choices[-1]) == blas._level(picked)
    levels = [blas._level(c) for c in choices]
    if None not in levels:
        assert levels == sorted(levels) and max(levels) <= blas._level(picked)
    assert blas.openblas_kernels() in choices or blas._level(blas.openblas_kernels()) in levels


@needs_openblas
@pytest.mark.x64   # float64 GEMMs against a float64 reference to 1e-12
def test_every_choice_computes_the_same_products(restore_kernels):
    """Each kernel set gives float32/float64 GEMMs (plain and against a transposed
    operand, in NumPy and in fnx eager and jit) within rounding of a float64 reference,
    and ``OPENBLAS_CORETYPE`` is left as it was."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 130))
    b = rng.standard_normal((130, 61))
    c = rng.standard_normal((37, 61))
    w = rng.standard_normal((130, 130))
    want_ab, want_cbt = a @ b, c @ b.T
    env = os.environ.get("OPENBLAS_CORETYPE")
    mm = fnx.jit(lambda x, w: (x @ w, fnp.matmul(x, w.T)))
    for name in blas.openblas_kernel_choices():
        blas.use_openblas_kernels(name)
        assert blas._level(blas.openblas_kernels()) == blas._level(name)
        assert os.environ.get("OPENBLAS_CORETYPE") == env
        for dt, tol in ((np.float32, 1e-4), (np.float64, 1e-12)):
            x, y, z = a.astype(dt), b.astype(dt), c.astype(dt)
            np.testing.assert_allclose(x @ y, want_ab, rtol=tol, atol=tol * 30)
            np.testing.assert_allclose(z @ y.T, want_cbt, rtol=tol, atol=tol * 30)
            np.testing.assert_array_equal(np.asarray(fnp.asarray(x) @ fnp.asarray(y)), x @ y)
            got, got_t = mm(fnp.asarray(x), fnp.asarray(w.astype(dt)))
            np.testing.assert_allclose(np.asarray(got), a @ w, rtol=tol, atol=tol * 30)
            np.testing.assert_allclose(np.asarray(got_t), a @ w.T, rtol=tol, atol=tol * 30)


@needs_openblas
def test_switch_returns_the_previous_set_and_takes_any_case(restore_kernels):
    choices = blas.openblas_kernel_choices()
    first, last = choices[0], choices[-1]
    blas.use_openblas_kernels(last)
    before = blas.use_openblas_kernels(first.upper())
    assert blas._level(before) == blas._level(last)
    assert blas._level(blas.openblas_kernels()) == blas._level(first)
    before = blas.use_openblas_kernels(last.lower())
    assert blas._level(before) == blas._level(first)
    assert blas._level(blas.openblas_kernels()) == blas._level(last)


@needs_openblas
def test_unknown_or_newer_sets_are_refused_with_the_choices(restore_kernels):
    choices = blas.openblas_kernel_choices()
    newer = [n for n in blas._X86_LEVELS if n not in choices
             and (blas._level(n) or 0) > (blas._level(choices[-1]) or -1)]
    for bad in ["NoSuchCore"] + newer[:1]:
        with pytest.raises(ValueError, match=rf"no kernel set '{bad}'.*{choices[-1]}"):
            blas.use_openblas_kernels(bad)
    assert blas.openblas_kernels() == restore_kernels


@needs_openblas
def test_fastest_times_every_candidate_and_keeps_the_winner(restore_kernels):
    """A workload slower under one set (it sleeps there) loses to the other; every
    candidate is timed; the winner stays switched on."""
    import time
    choices = blas.openblas_kernel_choices()
    if len(choices) < 2:
        pytest.skip("one kernel set only")
    slow, fast = choices[-1], choices[-2]
    seen = []

    def run():
        now = blas.openblas_kernels()
        seen.append(now)
        if blas._level(now) == blas._level(slow):
            time.sleep(0.003)
    best, times = blas.fastest_openblas_kernels(run, rounds=2, candidates=[slow, fast])
    assert best == fast and set(times) == {slow, fast}
    assert times[slow] >= 0.003 > times[fast]
    assert {blas._level(k) for k in seen} == {blas._level(slow), blas._level(fast)}
    assert blas._level(blas.openblas_kernels()) == blas._level(fast)


@needs_openblas
def test_fastest_on_gemms_by_default(restore_kernels):
    choices = blas.openblas_kernel_choices()
    best, times = blas.fastest_openblas_kernels(shapes=((16, 32, 8),), rounds=1)
    assert best == min(times, key=times.get) and set(times) <= set(choices)
    assert all(0 < t < 1 for t in times.values())
    floor = blas._level("Haswell")
    assert all((blas._level(c) or 0) >= floor for c in times) or len(times) == 1
    assert blas._level(blas.openblas_kernels()) == blas._level(best)


def test_a_failing_workload_leaves_the_kernels_as_they_were(restore_kernels):
    if not SWITCHABLE:
        pytest.skip("kernels not switchable")

    def run():
        raise KeyError("boom")
    with pytest.raises(KeyError, match="boom"):
        blas.fastest_openblas_kernels(run)
    assert blas.openblas_kernels() == restore_kernels
