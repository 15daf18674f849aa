"""Tests of fnx.testing.strategies: each strategy draws what its docstring promises.

Properties are checked with ``@given`` over a few examples; that special values
(NaN, infinities, -0.0, subnormals, negative axes, ...) actually occur is
checked with ``hypothesis.find``, which fails if none turns up in its budget.
"""
import math
import sys
import types
import warnings

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings
from hypothesis.errors import NoSuchExample
from hypothesis import strategies as st

import fnx
from fnx.core import dtypes as fdt
from fnx.testing import strategies as fst

FEW = settings(max_examples=25, deadline=None, database=None)
FIND = settings(max_examples=300, deadline=None, database=None, phases=[Phase.generate])
SHRINK = settings(FIND, phases=[Phase.generate, Phase.shrink])


def found(strategy, condition, tries=300):
    """A draw of ``strategy`` satisfying ``condition`` (NoSuchExample if none in ``tries``)."""
    return find(strategy, condition, settings=settings(FIND, max_examples=tries))


def simplest(strategy, condition=lambda x: True):
    """The draw of ``strategy`` that hypothesis shrinks to, among those satisfying ``condition``."""
    return find(strategy, condition, settings=SHRINK)


def finite_part(a):
    """The non-NaN values of ``a`` as float64 (complex: both parts), flattened."""
    a = np.asarray(a)
    if a.dtype.kind == "c":
        a = np.concatenate([a.real.ravel(), a.imag.ravel()])
    a = a.astype(np.float64).ravel()
    return a[~np.isnan(a)]


# --- dtypes ------------------------------------------------------------------------

@pytest.mark.parametrize("kinds", ["b", "i", "u", "f", "c", "fc", "biufc"])
@FEW
@given(data=st.data())
def test_dtypes_have_the_requested_kinds(kinds, data):
    d = data.draw(fst.dtypes(kinds))
    assert isinstance(d, np.dtype)
    assert d.kind in kinds
    assert d in fdt.SUPPORTED
    assert d not in (fdt.float16, fdt.bfloat16)  # only on request


def test_dtypes_cover_each_kind_and_shrink_to_the_32_bit_member():
    expected = {"i": [np.int8, np.int16, np.int32, np.int64],
                "u": [np.uint8, np.uint16, np.uint32, np.uint64],
                "c": [np.complex64, np.complex128]}
    for kinds, members in expected.items():
        for t in members:
            assert found(fst.dtypes(kinds), lambda d, t=t: d == np.dtype(t)) == np.dtype(t)
    assert simplest(fst.dtypes("f")) == np.float32
    assert simplest(fst.dtypes("if")) == np.int32   # first listed kind
    assert simplest(fst.dtypes("uc")) == np.uint32


def test_dtypes_half_precision_only_when_asked():
    assert found(fst.dtypes("f", include_float16=True), lambda d: d == np.float16)
    if fdt.bfloat16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    assert found(fst.dtypes("f", include_bfloat16=True), lambda d: d == fdt.bfloat16)


@pytest.mark.parametrize("kinds", ["x", "fz", "", None])
def test_dtypes_rejects_unknown_kinds(kinds):
    with pytest.raises(ValueError, match="'b' bool.*'c' complex|non-empty string"):
        fst.dtypes(kinds)


# --- shapes ------------------------------------------------------------------------

@FEW
@given(fst.shapes(min_dims=1, max_dims=4, min_side=0, max_side=3))
def test_shapes_within_bounds(shape):
    assert isinstance(shape, tuple)
    assert 1 <= len(shape) <= 4
    assert all(isinstance(s, int) and 0 <= s <= 3 for s in shape)


@FEW
@given(fst.shapes())
def test_shapes_defaults(shape):
    assert len(shape) <= 3 and all(1 <= s <= 4 for s in shape)


@FEW
@given(fst.broadcast_shapes(3, min_dims=1, max_dims=4, max_side=3))
def test_broadcast_shapes_broadcast(shapes):
    assert len(shapes) == 3
    assert all(1 <= len(s) <= 4 and all(1 <= d <= 3 for d in s) for s in shapes)
    out = np.broadcast_shapes(*shapes)
    for s in shapes:  # each one really broadcasts to the result
        assert np.broadcast_to(np.empty(s), out).shape == out


@FEW
@given(fst.broadcast_shapes(2, base_shape=(5, 1)))
def test_broadcast_shapes_with_base_shape(shapes):
    np.broadcast_shapes((5, 1), *shapes)


def test_broadcast_shapes_are_not_all_equal():
    # a test of broadcasting needs shapes that differ
    found(fst.broadcast_shapes(2), lambda ss: ss[0] != ss[1] and len(ss[0]) == len(ss[1]))


@pytest.mark.parametrize("call", [
    lambda: fst.shapes(min_dims=3, max_dims=2),
    lambda: fst.shapes(min_side=5, max_side=4),
    lambda: fst.shapes(max_dims=-1),
    lambda: fst.shapes(max_dims=2.5),
    lambda: fst.broadcast_shapes(0),
    lambda: fst.broadcast_shapes(2, base_shape=(-1,)),
    lambda: fst.broadcast_shapes(2, min_side=4, max_side=5, base_shape=(3,)),
])
def test_shapes_bad_arguments(call):
    with pytest.raises(ValueError):
        call()


# --- arrays: dtype, shape, ranges ---------------------------------------------------------

@FEW
@given(data=st.data())
def test_arrays_respect_dtype_and_shape(data):
    dtype = data.draw(fst.dtypes("biufc", include_float16=True, include_bfloat16=True))
    shape = data.draw(fst.shapes(min_side=0))
    a = data.draw(fst.arrays(dtype, shape))
    assert isinstance(a, np.ndarray)
    assert a.dtype == dtype and a.shape == shape
    if dtype.kind in "fc":  # default: finite, within [-10, 10]
        v = finite_part(a)
        assert v.size == (2 * a.size if dtype.kind == "c" else a.size)
        assert np.all(np.abs(v) <= 10)


@FEW
@given(fst.arrays(fst.dtypes("fc"), fst.shapes(min_dims=1)))
def test_arrays_take_strategies_for_dtype_and_shape(a):
    assert a.dtype.kind in "fc" and a.ndim >= 1 and np.all(np.isfinite(a))


@FEW
@given(fst.arrays(np.float32, st.integers(0, 5), min_value=st.just(2.0), max_value=3))
def test_arrays_take_strategies_for_bounds(a):
    assert a.ndim == 1 and np.all((a >= 2) & (a <= 3))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
@FEW
@given(data=st.data())
def test_arrays_bounds_are_exact(dtype, data):
    # 0.1 and 0.3 are not representable: values must still lie in [0.1, 0.3] exactly
    a = data.draw(fst.arrays(dtype, (8,), min_value=0.1, max_value=0.3))
    v = finite_part(a)
    assert v.size == a.size * (2 if a.dtype.kind == "c" else 1)
    assert np.all((v >= 0.1) & (v <= 0.3)), v


def test_arrays_reach_their_bounds():
    lo = found(fst.arrays(np.float32, (2,), min_value=0.1, max_value=0.3),
               lambda a: (a.astype(np.float64) < 0.10001).any())
    assert (lo.astype(np.float64) >= 0.1).all()
    assert found(fst.arrays(np.float64, (2,)), lambda a: (a == 10).any()) is not None
    assert found(fst.arrays(np.float64, (2,)), lambda a: (a == -10).any()) is not None


@FEW
@given(fst.arrays(np.float64, (6,), min_value=100))
def test_arrays_one_bound_moves_the_default_range(a):
    assert np.all((a >= 100) & (a <= 200))


@FEW
@given(fst.arrays(np.float16, (6,), min_value=-1e9, max_value=1e9))
def test_arrays_bounds_are_clipped_to_the_dtype(a):
    assert np.all(np.isfinite(a))


@FEW
@given(fst.arrays(np.float32, (6,), min_value=-np.inf, max_value=np.inf))
def test_arrays_infinite_bounds_mean_the_whole_finite_range(a):
    assert np.all(np.isfinite(a))


def test_arrays_whole_range_reaches_large_values():
    found(fst.arrays(np.float32, (4,), min_value=-np.inf, max_value=np.inf),
          lambda a: (np.abs(a) > 1e30).any())


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint64", "int64"])
@FEW
@given(data=st.data())
def test_arrays_ints_honour_bounds(dtype, data):
    a = data.draw(fst.arrays(dtype, (5,), min_value=-3, max_value=200))
    info = np.iinfo(dtype)
    assert a.dtype == dtype
    assert np.all((a >= max(-3, info.min)) & (a <= min(200, info.max)))


@FEW
@given(fst.arrays("int8", (20,)))
def test_arrays_ints_default_to_the_whole_dtype(a):
    assert a.dtype == np.int8


def test_arrays_ints_reach_the_dtype_limits():
    found(fst.arrays("int8", (4,)), lambda a: (a == 127).any())
    found(fst.arrays("uint16", (4,)), lambda a: (a == 65535).any())


@FEW
@given(fst.arrays("bool", (6,), min_value=True))
def test_arrays_bools_honour_bounds(a):
    assert a.dtype == np.bool_ and a.all()


def test_arrays_bfloat16():
    if fdt.bfloat16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")

    @FEW
    @given(fst.arrays(fdt.bfloat16, (2, 3), min_value=0.1, max_value=0.3, min_magnitude=0.2))
    def check(a):
        assert a.dtype == fdt.bfloat16
        v = a.astype(np.float64)
        assert np.all((v >= 0.2) & (v <= 0.3))

    # a range of bfloat16 subnormals: drawn as float32, many values round to zero
    @FEW
    @given(fst.arrays(fdt.bfloat16, (4, 4), min_value=-1e-40, max_value=1e-40,
                      allow_subnormal=True, allow_signed_zeros=False))
    def check_no_negative_zero(a):
        v = a.astype(np.float32)
        assert not neg_zero(v).any() and np.all(np.abs(v) <= 1e-40)

    check()
    check_no_negative_zero()
    found(fst.arrays(fdt.bfloat16, (3,), allow_nan=True), lambda a: np.isnan(a).any())
    found(fst.arrays(fdt.bfloat16, (3,), allow_subnormal=True),
          lambda a: subnormal(a.astype(np.float32), fdt.bfloat16).any())


# --- arrays: special values -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex128"])
@FEW
@given(data=st.data())
def test_arrays_finite_by_default(dtype, data):
    a = data.draw(fst.arrays(dtype, fst.shapes()))
    assert np.all(np.isfinite(a))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
def test_special_values_occur_when_allowed(dtype):
    nan = fst.arrays(dtype, (3,), allow_nan=True)
    inf = fst.arrays(dtype, (3,), allow_infinity=True)
    found(nan, lambda a: np.isnan(a).any())
    found(inf, lambda a: np.isposinf(finite_or_inf(a)).any())
    found(inf, lambda a: np.isneginf(finite_or_inf(a)).any())
    found(fst.arrays(dtype, (3,)), lambda a: neg_zero(a).any())      # signed zeros by default
    found(fst.arrays(dtype, (3,)), lambda a: pos_zero(a).any())
    found(fst.arrays(dtype, (3,), allow_subnormal=True), lambda a: subnormal(a).any())


def finite_or_inf(a):
    a = np.asarray(a)
    return np.concatenate([a.real.ravel(), a.imag.ravel()]) if a.dtype.kind == "c" else a


def neg_zero(a):
    v = finite_or_inf(a)
    return (v == 0) & np.signbit(v)


def pos_zero(a):
    v = finite_or_inf(a)
    return (v == 0) & ~np.signbit(v)


def subnormal(a, dtype=None):
    """Where ``a`` holds subnormals of ``dtype`` (default: its own dtype)."""
    v = finite_or_inf(a)
    tiny = float(fst._finfo(np.dtype(dtype or v.dtype)).smallest_normal)
    return (v != 0) & (np.abs(v) < tiny)


def test_nan_is_common_not_one_in_a_million():
    # about a quarter of the elements are special; NaN is one of several specials
    s = fst.arrays(np.float64, (64,), allow_nan=True)
    seen = []

    @settings(max_examples=30, deadline=None, database=None)
    @given(s)
    def count(a):
        seen.append(np.isnan(a).any())

    count()
    assert sum(seen) >= 10, f"NaN in only {sum(seen)} of {len(seen)} arrays of 64 elements"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
@FEW
@given(data=st.data())
def test_flags_off_keep_values_out(dtype, data):
    a = data.draw(fst.arrays(dtype, (4, 4), allow_signed_zeros=False))
    assert not neg_zero(a).any() and not subnormal(a).any() and np.all(np.isfinite(a))


@FEW
@given(fst.arrays(np.float32, (8,), allow_infinity=True, min_value=0))
def test_infinity_only_on_open_sides(a):
    assert not np.isneginf(a).any() and np.all(a >= 0)
    assert not neg_zero(a).any()  # min_value=0 is +0.0: no room below zero


def test_a_negative_zero_bound_allows_negative_zero():
    # 0.0 and -0.0 are equal as numbers but not as bounds: a lower bound of +0.0 keeps
    # -0.0 out (above), one of -0.0 lets it in
    never = fst.arrays(np.float32, (3,), min_value=0.0, max_value=1.0)
    with pytest.raises(NoSuchExample):
        found(never, lambda a: neg_zero(a).any())
    found(fst.arrays(np.float32, (3,), min_value=-0.0, max_value=1.0),
          lambda a: neg_zero(a).any())


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex128", "int16",
                                   "uint8"])
@FEW
@given(data=st.data())
def test_min_magnitude(dtype, data):
    a = data.draw(fst.arrays(dtype, (10,), min_magnitude=0.5, allow_nan=True,
                             allow_infinity=True))
    v = finite_part(a)
    assert np.all(np.abs(v) >= 0.5)


def test_min_magnitude_reaches_its_edge_on_both_sides():
    s = fst.arrays(np.float32, (3,), min_magnitude=0.25)
    found(s, lambda a: (a == -0.25).any())
    found(s, lambda a: (a == 0.25).any())


@pytest.mark.parametrize("dtype", ["float32", "int8", "complex64", "uint8"])
@FEW
@given(data=st.data())
def test_unique(dtype, data):
    a = data.draw(fst.arrays(dtype, fst.shapes(max_side=3), unique=True, allow_nan=True))
    v = a[~np.isnan(a)] if a.dtype.kind in "fc" else a.ravel()
    assert np.unique(v).size == v.size


@FEW
@given(fst.arrays("bool", st.sampled_from([(), (1,), (2,)]), unique=True))
def test_unique_bools(a):
    assert np.unique(a).size == a.size


@FEW
@given(fst.arrays(np.float64, (5,), elements=st.sampled_from([1.5, 2.5])))
def test_elements_replace_the_rules(a):
    assert set(a.tolist()) <= {1.5, 2.5}


@pytest.mark.parametrize("call, message", [
    (lambda: fst.arrays(np.float32, (2,), min_value=5, max_value=1), "greater than"),
    (lambda: fst.arrays(np.float32, (2,), min_value=np.nan), "NaN"),
    (lambda: fst.arrays(np.float32, (2,), min_magnitude=-1), "min_magnitude"),
    (lambda: fst.arrays(np.float32, (2,), min_value=-1, max_value=1, min_magnitude=2),
     "magnitude"),
    (lambda: fst.arrays(np.int8, (2,), min_value=200), "no int8 value"),
    (lambda: fst.arrays(np.float32, (2,), allow_infinity=True, min_value=0, max_value=1),
     "allow_infinity"),
    (lambda: fst.arrays(np.float32, (2,), elements=st.just(1.0), min_value=0), "elements"),
    (lambda: fst.arrays("int16", (-1,)), "negative"),
    (lambda: fst.arrays("int16", (2.5,)), "tuple of ints"),
    (lambda: fst.arrays("object", (2,)), "not supported"),
    (lambda: fst.arrays("bool", (3,), unique=True), "distinct"),
    (lambda: fst.arrays(np.float32, (2,), allow_nan="yes"), "allow_nan"),
])
def test_arrays_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- axes --------------------------------------------------------------------------

@FEW
@given(data=st.data())
def test_axes_valid_and_unique(data):
    ndim = data.draw(st.integers(1, 5))
    ax = data.draw(fst.axes(ndim))
    assert isinstance(ax, tuple) and 1 <= len(ax) <= ndim
    assert all(isinstance(a, int) and -ndim <= a < ndim for a in ax)
    assert len({a % ndim for a in ax}) == len(ax)
    np.sum(np.empty((2,) * ndim), axis=ax)  # NumPy accepts them


@FEW
@given(data=st.data())
def test_axes_options(data):
    ndim = data.draw(st.integers(1, 4))
    ax = data.draw(fst.axes(ndim, min_size=0, max_size=6, allow_negative=False, unique=False))
    assert len(ax) <= 6 and all(0 <= a < ndim for a in ax)


def test_axes_draw_negative_and_repeated_axes_when_allowed():
    found(fst.axes(3), lambda ax: any(a < 0 for a in ax))
    found(fst.axes(2, unique=False, min_size=2), lambda ax: ax[0] % 2 == ax[1] % 2)
    assert simplest(fst.axes(3)) == (0,)
    assert simplest(fst.axes(0, min_size=0)) == ()


@FEW
@given(data=st.data())
def test_axis(data):
    ndim = data.draw(st.integers(1, 4))
    a = data.draw(fst.axis(ndim))
    assert -ndim <= a < ndim
    assert 0 <= data.draw(fst.axis(ndim, allow_negative=False)) < ndim


@pytest.mark.parametrize("call, message", [
    (lambda: fst.axes(0), "ndim 0 has no axes"),
    (lambda: fst.axis(0), "ndim=0"),
    (lambda: fst.axes(2, min_size=3), "unique"),
    (lambda: fst.axes(3, min_size=2, max_size=1), "greater than"),
    (lambda: fst.axes(-1), "ndim"),
])
def test_axes_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- index expressions --------------------------------------------------------------------

def apply_index(shape, index):
    """``np.empty(shape)[index]``, with any NumPy warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return np.empty(shape)[index]


@settings(max_examples=60, deadline=None, database=None)
@given(data=st.data())
def test_index_expressions_index_the_array(data):
    shape = data.draw(fst.shapes(max_dims=4, min_side=0))
    index = data.draw(fst.index_expressions(shape, allow_integer_arrays=True,
                                            allow_boolean_masks=True))
    parts = index if isinstance(index, tuple) else (index,)
    assert sum(p is Ellipsis for p in parts) <= 1
    apply_index(shape, index)


@FEW
@given(data=st.data())
def test_index_expressions_basic_only(data):
    shape = data.draw(fst.shapes(max_dims=4))
    index = data.draw(fst.index_expressions(shape, allow_newaxis=False,
                                            allow_ellipsis=False))
    parts = index if isinstance(index, tuple) else (index,)
    assert all(isinstance(p, (int, slice)) for p in parts)
    for p, n in zip(parts, shape):
        if isinstance(p, int):
            assert -n <= p < n
    apply_index(shape, index)


@FEW
@given(data=st.data())
def test_index_expressions_max_dims(data):
    shape = data.draw(fst.shapes(max_dims=4))
    max_dims = data.draw(st.integers(0, 3))
    index = data.draw(fst.index_expressions(shape, allow_integer_arrays=True,
                                            max_dims=max_dims))
    assert apply_index(shape, index).ndim <= max_dims


def test_index_expressions_cover_every_kind_of_index():
    s = fst.shapes(min_dims=2, max_dims=3, max_side=4).flatmap(
        lambda shape: st.tuples(st.just(shape), fst.index_expressions(
            shape, allow_integer_arrays=True, allow_boolean_masks=True)))

    def parts(pair):
        index = pair[1]
        return index if isinstance(index, tuple) else (index,)

    def has(pred):
        return lambda pair: any(pred(p) for p in parts(pair))

    def int_array(p):
        return isinstance(p, np.ndarray) and p.dtype.kind == "i"

    def mask(p):
        return isinstance(p, np.ndarray) and p.dtype == np.bool_

    # each kind occurs in a few percent of draws or more; allow 1000 tries
    found(s, has(lambda p: p is None), 1000)
    found(s, has(lambda p: p is Ellipsis), 1000)
    found(s, has(lambda p: isinstance(p, int) and p < 0), 1000)
    found(s, has(lambda p: isinstance(p, slice) and (p.step or 1) < 0), 1000)
    found(s, has(lambda p: int_array(p) and (p < 0).any()), 1000)
    found(s, has(lambda p: mask(p) and p.ndim == 2), 1000)
    found(s, lambda pair: not isinstance(pair[1], tuple), 1000)
    # both kinds of advanced index in one expression
    found(s, lambda pair: any(map(int_array, parts(pair))) and any(map(mask, parts(pair))),
          2000)


def test_index_expressions_bad_arguments():
    with pytest.raises(ValueError, match="negative"):
        fst.index_expressions((2, -1))
    with pytest.raises(ValueError, match="max_dims"):
        fst.index_expressions((2,), max_dims=-1)
    with pytest.raises(ValueError, match="allow_boolean_masks"):
        fst.index_expressions((2,), allow_boolean_masks=1)


# --- PRNG keys ------------------------------------------------------------------------------

@FEW
@given(fst.prng_keys())
def test_prng_keys_are_uint32_pairs(key):
    assert isinstance(key, fnx.Array)
    assert key.dtype == np.uint32 and key.shape == (2,)


@pytest.mark.parametrize("seed", [0, 1, 42, 2**32 - 1, 2**32, 2**32 + 7, 2**63 - 1])
def test_prng_keys_follow_jax_seeding(seed):
    with fnx.enable_x64():      # all 64 bits of the seed (without x64: its low 32)
        key = np.asarray(fst._key_from_seed(seed))
        assert key.tolist() == [seed >> 32, seed & 0xFFFFFFFF]
        assert np.array_equal(np.asarray(fst._key_from_seed(seed)), key)  # deterministic
    if seed < 2**32:
        assert np.asarray(fst._key_from_seed(seed)).tolist() == [0, seed]


def test_prng_keys_use_fnx_random_where_it_exists(monkeypatch):
    fake = types.ModuleType("fnx.random")
    fake.PRNGKey = lambda seed: ("key", seed)
    monkeypatch.setitem(sys.modules, "fnx.random", fake)
    assert fst._key_from_seed(5) == ("key", 5)
    assert simplest(fst.prng_keys()) == ("key", 0)


def test_prng_keys_shrink_to_seed_zero_and_use_the_high_word():
    assert np.asarray(simplest(fst.prng_keys())).tolist() == [0, 0]
    assert np.asarray(simplest(fst.prng_keys(), lambda k: int(k[1]) > 5)).tolist() == [0, 6]
    with fnx.enable_x64():      # the high word takes the seed's bits from 32 on
        keys = fst.prng_keys()
        assert np.asarray(simplest(keys, lambda k: int(k[0]) != 0)).tolist() == [1, 0]


# --- profiles -----------------------------------------------------------------------------

def test_register_profiles_is_idempotent():
    fst.register_profiles()
    fst.register_profiles()
    ci = settings.get_profile("fnx-ci")
    thorough = settings.get_profile("fnx-thorough")
    assert ci.max_examples == 10 and thorough.max_examples == 200
    assert ci.deadline is None and thorough.deadline is None
    assert ci.database is None and ci.derandomize
    for profile in (ci, thorough):
        assert {"too_slow", "data_too_large", "filter_too_much"} <= {
            h.name for h in profile.suppress_health_check}


def test_module_docstring_documents_the_thorough_profile():
    assert "HYPOTHESIS_PROFILE=fnx-thorough python -m pytest" in fst.__doc__
    assert math.isclose(fst.DEFAULT_FLOAT_BOUND, 10.0)
