"""``fnx.image``: JAX's ``jax.image``: ``resize`` and ``scale_and_translate``.

    import fnx.image
    small = fnx.image.resize(img, (1, 16, 16, 3), "linear")      # NHWC: leave N, C as they are
    big = fnx.image.resize(img, (64, 64), "lanczos3", antialias=False)

Every dimension whose size changes is resampled; to keep a batch or channel dimension,
give its size unchanged. ``nearest`` picks input pixel ``floor((i + 0.5) * in / out)`` and
keeps the dtype. The other methods resample separably, one dimension at a time: output
pixel ``i`` of a dimension is a weighted sum of the input pixels, with weights from the
method's kernel evaluated at the distance between input pixel centres and the output
pixel's centre mapped back into the input (``(i + 0.5) / scale - translation / scale -
0.5``), normalised to sum to one; output pixels whose centre falls outside the input get
zero. When downsampling with ``antialias=True`` (the default) the kernel is widened by
``1 / scale`` so it also low-pass filters. Kernels: ``linear`` (triangle), ``cubic``
(Keys, a = -0.5), ``cubic-pytorch`` (a = -0.75 with edge pixels repeated, as PyTorch
and OpenCV without antialiasing; with antialiasing it is ``cubic``), ``lanczos3``,
``lanczos5`` and ``area`` (the overlap of pixel intervals). The result is floating point
(integer images become the default float dtype), and differentiable in the image and,
for ``scale_and_translate``, in ``scale`` and ``translation``.
"""
from __future__ import annotations

import enum

import numpy as np

from . import numpy as fnp
from .core import dtypes as _dtypes

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """The resampling methods (``ResizeMethod.from_string`` takes JAX's names)."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str):
        names = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR,
                 "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
                 "triangle": ResizeMethod.LINEAR, "lanczos3": ResizeMethod.LANCZOS3,
                 "lanczos5": ResizeMethod.LANCZOS5, "cubic": ResizeMethod.CUBIC,
                 "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
                 "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
                 "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "area": ResizeMethod.AREA}
        if s not in names:
            raise ValueError(f'Unknown resize method "{s}"; use one of '
                             f"{', '.join(sorted(names))} or a ResizeMethod")
        return names[s]


# --- kernels (x >= 0: a distance in input pixels, already divided by the kernel's width) --

def _triangle(x):
    return fnp.maximum(0, 1 - fnp.abs(x))


def _keys_cubic(x, a=-0.5):
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return fnp.where(x >= 2.0, 0.0, fnp.where(x >= 1.0, far, near))


def _lanczos(radius):
    def kernel(x):
        num = radius * fnp.sin(np.pi * x) * fnp.sin(np.pi * x / radius)
        den = fnp.where(x != 0, np.pi ** 2 * x ** 2, 1)
        inner = fnp.where(x > 1e-3, num / den, 1)  # the limit 1 near 0
        return fnp.where(x > radius, 0.0, inner)
    return kernel


_AREA = "area"
_KERNELS = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, lambda x: _keys_cubic(x, -0.75)),
    ResizeMethod.AREA: (1, _AREA),
}
_TINY_SUM = 1000.0 * float(np.finfo(np.float32).eps)


def _normalized(w):
    """Columns of ``w`` scaled to sum to one; columns summing to about zero become zero."""
    total = fnp.sum(w, axis=0, keepdims=True)
    return fnp.where(fnp.abs(total) > _TINY_SUM, w / fnp.where(total != 0, total, 1), 0)


def _weights(n_in, n_out, scale, translation, kernel, antialias, edge_radius, dtype):
    """The ``(n_in, n_out)`` matrix taking one dimension of the input to the output."""
    scale = fnp.asarray(scale, dtype)
    translation = fnp.asarray(translation, dtype)
    inv = 1.0 / scale
    width = fnp.maximum(inv, 1.0) if antialias else 1.0
    out_pos = fnp.arange(n_out, dtype=dtype)
    centre = (out_pos + 0.5) * inv - translation * inv - 0.5   # output centres, input coords
    if kernel is _AREA:
        left = out_pos * inv - translation * inv
        right = left + inv
        lo = fnp.arange(n_in, dtype=dtype)
        return _normalized_inside(fnp.maximum(
            0.0, fnp.minimum(right[None, :], lo[:, None] + 1.0)
            - fnp.maximum(left[None, :], lo[:, None])), centre, n_in)
    k = edge_radius or 0
    pos = fnp.arange(-k, n_in + k, dtype=dtype)
    w = kernel(fnp.abs(centre[None, :] - pos[:, None]) / width)
    if not k:
        return _normalized_inside(w, centre, n_in)
    # Edge pixels repeated: the weight of a position past an edge goes to that edge pixel.
    rows = np.clip(np.arange(-k, n_in + k), 0, n_in - 1)
    onto = np.zeros((n_in, n_in + 2 * k), np.float32)
    onto[rows, np.arange(n_in + 2 * k)] = 1
    return _normalized(fnp.asarray(onto, dtype) @ w)


def _normalized_inside(w, centre, n_in):
    inside = (centre >= -0.5) & (centre <= n_in - 0.5)
    return fnp.where(inside[None, :], _normalized(w), 0)


def _method(method, what):
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"{what}: method must be a string or a ResizeMethod, got "
                        f"{type(method).__name__}")
    return method


def _check_shape(image, shape, what):
    shape = tuple(int(d) for d in shape)
    if len(shape) != image.ndim:
        raise ValueError(f"{what}: shape must have one size per dimension of the image; got "
                         f"{shape} for an image of shape {image.shape}")
    if any(d < 0 for d in shape):
        raise ValueError(f"{what}: sizes must be >= 0, got {shape}")
    return shape


def _inexact(image):
    image = fnp.asarray(image)
    if _dtypes.is_inexact(image.dtype):
        return image
    return image.astype(_dtypes.default_float())


def _resample(x, shape, dims, scales, translations, method, antialias, precision, wdtype):
    """Resample ``x`` one dimension at a time; the weights are computed in ``wdtype`` (the
    dtype of scale and translation, as JAX) and cast to ``x``'s dtype."""
    radius, kernel = _KERNELS[method]
    edge = radius if method == ResizeMethod.CUBIC_PYTORCH and not antialias else 0
    for d, s, t in zip(dims, scales, translations):
        w = _weights(x.shape[d], shape[d], s, t, kernel, antialias, edge, wdtype)
        y = fnp.tensordot(x, w.astype(x.dtype), axes=([d], [0]), precision=precision)
        x = fnp.moveaxis(y, -1, d)
    return x


def _nearest(x, shape):
    for d, (n_in, n_out) in enumerate(zip(x.shape, shape)):
        if n_in == n_out:
            continue
        pos = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * np.float32(n_in) \
            / np.float32(n_out)
        idx = np.floor(pos).astype(np.int32)
        x = fnp.take(x, idx, axis=d, mode="clip")
    return x


def resize(image, shape, method, antialias=True, precision="highest"):
    """``image`` resampled to ``shape`` (one size per dimension; see the module doc).

    ``method``: ``"nearest"``, ``"linear"`` (also bilinear/trilinear/triangle), ``"cubic"``
    (bicubic/tricubic), ``"cubic-pytorch"``, ``"lanczos3"``, ``"lanczos5"``, ``"area"``
    or a ``ResizeMethod``. ``antialias`` widens the kernel when downsampling (no effect
    when upsampling or for ``nearest``)."""
    method = _method(method, "resize")
    image = fnp.asarray(image)
    shape = _check_shape(image, shape, "resize")
    if method == ResizeMethod.NEAREST:
        return _nearest(image, shape)
    image = _inexact(image)
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    scales = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    return _resample(image, shape, dims, scales, [0.0] * len(dims), method, antialias,
                     precision, _dtypes.default_float())


def scale_and_translate(image, shape, spatial_dims, scale, translation, method,
                        antialias=True, precision="highest"):
    """Resample ``image`` to ``shape`` along ``spatial_dims``, mapping input position ``x``
    of each to output position ``x * scale + translation`` (one ``scale`` and one
    ``translation`` per spatial dimension; they may be traced and are differentiable).
    Methods as for ``resize`` except ``nearest``, which JAX does not offer here either."""
    method = _method(method, "scale_and_translate")
    if method == ResizeMethod.NEAREST:
        raise ValueError("scale_and_translate: nearest-neighbour resampling is not supported "
                         "(as in JAX); use resize(..., 'nearest') or another method")
    image = _inexact(image)
    shape = _check_shape(image, shape, "scale_and_translate")
    dims = [d + image.ndim if d < 0 else d for d in spatial_dims]
    if any(not 0 <= d < image.ndim for d in dims):
        raise ValueError(f"scale_and_translate: spatial_dims {tuple(spatial_dims)} out of "
                         f"range for an image of {image.ndim} dimensions")
    scale, translation = _inexact(scale), _inexact(translation)
    wdtype = fnp.result_type(scale, translation)
    if scale.shape != (len(dims),) or translation.shape != (len(dims),):
        raise ValueError(f"scale_and_translate: scale and translation need one value per "
                         f"spatial dimension ({len(dims)}); got shapes {scale.shape} and "
                         f"{translation.shape}")
    if not dims:
        return image
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    return _resample(image, shape, dims, [scale[i] for i in range(len(dims))],
                     [translation[i] for i in range(len(dims))], method, antialias,
                     precision, wdtype)
