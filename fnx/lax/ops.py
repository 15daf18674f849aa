"""``fnx.lax``: the primitives as functions, with JAX's names and call forms.

lax functions are strict, as JAX's: array operands must already agree in dtype, and
in shape up to JAX's broadcasting of size-1 dimensions between operands of one rank.
Python scalars are the exception: they take the other operand's dtype and shape (weak
typing), so ``lax.mul(x, 2.0)`` works for any float ``x``.
"""
from __future__ import annotations

import builtins
import enum
import operator
import numpy as np

from ..core import dtypes
from ..core import ops as _core_ops
from ..core.array import Array, to_array
from ..core.numpy_errstate import quiet_call
from ..errors import ShapeError
from . import elementwise as ew
from . import indexing as ix
from . import linalg_prims as la
from . import reduction as rd
from . import shape as sh
from . import sorting as so
from .rule_helpers import broadcast_ranked, describe


def _scalar_like(x, like):
    """A Python scalar as a weak array of ``like``'s dtype and shape."""
    v = np.array(x, dtype=like.dtype)
    if v != x and not (isinstance(x, float) and np.isnan(x)) and like.dtype.kind in "iub":
        raise OverflowError(f"Python scalar {x!r} does not fit in {like.dtype}")
    return Array._wrap(v[()], True)  # binary primitives take a rank-0 operand as is


def _axis(name, axis, ndim):
    """A non-negative axis; out-of-range axes raise ShapeError (no silent wrap)."""
    axis = int(axis)
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise ShapeError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % builtins.max(ndim, 1)


def _is_scalar(x):
    return dtypes.python_scalar_dtype(x) is not None


def _operands(*xs):
    arrays = [x for x in xs if not _is_scalar(x)]
    if not arrays:
        return [to_array(x) for x in xs]
    like = to_array(arrays[0])
    return [_scalar_like(x, like) if _is_scalar(x) else to_array(x) for x in xs]


def _unary(prim):
    def f(x):
        return prim.bind(to_array(x))
    f.__name__ = prim.name
    f.__doc__ = f"Elementwise ``{prim.name}`` (lax semantics: no promotion)."
    f.prim = prim
    return f


def _binary(prim):
    def f(x, y):
        return prim.bind(*broadcast_ranked(prim.name, _operands(x, y)))
    f.__name__ = prim.name
    f.__doc__ = (f"Elementwise ``{prim.name}``: operands of one dtype and rank, dimensions "
                 "equal or 1 (as JAX's lax), or a Python scalar.")
    return f


neg, abs, sign, floor, ceil = map(_unary, (ew.neg_p, ew.abs_p, ew.sign_p, ew.floor_p, ew.ceil_p))
exp, exp2, expm1, log, log1p = map(_unary, (ew.exp_p, ew.exp2_p, ew.expm1_p, ew.log_p,
                                            ew.log1p_p))
log2, log10 = _unary(ew.log2_p), _unary(ew.log10_p)
sqrt, rsqrt, cbrt, square = map(_unary, (ew.sqrt_p, ew.rsqrt_p, ew.cbrt_p, ew.square_p))
reciprocal = _unary(ew.reciprocal_p)
sin, cos, tan, asin, acos, atan = map(_unary, (ew.sin_p, ew.cos_p, ew.tan_p, ew.asin_p,
                                               ew.acos_p, ew.atan_p))
sinh, cosh, tanh, asinh, acosh, atanh = map(_unary, (ew.sinh_p, ew.cosh_p, ew.tanh_p,
                                                     ew.asinh_p, ew.acosh_p, ew.atanh_p))
logistic, erf, erfc, erf_inv = map(_unary, (ew.logistic_p, ew.erf_p, ew.erfc_p, ew.erf_inv_p))
lgamma, digamma = _unary(ew.lgamma_p), _unary(ew.digamma_p)
is_finite, isinf, isnan = _unary(ew.is_finite_p), _unary(ew.isinf_p), _unary(ew.isnan_p)
bitwise_not = _unary(ew.not_p)
real, imag = _unary(ew.real_p), _unary(ew.imag_p)


def conj(x):
    """The complex conjugate, complex-valued as JAX's ``lax.conj``: a real floating operand
    gives complex64 (complex128 from float64) and its cotangent is the real part. Integer
    and bool operands raise (JAX's take float32, float64 and complex ones)."""
    x = to_array(x)
    if x.dtype.kind != "c":
        if not dtypes.is_floating(x.dtype):
            raise ShapeError(f"conj: needs a floating or complex operand, got {describe(x)} "
                             "(fnx.numpy.conj takes any and keeps real ones real)")
        return convert_element_type_exact(
            x, np.complex128 if x.dtype == np.float64 else np.complex64, x.weak_type)
    return ew.conj_p.bind(x)


conj.prim = ew.conj_p


def complex(x, y):
    """``x + i y`` of two floating operands of one dtype (JAX's ``lax.complex``): complex64
    from float32, complex128 from float64; the parts are kept as they are (inf and NaN
    included)."""
    return ew.complex_p.bind(*broadcast_ranked("complex", _operands(x, y)))

add, sub, div, rem = map(_binary, (ew.add_p, ew.sub_p, ew.div_p, ew.rem_p))
_mul, _pow = _binary(ew.mul_p), _binary(ew.pow_p)


def pow(x, y):
    """Elementwise ``x ** y``: operands of one dtype, or (as JAX) a floating or complex
    ``x`` with an integer array ``y``: then ``x ** 0`` is 1 with derivative 0 in ``x``, at
    ``x = 0`` too (``0 * 0 ** -1`` would be NaN)."""
    if not _is_scalar(y) and not _is_scalar(x):
        x, y = to_array(x), to_array(y)
        if dtypes.is_inexact(x.dtype) and y.dtype.kind in "iu":
            x, y = broadcast_ranked("pow", [x, y])
            if x.ndim < y.ndim:
                x = broadcast_in_dim(x, y.shape, ())
            # 1 ** 0 where y is 0: the value 1, and a derivative 0 * 1 ** -1 = 0
            x = ew.select_n_p.bind(eq(y, 0), x, full_like(x, 1))
            return _pow(x, convert_element_type_exact(y, x.dtype))
    return _pow(x, y)


def mul(x, y, *, out_dtype=None):
    """Elementwise product; ``out_dtype`` (JAX's): both operands converted to it first, so
    ``mul(i8, i8, out_dtype=int32)`` does not wrap."""
    if out_dtype is None:
        return _mul(x, y)
    out_dtype = dtypes.canonical(out_dtype, "mul")
    return _mul(*(convert_element_type_exact(v, out_dtype) for v in _operands(x, y)))
floor_divide = _binary(ew.floor_divide_p)
max, min, atan2, nextafter = map(_binary, (ew.max_p, ew.min_p, ew.atan2_p, ew.nextafter_p))
hypot, copysign, logaddexp = _binary(ew.hypot_p), _binary(ew.copysign_p), _binary(ew.logaddexp_p)
polygamma = _binary(ew.polygamma_p)
polygamma.__doc__ = ("``polygamma(m, x)``: the m-th derivative of digamma at x, for "
                     "integer-valued m >= 0 of x's dtype (other m: NaN).")
eq, ne, lt, le, gt, ge = map(_binary, (ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p))
bitwise_and, bitwise_or, bitwise_xor = map(_binary, (ew.and_p, ew.or_p, ew.xor_p))
shift_left = _binary(ew.shift_left_p)
shift_right_logical = _binary(ew.shift_right_logical_p)
shift_right_arithmetic = _binary(ew.shift_right_arithmetic_p)


def stop_gradient(x):
    """``x`` unchanged, with zero derivative (a pytree of arrays is handled leafwise)."""
    from .. import tree_util
    return tree_util.tree_map(lambda a: ew.stop_gradient_p.bind(to_array(a)), x)


class RoundingMethod:
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    return ew.round_p.bind(to_array(x), rounding_method=int(rounding_method))


def integer_pow(x, y):
    try:
        y = operator.index(y)
    except TypeError:
        raise ShapeError(f"integer_pow: the exponent must be a Python int, got {y!r}; use "
                         "lax.pow for non-integer exponents") from None
    return ew.integer_pow_p.bind(to_array(x), y=y)


def select_n(which, *cases):
    cases = _operands(*cases)
    return ew.select_n_p.bind(to_array(which), *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false`` (equal shapes; pred may be scalar)."""
    return select_n(pred, on_false, on_true)


def _scalar_operand(v, dtype):
    """A bound or padding value: Python scalars become 0-d arrays of ``dtype``."""
    if _is_scalar(v):
        return _scalar_like(v, Array._wrap(np.zeros((), dtype)))
    return to_array(v)


def clamp(min, x, max):
    """``min <= x <= max`` elementwise; bounds are scalars or shaped like ``x``."""
    x = to_array(x)
    return ew.clamp_p.bind(_scalar_operand(min, x.dtype), x, _scalar_operand(max, x.dtype))


def convert_element_type(x, new_dtype, weak_type=False):
    """``x`` as ``new_dtype``; a 64-bit ``new_dtype`` narrows to 32 bits unless
    ``jax_enable_x64`` is on (as in JAX). A Python int is converted by NumPy, wrapping
    as JAX does (``convert_element_type(2**32, 'int32')`` is 0)."""
    new_dtype = dtypes.canonical(new_dtype, "convert_element_type")
    if type(x) is int:
        x = Array._wrap(quiet_call(lambda: np.asarray(x).astype(new_dtype))[()], False)
    return convert_element_type_exact(x, new_dtype, weak_type)


def convert_element_type_exact(x, new_dtype, weak_type=False):
    """``convert_element_type`` to exactly ``new_dtype``, 64-bit or not, whatever
    ``jax_enable_x64`` says: for computations that need a wider type internally (their
    results are narrowed again)."""
    x = to_array(x)
    new_dtype = dtypes.canonicalize(new_dtype)
    if x.dtype == new_dtype and x.weak_type == weak_type:
        return x
    return ew.convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


# --- shapes --------------------------------------------------------------------------

def broadcast_in_dim(x, shape, broadcast_dimensions):
    x = to_array(x)
    shape, bd = tuple(int(d) for d in shape), tuple(int(d) for d in broadcast_dimensions)
    if (len(bd) == x.ndim and len(set(bd)) == len(bd) and list(bd) != sorted(bd)
            and all(0 <= d < len(shape) and n in (1, shape[d]) for n, d in zip(x.shape, bd))):
        # JAX takes the operand's dims in any order: as the operand transposed to sorted ones
        perm = tuple(sorted(range(len(bd)), key=bd.__getitem__))
        x, bd = transpose(x, perm), tuple(bd[p] for p in perm)
    if x.shape == shape and bd == tuple(range(len(shape))):
        return x
    return sh.broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=bd)


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value`` (a broadcast scalar: no buffer of
    ``shape`` until a backend needs one). Real zeros, unlike ``x * 0``, which is NaN where
    ``x`` is inf or NaN."""
    if dtype is None:
        scalar = dtypes.python_scalar_dtype(fill_value)
        dtype = scalar[0] if scalar else np.asarray(fill_value).dtype
    dtype = dtypes.canonical(dtype, "full")
    return broadcast_in_dim(Array._wrap(np.asarray(fill_value, dtype)[()]), tuple(shape), ())


def full_like(x, fill_value, dtype=None, shape=None):
    """``full`` with ``x``'s shape and dtype unless given; weakly typed where ``x`` is and
    no dtype is given (as JAX's)."""
    x = to_array(x)
    out = full(x.shape if shape is None else shape, fill_value,
               x.dtype if dtype is None else dtype)
    if dtype is None and x.weak_type:
        out = convert_element_type_exact(out, out.dtype, weak_type=True)
    return out


def broadcast(x, sizes):
    """Prepend dimensions of ``sizes`` to ``x``."""
    x = to_array(x)
    sizes = tuple(sizes)
    return broadcast_in_dim(x, sizes + x.shape, tuple(range(len(sizes), len(sizes) + x.ndim)))


def broadcasted_iota(dtype, shape, dimension):
    return sh.iota_p.bind(dtype=dtypes.canonical(dtype, "broadcasted_iota"), shape=tuple(shape),
                          dimension=int(dimension))


def iota(dtype, size):
    return broadcasted_iota(dtype, (int(size),), 0)


def reshape(x, new_sizes, dimensions=None):
    x = to_array(x)
    new_sizes = tuple(int(d) for d in new_sizes)
    if x.shape == new_sizes and dimensions is None:
        return x
    return sh.reshape_p.bind(x, new_sizes=new_sizes,
                             dimensions=None if dimensions is None else tuple(dimensions))


def transpose(x, permutation):
    x = to_array(x)
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(x.ndim)):
        return x
    return sh.transpose_p.bind(x, permutation=permutation)


def squeeze(x, dimensions):
    x = to_array(x)
    dimensions = tuple(int(d) for d in dimensions)
    return sh.squeeze_p.bind(x, dimensions=dimensions) if dimensions else x


def expand_dims(x, dimensions):
    x = to_array(x)
    dimensions = tuple(int(d) for d in dimensions)
    return sh.expand_dims_p.bind(x, dimensions=dimensions) if dimensions else x


def rev(x, dimensions):
    x = to_array(x)
    dimensions = tuple(int(d) for d in dimensions)
    return sh.rev_p.bind(x, dimensions=dimensions) if dimensions else x


def concatenate(operands, dimension):
    operands = [to_array(o) for o in operands]
    if len(operands) == 1:
        return operands[0]
    return sh.concatenate_p.bind(*operands, dimension=int(dimension))


def pad(x, padding_value, padding_config):
    x = to_array(x)
    pv = _scalar_operand(padding_value, x.dtype)
    config = tuple((int(lo), int(hi), int(it)) for lo, hi, it in padding_config)
    return sh.pad_p.bind(x, pv, padding_config=config)


def slice(x, start_indices, limit_indices, strides=None):
    x = to_array(x)
    start, limit = tuple(map(int, start_indices)), tuple(map(int, limit_indices))
    strides = None if strides is None or all(s == 1 for s in strides) else tuple(map(int, strides))
    if start == (0,) * x.ndim and limit == x.shape and strides is None:
        return x
    return sh.slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(x, start_index, limit_index, stride=1, axis=0):
    x = to_array(x)
    axis = axis % x.ndim
    n = x.shape[axis]
    start = 0 if start_index is None else (start_index + n if start_index < 0 else start_index)
    limit = n if limit_index is None else (limit_index + n if limit_index < 0 else limit_index)
    starts = [0] * x.ndim
    limits = list(x.shape)
    strides = [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


def _start_operands(name, starts):
    out = []
    for s in starts:
        s = to_array(s)
        if s.dtype.kind not in "iu":
            raise ShapeError(f"{name}: start indices must be integers, got {s.dtype}")
        out.append(convert_element_type(s, dtypes.int32) if s.weak_type else s)
    return out


def _counted_from_end(name, x, starts, allow_negative_indices):
    """JAX's start indices: a negative one counts from the end of its dimension (``i +
    dim``) where ``allow_negative_indices`` (a bool, or one per dimension) allows it, as
    JAX's ``lax.dynamic_slice`` does before XLA clamps the window into place; unsigned
    indices cannot be negative."""
    starts = list(starts)
    if len(starts) != x.ndim:
        raise ShapeError(f"{name}: {len(starts)} start indices for an operand "
                         f"{describe(x)}; give one per dimension")
    allow = ([bool(allow_negative_indices)] * x.ndim
             if isinstance(allow_negative_indices, (bool, np.bool_))
             else [bool(a) for a in allow_negative_indices])
    out = []
    for s, d, ok in zip(starts, x.shape, allow):
        if isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            if s < 0 and not ok:
                raise ValueError(f"{name}: start index {s} is out of bounds for a dimension "
                                 f"of {d} with allow_negative_indices=False")
            out.append(int(s) + d if s < 0 else s)
            continue
        s = to_array(s)
        if ok and s.dtype.kind == "i":
            s = select(lt(s, convert_element_type(0, s.dtype)),
                       add(s, convert_element_type(d, s.dtype)), s)
        out.append(s)
    return out


def dynamic_slice(x, start_indices, slice_sizes, *, allow_negative_indices=True):
    """``x[start:start+size]`` per dimension: a negative start counts from the end (unless
    ``allow_negative_indices=False``), then starts are clamped so the window fits."""
    x = to_array(x)
    starts = _counted_from_end("dynamic_slice", x, start_indices, allow_negative_indices)
    return sh.dynamic_slice_p.bind(x, *_start_operands("dynamic_slice", starts),
                                   slice_sizes=tuple(int(s) for s in slice_sizes))


def dynamic_update_slice(x, update, start_indices, *, allow_negative_indices=True):
    """``x`` with ``update`` written at ``start_indices`` (negative ones counted from the
    end unless ``allow_negative_indices=False``, then clamped so it fits)."""
    x = to_array(x)
    starts = _counted_from_end("dynamic_update_slice", x, start_indices,
                               allow_negative_indices)
    return sh.dynamic_update_slice_p.bind(x, to_array(update),
                                          *_start_operands("dynamic_update_slice", starts))


def _only_axis(x, axis, allow_negative_indices):
    allow = [False] * x.ndim
    allow[axis] = allow_negative_indices
    return allow


def dynamic_slice_in_dim(x, start_index, slice_size, axis=0, *, allow_negative_indices=True):
    x = to_array(x)
    axis = axis % x.ndim
    starts = [0] * x.ndim
    starts[axis] = start_index
    sizes = list(x.shape)
    sizes[axis] = slice_size
    return dynamic_slice(x, starts, sizes,
                         allow_negative_indices=_only_axis(x, axis, allow_negative_indices))


def dynamic_index_in_dim(x, index, axis=0, keepdims=True, *, allow_negative_indices=True):
    x = to_array(x)
    axis = axis % x.ndim
    out = dynamic_slice_in_dim(x, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice_in_dim(x, update, start_index, axis, *, allow_negative_indices=True):
    x = to_array(x)
    axis = axis % x.ndim
    starts = [0] * x.ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts,
                                allow_negative_indices=_only_axis(x, axis,
                                                                  allow_negative_indices))


def index_gather(x, indices, spec):
    """NumPy-style indexing with a static ``spec`` (see ``fnx.lax.indexing``): what
    ``x[...]`` binds. JAX's ``lax.gather`` on XLA dimension numbers is
    ``fnx.lax.gather``."""
    return ix.gather_p.bind(to_array(x), *[to_array(i) for i in indices], spec=tuple(spec))


def index_scatter(x, updates, indices, spec, mode="set"):
    """Functional ``x[spec] <mode>= updates`` (see ``fnx.lax.indexing``): what
    ``x.at[...]`` binds. JAX's ``lax.scatter`` family on XLA dimension numbers is
    ``fnx.lax.scatter``, ``scatter_add``, ..."""
    return ix.scatter_p.bind(to_array(x), to_array(updates), *[to_array(i) for i in indices],
                             spec=tuple(spec), mode=mode)


# --- reductions ------------------------------------------------------------------------

def _reduce(prim):
    def f(x, axes):
        x = to_array(x)
        axes = tuple(int(a) for a in axes)
        return prim.bind(x, axes=axes) if axes else x
    f.__name__ = prim.name
    return f


reduce_sum, reduce_prod = _reduce(rd.reduce_sum_p), _reduce(rd.reduce_prod_p)
reduce_max, reduce_min = _reduce(rd.reduce_max_p), _reduce(rd.reduce_min_p)
reduce_and, reduce_or = _reduce(rd.reduce_and_p), _reduce(rd.reduce_or_p)


def argmax(x, axis, index_dtype=None):
    index_dtype = dtypes.default_int() if index_dtype is None else index_dtype
    return rd.argmax_p.bind(to_array(x), axes=(int(axis),),
                            index_dtype=dtypes.canonical(index_dtype, "argmax"))


def argmin(x, axis, index_dtype=None):
    index_dtype = dtypes.default_int() if index_dtype is None else index_dtype
    return rd.argmin_p.bind(to_array(x), axes=(int(axis),),
                            index_dtype=dtypes.canonical(index_dtype, "argmin"))


def _cumulative(prim):
    def f(x, axis=0, reverse=False):
        x = to_array(x)
        return prim.bind(x, axis=_axis(prim.name, axis, x.ndim), reverse=bool(reverse))
    f.__name__ = prim.name
    return f


cumsum, cumprod = _cumulative(rd.cumsum_p), _cumulative(rd.cumprod_p)
cummax, cummin = _cumulative(rd.cummax_p), _cumulative(rd.cummin_p)
cumlogsumexp = _cumulative(rd.cumlogsumexp_p)
cumlogsumexp.__doc__ = ("``log(cumsum(exp(x)))`` along ``axis`` (``reverse``: from the end), "
                        "computed without overflow; float operands.")


# --- contraction and sorting ---------------------------------------------------------------

class Precision(enum.Enum):
    """JAX's matmul precision levels. On the CPU fnx's products always compute in the
    operands' own precision, whatever the level. On a GPU a float32 product computes in
    float32 too unless reduced precision is asked for, by ``HIGH`` (TF32 tensor cores) or
    through ``jax_default_matmul_precision`` (see ``reduced_precision``): fnx's default is
    full float32 where JAX's is TF32 on recent GPUs."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _PRECISION_NAMES.get(value) if isinstance(value, str) else None

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Precision.{self.name}"


_PRECISION_NAMES = {"default": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
                    "fastest": Precision.DEFAULT, "high": Precision.HIGH,
                    "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
                    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST}


# jax_default_matmul_precision's values -> the reduced precision a GPU product may use
_CONFIG_REDUCED = {None: None, "float32": None, "highest": None, "F32_F32_F32": None,
                   "default": "tensorfloat32", "high": "tensorfloat32",
                   "tensorfloat32": "tensorfloat32", "bfloat16_3x": "tensorfloat32",
                   "TF32_TF32_F32": "tensorfloat32", "bfloat16": "bfloat16",
                   "fastest": "bfloat16", "BF16_BF16_F32": "bfloat16",
                   "ANY_F8_ANY_F8_F32": "bfloat16"}


def reduced_precision(precision, name="dot_general"):
    """The reduced precision a float32 product may compute in on a GPU, as ``dot_general``
    records it: None (float32: fnx's default, ``HIGHEST``), ``"tensorfloat32"`` (TF32
    tensor cores: ``HIGH``, or the ``"tensorfloat32"``/``"high"``/``"default"``
    setting) or ``"bfloat16"`` (the ``"bfloat16"``/``"fastest"`` setting). ``precision``
    is JAX's argument: the higher of a pair's two levels; ``DEFAULT`` (and None) defer to
    ``jax_default_matmul_precision`` (``fnx.default_matmul_precision(...)``), which fnx
    leaves unset: full float32. CPU products ignore it."""
    pair = canonicalize_precision(precision, name)
    level = None if pair is None else builtins.max(pair, key=lambda p: p.value)
    if level is None or level is Precision.DEFAULT:
        from .._config import config
        return _CONFIG_REDUCED.get(config.jax_default_matmul_precision)
    return "tensorfloat32" if level is Precision.HIGH else None


def canonicalize_precision(precision, name="dot_general"):
    """``precision=`` as JAX takes it (None, a Precision, one of its names, or a pair of
    them, one per operand) as None or a pair of Precision; anything else raises."""
    if precision is None:
        return None
    def one(p):
        if isinstance(p, Precision):
            return p
        if isinstance(p, str) and p.lower() in _PRECISION_NAMES:
            return _PRECISION_NAMES[p.lower()]
        raise ValueError
    try:
        if isinstance(precision, (tuple, list)):
            if len(precision) != 2:
                raise ValueError
            return one(precision[0]), one(precision[1])
        p = one(precision)
        return p, p
    except ValueError:
        raise ValueError(
            f"{name}: precision must be None, a fnx.lax.Precision (DEFAULT, HIGH, HIGHEST), "
            f"one of the strings {sorted(_PRECISION_NAMES)}, or a pair of these (one per "
            f"operand); got {precision!r}. (NumPy matmuls compute in the operands' precision "
            "whatever the level.)") from None


def _dot_operand_dtype(a, b):
    """The dtype JAX's ``dot_general`` computes operands of two dtypes in (XLA's
    ``HigherPrecisionType``): complex over real, then the wider exponent, the longer
    mantissa, the more bits, signed over unsigned; ties between different dtypes raise."""
    floats = {"float16": (16, 10), "bfloat16": (128, 7), "float32": (128, 23),
              "float64": (1024, 52), "complex64": (128, 23), "complex128": (1024, 52)}

    def props(d):
        maxexp, nmant = floats.get(d.name, (-1, -1))
        bits = (d.itemsize // 2 if d.kind == "c" else d.itemsize) * 8
        return (d.kind == "c", maxexp, nmant, 1 if d.kind == "b" else bits, d.kind != "u")
    pa, pb = props(a), props(b)
    if pa == pb:
        raise TypeError(f"dot_general argument type error: {a}, {b}")
    return a if pa > pb else b


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Contract ``lhs`` and ``rhs`` by
    ``(((lhs_contract), (rhs_contract)), ((lhs_batch), (rhs_batch)))``.

    Output dims: batch dims, then lhs free dims, then rhs free dims. ``precision``: JAX's
    levels (see ``Precision`` and ``reduced_precision``: float32 products on a GPU may use
    TF32 or bfloat16 passes when asked; the CPU computes in full precision);
    ``preferred_element_type`` sets the result dtype.
    """
    reduced = reduced_precision(precision, "dot_general")
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(map(int, lc)), tuple(map(int, rc))), (tuple(map(int, lb)), tuple(map(int, rb))))
    pet = None if preferred_element_type is None else \
        dtypes.canonical(preferred_element_type, "dot_general")   # narrows without x64
    lhs, rhs = to_array(lhs), to_array(rhs)
    if lhs.dtype != rhs.dtype:
        dt = _dot_operand_dtype(lhs.dtype, rhs.dtype)
        lhs, rhs = (x if x.dtype == dt else convert_element_type_exact(x, dt)
                    for x in (lhs, rhs))
    if reduced is not None and lhs.dtype in (np.float32, np.complex64) and pet in (
            None, np.float32, np.complex64):
        # recorded only where it can matter, so full-precision programs stay as they were
        return la.dot_general_p.bind(lhs, rhs, dimension_numbers=dn,
                                     preferred_element_type=pet, precision=reduced)
    return la.dot_general_p.bind(lhs, rhs, dimension_numbers=dn, preferred_element_type=pet)


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """Vector/matrix product of rank-1/2 operands (with ``dimension_numbers``: any
    ``dot_general``)."""
    canonicalize_precision(precision, "dot")
    lhs, rhs = to_array(lhs), to_array(rhs)
    if dimension_numbers is not None:
        return dot_general(lhs, rhs, dimension_numbers, precision,
                           preferred_element_type=preferred_element_type)
    if not (1 <= lhs.ndim <= 2 and 1 <= rhs.ndim <= 2):
        raise ShapeError(f"dot: expects rank-1 or rank-2 operands, got {lhs.shape} and "
                         f"{rhs.shape}; use dot_general")
    return dot_general(lhs, rhs, (((lhs.ndim - 1,), (0,)), ((), ())), precision,
                       preferred_element_type=preferred_element_type)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Stable sort along ``dimension``; a tuple of operands sorts by the first ``num_keys``."""
    single = not isinstance(operand, (tuple, list))
    ops = [to_array(o) for o in ([operand] if single else operand)]
    dim = _axis("sort", dimension, ops[0].ndim)
    out = so.sort_p.bind(*ops, dimension=dim, is_stable=bool(is_stable), num_keys=int(num_keys))
    return out[0] if single else tuple(out)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    return sort((keys, values), dimension, is_stable, 1)


def top_k(operand, k, *, axis=-1):
    """The ``k`` largest entries along ``axis`` (the last by default), in descending
    order, and their indices (int32). Of equal entries the lower index comes first; NaNs
    rank above every number. Differentiable in the values (the indices are piecewise
    constant)."""
    operand = to_array(operand)
    try:
        k = operator.index(k)
    except TypeError:
        raise ShapeError(f"top_k: k must be a static Python int, got {k!r}") from None
    if operand.ndim == 0 or _axis("top_k", axis, operand.ndim) == operand.ndim - 1:
        return tuple(so.top_k_p.bind(operand, k=k))
    axis = _axis("top_k", axis, operand.ndim)
    perm = tuple(d for d in range(operand.ndim) if d != axis) + (axis,)
    inv = tuple(int(i) for i in np.argsort(perm))
    vals, idx = so.top_k_p.bind(transpose(operand, perm), k=k)
    return transpose(vals, inv), transpose(idx, inv)



# the transformations below fnx.lax apply these (fnx.core.ops)
_core_ops.add, _core_ops.broadcast_in_dim, _core_ops.convert_element_type = (
    add, broadcast_in_dim, convert_element_type)
_core_ops.transpose, _core_ops.reduce_sum = transpose, reduce_sum

__all__ = sorted(n for n, v in list(globals().items())
                 if not n.startswith("_") and getattr(v, "__module__", None) == __name__)
