"""The demo (``python -m fnx``), the scripts in examples/ and the README's training
example run, with tiny settings."""
import importlib.util
import os

import numpy as np
import pytest

import fnx
import fnx.serialization
from fnx import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demo_quick_checkpoint_reload_identical(tmp_path, capsys):
    from fnx.__main__ import main
    path = tmp_path / "demo.fnx"
    res = main(["--quick", "--no-tour", "--checkpoint", str(path)])
    assert res["epochs"] == 1 and res["reload_identical"] is True
    assert 0.5 < res["test_accuracy"] <= 1 and np.isfinite(res["loss"])
    out = capsys.readouterr().out
    assert "test accuracy" in out and "s/epoch" in out and "reload identical: True" in out
    # the checkpoint on disk holds the model by dotted name plus the aux states
    from fnx.__main__ import make_model
    fresh = nn.init(make_model(), fnx.random.PRNGKey(7),
                    fnx.ShapeDtypeStruct((1, 1, 8, 8), "float32"))
    model, aux = fnx.serialization.load_states(path, fresh)
    assert int(aux["epoch"]) == 1 and "opt_state" in aux
    assert set(model.params()) == set(fresh.params())


@pytest.mark.parametrize("name", ["mlp", "xception", "char_lstm"])
def test_example_runs(name, capsys):
    res = load_example(name).main(["--steps", "3"])
    out = capsys.readouterr().out
    assert "loss" in out
    if name == "xception":
        assert len(res["losses"]) == 3 and res["losses"][-1] < res["losses"][0]
    else:
        assert np.isfinite(res["loss"])
    if name == "char_lstm":
        assert res["sample"].startswith("T") and "sample:" in out
