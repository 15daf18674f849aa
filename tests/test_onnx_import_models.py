"""Imported models of the shape other frameworks export (``tests/onnx_models.py``: a ResNet
block, a transformer encoder layer, an LSTM): fnx's outputs against onnxruntime's, jit
against eager, gradients against central differences in float64; the fine-tuning
example; fnx's own export read back."""
import importlib.util
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import fnx  # noqa: E402
import fnx.numpy as fnp  # noqa: E402

from onnx_models import MODELS  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _outputs(out, names=None):
    """The outputs in the graph's order (a dict out of jit has its keys sorted, as
    pytrees sort dict keys)."""
    if not isinstance(out, dict):
        return [out]
    return [out[n] for n in names] if names else list(out.values())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_match_onnxruntime_and_jit_matches_eager(name):
    ort = pytest.importorskip("onnxruntime")
    model, inputs = MODELS[name](np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})
    m = fnx.onnx.load(model)
    eager = _outputs(m(*inputs), m.output_names)
    jitted = _outputs(fnx.jit(lambda m, *xs: m(*xs))(m, *inputs), m.output_names)
    assert len(eager) == len(want)
    for e, j, w in zip(eager, jitted, want):
        assert e.shape == w.shape and e.dtype == w.dtype
        np.testing.assert_allclose(np.asarray(e), w, rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-5, atol=1e-6)


@pytest.mark.x64
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradients_match_central_differences(name):
    model, inputs = MODELS[name](np.float64, seed=1)
    apply_fn, params = fnx.onnx.to_function(model)
    rng = np.random.default_rng(2)
    probe = [rng.standard_normal(np.shape(o)) for o in _outputs(apply_fn(params, *inputs))]

    def loss(p, *xs):
        return sum(fnp.sum(o * w) for o, w in zip(_outputs(apply_fn(p, *xs)), probe))

    grads, gx = fnx.jit(fnx.grad(loss, argnums=(0, 1)))(params, *inputs)
    eps = 1e-6
    for key in sorted(params)[:4]:
        w = np.asarray(params[key])
        for _ in range(2):
            idx = tuple(int(rng.integers(0, s)) for s in w.shape)

            def at(d):
                ww = w.copy()
                ww[idx] += d
                return float(loss({**params, key: fnp.asarray(ww)}, *inputs))
            fd = (at(eps) - at(-eps)) / (2 * eps)
            np.testing.assert_allclose(float(grads[key][idx]), fd, rtol=1e-5, atol=1e-7,
                                       err_msg=f"{name}: d loss / d {key}{list(idx)}")
    x = np.asarray(inputs[0])
    idx = tuple(int(rng.integers(0, s)) for s in x.shape)

    def at_x(d):
        xx = x.copy()
        xx[idx] += d
        return float(loss(params, xx, *inputs[1:]))
    np.testing.assert_allclose(float(gx[idx]), (at_x(eps) - at_x(-eps)) / (2 * eps),
                               rtol=1e-5, atol=1e-7)


def test_resnet_block_params_and_states_carry_pytorch_names():
    model, _ = MODELS["resnet_block"](np.float32)
    m = fnx.onnx.load(model)
    assert "layer1.0.conv1.weight" in m.params() and "layer1.0.bn1.bias" in m.params()
    assert sorted(m.states()) == [f"layer1.0.bn{i}.running_{s}" for i in (1, 2)
                                  for s in ("mean", "var")]


def test_fnx_export_with_weights_loads_back_with_its_names():
    from fnx import nn
    model = nn.Sequential(nn.Linear(6), nn.ReLU(), nn.Linear(3))
    model = nn.init(model, fnx.random.PRNGKey(0), fnx.ShapeDtypeStruct((1, 4), "float32"))
    exported = fnx.onnx.export(lambda m, x: m(x), model,
                               fnx.ShapeDtypeStruct((5, 4), "float32"), weights=0)
    assert [i.name for i in exported.graph.input] == ["x"]
    back = fnx.onnx.load(exported)
    assert sorted(back.params()) == sorted(model.params())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(back(x)), np.asarray(model(x)), rtol=1e-6, atol=1e-6)


def test_finetune_example_runs():
    pytest.importorskip("onnxruntime")
    spec = importlib.util.spec_from_file_location(
        "onnx_finetune_example", os.path.join(ROOT, "examples", "onnx_finetune.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--steps", "40"])
    assert out["max_difference"] < 1e-4
    assert out["test_accuracy"] > 0.3     # well above chance (0.1) after 40 steps
    assert any(name.endswith("weight") for name in out["params"])
