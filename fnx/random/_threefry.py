"""The ``threefry2x32`` primitive: the Threefry-2x32 block cipher (20 rounds).

``threefry2x32(k1, k2, x1, x2) -> (y1, y2)`` encrypts the 64-bit counter
``(x1, x2)`` under the 64-bit key ``(k1, k2)``, elementwise over uint32
operands (each of rank 0 or of the common shape). This is the hash of JAX's
default generator (Salmon et al., "Parallel random numbers: as easy as 1, 2,
3", SC 2011): five groups of four rounds with rotations 13, 15, 26, 6 and
17, 29, 16, 24 alternately, a key injection after each group, and the key
schedule ``k1, k2, k1 ^ k2 ^ 0x1BD11BDA``.

The impl is vectorized NumPy uint32 arithmetic (wrapping, in place); one call
hashes a whole array, eagerly and inside ``jit``. It batches elementwise; its
outputs are integers, so it has no derivative (a zero tangent).
"""
from __future__ import annotations

import numpy as np

from ..core.array import to_array
from ..core.backend import register_lowering
from ..core.numpy_errstate import quiet
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..errors import ShapeError
from ..lax.rule_helpers import describe
from ..transforms.jvp import defjvp_zero
from ..transforms.vmap import materialize_batch_axis

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA


def _common_shape(name, avals):
    shapes = {tuple(a.shape) for a in avals if a.ndim}
    if len(shapes) > 1:
        raise ShapeError(f"{name}: operands must be of rank 0 or all of one shape, got "
                         f"{describe(*avals)}; broadcast them first")
    return shapes.pop() if shapes else ()


def _threefry_rule(k1, k2, x1, x2):
    avals = (k1, k2, x1, x2)
    if any(a.dtype != _U32 for a in avals):
        raise ShapeError(f"threefry2x32: needs uint32 operands (key words k1, k2 and counter "
                         f"words x1, x2), got {describe(*avals)}; convert them with "
                         "lax.convert_element_type(x, 'uint32')")
    shape = _common_shape("threefry2x32", avals)
    return [ShapeDtypeStruct(shape, _U32), ShapeDtypeStruct(shape, _U32)]


def _rotate_mix(x0, x1, rotations):
    """Four rounds in place: x0 += x1; x1 = rotl(x1, r) ^ x0."""
    for r in rotations:
        x0 += x1
        t = x1 >> np.uint32(32 - r)
        x1 <<= np.uint32(r)
        x1 |= t
        x1 ^= x0


def threefry2x32_numpy(k1, k2, x1, x2):
    """Threefry-2x32 on NumPy uint32 arrays (broadcast together); returns (y1, y2)."""
    k1, k2, x1, x2 = (np.asarray(v, dtype=_U32) for v in (k1, k2, x1, x2))
    shape = np.broadcast_shapes(k1.shape, k2.shape, x1.shape, x2.shape)
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(_PARITY))
    x0 = np.empty(shape, _U32)
    y1 = np.empty(shape, _U32)
    np.add(x1, ks[0], out=x0)
    np.add(x2, ks[1], out=y1)
    for i in range(1, 6):
        _rotate_mix(x0, y1, _ROTATIONS[(i - 1) % 2])
        x0 += ks[i % 3]
        y1 += ks[(i + 1) % 3]
        y1 += np.uint32(i)
    return x0, y1


def _threefry_impl(k1, k2, x1, x2):
    return list(threefry2x32_numpy(k1, k2, x1, x2))


threefry2x32_p = Primitive("threefry2x32", shape_rule=_threefry_rule,
                           impl=quiet(_threefry_impl), multiple_results=True)
defjvp_zero(threefry2x32_p)


def _threefry_batch(vals, dims, size):
    shapes = [tuple(v.shape[1:]) if d == 0 else tuple(v.shape) for v, d in zip(vals, dims)]
    shape = max(shapes, key=len)
    args = [v if d is None and not v.ndim else materialize_batch_axis(v, d, size, shape)
            for v, d in zip(vals, dims)]
    return threefry2x32_p.bind(*args), [0, 0]


threefry2x32_p.batch = _threefry_batch


def _threefry_cuda(xs, in_dtypes, out_dtypes, ys):
    """The ``"cuda"`` rule: C statements setting ``ys`` (two ``unsigned int`` variables)
    to the cipher of ``xs`` (the multiple-results convention of ``fnx.kernels.fusion``):
    the 20 rounds unrolled, the same uint32 arithmetic as ``threefry2x32_numpy`` (C's
    unsigned arithmetic wraps as NumPy's uint32 does), so the bits are the CPU's."""
    k1, k2, x1, x2 = xs
    lines = [f"const unsigned int t_k0 = {k1}, t_k1 = {k2};",
             f"const unsigned int t_k2 = t_k0 ^ t_k1 ^ {_PARITY:#x}u;",
             f"unsigned int t_a = {x1} + t_k0, t_b = {x2} + t_k1;"]
    ks = ("t_k0", "t_k1", "t_k2")
    for i in range(1, 6):
        for r in _ROTATIONS[(i - 1) % 2]:
            lines.append(f"t_a += t_b; t_b = (t_b << {r}) | (t_b >> {32 - r}); t_b ^= t_a;")
        lines.append(f"t_a += {ks[i % 3]}; t_b += {ks[(i + 1) % 3]}; t_b += {i}u;")
    lines.append(f"{ys[0]} = t_a; {ys[1]} = t_b;")
    return "\n".join(lines)


register_lowering(threefry2x32_p, "cuda", _threefry_cuda)


def threefry2x32(k1, k2, x1, x2):
    """``(y1, y2)``: Threefry-2x32 of counters ``(x1, x2)`` under key ``(k1, k2)``;
    uint32 operands of rank 0 or of one common shape."""
    return tuple(threefry2x32_p.bind(*(to_array(v) for v in (k1, k2, x1, x2))))
