"""The ``jax.numpy`` names fnx.numpy added for ports (issue 16): each against JAX's
observed results (held here as literals) or NumPy's, eager and under jit, with gradients
where the math has them; plus ``precision=``/``preferred_element_type=``,
``lax.Precision``, ``lax.conv_general_shape_tuple`` and ``jax_numpy_rank_promotion``."""
import warnings

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import ShapeError


def _eq(out, expected, dtype=None, rtol=1e-6):
    out = np.asarray(out)
    if dtype is not None:
        assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    np.testing.assert_allclose(out, np.asarray(expected), rtol=rtol, atol=1e-6)


def _jit_same(f, *args):
    eager = f(*args)
    traced = fnx.jit(f)(*args)
    for a, b in zip(fnx.tree_util.tree_leaves(eager), fnx.tree_util.tree_leaves(traced)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype
    return eager


def test_every_name_a_port_needs_exists():
    names = """ndim shape size diag diagflat fill_diagonal histogram histogram2d histogramdd
    histogram_bin_edges polyfit polyval poly polyadd polysub polymul polydiv polyder polyint
    roots vander trim_zeros interp trapezoid unwrap gradient convolve correlate cov corrcoef
    kron tri tril triu tril_indices triu_indices tril_indices_from triu_indices_from
    select piecewise apply_along_axis apply_over_axes vectorize ix_ r_ c_ s_ index_exp
    mgrid ogrid indices diag_indices diag_indices_from mask_indices unravel_index
    ravel_multi_index einsum_path nansum nanmean nanmax nanargmin bitwise_and bitwise_count
    packbits unpackbits iscomplexobj isrealobj iscomplex isreal isscalar iterable
    result_type frexp modf ldexp spacing gcd lcm i0 isneginf isposinf fabs angle ediff1d
    bartlett blackman hamming hanning kaiser choose compress extract block insert delete
    append resize rollaxis hsplit vsplit dsplit array_equiv matvec vecmat place put
    frombuffer fromiter fromstring load array_repr array_str printoptions get_printoptions
    set_printoptions fromfunction single double csingle cdouble uint object_ character
    flexible ComplexWarning""".split()
    assert [n for n in names if not hasattr(fnp, n)] == []
    assert hasattr(fnp.linalg, "eig") and hasattr(fnp.linalg, "eigvals")


# --- index tricks (literals: JAX 0.10.2) ---------------------------------------------------------

def test_r_c_mgrid_ogrid_ix():
    _eq(fnp.r_[1:4, 0, fnp.array([5, 6])], [1, 2, 3, 0, 5, 6], np.int32)
    _eq(fnp.r_[0:1:5j], [0, 0.25, 0.5, 0.75, 1], np.float32)
    _eq(fnp.r_[1.5, 2:4], [1.5, 2, 3], np.float32)
    _eq(fnp.c_[fnp.arange(3), fnp.arange(3)], [[0, 0], [1, 1], [2, 2]], np.int32)
    _eq(fnp.r_["0,2", [1, 2], [3, 4]], [[1, 2], [3, 4]])
    _eq(fnp.r_["r", [1, 2, 3]], [[1, 2, 3]])
    _eq(fnp.r_["c", [1, 2, 3]], [[1], [2], [3]])
    _eq(fnp.r_["-1", fnp.ones((2, 2)), fnp.zeros((2, 1))], [[1, 1, 0], [1, 1, 0]])
    assert fnp.r_["0,3,0", [1, 2], [3, 4]].shape == (4, 1, 1)
    assert fnp.r_["0,3,1", [1, 2], [3, 4]].shape == (2, 2, 1)
    g = fnp.mgrid[0:3, 0:2]
    assert g.shape == (2, 3, 2) and g.dtype == np.int32
    _eq(g, np.mgrid[0:3, 0:2])
    _eq(fnp.mgrid[0:1:3j], [0, 0.5, 1], np.float32)
    _eq(fnp.mgrid[0:1:0.25], [0, 0.25, 0.5, 0.75], np.float32)
    o = fnp.ogrid[0:3, 0:2]
    assert isinstance(o, list) and [x.shape for x in o] == [(3, 1), (1, 2)]
    rows, cols = fnp.ix_(fnp.arange(2), fnp.array([0, 2]))
    assert rows.shape == (2, 1) and cols.shape == (1, 2) and rows.dtype == np.int32
    x = fnp.arange(12).reshape(3, 4)
    _eq(x[fnp.ix_(fnp.array([0, 2]), fnp.array([True, False, True, False]))], [[0, 2], [8, 10]])
    assert fnp.s_[1:2, ::3] == (slice(1, 2), slice(None, None, 3))
    assert fnp.index_exp[2] == (2,) and fnp.s_[2] == 2


def test_index_families_and_unravel():
    _eq(fnp.indices((2, 3)), np.indices((2, 3)), np.int32)
    assert [a.shape for a in fnp.indices((2, 3), sparse=True)] == [(2, 1), (1, 3)]
    _eq(fnp.diag_indices(3)[1], [0, 1, 2], np.int32)
    for got, want in zip(fnp.tril_indices(3, 1, 4), np.tril_indices(3, 1, 4)):
        _eq(got, want, np.int32)
    for got, want in zip(fnp.triu_indices_from(fnp.ones((3, 4))), np.triu_indices(3, 0, 4)):
        _eq(got, want, np.int32)
    for got, want in zip(fnp.mask_indices(3, fnp.triu), np.mask_indices(3, np.triu)):
        _eq(got, want)
    # JAX: negative indices count from the end, out-of-range ones clip
    r, c = _jit_same(lambda i: fnp.unravel_index(i, (2, 3)), fnp.array([5, 100, -1, -100, 3]))
    _eq(r, [1, 1, 1, 0, 1], np.int32)
    _eq(c, [2, 2, 2, 0, 0], np.int32)
    i = (fnp.array([1, 0]), fnp.array([2, 1]))
    _eq(fnp.ravel_multi_index(i, (2, 3)), [5, 1], np.int32)
    _eq(fnp.ravel_multi_index(i, (2, 3), order="F"), [5, 2])
    w = (fnp.array([3, -1]), fnp.array([2, 7]))
    _eq(fnp.ravel_multi_index(w, (2, 3), mode="wrap"), [5, 4])
    _eq(fnx.jit(lambda a, b: fnp.ravel_multi_index((a, b), (2, 3), mode="clip"))(*w), [5, 2])
    with pytest.raises(ValueError, match="out of range"):
        fnp.ravel_multi_index(w, (2, 3))
    with pytest.raises(fnx.errors.ConcretizationError, match="mode='wrap'"):
        fnx.jit(lambda a, b: fnp.ravel_multi_index((a, b), (2, 3)))(*w)


def test_diag_diagflat_fill_diagonal():
    for k in (-2, 0, 1):
        _eq(_jit_same(lambda v: fnp.diag(v, k), fnp.arange(3)), np.diag(np.arange(3), k),
            np.int32)
    _eq(fnp.diag(fnp.ones((3, 4)), 1), [1, 1, 1])
    _eq(fnp.diagflat(fnp.array([[1, 2], [3, 4]]), -1), np.diagflat([[1, 2], [3, 4]], -1))
    g = fnx.grad(lambda v: (fnp.diag(v) * fnp.arange(9.0).reshape(3, 3)).sum())(fnp.ones(3))
    _eq(g, [0, 4, 8])
    out = _jit_same(lambda a: fnp.fill_diagonal(a, 7.0, inplace=False), fnp.zeros((5, 3)))
    want = np.zeros((5, 3))
    np.fill_diagonal(want, 7)
    _eq(out, want, np.float32)
    want = np.zeros((5, 3))
    np.fill_diagonal(want, [1, 2], wrap=True)
    _eq(fnp.fill_diagonal(fnp.zeros((5, 3)), fnp.array([1.0, 2.0]), wrap=True, inplace=False),
        want)
    want3 = np.zeros((3, 3, 3))
    np.fill_diagonal(want3, [1, 2, 3])
    _eq(fnp.fill_diagonal(fnp.zeros((3, 3, 3)), fnp.array([1.0, 2, 3]), inplace=False), want3)
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.fill_diagonal(fnp.zeros((2, 2)), 1.0)


def test_fromfunction_ndim_shape_size():
    _eq(fnp.fromfunction(lambda i, j: i + j, (2, 3)), [[0, 1, 2], [1, 2, 3]], np.float32)
    _eq(fnp.fromfunction(lambda i, j: i * 10 + j, (2, 2), dtype=int), [[0, 1], [10, 11]],
        np.int32)
    assert fnp.ndim([1, 2]) == 1 and fnp.shape([[1, 2]]) == (1, 2)
    assert fnp.size(fnp.ones((2, 3)), 1) == 3 and fnp.size(fnp.ones((2, 3, 4)), (0, 2)) == 8
    assert type(fnp.size(fnp.ones((2, 3)))) is int


# --- polynomials (literals: JAX 0.10.2) ---------------------------------------------

def test_polynomials():
    _eq(fnp.poly(fnp.array([1, 2, 3])), [1, -6, 11, -6], np.float32)
    _eq(fnp.poly(fnp.array([[1.0, 2], [3, 4]])), [1, -5, -2], np.complex64)
    _eq(fnp.polyadd(fnp.array([1, 2]), fnp.array([1, 2, 3])), [1, 3, 5], np.int32)
    _eq(fnp.polysub(fnp.array([1.0, 2]), fnp.array([1, 2, 3])), [-1, -1, -1], np.float32)
    _eq(fnp.polymul(fnp.array([1, 2]), fnp.array([1, 2, 3])), [1, 4, 7, 6], np.float32)
    _eq(fnp.polymul(fnp.array([0, 1, 2]), fnp.array([1, 2, 3])), [0, 1, 4, 7, 6])
    _eq(fnp.polymul(fnp.array([0, 1, 2]), fnp.array([1, 2, 3]), trim_leading_zeros=True),
        [1, 4, 7, 6])
    q, r = _jit_same(fnp.polydiv, fnp.array([1, 3, 5, 2]), fnp.array([1, 2]))
    _eq(q, [1, 1, 3], np.float32)
    _eq(r, [0, 0, 0, -4], np.float32)
    _eq(fnp.polyder(fnp.array([1, 2, 3, 4]), 2), [6, 4], np.float32)
    _eq(fnp.polyint(fnp.array([1, 2, 3]), 2, k=fnp.array([1, 2])),
        [1 / 12, 1 / 3, 1.5, 1, 2], np.float32)
    _eq(fnp.polyint(fnp.array([1, 2, 3])), [1 / 3, 1, 3, 0])
    _eq(_jit_same(fnp.polyval, fnp.array([1, 2, 3]), fnp.array([1, 2])), [6, 11], np.int32)
    _eq(fnx.grad(lambda x: fnp.polyval(fnp.array([1.0, 2, 3]), x))(2.0), 6.0)
    # coefficients along the first axis, one polynomial per column (NumPy and JAX)
    p2 = np.arange(6.0).reshape(3, 2)
    _eq(fnp.polyval(fnp.array(p2), 2.0), np.polyval(p2, 2.0), np.float32)
    _eq(fnp.polyval(fnp.array(p2), fnp.array([1.0, 2.0])), np.polyval(p2, [1.0, 2.0]))
    with pytest.raises(ShapeError, match="polyval: the coefficients need an axis"):
        fnp.polyval(fnp.array(2.0), 1.0)
    _eq(fnp.vander(fnp.array([1, 2, 3]), 4), np.vander([1, 2, 3], 4), np.int32)
    _eq(fnp.vander(fnp.array([1.0, 2]), increasing=True), [[1, 1], [1, 2]])
    _eq(fnp.trim_zeros(fnp.array([0, 0, 1, 2, 0])), [1, 2])
    _eq(fnp.trim_zeros(fnp.array([0, 0, 1, 2, 0]), "b"), [0, 0, 1, 2])


def test_polyfit_and_roots():
    x = fnp.arange(6.0)
    _eq(_jit_same(lambda x, y: fnp.polyfit(x, y, 2), x, x ** 2 + 1), [1, 0, 1], np.float32)
    c, res, rank, s, rcond = fnp.polyfit(x, x ** 2 + 1, 1, full=True)
    _eq(c, [5, -2.3333], rtol=1e-4)
    _eq(res, [37.3333], rtol=1e-4)
    assert int(rank) == 2 and res.shape == (1,)
    _eq(s, [1.3512, 0.4175], rtol=1e-3)
    c, cov = fnp.polyfit(x, x ** 2 + 1, 1, cov=True)
    _eq(cov, [[0.5333, -1.3333], [-1.3333, 4.8889]], rtol=1e-3)
    c2 = fnp.polyfit(x, fnp.stack([x ** 2, x], 1), 1, w=fnp.arange(1.0, 7.0))
    _eq(c2, [[6.531, 1.0], [-8.812, 0.0]], rtol=1e-3)
    r = fnp.roots(fnp.array([1.0, -3, 2]))
    assert r.dtype == np.complex64
    _eq(np.sort_complex(np.asarray(r)), [1, 2])
    _eq(np.sort_complex(np.asarray(fnp.roots(fnp.array([0, 1.0, -3, 2, 0])))), [0, 1, 2])
    _eq(np.sort_complex(np.asarray(fnp.roots(fnp.array([1, 0, 1])))), [-1j, 1j])
    _eq(np.sort_complex(np.asarray(fnx.jit(lambda p: fnp.roots(p, strip_zeros=False))(
        fnp.array([1.0, -3, 2])))), [1, 2])
    w, v = fnp.linalg.eig(fnp.array([[2.0, 0], [0, 3]]))
    _eq(np.sort(np.asarray(w).real), [2, 3])


# --- calculus, floats, integers -----------------------------------------------------------------

def test_gradient_trapezoid_unwrap_ediff1d():
    x = fnp.array([[1.0, 2, 4, 7], [0, 1, 1, 3]])
    for got, want in zip(fnp.gradient(x), np.gradient(np.asarray(x))):
        _eq(got, want)
    _eq(fnp.gradient(x, axis=1), np.gradient(np.asarray(x), axis=1))
    coords = np.array([0.0, 1, 3, 4])
    for got, want in zip(fnp.gradient(x, 2.0, fnp.asarray(coords)),
                         np.gradient(np.asarray(x), 2.0, coords)):
        _eq(got, want)
    _eq(fnp.gradient(x[0], edge_order=2), np.gradient(np.asarray(x[0]), edge_order=2))
    _eq(_jit_same(lambda a: fnp.gradient(a, axis=0), x), np.gradient(np.asarray(x), axis=0))
    _eq(fnp.trapezoid(x), [10, 3.5], np.float32)
    _eq(fnp.trapezoid(x, fnp.array([0.0, 1, 3, 4])), [13, 4.5])
    _eq(fnp.trapezoid(fnp.array([1, 2, 3])), 4.0, np.float32)
    _eq(fnx.grad(lambda y: fnp.trapezoid(y, dx=0.5))(fnp.ones(3)), [0.25, 0.5, 0.25])
    p = fnp.array([0.0, 3, 6.5, 10, 0.5])
    _eq(_jit_same(fnp.unwrap, p), np.unwrap(np.asarray(p)), rtol=1e-5)
    _eq(fnp.unwrap(fnp.array([0, 5, 1, 6, 2]), period=5), [0, 0, 1, 1, 2], np.int32)
    _eq(fnp.ediff1d(fnp.array([[1, 2], [4, 7]]), to_end=fnp.array([9]), to_begin=0),
        [0, 1, 2, 3, 9], np.int32)


def test_float_decomposition():
    _eq(fnp.angle(fnp.array([1 + 1j, -1, 2j])), [np.pi / 4, np.pi, np.pi / 2], np.float32)
    _eq(fnp.angle(fnp.array([1, -1]), deg=True), [0, 180], np.float32)
    x = np.array([0.0, 1, 8, -3.5, 1e-40, np.inf, 0.75], np.float32)
    m, e = _jit_same(fnp.frexp, x)
    nm, ne = np.frexp(x)        # NumPy's exact subnormal result (JAX flushes it)
    _eq(m, nm, np.float32)
    _eq(e, ne, np.int32)
    f, i = fnp.modf(fnp.array([1.5, -2.25, np.inf, -0.0]))
    _eq(f, [0.5, -0.25, 0.0, -0.0])
    _eq(i, [1, -2, np.inf, -0.0])
    _eq(fnp.ldexp(fnp.array([1.0, 3]), fnp.array([3, -2])), [8, 0.75], np.float32)
    # 2**200 alone overflows float32: ldexp scales in two steps
    _eq(fnp.ldexp(np.float32(1e-30), 200), np.ldexp(np.float32(1e-30), 200), rtol=1e-5)
    sp = np.array([1.0, -1, 0, 1e10], np.float32)
    _eq(fnp.spacing(sp), np.spacing(sp), np.float32)
    _eq(fnp.i0(fnp.array([0.0, 1, 2.5])), np.i0([0.0, 1, 2.5]), np.float32, rtol=1e-5)
    # float16: NumPy's (and JAX's) step towards +inf, positive for negative x, inf at -inf
    h = np.array([-2, 2, -0.0, 1.5, -1.5, -6e-8, -np.inf, np.inf], np.float16)
    want = np.array([2**-10, 2**-9, 2**-24, 2**-10, 2**-10, 2**-24, np.inf, np.nan], np.float16)
    for f in (fnp.spacing, fnx.jit(fnp.spacing)):
        got = f(h)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(np.asarray(got), want)
    # jnp.i0's derivative is 0 at 0 (|x|'s kink is masked) and I1 elsewhere, to 2nd order
    assert float(fnx.grad(fnp.i0)(0.0)) == 0.0
    np.testing.assert_allclose(float(fnx.grad(fnp.i0)(-3.0)), -3.9533702, rtol=1e-6)
    np.testing.assert_allclose([float(fnx.grad(fnx.grad(fnp.i0))(v)) for v in (0.0, 1.0)],
                               [0.0, 0.7009068], rtol=1e-6)
    _eq(fnx.vmap(fnx.grad(fnp.i0))(np.array([0.0, 1.0, -2.0], np.float32)),
        [0.0, 0.5651591, -1.5906368], np.float32)
    _eq(fnp.fabs(fnp.array([-1, 2])), [1, 2], np.float32)
    assert fnp.isneginf(fnp.array([-np.inf, np.inf, 1])).tolist() == [True, False, False]
    assert fnp.isposinf(fnp.array([-np.inf, np.inf, 1])).tolist() == [False, True, False]
    assert fnp.iscomplex(fnp.array([1 + 1j, 2])).tolist() == [True, False]
    assert fnp.isreal(fnp.array([1 + 1j, 2])).tolist() == [False, True]
    assert fnp.iscomplexobj(fnp.array([1j])) and not fnp.iscomplexobj([1.0])
    assert fnp.isrealobj(3) and fnp.isscalar(3.0) and fnp.isscalar(fnp.array(1.0))
    assert not fnp.isscalar(fnp.ones(2)) and fnp.iterable([1])


def test_integer_helpers():
    _eq(_jit_same(fnp.gcd, fnp.array([12, -18, 0, 7]), fnp.array([8, 12, 0, 0])),
        [4, 6, 0, 7], np.int32)
    _eq(fnp.lcm(fnp.array([4, -6, 0]), fnp.array([6, 4, 5])), [12, 12, 0], np.int32)
    _eq(fnp.bitwise_count(fnp.array([0, 7, -1, 255], dtype=fnp.int32)), [0, 3, 1, 8],
        np.uint8)
    _eq(fnp.bitwise_count(fnp.array([0, 7, 255], dtype=fnp.uint8)), [0, 3, 8], np.uint8)
    _eq(fnp.packbits(fnp.array([[1, 0, 1], [0, 1, 1]]), axis=-1), [[160], [96]], np.uint8)
    _eq(fnp.packbits(fnp.array([1, 0, 1, 1, 0, 0, 0, 0, 1]), bitorder="little"), [13, 1])
    _eq(_jit_same(fnp.unpackbits, fnp.array([5, 255], dtype=fnp.uint8)),
        np.unpackbits(np.array([5, 255], np.uint8)), np.uint8)
    _eq(fnp.unpackbits(fnp.array([[5], [3]], dtype=fnp.uint8), axis=1, count=3),
        [[0, 0, 0], [0, 0, 0]])
    a = np.array([[5, 7]], np.uint8)
    _eq(fnp.unpackbits(a, axis=0, bitorder="little"),
        np.unpackbits(a, axis=0, bitorder="little"))


def test_windows():
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        for m in (0, 1, 5):
            out = getattr(fnp, name)(m)
            assert out.dtype == np.float32
            _eq(out, getattr(np, name)(m), rtol=1e-5)
    _eq(fnp.kaiser(5, 3.0), np.kaiser(5, 3.0), rtol=1e-5)


# --- selection and editing -----------------------------------------------------------

def test_select_piecewise_choose_compress():
    a = fnp.arange(6)
    _eq(_jit_same(lambda a: fnp.select([a < 2, a > 3], [a, a ** 2], -1), a),
        [0, 1, -1, -1, 16, 25], np.int32)
    _eq(fnp.select([a < 2], [a * 1.5]), [0, 1.5, 0, 0, 0, 0], np.float32)
    x = fnp.array([-1.0, 0, 2])
    pw = lambda x: fnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * 2])  # noqa
    _eq(_jit_same(pw, x), [1, 0, 4])
    _eq(fnx.grad(lambda x: pw(x).sum())(x), [-1, 2, 2])
    _eq(fnp.piecewise(x, [x < 0], [0.5, 7]), [0.5, 7, 7])
    ch = [fnp.arange(4), fnp.arange(4) * 10, fnp.arange(4) * 100]
    _eq(fnp.choose(fnp.array([0, 1, 2, 1]), ch), [0, 10, 200, 30], np.int32)
    _eq(fnp.choose(fnp.array([0, 4, -1]), [fnp.arange(3), fnp.arange(3) * 10], mode="wrap"),
        [0, 1, 20])
    with pytest.raises(ValueError, match="out of range"):
        fnp.choose(fnp.array([0, 3]), [fnp.arange(2), fnp.arange(2)])
    m = fnp.arange(6).reshape(3, 2)
    _eq(fnp.compress(fnp.array([True, False, True]), m, axis=0), [[0, 1], [4, 5]])
    _eq(fnp.compress(fnp.array([0, 1]), m, axis=1), [[1], [3], [5]])
    _eq(fnx.jit(lambda c, a: fnp.compress(c, a, size=3, fill_value=-1))(
        fnp.array([True, False, True]), fnp.arange(3)), [0, 2, -1])
    _eq(fnp.extract(m % 2 == 0, m), [0, 2, 4])


def test_insert_delete_append_resize_block():
    b = fnp.arange(6).reshape(2, 3)
    nb = np.arange(6).reshape(2, 3)
    _eq(fnp.insert(b, 1, 9, axis=1), np.insert(nb, 1, 9, axis=1))
    _eq(fnp.insert(b, fnp.array([0, 2]), fnp.array([7, 8]), axis=1),
        np.insert(nb, [0, 2], [7, 8], axis=1))
    _eq(fnp.insert(b, 2, fnp.array([9, 9])), np.insert(nb, 2, [9, 9]))
    _eq(fnp.insert(b, 1, fnp.array([5, 6]), axis=1), np.insert(nb, 1, [5, 6], axis=1))
    _eq(fnp.insert(b, 2, fnp.array([5, 6, 7]), axis=0), np.insert(nb, 2, [5, 6, 7], axis=0))
    _eq(fnp.insert(fnp.arange(4), slice(1, 3), fnp.array([8, 9])),
        np.insert(np.arange(4), slice(1, 3), [8, 9]))
    _eq(fnp.delete(b, 1, axis=1), np.delete(nb, 1, axis=1))
    _eq(fnp.delete(fnp.arange(6), slice(1, 5, 2)), [0, 2, 4, 5])
    _eq(fnp.delete(b, fnp.array([0, 2]), axis=1), [[1], [4]])
    _eq(fnp.delete(b, 4), [0, 1, 2, 3, 5])
    _eq(fnx.grad(lambda v: fnp.delete(v, 1).sum())(fnp.ones(3)), [1, 0, 1])
    _eq(fnp.append(b, fnp.array([1, 2])), [0, 1, 2, 3, 4, 5, 1, 2], np.int32)
    _eq(fnp.append(fnp.array([1, 2]), 2.5), [1, 2, 2.5], np.float32)
    _eq(fnp.append(b, b, axis=0), np.append(nb, nb, axis=0))
    _eq(fnp.resize(fnp.arange(3), (2, 4)), [[0, 1, 2, 0], [1, 2, 0, 1]])
    assert fnp.rollaxis(fnp.ones((2, 3, 4, 5)), 3, 1).shape == (2, 5, 3, 4)
    assert [a.shape for a in fnp.hsplit(fnp.arange(8).reshape(2, 4), 2)] == [(2, 2), (2, 2)]
    assert [a.shape for a in fnp.vsplit(fnp.arange(8).reshape(4, 2), [1])] == [(1, 2), (3, 2)]
    assert [a.shape for a in fnp.dsplit(fnp.arange(8).reshape(1, 2, 4), 2)] == [(1, 2, 2)] * 2
    blk = fnp.block([[fnp.ones((2, 2)), fnp.zeros((2, 1))], [fnp.zeros((1, 2)), fnp.ones((1, 1))]])
    _eq(blk, [[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    _eq(fnp.block([fnp.array([1, 2]), 3]), [1, 2, 3])


def test_place_put_functional():
    _eq(fnp.place(fnp.arange(6), fnp.arange(6) % 2 == 0, fnp.array([10, 20]), inplace=False),
        [10, 1, 20, 3, 10, 5])
    _eq(fnp.put(fnp.arange(6), fnp.array([0, 5]), fnp.array([10, 20]), inplace=False),
        [10, 1, 2, 3, 4, 20])
    _eq(fnp.put(fnp.arange(6), fnp.array([0, 7]), fnp.array([10, 20]), mode="clip",
                inplace=False), [10, 1, 2, 3, 4, 20])
    _eq(fnx.jit(lambda a, i: fnp.put(a, i, 20, inplace=False))(fnp.arange(6), fnp.array([7])),
        [0, 1, 2, 3, 4, 20])   # traced: JAX's clip
    _eq(fnp.put(fnp.zeros((2, 3)), fnp.array([1, 8]), 5, mode="wrap", inplace=False),
        [[0, 5, 5], [0, 0, 0]])
    with pytest.raises(IndexError, match="mode='clip'"):
        fnp.put(fnp.arange(6), fnp.array([7]), 1, inplace=False)
    for f in (lambda: fnp.put(fnp.arange(3), 0, 1), lambda: fnp.place(fnp.arange(3),
                                                                        fnp.arange(3) > 0, 1)):
        with pytest.raises(ValueError, match="inplace=False"):
            f()


# --- applying functions -------------------------------------------------------------------------

def test_apply_along_over_axes_vectorize():
    x = fnp.arange(24.0).reshape(2, 3, 4)
    _eq(_jit_same(lambda a: fnp.apply_along_axis(lambda v: v.sum() * 2, 1, a), x),
        np.apply_along_axis(lambda v: v.sum() * 2, 1, np.asarray(x)))
    f = lambda v: fnp.stack([v.min(), v.max()])  # noqa: E731
    _eq(fnp.apply_along_axis(f, 0, x),
        np.apply_along_axis(lambda v: np.stack([v.min(), v.max()]), 0, np.asarray(x)))
    _eq(fnp.apply_over_axes(fnp.sum, x, [0, 2]), np.apply_over_axes(np.sum, np.asarray(x), [0, 2]))
    mul = fnp.vectorize(lambda a, b: a * b + 1)
    _eq(mul(fnp.arange(3.0), fnp.arange(6.0).reshape(2, 3)), [[1, 2, 5], [1, 5, 11]])
    dot = fnp.vectorize(lambda a, b: fnp.dot(a, b), signature="(n),(n)->()")
    _eq(_jit_same(dot, fnp.ones((4, 3)), fnp.arange(3.0)), [3, 3, 3, 3])
    _eq(fnp.vectorize(lambda x, p: x ** p, excluded={1})(fnp.arange(3.0), 2), [0, 1, 4])
    _eq(fnx.grad(lambda a: dot(a, a).sum())(fnp.ones((2, 3))), 2 * np.ones((2, 3)))


def test_vectorize_checks_and_none_args():
    # JAX's checks: excluded entries, argument counts/ranks, outputs against the signature
    with pytest.raises(TypeError, match="can only exclude"):
        fnp.vectorize(lambda x: x, excluded={1.5})
    with pytest.raises(ValueError, match="negative"):
        fnp.vectorize(lambda x: x, excluded={-1})
    mm = fnp.vectorize(fnp.dot, signature="(n,m),(m,k)->(n,k)")
    with pytest.raises(TypeError, match="wrong number of positional arguments"):
        mm(fnp.zeros((3, 2)))
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'm'"):
        mm(fnp.zeros((2, 3)), fnp.zeros((4, 5)))
    z = fnp.zeros((2, 2))
    with pytest.raises(TypeError, match="output must be a tuple"):
        fnp.vectorize(fnp.dot, signature="(n,m),(m,k)->(n,k),()")(z, z)
    with pytest.raises(TypeError, match="wrong number of output arguments"):
        fnp.vectorize(lambda *a: a, signature="(),()->(),(),()")(1, 2)
    with pytest.raises(ValueError, match=r"output shape \(2, 2\) does not match"):
        fnp.vectorize(fnp.dot, signature="(n,m),(m,k)->(n)")(z, z)
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n'"):
        fnp.vectorize(fnp.dot, signature="(n,m),(m,k)->(n,n)")(fnp.zeros((2, 3)),
                                                               fnp.zeros((3, 4)))
    # None arguments pass through unvectorized (not with core dims)
    f = fnp.vectorize(lambda x, y: x if y is None else x + y)
    _eq(f(fnp.arange(3), None), [0, 1, 2])
    with pytest.raises(ValueError, match="Cannot pass None"):
        fnp.vectorize(lambda x, y: x, signature="(k),(k)->(k)")(fnp.arange(3), None)
    add = fnp.vectorize(fnp.add, signature="(),()->()")
    with fnx.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match="require rank promotion"):
            add(fnp.zeros((4, 4)), fnp.zeros(4))
        add(fnp.zeros((4, 4)), fnp.zeros(()))


# --- products, histograms, I/O ------------------------------------------------------------------

def test_matvec_vecmat_einsum_path_array_equiv():
    _eq(fnp.matvec(fnp.arange(6.0).reshape(2, 3), fnp.arange(3.0)), [5, 14])
    _eq(fnp.vecmat(fnp.array([1j, 2]), fnp.arange(6.0).reshape(2, 3)),
        [6, 8 - 1j, 10 - 2j], np.complex64)
    path, report = fnp.einsum_path("ij,jk,kl->il", fnp.ones((2, 3)), fnp.ones((3, 4)),
                                   fnp.ones((4, 5)))
    assert path == [(0, 1), (0, 1)] and isinstance(report, str)
    assert bool(fnp.array_equiv(fnp.array([1, 2]), fnp.array([[1, 2], [1, 2]])))
    assert not bool(fnp.array_equiv(fnp.array([1, 2]), fnp.array([1, 2, 3])))


def test_histogram2d_histogramdd():
    hx = fnp.array([0.1, 0.5, 0.9, 0.3, 1.0])
    hy = fnp.array([1.0, 2, 3, 2, 1])
    c, ex, ey = _jit_same(lambda a, b: fnp.histogram2d(a, b, bins=2), hx, hy)
    _eq(c, [[1, 2], [1, 1]], np.int32)
    _eq(ex, [0.1, 0.55, 1.0])
    _eq(ey, [1, 2, 3])
    c, ex, ey = fnp.histogram2d(hx, hy, bins=[2, 3], range=[[0, 1], [0, 4]])
    _eq(c, [[1, 1, 0], [1, 1, 1]])
    c, _, _ = fnp.histogram2d(hx, hy, bins=2, weights=fnp.arange(5.0), density=True)
    nc, _, _ = np.histogram2d(np.asarray(hx), np.asarray(hy), bins=2, weights=np.arange(5.0),
                              density=True)
    _eq(c, nc, rtol=1e-5)
    sample = np.random.default_rng(0).random((50, 3)).astype(np.float32)
    c, edges = fnp.histogramdd(sample, bins=(2, 3, 4))
    nc, nedges = np.histogramdd(sample, bins=(2, 3, 4))
    _eq(c, nc)
    for e, ne in zip(edges, nedges):
        _eq(e, ne, rtol=1e-5)


def test_io_and_printing(tmp_path):
    _eq(fnp.frombuffer(np.arange(3, dtype=np.int16).tobytes(), dtype=fnp.int16), [0, 1, 2],
        np.int16)
    _eq(fnp.fromstring("1 2 3", sep=" "), [1, 2, 3], np.float32)
    _eq(fnp.fromiter(range(4), dtype=int), [0, 1, 2, 3], np.int32)
    path = tmp_path / "a.npy"
    np.save(path, fnp.arange(3))
    loaded = fnp.load(path)
    assert isinstance(loaded, fnp.ndarray)
    _eq(loaded, [0, 1, 2])
    assert fnp.array_str(fnp.array([1.5, 2])) == "[1.5 2. ]"
    assert "array([1, 2]" in fnp.array_repr(fnp.array([1, 2]))
    with fnp.printoptions(precision=2):
        assert fnp.get_printoptions()["precision"] == 2
    assert fnp.double(1).dtype == np.float32 and fnp.issubdtype(np.str_, fnp.character)


# --- precision, preferred_element_type, conv shapes, rank promotion -------------------------------

def test_precision_enum_and_validation():
    P = lax.Precision
    assert [p.name for p in P] == ["DEFAULT", "HIGH", "HIGHEST"]
    assert P("highest") is P.HIGHEST and P("float32") is P.HIGHEST
    assert P("bfloat16") is P.DEFAULT and P("tensorfloat32") is P.HIGH
    assert repr(P.HIGH) == "Precision.HIGH" and str(P.HIGH) == "HIGH"
    assert lax.canonicalize_precision(("high", "default")) == (P.HIGH, P.DEFAULT)
    assert lax.canonicalize_precision(None) is None
    a, b = fnp.arange(6.0).reshape(2, 3), fnp.arange(3.0)
    want = np.asarray(a) @ np.asarray(b)
    for prec in (None, "highest", P.HIGH, ("high", "default"), [P.DEFAULT, P.HIGHEST]):
        for f in (fnp.dot, fnp.matmul, fnp.inner):
            _eq(f(a, b, precision=prec), want)
        _eq(fnp.einsum("ij,j->i", a, b, precision=prec), want)
        _eq(fnp.tensordot(a, b, 1, precision=prec), want)
        _eq(lax.dot(a, b, precision=prec), want)
        _eq(lax.dot_general(a, b, (((1,), (0,)), ((), ())), precision=prec), want)
    _eq(fnp.vdot(b, b, precision="highest"), 5.0)
    for bad in ("foo", 3, ("high",), (P.HIGH, P.HIGH, P.HIGH)):
        with pytest.raises(ValueError, match="precision"):
            fnp.matmul(a, b, precision=bad)
        with pytest.raises(ValueError, match="precision"):
            lax.conv_general_dilated(fnp.ones((1, 1, 3)), fnp.ones((1, 1, 2)), (1,), "VALID",
                                     precision=bad)


def test_preferred_element_type():
    i8 = fnp.ones(3, fnp.int8)
    assert fnp.dot(i8, i8, preferred_element_type=fnp.float32).dtype == np.float32
    assert fnp.matmul(fnp.ones((2, 2), fnp.int8), fnp.ones((2, 2), fnp.int32),
                      preferred_element_type="float32").dtype == np.float32
    assert lax.dot(i8, i8, preferred_element_type="int32").dtype == np.int32
    big = fnp.full((300,), 100, fnp.int8)  # accumulates in int32: no int8 wrap-around
    assert int(fnp.dot(big, fnp.ones(300, fnp.int8), preferred_element_type=fnp.int32)) == 30000
    f32 = fnp.ones(3)
    assert fnp.dot(f32, f32, preferred_element_type="int32").dtype == np.int32  # as JAX
    out = fnx.jit(lambda a, b: fnp.einsum("i,i", a, b, preferred_element_type=fnp.float32))(
        i8, i8)
    assert out.dtype == np.float32 and float(out) == 3.0
    for f in (fnp.vdot, fnp.inner, lambda a, b, **k: fnp.tensordot(a, b, 1, **k),
              lambda a, b, **k: fnp.vecdot(a, b, **k)):
        assert f(i8, i8, preferred_element_type=fnp.int32).dtype == np.int32
    g = fnx.grad(lambda w: fnp.matmul(w, w, preferred_element_type=fnp.float32).sum())(
        fnp.ones((2, 2)))
    _eq(g, 4 * np.ones((2, 2)))


def test_conv_general_shape_tuple_and_dimension_numbers():
    # literals: JAX 0.10.2
    assert lax.conv_general_shape_tuple((1, 2, 10, 10), (5, 2, 3, 3), (1, 1), "SAME",
                                        ("NCHW", "OIHW", "NCHW")) == (1, 5, 10, 10)
    assert lax.conv_general_shape_tuple((1, 10, 10, 2), (3, 3, 2, 5), (2, 2), "VALID",
                                        ("NHWC", "HWIO", "NHWC")) == (1, 4, 4, 5)
    assert lax.conv_general_shape_tuple((1, 10, 10, 2), (3, 3, 2, 5), (2, 3),
                                        [(1, 2), (0, 0)], ("NHWC", "HWIO", "NCHW")) == (1, 5, 6, 3)
    assert lax.conv_general_shape_tuple((1, 10, 2), (3, 2, 5), (2,), "SAME",
                                        ("NWC", "WIO", "NWC")) == (1, 5, 5)
    dn = lax.conv_dimension_numbers((1, 2, 3, 4), (5, 2, 3, 3), ("NCHW", "OIHW", "NCHW"))
    assert dn == lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3))
    x, w = fnp.ones((1, 7, 9, 2)), fnp.ones((3, 3, 2, 4))
    spec = ("NHWC", "HWIO", "NHWC")
    out = lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=spec)
    assert out.shape == lax.conv_general_shape_tuple(x.shape, w.shape, (2, 1), "SAME", spec)


def test_rank_promotion_flag():
    a, b = fnp.ones(3), fnp.ones((2, 3))
    assert (a + b).shape == (2, 3)       # 'allow', the default
    with fnx.numpy_rank_promotion("raise"):
        for f in (lambda: a + b, lambda: fnp.maximum(a, b), lambda: fnp.arctan2(a, b),
                  lambda: fnx.jit(lambda x, y: x * y)(a, fnp.ones((2, 1, 3))),
                  lambda: fnp.ones(3, fnp.int32) - b):
            with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
                f()
        # scalars and equal ranks are not rank promotion; neither are where/matmul (as JAX)
        for f in (lambda: a + 1.0, lambda: a + fnp.ones(()), lambda: fnp.ones((1, 3)) + b,
                  lambda: fnp.where(a > 0, b, 0.0), lambda: fnp.matmul(fnp.ones((2, 3, 3)),
                                                                     fnp.ones((3, 3)))):
            f()
    with fnx.numpy_rank_promotion("warn"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a + b
        assert len(caught) == 1 and caught[0].category is UserWarning
        assert "rank promotion" in str(caught[0].message)
        assert caught[0].filename == __file__   # points at the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (a + b).shape == (2, 3)    # back to 'allow'


def test_ufunc_methods_and_frompyfunc(tmp_path):
    _eq(fnp.add.outer(fnp.arange(3), fnp.arange(2)), np.add.outer(np.arange(3), np.arange(2)))
    _eq(fnp.subtract.outer(fnp.ones(2), fnp.arange(3.0)), np.subtract.outer(np.ones(2),
                                                                             np.arange(3.0)))
    x = fnp.arange(6).reshape(2, 3)
    _eq(fnp.add.reduce(x, axis=1), [3, 12])
    _eq(fnp.maximum.reduce(x), [3, 4, 5])
    _eq(fnp.add.accumulate(fnp.arange(4)), [0, 1, 3, 6])
    _eq(fnp.add.at(fnp.zeros(4), fnp.array([0, 0, 2]), 1.0, inplace=False), [2, 0, 1, 0])
    _eq(fnp.add.reduceat(fnp.arange(8), [0, 4, 1, 5]), np.add.reduceat(np.arange(8), [0, 4, 1, 5]))
    _eq(fnp.negative.at(fnp.arange(3), fnp.array([0, 2]), inplace=False), [0, 1, -2])
    with pytest.raises(ValueError, match="inplace=False"):
        fnp.add.at(fnp.zeros(2), 0, 1.0)
    f = fnp.frompyfunc(lambda a, b: a * 2 + b, 2, 1, identity=0)
    assert isinstance(f, fnp.ufunc) and f.nin == 2 and f.identity == 0
    _eq(f(fnp.arange(3), 1), [1, 3, 5])
    _eq(f.outer(fnp.arange(2), fnp.arange(3)), [[0, 1, 2], [2, 3, 4]])
    _eq(f.reduce(fnp.arange(4)), 11)                   # ((0*2+1)*2+2)*2+3
    _eq(f.accumulate(fnp.arange(4)), [0, 1, 4, 11])
    _eq(_jit_same(lambda v: f.reduce(v, axis=1), fnp.arange(6.0).reshape(2, 3)), [4, 25])
    _eq(f.at(fnp.zeros(3), fnp.array([1, 1]), fnp.array([1.0, 2.0]), inplace=False), [0, 4, 0])
    _eq(fnx.grad(lambda v: fnp.multiply.outer(v, v).sum())(fnp.arange(3.0)), [6, 6, 6])
    fnp.save(tmp_path / "b.npy", fnp.arange(2))
    _eq(fnp.load(tmp_path / "b.npy"), [0, 1])


def test_jax_keyword_options():
    x = fnp.ones(3, fnp.int8)
    assert fnp.sum(x).dtype == np.int32 and fnp.sum(x, promote_integers=False).dtype == np.int8
    assert fnp.prod(x, promote_integers=False).dtype == np.int8
    assert fnp.sum(fnp.ones(3, bool), promote_integers=False).dtype == np.int32  # as JAX
    bins = fnp.array([0.0, 1, 2])
    for m in (None, "scan", "sort", "compare_all"):
        _eq(fnp.digitize(fnp.array([0.5, 1.5]), bins, method=m), [1, 2])
    for m in ("auto", "compare_all", "binary_search", "sort"):
        assert fnp.isin(fnp.arange(3), fnp.arange(2), method=m).tolist() == [True, True, False]
    with pytest.raises(ValueError, match="method"):
        fnp.isin(fnp.arange(3), fnp.arange(2), method="x")
    with pytest.raises(ValueError, match="method"):
        fnp.digitize(fnp.array([0.5]), bins, method="x")


def test_linalg_additions(tmp_path):
    x = fnp.array([[1.0, 2], [3, 4]])
    nx = np.asarray(x)
    for p in (None, "fro", -2, np.inf, 1):
        _eq(fnp.linalg.cond(x, p), np.linalg.cond(nx, p), rtol=1e-5)
    assert float(fnp.linalg.cond(fnp.array([[1.0, 0], [0, 0]]))) == np.inf
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.random(s).astype(np.float32) for s in [(3,), (3, 4), (4, 5), (5,)])
    _eq(_jit_same(lambda *m: fnp.linalg.multi_dot(m), a, b, c, d),
        np.linalg.multi_dot([a, b, c, d]), rtol=1e-5)
    _eq(fnp.linalg.multi_dot([b, c, c.T, b.T], precision="highest"),
        np.linalg.multi_dot([b, c, c.T, b.T]), rtol=1e-5)
    t = rng.random((4, 6, 8, 3)).astype(np.float32)
    _eq(fnp.linalg.tensorinv(t, ind=2), np.linalg.tensorinv(t, ind=2), rtol=1e-3)
    t = rng.random((6, 4, 2, 3, 4)).astype(np.float32)
    rhs = rng.random((6, 4)).astype(np.float32)
    _eq(fnp.linalg.tensorsolve(t, rhs), np.linalg.tensorsolve(t, rhs), rtol=1e-3)
    t = rng.random((2, 3, 6)).astype(np.float32)
    _eq(fnp.linalg.tensorsolve(t, rhs.ravel()[:6], axes=(0, 1)),
        np.linalg.tensorsolve(t, rhs.ravel()[:6], axes=(0, 1)), rtol=1e-3)
    np.arange(4, dtype=np.int32).tofile(tmp_path / "raw.bin")
    _eq(fnp.fromfile(tmp_path / "raw.bin", dtype=fnp.int32), [0, 1, 2, 3], np.int32)


def test_var_std_with_a_precomputed_mean():
    x = np.random.default_rng(1).random((3, 4)).astype(np.float32)
    m = x.mean(1, keepdims=True)
    _eq(fnp.var(x, axis=1, mean=m), np.var(x, axis=1, mean=m), rtol=1e-5)
    _eq(_jit_same(lambda x, m: fnp.std(x, axis=1, mean=m, ddof=1), x, m),
        np.std(x, axis=1, mean=m, ddof=1), rtol=1e-5)
    with pytest.raises(fnx.errors.ShapeError, match="keepdims=True"):
        fnp.var(x, axis=1, mean=x.mean(1))
    y = x.copy()
    y[0, 1] = np.nan
    my = np.nanmean(y, 1, keepdims=True)
    _eq(fnp.nanvar(y, axis=1, mean=my), np.nanvar(y, axis=1, mean=my), rtol=1e-5)
    _eq(fnp.nanstd(y, axis=1, mean=my), np.nanstd(y, axis=1, mean=my), rtol=1e-5)


def test_weighted_inverted_cdf_quantiles():
    rng = np.random.default_rng(0)
    q = np.array([0.0, 0.1, 0.25, 0.5, 0.9, 1.0], np.float32)
    for shape in ((11,), (3, 7)):
        x = rng.normal(size=shape).astype(np.float32)
        w = rng.integers(0, 4, size=shape).astype(np.float32)
        w[..., 0] += 1
        _eq(fnp.quantile(x, q, axis=-1, method="inverted_cdf", weights=w),
            np.quantile(x, q, axis=-1, method="inverted_cdf", weights=w))
        _eq(_jit_same(lambda x: fnp.quantile(x, q, axis=-1, method="inverted_cdf"), x),
            np.quantile(x, q, axis=-1, method="inverted_cdf"))
    x = np.arange(6.0).reshape(2, 3)
    w = np.array([[1.0, 0, 2], [0, 0, 1]])
    # q = 0 skips leading zero weights (NumPy; JAX 0.10.2 gives 3 for the second row)
    _eq(fnp.quantile(x, np.array([0.0, 0.5, 1.0]), axis=1, method="inverted_cdf", weights=w),
        [[0, 5], [2, 5], [2, 5]])
    _eq(fnp.percentile(np.arange(10.0), 30, method="inverted_cdf", weights=np.ones(10)), 2)
    _eq(fnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=np.array([1.0, 0, 2])),
        [2, 5])
    xn = np.array([1.0, 2, np.nan, 4])
    _eq(fnp.nanquantile(xn, 0.5, method="inverted_cdf", weights=np.array([1.0, 1, 2, 0])),
        np.nanquantile(xn, 0.5, method="inverted_cdf", weights=np.array([1.0, 1, 2, 0])))
    with pytest.raises(ValueError, match="inverted_cdf"):
        fnp.quantile(x, 0.5, weights=np.ones((2, 3)))


def test_argsort_index_dtype():
    out = _jit_same(lambda a: fnp.argsort(a, dtype=fnp.int8), fnp.array([3, 1, 2]))
    _eq(out, [1, 2, 0], np.int8)
    _eq(fnp.argsort(fnp.array([3, 1, 2]), dtype="uint8", descending=True), [0, 2, 1], np.uint8)
    assert fnp.argsort(fnp.array([3.0, 1])).dtype == np.int32
    with pytest.raises(TypeError, match="integer"):
        fnp.argsort(fnp.array([1, 2]), dtype=fnp.float32)


def test_bool_integer_ops_and_complex_rint():
    """JAX's dtypes (literals: JAX 0.10.2): bool operands of the integer-only ops act as
    the default int; rint rounds complex parts."""
    b, c = fnp.array([True, False, True]), fnp.array([True, True, False])
    for f, want in ((fnp.remainder, [0, 0, 0]), (fnp.left_shift, [2, 0, 1]),
                    (fnp.right_shift, [0, 0, 1])):
        _eq(_jit_same(f, b, c), want, np.int32)
    assert fnp.floor_divide(b, c).dtype == np.int32 and fnp.fmod(b, c).dtype == np.int32
    assert (b // c).dtype == np.int32
    _eq(fnp.floor_divide(b, c)[:2], [1, 0])
    _eq(fnp.rint(fnp.array([1.5 + 2.5j, -2.5 - 1.5j])), [2 + 2j, -2 - 2j], np.complex64)
