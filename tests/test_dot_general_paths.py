"""``dot_general``'s NumPy strategies (fnx/lax/linalg_prims.py ``plan``) against a
plain reference, and jit (which binds the same plans, fusing a following
``transpose``) against eager, bitwise.

Strategies: a contraction of size 1 (or none: an outer product) is a broadcast
multiply; size 0 gives zeros; anything else is one (batched) matmul. The
reference is ``np.einsum`` with a subscript string built from the dimension
numbers, in object arithmetic for integers (wrapped to the result dtype), in
float64/complex128 for floats. Where every output element is a single product
(k == 1) the result must be exact: equal to the widened product rounded once,
with the IEEE sign of zero (XOR of the operands' signs; einsum and matmul add
the product to a +0 accumulator and lose it). Sums of several products may
round in another order, so they are compared to within a few ulps of
``k * sum |a||b|``.
"""
from __future__ import annotations

import math
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core import dtypes
from fnx.lax.linalg_prims import plan

BOOL, I8, U8, I32, U32, I64 = (np.dtype(t) for t in ("bool", "int8", "uint8", "int32",
                                                      "uint32", "int64"))
F16, F32, F64, C64, C128 = (np.dtype(t) for t in ("float16", "float32", "float64",
                                                  "complex64", "complex128"))
DTYPES = [BOOL, I8, U8, I32, I64, F16, F32, F64, C64, C128]
if dtypes.bfloat16 is not None:  # only with ml_dtypes
    DTYPES.append(dtypes.bfloat16)
# preferred_element_type choices the shape rule allows (integers never narrow)
WIDER = {BOOL: [I32, F32], I8: [I32, F32], U8: [U32, I32], I32: [I64, F64], I64: [F64],
         F16: [F32], F32: [F64], C64: [C128]}
SPECIAL = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 0.5, -3.0]
SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# The strategies are checked over every dtype, 64-bit ones and float64 references included,
# so the module runs with jax_enable_x64 on (as JAX's suite runs its 64-bit tests);
# test_default_mode_narrows_requested_64_bit_types checks the default (x64 off) mode.
pytestmark = pytest.mark.x64


# --- cases -----------------------------------------------------------------------------------

def _values(draw, dtype, shape, special):
    n = math.prod(shape)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    real = rng.uniform(-10, 10, n)
    if special:
        pick = rng.integers(0, len(SPECIAL) + 2, n)
        real = np.where(pick < len(SPECIAL), np.array(SPECIAL + [0, 0])[pick], real)
    if dtype.kind == "c":
        imag = rng.uniform(-10, 10, n)
        return (real + 1j * imag).reshape(shape).astype(dtype)
    return real.reshape(shape).astype(dtype)


@st.composite
def dot_cases(draw, dtypes_=tuple(DTYPES), k_one=None):
    """``(lhs, rhs, dimension_numbers, preferred_element_type)`` with 0-2 batch,
    contracting and free dims per side in a random order, sides 0-3 (often 1)."""
    dtype = draw(st.sampled_from(dtypes_))
    nb, nc, nl, nr = (draw(st.integers(0, 2)) for _ in range(4))
    side = st.sampled_from([1, 1, 2, 3, 0]) if draw(st.booleans()) else st.integers(1, 4)
    bs = [draw(side) for _ in range(nb)]
    cs = [draw(side) for _ in range(nc)]
    if k_one is True:
        cs = [1] * nc
    ls, rs = [draw(side) for _ in range(nl)], [draw(side) for _ in range(nr)]
    lroles = draw(st.permutations([("b", i) for i in range(nb)] + [("c", i) for i in range(nc)]
                                  + [("l", i) for i in range(nl)]))
    rroles = draw(st.permutations([("b", i) for i in range(nb)] + [("c", i) for i in range(nc)]
                                  + [("r", i) for i in range(nr)]))
    size = {"b": bs, "c": cs, "l": ls, "r": rs}
    lshape = tuple(size[r][i] for r, i in lroles)
    rshape = tuple(size[r][i] for r, i in rroles)
    pos = lambda roles, kind, n: tuple(roles.index((kind, i)) for i in range(n))  # noqa: E731
    dn = ((pos(lroles, "c", nc), pos(rroles, "c", nc)),
          (pos(lroles, "b", nb), pos(rroles, "b", nb)))
    special = draw(st.booleans())
    lhs, rhs = _values(draw, dtype, lshape, special), _values(draw, dtype, rshape, special)
    if draw(st.booleans()):  # operands that are views with other strides
        lhs = np.asfortranarray(lhs)
        if rhs.ndim:
            rhs = rhs[..., ::-1].copy()[..., ::-1]
    pet = draw(st.sampled_from([None] + WIDER.get(dtype, [])))
    return lhs, rhs, dn, pet


# --- reference ---------------------------------------------------------------------------------

def spec(lhs_ndim, rhs_ndim, dn):
    (lc, rc), (lb, rb) = dn
    letters = iter(string.ascii_letters)
    ls, rs, batch = [None] * lhs_ndim, [None] * rhs_ndim, []
    for x, y in zip(lb, rb):
        ls[x] = rs[y] = next(letters)
        batch.append(ls[x])
    for x, y in zip(lc, rc):
        ls[x] = rs[y] = next(letters)
    lf = [ls.__setitem__(i, next(letters)) or ls[i] for i in range(lhs_ndim) if ls[i] is None]
    rf = [rs.__setitem__(i, next(letters)) or rs[i] for i in range(rhs_ndim) if rs[i] is None]
    return f"{''.join(ls)},{''.join(rs)}->{''.join(batch + lf + rf)}"


def _wrap_int(v, dtype):
    info = np.iinfo(dtype)
    span = info.max - info.min + 1
    return (int(v) - info.min) % span + info.min


def check_against_reference(got, lhs, rhs, dn, pet):
    (lc, _), _ = dn
    out = np.dtype(pet) if pet is not None else lhs.dtype
    a, b = (lhs.astype(out), rhs.astype(out)) if pet is not None else (lhs, rhs)
    s = spec(lhs.ndim, rhs.ndim, dn)
    got = np.asarray(got)
    assert isinstance(got, np.ndarray) and got.dtype == out, (type(got), got.dtype, out)
    ref_shape = np.einsum(s, np.zeros(a.shape, np.int8), np.zeros(b.shape, np.int8)).shape
    assert got.shape == ref_shape
    k = math.prod(lhs.shape[d] for d in lc)
    if out.kind in "iu":
        v = np.asarray(np.einsum(s, a.astype(object), b.astype(object)), dtype=object)
        want = np.array([_wrap_int(t, out) for t in v.ravel()], out).reshape(v.shape)
        np.testing.assert_array_equal(got, want)
        return
    if out.kind == "b":
        want = np.einsum(s, a.astype(np.int64), b.astype(np.int64)) != 0
        np.testing.assert_array_equal(got, want)
        return
    w = np.complex128 if out.kind == "c" else np.float64
    with np.errstate(all="ignore"):
        v = np.einsum(s, a.astype(w), b.astype(w))
        want = np.asarray(v.astype(out))
        scale = np.einsum(s, np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    g, e = got.astype(w), want.astype(w)
    both_nan = np.isnan(g) & np.isnan(e)
    if k <= 1 and out.kind == "f":
        # one product per element (or none): exact, sign of zero included
        assert np.array_equal(g, e, equal_nan=True), f"{s}: got\n{got}\nwant\n{want}"
        if k == 1:
            sl = np.einsum(s, np.signbit(a).astype(np.int64), np.ones(b.shape, np.int64))
            sr = np.einsum(s, np.ones(a.shape, np.int64), np.signbit(b).astype(np.int64))
            zero = (e == 0) & ~np.isnan(e)
            assert np.array_equal(np.signbit(got)[zero], ((sl + sr) % 2 == 1)[zero]), \
                f"{s}: sign of zero\n{got}"
        else:
            assert not np.signbit(got).any()  # an empty sum is +0
        return
    eps = float(np.finfo(out).eps) if out != dtypes.bfloat16 else 2.0 ** -7
    tol = 4 * eps * (k + 2) * np.where(np.isfinite(scale), scale, 0)
    for gp, ep in ((g.real, e.real), (g.imag, e.imag)) if out.kind == "c" else ((g, e),):
        # complex products of infinities give NaN or inf parts depending on how the
        # multiply is spelled; only finite parts are compared for complex
        fin = np.isfinite(ep)
        if out.kind != "c":
            assert np.array_equal(np.isnan(gp), np.isnan(ep)), f"{s}: NaNs differ"
            assert np.array_equal(gp[~fin & ~np.isnan(ep)], ep[~fin & ~np.isnan(ep)]), \
                f"{s}: infinities differ"
        with np.errstate(all="ignore"):
            bad = fin & ~(np.abs(gp - ep) <= tol + np.finfo(np.float64).tiny)
        assert not (bad & ~both_nan).any(), f"{s}: got\n{got}\nwant\n{want}"


# --- tests -------------------------------------------------------------------------------------

@SETTINGS
@given(dot_cases())
def test_every_strategy_matches_einsum(case):
    lhs, rhs, dn, pet = case
    out = lax.dot_general(fnp.asarray(lhs), fnp.asarray(rhs), dn, preferred_element_type=pet)
    check_against_reference(out, lhs, rhs, dn, pet)


@SETTINGS
@given(dot_cases(), st.randoms(use_true_random=False))
def test_fused_transpose_is_the_transposed_result(case, rnd):
    """``plan(..., permutation)`` (what jit binds for dot_general -> transpose) gives
    ``np.transpose(plan(...), permutation)``, bitwise."""
    lhs, rhs, dn, pet = case
    with np.errstate(all="ignore"):  # plans are raw: the impl and jit run them quietly
        base = plan(lhs.shape, rhs.shape, dn, pet)(lhs, rhs)
        perm = list(range(base.ndim))
        rnd.shuffle(perm)
        fused = plan(lhs.shape, rhs.shape, dn, pet, tuple(perm))(lhs, rhs)
    want = np.transpose(base, perm)
    assert fused.dtype == want.dtype and fused.shape == want.shape
    assert fused.tobytes() == want.tobytes()
    (lc, _), _ = dn
    if math.prod(lhs.shape[d] for d in lc) == 1:  # the multiply writes the consumer's layout
        assert fused.flags.c_contiguous


def _bitwise(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape)
    assert a.tobytes() == b.tobytes(), f"\n{a!r}\n{b!r}"


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(dot_cases(), st.randoms(use_true_random=False))
def test_jit_equals_eager_bitwise(case, rnd):
    lhs, rhs, dn, pet = case
    L, R = fnp.asarray(lhs), fnp.asarray(rhs)

    def dot(a, b):
        return lax.dot_general(a, b, dn, preferred_element_type=pet)
    eager = dot(L, R)
    perm = list(range(eager.ndim))
    rnd.shuffle(perm)

    def dot_t(a, b):  # the transpose is the dot's only use: jit fuses it
        return lax.transpose(dot(a, b), perm)

    def dot_t_and_more(a, b):  # two uses: no fusion
        d = dot(a, b)
        return lax.transpose(d, perm), d

    _bitwise(fnx.jit(dot)(L, R), eager)
    _bitwise(fnx.jit(dot_t)(L, R), lax.transpose(eager, perm))
    t, d = fnx.jit(dot_t_and_more)(L, R)
    _bitwise(t, lax.transpose(eager, perm))
    _bitwise(d, eager)


@pytest.mark.parametrize("dtype", DTYPES)
def test_size_one_contraction_specials_and_layouts(dtype):
    """The per-example weight gradient shape ((B,1,m) x (B,1,n), batch 0, contract 1)
    and an outer product, with -0, inf and NaN, eager and jit: the IEEE product."""
    if dtype.kind in "fc":
        x = np.array([-1.0, 0.0, -0.0, math.inf, math.nan, 2.0, -math.inf, 3.0])
    else:
        x = np.array([1, 0, 1, 1, 0, 1, 0, 1]) if dtype == BOOL else \
            np.array([-1, 0, 7, 127, -128, 3, 100, -5])
    a = x.astype(dtype, copy=False) if dtype.kind != "u" else np.abs(x).astype(dtype)
    b = a[::-1].copy()
    A, B = a.reshape(2, 1, 4), b.reshape(2, 1, 4)
    dn = (((1,), (1,)), ((0,), (0,)))
    for f in (lambda p, q: lax.dot_general(p, q, dn),
              lambda p, q: lax.transpose(lax.dot_general(p, q, dn), (0, 2, 1))):
        eager = f(fnp.asarray(A), fnp.asarray(B))
        jitted = fnx.jit(f)(fnp.asarray(A), fnp.asarray(B))
        _bitwise(jitted, eager)
    out = np.asarray(lax.dot_general(fnp.asarray(A), fnp.asarray(B), dn))
    with np.errstate(all="ignore"):
        want = A.reshape(2, 4, 1) * B.reshape(2, 1, 4)
    _bitwise(out, want)
    check_against_reference(out, A, B, dn, None)
    outer = np.asarray(fnp.outer(fnp.asarray(a), fnp.asarray(b)))
    with np.errstate(all="ignore"):
        _bitwise(outer, np.multiply.outer(a, b))


def test_integer_overflow_wraps_and_preferred_widens():
    a = np.array([[127, -128]], np.int8).T  # (2, 1)
    b = np.array([[127, 2]], np.int8)       # (1, 2)
    dn = (((1,), (0,)), ((), ()))
    out = np.asarray(lax.dot_general(fnp.asarray(a), fnp.asarray(b), dn))
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, (a.astype(np.int64) * b).astype(np.int8))
    wide = np.asarray(lax.dot_general(fnp.asarray(a), fnp.asarray(b), dn,
                                      preferred_element_type=np.int32))
    assert wide.dtype == np.int32
    np.testing.assert_array_equal(wide, a.astype(np.int32) * b)
    # k = 2: matmul, still wrapping
    a2, b2 = np.full((1, 2), 100, np.int8), np.full((2, 1), 100, np.int8)
    out2 = np.asarray(lax.dot_general(fnp.asarray(a2), fnp.asarray(b2), dn))
    assert out2.dtype == np.int8 and int(out2[0, 0]) == _wrap_int(20000, np.int8)


def test_default_mode_narrows_requested_64_bit_types():
    """x64 off: a 64-bit preferred_element_type narrows as in JAX (f32 x f32 with float64
    requested is float32, int8 x int8 with int64 is int32), eagerly, under jit and in
    eval_shape alike; float64 operands narrow on the way in."""
    dn = (((1,), (0,)), ((), ()))
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    with fnx.enable_x64(False):
        for x, y, pet, want in [(a.astype(F32), b.astype(F32), F64, F32),
                                (a.astype(I8), b.astype(I8), I64, I32),
                                (a.astype(C64), b.astype(C64), C128, C64),
                                (a, b, None, F32)]:
            f = lambda p, q: lax.dot_general(p, q, dn, preferred_element_type=pet)  # noqa: E731
            eager = f(fnp.asarray(x), fnp.asarray(y))
            assert eager.dtype == want, (x.dtype, pet, eager.dtype)
            np.testing.assert_array_equal(np.asarray(eager), (a @ b).astype(want))
            assert fnx.jit(f)(fnp.asarray(x), fnp.asarray(y)).dtype == want
            spec = fnx.eval_shape(f, fnx.ShapeDtypeStruct(x.shape, x.dtype),
                                  fnx.ShapeDtypeStruct(y.shape, y.dtype))
            assert spec == fnx.ShapeDtypeStruct((2, 2), want), spec


@pytest.mark.parametrize("lshape,rshape,dn", [
    ((), (), (((), ()), ((), ()))),                        # scalar product
    ((1,), (1,), (((0,), (0,)), ((), ()))),                # k = 1, 0-d result
    ((3,), (3,), (((0,), (0,)), ((), ()))),                # vector dot, 0-d result
    ((0,), (0,), (((0,), (0,)), ((), ()))),                # empty sum
    ((2, 0), (0, 3), (((1,), (0,)), ((), ()))),            # k = 0: zeros
    ((4, 0, 2), (4, 2, 5), (((2,), (1,)), ((0,), (0,)))),  # empty free dim
    ((0, 1, 3), (0, 1, 2), (((1,), (1,)), ((0,), (0,)))),  # empty batch, k = 1
])
def test_degenerate_shapes_give_arrays(lshape, rshape, dn):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(lshape).astype(np.float32)
    b = rng.standard_normal(rshape).astype(np.float32)
    f = lambda p, q: lax.dot_general(p, q, dn)  # noqa: E731
    eager = f(fnp.asarray(a), fnp.asarray(b))
    assert isinstance(eager, fnx.Array) and isinstance(eager._value, np.ndarray)
    _bitwise(fnx.jit(f)(fnp.asarray(a), fnp.asarray(b)), eager)
    check_against_reference(np.asarray(eager), a, b, dn, None)
    with np.errstate(all="ignore"):
        raw = plan(lshape, rshape, dn)(a, b)
    assert isinstance(raw, np.ndarray) and raw.dtype == np.float32


def _mlp_loss(p, x, y):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return ((h @ p["w2"] + p["b2"])[0] - y) ** 2


def test_per_example_gradients_fuse_and_match():
    """The benchmark's jit(vmap(grad)): no batched matmul with a size-1 contraction
    and no transpose left in the code, same numbers as eager and as by hand."""
    rng = np.random.default_rng(1)
    f32 = np.float32
    p = {"w1": rng.standard_normal((5, 7)).astype(f32), "b1": rng.standard_normal(7).astype(f32),
         "w2": rng.standard_normal((7, 1)).astype(f32), "b2": rng.standard_normal(1).astype(f32)}
    xs, ys = rng.standard_normal((6, 5)).astype(f32), rng.standard_normal(6).astype(f32)
    pf = {k: fnp.asarray(v) for k, v in p.items()}
    g = fnx.vmap(fnx.grad(_mlp_loss), in_axes=(None, 0, 0))
    jg = fnx.jit(g)
    got = jg(pf, fnp.asarray(xs), fnp.asarray(ys))
    source = jg.lower(pf, fnp.asarray(xs), fnp.asarray(ys)).source
    assert "_transpose" not in source, source
    eager = g(pf, fnp.asarray(xs), fnp.asarray(ys))
    for k in p:
        _bitwise(got[k], eager[k])
    # by hand, float64
    q = {k: v.astype(np.float64) for k, v in p.items()}
    x, y = xs.astype(np.float64), ys.astype(np.float64)
    h = np.tanh(x @ q["w1"] + q["b1"])
    d = 2.0 * (h @ q["w2"][:, 0] + q["b2"][0] - y)
    dz = (d[:, None] * q["w2"][:, 0]) * (1.0 - h * h)
    want = {"w1": x[:, :, None] * dz[:, None, :], "b1": dz, "w2": (d[:, None] * h)[:, :, None],
            "b2": d[:, None]}
    for k in p:
        np.testing.assert_allclose(np.asarray(got[k]), want[k], rtol=1e-4, atol=1e-5)
