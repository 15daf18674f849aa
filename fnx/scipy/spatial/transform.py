"""``fnx.scipy.spatial.transform``: ``Rotation`` and ``Slerp`` as JAX has them.

A ``Rotation`` is a named tuple holding unit quaternions ``quat`` of shape (4,) (one
rotation) or (N, 4), scalar last (SciPy's order), so it is a pytree that passes through
``jit``, ``vmap`` and ``grad``. Every conversion works on any leading shape at once.
Euler angles follow SciPy: lower-case axes are extrinsic, upper-case intrinsic; the
inverse conversion is the quaternion method of Bernardes and Viollet (2022) that SciPy
uses. Where JAX raises, fnx does what SciPy does: ``Rotation.random`` and
``identity(num)`` work, and ``concatenate`` accepts single rotations.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import numpy as fnp
from ... import random
from ...core import dtypes
from ...errors import ShapeError
from ...numpy.util import promote

__all__ = ["Rotation", "Slerp"]


def _float(name, x):
    (x,) = promote(name, x, to_inexact=True)
    return x


def _norm(v):
    return fnp.sqrt(fnp.sum(v * v, axis=-1))


def _compose(p, q):
    """The quaternion product p q (apply q first), scalar last."""
    pv, pw = p[..., :3], p[..., 3:]
    qv, qw = q[..., :3], q[..., 3:]
    v = pw * qv + qw * pv + fnp.cross(pv, qv)
    w = pw * qw - fnp.sum(pv * qv, axis=-1, keepdims=True)
    return fnp.concatenate([v, w], axis=-1)


def _check_seq(seq, exact3=False):
    if not isinstance(seq, str) or not 1 <= len(seq) <= 3 or (exact3 and len(seq) != 3):
        want = "3 axes" if exact3 else "1 to 3 axes"
        raise ValueError(f"Rotation: seq must be a string of {want}, got {seq!r}")
    if not (seq.isupper() or seq.islower()) or any(c not in "xyz" for c in seq.lower()):
        raise ValueError(f"Rotation: seq must use axes from 'xyz' (extrinsic) or 'XYZ' "
                         f"(intrinsic), not mixed, got {seq!r}")
    if any(seq[i] == seq[i + 1] for i in range(len(seq) - 1)):
        raise ValueError(f"Rotation: consecutive axes must differ, got {seq!r}")
    return seq.isupper(), ["xyz".index(c) for c in seq.lower()]


class Rotation(NamedTuple):
    """Rotations in 3 dimensions as unit quaternions ``quat`` (..., 4), scalar last."""

    quat: object

    # --- constructors -------------------------------------------------------------------
    @classmethod
    def from_quat(cls, quat):
        """From quaternions (x, y, z, w), normalized."""
        q = _float("Rotation.from_quat", quat)
        if q.shape[-1:] != (4,) or q.ndim > 2:
            raise ShapeError(f"Rotation.from_quat: expected shape (4,) or (N, 4), got {q.shape}")
        return cls(q / _norm(q)[..., None])

    @classmethod
    def from_matrix(cls, matrix):
        """From rotation matrices (..., 3, 3) (the nearest rotation's quaternion by
        Shepperd's method: the largest of the four candidate components first)."""
        m = _float("Rotation.from_matrix", matrix)
        if m.shape[-2:] != (3, 3) or m.ndim > 3:
            raise ShapeError(f"Rotation.from_matrix: expected shape (3, 3) or (N, 3, 3), got "
                             f"{m.shape}")
        tr = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
        cands = []
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3
            comp = [None] * 4
            comp[i] = 1 - tr + 2 * m[..., i, i]
            comp[j] = m[..., j, i] + m[..., i, j]
            comp[k] = m[..., k, i] + m[..., i, k]
            comp[3] = m[..., k, j] - m[..., j, k]
            cands.append(fnp.stack(comp, axis=-1))
        cands.append(fnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                m[..., 1, 0] - m[..., 0, 1], 1 + tr], axis=-1))
        cands = fnp.stack(cands, axis=-2)                       # (..., 4 candidates, 4)
        choice = fnp.argmax(fnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], tr], -1),
                            axis=-1)
        q = fnp.take_along_axis(cands, choice[..., None, None], axis=-2)[..., 0, :]
        return cls(q / _norm(q)[..., None])

    @classmethod
    def from_rotvec(cls, rotvec, degrees=False):
        """From rotation vectors (axis times angle) (..., 3)."""
        v = _float("Rotation.from_rotvec", rotvec)
        if v.shape[-1:] != (3,) or v.ndim > 2:
            raise ShapeError(f"Rotation.from_rotvec: expected shape (3,) or (N, 3), got "
                             f"{v.shape}")
        if degrees:
            v = v * (np.pi / 180)
        angle = _norm(v)
        a2 = angle * angle
        small = angle <= 1e-3
        safe = fnp.where(small, 1.0, angle)
        scale = fnp.where(small, 0.5 - a2 / 48 + a2 * a2 / 3840, fnp.sin(safe / 2) / safe)
        return cls(fnp.concatenate([scale[..., None] * v, fnp.cos(angle / 2)[..., None]], -1))

    @classmethod
    def from_mrp(cls, mrp):
        """From modified Rodrigues parameters (..., 3)."""
        p = _float("Rotation.from_mrp", mrp)
        if p.shape[-1:] != (3,) or p.ndim > 2:
            raise ShapeError(f"Rotation.from_mrp: expected shape (3,) or (N, 3), got {p.shape}")
        n2 = fnp.sum(p * p, axis=-1, keepdims=True)
        return cls(fnp.concatenate([2 * p, 1 - n2], axis=-1) / (1 + n2))

    @classmethod
    def from_euler(cls, seq, angles, degrees=False):
        """From Euler angles about the axes of ``seq`` (extrinsic 'xyz'-style or intrinsic
        'XYZ'-style): angles (..., len(seq)) (a scalar for one axis)."""
        intrinsic, axes = _check_seq(seq)
        a = fnp.atleast_1d(_float("Rotation.from_euler", angles))
        if a.ndim == 0 or a.shape[-1] != len(axes):
            raise ShapeError(f"Rotation.from_euler: angles must have {len(axes)} entries in "
                             f"their last axis for seq {seq!r}, got shape {a.shape}")
        if degrees:
            a = a * (np.pi / 180)
        q = None
        for n, axis in enumerate(axes):
            half = a[..., n] / 2
            comps = [fnp.zeros_like(half)] * 4
            comps[axis], comps[3] = fnp.sin(half), fnp.cos(half)
            e = fnp.stack(comps, axis=-1)
            q = e if q is None else (_compose(q, e) if intrinsic else _compose(e, q))
        return cls(q)

    @classmethod
    def identity(cls, num=None, dtype=float):
        """The identity rotation (``num`` of them: (num, 4))."""
        dt = dtypes.default_float() if dtype is float else dtypes.canonical(dtype)
        q = fnp.asarray(np.array([0.0, 0.0, 0.0, 1.0]), dtype=dt)
        return cls(q if num is None else fnp.tile(q, (int(num), 1)))

    @classmethod
    def random(cls, random_key, num=None):
        """Uniformly distributed rotations (normalized Gaussian quaternions); JAX raises."""
        shape = (4,) if num is None else (int(num), 4)
        return cls.from_quat(random.normal(random_key, shape))

    @classmethod
    def concatenate(cls, rotations):
        """One stack of all the ``rotations`` (single ones count as one each)."""
        return cls(fnp.concatenate([fnp.atleast_2d(r.quat) for r in rotations], axis=0))

    # --- conversions ----------------------------------------------------------------------
    def as_quat(self, canonical=False, scalar_first=False):
        """The quaternions; ``canonical`` picks the sign with w > 0 (the first nonzero of
        w, x, y, z positive); ``scalar_first`` puts w first."""
        q = self.quat
        if canonical:
            neg = q[..., 3] < 0
            undecided = q[..., 3] == 0
            for c in range(3):
                neg = neg | (undecided & (q[..., c] < 0))
                undecided = undecided & (q[..., c] == 0)
            q = fnp.where(neg[..., None], -q, q)
        return fnp.roll(q, 1, axis=-1) if scalar_first else q

    def as_matrix(self):
        """Rotation matrices (..., 3, 3)."""
        x, y, z, w = (self.quat[..., i] for i in range(4))
        rows = [[x * x - y * y - z * z + w * w, 2 * (x * y - z * w), 2 * (x * z + y * w)],
                [2 * (x * y + z * w), -x * x + y * y - z * z + w * w, 2 * (y * z - x * w)],
                [2 * (x * z - y * w), 2 * (y * z + x * w), -x * x - y * y + z * z + w * w]]
        return fnp.stack([fnp.stack(r, axis=-1) for r in rows], axis=-2)

    def as_rotvec(self, degrees=False):
        """Rotation vectors (axis times angle in [0, pi])."""
        q = fnp.where(self.quat[..., 3:] < 0, -self.quat, self.quat)
        angle = 2 * fnp.arctan2(_norm(q[..., :3]), q[..., 3])
        a2 = angle * angle
        small = angle <= 1e-3
        safe = fnp.where(small, 1.0, angle)
        scale = fnp.where(small, 2 + a2 / 12 + 7 * a2 * a2 / 2880, safe / fnp.sin(safe / 2))
        if degrees:
            scale = scale * (180 / np.pi)
        return scale[..., None] * q[..., :3]

    def as_mrp(self):
        """Modified Rodrigues parameters (the shorter of the two)."""
        sign = fnp.where(self.quat[..., 3:] < 0, -1.0, 1.0)
        return sign * self.quat[..., :3] / (1 + sign * self.quat[..., 3:])

    def as_euler(self, seq, degrees=False):
        """Euler angles (..., 3) about the axes of ``seq`` (3 axes); the first and third
        in [-pi, pi], the second in [0, pi] (symmetric sequences) or [-pi/2, pi/2]. At a
        gimbal lock the third angle is 0."""
        intrinsic, axes = _check_seq(seq, exact3=True)
        extrinsic = not intrinsic
        q = self.quat
        i, j, k = axes if extrinsic else axes[::-1]
        symmetric = i == k
        if symmetric:
            k = 3 - i - j
        sign = float((i - j) * (j - k) * (k - i) // 2)
        w, qi, qj, qk = q[..., 3], q[..., i], q[..., j], q[..., k]
        if symmetric:
            a, b, c, d = w, qi, qj, qk * sign
        else:
            a, b, c, d = w - qj, qi + qk * sign, qj + w, qk * sign - qi
        mid = 2 * fnp.arctan2(fnp.hypot(c, d), fnp.hypot(a, b))
        eps = 1e-7
        case = fnp.where(fnp.abs(mid) <= eps, 1, fnp.where(fnp.abs(mid - np.pi) <= eps, 2, 0))
        half_sum, half_diff = fnp.arctan2(b, a), fnp.arctan2(d, c)
        degenerate = fnp.where(case == 1, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
        first, third = (0, 2) if extrinsic else (2, 0)
        out = [None, mid, None]
        zero = fnp.zeros_like(mid)
        regular = case == 0
        out[first] = fnp.where(regular, half_sum - half_diff, degenerate if first == 0 else zero)
        out[third] = fnp.where(regular, half_sum + half_diff, degenerate if third == 0 else zero)
        if not symmetric:
            out[third] = out[third] * sign
            out[1] = out[1] - np.pi / 2
        angles = fnp.stack(out, axis=-1)
        angles = (angles + np.pi) % (2 * np.pi) - np.pi
        return angles * (180 / np.pi) if degrees else angles

    # --- operations -----------------------------------------------------------------------
    def apply(self, vectors, inverse=False):
        """Rotate ``vectors`` (..., 3) (by the inverse rotations with ``inverse``);
        rotations and vectors broadcast."""
        m = self.as_matrix()
        if inverse:
            m = fnp.swapaxes(m, -1, -2)
        v = _float("Rotation.apply", vectors)
        return fnp.sum(m * v[..., None, :], axis=-1)

    def inv(self):
        """The inverse rotations (conjugate quaternions)."""
        return Rotation(self.quat * fnp.asarray(np.array([-1.0, -1, -1, 1]),
                                                dtype=self.quat.dtype))

    def magnitude(self):
        """The rotation angles in [0, pi]."""
        return 2 * fnp.arctan2(_norm(self.quat[..., :3]), fnp.abs(self.quat[..., 3]))

    def mean(self, weights=None):
        """The (weighted) mean rotation: the dominant eigenvector of ``sum w q q^T``."""
        if self.single:
            raise TypeError("Rotation.mean: needs a stack of rotations")
        q = self.quat
        w = fnp.ones((q.shape[0],), dtype=q.dtype) if weights is None else \
            fnp.asarray(weights).astype(q.dtype)
        if w.ndim != 1 or w.shape[0] != q.shape[0]:
            raise ShapeError(f"Rotation.mean: weights must be 1-D with one value per rotation "
                             f"({q.shape[0]}), got {w.shape}")
        k = (w[None, :] * q.T) @ q
        _, vecs = fnp.linalg.eigh(k)
        return Rotation(vecs[:, -1])

    def __mul__(self, other):
        """The composition: ``(p * q).apply(v) == p.apply(q.apply(v))``."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def __getitem__(self, indexer):
        if self.single:
            raise TypeError("Rotation: a single rotation is not subscriptable")
        return Rotation(self.quat[indexer])

    def __len__(self):
        if self.single:
            raise TypeError("Rotation: a single rotation has no len()")
        return self.quat.shape[0]

    @property
    def single(self):
        """True for one rotation (quat of shape (4,))."""
        return self.quat.ndim == 1


class Slerp(NamedTuple):
    """Spherical linear interpolation between consecutive ``rotations`` at ``times``:
    ``Slerp.init(times, rotations)(t)``."""

    times: object
    timedelta: object
    rotations: object
    rotvecs: object

    @classmethod
    def init(cls, times, rotations):
        if not isinstance(rotations, Rotation):
            raise TypeError("Slerp.init: rotations must be a Rotation")
        if rotations.single or len(rotations) < 2:
            raise ValueError("Slerp.init: needs at least 2 rotations")
        t = fnp.asarray(times).astype(rotations.quat.dtype)
        if t.ndim != 1 or t.shape[0] != len(rotations):
            raise ShapeError(f"Slerp.init: times must be 1-D with one time per rotation "
                             f"({len(rotations)}), got shape {t.shape}")
        start = Rotation(rotations.quat[:-1])
        steps = (start.inv() * Rotation(rotations.quat[1:])).as_rotvec()
        return cls(t, t[1:] - t[:-1], start, steps)

    def __call__(self, times):
        t = fnp.asarray(times).astype(self.times.dtype)
        if t.ndim > 1:
            raise ShapeError("Slerp: times must be at most 1-D")
        single = t.ndim == 0
        t = fnp.atleast_1d(t)
        i = fnp.maximum(fnp.searchsorted(self.times, t) - 1, 0)
        alpha = (t - self.times[i]) / self.timedelta[i]
        out = self.rotations[i] * Rotation.from_rotvec(self.rotvecs[i] * alpha[:, None])
        return out[0] if single else out
