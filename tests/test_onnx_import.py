"""ONNX import (``fnx.onnx.load``, ``to_function``, ``fnx.onnx.backend``): loading from every
source, how initializers are sorted, transformations of imported models, truncation at
named values, export back to ONNX, and the errors for bad models and bad inputs."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import fnx  # noqa: E402
import fnx.numpy as fnp  # noqa: E402
from fnx.onnx import (OnnxImportError, OnnxModelError, OnnxModule,  # noqa: E402
                      UnsupportedOnnxOpError)

RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset=17, name="g", functions=()):
    g = helper.make_graph(nodes, name, inputs, outputs,
                          initializer=[nh.from_array(v, k) for k, v in dict(inits).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                             functions=list(functions))


def _vi(name, shape, t=T.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def mlp_model():
    """x (N, 4) -> Gemm 4x8 -> Relu -> Gemm 8x3, then Reshape by a constant shape, and the
    hidden activation as a second output. Weights are named as PyTorch names them."""
    inits = {
        "fc1.weight": RNG.standard_normal((8, 4)).astype(np.float32),
        "fc1.bias": RNG.standard_normal(8).astype(np.float32),
        "fc2.weight": RNG.standard_normal((3, 8)).astype(np.float32),
        "fc2.bias": RNG.standard_normal(3).astype(np.float32),
        "shape": np.array([-1, 3], np.int64),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h0"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h0"], ["h"], name="relu"),
        helper.make_node("Gemm", ["h", "fc2.weight", "fc2.bias"], ["y0"], transB=1, name="fc2"),
        helper.make_node("Reshape", ["y0", "shape"], ["y"], name="reshape"),
    ]
    return _model(nodes, [_vi("x", ["N", 4])], [_vi("y", ["N", 3]), _vi("h", ["N", 8])],
                  inits), inits


def mlp_reference(inits, x):
    h = np.maximum(x @ inits["fc1.weight"].T + inits["fc1.bias"], 0)
    return h @ inits["fc2.weight"].T + inits["fc2.bias"], h


def test_load_from_proto_bytes_and_path(tmp_path):
    model, inits = mlp_model()
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    want_y, want_h = mlp_reference(inits, x)
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    for src in (model, model.SerializeToString(), str(path), path):
        m = fnx.onnx.load(src)
        assert isinstance(m, OnnxModule)
        out = m(x)
        assert set(out) == {"y", "h"}
        np.testing.assert_allclose(np.asarray(out["y"]), want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(out["h"]), want_h, rtol=1e-5, atol=1e-5)
        assert out["y"].dtype == np.float32


def test_initializers_sorted_into_params_states_constants():
    model, inits = mlp_model()
    m = fnx.onnx.load(model)
    assert sorted(m.params()) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    assert m.states() == {}
    # the Reshape's shape is part of the program, not of the pytree
    leaves = fnx.tree_util.tree_leaves(m)
    assert len(leaves) == 4 and all(leaf.dtype == np.float32 for leaf in leaves)
    np.testing.assert_array_equal(np.asarray(m.params()["fc1.weight"]), inits["fc1.weight"])
    assert m.input_names == ["x"] and m.output_names == ["y", "h"]


def test_batchnorm_statistics_are_states():
    c = 3
    inits = {"bn.weight": np.ones(c, np.float32) * 2, "bn.bias": np.zeros(c, np.float32),
             "bn.running_mean": np.arange(c, dtype=np.float32),
             "bn.running_var": np.full(c, 4.0, np.float32)}
    node = helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias",
                                                   "bn.running_mean", "bn.running_var"], ["y"])
    model = _model([node], [_vi("x", [2, c, 4])], [_vi("y", [2, c, 4])], inits)
    m = fnx.onnx.load(model)
    assert sorted(m.params()) == ["bn.bias", "bn.weight"]
    assert sorted(m.states()) == ["bn.running_mean", "bn.running_var"]
    x = RNG.standard_normal((2, c, 4)).astype(np.float32)
    mean = inits["bn.running_mean"][:, None]
    want = 2 * (x - mean) / np.sqrt(4.0 + 1e-5)
    np.testing.assert_allclose(np.asarray(m(x)), want, rtol=1e-5, atol=1e-5)


def test_jit_grad_vmap_of_module_and_function():
    model, inits = mlp_model()
    m = fnx.onnx.load(model)
    x = RNG.standard_normal((5, 4)).astype(np.float32)

    def loss(mod, x):
        return fnp.sum(mod(x)["y"] ** 2)

    eager = loss(m, x)
    np.testing.assert_allclose(float(fnx.jit(loss)(m, x)), float(eager), rtol=1e-6)
    g = fnx.jit(fnx.grad(loss))(m, x)
    assert isinstance(g, OnnxModule) and sorted(g.params()) == sorted(m.params())

    apply_fn, params = fnx.onnx.to_function(model)
    assert sorted(params) == sorted(m.params())
    value, grads = fnx.value_and_grad(lambda p, x: fnp.sum(apply_fn(p, x)["y"] ** 2))(params, x)
    np.testing.assert_allclose(float(value), float(eager), rtol=1e-6)
    for k in params:
        np.testing.assert_allclose(np.asarray(grads[k]), np.asarray(g.weights[k]), rtol=1e-5,
                                   atol=1e-6)
    # the gradient against central differences, one weight entry at a time
    w = np.asarray(params["fc1.weight"], np.float64)
    eps = 1e-3
    for idx in [(0, 0), (3, 2), (7, 1)]:
        def at(delta):
            p = dict(params)
            ww = w.copy()
            ww[idx] += delta
            p["fc1.weight"] = fnp.asarray(ww.astype(np.float32))
            return float(fnp.sum(apply_fn(p, x)["y"] ** 2))
        fd = (at(eps) - at(-eps)) / (2 * eps)
        np.testing.assert_allclose(float(grads["fc1.weight"][idx]), fd, rtol=2e-2, atol=2e-2)
    # per-example outputs under vmap agree with the batch
    ys = fnx.vmap(lambda xi: apply_fn(params, xi[None])["y"][0])(x)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(apply_fn(params, x)["y"]), rtol=1e-5,
                               atol=1e-6)


def test_outputs_truncate_the_graph_to_what_they_need():
    model, inits = mlp_model()
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    feats = fnx.onnx.load(model, outputs=["h"])
    assert sorted(feats.params()) == ["fc1.bias", "fc1.weight"]   # fc2 never runs
    np.testing.assert_allclose(np.asarray(feats(x)), mlp_reference(inits, x)[1], rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(OnnxModelError, match="'nope'"):
        fnx.onnx.load(model, outputs=["nope"])


def test_export_back_reproduces_the_model_in_onnxruntime():
    pytest.importorskip("onnxruntime")
    model, inits = mlp_model()
    apply_fn, params = fnx.onnx.to_function(model)
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    exported = fnx.onnx.export(lambda p, x: apply_fn(p, x)["y"], params,
                               fnx.ShapeDtypeStruct((6, 4), "float32"))
    got = fnx.onnx.run(exported, params, x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(np.asarray(got), mlp_reference(inits, x)[0], rtol=1e-5,
                               atol=1e-5)


def test_backend_interface_runs_models_and_nodes():
    from fnx.onnx import backend
    model, inits = mlp_model()
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    rep = backend.prepare(model, "CPU")
    y, h = rep.run([x])
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_allclose(y, mlp_reference(inits, x)[0], rtol=1e-5, atol=1e-5)
    (y2, _h2) = backend.run_model(model, {"x": x})
    np.testing.assert_allclose(y2, y)
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    (c,) = backend.run_node(node, [a, a])
    assert c.dtype == np.int64     # 64-bit types stay 64-bit in the backend
    np.testing.assert_array_equal(c, 2 * a)
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def test_unsupported_operator_named_at_load():
    node = helper.make_node("FancyOp", ["x"], ["y"], domain="my.domain", name="fancy1")
    model = _model([node], [_vi("x", [2])], [_vi("y", [2])])
    model.opset_import.extend([helper.make_opsetid("my.domain", 3)])
    with pytest.raises(UnsupportedOnnxOpError) as e:
        fnx.onnx.load(model)
    msg = str(e.value)
    assert all(s in msg for s in ("FancyOp", "fancy1", "my.domain", "opset 3"))


def test_custom_domain_op_runs_through_the_models_own_function():
    body = [helper.make_node("Mul", ["a", "a"], ["sq"]), helper.make_node("Add", ["sq", "a"], ["out"])]
    fn = helper.make_function("my.domain", "SquarePlus", ["a"], ["out"], body,
                              [helper.make_opsetid("", 17)])
    node = helper.make_node("SquarePlus", ["x"], ["y"], domain="my.domain")
    model = _model([node], [_vi("x", [3])], [_vi("y", [3])], functions=[fn])
    model.opset_import.extend([helper.make_opsetid("my.domain", 1)])
    x = np.array([1.0, 2.0, -3.0], np.float32)
    np.testing.assert_allclose(np.asarray(fnx.onnx.load(model)(x)), x * x + x)


def test_malformed_models_are_refused_before_running():
    # a node reading a value nothing defines
    node = helper.make_node("Relu", ["ghost"], ["y"])
    with pytest.raises(OnnxModelError):
        fnx.onnx.load(_model([node], [_vi("x", [2])], [_vi("y", [2])]))
    with pytest.raises(OnnxModelError, match="not an ONNX model"):
        fnx.onnx.load(b"\x00 certainly not protobuf \xff" * 3)


def test_inputs_checked_against_the_declared_types():
    node = helper.make_node("Add", ["x", "z"], ["y"])
    model = _model([node], [_vi("x", ["N", 3]), _vi("z", ["N", 3])], [_vi("y", ["N", 3])])
    m = fnx.onnx.load(model)
    ok = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(np.asarray(m(ok, ok)), 2 * ok)
    with pytest.raises(OnnxModelError, match="'x' is float32, got an array of int32"):
        m(np.ones((2, 3), np.int32), ok)
    with pytest.raises(OnnxModelError, match="rank 2"):
        m(np.ones(3, np.float32), ok)
    with pytest.raises(OnnxModelError, match="'N' is 2 in an earlier input, 4 here"):
        m(ok, np.ones((4, 3), np.float32))
    with pytest.raises(OnnxModelError, match="takes 2 input"):
        m(ok)


def test_static_input_computed_from_data_is_a_clear_error():
    # Reshape's shape from the data itself: not known while tracing
    nodes = [helper.make_node("Cast", ["s"], ["si"], to=T.INT64),
             helper.make_node("Reshape", ["x", "si"], ["y"], name="reshape_by_data")]
    model = _model(nodes, [_vi("x", [6]), _vi("s", [2])], [_vi("y", ["a", "b"])])
    f, p = fnx.onnx.to_function(model)
    with pytest.raises(OnnxImportError, match="reshape_by_data.*input 1.*must be known"):
        fnx.jit(f)(p, np.arange(6, dtype=np.float32), np.array([2, 3], np.float32))


def test_shape_arithmetic_folds_under_jit():
    # the Shape -> Gather -> Concat -> Reshape chain PyTorch exports for x.view(x.size(0), -1)
    inits = {"zero": np.array(0, np.int64), "minus1": np.array([-1], np.int64)}
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits["axes"] = np.array([0], np.int64)
    model = _model(nodes, [_vi("x", ["B", 2, 3])], [_vi("y", ["B", 6])], inits)
    f, p = fnx.onnx.to_function(model)
    x = RNG.standard_normal((4, 2, 3)).astype(np.float32)
    y = fnx.jit(f)(p, x)
    assert y.shape == (4, 6)
    np.testing.assert_allclose(np.asarray(y), x.reshape(4, 6))
    assert p == {}


def test_gradient_operator_differentiates_the_graph_around_it():
    """ai.onnx.preview.training's Gradient: fnx differentiates the nodes between xs and y
    itself; a second Gradient of the first gives second derivatives."""
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]),
             helper.make_node("Mul", ["c", "a"], ["d"]),            # d = a (a + b)
             helper.make_node("Gradient", ["a", "b"], ["dd_da", "dd_db"],
                              domain="ai.onnx.preview.training", xs=["a", "b"], y="d"),
             helper.make_node("Gradient", ["a", "b"], ["d2_da2", ""],
                              domain="ai.onnx.preview.training", xs=["a", "b"], y="dd_da")]
    g = helper.make_graph(nodes, "g", [_vi("a", [3]), _vi("b", [3])],
                          [_vi(n, [3]) for n in ("d", "dd_da", "dd_db", "d2_da2")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("ai.onnx.preview.training",
                                                                    1)])
    a = np.array([1.0, -2.0, 0.5], np.float32)
    b = np.array([2.0, 3.0, -1.0], np.float32)
    out = fnx.onnx.load(model)(a, b)
    np.testing.assert_allclose(np.asarray(out["dd_da"]), 2 * a + b)
    np.testing.assert_allclose(np.asarray(out["dd_db"]), a)
    np.testing.assert_allclose(np.asarray(out["d2_da2"]), np.full(3, 2.0))


def test_train_mode_normalizes_with_the_batch_and_moves_the_running_statistics():
    """An inference graph's BatchNormalization in a module put in train mode: batch
    statistics, and fnx.nn.apply returns the running ones moved by momentum (ONNX's
    training-mode formulas); eval mode (load's default) keeps the model's outputs."""
    c = 3
    inits = {"bn.weight": np.full(c, 2.0, np.float32), "bn.bias": np.full(c, 0.5, np.float32),
             "bn.running_mean": np.zeros(c, np.float32), "bn.running_var": np.ones(c, np.float32)}
    node = helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias",
                                                   "bn.running_mean", "bn.running_var"], ["y"],
                            momentum=0.8, epsilon=1e-5)
    model = _model([node], [_vi("x", ["N", c, 4])], [_vi("y", ["N", c, 4])], inits)
    m = fnx.onnx.load(model)
    assert not m.training
    x = RNG.standard_normal((5, c, 4)).astype(np.float32) * 3 + 1
    np.testing.assert_allclose(np.asarray(m(x)), 2 * x / np.sqrt(1 + 1e-5) + 0.5, rtol=1e-5)
    y, m2 = fnx.jit(lambda mod, v: fnx.nn.apply(mod, v))(m.train(), x)
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    want = 2 * (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) + 0.5
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(m2.states()["bn.running_mean"]), 0.2 * mean,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(m2.states()["bn.running_var"]), 0.8 + 0.2 * var,
                               rtol=1e-5)
    # the gradient in train mode flows through the batch statistics
    g = fnx.grad(lambda mod: fnp.sum(fnx.nn.apply(mod, x)[0] ** 2))(m.train())
    assert np.all(np.isfinite(np.asarray(g.weights["bn.weight"])))
