"""Hypothesis profiles for the suite: ``fnx-ci`` (10 examples per property, the default)
and ``fnx-thorough`` (200): ``HYPOTHESIS_PROFILE=fnx-thorough python -m pytest`` for a
deep local run."""
import os

# The GPU device: a real one where CuPy finds one, else its CPU emulation, registered for the
# whole suite (so every CPU test also runs with a device backend present); the tests marked
# ``gpu`` run on it.
os.environ.setdefault("FNX_GPU_EMULATE", "1")

from hypothesis import settings  # noqa: E402

from fnx.testing.strategies import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fnx-ci"))

import pytest  # noqa: E402

import fnx  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: runs on the GPU device (the emulated one without a GPU; "
        "`pytest -m gpu` runs only these)")
    config.addinivalue_line(
        "markers", "x64: run with jax_enable_x64 on, as JAX's own suite runs its float64 and "
        "int64 tests (put `pytestmark = pytest.mark.x64` in a module whose references are 64-bit)")


@pytest.fixture(autouse=True)
def _x64_marker(request):
    """Tests marked ``x64`` run with ``jax_enable_x64`` on; the flag is restored after."""
    if request.node.get_closest_marker("x64") is None:
        yield
        return
    with fnx.enable_x64(True):
        yield


@pytest.fixture
def x64():
    """``jax_enable_x64`` on for one test (a test asks for it by name); restored after."""
    with fnx.enable_x64(True):
        yield


@pytest.fixture
def gpu():
    """The GPU device (``fnx.devices("gpu")[0]``): a real one, else the emulated one."""
    from fnx.backends import enable_gpu_emulation
    from fnx.kernels import emulate
    try:
        dev = fnx.devices("gpu")[0]
    except RuntimeError:
        enable_gpu_emulation()
        dev = fnx.devices("gpu")[0]
    if dev.emulated and not emulate.emulator_available():
        pytest.skip("the emulated GPU needs g++ to run its kernels")
    return dev


def pytest_terminal_summary(terminalreporter):
    """How many GPU-marked tests ran, and on which device."""
    counts = {}
    for outcome in ("passed", "failed", "error", "skipped"):
        for rep in terminalreporter.stats.get(outcome, []):
            if "gpu" in getattr(rep, "keywords", {}) and rep.when in ("call", "setup"):
                if outcome == "passed" and rep.when != "call":
                    continue
                counts[outcome] = counts.get(outcome, 0) + 1
    if counts:
        try:
            dev = fnx.devices("gpu")[0]
            where = f"{dev!r} ({dev.device_kind})"
        except RuntimeError:
            where = "no GPU device"
        parts = ", ".join(f"{n} {k}" for k, n in counts.items())
        terminalreporter.write_line(f"GPU-marked tests on {where}: {parts}")


@pytest.fixture
def numpy_lowering(monkeypatch):
    """jit lowers to NumPy alone, without fused native loops (``FNX_NATIVE=0``): for tests
    of that lowering itself (its blocked loops, buffer rings, bitwise parity with eager
    through transcendental functions), which machines without a C++ compiler run."""
    monkeypatch.setenv("FNX_NATIVE", "0")
