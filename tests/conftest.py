"""Hypothesis profiles for the suite: ``fnx-ci`` (10 examples per property, the default)
and ``fnx-thorough`` (200): ``HYPOTHESIS_PROFILE=fnx-thorough python -m pytest`` for a
deep local run."""
import os

from hypothesis import settings

from fnx.testing.strategies import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fnx-ci"))

import pytest  # noqa: E402

import fnx  # noqa: E402


def pytest_configure(config):
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
