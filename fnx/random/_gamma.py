"""The ``random_gamma`` primitive: standard gamma samples by Marsaglia-Tsang rejection.

``random_gamma(keys, alpha, log_space)``: ``keys`` uint32 ``(*S, 2)``, one key per
sample (``fnx.random.gamma`` splits its key into them), ``alpha`` float ``S``.

Marsaglia and Tsang, "A simple method for generating gamma variables" (ACM TOMS
26(3), 2000): for ``a >= 1`` with ``d = a - 1/3``, ``c = 1 / sqrt(9 d)``, draw a
standard normal ``x`` and a uniform ``u``, ``v = (1 + c x)^3``, and accept ``d v``
when ``v > 0`` and ``u < 1 - 0.0331 x^4`` or ``log u < x^2 / 2 + d (1 - v + log v)``.
Each candidate is accepted with probability >= 0.95. For ``a < 1`` a sample of
``a + 1`` is scaled by ``U^(1/a)`` (in log space when ``log_space``, so tiny
samples keep their precision; ``beta`` and ``dirichlet`` use that).

The impl is vectorized rejection in NumPy: every round draws one candidate for each
sample still pending (all of them at once) and keeps the accepted ones, until none
is pending. Round ``r``'s candidate of a sample comes from Threefry-2x32 of its key
at counter ``(r, 0)`` (first word: the normal, second: the uniform), the ``a < 1``
scale from counter ``(2^32 - 1, 0)``, so a sample depends only on its key and
``alpha``, and the result is the same eagerly, under ``jit`` (which calls the
impl) and under ``vmap`` (which batches elementwise). No ``while_loop`` is needed.

Samples are not differentiable with respect to ``alpha`` here (implicit
reparameterization is not implemented): differentiating one raises an error that
says so.
"""
from __future__ import annotations

import numpy as np

from ..core.numpy_errstate import quiet
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..lax import special_math
from ..lax.rule_helpers import describe
from ..transforms.vmap import materialize_batch_axis
from ._threefry import threefry2x32_numpy

_U32 = np.dtype(np.uint32)
_SQRT2 = np.sqrt(2.0)
_MAX_ROUNDS = 10_000   # each round accepts >= 95% of the pending samples


def _gamma_rule(keys, alpha, *, log_space):
    if keys.dtype != _U32 or keys.ndim < 1 or keys.shape[-1] != 2:
        raise ShapeError(f"random_gamma: keys must be uint32 of shape alpha.shape + (2,), "
                         f"got {describe(keys, alpha)}")
    if alpha.dtype.kind != "f":
        raise ShapeError(f"random_gamma: alpha must be floating, got {describe(alpha)}")
    if tuple(keys.shape[:-1]) != tuple(alpha.shape):
        raise ShapeError(f"random_gamma: keys must have shape alpha.shape + (2,), got "
                         f"{describe(keys, alpha)}")
    return ShapeDtypeStruct(alpha.shape, alpha.dtype)


def _to_unit(bits, dtype):
    """uint32 bits -> floats in [0, 1) of ``dtype`` from the top mantissa bits."""
    nmant = np.finfo(dtype).nmant
    if nmant >= 32:
        return (bits.astype(dtype) * dtype.type(2.0 ** -32))
    return ((bits >> np.uint32(32 - nmant)).astype(dtype) * dtype.type(2.0 ** -nmant))


def _normal_from(bits, dtype):
    """uint32 bits -> standard normal samples: sqrt(2) erfinv(u), u uniform in (-1, 1)."""
    lo = np.nextafter(dtype.type(-1), dtype.type(0))
    u = np.maximum(lo, _to_unit(bits, dtype) * dtype.type(2) + lo)
    return dtype.type(_SQRT2) * special_math.erf_inv(u).astype(dtype)


def gamma_numpy(k1, k2, alpha, log_space=False):
    """Gamma(alpha) samples in NumPy, one uint32 key ``(k1, k2)`` per element."""
    alpha = np.asarray(alpha)
    dt = alpha.dtype
    shape = alpha.shape
    a = alpha.ravel()
    k1 = np.ascontiguousarray(k1, _U32).ravel()
    k2 = np.ascontiguousarray(k2, _U32).ravel()
    one, third = dt.type(1), dt.type(1 / 3)
    boost = a < one
    a1 = np.where(boost, a + one, a)
    d = a1 - third
    c = third / np.sqrt(d)
    vol = np.full(a.shape, np.nan, dt)       # the accepted v = (1 + c x)^3
    pending = np.flatnonzero(a > 0)          # alpha <= 0 or NaN: NaN samples
    rnd = 0
    while pending.size:
        if rnd >= _MAX_ROUNDS:   # pragma: no cover - probability below 0.05 ** 10000
            raise RuntimeError("random_gamma: rejection sampling did not terminate")
        b1, b2 = threefry2x32_numpy(k1[pending], k2[pending], np.uint32(rnd), np.uint32(0))
        x = _normal_from(b1, dt)
        u = _to_unit(b2, dt)
        dp, cp = d[pending], c[pending]
        v = one + cp * x
        v = v * v * v
        x2 = x * x
        ok = v > 0
        safe_v = np.where(ok, v, one)
        accept = ok & ((u < one - dt.type(0.0331) * x2 * x2)
                       | (np.log(u) < dt.type(0.5) * x2 + dp * (one - safe_v + np.log(safe_v))))
        vol[pending[accept]] = v[accept]
        pending = pending[~accept]
        rnd += 1
    ub = np.ones(a.shape, dt)
    if boost.any():
        b1, _ = threefry2x32_numpy(k1, k2, np.uint32(0xFFFFFFFF), np.uint32(0))
        ub = one - _to_unit(b1, dt)           # in (0, 1]
    inv_a = np.where(boost, one / np.where(boost, a, one), dt.type(0))
    if log_space:
        out = np.log(d) + np.log(vol) + np.log(ub) * inv_a
    else:
        out = d * vol * np.where(boost, ub ** inv_a, one)
    out = np.where(np.isinf(a) & (a > 0), dt.type(np.inf), out)
    return out.astype(dt, copy=False).reshape(shape)


def _gamma_impl(keys, alpha, *, log_space):
    keys = np.asarray(keys)
    return gamma_numpy(keys[..., 0], keys[..., 1], alpha, log_space)


random_gamma_p = Primitive("random_gamma", shape_rule=_gamma_rule, impl=quiet(_gamma_impl))


def _gamma_jvp(primals, tangents, *, log_space):
    if tangents[1] is not None:
        raise NotImplementedError(
            "random_gamma: gamma samples (gamma, beta, dirichlet) are not differentiable "
            "with respect to alpha in fnx (implicit reparameterization is not implemented); "
            "wrap alpha in fnx.lax.stop_gradient if its gradient is not needed")
    return random_gamma_p.bind(*primals, log_space=log_space), None


random_gamma_p.jvp = _gamma_jvp


def _gamma_batch(vals, dims, size, *, log_space):
    keys, alpha = vals
    shape = tuple(alpha.shape[1:]) if dims[1] == 0 else tuple(alpha.shape)
    keys = materialize_batch_axis(keys, dims[0], size, shape + (2,))
    alpha = materialize_batch_axis(alpha, dims[1], size, shape)
    return random_gamma_p.bind(keys, alpha, log_space=log_space), 0


random_gamma_p.batch = _gamma_batch
