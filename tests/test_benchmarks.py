"""Smoke runs of the benchmark scripts (``--quick``: a few rounds, fnx and NumPy rows
only unless competitors are installed), so they keep running as fnx changes. The
numbers are not checked here: speed goals live in ``benchmarks/``, never in tests."""
import importlib

import pytest


@pytest.mark.parametrize("name", ["dispatch", "grad", "cnn_step", "rnn_step", "mlp_step"])
def test_benchmark_runs(name, capsys):
    importlib.import_module(f"benchmarks.{name}").main(["--quick"])
    out = capsys.readouterr().out
    assert "fnx" in out and "µs" in out
