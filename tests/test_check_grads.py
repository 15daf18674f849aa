"""``fnx.testing.check_grads``: passes on correct derivatives, fails loudly on wrong ones.

The wrong derivatives are built with ``fnx.custom_jvp`` (a wrong jvp rule: forward
mode, and reverse mode, which fnx derives from it, must both fail) and
``fnx.custom_vjp`` (a wrong backward pass: reverse mode must fail). The
messages must name the mode, the order, the argument and the output.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import FnxError
from fnx.testing import check_grads, default_tolerances

F32, F64 = np.float32, np.float64


def _x(shape=(2, 3), dtype=F32, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


# --- correct functions pass -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("modes", [("fwd",), ("rev",), ("fwd", "rev")])
def test_polynomial_and_tanh_pass(dtype, order, modes):
    x = _x(dtype=dtype)
    check_grads(lambda x: 3 * x ** 3 - 2 * x ** 2 + x - 1, (x,), order=order, modes=modes)
    check_grads(fnp.tanh, (x,), order=order, modes=modes)
    check_grads(lambda x, y: fnp.tanh(x * y) + y ** 2, (x, _x(dtype=dtype, seed=1)),
                order=order, modes=modes)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_matmul_and_pytrees_of_params_pass(dtype):
    params = {"w1": _x((3, 4), dtype, seed=1), "b1": _x((4,), dtype, seed=2),
              "layers": [_x((4, 2), dtype, seed=3), _x((2,), dtype, seed=4)]}
    x = _x((5, 3), dtype, seed=5)

    def mlp(p, x):
        h = fnp.tanh(x @ p["w1"] + p["b1"])
        w2, b2 = p["layers"]
        return {"logits": h @ w2 + b2, "loss": ((h @ w2 + b2) ** 2).mean()}

    check_grads(mlp, (params, x), order=2)
    check_grads(lambda a, b: a @ b, (_x((2, 3), dtype), _x((3, 4), dtype, seed=7)), order=2)


def test_third_order_and_scalar_python_float():
    check_grads(lambda x: fnp.sin(x) * fnp.exp(x), (_x((3,), F64),), order=3)
    check_grads(lambda x: fnp.sin(x) * 2.0, (0.3,), order=2)     # a Python float argument


def test_a_large_third_derivative_is_not_taken_for_a_wrong_rule():
    """x**-3 near 0: D(h)'s h**2 error term exceeds the float64 tolerance there (this failed
    check_op on a 1 x 1 matrix of 0.0188). The Richardson second opinion, (4 D(h) - D(2h)) /
    3, removes it; a rule off by 1e-3 there still fails."""
    with fnx.enable_x64():
        x = np.array([0.0188, 1.07])
        check_grads(lambda x: x ** -3, (x,), order=2)

        @fnx.custom_jvp
        def cube_inverse(x):
            return x ** -3
        cube_inverse.defjvp(lambda p, t: (p[0] ** -3, -3.003 * p[0] ** -4 * t[0]))
        with pytest.raises(AssertionError, match="fwd mode failed at order 1"):
            check_grads(cube_inverse, (x,), order=1)


def test_complex_inputs_and_outputs():
    z = (_x((3,), F64) + 1j * _x((3,), F64, seed=1)).astype(np.complex128)
    check_grads(lambda z: fnp.exp(z) * z, (z,), order=2)          # holomorphic
    check_grads(lambda z: (z * fnp.conj(z)).real, (z,), order=2)  # |z|^2: not holomorphic
    check_grads(lambda x: fnp.exp(1j * x), (_x((3,), F64),), order=2)  # real -> complex
    check_grads(lambda z: fnp.exp(z) * z, (z.astype(np.complex64),), order=1)


def test_float16_and_a_function_that_rejects_float64_inputs():
    check_grads(lambda x: fnp.sin(x) * x, (_x((4,), np.float16),), order=2)
    c = fnx.Array(_x((4,), F32, seed=3))
    # lax is strict about dtypes: float64 inputs raise, so the reference is computed in
    # float32 with the dtype's own (larger) step and looser tolerance.
    check_grads(lambda x: fnx.lax.mul(fnx.lax.sin(x), c), (_x((4,), F32),), order=2)


def test_jitted_functions_and_pytree_outputs():
    params = {"w": _x((3, 2), F32), "b": _x((2,), F32, seed=1)}
    f = fnx.jit(lambda p, x: {"y": fnp.tanh(x @ p["w"] + p["b"]), "n": (x ** 2).sum()})
    check_grads(f, (params, _x((4, 3), F32, seed=2)), order=2)


def test_a_failure_in_the_inputs_own_dtype_says_so():
    c = fnx.Array(_x((2, 3), F32, seed=3))
    msg = _fails(lambda x: fnx.lax.mul(sin_wrong_jvp(x), c), (_x(),), modes=("fwd",), order=1)
    assert "evaluated in the inputs' own dtypes (f rejects 64-bit inputs (ShapeError" in msg
    assert "eps=0.001" in msg and "rtol=0.02" in msg


def test_integer_and_static_leaves_are_held_fixed():
    seen = []

    def f(p, n):
        seen.append((np.asarray(p["k"]).dtype, p["k"].shape if hasattr(p["k"], "shape") else (),
                     n))
        return fnp.sin(p["x"]) * p["k"] + p["x"] ** n

    k = np.array([1, 2, 3], np.int32)
    check_grads(f, ({"x": _x((3,), F64), "k": k}, 3), order=2)
    # every call saw the integer leaf and the Python int unchanged
    assert seen and all(s == (np.dtype(np.int32), (3,), 3) for s in seen)
    # a bool leaf and a static exponent: lax.integer_pow wants a Python int
    check_grads(lambda x, n, flip: fnx.lax.integer_pow(x, n) * (-1.0 if flip else 1.0),
                (_x((3,), F64), 3, True), order=2)


def test_integer_outputs_are_not_compared():
    check_grads(lambda x: (fnp.argmax(x), fnp.sort(x) * 2), (_x((5,), F64),), order=2)


def test_nothing_to_differentiate_is_fine():
    check_grads(lambda n: fnp.arange(3) * n, (np.int32(2),))


def test_default_tolerances_depend_on_dtype():
    t32, t64 = default_tolerances(F32), default_tolerances(F64)
    assert t32["rtol"] > t64["rtol"]
    assert default_tolerances(F32, wide_reference=False)["eps"] > t32["eps"]
    assert default_tolerances(np.complex64) == t32
    assert default_tolerances(np.float16)["rtol"] > t32["rtol"]


def test_bad_arguments():
    with pytest.raises(TypeError, match="tuple"):
        check_grads(fnp.sin, np.ones(3))
    with pytest.raises(ValueError, match="modes"):
        check_grads(fnp.sin, (np.ones(3),), modes=("fwd", "backward"))
    with pytest.raises(ValueError, match="order"):
        check_grads(fnp.sin, (np.ones(3),), order=0)


# --- wrong rules fail, with the mode, order, argument and output named ------------------------

@fnx.custom_jvp
def sin_wrong_jvp(x):
    return fnp.sin(x)


@sin_wrong_jvp.defjvp
def _sin_wrong_jvp_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin_wrong_jvp(x), t * fnp.cos(x) * 1.1          # 10% too large


@fnx.custom_jvp
def sin_wrong_second(x):
    return fnp.sin(x)


@sin_wrong_second.defjvp
def _sin_wrong_second_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    # right first derivative, but its own derivative is zero (the cos is frozen)
    return sin_wrong_second(x), t * fnx.lax.stop_gradient(fnp.cos(x))


@fnx.custom_vjp
def sin_wrong_vjp(x):
    return fnp.sin(x)


sin_wrong_vjp.defvjp(lambda x: (fnp.sin(x), x), lambda x, ct: (ct * fnp.cos(x) * 0.9,))


def _model(fn):
    """A pytree function where only params['w'] goes through ``fn``."""
    def f(params, x, n):
        return {"pred": fn(params["w"]) * x, "reg": (params["b"] ** 2).sum() * n}
    return f


def _params(dtype=F32):
    return {"w": _x((2, 3), dtype), "b": _x((3,), dtype, seed=1)}


def _fails(f, args, **kw):
    with pytest.raises(AssertionError) as info:
        check_grads(f, args, **kw)
    return str(info.value)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_wrong_jvp_rule_fails_forward_mode_with_names(dtype):
    msg = _fails(_model(sin_wrong_jvp), (_params(dtype), _x((2, 3), dtype, seed=2), 2),
                 modes=("fwd",))
    assert "fwd mode failed at order 1" in msg
    assert "argument: args[0]['w']" in msg           # index and pytree path
    assert "output:   out['pred']" in msg
    assert "max abs error" in msg and "max rel error" in msg and "rtol=" in msg
    assert f"{'f32' if dtype == F32 else 'f64'}[2,3]" in msg       # shapes and dtypes
    assert "args[2]: int 2 (held fixed: integer)" in msg
    # the relative error of a 10% wrong derivative is reported as such
    rel = float(msg.split("max rel error: ")[1].split()[0])
    assert 0.05 < rel < 0.2


def test_wrong_jvp_rule_also_fails_reverse_mode_and_blames_the_jvp():
    msg = _fails(_model(sin_wrong_jvp), (_params(), _x((2, 3), seed=2), 2), modes=("rev",))
    assert "rev mode failed at order 1" in msg
    assert "argument: args[0]['w']" in msg and "output:   out['pred']" in msg
    assert "the jvp rule is wrong" in msg
    assert "vjp gives" in msg and "finite differences give" in msg


def test_wrong_custom_vjp_bwd_fails_reverse_mode():
    msg = _fails(_model(sin_wrong_vjp), (_params(), _x((2, 3), seed=2), 2), modes=("rev",))
    assert "rev mode failed at order 1" in msg
    assert "argument: args[0]['w']" in msg and "output:   out['pred']" in msg
    assert "fnx.jvp is not available" in msg


@pytest.fixture
def doubling_with_wrong_transpose():
    """A throwaway linear primitive ``2 x`` whose transpose rule gives ``3 ct``; it is taken
    out of the registry again afterwards (the op-table tests enumerate the registry)."""
    from fnx.core.primitive import REGISTRY, Primitive, ShapeDtypeStruct
    from fnx.transforms.jvp import deflinear
    name = "test_check_grads_doubling"
    p = Primitive(name, shape_rule=lambda x: ShapeDtypeStruct(x.shape, x.dtype, x.weak_type),
                  impl=lambda x: x * x.dtype.type(2))
    deflinear(p)
    p.transpose = lambda ct, x: [ct * 3.0]
    try:
        yield lambda x: p.bind(fnx.core.array.to_array(x))
    finally:
        del REGISTRY[name]


def test_wrong_transpose_is_blamed_when_jvp_is_right(doubling_with_wrong_transpose):
    double = doubling_with_wrong_transpose
    f = _model(lambda w: fnp.sin(double(w)))
    args = (_params(), _x((2, 3), seed=2), 2)
    check_grads(f, args, modes=("fwd",))                      # forward mode is right
    msg = _fails(f, args, modes=("rev",))
    assert "rev mode failed at order 1" in msg
    assert "argument: args[0]['w']" in msg and "output:   out['pred']" in msg
    assert "a transpose rule (or a custom_vjp backward pass) is wrong" in msg


def test_wrong_second_derivative_fails_at_order_two_only():
    check_grads(sin_wrong_second, (_x(),), order=1)       # first derivatives are right
    msg = _fails(_model(sin_wrong_second), (_params(), _x((2, 3), seed=2), 2),
                 modes=("fwd",))
    assert "fwd mode failed at order 2" in msg
    assert "checked function: jvp(f)" in msg
    assert "argument: args[0]['w']" in msg
    assert "output:   tangent of out['pred']" in msg
    msg = _fails(_model(sin_wrong_second), (_params(), _x((2, 3), seed=2), 2),
                 modes=("rev",))
    assert "rev mode failed at order 2" in msg
    assert "checked function: vjp(f)" in msg
    assert "argument: args[0]['w']" in msg
    assert "output:   cotangent of args[0]['w']" in msg


def test_forward_mode_of_a_custom_vjp_raises_the_fnx_error_with_a_note():
    with pytest.raises(FnxError, match="forward mode") as info:
        check_grads(sin_wrong_vjp, (_x(),))
    assert any("modes=('rev',)" in n for n in getattr(info.value, "__notes__", []))


def test_failure_is_reproducible_and_seeded():
    a = _fails(sin_wrong_jvp, (_x(),), modes=("fwd",))
    b = _fails(sin_wrong_jvp, (_x(),), modes=("fwd",))
    assert a == b
    c = _fails(sin_wrong_jvp, (_x(),), modes=("fwd",), seed=1)
    assert "seed=1" in c and a != c


def test_non_finite_derivatives_are_reported():
    # sqrt at 0: the jvp is inf, the central differences (reaching negative x) are NaN
    msg = _fails(fnp.sqrt, (np.array([0.0, 1.0]),), modes=("fwd",))
    assert "not finite" in msg


def test_user_tolerances_are_used():
    # a 10% error passes with rtol=0.2 and fails with the default
    check_grads(sin_wrong_jvp, (_x(),), modes=("fwd",), order=1, rtol=0.2)
    msg = _fails(sin_wrong_jvp, (_x(),), modes=("fwd",), order=1, atol=1e-9, rtol=1e-9)
    assert "atol=1e-09 (given)" in msg


def test_importable_without_hypothesis():
    code = ("import builtins\n"
            "real = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name.split('.')[0] == 'hypothesis':\n"
            "        raise ImportError('hypothesis is not installed')\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = imp\n"
            "from fnx.testing import check_grads\n"
            "import fnx.numpy as fnp, numpy as np\n"
            "check_grads(fnp.sin, (np.ones(2),))\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_tolerances_by_dtype_as_jax():
    # JAX's check_grads takes atol/rtol as dicts by dtype (lax_autodiff_test passes them)
    from fnx.test_util import check_grads as jax_check_grads
    x = np.linspace(0.1, 1.0, 5).astype(np.float32)
    jax_check_grads(fnx.numpy.sin, (x,), 2, ["fwd", "rev"],
                    {np.float32: 1e-2, np.float64: 1e-5}, {np.float32: 1e-2})
    jax_check_grads(fnx.numpy.sin, (x,), 1, ["rev"], {np.float64: 1e-5}, {np.float16: 1e-1})
    wrong = lambda v: fnx.numpy.sin(v) + fnx.lax.stop_gradient(v) ** 2
    with pytest.raises(AssertionError):
        jax_check_grads(wrong, (x,), 1, ["fwd"], {np.float32: 1e-3}, {np.float32: 1e-3})


def test_nan_on_both_sides_passes_as_jax():
    # asin outside [-1, 1]: f, its derivatives and the finite differences are all NaN there
    x = np.array([0.1, 0.9, -1.27], np.float32)
    check_grads(fnx.lax.asin, (x,), 2, modes=("fwd", "rev"))
