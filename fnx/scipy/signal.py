"""``fnx.scipy.signal``: JAX's ``jax.scipy.signal`` convolutions and ``detrend``.

``convolve``/``correlate`` (N-dimensional, both inputs of one rank) and
``convolve2d``/``correlate2d``, with SciPy's ``mode`` ('full', 'same', 'valid') and
output alignment, as one ``fnx.lax.conv_general_dilated`` over the full output and a
slice of it, so they differentiate, jit and vmap. As in JAX, integer and bool inputs
give the default float (SciPy keeps integers), ``boundary`` is 'fill' with
``fillvalue=0`` only, and ``method`` ('auto', 'direct', 'fft') changes nothing: the
convolution is direct. ``fftconvolve`` multiplies FFTs (``fnx.numpy.fft``) over the
given ``axes``; the other axes broadcast (JAX requires them equal). ``detrend`` removes
a least-squares line (per segment between breakpoints ``bp``) or the mean.

``stft``, ``istft``, ``csd`` and ``welch`` follow SciPy's definitions and output layout
(frequencies at ``axis``, segments last): segments are gathered with a static index
table, detrended, windowed and transformed by ``fnx.numpy.fft``. Windows are named
('hann', 'hamming', 'blackman', 'bartlett', 'triang', 'cosine', 'boxcar', ('kaiser',
beta), ('tukey', alpha)) in SciPy's periodic (DFT-even) form, or given as an array;
``get_window`` builds them (JAX calls SciPy's there; fnx needs no SciPy).
"""
from __future__ import annotations

import numpy as np

from .. import lax
from .. import numpy as fnp
from ..core import dtypes
from ..errors import ShapeError
from ..numpy.util import promote

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend",
           "stft", "istft", "csd", "welch", "get_window"]

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


# --- spectral analysis ----------------------------------------------------------------------

def _sym_window(name, m, param):
    n = np.arange(m)
    if m == 1:
        return np.ones(1)
    if name in ("hann", "hanning"):
        return 0.5 - 0.5 * np.cos(2 * np.pi * n / (m - 1))
    if name == "hamming":
        return 0.54 - 0.46 * np.cos(2 * np.pi * n / (m - 1))
    if name == "blackman":
        return (0.42 - 0.5 * np.cos(2 * np.pi * n / (m - 1))
                + 0.08 * np.cos(4 * np.pi * n / (m - 1)))
    if name == "bartlett":
        return 1 - np.abs(2 * n / (m - 1) - 1)
    if name == "triang":
        k = np.arange(1, (m + 1) // 2 + 1)
        if m % 2 == 0:
            w = (2 * k - 1.0) / m
            return np.concatenate([w, w[::-1]])
        w = 2 * k / (m + 1.0)
        return np.concatenate([w, w[-2::-1]])
    if name == "cosine":
        return np.sin(np.pi / m * (n + 0.5))
    if name in ("boxcar", "box", "ones", "rect", "rectangular"):
        return np.ones(m)
    if name == "kaiser":
        return np.kaiser(m, param)
    if name == "tukey":
        alpha = float(param)
        if alpha <= 0:
            return np.ones(m)
        if alpha >= 1:
            return _sym_window("hann", m, None)
        w = np.ones(m)
        width = int(np.floor(alpha * (m - 1) / 2.0))
        n1, n3 = n[:width + 1], n[m - width - 1:]
        w[:width + 1] = 0.5 * (1 + np.cos(np.pi * (-1 + 2.0 * n1 / alpha / (m - 1))))
        w[m - width - 1:] = 0.5 * (1 + np.cos(np.pi * (-2.0 / alpha + 1 + 2.0 * n3 / alpha
                                                       / (m - 1))))
        return w
    raise ValueError(f"get_window: unknown window {name!r}; fnx has 'hann', 'hamming', "
                     "'blackman', 'bartlett', 'triang', 'cosine', 'boxcar', ('kaiser', beta) "
                     "and ('tukey', alpha), or pass the window as an array")


def get_window(window, Nx, fftbins=True, *, dtype=None):
    """A window of ``Nx`` samples: periodic (``fftbins``, for spectral analysis, SciPy's
    default) or symmetric. ``window`` is a name or a (name, parameter) tuple."""
    name, param = (window[0], window[1] if len(window) > 1 else None) \
        if isinstance(window, tuple) else (window, None)
    if not isinstance(name, str):
        raise ValueError(f"get_window: window must be a name or a (name, param) tuple, got "
                         f"{window!r}")
    if name in ("kaiser", "tukey") and param is None:
        raise ValueError(f"get_window: the {name} window needs a parameter: ({name!r}, value)")
    m = int(Nx)
    w = _sym_window(name.lower(), m + 1, param)[:-1] if fftbins else \
        _sym_window(name.lower(), m, param)
    return fnp.asarray(w, dtype=dtypes.default_float() if dtype is None else dtype)


def _window_and_nperseg(window, nperseg, length, dtype):
    if isinstance(window, (str, tuple)):
        if nperseg is None:
            nperseg = 256
        nperseg = min(int(nperseg), length) if length else int(nperseg)
        return get_window(window, nperseg).astype(dtype), nperseg
    win = fnp.asarray(window)
    if win.ndim != 1:
        raise ShapeError(f"spectral analysis: window must be 1-D, got shape {win.shape}")
    if nperseg is not None and int(nperseg) != win.shape[0]:
        raise ValueError(f"spectral analysis: nperseg ({nperseg}) must equal the window's "
                         f"length ({win.shape[0]})")
    if win.shape[0] > length:
        raise ValueError(f"spectral analysis: the window ({win.shape[0]}) is longer than the "
                         f"input ({length})")
    return win.astype(dtype), win.shape[0]


def _extend(x, n, how):
    if how is None or n < 1:
        return x
    if how == "zeros":
        return fnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)])
    if how == "constant":
        return fnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode="edge")
    if how == "even":
        return fnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode="reflect")
    if how == "odd":
        if n > x.shape[-1] - 1:
            raise ValueError(f"spectral analysis: the odd extension ({n}) must not exceed "
                             f"the input length - 1 ({x.shape[-1] - 1})")
        left = 2 * x[..., :1] - fnp.flip(x[..., 1:n + 1], -1)
        right = 2 * x[..., -1:] - fnp.flip(x[..., -n - 1:-1], -1)
        return fnp.concatenate([left, x, right], axis=-1)
    raise ValueError(f"spectral analysis: boundary must be 'even', 'odd', 'constant', "
                     f"'zeros' or None, got {how!r}")


def _segments(x, win, nperseg, noverlap, nfft, detrend_how, twosided):
    step = nperseg - noverlap
    starts = np.arange(0, x.shape[-1] - nperseg + 1, step)
    idx = (starts[:, None] + np.arange(nperseg)[None, :]).astype(np.int32)
    seg = x[..., idx]                                   # (..., nseg, nperseg)
    if callable(detrend_how):
        seg = detrend_how(seg)
    elif detrend_how in ("constant", "c"):
        seg = seg - fnp.mean(seg, axis=-1, keepdims=True)
    elif detrend_how in ("linear", "l"):
        seg = detrend(seg, axis=-1)
    elif detrend_how not in (False, None):
        raise ValueError(f"spectral analysis: detrend must be 'constant', 'linear', False or "
                         f"a function, got {detrend_how!r}")
    seg = seg * win
    return fnp.fft.fft(seg, n=nfft, axis=-1) if twosided else \
        fnp.fft.rfft(fnp.real(seg) if seg.dtype.kind == "c" else seg, n=nfft, axis=-1)


def _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend_how, onesided,
              scaling, axis, mode, boundary=None, padded=False):
    import warnings
    if y is None:
        (x,) = promote(name, x, to_inexact=True)
    else:
        x, y = promote(name, x, y, to_inexact=True)
        if x.ndim != y.ndim:
            raise ShapeError(f"{name}: x and y must have the same rank, got {x.shape} and "
                             f"{y.shape}")
    axis = int(axis) % x.ndim
    cdtype = np.result_type(x.dtype, np.complex64)
    rdtype = np.finfo(cdtype).dtype
    x = fnp.moveaxis(x, axis, -1)
    if y is not None:
        y = fnp.moveaxis(y, axis, -1)
        n = max(x.shape[-1], y.shape[-1])
        x = fnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n - x.shape[-1])])
        y = fnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, n - y.shape[-1])])
    win, nperseg = _window_and_nperseg(window, nperseg, x.shape[-1], rdtype)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nfft = nperseg if nfft is None else int(nfft)
    if nfft < nperseg:
        raise ValueError(f"{name}: nfft ({nfft}) must be at least nperseg ({nperseg})")
    if not 0 <= noverlap < nperseg:
        raise ValueError(f"{name}: noverlap ({noverlap}) must be in [0, nperseg={nperseg})")
    step = nperseg - noverlap
    if boundary is not None:
        x = _extend(x, nperseg // 2, boundary)
        y = None if y is None else _extend(y, nperseg // 2, boundary)
    if padded:
        extra = (-(x.shape[-1] - nperseg) % step) % nperseg
        pad = [(0, 0)] * (x.ndim - 1) + [(0, extra)]
        x = fnp.pad(x, pad)
        y = None if y is None else fnp.pad(y, pad)
    if scaling == "density":
        scale = 1.0 / (fs * fnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / fnp.sum(win) ** 2
    else:
        raise ValueError(f"{name}: scaling must be 'density' or 'spectrum', got {scaling!r}")
    if mode == "stft":
        scale = fnp.sqrt(scale)
    twosided = not onesided
    if onesided and (x.dtype.kind == "c" or (y is not None and y.dtype.kind == "c")):
        warnings.warn(f"{name}: complex input: return_onesided=False is used", stacklevel=3)
        twosided = True
    freqs = (fnp.fft.fftfreq(nfft, 1 / fs) if twosided else fnp.fft.rfftfreq(nfft, 1 / fs))
    freqs = freqs.astype(rdtype)
    spec = _segments(x, win, nperseg, noverlap, nfft, detrend_how, twosided)
    if y is not None:
        spec = fnp.conj(spec) * _segments(y, win, nperseg, noverlap, nfft, detrend_how,
                                          twosided)
    elif mode == "psd":
        spec = fnp.conj(spec) * spec
    spec = spec * scale.astype(cdtype)
    if not twosided and mode == "psd":
        stop = nfft // 2 + (nfft % 2)          # double all but DC (and Nyquist for even nfft)
        factor = np.ones(spec.shape[-1])
        factor[1:stop] = 2
        spec = spec * fnp.asarray(factor, dtype=rdtype)
    times = np.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, step) / fs
    if boundary is not None:
        times = times - (nperseg / 2) / fs
    spec = spec.astype(cdtype)
    if y is None and mode != "stft":
        spec = fnp.real(spec)
    spec = fnp.moveaxis(spec, -1, -2)                  # (..., freqs, segments)
    spec = fnp.moveaxis(spec, -2, axis) if axis != x.ndim - 1 else spec
    return freqs, fnp.asarray(times, dtype=rdtype), spec


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """The short-time Fourier transform ``(f, t, Zxx)`` (SciPy's scaling: by the window's
    sum); ``Zxx`` has the frequencies at ``axis`` and the segments last."""
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                     return_onesided, "spectrum", axis, "stft", boundary, padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1,
        average="mean"):
    """The cross power spectral density of ``x`` and ``y`` by Welch's method: ``(f, Pxy)``,
    the segments averaged by ``average`` ('mean' or 'median', bias-corrected)."""
    if average not in ("mean", "median"):
        raise ValueError(f"csd: average must be 'mean' or 'median', got {average!r}")
    freqs, _, p = _spectral("csd", x, x if y is None else y, fs, window, nperseg, noverlap,
                            nfft, detrend, return_onesided, scaling, axis, "psd")
    if y is None:
        p = fnp.real(p)
    if p.shape[-1] == 0:
        return freqs, p[..., 0] if p.ndim else p
    if average == "median":
        n = p.shape[-1]
        k = 2 * np.arange(1, (n - 1) // 2 + 1)
        bias = 1 + float(np.sum(1.0 / (k + 1) - 1.0 / k))
        if p.dtype.kind == "c":
            med = (fnp.median(fnp.real(p), axis=-1)
                   + 1j * fnp.median(fnp.imag(p), axis=-1)).astype(p.dtype)
        else:
            med = fnp.median(p, axis=-1)
        return freqs, med / bias
    return freqs, fnp.mean(p, axis=-1)


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """The power spectral density of ``x`` by Welch's method: ``(f, Pxx)`` (real)."""
    freqs, p = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                   scaling, axis, average)
    return freqs, fnp.real(p) if p.dtype.kind == "c" else p


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """The inverse of ``stft`` by weighted overlap-add: ``(t, x)``."""
    Z = fnp.asarray(Zxx)
    if Z.ndim < 2:
        raise ShapeError(f"istft: Zxx must have at least 2 dimensions, got {Z.shape}")
    t_ax, f_ax = int(time_axis) % Z.ndim, int(freq_axis) % Z.ndim
    if t_ax == f_ax:
        raise ValueError("istft: time_axis and freq_axis must differ")
    Z = fnp.moveaxis(Z, (f_ax, t_ax), (-2, -1))
    nfreq, nseg = Z.shape[-2:]
    n_default = 2 * (nfreq - 1) if input_onesided else nfreq
    if nperseg is None:
        nperseg = n_default if isinstance(window, (str, tuple)) else np.shape(window)[0]
    nperseg = int(nperseg)
    nfft = n_default if nfft is None else int(nfft)
    if nfft < nperseg:
        raise ValueError(f"istft: nfft ({nfft}) must be at least nperseg ({nperseg})")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if not 0 <= noverlap < nperseg:
        raise ValueError(f"istft: noverlap ({noverlap}) must be in [0, nperseg={nperseg})")
    step = nperseg - noverlap
    cdtype = np.result_type(Z.dtype, np.complex64)
    rdtype = np.finfo(cdtype).dtype
    if isinstance(window, (str, tuple)):
        win = get_window(window, nperseg).astype(rdtype)
    else:
        win = fnp.asarray(window).astype(rdtype)
        if win.shape != (nperseg,):
            raise ValueError(f"istft: the window must have nperseg ({nperseg}) samples")
    Zt = fnp.moveaxis(Z, -1, -2)                       # (..., nseg, nfreq)
    seg = fnp.fft.irfft(Zt, n=nfft, axis=-1) if input_onesided else \
        fnp.fft.ifft(Zt, n=nfft, axis=-1)
    seg = seg[..., :nperseg] * win * fnp.sum(win)     # undo stft's 1 / sum(win)
    length = nperseg + (nseg - 1) * step
    idx = (np.arange(nseg)[:, None] * step + np.arange(nperseg)[None, :]).ravel()
    flat = seg.reshape(seg.shape[:-2] + (nseg * nperseg,))
    # overlap-add: one scatter-add of every segment's samples
    x = fnp.zeros(flat.shape[:-1] + (length,), dtype=flat.dtype).at[
        ..., idx.astype(np.int32)].add(flat)
    norm = np.zeros(length)
    wsq = np.asarray(win) ** 2
    for i in range(nseg):
        norm[i * step:i * step + nperseg] += wsq
    if boundary:
        x = x[..., nperseg // 2:length - nperseg // 2]
        norm = norm[nperseg // 2:length - nperseg // 2]
    x = x / fnp.asarray(np.where(norm > 1e-10, norm, 1.0), dtype=rdtype)
    times = fnp.asarray(np.arange(x.shape[-1]) / fs, dtype=rdtype)
    return times, x
