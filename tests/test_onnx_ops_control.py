"""ONNX handlers of control flow, recurrent layers, sequences and attention
(``fnx/onnx/ops/control.py``): what the ONNX node suite does not check: derivatives
against finite differences through ``fnx.onnx.to_function`` (RNN/GRU/LSTM scans, a Loop
as a scan, If as a traced cond, Scan, Attention, TensorScatter), jit against eager (a Loop
with a computed condition is a while_loop), and the errors for what fnx cannot run."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper  # noqa: E402

import fnx  # noqa: E402
from fnx.errors import ConcretizationError  # noqa: E402
from fnx.onnx import UnsupportedOnnxOpError  # noqa: E402
from fnx.testing import check_grads  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _x64():
    with fnx.enable_x64(True):  # the models compute in float64, as ONNX's backend runs them
        yield


def _vi(name, x):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(x.dtype),
                                         x.shape)


def _model(nodes, inputs, outputs, opset=22, types=None):
    """A model of ``nodes`` whose graph inputs are ``inputs`` ({name: array}) and whose
    outputs are ``outputs`` ({name: shape}; float64 unless ``types`` says otherwise)."""
    types = types or {}
    g = helper.make_graph(nodes, "g", [_vi(k, v) for k, v in inputs.items()],
                          [helper.make_tensor_value_info(o, types.get(o, T.DOUBLE), shape)
                           for o, shape in outputs.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _f64(*shape):
    return RNG.standard_normal(shape)


def _check(model, args, diff):
    """check_grads of the model's outputs in the inputs at positions ``diff``."""
    apply, params = fnx.onnx.to_function(model)

    def f(*xs):
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        out = apply(params, *full)
        return out if not isinstance(out, dict) else tuple(out[k] for k in sorted(out))
    check_grads(f, tuple(args[i] for i in diff), order=1, modes=("rev",))


def _recurrent_case(op, gates, attrs, seq=4, batch=2, inp=3, hidden=3, dirs=1):
    ins = {"X": _f64(seq, batch, inp), "W": _f64(dirs, gates * hidden, inp) * 0.5,
           "R": _f64(dirs, gates * hidden, hidden) * 0.5, "B": _f64(dirs, 2 * gates * hidden),
           "L": np.array([seq, seq - 2][:batch], np.int32),
           "H": _f64(dirs, batch, hidden)}
    names = ["X", "W", "R", "B", "L", "H"]
    outs = {"Y": [seq, dirs, batch, hidden], "Y_h": [dirs, batch, hidden]}
    if op == "LSTM":
        ins["C"] = _f64(dirs, batch, hidden)
        ins["P"] = _f64(dirs, 3 * hidden)
        names += ["C", "P"]
        outs["Y_c"] = [dirs, batch, hidden]
    node = helper.make_node(op, names, list(outs), hidden_size=hidden, **attrs)
    return _model([node], ins, outs), list(ins.values())


@pytest.mark.parametrize("op,gates,attrs,dirs", [
    ("LSTM", 4, dict(direction="bidirectional", clip=2.0), 2),
    ("GRU", 3, dict(direction="reverse", linear_before_reset=1), 1),
    ("RNN", 1, dict(activations=["LeakyRelu"], activation_alpha=[0.3]), 1),
])
def test_recurrent_grads_with_sequence_lens(op, gates, attrs, dirs):
    model, args = _recurrent_case(op, gates, attrs, dirs=dirs)
    _check(model, args, [0, 1, 2, 3, 5])


def test_lstm_sequence_lens_stops_each_sequence():
    model, args = _recurrent_case("LSTM", 4, dict(direction="bidirectional"), dirs=2)
    out = fnx.onnx.load(model)(*args)
    y = np.asarray(out["Y"])
    assert np.all(y[2:, :, 1] == 0)  # the second sequence has 2 steps
    # its forward state stops at step 2; its reverse output at t=0 is its final state
    np.testing.assert_allclose(np.asarray(out["Y_h"])[0, 1], y[1, 0, 1])
    np.testing.assert_allclose(np.asarray(out["Y_h"])[1, 1], y[0, 1, 1])
    jitted = fnx.jit(lambda *a: fnx.onnx.load(model)(*a))(*args)
    for k in out:
        np.testing.assert_allclose(np.asarray(jitted[k]), np.asarray(out[k]), rtol=1e-12)


def test_recurrent_unknown_activation_is_a_clear_error():
    model, args = _recurrent_case("RNN", 1, dict(activations=["Swish"]))
    with pytest.raises(UnsupportedOnnxOpError, match="activation 'Swish'"):
        fnx.onnx.load(model)(*args)


def _loop_model(cond_computed):
    """y = y * x + 1 for up to M steps (while sum(y) < 50 when ``cond_computed``), the
    y of each step stacked unless the condition is computed."""
    i_in = helper.make_tensor_value_info("i", T.INT64, [])
    c_in = helper.make_tensor_value_info("c", T.BOOL, [])
    y_in = helper.make_tensor_value_info("y", T.DOUBLE, [3])
    nodes = [helper.make_node("Mul", ["y", "x"], ["yx"]),
             helper.make_node("Constant", [], ["one"], value_float=1.0),
             helper.make_node("CastLike", ["one", "yx"], ["one64"]),
             helper.make_node("Add", ["yx", "one64"], ["y_out"])]
    outs = [helper.make_tensor_value_info("c_out", T.BOOL, []),
            helper.make_tensor_value_info("y_out", T.DOUBLE, [3])]
    if cond_computed:
        nodes += [helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
                  helper.make_node("Constant", [], ["lim"],
                                   value=helper.make_tensor("lim", T.DOUBLE, [], [50.0])),
                  helper.make_node("Less", ["s", "lim"], ["c_out"])]
    else:
        nodes += [helper.make_node("Identity", ["c"], ["c_out"]),
                  helper.make_node("Identity", ["y_out"], ["scan"])]
        outs.append(helper.make_tensor_value_info("scan", T.DOUBLE, [3]))
    body = helper.make_graph(nodes, "body", [i_in, c_in, y_in], outs)
    m = helper.make_node("Constant", [], ["M"],
                         value=helper.make_tensor("M", T.INT64, [], [4]))
    t = helper.make_node("Constant", [], ["T"],
                         value=helper.make_tensor("T", T.BOOL, [], [True]))
    loop_outs = {"y_final": [3]} if cond_computed else {"y_final": [3], "ys": [4, 3]}
    loop = helper.make_node("Loop", ["M", "T", "y0"], list(loop_outs), body=body)
    return _model([m, t, loop], {"y0": _f64(3), "x": _f64(3)}, loop_outs, opset=21)


def test_loop_with_fixed_trip_count_differentiates_as_a_scan():
    model = _loop_model(cond_computed=False)
    y0, x = np.array([0.5, -0.3, 0.2]), np.array([1.1, 0.7, -0.9])
    _check(model, [y0, x], [0, 1])
    out = fnx.onnx.load(model)(y0, x)
    want, ys = y0, []
    for _ in range(4):
        want = want * x + 1
        ys.append(want)
    np.testing.assert_allclose(np.asarray(out["y_final"]), want)
    np.testing.assert_allclose(np.asarray(out["ys"]), np.stack(ys))


def test_loop_with_computed_condition_is_a_while_loop_under_jit():
    model = _loop_model(cond_computed=True)
    f = fnx.onnx.load(model)
    y0, x = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    want = y0
    for _ in range(4):
        want = want * x + 1
        if want.sum() >= 50:
            break
    np.testing.assert_allclose(np.asarray(f(y0, x)), want)
    np.testing.assert_allclose(np.asarray(fnx.jit(f.__call__)(y0, x)), want)


def _if_model(same_shapes):
    then_out = helper.make_tensor_value_info("t", T.DOUBLE, [3])
    else_out = helper.make_tensor_value_info("e", T.DOUBLE, [3] if same_shapes else [])
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["t"])], "then", [],
                               [then_out])
    else_nodes = ([helper.make_node("Sin", ["x"], ["e"])] if same_shapes else
                  [helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)])
    else_g = helper.make_graph(else_nodes, "else", [], [else_out])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Constant", [], ["z"],
                              value=helper.make_tensor("z", T.DOUBLE, [], [0.0])),
             helper.make_node("Greater", ["s", "z"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    return _model(nodes, {"x": _f64(3)}, {"y": [3] if same_shapes else []}, opset=21)


def test_if_on_a_computed_condition_differentiates_through_cond():
    model = _if_model(same_shapes=True)
    for x in (np.array([0.5, 1.0, -0.2]), np.array([-0.5, 0.1, -0.2])):
        _check(model, [x], [0])
        f = fnx.onnx.load(model)
        np.testing.assert_allclose(np.asarray(fnx.jit(f.__call__)(x)), np.asarray(f(x)))


def test_if_with_branches_of_different_shapes_needs_a_known_condition():
    f = fnx.onnx.load(_if_model(same_shapes=False))
    x = np.array([-0.5, 0.1, -0.2])
    assert np.asarray(f(x)).shape == ()  # eagerly the condition is known
    with pytest.raises(ConcretizationError, match="different types or shapes"):
        fnx.jit(f.__call__)(x)


def test_scan_with_axes_and_directions_differentiates():
    s_in = helper.make_tensor_value_info("s", T.DOUBLE, [2])
    x_in = helper.make_tensor_value_info("xt", T.DOUBLE, [2])
    body = helper.make_graph(
        [helper.make_node("Mul", ["s", "xt"], ["p"]),
         helper.make_node("Add", ["p", "xt"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y"])], "body", [s_in, x_in],
        [helper.make_tensor_value_info("s_out", T.DOUBLE, [2]),
         helper.make_tensor_value_info("y", T.DOUBLE, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body,
                            num_scan_inputs=1, scan_input_axes=[1],
                            scan_input_directions=[1], scan_output_axes=[-1])
    s0, x = _f64(2) * 0.5, _f64(2, 5) * 0.5
    model = _model([node], {"s0": s0, "x": x}, {"s_final": [2], "ys": [2, 5]}, opset=21)
    with fnx.enable_x64(True):
        out = fnx.onnx.load(model)(s0, x)
    s, ys = s0, []
    for t in reversed(range(5)):
        s = s * x[:, t] + x[:, t]
        ys.append(s)
    np.testing.assert_allclose(np.asarray(out["s_final"]), s)
    np.testing.assert_allclose(np.asarray(out["ys"]), np.stack(ys, axis=-1))
    _check(model, [s0, x], [0, 1])


def test_attention_grads_gqa_causal_masked_softcap():
    q, k, v = _f64(1, 4, 3, 4), _f64(1, 2, 5, 4), _f64(1, 2, 5, 3)
    mask = _f64(3, 5)
    pk, pv = _f64(1, 2, 2, 4), _f64(1, 2, 2, 3)
    node = helper.make_node("Attention", ["Q", "K", "V", "M", "PK", "PV"],
                            ["Y", "PK_out", "PV_out", "QK"], is_causal=1, softcap=3.0,
                            qk_matmul_output_mode=1)
    mask = np.concatenate([_f64(3, 2), mask], axis=1)
    model = _model([node], {"Q": q, "K": k, "V": v, "M": mask, "PK": pk, "PV": pv},
                   {"Y": [1, 4, 3, 3], "PK_out": [1, 2, 7, 4], "PV_out": [1, 2, 7, 3],
                    "QK": [1, 4, 3, 7]}, opset=23)
    _check(model, [q, k, v, mask, pk, pv], [0, 1, 2, 4, 5])


def test_tensor_scatter_with_computed_write_indices_under_jit_and_grad():
    past, upd = _f64(2, 3, 6, 2), _f64(2, 3, 2, 2)
    w = np.array([5, 1], np.int64)
    node = helper.make_node("TensorScatter", ["P", "U", "W"], ["Y"], mode="circular")
    model = _model([node], {"P": past, "U": upd, "W": w}, {"Y": [2, 3, 6, 2]}, opset=24)
    f = fnx.onnx.load(model)
    want = past.copy()
    for b in range(2):
        for s in range(2):
            want[b, :, (w[b] + s) % 6] = upd[b, :, s]
    np.testing.assert_allclose(np.asarray(fnx.jit(f.__call__)(past, upd, w)), want)
    _check(model, [past, upd, w], [0, 1])


def test_sequences_round_trip_under_jit():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1, keepdims=0),
             helper.make_node("SequenceErase", ["seq"], ["seq2"]),
             helper.make_node("SequenceLength", ["seq2"], ["n"]),
             helper.make_node("ConcatFromSequence", ["seq2"], ["y"], axis=0, new_axis=1)]
    x = _f64(2, 4)
    model = _model(nodes, {"x": x}, {"y": [3, 2], "n": []}, opset=21, types={"n": T.INT64})
    f = fnx.onnx.load(model)
    out = fnx.jit(f.__call__)(x)
    np.testing.assert_allclose(np.asarray(out["y"]), x[:, :3].T, rtol=1e-6)
    assert int(out["n"]) == 3
