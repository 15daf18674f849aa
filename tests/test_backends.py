"""The backend seam: the Backend interface, the backend and lowering registries, and
jit/cond/while reaching backends only through them."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.backends import (Backend, available_backends, backend_for, get_backend, lowering,
                          register_backend, register_lowering)
from fnx.core import backend as core_backend
from fnx.extend import Primitive, ShapeDtypeStruct


def test_numpy_backend_compiles_an_ir_into_a_function_over_buffers():
    ir = fnx.make_ir(lambda x, y: fnp.sin(x) * y)(ShapeDtypeStruct((3,), "float32"),
                                                  ShapeDtypeStruct((3,), "float32"))
    b = get_backend("numpy")
    assert b.name == "numpy" and b.platform == "cpu" and "numpy" in available_backends()
    exe = b.compile(ir, "f")
    x = np.arange(3, dtype=np.float32)
    (out,) = exe.fn(x, np.full(3, 2, np.float32))
    np.testing.assert_allclose(out, np.sin(x) * 2, rtol=1e-6)
    assert "def _fnx_f" in exe.source
    assert b.executable(ir) is b.executable(ir)  # cached per IR
    assert isinstance(b.wrap(out), fnx.Array) and b.owns(out) and not b.owns([1.0])
    assert backend_for([out]) is b and backend_for([]) is b


def test_get_backend_names_the_known_ones():
    with pytest.raises(ValueError, match=r"no backend named 'tpu'.*'numpy'"):
        get_backend("tpu")


def test_onnx_backend_compiles_to_a_checked_model():
    pytest.importorskip("onnx")
    ir = fnx.make_ir(lambda x: fnp.tanh(x) + 1)(ShapeDtypeStruct((2, 3), "float32"))
    exe = get_backend("onnx").compile(ir, "g")
    assert [n.op_type for n in exe.model.graph.node][0] == "Tanh"


def test_lowerings_are_one_registry_per_primitive_and_backend():
    p = Primitive("test_backends_double", shape_rule=lambda x: x, impl=lambda x: x * 2)
    assert lowering(p, "onnx") is None and p.onnx is None
    rule = register_lowering(p, "onnx", lambda ctx, x: ctx.node("Add", [x, x]))
    assert lowering(p, "onnx") is rule and p.onnx is rule   # prim.onnx is the same entry
    p.kernel = lambda xs, ins, out: f"2 * {xs[0]}"
    assert lowering(p, "cuda") is p.kernel
    p.kernel = None
    assert lowering(p, "cuda") is None and "cuda" not in p.lowerings
    with pytest.raises(TypeError, match="expected a Primitive"):
        register_lowering("sin", "onnx", rule)
    with pytest.raises(TypeError, match="must be callable"):
        register_lowering(p, "onnx", "Add")
    # the built-ins' rules are in the same registry
    assert lowering(lax.sin_p, "onnx") is lax.sin_p.onnx is not None
    assert lowering(lax.sin_p, "cuda") is lax.sin_p.kernel is not None


def test_a_new_backend_registers_and_is_listed_where_available():
    class Interpreter(Backend):
        """Runs an IR one equation at a time (eval_ir), on host buffers it never owns."""
        name, platform = "test_interpreter", "cpu"

        def compile(self, ir, name="jit", donated=()):
            from fnx.core.ir import eval_ir
            return core_backend.Executable(
                lambda *xs: [o._value for o in eval_ir(ir, *map(fnx.Array._wrap, xs))],
                None, self)

        def available(self):
            return True

    try:
        b = register_backend(Interpreter())
        assert get_backend("test_interpreter") is b
        assert "test_interpreter" in available_backends()
        ir = fnx.make_ir(lambda x: x * 3.0)(ShapeDtypeStruct((2,), "float32"))
        np.testing.assert_array_equal(b.executable(ir).fn(np.ones(2, np.float32))[0], [3, 3])
        # it owns no buffer, so jit still picks numpy for host arrays
        assert backend_for([np.ones(2)]).name == "numpy"
        with pytest.raises(TypeError, match="named fnx.backends.Backend"):
            register_backend(object())
    finally:
        gone = core_backend._BACKENDS.pop("test_interpreter", None)
        if gone in core_backend.DEVICE_BACKENDS:
            core_backend.DEVICE_BACKENDS.remove(gone)


def test_clear_caches_empties_the_backends_executable_caches():
    f = fnx.jit(lambda x: lax.cond(x.sum() > 0, lambda: x + 1, lambda: x - 1))
    f(fnp.ones(3))
    assert len(get_backend("numpy").executables) > 0
    fnx.clear_caches()
    assert len(get_backend("numpy").executables) == 0
    assert f(fnp.ones(3)).tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length,with_xs", [(5, True), (0, True), (4, False)])
def test_the_default_scan_loop_of_a_backend_matches_numpys(reverse, length, with_xs):
    class Plain(Backend):
        """Compiles with the NumPy lowering but keeps Backend's own run_scan."""
        name, platform = "test_plain", "cpu"

        def compile(self, ir, name="jit", donated=()):
            return get_backend("numpy").compile(ir, name, donated)

        def put(self, value):
            return np.asarray(value)

        def fetch(self, buffer):
            return np.asarray(buffer)

    def body(k, c, *x):  # one const, one carry, and (with_xs) one x per step
        c = c * k + (x[0].sum() if x else 1.0)
        return c, c * 2.0, fnp.stack([c, c + 1]).astype("int32")

    f32 = ShapeDtypeStruct((), "float32")
    x_aval = [ShapeDtypeStruct((3,), "float32")] if with_xs else []
    ir = fnx.make_ir(body)(f32, f32, *x_aval)
    p = dict(num_consts=1, num_carry=1, length=length, reverse=reverse)
    ins = [np.float32(0.5), np.float32(1.0)]
    if with_xs:
        ins.append(np.arange(length * 3, dtype=np.float32).reshape(length, 3))
    want = get_backend("numpy").run_scan(ir, ins, **p)
    got = Plain().run_scan(ir, ins, **p)
    assert len(got) == len(want) == 3
    assert got[2].shape == (length, 2) and got[2].dtype == np.int32
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
