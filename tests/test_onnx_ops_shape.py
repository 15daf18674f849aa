"""The ONNX shape and indexing handlers (``fnx.onnx.ops.shape``) beyond the node suite:
gradients through imported models against finite differences, jit against eager, shape
arithmetic folding to static shapes under jit, older-opset attribute forms, and the
errors for unsupported attribute values."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import fnx  # noqa: E402
import fnx.numpy as fnp  # noqa: E402
from fnx.onnx import UnsupportedOnnxOpError  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _x64():
    # the models declare 64-bit types (Shape and Size give int64), as fnx.onnx.backend runs
    with fnx.enable_x64(True):
        yield


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          initializer=[nh.from_array(v, k) for k, v in dict(inits).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=T.DOUBLE):
    return helper.make_tensor_value_info(name, t, shape)


def _i64(*v):
    return np.array(v, np.int64)


def _fd_check(f, x, eps=1e-3, tol=2e-2):
    """grad(sum(f * w)) against central differences in random directions."""
    x = np.asarray(x, np.float64)
    w = RNG.standard_normal(np.shape(f(x))).astype(np.float64)

    def loss(v):
        return fnp.sum(f(v) * w)

    g = np.asarray(fnx.grad(loss)(fnp.asarray(x)))
    for _ in range(3):
        d = RNG.standard_normal(x.shape)
        up, down = loss(fnp.asarray(x + eps * d)), loss(fnp.asarray(x - eps * d))
        num = (float(up) - float(down)) / (2 * eps)
        assert abs(num - float(np.sum(g * d))) <= tol * (1 + abs(num)), (num, np.sum(g * d))


def _pipeline_model():
    """x (2, 3, 4) through Reshape, Transpose, Slice (negative step), Pad (reflect),
    Gather (negative index), Concat, Tile, Expand, Split, ScatterElements (add) and
    GatherND (negative index)."""
    inits = {
        "shape": _i64(6, 4), "starts": _i64(-1, 0), "ends": _i64(-100, 4), "axes": _i64(0, 1),
        "steps": _i64(-2, 1), "pads": _i64(0, 2, 0, 1), "gidx": _i64(-1, 0, 2),
        "reps": _i64(1, 2), "eshape": _i64(2, 1, 1), "split": _i64(5, 9),
        "sidx": np.array([[0, -1, 2], [1, 1, 0], [2, 2, 2]], np.int64),
        "ndidx": np.array([[0, 1], [-1, 2]], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Reshape", ["x", "shape"], ["r"]),                          # (6, 4)
        n("Transpose", ["r"], ["t"], perm=[1, 0]),                   # (4, 6)
        n("Slice", ["r", "starts", "ends", "axes", "steps"], ["s"]),  # rows 5, 3, 1: (3, 4)
        n("Pad", ["s", "pads"], ["p"], mode="reflect"),              # (3, 7)
        n("Gather", ["p", "gidx"], ["g"], axis=1),                   # (3, 3)
        n("Concat", ["g", "s"], ["c"], axis=1),                      # (3, 7)
        n("Tile", ["c", "reps"], ["tl"]),                            # (3, 14)
        n("Expand", ["s", "eshape"], ["e"]),                         # (2, 3, 4)
        n("Split", ["tl", "split"], ["sp0", "sp1"], axis=1),         # (3, 5), (3, 9)
        n("ScatterElements", ["g", "sidx", "g"], ["sc"], axis=1, reduction="add"),
        n("GatherND", ["t", "ndidx"], ["gn"]),                       # (2,)
    ]
    outs = {"t": [4, 6], "p": [3, 7], "c": [3, 7], "tl": [3, 14], "e": [2, 3, 4],
            "sp1": [3, 9], "sc": [3, 3], "gn": [2]}
    return _model(nodes, [_vi("x", [2, 3, 4])], [_vi(k, v) for k, v in outs.items()],
                  inits, 18)


def test_pipeline_grad_and_jit():
    apply_fn, params = fnx.onnx.to_function(_pipeline_model())
    assert params == {}  # initializers in static positions are constants
    x = RNG.standard_normal((2, 3, 4))
    eager = apply_fn(params, fnp.asarray(x))
    jitted = fnx.jit(apply_fn)(params, fnp.asarray(x))
    for k in eager:
        np.testing.assert_allclose(np.asarray(eager[k]), np.asarray(jitted[k]), rtol=1e-6)
    r = x.reshape(6, 4)
    s = r[5::-2]
    p = np.pad(s, ((0, 0), (2, 1)), "reflect")
    g = p[:, [6, 0, 2]]
    np.testing.assert_allclose(np.asarray(eager["t"]), r.T)
    np.testing.assert_allclose(np.asarray(eager["p"]), p)
    np.testing.assert_allclose(np.asarray(eager["sp1"]),
                               np.tile(np.concatenate([g, s], 1), (1, 2))[:, 5:])
    sc = g.copy()
    for i, row in enumerate([[0, 2, 2], [1, 1, 0], [2, 2, 2]]):
        for j, c in enumerate(row):
            sc[i, c] += g[i, j]
    np.testing.assert_allclose(np.asarray(eager["sc"]), sc)
    np.testing.assert_allclose(np.asarray(eager["gn"]), [r.T[0, 1], r.T[-1, 2]])

    def f(v):
        out = apply_fn(params, v)
        return fnp.concatenate([fnp.ravel(out[k]) for k in sorted(out)])

    _fd_check(f, x)


@pytest.mark.parametrize("reduction", ["none", "mul", "max"])
def test_scatter_nd_and_elements_grads(reduction):
    upd_n = helper.make_node("ScatterND", ["x", "idx", "u"], ["y"], reduction=reduction)
    model = _model([upd_n], [_vi("x", [4, 3]), _vi("u", [2, 3])], [_vi("y", [4, 3])],
                   {"idx": np.array([[1], [-1]], np.int64)}, 18)
    apply_fn, params = fnx.onnx.to_function(model)
    x = RNG.standard_normal((4, 3))
    u = RNG.standard_normal((2, 3))
    _fd_check(lambda v: apply_fn(params, v, fnp.asarray(u)), x)
    _fd_check(lambda v: apply_fn(params, fnp.asarray(x), v), u)


def test_pad_gather_elements_onehot_grads_and_traced_indices():
    n = helper.make_node
    nodes = [n("Pad", ["x", "pads", "cv"], ["p"], mode="constant"),
             n("GatherElements", ["p", "i"], ["g"], axis=1),
             n("OneHot", ["i", "depth", "vals"], ["oh"], axis=-1),
             n("ReduceSum", ["oh", "ax"], ["ohs"], keepdims=0),
             n("Mul", ["g", "ohs"], ["y"])]
    model = _model(nodes, [_vi("x", [2, 3]), _vi("i", [2, 2], T.INT64), _vi("cv", [])],
                   [_vi("y", [2, 2])],
                   {"pads": _i64(0, 1, 0, -1), "depth": _i64(5), "ax": _i64(-1),
                    "vals": np.array([0.5, 2.0], np.float64)}, 18)
    apply_fn, params = fnx.onnx.to_function(model)
    x = RNG.standard_normal((2, 3))
    idx = np.array([[0, -1], [2, 1]], np.int64)
    # the indices are traced data under jit: negatives wrap with fnx.numpy
    y_jit = fnx.jit(apply_fn)(params, fnp.asarray(x), fnp.asarray(idx), fnp.asarray(0.25))
    y = apply_fn(params, fnp.asarray(x), fnp.asarray(idx), fnp.asarray(0.25))
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_jit))
    p = np.concatenate([np.full((2, 1), 0.25), x[:, :2]], axis=1)
    want = np.take_along_axis(p, np.where(idx < 0, idx + 3, idx), 1) * (0.5 * 4 + 2.0)
    np.testing.assert_allclose(np.asarray(y), want)
    _fd_check(lambda v: apply_fn(params, v, fnp.asarray(idx), fnp.asarray(0.25)), x)
    _fd_check(lambda c: apply_fn(params, fnp.asarray(x), fnp.asarray(idx), c),
              np.asarray(0.25))


def test_shape_arithmetic_folds_under_jit():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write a flatten:
    the shape is known while tracing, so the model jits with a symbolic-free shape."""
    n = helper.make_node
    nodes = [n("Shape", ["x"], ["s"]),
             n("Gather", ["s", "zero"], ["b"], axis=0),
             n("Unsqueeze", ["b", "zax"], ["b1"]),
             n("Concat", ["b1", "minus1"], ["shp"], axis=0),
             n("Reshape", ["x", "shp"], ["y"]),
             n("Size", ["x"], ["n"]),
             n("Range", ["zero", "b", "one"], ["rng"])]
    model = _model(nodes, [_vi("x", [3, 2, 5])],
                   [_vi("y", [3, 10]), _vi("n", [], T.INT64), _vi("rng", [3], T.INT64)],
                   {"zero": np.array(0, np.int64), "zax": _i64(0), "minus1": _i64(-1),
                    "one": np.array(1, np.int64)}, 13)
    apply_fn, params = fnx.onnx.to_function(model)
    x = RNG.standard_normal((3, 2, 5))
    out = fnx.jit(apply_fn)(params, fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(out["y"]), x.reshape(3, 10))
    assert int(out["n"]) == 30 and np.asarray(out["n"]).dtype == np.int64
    np.testing.assert_array_equal(np.asarray(out["rng"]), [0, 1, 2])


def test_old_opset_attribute_forms():
    n = helper.make_node
    x = RNG.standard_normal((1, 4, 6))
    nodes = [n("Squeeze", ["x"], ["sq"], axes=[0]),
             n("Slice", ["sq"], ["sl"], starts=[1, -3], ends=[1000, -1], axes=[0, 1]),
             n("Unsqueeze", ["sl"], ["us"], axes=[-1]),
             n("Split", ["sq"], ["a", "b"], axis=1, split=[2, 4]),
             n("Pad", ["a"], ["pd"], pads=[0, 1, 0, 0], value=2.0)]
    model = _model(nodes, [_vi("x", [1, 4, 6])],
                   [_vi("us", [3, 2, 1]), _vi("b", [4, 4]), _vi("pd", [4, 3])], opset=9)
    out = fnx.onnx.load(model)(fnp.asarray(x))
    np.testing.assert_allclose(np.asarray(out["us"]), x[0, 1:, -3:-1][..., None])
    np.testing.assert_allclose(np.asarray(out["b"]), x[0, :, 2:])
    np.testing.assert_allclose(np.asarray(out["pd"]),
                               np.pad(x[0, :, :2], ((0, 0), (1, 0)), constant_values=2.0))


def test_unique_nonzero_run_eagerly_under_the_backend():
    from fnx.onnx import backend
    n = helper.make_node
    nodes = [n("Unique", ["x"], ["u", "i", "inv", "c"], sorted=0),
             n("NonZero", ["x"], ["nz"])]
    model = _model(nodes, [_vi("x", [5], T.INT64)],
                   [_vi(o, ["n"], T.INT64) for o in ("u", "i", "inv", "c")]
                   + [_vi("nz", [1, "n"], T.INT64)], opset=13)
    rep = backend.prepare(model)
    u, i, inv, c, nz = rep.run([np.array([3, 0, 3, 2, 0], np.int64)])
    np.testing.assert_array_equal(u, [3, 0, 2])
    np.testing.assert_array_equal(i, [0, 1, 3])
    np.testing.assert_array_equal(inv, [0, 1, 0, 2, 1])
    np.testing.assert_array_equal(c, [2, 2, 1])
    np.testing.assert_array_equal(nz, [[0, 2, 3]])
    with pytest.raises(fnx.errors.ConcretizationError):
        fnx.jit(fnx.onnx.to_function(model)[0])({}, fnp.asarray([1, 2, 1, 0, 0],
                                                                   dtype=np.int64))


def test_unsupported_attribute_values_raise_clear_errors():
    n = helper.make_node
    bad_pad = _model([n("Pad", ["x", "pads"], ["y"], mode="symmetric")], [_vi("x", [2, 3])],
                     [_vi("y", [2, 3])], {"pads": _i64(1, 1, 1, 1)}, 18)
    with pytest.raises(UnsupportedOnnxOpError, match=r"Pad .*mode 'symmetric'"):
        fnx.onnx.load(bad_pad)(fnp.zeros((2, 3)))
    bad_scatter = _model([n("ScatterElements", ["x", "i", "x"], ["y"])],
                         [_vi("x", [2, 3]), _vi("i", [2, 3], T.INT64)], [_vi("y", [2, 3])],
                         opset=18)
    bad_scatter.graph.node[0].attribute.extend([helper.make_attribute("reduction", "mean")])
    with pytest.raises(UnsupportedOnnxOpError, match="reduction 'mean'"):
        fnx.onnx.load(bad_scatter)(fnp.zeros((2, 3)), fnp.zeros((2, 3), dtype=np.int64))


def test_block_and_window_handlers_grads():
    """Col2Im (strides, pads, dilations), DepthToSpace (CRD), SpaceToDepth, CenterCropPad,
    ReverseSequence (traced lengths) and GatherND with batch_dims, through one model."""
    n = helper.make_node
    nodes = [n("Col2Im", ["cols", "img", "blk"], ["im"], strides=[2, 1], pads=[1, 0, 0, 1],
               dilations=[1, 2]),                                   # (1, 2, 5, 4)
             n("CenterCropPad", ["im", "ccp"], ["cc"], axes=[2, 3]),  # (1, 2, 4, 6)
             n("SpaceToDepth", ["cc"], ["sd"], blocksize=2),          # (1, 8, 2, 3)
             n("DepthToSpace", ["sd"], ["ds"], blocksize=2, mode="CRD"),  # (1, 2, 4, 6)
             n("Squeeze", ["ds", "zero"], ["sq"]),                    # (2, 4, 6)
             n("ReverseSequence", ["sq", "lens"], ["rs"], batch_axis=0, time_axis=1),
             n("GatherND", ["rs", "ndi"], ["y"], batch_dims=1)]       # (2, 2, 6)
    model = _model(nodes, [_vi("cols", [1, 8, 9]), _vi("lens", [2], T.INT64)],
                   [_vi("y", [2, 2, 6])],
                   {"img": _i64(5, 4), "blk": _i64(2, 2), "ccp": _i64(4, 6), "zero": _i64(0),
                    "ndi": np.array([[[3], [-4]], [[0], [2]]], np.int64)}, 18)
    apply_fn, params = fnx.onnx.to_function(model)
    cols = RNG.standard_normal((1, 8, 9))
    lens = fnp.asarray([3, 1], dtype=np.int64)
    eager = apply_fn(params, fnp.asarray(cols), lens)
    jitted = fnx.jit(apply_fn)(params, fnp.asarray(cols), lens)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted))
    _fd_check(lambda c: apply_fn(params, c, lens), cols)
