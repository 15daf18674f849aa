"""``fnx.scipy.signal``: JAX's ``jax.scipy.signal`` convolutions and ``detrend``.

``convolve``/``correlate`` (N-dimensional, both inputs of one rank) and
``convolve2d``/``correlate2d``, with SciPy's ``mode`` ('full', 'same', 'valid') and
output alignment, as one ``fnx.lax.conv_general_dilated`` over the full output and a
slice of it, so they differentiate, jit and vmap. As in JAX, integer and bool inputs
give the default float (SciPy keeps integers), ``boundary`` is 'fill' with
``fillvalue=0`` only, and ``method`` ('auto', 'direct', 'fft') changes nothing: the
convolution is direct. ``fftconvolve`` multiplies FFTs (``fnx.numpy.fft``) over the
given ``axes``; the other axes broadcast (JAX requires them equal). ``detrend`` removes
a least-squares line (per segment between breakpoints ``bp``) or the mean. Not
provided: ``stft``, ``istft``, ``welch``, ``csd``.
"""
from __future__ import annotations

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..errors import ShapeError
from ..numpy._util import promote

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend"]

_MODES = ("full", "same", "valid")


def _check(name, in1, in2, mode, method=None):
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    if method is not None and method not in ("auto", "direct", "fft"):
        raise ValueError(f"{name}: method must be 'auto', 'direct' or 'fft', got {method!r}")
    in1, in2 = promote(name, in1, in2, to_inexact=True)
    if in1.ndim != in2.ndim:
        raise ShapeError(f"{name}: in1 and in2 must have the same number of dimensions; got "
                         f"shapes {in1.shape} and {in2.shape}")
    if mode == "valid" and in1.ndim:
        bigger = all(a >= b for a, b in zip(in1.shape, in2.shape))
        smaller = all(a <= b for a, b in zip(in1.shape, in2.shape))
        if not (bigger or smaller):
            raise ShapeError(f"{name}: mode='valid' needs one input at least as large as the "
                             f"other in every dimension; got shapes {in1.shape} and "
                             f"{in2.shape}")
    return in1, in2


def _full(x, k):
    """The full N-d convolution ``sum_j x[n - j] k[j]`` (cross-correlation with the
    flipped kernel, padded by ``len - 1`` on both sides)."""
    n = x.ndim
    flipped = fnp.flip(k, axis=tuple(range(n)))
    pads = [(s - 1, s - 1) for s in k.shape]
    out = lax.conv_general_dilated(x[None, None], flipped[None, None], (1,) * n, pads)
    return out[0, 0]


def _convolve(in1, in2, mode, centre=lambda s2: (s2 - 1) // 2):
    if in1.ndim == 0:
        return in1 * in2
    if in1.size == 0 or in2.size == 0:
        raise ShapeError(f"convolve: inputs must not be empty; got shapes {in1.shape} and "
                         f"{in2.shape}")
    # the smaller operand as the kernel (the full convolution is symmetric)
    x, k = (in1, in2) if in1.size >= in2.size else (in2, in1)
    full = _full(x, k)
    if mode == "full":
        return full
    if mode == "same":   # in1's size, starting at centre(in2's size) of the full output
        idx = tuple(slice(centre(s2), centre(s2) + s1)
                    for s1, s2 in zip(in1.shape, in2.shape))
    else:
        idx = tuple(slice(min(s1, s2) - 1, max(s1, s2)) for s1, s2 in zip(in1.shape, in2.shape))
    return full[idx]


def _reverse_conj(x):
    x = fnp.flip(x, axis=tuple(range(x.ndim))) if x.ndim else x
    return fnp.conj(x) if x.dtype.kind == "c" else x


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional convolution of ``in1`` and ``in2`` (same rank); ``mode``:
    'full' (every overlap), 'same' (the size of ``in1``, centred), 'valid' (full
    overlaps only; one input must be at least as large as the other in every
    dimension)."""
    in1, in2 = _check("convolve", in1, in2, mode, method)
    return _convolve(in1, in2, mode)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-dimensional cross-correlation ``z[n] = sum_m in1[n + m] conj(in2[m])``, as
    SciPy: ``convolve(in1, conj(in2) reversed)``, with the same modes."""
    return _correlate("correlate", in1, in2, mode, method)


def _correlate(name, in1, in2, mode, method=None):
    in1, in2 = _check(name, in1, in2, mode, method)
    if mode == "valid" and in1.ndim and any(a < b for a, b in zip(in1.shape, in2.shape)):
        # SciPy swaps the inputs here: correlate gives the reversed, conjugated
        # correlation of (in2, in1), correlate2d the reversed one (not conjugated)
        out = _convolve(in2, _reverse_conj(in1), mode)
        out = fnp.flip(out, axis=tuple(range(out.ndim)))
        return out if name == "correlate2d" or out.dtype.kind != "c" else fnp.conj(out)
    if name == "correlate2d":
        # SciPy's correlate2d centres 'same' at in2's size // 2 (correlate: (size - 1) // 2;
        # they differ for even kernel sizes)
        return _convolve(in1, _reverse_conj(in2), mode, centre=lambda s2: s2 // 2)
    return _convolve(in1, _reverse_conj(in2), mode)


def _check_2d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}: only boundary='fill' with fillvalue=0 is "
                                  f"supported (as in JAX), got boundary={boundary!r}, "
                                  f"fillvalue={fillvalue!r}; pad the input with "
                                  "fnx.numpy.pad(mode='wrap'/'symmetric') and use "
                                  "mode='valid' instead")
    s1, s2 = np.shape(in1), np.shape(in2)
    if len(s1) != 2 or len(s2) != 2:
        raise ShapeError(f"{name}: in1 and in2 must be 2-dimensional; got shapes {s1} and "
                         f"{s2}")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D convolution of matrices (``convolve`` restricted to rank 2)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    in1, in2 = _check("convolve2d", in1, in2, mode)
    return _convolve(in1, in2, mode)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D cross-correlation of matrices (``correlate`` restricted to rank 2)."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    return _correlate("correlate2d", in1, in2, mode)


def fftconvolve(in1, in2, mode="full", axes=None):
    """``convolve`` through FFTs over ``axes`` (default: all), the other axes broadcast
    against each other; same modes and alignment as SciPy."""
    in1, in2 = _check("fftconvolve", in1, in2, mode)
    nd = in1.ndim
    if nd == 0:
        return in1 * in2
    axes = tuple(range(nd)) if axes is None else tuple(
        int(a) % nd for a in ((axes,) if np.ndim(axes) == 0 else axes))
    other = [d for d in range(nd) if d not in axes]
    batch = np.broadcast_shapes(tuple(in1.shape[d] for d in other),
                                tuple(in2.shape[d] for d in other))
    shape1, shape2 = list(in1.shape), list(in2.shape)
    for d, b in zip(other, batch):
        shape1[d] = shape2[d] = b
    in1, in2 = fnp.broadcast_to(in1, tuple(shape1)), fnp.broadcast_to(in2, tuple(shape2))
    if mode == "valid":
        bigger = all(in1.shape[d] >= in2.shape[d] for d in axes)
        if not bigger and not all(in1.shape[d] <= in2.shape[d] for d in axes):
            raise ShapeError(f"fftconvolve: mode='valid' needs one input at least as large as "
                             f"the other along every axis in {axes}; got shapes {in1.shape} "
                             f"and {in2.shape}")
    size = [in1.shape[d] + in2.shape[d] - 1 for d in axes]
    if in1.dtype.kind == "c":
        full = fnp.fft.ifftn(fnp.fft.fftn(in1, s=size, axes=axes)
                             * fnp.fft.fftn(in2, s=size, axes=axes), s=size, axes=axes)
    else:
        full = fnp.fft.irfftn(fnp.fft.rfftn(in1, s=size, axes=axes)
                              * fnp.fft.rfftn(in2, s=size, axes=axes), s=size, axes=axes)
    full = full.astype(in1.dtype)
    if mode == "full":
        return full
    idx = [slice(None)] * nd
    for d in axes:
        s1, s2 = in1.shape[d], in2.shape[d]
        idx[d] = (slice((s2 - 1) // 2, (s2 - 1) // 2 + s1) if mode == "same"
                  else slice(min(s1, s2) - 1, max(s1, s2)))
    return full[tuple(idx)]


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """Remove the least-squares line (``type='linear'``, separately on each segment
    between the breakpoints ``bp``, static ints) or the mean (``'constant'``) along
    ``axis``. Integer input gives the default float (as JAX)."""
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError(f"detrend: type must be 'linear' or 'constant', got {type!r}")
    (x,) = promote("detrend", data, to_inexact=True)
    if x.ndim == 0:
        raise ShapeError("detrend: data must have at least one dimension")
    x = fnp.moveaxis(x, axis, -1)
    n = x.shape[-1]
    if type in ("constant", "c"):
        out = x - fnp.mean(x, axis=-1, keepdims=True)
        return fnp.moveaxis(out, -1, axis)
    cuts = sorted(set([0] + [int(b) for b in np.atleast_1d(bp)] + [n]))
    if cuts[0] < 0 or cuts[-1] > n:
        raise ValueError(f"detrend: breakpoints must lie in [0, {n}], got {bp!r}")
    pieces = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        seg = x[..., lo:hi]
        t = np.arange(hi - lo, dtype=np.float64)
        t = (t - t.mean()) / max(hi - lo, 1)           # centred and scaled: a stable fit
        tt = float(np.dot(t, t))
        tc = fnp.asarray(t, dtype=x.dtype)
        centred = seg - fnp.mean(seg, axis=-1, keepdims=True)
        slope = fnp.sum(centred * tc, axis=-1, keepdims=True) / tt if tt > 0 else 0.0
        pieces.append(centred - slope * tc)
    return fnp.moveaxis(fnp.concatenate(pieces, axis=-1), -1, axis)
