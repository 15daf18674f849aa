"""``lax.ragged_dot`` and ``lax.ragged_dot_general`` (``fnx/lax/ragged.py``): every mode
against a NumPy reference that walks the groups one index at a time, over random
dimension numbers (permuted dims, several batch/contracting/free dims, group sizes of
shape [g] and per prefix, negative sizes and sums past the ragged dimension); dtypes;
derivatives by finite differences; vmap against a loop; jit against eager; bad calls.
Expected values and dtypes written out below are JAX 0.10.2's for the same calls (CPU)."""
from __future__ import annotations

import numpy as np
import pytest

import fnx
from fnx import lax
from fnx.core import dtypes
from fnx.errors import ShapeError
from fnx.test_util import check_grads

RDN = lax.RaggedDotDimensionNumbers
BASIC = RDN((((1,), (1,)), ((), ())), (0,), (0,))


# --- the reference ------------------------------------------------------------------------

def _mode(lhs_ndim, dn):
    (lc, _), (lb, _) = dn.dot_dimension_numbers
    r = dn.lhs_ragged_dimensions[0]
    return "contracting" if r in lc else "batch" if r in lb else "noncontracting"


def _prefix(lhs_ndim, dn):
    (lc, _), (lb, _) = dn.dot_dimension_numbers
    r = dn.lhs_ragged_dimensions[0]
    free = [d for d in range(lhs_ndim) if d not in lc and d not in lb]
    mode = _mode(lhs_ndim, dn)
    if mode == "noncontracting":
        return list(lb) + free[:free.index(r)]
    if mode == "contracting":
        return list(lb) + list(lc[:lc.index(r)])
    return list(lb[:lb.index(r)])


def _in_group(x_shape, dim, prefix, gs, i):
    """A 0/1 array over x: 1 where x's index along ``dim`` is in group ``i``, with the
    group sizes of gs at x's ``prefix`` indices (Python ints: no wrapping)."""
    m = np.zeros(x_shape)
    for idx in np.ndindex(*x_shape):
        sizes = [int(s) for s in gs[tuple(idx[p] for p in prefix)]]
        start = sum(sizes[:i])
        m[idx] = start <= idx[dim] < start + sizes[i]
    return m


def _dot(x, y, contract, batch):
    """dot_general by einsum: batch dims, then x's free dims, then y's."""
    (lc, rc), (lb, rb) = contract, batch
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    xs = [next(letters) for _ in range(x.ndim)]
    ys = [next(letters) for _ in range(y.ndim)]
    for a, b in zip(list(lc) + list(lb), list(rc) + list(rb)):
        ys[b] = xs[a]
    out = ([xs[d] for d in lb] + [xs[d] for d in range(x.ndim) if d not in lc and d not in lb]
           + [ys[d] for d in range(y.ndim) if d not in rc and d not in rb])
    return np.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)


def ref(lhs, rhs, gs, dn):
    """ragged_dot_general in float64 (int64 for integers), one group at a time."""
    wide = np.int64 if np.dtype(lhs.dtype).kind in "iu" else np.float64
    lhs, rhs, gs = np.asarray(lhs, wide), np.asarray(rhs, wide), np.asarray(gs)
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    r = dn.lhs_ragged_dimensions[0]
    prefix = _prefix(lhs.ndim, dn)
    if gs.ndim == 1:
        gs = np.broadcast_to(gs, tuple(lhs.shape[p] for p in prefix) + gs.shape)
    g = gs.shape[-1]
    mode = _mode(lhs.ndim, dn)
    if mode == "batch":
        return _dot(lhs, rhs, (lc, rc), (lb, rb))
    if mode == "noncontracting":
        (gd,) = dn.rhs_group_dimensions
        rest = [d for d in range(rhs.ndim) if d != gd]
        out = 0
        for i in range(g):
            x = lhs * _in_group(lhs.shape, r, prefix, gs, i)
            y = np.take(rhs, i, axis=gd)
            out = out + _dot(x, y, (lc, [rest.index(d) for d in rc]),
                             (lb, [rest.index(d) for d in rb]))
        return out
    rr = rc[lc.index(r)]
    rprefix = list(rb) + list(rc[:rc.index(rr)])
    return np.stack([_dot(lhs * _in_group(lhs.shape, r, prefix, gs, i),
                          rhs * _in_group(rhs.shape, rr, rprefix, gs, i), (lc, rc), (lb, rb))
                     for i in range(g)])


def random_case(mode, rng, full_gs=None, negative=False):
    """Random shapes, permuted dims and dimension numbers for ``mode``; returns
    (lhs shape, rhs shape, RaggedDotDimensionNumbers, group_sizes)."""
    nb = int(rng.integers(1 if mode == "batch" else 0, 3))
    nm = int(rng.integers(1 if mode == "noncontracting" else 0, 3))
    nk = int(rng.integers(1, 4) if mode == "contracting" else rng.integers(0, 3))
    nn = int(rng.integers(0, 3))
    size = {"b": rng.integers(1, 4, nb), "m": rng.integers(1, 5, nm),
            "k": rng.integers(1, 5 if nk < 3 else 4, nk), "n": rng.integers(1, 4, nn)}
    g = int(rng.integers(1, 4))
    size["g"] = [g]
    lroles = [(c, i) for c, n in (("b", nb), ("m", nm), ("k", nk)) for i in range(n)]
    rroles = [(c, i) for c, n in (("b", nb), ("k", nk), ("n", nn)) for i in range(n)]
    rroles += [("g", 0)] if mode == "noncontracting" else []
    lroles = [lroles[i] for i in rng.permutation(len(lroles))]
    rroles = [rroles[i] for i in rng.permutation(len(rroles))]
    ls = tuple(int(size[c][i]) for c, i in lroles)
    rs = tuple(int(size[c][i]) for c, i in rroles)
    bo, ko = rng.permutation(nb), rng.permutation(nk)
    lb = [lroles.index(("b", i)) for i in bo]
    rb = [rroles.index(("b", i)) for i in bo]
    lc = [lroles.index(("k", i)) for i in ko]
    rc = [rroles.index(("k", i)) for i in ko]
    kind = {"noncontracting": "m", "contracting": "k", "batch": "b"}[mode]
    ragged = int(rng.choice([j for j, (c, _) in enumerate(lroles) if c == kind]))
    group = [rroles.index(("g", 0))] if mode == "noncontracting" else []
    dn = RDN(((lc, rc), (lb, rb)), [ragged], group)
    full_gs = bool(rng.integers(0, 2)) if full_gs is None else full_gs
    gshape = tuple(ls[p] for p in _prefix(len(ls), dn)) * full_gs + (g,)
    gs = rng.integers(-1 if negative else 0, ls[ragged] + 1, gshape).astype(np.int32)
    return ls, rs, dn, gs


MODES = ("noncontracting", "contracting", "batch")


# --- values -------------------------------------------------------------------------------

LHS = (np.arange(12).reshape(6, 2) % 5 - 2).astype(np.float32)
RHS = (np.arange(12).reshape(2, 2, 3) % 7 - 3).astype(np.float32)

# JAX 0.10.2: lax.ragged_dot(LHS, RHS, jnp.array(gs, jnp.int32)); rows past the sum of
# the sizes are zeros, a negative size makes an empty group and moves the next one back,
# a sum past m drops the excess.
JAX_RAGGED_DOT = {
    (2, 3): [[6, 3, 0], [0, 1, 2], [8, -6, -6], [-3, 3, 2], [1, -3, 0], [0, 0, 0]],
    (4, -2): [[6, 3, 0], [0, 1, 2], [-6, -6, -6], [3, 2, 1], [0, 0, 0], [0, 0, 0]],
    (4, 5): [[6, 3, 0], [0, 1, 2], [-6, -6, -6], [3, 2, 1], [1, -3, 0], [-5, 6, 3]],
    (0, 6): [[-5, 6, 3], [-1, 0, 1], [8, -6, -6], [-3, 3, 2], [1, -3, 0], [-5, 6, 3]],
}


@pytest.mark.parametrize("gs", list(JAX_RAGGED_DOT))
def test_ragged_dot_matches_jax(gs):
    out = lax.ragged_dot(LHS, RHS, np.array(gs, np.int32))
    assert out.dtype == np.float32 and out.shape == (6, 3)
    np.testing.assert_array_equal(np.asarray(out), JAX_RAGGED_DOT[gs])
    np.testing.assert_array_equal(np.asarray(out), ref(LHS, RHS, np.array(gs), BASIC))


def test_ragged_contracting_matches_jax():
    a = (np.arange(10).reshape(2, 5) % 4 - 1).astype(np.float32)
    b = (np.arange(15).reshape(5, 3) % 5 - 2).astype(np.float32)
    dn = RDN((((1,), (0,)), ((), ())), (1,), ())
    out = lax.ragged_dot_general(a, b, np.array([2, 2], np.int32), dn)
    assert out.shape == (2, 2, 3)   # the group dimension leads
    np.testing.assert_array_equal(np.asarray(out), [[[2, 1, 0], [1, 2, -2]],
                                                    [[3, -4, -1], [-4, 2, 3]]])


def test_ragged_batch_is_dot_general():
    # JAX's CPU computation ignores group_sizes in this mode (beyond its shape and dtype)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 3, 4))
    dn = RDN((((2,), (1,)), ((0,), (0,))), (0,), ())
    out = lax.ragged_dot_general(a.astype(np.float32), b.astype(np.float32),
                                 np.array([1, 2], np.int32), dn)
    np.testing.assert_allclose(np.asarray(out), np.einsum("bmk,bkn->bmn", a, b), rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_against_reference(mode):
    rng = np.random.default_rng(MODES.index(mode))
    for t in range(40):
        ls, rs, dn, gs = random_case(mode, rng, negative=t % 5 == 0)
        a = rng.standard_normal(ls).astype(np.float32)
        b = rng.standard_normal(rs).astype(np.float32)
        out = lax.ragged_dot_general(a, b, gs, dn)
        want = ref(a, b, gs, dn)
        assert out.dtype == np.float32 and out.shape == want.shape, (ls, rs, dn, gs)
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{ls} {rs} {dn} {gs.tolist()}")
        ai, bi = (rng.integers(-9, 10, s).astype(np.int32) for s in (ls, rs))
        np.testing.assert_array_equal(np.asarray(lax.ragged_dot_general(ai, bi, gs, dn)),
                                      ref(ai, bi, gs, dn))


def test_group_sizes_dtype_and_wrapping():
    # the group bounds and the row index are compared in group_sizes' dtype, as JAX's:
    # with uint8 sizes, rows 256.. read as 0.. again (JAX 0.10.2: 294 of 300 rows nonzero)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 2)).astype(np.float32)
    b = rng.standard_normal((2, 2, 3)).astype(np.float32)
    out = np.asarray(lax.ragged_dot(a, b, np.array([100, 150], np.uint8)))
    rows = np.arange(300) % 256
    want = np.where((rows < 100)[:, None], a @ b[0], 0) + \
        np.where(((rows >= 100) & (rows < 250))[:, None], a @ b[1], 0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert (np.abs(out).sum(1) > 0).sum() == 294
    for dt in (np.int8, np.int16, np.uint32, np.int64):
        out = lax.ragged_dot(LHS, RHS, np.array([2, 3], dt))
        np.testing.assert_array_equal(np.asarray(out), JAX_RAGGED_DOT[(2, 3)])


def test_zero_times_inf_as_jax():
    # the masked slices are zeros that still meet the other groups' rhs: 0 * inf = nan,
    # also in rows of no group (row 5) and of group 0 (row 0)
    rhs = RHS.copy()
    rhs[1, 0, 0] = np.inf
    out = np.asarray(lax.ragged_dot(LHS, rhs, np.array([2, 3], np.int32)))
    # JAX 0.10.2's column 0
    np.testing.assert_array_equal(out[:, 0], [np.nan, np.nan, np.inf, -np.inf, np.inf, np.nan])


# --- dtypes -------------------------------------------------------------------------------

BF16 = dtypes.bfloat16

# JAX 0.10.2's result dtypes, (lhs dtype, preferred_element_type) -> dtype
JAX_DTYPES = {
    (np.float32, None): np.float32, (BF16, None): BF16, (np.float16, None): np.float16,
    (np.int32, None): np.int32, (np.int16, None): np.int16, (np.int8, None): np.int8,
    (np.uint8, None): np.uint8,
    (np.float32, np.float32): np.float32, (BF16, np.float32): np.float32,
    (np.float16, np.float32): np.float32, (np.int32, np.float32): np.float32,
    (np.int8, np.float32): np.float32, (np.uint8, np.float32): np.float32,
    (np.float32, BF16): BF16, (np.float32, np.float16): np.float16,
    (np.int8, np.int32): np.int32, (np.int16, np.int32): np.int32,
}


@pytest.mark.skipif(BF16 is None, reason="bfloat16 needs ml_dtypes")
@pytest.mark.parametrize("dt,pet", list(JAX_DTYPES))
def test_result_dtypes(dt, pet):
    out = lax.ragged_dot(LHS.astype(dt), RHS.astype(dt), np.array([2, 3], np.int32),
                         preferred_element_type=pet)
    assert out.dtype == JAX_DTYPES[dt, pet] and not out.weak_type
    lhs, rhs = LHS.astype(dt), RHS.astype(dt)   # uint8 wraps the negative entries
    want = ref(lhs, rhs, np.array([2, 3]), BASIC).astype(out.dtype)   # exact in every dtype
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64), want.astype(np.float64))


# JAX 0.10.2's result dtypes for operands of two dtypes (XLA's higher-precision type)
JAX_MIXED = [(np.float32, BF16, np.float32), (BF16, np.float32, np.float32),
             (np.float32, np.int32, np.float32), (np.int8, np.int32, np.int32),
             (np.uint8, np.int8, np.int8), (np.float16, BF16, BF16),
             (np.int16, np.uint16, np.int16)]


@pytest.mark.skipif(BF16 is None, reason="bfloat16 needs ml_dtypes")
@pytest.mark.parametrize("da,db,want", JAX_MIXED)
def test_mixed_operand_dtypes(da, db, want):
    lhs, rhs = np.abs(LHS).astype(da), np.abs(RHS).astype(db)
    out = lax.ragged_dot(lhs, rhs, np.array([2, 3], np.int32))
    assert out.dtype == want
    np.testing.assert_array_equal(np.asarray(out).astype(np.float64),
                                  ref(np.abs(LHS), np.abs(RHS), np.array([2, 3]), BASIC))


def test_precision_accepted():
    gs = np.array([2, 3], np.int32)
    for p in (None, lax.Precision.HIGHEST, "highest", (lax.Precision.DEFAULT, "high")):
        np.testing.assert_array_equal(np.asarray(lax.ragged_dot(LHS, RHS, gs, precision=p)),
                                      JAX_RAGGED_DOT[(2, 3)])


@pytest.mark.filterwarnings("ignore:.*narrowed")
def test_narrowed_without_x64():
    # int64 group sizes and float64 operands narrow to 32 bits, as in JAX's default mode
    with fnx.enable_x64(False):
        out = lax.ragged_dot(LHS.astype(np.float64), RHS.astype(np.float64),
                             np.array([2, 3], np.int64))
    assert out.dtype == np.float32


# --- transformations ----------------------------------------------------------------------

def test_grad_matches_jax():
    gs = np.array([2, 3], np.int32)
    gl, gr = fnx.grad(lambda a, b: (lax.ragged_dot(a, b, gs) ** 2).sum(), (0, 1))(LHS, RHS)
    # JAX 0.10.2's (rows past the groups get no gradient)
    np.testing.assert_array_equal(np.asarray(gl), [[-48, 6], [-8, 10], [108, -28], [-44, 10],
                                                   [24, -2], [0, 0]])
    np.testing.assert_array_equal(np.asarray(gr), [[[-24, -12, 0], [-12, -4, 4]],
                                                   [[40, -36, -28], [-28, 12, 24]]])


@pytest.mark.skipif(BF16 is None, reason="bfloat16 needs ml_dtypes")
def test_grad_dtypes_with_preferred_element_type():
    gs = np.array([2, 3], np.int32)
    f = lambda a, b: lax.ragged_dot(a, b, gs, preferred_element_type=np.float32).sum()  # noqa
    gl, gr = fnx.grad(f, (0, 1))(LHS.astype(BF16), RHS.astype(BF16))
    assert gl.dtype == BF16 and gr.dtype == BF16   # as JAX's


@pytest.mark.parametrize("mode", MODES)
def test_check_grads(mode):
    # JAX 0.10.2 differentiates the non-contracting mode only; these all have derivatives
    rng = np.random.default_rng(10 + MODES.index(mode))
    for _ in range(3):
        ls, rs, dn, gs = random_case(mode, rng)
        a, b = rng.standard_normal(ls), rng.standard_normal(rs)
        with fnx.enable_x64(True):
            check_grads(lambda x, y: lax.ragged_dot_general(x, y, gs, dn), (a, b), 2,
                        modes=("fwd", "rev"))


@pytest.mark.parametrize("mode", MODES)
def test_vmap_against_loop(mode):
    rng = np.random.default_rng(20 + MODES.index(mode))
    ls, rs, dn, gs = random_case(mode, rng, full_gs=False)
    a = rng.standard_normal((3,) + ls).astype(np.float32)
    b = rng.standard_normal(rs + (3,)).astype(np.float32)
    g = np.stack([rng.permutation(gs) for _ in range(3)]).astype(np.int32)
    f = lambda x, y, s: lax.ragged_dot_general(x, y, s, dn)  # noqa: E731
    for in_axes, args, pick in [
            ((0, None, None), (a, b[..., 0], gs), lambda i: (a[i], b[..., 0], gs)),
            ((None, -1, None), (a[0], b, gs), lambda i: (a[0], b[..., i], gs)),
            ((0, -1, 0), (a, b, g), lambda i: (a[i], b[..., i], g[i]))]:
        out = fnx.vmap(f, in_axes=in_axes)(*args)
        want = np.stack([np.asarray(f(*pick(i))) for i in range(3)])
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_jit_equals_eager(mode):
    rng = np.random.default_rng(30 + MODES.index(mode))
    ls, rs, dn, gs = random_case(mode, rng)
    a, b = rng.standard_normal(ls).astype(np.float32), rng.standard_normal(rs).astype(np.float32)
    f = lambda x, y, s: lax.ragged_dot_general(x, y, s, dn)  # noqa: E731
    eager = np.asarray(f(a, b, gs))
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(a, b, gs)), eager)
    shape = fnx.eval_shape(f, a, b, gs)
    assert shape.shape == eager.shape and shape.dtype == eager.dtype
    fnx.check_ir(fnx.make_ir(f)(a, b, gs))


def test_onnx_export():
    pytest.importorskip("onnxruntime")
    import fnx.onnx
    gs = np.array([2, 3], np.int32)
    model = fnx.onnx.export(lambda a, b, s: lax.ragged_dot(a, b, s), LHS, RHS, gs)
    out = fnx.onnx.run(model, LHS, RHS, gs)
    out = out[0] if isinstance(out, (list, tuple)) else out
    np.testing.assert_array_equal(np.asarray(out), JAX_RAGGED_DOT[(2, 3)])


# --- bad calls ----------------------------------------------------------------------------

A2 = np.ones((3, 5), np.float32)
B2 = np.ones((5, 4), np.float32)
A3, B3 = np.ones((5, 2, 3), np.float32), np.ones((5, 3, 4), np.float32)
I2 = np.array([2, 3], np.int32)
BAD = [
    ("integer dtype", lambda: lax.ragged_dot(LHS, RHS, np.array([2.0, 3.0], np.float32))),
    ("integer dtype", lambda: lax.ragged_dot(LHS, RHS, np.array([True, False]))),
    ("rank >= 1", lambda: lax.ragged_dot(LHS, RHS, np.array(2, np.int32))),
    ("counts 3 groups", lambda: lax.ragged_dot(LHS, RHS, np.array([2, 3, 1], np.int32))),
    ("differ in size", lambda: lax.ragged_dot(LHS, RHS[:, :1], I2)),
    ("rank-1 lhs", lambda: lax.ragged_dot(LHS[0], RHS, I2)),
    ("exactly one group", lambda: lax.ragged_dot_general(
        LHS, RHS, I2, RDN((((1,), (1,)), ((), ())), (0,), ()))),
    ("no group dimension", lambda: lax.ragged_dot_general(
        A2, B2, I2, RDN((((1,), (0,)), ((), ())), (1,), (0,)))),
    ("exactly one lhs ragged", lambda: lax.ragged_dot_general(
        LHS, RHS, I2, RDN((((1,), (1,)), ((), ())), (0, 1), (0,)))),
    ("ragged dimension 2", lambda: lax.ragged_dot_general(
        LHS, RHS, I2, RDN((((1,), (1,)), ((), ())), (2,), (0,)))),
    ("ragged dimension -2", lambda: lax.ragged_dot_general(
        LHS, RHS, I2, RDN((((1,), (1,)), ((), ())), (-2,), (0,)))),
    ("also a contracting", lambda: lax.ragged_dot_general(
        LHS, RHS, I2, RDN((((1,), (1,)), ((), ())), (0,), (1,)))),
    ("must have shape", lambda: lax.ragged_dot_general(
        A3, B3, np.ones((4, 2), np.int32), RDN((((2,), (1,)), ((0,), (0,))), (0,), ()))),
    ("pair up", lambda: lax.ragged_dot_general(
        LHS, RHS, I2, RDN((((1,), ()), ((), ())), (0,), (0,)))),
    ("incompatible", lambda: lax.ragged_dot(LHS.astype(np.int32), RHS.astype(np.int32), I2,
                                            preferred_element_type=np.int8)),
]


@pytest.mark.parametrize("match,call", BAD, ids=[b[0] for b in BAD])
def test_bad_calls(match, call):
    with pytest.raises(ShapeError, match=match) as e:
        call()
    assert isinstance(e.value, TypeError)   # JAX raises TypeError for all of these
    assert str(e.value).startswith("ragged_dot_general:")


def test_bad_arguments():
    with pytest.raises(NotImplementedError, match="group_offset"):
        # JAX 0.10.2 cannot run it either (its CPU and GPU paths raise)
        lax.ragged_dot(LHS, RHS, I2, group_offset=np.array([1], np.int32))
    with pytest.raises(TypeError, match="RaggedDotDimensionNumbers"):
        lax.ragged_dot_general(LHS, RHS, I2, (((1,), (1,)), ((), ())))
    with pytest.raises(TypeError, match="RaggedDotDimensionNumbers"):
        RDN(((1, 1), ((), ())), (0,), (0,))
    with pytest.raises(ValueError, match="ragged_dot_general: precision"):
        lax.ragged_dot(LHS, RHS, I2, precision="fast-ish")


def test_dimension_numbers_as_jax():
    dn = RDN([[[1], [1]], [[], []]], [0], [0])
    assert dn == BASIC and hash(dn) == hash(BASIC)
    assert dn.dot_dimension_numbers == (((1,), (1,)), ((), ()))
    assert dn.lhs_ragged_dimensions == (0,) and dn.rhs_group_dimensions == (0,)
    assert repr(dn) == ("RaggedDotDimensionNumbers(dot_dimension_numbers=(((1,), (1,)), "
                        "((), ())), lhs_ragged_dimensions=(0,), rhs_group_dimensions=(0,))")
