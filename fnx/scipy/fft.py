"""``fnx.scipy.fft``: JAX's ``jax.scipy.fft``: the type-2 discrete cosine transform and
its inverse (``dct``, ``idct``, ``dctn``, ``idctn``), through ``fnx.numpy.fft``.

``dct`` is SciPy's unnormalized DCT-II ``y_k = 2 sum_j x_j cos(pi k (2j + 1) / (2N))``,
computed by Makhoul's reordering as one complex FFT of length ``N``; ``idct`` inverts
it. ``norm``: None/'backward' (as written), 'ortho' (orthonormal), 'forward' (the
``1 / (2N)`` on the forward transform). ``n``/``s`` crop or zero-pad first. As in JAX,
only ``type=2`` is provided (other types raise).
"""
from __future__ import annotations

import numpy as np

from .. import numpy as fnp
from ..numpy.util import promote

__all__ = ["dct", "idct", "dctn", "idctn"]

_NORMS = (None, "backward", "ortho", "forward")


def _check(name, type, norm):
    if type != 2:
        raise NotImplementedError(f"{name}: only type=2 is implemented (as in JAX), got "
                                  f"type={type}")
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be None, 'backward', 'ortho' or 'forward', got "
                         f"{norm!r}")


def _fit(x, n, axis):
    """``x`` cropped or zero-padded to ``n`` along ``axis``."""
    if n is None or n == x.shape[axis]:
        return x
    n = int(n)
    if n < 1:
        raise ValueError(f"dct: n must be positive, got {n}")
    if n < x.shape[axis]:
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(0, n)
        return x[tuple(idx)]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, n - x.shape[axis])
    return fnp.pad(x, pad)


def _order(n):
    """Makhoul's order: even indices up, then odd indices down."""
    return np.concatenate([np.arange(0, n, 2), np.arange(n - 1 - (n % 2), 0, -2)]
                          ).astype(np.int32)


def _scale_shape(ndim, axis, n):
    shape = [1] * ndim
    shape[axis] = n
    return shape


def _dct_axis(x, axis, norm):
    n = x.shape[axis]
    x = fnp.moveaxis(x, axis, -1)
    v = x[..., _order(n)]
    V = fnp.fft.fft(v, axis=-1)
    k = np.arange(n)
    twiddle = np.exp(-1j * np.pi * k / (2 * n))
    y = 2 * fnp.real(V * fnp.asarray(twiddle, dtype=V.dtype))
    if norm == "ortho":
        f = np.full(n, np.sqrt(1 / (2 * n)))
        f[0] = np.sqrt(1 / (4 * n))
        y = y * fnp.asarray(f, dtype=y.dtype)
    elif norm == "forward":
        y = y / (2 * n)
    return fnp.moveaxis(y.astype(x.dtype), -1, axis)


def _idct_axis(y, axis, norm):
    n = y.shape[axis]
    y = fnp.moveaxis(y, axis, -1)
    if norm == "ortho":
        f = np.full(n, np.sqrt(2 * n))
        f[0] = np.sqrt(4 * n)
        y = y * fnp.asarray(f, dtype=y.dtype)
    elif norm == "forward":
        y = y * (2 * n)
    # V_k = (y_k - i y_(N-k)) e^(i pi k / 2N) / 2, y_N = 0
    rev = fnp.concatenate([fnp.zeros_like(y[..., :1]), fnp.flip(y[..., 1:], -1)], axis=-1)
    k = np.arange(n)
    twiddle = np.exp(1j * np.pi * k / (2 * n)) / 2
    cdtype = np.result_type(y.dtype, np.complex64)
    V = (y.astype(cdtype) - 1j * rev.astype(cdtype)) * fnp.asarray(twiddle, dtype=cdtype)
    v = fnp.real(fnp.fft.ifft(V, axis=-1))
    inverse = np.argsort(_order(n)).astype(np.int32)
    return fnp.moveaxis(v[..., inverse].astype(y.dtype), -1, axis)


def _prepare(name, x):
    (x,) = promote(name, x, to_inexact=True)
    if x.dtype.kind == "c":
        raise TypeError(f"{name}: complex input is not supported; transform the real and "
                        "imaginary parts separately")
    return x


def dct(x, type=2, n=None, axis=-1, norm=None):
    """The type-2 DCT of ``x`` along ``axis`` (see the module docstring)."""
    _check("dct", type, norm)
    x = _prepare("dct", x)
    axis = int(axis) % x.ndim
    return _dct_axis(_fit(x, n, axis), axis, norm)


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of ``dct`` (a scaled type-3 DCT) along ``axis``."""
    _check("idct", type, norm)
    x = _prepare("idct", x)
    axis = int(axis) % x.ndim
    return _idct_axis(_fit(x, n, axis), axis, norm)


def _axes(x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(int(a) % x.ndim for a in axes)
    sizes = (None,) * len(axes) if s is None else tuple(s)
    if len(sizes) != len(axes):
        raise ValueError(f"dctn: s and axes must have the same length, got {s} and {axes}")
    return axes, sizes


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The type-2 DCT over several ``axes`` (default: all, or the last ``len(s)``)."""
    _check("dctn", type, norm)
    x = _prepare("dctn", x)
    axes, sizes = _axes(x, s, axes)
    for axis, n in zip(axes, sizes):
        x = _dct_axis(_fit(x, n, axis), axis, norm)
    return x


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of ``dctn``."""
    _check("idctn", type, norm)
    x = _prepare("idctn", x)
    axes, sizes = _axes(x, s, axes)
    for axis, n in zip(axes, sizes):
        x = _idct_axis(_fit(x, n, axis), axis, norm)
    return x
