"""``fnx.numpy.fft``: discrete Fourier transforms (NumPy's and JAX's ``numpy.fft``, the Array
API fft extension).

Every transform is one ``lax.fft`` primitive (``fnx/lax/fft.py``) on the requested axes,
moved to the end: the input is zero-padded or cut to ``n`` (``s``) along them first, and
the ``norm`` scaling is one multiply after. So each transform differentiates, batches,
jits and lowers like any other op.

Dtypes are JAX's: real and complex input of 32 bits (and ints, bools, float16) gives
complex64, 64-bit input complex128 (with ``jax_enable_x64``; 64-bit ints included);
``irfft``/``hfft`` give the matching real dtype. Where JAX differs from NumPy, fnx does
what JAX does, except that it raises a clear error where JAX has a sharp edge:

* ``rfft``/``ihfft`` of float16 compute in float32 (JAX raises; NumPy gives complex128);
* ``irfft`` of a length-1 axis without ``n`` raises (the default ``n = 2 (m - 1)`` is 0;
  JAX returns an empty array, NumPy raises too);
* ``rfftn``/``irfftn`` with ``axes=()`` raise (JAX returns the input unchanged: not a
  spectrum);
* ``norm`` accepts None (JAX's and NumPy's default, "backward") and the Array API's names.

The signatures are JAX's (``fft(a, n=None, axis=-1, norm=None)``): every call the Array
API standard allows (``x`` positional, the options by keyword) binds, and so does
ported JAX or NumPy code that passes ``n`` or ``axes`` positionally.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import lax
from ..core import dtypes
from ..core.array import Array, Tracer, to_array
from ..lax.fft import FftType
from .util import concrete_int, normalize_axis, placed, promote

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn",
           "irfftn", "fft2", "ifft2", "rfft2", "irfft2", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}


# --- input conversion ----------------------------------------------------------------------

def _inexact(name, a):
    """``a`` as a float or complex array (ints and bools: JAX's inexact dtype for them)."""
    a = to_array(a, name)
    if dtypes.is_inexact(a.dtype):
        return a
    return promote(name, a, to_inexact=True)[0]


def _to_complex(name, a):
    a = _inexact(name, a)
    if a.dtype.kind == "c":
        return a
    real = a.dtype if a.dtype in _COMPLEX_OF else np.dtype(np.float32)   # float16, bfloat16
    return lax.convert_element_type(a, _COMPLEX_OF[real])


def _to_real(name, a):
    a = _inexact(name, a)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}: needs real input, got {dtypes.short_name(a.dtype)}"
                        f"{list(a.shape)}; use fnx.numpy.fft.fft (fftn) for complex input, or "
                        "pass x.real if the imaginary part is zero")
    if a.dtype not in _COMPLEX_OF:     # float16, bfloat16: JAX raises; compute in float32
        a = lax.convert_element_type(a, np.float32)
    return a


def _check_norm(name, norm):
    if norm not in _NORMS:
        raise ValueError(f'{name}: norm must be "backward", "ortho" or "forward" (None means '
                         f'"backward"), got {norm!r}')


def _ints(name, what, values):
    for v in values:
        if isinstance(v, Tracer):     # a ConcretizationError that says to make it static
            concrete_int(name, v, what)
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        got = values[0] if what == "n" else values
        kind = "an int" if what == "n" else "a sequence of ints"
        raise TypeError(f"{name}: {what} must be {kind}, got {got!r}") from None


# --- the core: pad/cut, move the axes to the end, one primitive, scale, move back ---------

def _resize(a, axis, size):
    """``a`` cut or zero-padded (at the end) to ``size`` along ``axis``."""
    cur = a.shape[axis]
    if size < cur:
        return lax.slice_in_dim(a, 0, size, 1, axis)
    if size > cur:
        config = [(0, 0, 0)] * a.ndim
        config[axis] = (0, size - cur, 0)
        return lax.pad(a, 0, config)
    return a


def _fft_core(name, fft_type, a, s, axes, norm):
    _check_norm(name, norm)
    if fft_type == FftType.RFFT:
        a = _to_real(name, a)
    else:
        a = _to_complex(name, a)
    if s is not None:
        s = _ints(name, "s", (s,) if isinstance(s, (int, np.integer)) else s)
    if axes is None:
        axes = tuple(range(-len(s), 0)) if s is not None else tuple(range(a.ndim))
    else:
        axes = _ints(name, "axes", (axes,) if isinstance(axes, (int, np.integer)) else axes)
    if a.ndim == 0 and axes:
        raise ValueError(f"{name}: needs an array of rank >= 1, got a scalar")
    axes = tuple(normalize_axis(name, ax, a.ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axes {axes}: each axis is transformed once")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: s has {len(s)} sizes for {len(axes)} axes {axes}; pass one "
                         "size per axis")
    if not axes:
        if fft_type in (FftType.RFFT, FftType.IRFFT):
            raise ValueError(f"{name}: needs at least one axis to transform (axes=())")
        return a
    if s is None:
        s = [a.shape[ax] for ax in axes]
        if fft_type == FftType.IRFFT:
            s[-1] = 2 * (a.shape[axes[-1]] - 1)
            if s[-1] < 1:
                raise ValueError(f"{name}: the default output length 2 * (m - 1) is 0 for an "
                                 f"input of length m = 1 along axis {axes[-1]}; pass the "
                                 "output length (n= or s=)")
        elif fft_type == FftType.RFFT and 0 in s:
            raise ValueError(f"{name}: cannot transform an axis of length 0 (input shape "
                             f"{a.shape}, axes {axes})")
        s = tuple(s)
    elif any(n < 1 for n in s):
        raise ValueError(f"{name}: the transform lengths must be >= 1, got "
                         f"{'n=' + str(s[0]) if len(s) == 1 else 's=' + str(s)}")
    in_sizes = s[:-1] + ((s[-1] // 2 + 1,) if fft_type == FftType.IRFFT else (s[-1],))
    for ax, size in zip(axes, in_sizes):
        a = _resize(a, ax, size)
    nd = a.ndim
    rest = [d for d in range(nd) if d not in axes]
    perm = rest + list(axes)
    if perm != list(range(nd)):
        a = lax.transpose(a, perm)
    out = lax.fft(a, fft_type, s)
    total = math.prod(s)
    inverse = fft_type in (FftType.IFFT, FftType.IRFFT)
    if norm == "ortho" and total:
        out = out * (math.sqrt(total) if inverse else 1 / math.sqrt(total))
    elif norm == "forward" and total:
        out = out * (float(total) if inverse else 1 / total)
    if perm != list(range(nd)):
        out = lax.transpose(out, [perm.index(d) for d in range(nd)])
    return out


def _one_axis(name, fft_type, a, n, axis, norm):
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"{name}: axis must be one int, got {axis!r}; use {name}n for several "
                        "axes")
    return _fft_core(name, fft_type, a, None if n is None else _ints(name, "n", (n,)),
                     (axis,), norm)


# --- one axis -----------------------------------------------------------------------------

def fft(a, n=None, axis=-1, norm=None):
    """The discrete Fourier transform along ``axis``, the input cut or zero-padded to
    ``n``; complex output (``norm``: "backward" (default, unscaled), "ortho", "forward")."""
    return _one_axis("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    """The inverse of ``fft`` along ``axis`` ("backward": scaled by ``1 / n``)."""
    return _one_axis("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    """``fft`` of real input, only the ``n // 2 + 1`` non-negative frequencies."""
    return _one_axis("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``rfft``: ``n`` real outputs (default ``2 (m - 1)``) from the half
    spectrum along ``axis`` (which is cut or zero-padded to ``n // 2 + 1``)."""
    return _one_axis("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    """The (real) FFT of a signal with Hermitian symmetry given by its first half:
    ``irfft(conj(a), n)`` with the ``norm`` direction swapped (NumPy's definition)."""
    _check_norm("hfft", norm)
    a = lax.conj(_to_complex("hfft", a))
    return _one_axis("hfft", FftType.IRFFT, a, n, axis, _SWAP[norm])


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of ``hfft``: ``conj(rfft(a, n))`` with the ``norm`` direction swapped."""
    _check_norm("ihfft", norm)
    return lax.conj(_one_axis("ihfft", FftType.RFFT, a, n, axis, _SWAP[norm]))


# --- several axes -------------------------------------------------------------------------

def fftn(a, s=None, axes=None, norm=None):
    """The n-dimensional ``fft`` over ``axes`` (default: all, or the last ``len(s)``)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    """The n-dimensional ``ifft`` over ``axes``."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    """The n-dimensional ``fft`` of real input; the last of ``axes`` is halved."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    """The inverse of ``rfftn``: real output of shape ``s`` along ``axes`` (default: the
    input's sizes, the last one ``2 (m - 1)``)."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _two_axes(name, fft_type, a, s, axes, norm):
    if axes is not None and len(tuple(axes)) != 2:
        raise ValueError(f"{name}: transforms two axes, got axes={tuple(axes)}; use "
                         f"{name[:-1]}n for another number")
    return _fft_core(name, fft_type, a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """``fftn`` over two axes (default the last two)."""
    return _two_axes("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """``ifftn`` over two axes (default the last two)."""
    return _two_axes("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """``rfftn`` over two axes (default the last two)."""
    return _two_axes("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """``irfftn`` over two axes (default the last two)."""
    return _two_axes("irfft2", FftType.IRFFT, a, s, axes, norm)


# --- frequencies and shifts ---------------------------------------------------------------

def _freq_dtype(name, dtype):
    if dtype is None:
        return dtypes.default_float()
    dt = dtypes.canonical(dtype)
    if dt.kind != "f" and not (dtypes.bfloat16 is not None and dt == dtypes.bfloat16):
        raise TypeError(f"{name}: dtype must be a real floating dtype, got {np.dtype(dt).name}")
    return dt


def _freq(name, k, n, d, dtype):
    dtype = _freq_dtype(name, dtype)
    if isinstance(d, (int, float, np.integer, np.floating)) and not isinstance(d, bool):
        with np.errstate(divide="ignore", invalid="ignore"):
            return Array._wrap(np.asarray(k / (float(d) * n)).astype(dtype))
    from . import asarray
    return asarray(k, dtype=dtype) / (to_array(d, name) * n)


def _size(name, n):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be an int (the signal length), got {n!r}") from None
    if n < 0:
        raise ValueError(f"{name}: n must be >= 0, got {n}")
    return n


@placed('fftfreq')
def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an ``n``-point ``fft`` with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d n)``, in ``dtype`` (default:
    the default float dtype)."""
    n = _size("fftfreq", n)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _freq("fftfreq", k.astype(np.float64), n, d, dtype)


@placed('rfftfreq')
def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an ``n``-point ``rfft``: ``[0, 1, ..., n // 2] / (d n)``."""
    n = _size("rfftfreq", n)
    return _freq("rfftfreq", np.arange(0, n // 2 + 1, dtype=np.float64), n, d, dtype)


def _shift(name, x, axes, sign):
    from .manipulation import roll
    x = to_array(x, name)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    else:
        axes = _ints(name, "axes", axes)
    axes = tuple(normalize_axis(name, ax, x.ndim) for ax in axes)
    if not axes:
        return x
    shifts = tuple(sign * (x.shape[ax] // 2) for ax in axes)
    return roll(x, shifts, axes)


def fftshift(x, axes=None):
    """The zero frequency moved to the middle: ``x`` rolled by ``n // 2`` along ``axes``
    (default all)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """The inverse of ``fftshift``: rolled by ``-(n // 2)``."""
    return _shift("ifftshift", x, axes, -1)
