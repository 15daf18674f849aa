"""fnx.scipy.spatial.transform: Rotation and Slerp against SciPy (every conversion, both
Euler conventions, composition, application, mean, interpolation), as a pytree under
jit/vmap/grad."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation as SR
from scipy.spatial.transform import Slerp as SSlerp

import fnx
import fnx.numpy as fnp
import fnx.random as fr
from fnx.scipy.spatial.transform import Rotation, Slerp


rng = np.random.default_rng(0)
Q = rng.normal(size=(6, 4))
V = rng.normal(size=(6, 3))


def close(a, b, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b, atol=atol)


def test_conversions(x64):
    r, s = Rotation.from_quat(Q), SR.from_quat(Q)
    close(r.as_quat(), s.as_quat())
    close(r.as_quat(canonical=True), s.as_quat(canonical=True))
    close(r.as_quat(scalar_first=True), s.as_quat(scalar_first=True))
    close(r.as_matrix(), s.as_matrix())
    close(r.as_rotvec(), s.as_rotvec())
    close(r.as_rotvec(degrees=True), s.as_rotvec(degrees=True), atol=1e-10)
    close(r.as_mrp(), s.as_mrp())
    canon = s.as_quat(canonical=True)
    close(Rotation.from_matrix(s.as_matrix()).as_quat(canonical=True), canon)
    close(Rotation.from_rotvec(s.as_rotvec()).as_quat(canonical=True), canon)
    close(Rotation.from_rotvec(s.as_rotvec(True), degrees=True).as_quat(canonical=True), canon)
    close(Rotation.from_mrp(s.as_mrp()).as_quat(canonical=True), canon)
    small = np.array([1e-5, -2e-5, 3e-6])
    close(Rotation.from_rotvec(small).as_quat(), SR.from_rotvec(small).as_quat())
    close(Rotation.from_rotvec(small).as_rotvec(), small)


@pytest.mark.parametrize("seq", ["xyz", "XYZ", "zyx", "ZXZ", "xyx", "yzy", "YXY", "zxy"])
def test_euler(seq, x64):
    r, s = Rotation.from_quat(Q), SR.from_quat(Q)
    e = s.as_euler(seq)
    close(r.as_euler(seq), e, atol=1e-12)
    close(r.as_euler(seq, degrees=True), s.as_euler(seq, degrees=True), atol=1e-10)
    close(Rotation.from_euler(seq, e).as_quat(canonical=True),
          SR.from_euler(seq, e).as_quat(canonical=True))
    close(Rotation.from_euler(seq[:2], e[:, :2]).as_quat(canonical=True),
          SR.from_euler(seq[:2], e[:, :2]).as_quat(canonical=True))


def test_operations(x64):
    r, s = Rotation.from_quat(Q), SR.from_quat(Q)
    close(r.apply(V), s.apply(V))
    close(r.apply(V, inverse=True), s.apply(V, inverse=True))
    close(r[0].apply(V), s[0].apply(V))
    close((r * r[::-1]).as_quat(canonical=True), (s * s[::-1]).as_quat(canonical=True))
    close(r.inv().as_quat(), s.inv().as_quat())
    close(r.magnitude(), s.magnitude())
    close(r.mean().as_quat(canonical=True), s.mean().as_quat(canonical=True))
    w = np.arange(6.0)
    close(r.mean(w).as_quat(canonical=True), s.mean(w).as_quat(canonical=True))
    assert len(r) == 6 and r[0].single and not r.single
    assert len(Rotation.concatenate([r[0], r[1:3]])) == 3
    close(Rotation.identity().as_matrix(), np.eye(3))
    assert Rotation.identity(4).quat.shape == (4, 4)
    with pytest.raises(TypeError, match="not subscriptable"):
        r[0][0]


def test_slerp(x64):
    r, s = Rotation.from_quat(Q[:3]), SR.from_quat(Q[:3])
    times = np.array([0.0, 1.0, 3.0])
    t = np.array([0.0, 0.5, 1.7, 3.0])
    close(Slerp.init(times, r)(t).as_quat(canonical=True),
          SSlerp(times, s)(t).as_quat(canonical=True))
    assert Slerp.init(times, r)(0.5).single
    with pytest.raises(ValueError, match="at least 2"):
        Slerp.init(times[:1], r[:1])


def test_errors():
    with pytest.raises(ValueError, match="consecutive axes"):
        Rotation.from_euler("xxy", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="not mixed"):
        Rotation.from_euler("xYz", np.zeros(3, np.float32))
    with pytest.raises(fnx.errors.ShapeError, match="3 entries"):
        Rotation.from_euler("xyz", np.zeros(2, np.float32))
    with pytest.raises(fnx.errors.ShapeError, match="from_quat"):
        Rotation.from_quat(np.zeros(3, np.float32))


def test_pytree_jit_vmap_grad_random():
    q = Q.astype(np.float32)
    v = V.astype(np.float32)
    r = Rotation.from_quat(q)
    close(fnx.jit(lambda r, v: r.apply(v))(r, v), np.asarray(r.apply(v)), atol=1e-6)
    e = fnx.vmap(lambda qq: Rotation.from_quat(qq).as_euler("xyz"))(q)
    close(e, SR.from_quat(Q).as_euler("xyz"), atol=1e-5)
    g = fnx.grad(lambda qq: fnp.sum(Rotation.from_quat(qq).apply(v[0])))(q[0])
    assert np.isfinite(np.asarray(g)).all()
    rr = Rotation.random(fr.PRNGKey(0), 500)
    assert rr.quat.shape == (500, 4)
    close(fnp.linalg.norm(rr.quat, axis=-1), np.ones(500), atol=1e-5)
    # uniform rotations map a fixed vector uniformly: its mean is near zero
    assert float(fnp.abs(fnp.mean(rr.apply(np.array([1.0, 0, 0], np.float32)), axis=0)).max()) < 0.1
