"""Hypothesis strategies for property-testing array code written with fnx.

    import numpy as np
    from hypothesis import given, strategies as st

    import fnx.numpy as fnp
    from fnx.testing import strategies as fst

    @given(st.data())
    def test_sum_matches_numpy(data):
        x = data.draw(fst.arrays(fst.dtypes("fc"), fst.shapes(min_dims=1)))
        ax = data.draw(fst.axes(x.ndim, max_size=2))
        np.testing.assert_allclose(fnp.sum(x, axis=ax), np.sum(x, axis=ax), rtol=1e-5)

    @given(fst.arrays("float64", (3,), min_magnitude=0.1))
    def test_reciprocal(x):           # values away from zero: a safe domain for 1/x
        np.testing.assert_allclose(fnp.reciprocal(x) * x, 1.0)

What is here
------------
- ``dtypes(kinds)``: NumPy dtypes fnx supports, by kind letter (``"biufc"``).
- ``shapes()`` and ``broadcast_shapes(n)``: array shapes, and tuples of shapes
  that broadcast together.
- ``arrays(dtype, shape, ...)``: NumPy arrays with values chosen for numerics:
  finite and in ``[-10, 10]`` for floats unless asked otherwise, with NaN, +-inf,
  signed zeros and subnormals mixed in often (not one draw in a million) when
  they are allowed.
- ``axes(ndim)`` / ``axis(ndim)``: valid axis arguments, negative ones included.
- ``index_expressions(shape)``: indices valid for an array of that shape (ints,
  slices, ``None``, ``...``, and optionally integer arrays and boolean masks).
- ``prng_keys()``: PRNG keys (raw threefry key data, as ``PRNGKey(seed)`` makes).
- ``register_profiles()``: the settings profiles ``"fnx-ci"`` (10 examples per
  test, the default of fnx's own test suite) and ``"fnx-thorough"`` (200).

Arguments that take a value (a dtype, a shape, a bound, a flag) also take a
strategy of such values, e.g. ``arrays(dtypes("f"), shapes())``.
``index_expressions`` and ``axes`` need a concrete shape / ndim: draw it first
(``st.data()`` as above, or ``flatmap``).

For a deep local run of fnx's test suite (its conftest loads the profile
named by ``HYPOTHESIS_PROFILE``, ``fnx-ci`` by default)::

    HYPOTHESIS_PROFILE=fnx-thorough python -m pytest

This module imports hypothesis (a test extra of fnx); ``fnx.testing`` itself
does not.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..core import dtypes as _dt

__all__ = ["arrays", "axes", "axis", "broadcast_shapes", "dtypes", "index_expressions",
           "prng_keys", "register_profiles", "shapes"]

SearchStrategy = st.SearchStrategy

#: Floats are drawn from ``[-DEFAULT_FLOAT_BOUND, DEFAULT_FLOAT_BOUND]`` unless bounds are given.
DEFAULT_FLOAT_BOUND = 10.0

# Arrays with more elements than this draw a sparse set of elements over one drawn
# fill value (hypothesis's own scheme for large arrays) instead of one draw per element.
_DENSE_LIMIT = 256

# NumPy kind letter -> the dtypes of that kind, the one to shrink toward first
# (32-bit, fnx's default width; float16/bfloat16 are appended only on request).
_KINDS = {
    "b": (_dt.bool_,),
    "i": (_dt.int32, _dt.int64, _dt.int8, _dt.int16),
    "u": (_dt.uint32, _dt.uint64, _dt.uint8, _dt.uint16),
    "f": (_dt.float32, _dt.float64),
    "c": (_dt.complex64, _dt.complex128),
}


def _is_strategy(x):
    return isinstance(x, SearchStrategy)


def _resolve(draw, x):
    """``x`` itself, or a value drawn from it when it is a strategy."""
    return draw(x) if _is_strategy(x) else x


def _check_int(name, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_order(low_name, low, high_name, high):
    if high is not None and low > high:
        raise ValueError(f"{low_name}={low} is greater than {high_name}={high}")


# --- dtypes ------------------------------------------------------------------

def dtypes(kinds="f", *, include_float16=False, include_bfloat16=False):
    """A strategy of NumPy dtypes that fnx supports, of the given kinds.

    ``kinds`` is a string of NumPy kind letters: ``b`` bool, ``i`` signed ints
    (int8 to int64), ``u`` unsigned ints (uint8 to uint64), ``f`` floats
    (float32 and float64; float16 with ``include_float16``, bfloat16 with
    ``include_bfloat16`` where fnx supports it, i.e. ml_dtypes is installed;
    otherwise that flag is ignored) and ``c`` complex64/complex128.

    Draws shrink toward the first kind listed and, within a kind, toward its
    32-bit member (float32, int32, uint32, complex64).
    """
    if not isinstance(kinds, str) or not kinds:
        raise ValueError(f"kinds must be a non-empty string of the letters "
                         f"{''.join(_KINDS)!r}, got {kinds!r}")
    unknown = sorted(set(kinds) - set(_KINDS))
    if unknown:
        raise ValueError(f"unknown dtype kind(s) {''.join(unknown)!r} in kinds={kinds!r}; "
                         f"allowed: 'b' bool, 'i' signed int, 'u' unsigned int, "
                         f"'f' float, 'c' complex")
    chosen = []
    for k in dict.fromkeys(kinds):  # in order, without repeats
        chosen.extend(_KINDS[k])
        if k == "f":
            if include_float16:
                chosen.append(_dt.float16)
            if include_bfloat16 and _dt.bfloat16 is not None:
                chosen.append(_dt.bfloat16)
    return st.sampled_from(chosen)


def _as_dtype(dtype):
    """A supported NumPy dtype for a dtype-like, or a ValueError saying why not."""
    try:
        return _dt.canonicalize(dtype)
    except TypeError as e:
        raise ValueError(str(e)) from None


# --- shapes --------------------------------------------------------------------

def _check_dims_sides(min_dims, max_dims, min_side, max_side):
    min_dims = _check_int("min_dims", min_dims)
    max_dims = _check_int("max_dims", max_dims)
    min_side = _check_int("min_side", min_side)
    max_side = _check_int("max_side", max_side)
    _check_order("min_dims", min_dims, "max_dims", max_dims)
    _check_order("min_side", min_side, "max_side", max_side)
    if max_dims > 32:
        raise ValueError(f"max_dims={max_dims} exceeds 32, the most dimensions supported here")
    return min_dims, max_dims, min_side, max_side


def shapes(*, min_dims=0, max_dims=3, min_side=1, max_side=4):
    """A strategy of array shapes: tuples of ``min_dims..max_dims`` sides in
    ``[min_side, max_side]``; shrinks toward fewer and smaller dimensions."""
    min_dims, max_dims, min_side, max_side = _check_dims_sides(
        min_dims, max_dims, min_side, max_side)
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                            min_side=min_side, max_side=max_side)


def _check_shape(shape, name="shape"):
    """A shape as a tuple of non-negative ints (an int ``n`` means ``(n,)``)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(_side(s) for s in shape)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise ValueError(f"{name} has a negative side: {shape!r}")
    return out


def _side(x):
    """``int(x)`` for an integer-like side (not a bool, not a float); TypeError otherwise."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("a bool is not a side")
    return operator.index(x)


def broadcast_shapes(num_shapes=2, *, min_dims=0, max_dims=3, min_side=1, max_side=4,
                     base_shape=()):
    """A strategy of tuples of ``num_shapes`` shapes that broadcast together,
    and with ``base_shape``, under NumPy's rules (``np.broadcast_shapes``).

    Sides are in ``[min_side, max_side]``; a side aligned with a side of
    ``base_shape`` is that side or 1 (1 only when ``min_side <= 1``).
    """
    num_shapes = _check_int("num_shapes", num_shapes, minimum=1)
    min_dims, max_dims, min_side, max_side = _check_dims_sides(
        min_dims, max_dims, min_side, max_side)
    base_shape = _check_shape(base_shape, "base_shape")
    try:
        strategy = hnp.mutually_broadcastable_shapes(
            num_shapes=num_shapes, base_shape=base_shape, min_dims=min_dims,
            max_dims=max_dims, min_side=min_side, max_side=max_side)
        strategy.validate()
    except Exception as e:  # hypothesis's InvalidArgument, with its explanation
        raise ValueError(f"broadcast_shapes: {e}") from None
    return strategy.map(lambda b: b.input_shapes)


# --- element values ------------------------------------------------------------

def _finfo(dtype):
    if _dt.bfloat16 is not None and dtype == _dt.bfloat16:
        import ml_dtypes  # there when fnx has bfloat16
        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def _round_into(dtype, x, up):
    """The dtype's nearest value to ``x`` in direction ``up`` (``>= x``) or down (``<= x``),
    as a Python float; ``x`` must lie within the dtype's finite range."""
    v = dtype.type(x)
    if up and float(v) < x:
        v = np.nextafter(v, dtype.type(np.inf))
    elif not up and float(v) > x:
        v = np.nextafter(v, dtype.type(-np.inf))
    return float(v)


# True about one draw in four; shrinks toward False.
_SPECIAL_COIN = st.sampled_from((False, False, False, True))


@st.composite
def _mixed(draw, ordinary, special):
    """Ordinary values, or (about one draw in four) special ones: NaN, inf, zeros,
    edges of the domain. So those turn up in most small arrays when allowed, while
    most elements stay ordinary. Shrinks toward the ordinary values."""
    return draw(special if draw(_SPECIAL_COIN) else ordinary)


def _default_bounds(lo, hi):
    """Fill in missing float bounds: ``[-10, 10]``, moved out past a given bound
    by ``max(10, |bound|)`` where that bound lies beyond the default."""
    d = DEFAULT_FLOAT_BOUND
    if lo is None and hi is None:
        return -d, d
    if hi is None:
        hi = d if math.isinf(lo) else max(d, lo + max(d, abs(lo)))
    if lo is None:
        lo = -d if math.isinf(hi) else min(-d, hi - max(d, abs(hi)))
    return lo, hi


def _float_component(dtype, rules):
    """Strategy of Python floats exactly representable in the real float ``dtype``."""
    (min_value, max_value, allow_nan, allow_infinity, allow_signed_zeros,
     allow_subnormal, min_magnitude) = rules
    fi = _finfo(dtype)
    big = float(fi.max)
    lo, hi = _default_bounds(min_value, max_value)
    lo = _round_into(dtype, min(max(lo, -big), big), up=True)
    hi = _round_into(dtype, min(max(hi, -big), big), up=False)
    if lo > hi:
        raise ValueError(f"no {dtype} value lies in [{min_value}, {max_value}]")
    m = 0.0
    if min_magnitude > 0:
        if min_magnitude > big:
            raise ValueError(f"min_magnitude={min_magnitude} exceeds the largest {dtype} "
                             f"({big})")
        m = _round_into(dtype, min_magnitude, up=True)

    pieces = []  # [a, b] intervals of allowed finite values, ends representable
    if m == 0:
        pieces.append((lo, hi))
    else:
        if max(lo, m) <= hi:
            pieces.append((max(lo, m), hi))
        if lo <= min(hi, -m):
            pieces.append((lo, min(hi, -m)))
    if not pieces:
        raise ValueError(f"no {dtype} value in [{min_value}, {max_value}] has magnitude "
                         f">= min_magnitude={min_magnitude}")

    is_bf16 = _dt.bfloat16 is not None and dtype == _dt.bfloat16
    width = 32 if is_bf16 else dtype.itemsize * 8
    tiny = float(fi.smallest_normal)
    smallest = float(fi.smallest_subnormal)

    def has_subnormals(a, b):
        return (b >= smallest and a < tiny) or (a <= -smallest and b > -tiny)

    branches = []
    for a, b in pieces:
        sub = bool(allow_subnormal and has_subnormals(a, b))
        branches.append(st.floats(a, b, width=width, allow_nan=False, allow_infinity=False,
                                  allow_subnormal=sub))
    finite = st.one_of(branches)
    if is_bf16:
        # float32 values rounded to bfloat16. Rounding to nearest is monotone, so with
        # every bound a bfloat16 value, a value in [a, b] or with |x| >= m still is after
        # rounding, and a normal one stays normal (a subnormal may become a signed zero,
        # which the map below handles).
        finite = finite.map(lambda x: float(dtype.type(x)))
    if not allow_signed_zeros:
        finite = finite.map(lambda x: x + 0.0)  # -0.0 + 0.0 == +0.0; other values unchanged

    def allowed(x):
        return any(a <= x <= b for a, b in pieces)

    special = []
    if allow_nan:
        special.append(math.nan)
    if allow_infinity:
        if min_value is None or min_value == -math.inf:
            special.append(-math.inf)
        if max_value is None or max_value == math.inf:
            special.append(math.inf)
    if allowed(0.0):
        special.append(0.0)
        if allow_signed_zeros and (lo < 0 or math.copysign(1.0, lo) < 0):
            special.append(-0.0)
    # edges of the domain: the bounds, +-min_magnitude, the smallest subnormals
    edges = [lo, hi, m, -m]
    if allow_subnormal:
        edges += [smallest, -smallest]
    for x in edges:
        if x != 0 and allowed(x) and x not in special:
            special.append(x)
    if not special:
        return finite
    return _mixed(finite, st.sampled_from(special))


def _int_elements(dtype, min_value, max_value, min_magnitude):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if min_value is not None and min_value != -math.inf:
        lo = max(lo, math.ceil(min_value)) if min_value != math.inf else hi + 1
    if max_value is not None and max_value != math.inf:
        hi = min(hi, math.floor(max_value)) if max_value != -math.inf else lo - 1
    m = math.ceil(min_magnitude)
    pieces = [(max(lo, m), hi)] if m > 0 else [(lo, hi)]
    if m > 0 and lo <= min(hi, -m):
        pieces.append((lo, min(hi, -m)))
    pieces = [(a, b) for a, b in pieces if a <= b]
    if not pieces:
        raise ValueError(f"no {dtype} value lies in [{min_value}, {max_value}] with "
                         f"magnitude >= {min_magnitude}")
    count = sum(b - a + 1 for a, b in pieces)
    ordinary = st.one_of([st.integers(a, b) for a, b in pieces])
    # edges where integer code goes wrong: the bounds (overflow), 0, +-1, +-min_magnitude
    edges = [x for x in dict.fromkeys((lo, hi, 0, 1, -1, m, -m))
             if any(a <= x <= b for a, b in pieces)]
    return _mixed(ordinary, st.sampled_from(edges)), count


def _bool_elements(min_value, max_value, min_magnitude):
    values = [v for v in (False, True)
              if (min_value is None or v >= min_value)
              and (max_value is None or v <= max_value) and abs(v) >= min_magnitude]
    if not values:
        raise ValueError(f"no bool value lies in [{min_value}, {max_value}] with "
                         f"magnitude >= {min_magnitude}")
    return st.sampled_from(values), len(values)


def _check_bound(name, value):
    if value is None:
        return None
    if isinstance(value, (complex, np.complexfloating)):
        raise ValueError(f"{name} must be real, got {value!r}")
    try:
        value = float(value) if not isinstance(value, (int, np.integer)) else int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if value != value:
        raise ValueError(f"{name} must not be NaN")
    return value


def _check_rules(min_value, max_value, allow_nan, allow_infinity, allow_signed_zeros,
                 allow_subnormal, min_magnitude):
    """Validated, hashable element rules (independent of the dtype)."""
    min_value = _check_bound("min_value", min_value)
    max_value = _check_bound("max_value", max_value)
    if min_value is not None and max_value is not None and min_value > max_value:
        raise ValueError(f"min_value={min_value} is greater than max_value={max_value}")
    min_magnitude = _check_bound("min_magnitude", min_magnitude)
    if min_magnitude is None or min_magnitude < 0:
        raise ValueError(f"min_magnitude must be a number >= 0, got {min_magnitude!r}")
    flags = dict(allow_nan=allow_nan, allow_infinity=allow_infinity,
                 allow_signed_zeros=allow_signed_zeros, allow_subnormal=allow_subnormal)
    for name, flag in flags.items():
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    if (allow_infinity and min_value is not None and min_value > -math.inf
            and max_value is not None and max_value < math.inf):
        raise ValueError(f"allow_infinity=True cannot add an infinity inside the finite bounds "
                         f"[{min_value}, {max_value}]; leave a bound out (or pass +-inf)")
    return (min_value, max_value, bool(allow_nan), bool(allow_infinity),
            bool(allow_signed_zeros), bool(allow_subnormal), min_magnitude)


def _element_strategy(dtype, rules):
    """(strategy of scalars for ``dtype``, number of distinct values or None if many)."""
    # 0.0 == -0.0 (and they hash alike) but as bounds they differ: key on the signs too.
    signs = tuple(math.copysign(1.0, b) if isinstance(b, float) else None for b in rules[:2])
    return _build_element_strategy(dtype, rules, signs)


@functools.lru_cache(maxsize=256)
def _build_element_strategy(dtype, rules, signs):
    """``_element_strategy``, cached (``signs`` only tells -0.0 bounds from 0.0).

    For bfloat16 the scalars are Python floats exact in bfloat16 (the array is
    built in float32 and cast); for complex dtypes they are Python complexes
    whose parts follow the float rules of the component dtype.
    """
    min_value, max_value, *_, min_magnitude = rules
    if dtype.kind == "b":
        return _bool_elements(min_value, max_value, min_magnitude)
    if dtype.kind in "iu":
        return _int_elements(dtype, min_value, max_value, min_magnitude)
    if dtype.kind == "c":
        part = _float_component(np.dtype(f"f{dtype.itemsize // 2}"), rules)
        return st.builds(complex, part, part), None
    return _float_component(dtype, rules), None


# --- arrays ----------------------------------------------------------------------

def arrays(dtype, shape, *, min_value=None, max_value=None, allow_nan=False,
           allow_infinity=False, allow_signed_zeros=True, allow_subnormal=False,
           min_magnitude=0, unique=False, elements=None):
    """A strategy of NumPy arrays of ``dtype`` and ``shape`` with values suited to numerics.

    ``dtype`` is a dtype-like fnx supports (or a strategy of them, e.g.
    ``dtypes("fc")``); ``shape`` a tuple, an int ``n`` for ``(n,)``, or a
    strategy of shapes. Every other argument may also be a strategy.

    Floats (and both parts of complex values) are finite and lie in
    ``[min_value, max_value]``, by default ``[-10, 10]``: a range where finite
    differences and comparisons with NumPy are meaningful. With only one bound
    given, the other is +-10, moved out by ``max(10, |bound|)`` past the given
    bound where needed (``min_value=100`` gives ``[100, 200]``). Pass
    ``min_value=-np.inf, max_value=np.inf`` for the dtype's whole finite range.
    Bounds are clipped to the dtype and rounded inward to values it represents
    exactly, so every value compares correctly with the bounds as given.

    - ``allow_nan`` / ``allow_infinity`` mix in NaN / infinities; an infinity is
      drawn only on a side whose bound is left out (or given as +-inf), so with
      both bounds finite ``allow_infinity=True`` is a ValueError.
    - ``allow_signed_zeros`` (default True): both 0.0 and -0.0 occur when the
      range has room below zero; False turns every -0.0 into 0.0.
    - ``allow_subnormal`` (default False): subnormal floats may occur.
    - ``min_magnitude``: every value (each part, for complex) has ``|x| >= it``,
      keeping values away from zero for domains such as ``log``, ``1/x``.
    - Special values (NaN, infinities, zeros, the bounds, ``+-min_magnitude``,
      the smallest subnormals, as allowed) make up about a quarter of the
      elements, so they occur in most small arrays, not one in a million.

    Ints cover the dtype's whole range unless ``min_value``/``max_value`` narrow
    it, with the bounds, 0 and +-1 mixed in as special values; bools honour the
    bounds too (``min_value=True``: all True). Flags that a
    dtype cannot express (NaN for ints) are ignored for it.

    ``unique=True`` makes all elements distinct (NaN excepted). ``elements``, a
    strategy of scalars, replaces the rules above (leave them at their defaults).
    """
    rule_args = dict(min_value=min_value, max_value=max_value, allow_nan=allow_nan,
                     allow_infinity=allow_infinity, allow_signed_zeros=allow_signed_zeros,
                     allow_subnormal=allow_subnormal, min_magnitude=min_magnitude)
    if elements is not None:
        if not _is_strategy(elements):
            raise ValueError(f"elements must be a hypothesis strategy, got {elements!r}")
        defaults = dict(min_value=None, max_value=None, allow_nan=False, allow_infinity=False,
                        allow_signed_zeros=True, allow_subnormal=False, min_magnitude=0)
        changed = [k for k, v in rule_args.items() if v is not defaults[k] and v != defaults[k]]
        if changed:
            raise ValueError(f"elements= replaces the value rules; do not also pass "
                             f"{', '.join(changed)}")
    if not _is_strategy(dtype):
        dtype = _as_dtype(dtype)
    if not _is_strategy(shape):
        shape = _check_shape(shape)
    if not _is_strategy(unique) and not isinstance(unique, (bool, np.bool_)):
        raise ValueError(f"unique must be a bool, got {unique!r}")
    if elements is None and not any(_is_strategy(v) for v in rule_args.values()):
        rules = _check_rules(**rule_args)
        rule_args = None
        if not _is_strategy(dtype):
            _, count = _element_strategy(dtype, rules)  # raises now for an empty range
            if (not _is_strategy(shape) and not _is_strategy(unique) and unique
                    and count is not None and math.prod(shape) > count):
                raise ValueError(f"unique=True: shape {shape} needs {math.prod(shape)} "
                                 f"distinct values, but only {count} {dtype} values are "
                                 f"allowed")
    else:
        rules = None

    @st.composite
    def draw_array(draw):
        d = _as_dtype(_resolve(draw, dtype))
        s = _check_shape(_resolve(draw, shape))
        u = bool(_resolve(draw, unique))
        if elements is not None:
            elems, count = elements, None
        else:
            r = rules
            if r is None:
                r = _check_rules(**{k: _resolve(draw, v) for k, v in rule_args.items()})
            elems, count = _element_strategy(d, r)
        size = math.prod(s)
        if u and count is not None:
            assume(size <= count)  # not enough distinct values for this shape
        build_dtype = d
        if _dt.bfloat16 is not None and d == _dt.bfloat16 and elements is None:
            build_dtype = _dt.float32  # values are exact bfloat16; cast below
        if u or size <= _DENSE_LIMIT:
            fill = st.nothing()
        else:
            fill = st.just(draw(elems))
        out = draw(hnp.arrays(build_dtype, s, elements=elems, fill=fill, unique=u))
        return out.astype(d) if build_dtype != d else out

    return draw_array()


# --- axes ------------------------------------------------------------------------

def axes(ndim, *, min_size=1, max_size=None, allow_negative=True, unique=True):
    """A strategy of tuples of axes of an ``ndim``-dimensional array.

    Each axis is in ``[-ndim, ndim)`` (``[0, ndim)`` without ``allow_negative``);
    with ``unique`` no two name the same dimension (``1`` and ``-ndim + 1`` count
    as the same). ``max_size`` defaults to ``ndim``. Shrinks toward ``(0,)``.
    """
    ndim = _check_int("ndim", ndim)
    min_size = _check_int("min_size", min_size)
    if ndim == 0 and min_size > 0:
        raise ValueError(f"axes(ndim=0, min_size={min_size}): an array of ndim 0 has no "
                         f"axes to choose; pass min_size=0")
    if unique and min_size > ndim:
        raise ValueError(f"axes: min_size={min_size} unique axes cannot be chosen from "
                         f"ndim={ndim} dimensions")
    if max_size is None:
        max_size = max(ndim, min_size)
    max_size = _check_int("max_size", max_size)
    _check_order("min_size", min_size, "max_size", max_size)
    if unique:
        max_size = min(max_size, ndim)
    if ndim == 0:
        return st.just(())
    items = st.integers(0, ndim - 1)
    if allow_negative:
        # (axis, negate) pairs; negation shrinks away (False first)
        items = st.tuples(items, st.booleans()).map(lambda p: p[0] - ndim if p[1] else p[0])
    return st.lists(items, min_size=min_size, max_size=max_size,
                    unique_by=(lambda a: a % ndim) if unique else None).map(tuple)


def axis(ndim, *, allow_negative=True):
    """A strategy of one axis of an ``ndim``-dimensional array, in ``[-ndim, ndim)``
    (``[0, ndim)`` without ``allow_negative``); shrinks toward 0."""
    ndim = _check_int("ndim", ndim)
    if ndim == 0:
        raise ValueError("axis(ndim=0): an array of ndim 0 has no axis to choose")
    return st.integers(-ndim if allow_negative else 0, ndim - 1)


# --- index expressions --------------------------------------------------------------

def _in_range(n):
    """Ints indexing a dimension of size ``n >= 1``: ``k`` or ``k - n`` for ``k`` in
    ``[0, n)``, negative half the time; shrinks toward 0."""
    return st.tuples(st.integers(0, n - 1), st.booleans()).map(
        lambda p: p[0] - n if p[1] else p[0])


def _slices(n):
    """Slices for a dimension of size ``n``: bounds inside and just outside it, steps +-1..3."""
    bound = st.none() | st.integers(-n - 1, n + 1)
    step = st.sampled_from((None, 1, 2, 3, -1, -2, -3))
    return st.builds(slice, bound, bound, step)


class _Implicit:
    """A dimension the expression leaves out (a full slice where it must be written)."""


_IMPLICIT = _Implicit()


def _is_full_slice(item):
    return item is _IMPLICIT or (isinstance(item, slice) and item == slice(None))


@st.composite
def _index_expression(draw, shape, allow_newaxis, allow_ellipsis, allow_integer_arrays,
                      allow_boolean_masks, max_dims):
    ndim = len(shape)
    # 1. One entry (axis, kind, value) per dimension, in order. The first n_explicit
    #    dimensions get a full slice, a slice, an int, an integer array (value drawn in
    #    step 2) or a boolean mask (which covers one or two dimensions); the rest are
    #    left out (_IMPLICIT), so expressions may be shorter than the shape.
    n_explicit = draw(st.integers(0, ndim))
    entries = []
    mask_count = None  # number of True entries of the (single) boolean mask
    axis_ = 0
    while axis_ < n_explicit:
        n = shape[axis_]
        kinds = ["full", "slice"]
        if n > 0:
            kinds.append("int")
            if allow_integer_arrays:
                kinds.append("array")
        if allow_boolean_masks and mask_count is None:
            kinds.append("mask")
        kind = draw(st.sampled_from(kinds))
        if kind == "full":
            entries.append((axis_, "slice", slice(None)))
        elif kind == "slice":
            entries.append((axis_, "slice", draw(_slices(n))))
        elif kind == "int":
            entries.append((axis_, "int", draw(_in_range(n))))
        elif kind == "array":
            entries.append((axis_, "array", None))
        else:
            k = draw(st.integers(1, min(2, n_explicit - axis_)))
            mask = draw(hnp.arrays(np.bool_, shape[axis_:axis_ + k], elements=st.booleans()))
            mask_count = int(mask.sum())
            entries.append((axis_, "mask", mask))
            axis_ += k
            continue
        axis_ += 1
    entries += [(ax, "slice", _IMPLICIT) for ax in range(axis_, ndim)]

    # 2. Integer arrays: shapes that broadcast to one shape R (with the mask's (count,)).
    n_arrays = sum(e[1] == "array" for e in entries)
    if n_arrays:
        if mask_count is None:
            adv_shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
        else:
            lead = draw(hnp.array_shapes(min_dims=0, max_dims=1, min_side=1, max_side=3))
            adv_shape = lead + (mask_count,)
        for i, (ax, kind, _) in enumerate(entries):
            if kind != "array":
                continue
            keep = draw(st.integers(0, len(adv_shape)))
            sub = adv_shape[len(adv_shape) - keep:]
            ones = draw(st.lists(st.booleans(), min_size=keep, max_size=keep))
            arr_shape = tuple(1 if one else side for side, one in zip(sub, ones))
            n = shape[ax]
            arr = draw(hnp.arrays(np.intp, arr_shape, elements=_in_range(n)))
            entries[i] = (ax, "array", arr)
    n_adv_dims = 0
    if n_arrays or mask_count is not None:  # the broadcast of the arrays and the mask
        n_adv_dims = len(np.broadcast_shapes(
            *(e[2].shape for e in entries if e[1] == "array"),
            *([(mask_count,)] if mask_count is not None else [])))

    # 3. Respect max_dims: result dims are the slices plus the advanced dims (plus Nones).
    def result_dims():
        return sum(e[1] == "slice" for e in entries) + n_adv_dims

    if max_dims is not None:
        while result_dims() > max_dims:
            candidates = [i for i, e in enumerate(entries)
                          if e[1] == "slice" and shape[e[0]] > 0]
            if not candidates:
                break
            i = draw(st.sampled_from(candidates))
            n = shape[entries[i][0]]
            entries[i] = (entries[i][0], "int", draw(_in_range(n)))
        assume(result_dims() <= max_dims)  # only size-0 dims or advanced dims left over
    items = [e[2] for e in entries]

    # 4. New axes, within the dimension budget.
    if allow_newaxis:
        budget = (max_dims if max_dims is not None else 32) - result_dims()
        n_new = draw(st.integers(0, max(0, min(2, budget))))
        for _ in range(n_new):
            items.insert(draw(st.integers(0, len(items))), None)

    # 5. Either an Ellipsis standing for a run of full slices (possibly empty), or the
    #    dimensions left out at the end go. (Not both: indices after an Ellipsis count
    #    from the last dimension, so they must reach it.) Dimensions left out before a
    #    written index become full slices.
    if allow_ellipsis and draw(st.booleans()):
        i = j = draw(st.integers(0, len(items)))
        while i > 0 and _is_full_slice(items[i - 1]):
            i -= 1
        while j < len(items) and _is_full_slice(items[j]):
            j += 1
        items[i:j] = [Ellipsis]
    else:
        while items and items[-1] is _IMPLICIT:
            items.pop()
    items = [slice(None) if item is _IMPLICIT else item for item in items]

    if len(items) == 1 and draw(st.booleans()):
        return items[0]  # a bare index, not a 1-tuple
    return tuple(items)


def index_expressions(shape, *, allow_newaxis=True, allow_ellipsis=True,
                      allow_integer_arrays=False, allow_boolean_masks=False, max_dims=None):
    """A strategy of NumPy indexing expressions valid for an array of ``shape``.

    Expressions are an int (negative ones included, always in range), a slice
    (bounds possibly past the ends, steps +-1..3), ``None`` (with
    ``allow_newaxis``), ``Ellipsis`` (at most one, with ``allow_ellipsis``), or
    a tuple of these, possibly shorter than ``shape``. With
    ``allow_integer_arrays``: integer arrays (``np.intp``, in range, negative
    entries included) that broadcast together; with ``allow_boolean_masks``: at
    most one boolean mask over one or two dimensions, combined with the integer
    arrays as NumPy requires. ``max_dims`` bounds the indexed result's
    dimensions. Every expression indexes ``np.empty(shape)`` without error.

    ``shape`` must be concrete; to index a drawn shape, draw it first, e.g.
    ``shapes().flatmap(lambda s: st.tuples(st.just(s), index_expressions(s)))``.
    """
    shape = _check_shape(shape)
    if max_dims is not None:
        max_dims = _check_int("max_dims", max_dims)
    for name, flag in dict(allow_newaxis=allow_newaxis, allow_ellipsis=allow_ellipsis,
                           allow_integer_arrays=allow_integer_arrays,
                           allow_boolean_masks=allow_boolean_masks).items():
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    return _index_expression(shape, allow_newaxis, allow_ellipsis, allow_integer_arrays,
                             allow_boolean_masks, max_dims)


# --- PRNG keys ------------------------------------------------------------------------

def _raw_key(seed):
    """``uint32 [seed >> 32, seed & 0xFFFFFFFF]``: JAX's threefry ``PRNGKey(seed)``."""
    from ..core.array import Array
    return Array(np.array([seed >> 32, seed & 0xFFFFFFFF], dtype=np.uint32))


def _key_maker():
    """``fnx.random.PRNGKey`` where it exists, so keys are the library's; else ``_raw_key``."""
    try:
        from fnx.random import PRNGKey
    except ImportError:
        return _raw_key
    return PRNGKey


def _key_from_seed(seed):
    """The key ``prng_keys`` makes from a seed."""
    return _key_maker()(seed)


def prng_keys():
    """A strategy of PRNG keys: fnx Arrays of raw threefry key data (uint32, shape (2,)),
    made as ``PRNGKey(seed)`` makes them (by ``fnx.random.PRNGKey`` where it exists) from
    the seeds it takes whole: ``[0, 2**32)`` without ``jax_enable_x64`` (the high word is
    then 0, as in JAX), ``[0, 2**63)`` with it (as the strategy is made); shrinks toward
    seed 0."""
    top = 2**63 - 1 if _dt.x64_enabled() else 2**32 - 1
    return st.integers(0, top).map(_key_maker())


# --- settings profiles -------------------------------------------------------------------

_HEALTH_CHECKS = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)


def register_profiles():
    """Register the hypothesis settings profiles ``"fnx-ci"`` (10 examples, no
    deadline, no example database, derandomized: the same examples on every run, so
    CI is reproducible) and ``"fnx-thorough"`` (200 random examples, no deadline:
    the exploring run); both suppress the too_slow, data_too_large and
    filter_too_much health checks. Calling it again re-registers the same profiles."""
    settings.register_profile("fnx-ci", max_examples=10, deadline=None,
                              suppress_health_check=_HEALTH_CHECKS, derandomize=True,
                              database=None)
    settings.register_profile("fnx-thorough", max_examples=200, deadline=None,
                              suppress_health_check=_HEALTH_CHECKS)
