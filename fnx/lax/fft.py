"""``fft``: the one Fourier-transform primitive (JAX's ``jax.lax.fft``).

``fft(x, fft_type, fft_lengths)`` transforms the trailing ``len(fft_lengths)`` axes
of ``x``; every leading axis is a batch axis. ``fft_type`` is one of

======  ===================  =========================================================
FFT     complex -> complex   ``X[k] = sum_j x[j] exp(-2 pi i j.k / n)`` (unscaled)
IFFT    complex -> complex   the inverse, scaled by ``1 / prod(fft_lengths)``
RFFT    real -> complex      FFT of a real signal, the last axis cut to ``n // 2 + 1``
IRFFT   complex -> real      the inverse of RFFT; the last axis of ``x`` has
                             ``n // 2 + 1`` entries, the output ``n``
======  ===================  =========================================================

where ``n`` is ``fft_lengths[-1]``. The operand's trailing axes must already have
the transform's sizes (``fnx.numpy.fft`` pads and slices to ``n`` / ``s`` before it
binds the primitive). Dtypes: complex64/complex128 in and out for FFT and IFFT;
float32 -> complex64 and float64 -> complex128 for RFFT, and back for IRFFT. IRFFT
reads its input as the half spectrum of a Hermitian-symmetric signal, as NumPy and
XLA do: the imaginary parts of the zero-frequency bin (and, for even ``n``, of the
Nyquist bin) of the last axis are ignored.

Rules
-----
* impl: ``numpy.fft`` (pocketfft, which keeps float32/complex64 in single precision).
* jvp: the primitive is linear, so the tangent is the same transform of the tangent.
* transpose (reverse mode, JAX's convention: the plain transpose ``J^T``, not the
  conjugate one): the DFT matrix is symmetric, so FFT and IFFT transpose to
  themselves. RFFT, ``x (real, n) -> P F x`` (``P`` keeps the first ``n // 2 + 1``
  bins), transposes to ``ct -> Re(F P^T ct)``, which is the IRFFT of ``conj(ct)``
  weighted by ``N`` at the zero and Nyquist bins and ``N / 2`` in between (``N``:
  the product of ``fft_lengths``; IRFFT counts the in-between bins twice and scales
  by ``1 / N``). IRFFT is only real-linear; its transpose is
  ``ct -> conj(RFFT(ct)) * c / N`` with ``c`` 1 at the zero and Nyquist bins and 2
  in between.
* batching: the batch axis moves to the front, where it is one more leading axis.
* ONNX: none. The exporter rejects complex values (ONNX runtimes have no complex
  tensors), and every FFT type has a complex operand or result.
"""
from __future__ import annotations

import enum
import math
import operator

import numpy as np

from ..core import array_library as AL
from ..core.array import to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from .rule_helpers import describe

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
    """The four transforms of ``lax.fft`` (the values of JAX's ``jax.lax.FftType``)."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    def __repr__(self):
        return f"FftType.{self.name}"

    __str__ = __repr__


_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64),
            np.dtype(np.float64): np.dtype(np.complex128)}
_REAL = {c: r for r, c in _COMPLEX.items()}


def _fft_type(fft_type):
    """An ``FftType`` from itself, its value or its name (any case, ``"FftType.FFT"``)."""
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        key = fft_type.rsplit(".", 1)[-1].upper()
        if key in FftType.__members__:
            return FftType[key]
    elif isinstance(fft_type, (int, np.integer)) and not isinstance(fft_type, bool):
        if int(fft_type) in FftType._value2member_map_:
            return FftType(int(fft_type))
    raise ValueError(f"fft: unknown fft_type {fft_type!r}; use one of fnx.lax.FftType.FFT, "
                     "IFFT, RFFT, IRFFT (or their names as strings)")


def _half(n):
    return n // 2 + 1


def _fft_rule(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)

    def bad(why):
        raise ShapeError(f"fft: {why}; got an operand {describe(x)}, fft_type={fft_type!r}, "
                         f"fft_lengths={tuple(fft_lengths)}")
    if fft_type not in tuple(FftType):
        bad("fft_type must be a fnx.lax.FftType")
    if k == 0:
        bad("fft_lengths must name at least one axis")
    lowest = 0 if fft_type in (FftType.FFT, FftType.IFFT) else 1
    if any(not isinstance(n, int) or n < lowest for n in fft_lengths):
        bad(f"fft_lengths must be ints >= {lowest}")
    if x.ndim < k:
        bad(f"the operand needs rank >= {k}, one axis per fft length")
    lengths = tuple(fft_lengths)
    if fft_type == FftType.RFFT:
        if x.dtype not in _COMPLEX:
            bad("RFFT needs a float32 or float64 operand (fnx.numpy.fft.rfft converts other "
                "real dtypes; use FFT for complex input)")
        want, out_dtype = lengths, _COMPLEX[x.dtype]
        out = lengths[:-1] + (_half(lengths[-1]),)
    else:
        if x.dtype not in _REAL:
            bad(f"{fft_type.name} needs a complex64 or complex128 operand (fnx.numpy.fft "
                "converts real input; or lax.convert_element_type(x, 'complex64') first)")
        if fft_type == FftType.IRFFT:
            want, out_dtype = lengths[:-1] + (_half(lengths[-1]),), _REAL[x.dtype]
            out = lengths
        else:
            want, out_dtype, out = lengths, x.dtype, lengths
    if tuple(x.shape[x.ndim - k:]) != want:
        half = ", the last one n // 2 + 1" if fft_type == FftType.IRFFT else ""
        bad(f"the trailing {k} axes of the operand must have sizes {want} (for "
            f"fft_lengths {lengths}{half}); pad or slice the operand first "
            "(fnx.numpy.fft does so for n= / s=)")
    return ShapeDtypeStruct(tuple(x.shape[:x.ndim - k]) + out, out_dtype, False)


def _fft_impl(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    axes = tuple(range(x.ndim - k, x.ndim))
    out = _fft_rule(ShapeDtypeStruct(x.shape, x.dtype), fft_type=fft_type,
                    fft_lengths=fft_lengths)
    if x.size == 0 or math.prod(out.shape) == 0:
        return AL.zeros(x, out.shape, out.dtype)
    if fft_type == FftType.FFT:
        y = np.fft.fftn(x, axes=axes)
    elif fft_type == FftType.IFFT:
        y = np.fft.ifftn(x, axes=axes)
    elif fft_type == FftType.RFFT:
        y = np.fft.rfftn(x, axes=axes)
    else:
        y = np.fft.irfftn(x, s=fft_lengths, axes=axes)
    return AL.as_array(y).astype(out.dtype, copy=False)


fft_p = Primitive("fft", shape_rule=_fft_rule, impl=_fft_impl)


# --- jvp: linear -----------------------------------------------------------------------------
from ..transforms.jvp import deflinear  # noqa: E402

deflinear(fft_p)


# --- transpose -------------------------------------------------------------------------------

def _bin_weights(fft_lengths, edge, inner, dtype):
    """A constant over the half-spectrum axis of ``fft_lengths``: ``edge`` at the zero bin
    (and the Nyquist bin of an even length), ``inner`` between them."""
    n = fft_lengths[-1]
    w = np.full(_half(n), inner, dtype)
    w[0] = edge
    if n % 2 == 0:
        w[-1] = edge
    return w


def _along_last(w, shape):
    from . import ops as L
    return L.broadcast_in_dim(to_array(w), shape, (len(shape) - 1,))


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if ct is None:
        return [None]
    from . import ops as L
    lengths = tuple(fft_lengths)
    total = float(math.prod(lengths))
    if fft_type in (FftType.FFT, FftType.IFFT):       # symmetric DFT matrices
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=lengths)]
    if fft_type == FftType.RFFT:                      # ct complex -> real cotangent
        w = _bin_weights(lengths, total, total / 2, ct.dtype)
        z = L.mul(L.conj(ct), _along_last(w, ct.shape))
        return [fft_p.bind(z, fft_type=FftType.IRFFT, fft_lengths=lengths)]
    y = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=lengths)   # ct real
    w = _bin_weights(lengths, 1 / total, 2 / total, y.dtype)
    return [L.mul(L.conj(y), _along_last(w, y.shape))]


fft_p.transpose = _fft_transpose


# --- batching --------------------------------------------------------------------------------
from ..transforms.vmap import move_to_front  # noqa: E402


def _fft_batch(vals, dims, size, **params):
    (x,), (d,) = vals, dims
    return fft_p.bind(move_to_front(x, d), **params), 0


fft_p.batch = _fft_batch


# --- the public function ---------------------------------------------------------------------

def fft(x, fft_type, fft_lengths):
    """The ``fft_type`` transform (``FftType`` or its name) of the trailing
    ``len(fft_lengths)`` axes of ``x``, whose sizes must match ``fft_lengths`` (for
    IRFFT: the last one ``fft_lengths[-1] // 2 + 1``). No promotion: FFT, IFFT and
    IRFFT take complex64/complex128, RFFT float32/float64 (``fnx.numpy.fft`` converts)."""
    x = to_array(x, "fft")
    if isinstance(fft_lengths, (int, np.integer)):
        fft_lengths = (fft_lengths,)
    try:
        lengths = tuple(operator.index(n) for n in fft_lengths)
    except TypeError:
        raise ValueError(f"fft: fft_lengths must be a sequence of ints, got "
                         f"{fft_lengths!r}") from None
    return fft_p.bind(x, fft_type=_fft_type(fft_type), fft_lengths=lengths)
