"""The package as a user meets it: the tour, the README's commands, config."""
import os
import re
import subprocess
import sys

import pytest

import fnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_tour_runs_and_shows_ir_and_timings():
    out = subprocess.run([sys.executable, "-m", "fnx"], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "{ lambda" in out.stdout and "dot_general" in out.stdout
    assert "jit and eager agree: True" in out.stdout
    assert re.search(r"eager: +[\d.]+ us per call", out.stdout)
    assert re.search(r"jit: +[\d.]+ us per call", out.stdout)


def test_ci_runs_exactly_the_readme_test_command():
    readme = open(os.path.join(ROOT, "README.md")).read()
    commands = re.findall(r"^    (python -m pip install .*)$", readme, flags=re.M)
    assert len(commands) == 2, "the README gives exactly two set-up commands"
    demo, tests = commands
    assert demo.endswith("python -m fnx") and "pytest" in tests
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert tests in ci.splitlines()


def test_config_jax_enable_x64_switches_defaults_and_narrowing():
    import warnings

    import fnx.numpy as fnp
    assert fnx.config.jax_enable_x64 is False  # JAX's default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-time narrowing warning (test_x64 checks it)
        assert fnp.ones(2, dtype="float64").dtype == "float32"  # narrowed, as in JAX
    fnx.config.update("jax_enable_x64", True)
    try:
        assert fnx.config.jax_enable_x64 is True
        assert fnp.ones(2).dtype == "float64"  # defaults are 64-bit
        assert fnp.ones(2, dtype="float32").dtype == "float32"
    finally:
        fnx.config.update("jax_enable_x64", False)
    assert fnp.ones(2).dtype == "float32"
    with pytest.raises(AttributeError, match="unknown flag"):
        fnx.config.update("jax_enable_x46", True)


def test_public_api_mirrors_jax_names():
    import fnx.lax
    import fnx.numpy
    import fnx.tree_util
    for name in ["Array", "jit", "make_ir", "eval_shape", "ShapeDtypeStruct", "config",
                 "tree_util", "numpy", "lax", "errors", "devices", "device_put"]:
        assert hasattr(fnx, name), name
    for name in ["add", "mul", "max", "exp", "dot_general", "dynamic_slice",
                 "dynamic_update_slice", "broadcast_in_dim", "reshape", "convert_element_type",
                 "select", "iota", "sort", "reduce_sum", "argmax", "cumsum", "pad", "clamp"]:
        assert callable(getattr(fnx.lax, name)), name
    assert fnx.numpy.ones(2).__array_namespace__() is fnx.numpy


def _run_readme_block(marker, label):
    """Run the README's first ```python block that contains ``marker``; its namespace."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    code = next(b for b in blocks if marker in b)
    namespace = {}
    exec(compile(code, label, "exec"), namespace)
    return namespace


def test_readme_example_runs(capsys):
    namespace = _run_readme_block("", "README.md")
    assert "{ lambda" in capsys.readouterr().out
    assert namespace["grads"][0].shape == (3, 2)


def test_readme_adding_an_op_example_runs(capsys):
    _run_readme_block("fnx.extend", "README.md (Adding an op)")
    out = capsys.readouterr().out
    assert "check_op(my_softplus):" in out and "vjp     passed" in out
    assert "onnx    passed" in out          # onnxruntime is a test extra


def test_readme_models_and_training_example_runs(capsys):
    namespace = _run_readme_block("save_states", "README.md (Models and training)")
    assert "layers.0.weight" in capsys.readouterr().out
    assert namespace["aux"]["step"] == 3


def test_readme_rules_table_is_current():
    from fnx.core.primitive import BUILTIN
    readme = open(os.path.join(ROOT, "README.md")).read()
    table = re.search(r"<!-- rules_report:start -->\n(.*?)\n<!-- rules_report:end -->",
                      readme, re.S).group(1)
    assert table == fnx.testing.rules_report(sorted(BUILTIN)).markdown(), \
        "regenerate the README table with fnx.testing.rules_report(...).markdown()"
