"""``fnx.config``: JAX's flags by JAX's names, validated; unknown flags raise."""
import os
import subprocess
import sys

import pytest

import fnx
from fnx._config import FLAGS, TRACE_FLAGS


@pytest.fixture(autouse=True)
def _restore():
    saved = dict(fnx.config.values)
    yield
    for name, value in saved.items():
        fnx.config.update(name, value)


def test_every_flag_reads_its_default_and_takes_it_back():
    for name, (default, _, what) in FLAGS.items():
        assert name.startswith("jax_") and what
        assert getattr(fnx.config, name) == fnx.config.read(name)
        fnx.config.update(name, fnx.config.read(name))


def test_unknown_flags_raise_and_attributes_cannot_be_set():
    with pytest.raises(AttributeError, match="unknown flag 'jax_enable_x46'"):
        fnx.config.update("jax_enable_x46", True)
    with pytest.raises(AttributeError):
        fnx.config.jax_no_such_flag
    with pytest.raises(AttributeError, match="config.update"):
        fnx.config.jax_enable_x64 = True


@pytest.mark.parametrize("name,bad", [
    ("jax_enable_x64", "maybe"), ("jax_numpy_rank_promotion", "sometimes"),
    ("jax_platform_name", "tpu"), ("jax_platforms", "tpu,cpu"),
    ("jax_threefry_partitionable", False), ("jax_default_prng_impl", "philox"),
    ("jax_num_cpu_devices", 8), ("jax_default_matmul_precision", "ultra"),
    ("jax_dynamic_shapes", True), ("jax_enable_custom_prng", True)])
def test_values_fnx_cannot_honour_raise_value_error(name, bad):
    before = fnx.config.read(name)
    with pytest.raises(ValueError, match=name):
        fnx.config.update(name, bad)
    assert fnx.config.read(name) == before  # nothing half-set


def test_strings_and_ints_parse_as_booleans():
    fnx.config.update("jax_debug_nans", "true")
    assert fnx.config.jax_debug_nans is True
    fnx.config.update("jax_debug_nans", 0)
    assert fnx.config.jax_debug_nans is False


def test_recorded_flags_are_accepted():
    for name, value in [("jax_platform_name", "cpu"), ("jax_compilation_cache_dir", "/x"),
                        ("jax_remat3", True), ("jax_num_cpu_devices", 1),
                        ("jax_traceback_filtering", "off"), ("jax_log_compiles", True),
                        ("jax_cpu_collectives_implementation", "gloo")]:
        fnx.config.update(name, value)
        assert fnx.config.read(name) == (True if value is True else value)


def test_context_managers_restore_the_previous_value():
    with fnx.disable_jit():
        assert fnx.config.jax_disable_jit
        with fnx.disable_jit(False):
            assert not fnx.config.jax_disable_jit
        assert fnx.config.jax_disable_jit
    assert not fnx.config.jax_disable_jit
    with pytest.raises(RuntimeError):
        with fnx.numpy_rank_promotion("raise"):
            raise RuntimeError
    assert fnx.config.jax_numpy_rank_promotion == "allow"


def test_on_change_and_trace_context():
    seen = []
    fnx.config.on_change("jax_log_compiles", seen.append)
    fnx.config.update("jax_log_compiles", True)
    fnx.config.update("jax_log_compiles", True)  # unchanged: no call
    fnx.config.update("jax_log_compiles", False)
    assert seen == [True, False]
    before = fnx.config.trace_context()
    with fnx.enable_x64():
        assert fnx.config.trace_context() != before
    assert fnx.config.trace_context() == before
    assert len(before) == len(TRACE_FLAGS)


def test_absl_entry_points_and_command_line_flags(monkeypatch):
    fnx.config.config_with_absl()
    monkeypatch.setattr(sys, "argv", ["prog", "--jax_debug_infs=true", "--other=1"])
    fnx.config.parse_flags_with_absl()
    assert fnx.config.jax_debug_infs is True


def test_environment_variables_set_flags_at_import():
    code = ("import fnx, fnx.numpy as fnp; "
            "print(fnx.config.jax_enable_x64, fnx.config.jax_numpy_rank_promotion, "
            "fnp.arange(3).dtype)")
    env = dict(os.environ, JAX_ENABLE_X64="1", FNX_JAX_NUMPY_RANK_PROMOTION="warn")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "warn", "int64"]
