"""Elementwise ONNX operators: math, comparisons, logic, bits, activations, casts and
constants. Binary operators broadcast as NumPy does (ONNX's multidirectional
broadcasting)."""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from ...nn import functions as nnf
from ..graph import np_dtype, op


def _a(x):
    return fnp.asarray(x)


# --- unary math ----------------------------------------------------------------------------

_UNARY = {
    "Abs": fnp.abs, "Neg": fnp.negative, "Exp": fnp.exp, "Log": fnp.log, "Sqrt": fnp.sqrt,
    "Floor": fnp.floor, "Ceil": fnp.ceil, "Sin": fnp.sin, "Cos": fnp.cos, "Tan": fnp.tan,
    "Asin": fnp.arcsin, "Acos": fnp.arccos, "Atan": fnp.arctan, "Sinh": fnp.sinh,
    "Cosh": fnp.cosh, "Asinh": fnp.arcsinh, "Acosh": fnp.arccosh, "Atanh": fnp.arctanh,
    "Tanh": fnp.tanh, "Sign": fnp.sign, "Not": fnp.logical_not, "BitwiseNot": fnp.invert,
    "IsNaN": fnp.isnan, "Round": fnp.round,
}


def _unary(fn):
    def handler(node, x):
        return fn(_a(x))
    return handler


for _name, _fn in _UNARY.items():
    op(_name)(_unary(_fn))


@op("Reciprocal")
def reciprocal(node, x):
    x = _a(x)
    return fnp.asarray(1, x.dtype) / x


@op("Erf")
def erf(node, x):
    from ...scipy.special import erf as _erf
    return _erf(_a(x))


@op("Sigmoid")
def sigmoid(node, x):
    return nnf.sigmoid(_a(x))


@op("Relu")
def relu(node, x):
    x = _a(x)
    return fnp.maximum(x, fnp.zeros((), x.dtype))


@op("IsInf")
def isinf(node, x):
    x = _a(x)
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    if pos and neg:
        return fnp.isinf(x)
    if pos:
        return fnp.isposinf(x)
    if neg:
        return fnp.isneginf(x)
    return fnp.zeros(x.shape, bool)


# --- binary math ---------------------------------------------------------------------------

_BINARY = {
    "Add": fnp.add, "Sub": fnp.subtract, "Mul": fnp.multiply,
    "Equal": fnp.equal, "Greater": fnp.greater, "Less": fnp.less,
    "GreaterOrEqual": fnp.greater_equal, "LessOrEqual": fnp.less_equal,
    "And": fnp.logical_and, "Or": fnp.logical_or, "Xor": fnp.logical_xor,
    "BitwiseAnd": fnp.bitwise_and, "BitwiseOr": fnp.bitwise_or,
    "BitwiseXor": fnp.bitwise_xor,
}


def _binary(fn):
    def handler(node, a, b):
        return fn(_a(a), _a(b))
    return handler


for _name, _fn in _BINARY.items():
    op(_name)(_binary(_fn))


@op("Div")
def div(node, a, b):
    a, b = _a(a), _a(b)
    if fnp.issubdtype(a.dtype, fnp.integer):
        a, b = fnp.broadcast_arrays(a, b)
        return lax.div(a, b)  # rounds toward zero, as C++ does
    return fnp.divide(a, b)


@op("Pow")
def pow_(node, a, b):
    a, b = _a(a), _a(b)
    if fnp.issubdtype(a.dtype, fnp.integer) and fnp.issubdtype(b.dtype, fnp.integer):
        return fnp.power(a, b.astype(a.dtype))
    return fnp.power(a, b).astype(a.dtype)


@op("Mod")
def mod(node, a, b):
    a, b = _a(a), _a(b)
    if node.attr("fmod", 0):
        return fnp.fmod(a, b)
    return fnp.mod(a, b)


@op("BitShift")
def bitshift(node, a, b):
    a, b = _a(a), _a(b)
    d = node.attr("direction")
    return fnp.left_shift(a, b) if d == "LEFT" else fnp.right_shift(a, b)


def _variadic(fn):
    def handler(node, *xs):
        xs = [_a(x) for x in xs if x is not None]
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out
    return handler


op("Max")(_variadic(fnp.maximum))
op("Min")(_variadic(fnp.minimum))
op("Sum")(_variadic(fnp.add))


@op("Mean")
def mean(node, *xs):
    xs = [_a(x) for x in xs if x is not None]
    total = _variadic(fnp.add)(node, *xs)
    return total / fnp.asarray(len(xs), total.dtype)


@op("Where")
def where(node, c, a, b):
    return fnp.where(_a(c), _a(a), _a(b))


@op("Clip")
def clip(node, x, lo=None, hi=None):
    x = _a(x)
    if node.opset is not None and node.opset < 11:
        lo, hi = node.attr("min", None), node.attr("max", None)
    if lo is not None:
        x = fnp.maximum(x, fnp.asarray(lo, x.dtype))
    if hi is not None:
        x = fnp.minimum(x, fnp.asarray(hi, x.dtype))
    return x


# --- activations ---------------------------------------------------------------------------

def _s(x, v):
    """A scalar of ``x``'s dtype."""
    return fnp.asarray(v, x.dtype)


@op("LeakyRelu")
def leaky_relu(node, x):
    x = _a(x)
    return fnp.where(x >= 0, x, x * _s(x, node.attr("alpha", 0.01)))


@op("PRelu")
def prelu(node, x, slope):
    x, slope = _a(x), _a(slope)
    if (node.opset or 7) < 7 and slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1]:
        # before opset 7 a slope of one value per channel applies along axis 1
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    return fnp.where(x >= 0, x, x * slope)


@op("Elu")
def elu(node, x):
    x = _a(x)
    alpha = _s(x, node.attr("alpha", 1.0))
    return fnp.where(x > 0, x, alpha * fnp.expm1(fnp.minimum(x, _s(x, 0))))


@op("Celu")
def celu(node, x):
    x = _a(x)
    alpha = _s(x, node.attr("alpha", 1.0))
    neg = alpha * fnp.expm1(fnp.minimum(x, _s(x, 0)) / alpha)
    return fnp.maximum(x, _s(x, 0)) + fnp.minimum(_s(x, 0), neg)


@op("Selu")
def selu(node, x):
    x = _a(x)
    alpha = _s(x, node.attr("alpha", 1.67326319217681884765625))
    gamma = _s(x, node.attr("gamma", 1.05070102214813232421875))
    return gamma * fnp.where(x > 0, x, alpha * fnp.expm1(fnp.minimum(x, _s(x, 0))))


@op("ThresholdedRelu")
def thresholded_relu(node, x):
    x = _a(x)
    return fnp.where(x > _s(x, node.attr("alpha", 1.0)), x, _s(x, 0))


@op("HardSigmoid")
def hard_sigmoid(node, x):
    x = _a(x)
    y = x * _s(x, node.attr("alpha", 0.2)) + _s(x, node.attr("beta", 0.5))
    return fnp.clip(y, _s(x, 0), _s(x, 1))


@op("HardSwish")
def hard_swish(node, x):
    x = _a(x)
    return x * fnp.clip(x * _s(x, 1 / 6) + _s(x, 0.5), _s(x, 0), _s(x, 1))


@op("Softplus")
def softplus(node, x):
    x = _a(x)
    return fnp.logaddexp(x, _s(x, 0))


@op("Softsign")
def softsign(node, x):
    x = _a(x)
    return x / (_s(x, 1) + fnp.abs(x))


@op("Mish")
def mish(node, x):
    x = _a(x)
    return x * fnp.tanh(fnp.logaddexp(x, _s(x, 0)))


@op("Swish")
def swish(node, x):
    x = _a(x)
    return x * nnf.sigmoid(x * _s(x, node.attr("alpha", 1.0)))


@op("Gelu")
def gelu(node, x):
    x = _a(x)
    return nnf.gelu(x, approximate=node.attr("approximate", "none") == "tanh")


@op("Shrink")
def shrink(node, x):
    x = _a(x)
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    out = fnp.where(x < -lambd, x + bias, fnp.where(x > lambd, x - bias, 0))
    return out.astype(x.dtype)


# --- casts, identities, constants ----------------------------------------------------------

def _cast(x, dtype):
    x = _a(x) if not isinstance(x, np.ndarray) else x
    if isinstance(x, np.ndarray):  # a known value: NumPy's conversion, kept known
        return x.astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return x != 0
    return x.astype(dtype)


@op("Cast")
def cast(node, x):
    return _cast(x, np_dtype(node.attr("to")))


@op("CastLike")
def cast_like(node, x, like):
    return _cast(x, np.dtype(like.dtype))


def _view_as(x, dtype):
    x = np.asarray(x)
    return np.ascontiguousarray(x).view(np.dtype(dtype)).reshape(x.shape)


@op("BitCast")
def bitcast(node, x):
    """The bits of ``x`` read as the type ``to`` of the same width: integers (and bool)
    wrap as two's complement; floats and integers exchange bits exactly (NaN payloads
    too) through a pure callback, which ``jit`` and ``vmap`` carry as it is."""
    to = np_dtype(node.attr("to"))
    src = np.dtype(x.dtype)
    if src.itemsize != to.itemsize:
        raise node.error(f"BitCast needs types of one width (got {src} to {to})")
    if isinstance(x, np.ndarray):
        return _view_as(x, to)
    x = _a(x)
    if src == to:
        return x
    if to == np.bool_:
        return x != 0
    if src.kind in "iub" and to.kind in "iu":
        return x.astype(to)  # same width: the two's-complement bits are kept
    from ...core.primitive import ShapeDtypeStruct
    from ...lax.callback import pure_callback
    # bits have no derivative: the operand is a constant for differentiation
    return pure_callback(_view_as, ShapeDtypeStruct(x.shape, to), lax.stop_gradient(x),
                         dtype=to, vmap_method="expand_dims")


@op("Identity")
def identity(node, x):
    return x


@op("Constant")
def constant(node):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if node.has_attr(key):
            v = node.attr(key)
            if key.startswith("value_float"):
                return np.asarray(v, np.float32)
            if key.startswith("value_int"):
                return np.asarray(v, np.int64)
            return np.asarray(v)
    raise node.error("only tensor, float(s) and int(s) constants are supported "
                     f"(attributes given: {sorted(node.attrs)})")


@op("ConstantOfShape", static=(0,))
def constant_of_shape(node, shape):
    value = node.attr("value", None)
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    shape = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    return fnp.full(shape, value.reshape(-1)[0], dtype=value.dtype)
