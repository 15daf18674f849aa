"""``jnp.ufunc`` and ``frompyfunc``: a function of scalars made into a NumPy-style
ufunc with ``outer``, ``reduce``, ``accumulate``, ``reduceat`` and a functional
``at`` (``inplace=False``, as JAX). The binary functions of fnx.numpy (``add``,
``multiply``, ``maximum``, ``logical_and``, ...) carry the same methods, so
``fnp.add.outer(a, b)``, ``fnp.multiply.reduce(x)`` and ``fnp.add.at(x, i, v,
inplace=False)`` port unchanged; their reductions are the fnx reductions.

Generic reductions and accumulations run as one ``lax.scan`` over the axis; ``at``
scans over the indices, so repeated indices apply one after another (as NumPy).
"""
from __future__ import annotations

import numpy as np

from .. import lax
from ..core.array import Array, Tracer
from ..errors import ConcretizationError
from .util import normalize_axes, normalize_axis

__all__ = ["ufunc", "frompyfunc"]


def _fnp():
    from .. import numpy as fnp
    return fnp


class ufunc:
    """``ufunc(func, /, nin, nout, *, name=None, nargs=None, identity=None, call=None,
    reduce=None, accumulate=None, at=None, reduceat=None)`` as JAX's ``jnp.ufunc``:
    ``func`` maps scalars to scalars (traceable); the keyword functions, when given,
    replace the generic implementations."""

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None,
                 call=None, reduce=None, accumulate=None, at=None, reduceat=None):
        self._func = func
        self.nin, self.nout = int(nin), int(nout)
        self.nargs = self.nin if nargs is None else int(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self._call, self._reduce, self._accumulate = call, reduce, accumulate
        self._at, self._reduceat = at, reduceat

    def __repr__(self):
        return f"<fnx.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        if out is not None:
            raise TypeError(f"{self.__name__}: fnx arrays are immutable; out= is not supported")
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: takes {self.nin} arguments, got {len(args)}")
        if where is not None:
            raise NotImplementedError(f"{self.__name__}: where= is not supported (as JAX)")
        if self._call is not None:
            return self._call(*args)
        from .extras import vectorize
        return vectorize(self._func)(*args)

    def _binary(self, what):
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{self.__name__}.{what} needs a binary ufunc with one output "
                             f"(nin=2, nout=1), this one has nin={self.nin}, nout={self.nout}")

    def outer(self, A, B, /):
        """``self(a, b)`` for every pair of elements: shape ``A.shape + B.shape``."""
        self._binary("outer")
        fnp = _fnp()
        A, B = fnp.asarray(A), fnp.asarray(B)
        return self(fnp.reshape(A, A.shape + (1,) * B.ndim), B)

    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """Fold ``self`` over ``axis`` (None: all axes; a tuple: each in turn), from the
        left, starting at ``initial`` (or the first element)."""
        self._binary("reduce")
        fnp = _fnp()
        if out is not None:
            raise TypeError(f"{self.__name__}.reduce: out= is not supported")
        if self._reduce is not None and where is None and initial is None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims)
        a = fnp.asarray(a)
        if dtype is not None:
            a = a.astype(dtype)
        axes = normalize_axes(f"{self.__name__}.reduce", axis, a.ndim)
        if where is not None:
            fill = initial if initial is not None else self.identity
            if fill is None:
                raise ValueError(f"{self.__name__}.reduce: where= needs an identity or an "
                                 "initial value")
            a = fnp.where(fnp.broadcast_to(fnp.asarray(where), a.shape), a,
                          fnp.asarray(fill, dtype=a.dtype))
        out = a
        for ax in sorted(axes, reverse=True):
            out = self._fold(out, ax, initial)
        if keepdims:
            for ax in sorted(axes):
                out = fnp.expand_dims(out, ax)
        return out

    def _fold(self, a, axis, initial):
        fnp = _fnp()
        x = fnp.moveaxis(a, axis, 0)
        if initial is None:
            if x.shape[0] == 0:
                if self.identity is None:
                    raise ValueError(f"{self.__name__}.reduce: a zero-size axis needs an "
                                     "identity or an initial value")
                return fnp.full(x.shape[1:], self.identity, x.dtype)
            carry, rest = x[0], x[1:]
        else:
            carry, rest = fnp.full(x.shape[1:], initial, x.dtype), x

        def step(c, v):
            return fnp.asarray(self(c, v)).astype(c.dtype), None
        return lax.scan(step, carry, rest)[0]

    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running fold of ``self`` along ``axis`` (same shape as ``a``)."""
        self._binary("accumulate")
        fnp = _fnp()
        if out is not None:
            raise TypeError(f"{self.__name__}.accumulate: out= is not supported")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        a = fnp.asarray(a)
        if dtype is not None:
            a = a.astype(dtype)
        axis = normalize_axis(f"{self.__name__}.accumulate", axis, a.ndim)
        x = fnp.moveaxis(a, axis, 0)
        if x.shape[0] == 0:
            return a

        def step(c, v):
            c = fnp.asarray(self(c, v)).astype(c.dtype)
            return c, c
        _, ys = lax.scan(step, x[0], x[1:])
        return fnp.moveaxis(fnp.concatenate([x[:1], ys], axis=0), 0, axis)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """``a`` with ``a[indices] = self(a[indices], b)`` applied once per index, in
        order (repeated indices accumulate). Functional: pass ``inplace=False``."""
        fnp = _fnp()
        if inplace:
            raise ValueError(f"{self.__name__}.at: fnx arrays are immutable; call "
                             f"{self.__name__}.at(a, indices, b, inplace=False) and use the "
                             "result (as in JAX)")
        if self._at is not None:
            return self._at(a, indices, b)
        a = fnp.asarray(a)
        if (b is None) != (self.nin == 1):
            raise TypeError(f"{self.__name__}.at: b is needed exactly when the ufunc is "
                            "binary")
        idx = indices if isinstance(indices, tuple) else (indices,)
        idx = fnp.broadcast_arrays(*[fnp.asarray(i) for i in idx])
        n = idx[0].size
        flat_idx = [fnp.ravel(i) for i in idx]
        sub_shape = a[tuple(i[0] for i in flat_idx)].shape if n else ()
        if b is not None:
            bb = fnp.broadcast_to(fnp.asarray(b, dtype=a.dtype), idx[0].shape + sub_shape)
            bb = fnp.reshape(bb, (n,) + sub_shape)

        def step(arr, k):
            where = tuple(i[k] for i in flat_idx)
            cur = arr[where]
            new = self(cur) if b is None else self(cur, bb[k])
            return arr.at[where].set(fnp.asarray(new).astype(arr.dtype)), None
        if n == 0:
            return a
        return lax.scan(step, a, fnp.arange(n))[0]

    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """``reduce`` over ``a[indices[i]:indices[i+1]]`` along ``axis`` (static
        indices; where ``indices[i] >= indices[i+1]``, just ``a[indices[i]]``)."""
        self._binary("reduceat")
        fnp = _fnp()
        if out is not None:
            raise TypeError(f"{self.__name__}.reduceat: out= is not supported")
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        if isinstance(indices, Tracer):
            raise ConcretizationError(f"{self.__name__}.reduceat: the indices set the output "
                                      "shape, so they must be concrete")
        a = fnp.asarray(a)
        axis = normalize_axis(f"{self.__name__}.reduceat", axis, a.ndim)
        ind = [int(i) for i in np.asarray(indices if isinstance(indices, Array)
                                          else indices).ravel()]
        n = a.shape[axis]
        parts = []
        for k, start in enumerate(ind):
            stop = ind[k + 1] if k + 1 < len(ind) else n
            if stop <= start:
                parts.append(fnp.take(a, fnp.asarray([start]), axis=axis))
            else:
                seg = lax.slice_in_dim(a, start, stop, 1, axis)
                parts.append(fnp.expand_dims(self.reduce(seg, axis=axis, dtype=dtype), axis))
        return fnp.concatenate(parts, axis=axis)


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A ``ufunc`` from a (traceable) function of scalars."""
    return ufunc(func, nin, nout, identity=identity)


def _attach(fn, nin, identity, reduce=None, accumulate=None):
    """Give a fnx.numpy function JAX's ufunc methods (``fnp.add.outer`` ...)."""
    u = ufunc(fn, nin, 1, name=fn.__name__, identity=identity, call=fn, reduce=reduce,
              accumulate=accumulate)
    fn.nin, fn.nout, fn.nargs, fn.identity = u.nin, 1, u.nargs, identity
    if nin == 2:
        fn.outer, fn.reduce, fn.accumulate = u.outer, u.reduce, u.accumulate
        fn.reduceat = u.reduceat
    fn.at = u.at
    return fn


def _reduction(fnp, r):
    """``reduce`` of a built-in ufunc through its fnx reduction (sum, prod, max, ...)."""
    if r is None:
        return None
    takes_dtype = r in (fnp.sum, fnp.prod)

    def reduce(a, axis=0, dtype=None, keepdims=False):
        if takes_dtype:
            return r(a, axis=axis, dtype=dtype, keepdims=keepdims)
        a = fnp.asarray(a) if dtype is None else fnp.asarray(a).astype(dtype)
        return r(a, axis=axis, keepdims=keepdims)
    return reduce


def _accumulation(c):
    if c is None:
        return None
    return lambda a, axis=0, dtype=None: c(a, axis=axis, dtype=dtype)


def attach_ufunc_methods(ns):
    """Called once by fnx/numpy/__init__: the binary and unary functions of namespace
    ``ns`` get ``outer``/``reduce``/``accumulate``/``reduceat``/``at``."""
    fnp = ns
    red = {
        "add": (0, fnp.sum, fnp.cumsum), "multiply": (1, fnp.prod, fnp.cumprod),
        "maximum": (None, fnp.max, None), "minimum": (None, fnp.min, None),
        "logical_and": (True, fnp.all, None), "logical_or": (False, fnp.any, None),
    }
    for name in ("add", "subtract", "multiply", "divide", "true_divide", "floor_divide",
                 "maximum", "minimum", "fmax", "fmin", "power", "remainder", "mod", "fmod",
                 "arctan2", "hypot", "copysign", "nextafter", "logaddexp", "logaddexp2",
                 "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                 "bitwise_xor", "left_shift", "right_shift", "equal", "not_equal", "less",
                 "less_equal", "greater", "greater_equal", "heaviside", "float_power"):
        fn = getattr(fnp, name, None)
        if fn is None or hasattr(fn, "outer"):
            continue
        identity, reduce, accumulate = red.get(name, (None, None, None))
        if name in ("bitwise_or", "bitwise_xor", "logical_xor"):
            identity = 0 if name != "logical_xor" else False
        elif name == "bitwise_and":
            identity = -1
        _attach(fn, 2, identity, _reduction(fnp, reduce), _accumulation(accumulate))
    for name in ("negative", "positive", "absolute", "abs", "exp", "log", "sqrt", "sin", "cos",
                 "tan", "tanh", "sinh", "cosh", "floor", "ceil", "trunc", "sign", "square",
                 "reciprocal", "invert", "bitwise_not", "logical_not", "isnan", "isinf",
                 "isfinite", "expm1", "log1p", "log2", "log10", "exp2", "conjugate", "conj",
                 "rint", "deg2rad", "rad2deg", "arcsin", "arccos", "arctan", "arcsinh",
                 "arccosh", "arctanh", "cbrt", "signbit", "fabs", "spacing"):
        fn = getattr(fnp, name, None)
        if fn is not None and not hasattr(fn, "at"):
            _attach(fn, 1, None)
