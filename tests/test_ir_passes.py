"""IR simplification passes run before lowering: ``simplify`` (exact algebraic
identities), ``cse`` and ``dce``. Each rewrite must leave jit bitwise equal to eager,
NaN, infinities and signed zeros included, and must not fire where it would not be."""
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core.ir import IR, Eqn, Var, cse, optimize, simplify
from fnx.lax import elementwise as ew
from fnx.lax import shape as sh
from fnx.testing import strategies as fst

F32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.25, 1e-45, 3e38],
               np.float32).reshape(3, 3)
F64 = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-310, -7.5, 1e308],
               np.float64).reshape(3, 3)
F64_X64 = pytest.param(F64, marks=pytest.mark.x64)  # float64 exists under x64 (off: float32)
I32 = np.array([0, -1, 1, 7, -7, np.iinfo(np.int32).min, np.iinfo(np.int32).max, 2, -2],
               np.int32).reshape(3, 3)
U8 = np.array([0, 1, 2, 127, 128, 254, 255, 3, 4], np.uint8).reshape(3, 3)
C64 = np.array([complex(np.inf, 1), complex(1, np.inf), complex(np.nan, 0), -0.0, 1j,
                complex(-0.0, -0.0), 2, 3, 4], np.complex64).reshape(3, 3)


def count(text, name):
    """How many equations of primitive ``name`` the printed IR has."""
    return len(re.findall(rf"= {re.escape(name)}[\[ ]", text))


def bits(a):
    if isinstance(a, (tuple, list)):
        return [bits(b) for b in a]
    a = np.asarray(a)
    return a.dtype, a.shape, a.tobytes()


def check(f, *args, gone=(), kept=()):
    """``f``'s IR has no equation of the primitives in ``gone`` (and some of those in
    ``kept``), and jit(f) is bitwise eager f."""
    args = [fnp.asarray(a) for a in args]
    text = str(fnx.make_ir(f)(*args))
    for name in gone:
        assert count(text, name) == 0, f"{name} left in\n{text}"
    for name in kept:
        assert count(text, name) >= 1, f"{name} removed from\n{text}"
    assert bits(fnx.jit(f)(*args)) == bits(f(*args))
    return text


# --- arithmetic identities -------------------------------------------------------

@pytest.mark.parametrize("x", [F32, F64_X64, I32, U8], ids=["f32", "f64", "i32", "u8"])
def test_div_by_one_removed(x):
    check(lambda x: lax.div(x, np.ones((), x.dtype)[()]), x, gone=["div"])
    check(lambda x: lax.div(x, fnp.ones(x.shape, x.dtype)), x, gone=["div", "broadcast_in_dim"])
    text = fnx.jit(lambda x: lax.div(x, np.ones((), x.dtype)[()])).lower(x).as_text()
    assert "div" not in text and "divide" not in text


def test_complex_div_by_one_kept():
    check(lambda x: lax.div(x, np.complex64(1)), C64, kept=["div"])


@pytest.mark.parametrize("x", [F32, F64_X64, I32, U8], ids=["f32", "f64", "i32", "u8"])
def test_sub_positive_zero_removed(x):
    zero = np.zeros((), x.dtype)[()]
    check(lambda x: lax.sub(x, zero), x, gone=["sub"])
    check(lambda x: x - fnp.zeros_like(x), x, gone=["sub", "broadcast_in_dim"])


def test_sub_negative_zero_kept():
    # x - (-0.0) turns -0.0 into +0.0
    text = check(lambda x: lax.sub(x, np.float32(-0.0)), F32, kept=["sub"])
    assert "sub" in text
    assert np.signbit(fnx.jit(lambda x: lax.sub(x, np.float32(-0.0)))(np.float32(-0.0))) == 0


def test_zero_minus_x_kept():
    check(lambda x: lax.sub(np.float32(0.0), x), F32, kept=["sub"])


@pytest.mark.parametrize("x", [F32, F64_X64], ids=["f32", "f64"])
def test_float_add_negative_zero_removed(x):
    nz = np.array(-0.0, x.dtype)[()]
    check(lambda x: lax.add(x, nz), x, gone=["add"])
    check(lambda x: lax.add(nz, x), x, gone=["add"])
    check(lambda x: x + fnp.full(x.shape, -0.0, x.dtype), x, gone=["add", "broadcast_in_dim"])


@pytest.mark.parametrize("x", [I32, U8], ids=["i32", "u8"])
def test_int_add_zero_removed(x):
    zero = np.zeros((), x.dtype)[()]
    check(lambda x: lax.add(x, zero), x, gone=["add"])
    check(lambda x: lax.add(zero, x), x, gone=["add"])
    check(lambda x: fnp.zeros_like(x) + x, x, gone=["add", "broadcast_in_dim"])


@pytest.mark.parametrize("x", [F32, F64_X64], ids=["f32", "f64"])
def test_float_add_positive_zero_kept(x):
    check(lambda x: x + 0.0, x, kept=["add"])
    check(lambda x: 0.0 + x, x, kept=["add"])
    check(lambda x: x + fnp.zeros_like(x), x, kept=["add"])
    zero = x.dtype.type
    out = fnx.jit(lambda x: x + 0.0)(fnp.asarray(zero(-0.0)))
    assert bits(out) == bits(zero(-0.0) + zero(0.0))  # +0.0, as NumPy
    assert not np.signbit(np.asarray(out))


def test_mul_by_one_removed_and_complex_kept():
    check(lambda x: x * 1, F32, gone=["mul"])
    check(lambda x: 1 * x, I32, gone=["mul"])
    check(lambda x: x * fnp.ones_like(x), F64, gone=["mul", "broadcast_in_dim"])
    check(lambda x: x * 1, C64, kept=["mul"])
    check(lambda x: x * fnp.ones_like(x), C64, kept=["mul"])


def test_type_changing_identity_kept():
    # weak x * strong 1 is strong: replacing it by x would change the output's type
    from fnx.core.ir import Literal
    weak, strong = (fnx.ShapeDtypeStruct((), np.float32, w) for w in (True, False))
    x, out = Var(weak), Var(strong)
    one = Literal(np.float32(1), strong)
    for prim in (ew.mul_p, ew.div_p):
        ir = simplify(IR([x], [out], [Eqn(prim, [x, one], [out], {})]))
        assert len(ir.eqns) == 1 and ir.outvars == [out]


# --- neg, transpose, reshape, conversions ---------------------------------------------

@pytest.mark.parametrize("x", [F32, F64_X64, I32, U8], ids=["f32", "f64", "i32", "u8"])
def test_double_neg_removed(x):
    check(lambda x: lax.neg(lax.neg(x)), x, gone=["neg"])
    text = check(lambda x: lax.neg(lax.neg(lax.neg(x))), x)
    assert count(text, "neg") == 1


def test_transpose_of_transpose():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x[0, 0, :] = [np.nan, -0.0, np.inf, -np.inf]
    check(lambda x: lax.transpose(lax.transpose(x, (1, 2, 0)), (2, 0, 1)), x,
          gone=["transpose"])
    text = check(lambda x: lax.transpose(lax.transpose(x, (1, 2, 0)), (1, 0, 2)), x)
    assert count(text, "transpose") == 1 and "permutation=(2, 1, 0)" in text
    text = check(lambda x: x.T.T.T, x)
    assert count(text, "transpose") == 1
    check(lambda x: sh.transpose_p.bind(x, permutation=(0, 1, 2)), x, gone=["transpose"])


def test_transpose_inner_still_used_kept():
    x = F32
    text = check(lambda x: (x.T, x.T.T), x)
    assert count(text, "transpose") == 1


def test_reshape_of_reshape():
    x = F64
    text = check(lambda x: lax.reshape(lax.reshape(x, (9,)), (1, 9)), x)
    assert count(text, "reshape") == 1
    check(lambda x: lax.reshape(lax.reshape(x, (9,)), (3, 3)), x, gone=["reshape"])
    check(lambda x: sh.reshape_p.bind(x, new_sizes=(3, 3), dimensions=None), x,
          gone=["reshape"])
    # a reshape with a dimensions permutation is not merged or dropped
    text = check(lambda x: lax.reshape(lax.reshape(x, (9,), (1, 0)), (3, 3)), x)
    assert count(text, "reshape") == 2


def test_convert_to_own_type_removed():
    check(lambda x: ew.convert_element_type_p.bind(x, new_dtype=np.dtype("float32"),
                                                   weak_type=False), F32,
          gone=["convert_element_type"])
    check(lambda x: lax.convert_element_type(x, np.int32), I32, gone=["convert_element_type"])
    # with x64 off a float64 request means float32 (as in JAX): the same type, removed
    check(lambda x: lax.convert_element_type(x, np.float64), F32, gone=["convert_element_type"])
    # to another dtype, or to the weak version of the same one: kept
    check(lambda x: lax.convert_element_type(x, np.float16), F32,
          kept=["convert_element_type"])
    check(lambda x: ew.convert_element_type_p.bind(x, new_dtype=np.dtype("float32"),
                                                   weak_type=True), F32,
          kept=["convert_element_type"])


def test_noop_shape_ops_removed():
    check(lambda x: sh.broadcast_in_dim_p.bind(x, shape=(3, 3), broadcast_dimensions=(0, 1)),
          F32, gone=["broadcast_in_dim"])
    check(lambda x: sh.squeeze_p.bind(x, dimensions=()), F32, gone=["squeeze"])
    check(lambda x: sh.expand_dims_p.bind(x, dimensions=()), F32, gone=["expand_dims"])
    check(lambda x: sh.broadcast_in_dim_p.bind(x, shape=(2, 3, 3),
                                               broadcast_dimensions=(1, 2)),
          F32, kept=["broadcast_in_dim"])


# --- cse ------------------------------------------------------------------------------

def test_cse_sin_once():
    text = check(lambda x: fnp.sin(x) + fnp.sin(x), F32)
    assert count(text, "sin") == 1
    text = check(lambda x: fnp.sin(x) + fnp.cos(x), F32)
    assert count(text, "sin") == 1 and count(text, "cos") == 1


def test_cse_chains_and_literals():
    f = lambda x: fnp.exp(fnp.sin(x) * 2.0) - fnp.exp(fnp.sin(x) * 2.0)  # noqa: E731
    text = check(f, F64)
    assert count(text, "exp") == 1 and count(text, "mul") == 1 and count(text, "sin") == 1
    text = check(lambda x: lax.sub(x, np.float32(-0.0)) * lax.sub(x, np.float32(0.0)), F32)
    # x - 0.0 is x, x - (-0.0) is not: literals differing only in sign are not merged
    assert count(text, "sub") == 1


def test_cse_outputs_and_params():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    text = check(lambda x: (fnp.sum(x, 0), fnp.sum(x, 0), fnp.sum(x, 1)), x)
    assert count(text, "reduce_sum") == 2
    ir = fnx.make_ir(lambda x: (fnp.sin(x), fnp.sin(x)))(x)
    assert ir.outvars[0] is ir.outvars[1]


def test_cse_unit():
    a = Var(fnx.ShapeDtypeStruct((3,), np.float32))
    b1, b2, c = (Var(a.aval) for _ in range(3))
    ir = IR([a], [c], [Eqn(ew.sin_p, [a], [b1], {}), Eqn(ew.sin_p, [a], [b2], {}),
                       Eqn(ew.add_p, [b1, b2], [c], {})])
    out = cse(ir)
    assert len(out.eqns) == 2 and out.eqns[1].inputs == [b1, b1]
    assert len(optimize(ir).eqns) == 2
    assert simplify(IR([a], [a], [])).outvars == [a]


def test_cse_keeps_random_draws_with_different_keys():
    k1, k2 = fnx.random.split(fnx.random.PRNGKey(0))

    def f(k1, k2):
        return fnx.random.normal(k1, (3,)), fnx.random.normal(k2, (3,))
    a, b = fnx.jit(f)(k1, k2)
    assert not np.array_equal(np.asarray(a), np.asarray(b))
    assert bits(fnx.jit(f)(k1, k2)) == bits(f(k1, k2))


def test_grad_unchanged():
    f = lambda x: fnp.sum(fnp.sin(x) * fnp.sin(x) + x.T.T)  # noqa: E731
    x = np.linspace(-1, 1, 9).reshape(3, 3)
    assert bits(fnx.jit(fnx.grad(f))(x)) == bits(fnx.grad(f)(x))


# --- random expression trees: jit is bitwise eager --------------------------------------

_UNARY = {
    "neg": lax.neg, "sin": fnp.sin, "T": lambda x: x.T, "add0": lambda x: x + 0.0,
    "addm0": lambda x: x + (-0.0), "sub0": lambda x: x - 0.0, "subm0": lambda x: x - (-0.0),
    "mul1": lambda x: x * 1, "div1": lambda x: x / 1, "onesmul": lambda x: x * fnp.ones_like(x),
    "reshape": lambda x: lax.reshape(lax.reshape(x, (x.size,)), x.shape),
    "convert": lambda x: lax.convert_element_type(x, x.dtype),
}
_BINARY = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b}

_program = st.lists(st.one_of(
    st.tuples(st.sampled_from(sorted(_UNARY)), st.integers(0, 20)),
    st.tuples(st.sampled_from(sorted(_BINARY)), st.integers(0, 20), st.integers(0, 20))),
    min_size=1, max_size=12)


def _run(program, x, y):
    vals = [x, y]
    for op in program:
        if op[0] in _UNARY:
            vals.append(_UNARY[op[0]](vals[op[1] % len(vals)]))
        else:
            vals.append(_BINARY[op[0]](vals[op[1] % len(vals)], vals[op[2] % len(vals)]))
    return vals[-3:]


@given(program=_program, dtype=st.sampled_from(["float32", "float64"]), data=st.data())
def test_random_expressions_bitwise(program, dtype, data):
    arr = fst.arrays(dtype, (3, 3), allow_nan=True, allow_infinity=True)
    with fnx.enable_x64(dtype == "float64"):          # float64 exists under x64
        x, y = fnp.asarray(data.draw(arr)), fnp.asarray(data.draw(arr))
        assert x.dtype == dtype
        f = lambda x, y: _run(program, x, y)  # noqa: E731
        got, want = fnx.jit(f)(x, y), f(x, y)
        assert bits(got) == bits(want)
