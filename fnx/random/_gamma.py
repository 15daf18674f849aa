"""The ``random_gamma`` primitive: standard gamma samples by JAX's Marsaglia-Tsang loop.

``random_gamma(keys, alpha, log_space)``: ``keys`` uint32 ``(*S, 2)``, one key per
sample (``fnx.random.gamma`` splits its key into them, as JAX's ``random_gamma``
does), ``alpha`` float ``S``.

Marsaglia and Tsang, "A simple method for generating gamma variables" (ACM TOMS
26(3), 2000): for ``a >= 1`` with ``d = a - 1/3``, ``c = 1 / sqrt(9 d)``, draw a
standard normal ``x`` until ``v = 1 + c x > 0``, a uniform ``u``, and accept ``d v^3``
unless ``u >= 1 - 0.0331 x^4`` and ``log u >= x^2 / 2 + d (1 - v^3 + log v^3)``. For
``a < 1`` a sample of ``a + 1`` is scaled by ``U^(1/a)`` (in log space when
``log_space``, so tiny samples keep their precision; ``beta``, ``dirichlet`` and
``chisquare`` use that).

The draws are JAX's (``jax.random``'s ``_gamma_one``), so samples agree with JAX's
up to float rounding: a sample's key ``k`` is split into ``(k, sub)``; each round
splits ``k`` into ``(k, kx, ku)``, draws ``normal(kx')`` from ``kx, kx' = split(kx)``
until ``v > 0`` and ``uniform(ku)``; the ``a < 1`` scale is ``1 - uniform(sub)``
(``log1p(-uniform(sub))`` in log space). ``alpha = 0`` gives 0 (``-inf`` in log
space), ``alpha < 0`` and NaN give NaN, ``+inf`` gives ``inf``, as in JAX.

The impl is vectorized rejection in NumPy: every round draws one candidate for each
sample still pending (all of them at once) and keeps the accepted ones, until none
is pending. A sample depends only on its key and ``alpha``, so the result is the same
eagerly, under ``jit`` (which calls the impl) and under ``vmap`` (which batches
elementwise). No ``while_loop`` is needed.

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
_U64 = np.dtype(np.uint64)
_MAX_ROUNDS = 10_000   # each round accepts >= 95% of the pending samples


def _gamma_rule(keys, alpha, *, log_space):
    if keys.dtype != _U32 or keys.ndim < 1 or keys.shape[-1] != 2:
        raise ShapeError(f"random_gamma: keys must be uint32 of shape alpha.shape + (2,), "
                         f"got {describe(keys, alpha)}")
    if alpha.dtype.kind != "f" and alpha.dtype.name != "bfloat16":
        raise ShapeError(f"random_gamma: alpha must be floating, got {describe(alpha)}")
    if tuple(keys.shape[:-1]) != tuple(alpha.shape):
        raise ShapeError(f"random_gamma: keys must have shape alpha.shape + (2,), got "
                         f"{describe(keys, alpha)}")
    return ShapeDtypeStruct(alpha.shape, alpha.dtype)


def _split(k1, k2, n):
    """``split(key, n)`` of each key ``(k1[i], k2[i])``: ``n`` pairs of key words."""
    return [threefry2x32_numpy(k1, k2, np.uint32(0), np.uint32(i)) for i in range(n)]


def _nmant(dtype):
    try:
        return int(np.finfo(dtype).nmant)
    except (TypeError, ValueError):    # bfloat16 without ml_dtypes' finfo
        return 7


def _unit(k1, k2, dtype):
    """``uniform(key, (), dtype)`` of each key: the top mantissa bits of its bits at
    counter 0, as ``fnx.random.uniform`` draws them."""
    y1, y2 = threefry2x32_numpy(k1, k2, np.uint32(0), np.uint32(0))
    nbits, nmant = dtype.itemsize * 8, _nmant(dtype)
    if nbits == 64:
        b = (y1.astype(_U64) << np.uint64(32)) | y2.astype(_U64)
    else:
        rng_bits = 8 if nmant < 8 else nbits
        b = (y1 ^ y2).astype(_U64) & np.uint64(2 ** rng_bits - 1)
        nbits = rng_bits
    m = b >> np.uint64(nbits - nmant)
    return (m.astype(np.float64) * 2.0 ** -nmant).astype(dtype)   # exact


def _normal(k1, k2, dtype):
    """``normal(key, (), dtype)`` of each key: ``sqrt(2) erf_inv(u)``, ``u`` uniform in
    ``(-1, 1)`` (``2 u + lo`` is exact but for its one rounding, as the FMA's)."""
    lo = np.nextafter(dtype.type(-1), dtype.type(0))
    u = np.maximum(lo, _unit(k1, k2, dtype) * dtype.type(2) + lo)
    return dtype.type(np.sqrt(2)) * special_math.erf_inv(u).astype(dtype)


def _reject(x2, v3, u, d):
    """Whether the candidate ``d v3`` is rejected (JAX's loop condition)."""
    one = d.dtype.type(1)
    return ((u >= one - d.dtype.type(0.0331) * (x2 * x2))
            & (np.log(u) >= x2 * d.dtype.type(0.5) + d * ((one - v3) + np.log(v3))))


def gamma_numpy(k1, k2, alpha, log_space=False):
    """Gamma(alpha) samples in NumPy, one uint32 key ``(k1, k2)`` per element."""
    alpha = np.asarray(alpha)
    dt = alpha.dtype
    shape = alpha.shape
    a = alpha.ravel()
    k1 = np.ascontiguousarray(k1, _U32).ravel()
    k2 = np.ascontiguousarray(k2, _U32).ravel()
    one = dt.type(1)
    keep = a >= one                          # alpha >= 1: no boost
    d = np.where(keep, a, a + one) - dt.type(1 / 3)
    c = dt.type(1 / 3) / np.sqrt(d)
    (key1, key2), (sub1, sub2) = _split(k1, k2, 2)
    vol = np.ones(a.shape, dt)               # the state (X, V, U) = (0, 1, 2) of JAX's loop
    pending = np.flatnonzero(_reject(np.zeros(a.shape, dt), vol, np.full(a.shape, 2, dt), d))
    rnd = 0
    while pending.size:
        if rnd >= _MAX_ROUNDS:   # pragma: no cover - probability below 0.05 ** 10000
            raise RuntimeError("random_gamma: rejection sampling did not terminate")
        (n1, n2), (x1, x2), (u1, u2) = _split(key1[pending], key2[pending], 3)
        key1[pending], key2[pending] = n1, n2
        cp = c[pending]
        x = np.zeros(pending.shape, dt)
        v = np.full(pending.shape, -1, dt)
        todo = np.arange(pending.size)
        while todo.size:                     # normals until v = 1 + c x > 0
            (x1[todo], x2[todo]), (s1, s2) = _split(x1[todo], x2[todo], 2)
            x[todo] = _normal(s1, s2, dt)
            v[todo] = one + x[todo] * cp[todo]
            todo = todo[v[todo] <= 0]
        v3 = v * v * v
        vol[pending] = v3
        pending = pending[_reject(x * x, v3, _unit(u1, u2, dt), d[pending])]
        rnd += 1
    u = _unit(sub1, sub2, dt)
    inv_a = one / a
    if log_space:
        log_u = np.log1p(-u)
        log_boost = np.where(keep | (log_u == 0), dt.type(0), log_u * inv_a)
        out = np.log(d) + np.log(vol) + log_boost
    else:
        out = d * vol * np.where(keep, one, (one - u) ** inv_a)
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
