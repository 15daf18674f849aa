"""``fnx.experimental.ode.odeint`` (JAX's ``jax.experimental.ode``): the solution against
closed forms and SciPy's LSODA, the adjoint gradients (first and second order) against
closed forms and finite differences, pytree states, closures over traced values, vmap,
jit, the step controls and the errors."""
import numpy as np
import pytest
import scipy.integrate

import fnx
import fnx.numpy as jnp
from fnx.experimental import ode
from fnx.experimental.ode import odeint
from fnx.test_util import check_grads

TS = np.linspace(0.0, 2.0, 9).astype(np.float32)


def decay(y, t, k):
    return -k * y


def test_decay_matches_its_closed_form_and_gradients():
    y0, k = np.float32(1.5), np.float32(0.7)
    ys = odeint(decay, y0, TS, k)
    assert ys.shape == (9,) and ys.dtype == np.float32
    np.testing.assert_allclose(ys, y0 * np.exp(-k * TS), rtol=2e-6)

    T = TS[-1]
    dy0, dk = fnx.grad(lambda y0, k: odeint(decay, y0, TS, k)[-1], argnums=(0, 1))(y0, k)
    np.testing.assert_allclose(dy0, np.exp(-k * T), rtol=1e-5)
    np.testing.assert_allclose(dk, -T * y0 * np.exp(-k * T), rtol=1e-5)
    # the final time moves the output along the solution's slope; t[0] moves the start
    dts = fnx.grad(lambda ts: odeint(decay, y0, ts, k)[-1])(TS)
    np.testing.assert_allclose(dts[-1], -k * y0 * np.exp(-k * T), rtol=1e-5)
    np.testing.assert_allclose(dts[0], k * y0 * np.exp(-k * T), rtol=1e-5)
    np.testing.assert_allclose(dts[1:-1], 0.0, atol=1e-6)


def test_second_order_reverse_is_the_adjoint_of_the_adjoint():
    y0, k = np.float32(1.5), np.float32(0.7)
    T = TS[-1]
    d2k = fnx.grad(fnx.grad(lambda k: odeint(decay, y0, TS, k)[-1]))(k)
    np.testing.assert_allclose(d2k, T * T * y0 * np.exp(-k * T), rtol=1e-4)


def _pendulum(np_, y, t, damping, g):
    theta, omega = y[0], y[1]
    return np_.stack([omega, -damping * omega - g * np_.sin(theta)])


def test_pendulum_against_scipy_and_finite_differences():
    y0 = np.array([np.pi - 0.1, 0.0], np.float32)
    ts = np.linspace(0.0, 1.0, 11).astype(np.float32)
    want = scipy.integrate.odeint(lambda y, t, a, b: _pendulum(np, y, t, a, b),
                                  y0.astype(np.float64), ts.astype(np.float64), (0.25, 9.8),
                                  rtol=1e-10, atol=1e-10)
    got = odeint(lambda y, t, a, b: _pendulum(jnp, y, t, a, b), y0, ts, 0.25, 9.8)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    check_grads(lambda y0, a, b: odeint(lambda y, t, a, b: _pendulum(jnp, y, t, a, b),
                                        y0, ts, a, b),
                (y0, np.float32(0.25), np.float32(9.8)), order=1, modes=["rev"],
                atol=2e-2, rtol=2e-2)


def test_pytree_state_and_a_closure_over_a_traced_parameter():
    ts = np.linspace(0.0, 3.0, 7).astype(np.float32)

    def final_x(w):
        def oscillator(s, t):             # x'' = -w x, as a pytree of position and velocity
            return {"x": s["v"], "v": -w * s["x"]}
        out = odeint(oscillator, {"x": jnp.ones(3), "v": jnp.zeros(3)}, ts,
                     rtol=1e-7, atol=1e-7)
        assert set(out) == {"x", "v"} and out["x"].shape == (7, 3)
        return jnp.sum(out["x"][-1])

    w = np.float32(2.0)
    T = ts[-1]
    np.testing.assert_allclose(final_x(w), 3 * np.cos(np.sqrt(w) * T), rtol=1e-5)
    want = -3 * np.sin(np.sqrt(w) * T) * T / (2 * np.sqrt(w))   # d/dw of 3 cos(sqrt(w) T)
    np.testing.assert_allclose(fnx.grad(final_x)(w), want, rtol=1e-4)
    np.testing.assert_allclose(fnx.jit(fnx.grad(final_x))(w), want, rtol=1e-4)


def test_vmap_over_initial_values_and_over_a_parameter():
    y0s = np.array([0.5, 1.0, 2.0], np.float32)
    got = fnx.vmap(lambda y0: odeint(decay, y0, TS, np.float32(0.3)))(y0s)
    want = np.stack([odeint(decay, y0, TS, np.float32(0.3)) for y0 in y0s])
    # the batched products round differently, so the steps differ in their last bits
    np.testing.assert_allclose(got, want, rtol=1e-5)

    ks = np.array([0.1, 0.5, 1.0], np.float32)
    grads = fnx.vmap(fnx.grad(lambda k: odeint(decay, np.float32(1.0), TS, k)[-1]))(ks)
    np.testing.assert_allclose(grads, -TS[-1] * np.exp(-ks * TS[-1]), rtol=1e-4)


def test_hmax_keeps_steps_short_enough_to_see_a_pulse():
    def rhs(y, t):          # 1 until t = 2, -1 on [5, 7], else 0: y(5) = 2, y(10) = 0
        return jnp.where(t <= 2.0, 1.0, jnp.where((t >= 5.0) & (t <= 7.0), -1.0, 0.0))
    ys = odeint(rhs, jnp.array(0.0), jnp.array([0.0, 5.0, 10.0]), hmax=1.0)
    assert abs(float(ys[1]) - 2.0) < 1e-4 and abs(float(ys[2])) < 1e-4


def test_mxstep_stops_the_integration_where_it_got_to():
    ys = odeint(decay, np.float32(1.0), np.array([0.0, 100.0], np.float32),
                np.float32(1.0), mxstep=3)
    assert np.isfinite(float(ys[1])) and float(ys[1]) > np.exp(-100.0)


def test_complex_state():
    def rhs(y, t, alpha):
        return alpha * y * jnp.exp(-t).astype(y.dtype)
    ts = np.linspace(0.0, 1.0, 5).astype(np.float32)
    ys = odeint(rhs, np.complex64(1 + 2j), ts, np.complex64(3 + 4j))
    want = (1 + 2j) * np.exp((3 + 4j) * (1 - np.exp(-ts.astype(np.float64))))
    assert ys.dtype == np.complex64
    np.testing.assert_allclose(ys, want, rtol=1e-5)


def test_repeated_calls_reuse_one_compiled_solver():
    k = np.float32(0.5)
    odeint(decay, np.float32(1.0), TS, k)
    before = ode._solve._cache_size()
    for y0 in (2.0, 3.0):
        odeint(decay, np.float32(y0), TS, k)
    assert ode._solve._cache_size() == before


def test_forward_mode_raises_as_in_jax():
    with pytest.raises(TypeError, match="can't apply forward-mode"):
        fnx.jacfwd(lambda k: odeint(decay, 1.0, TS, k).sum())(np.float32(3.0))


def test_bad_inputs_get_clear_errors():
    with pytest.raises(TypeError, match="odeint: t must be a 1-D array of float times"):
        odeint(decay, 1.0, np.arange(3), 0.5)
    with pytest.raises(TypeError, match="odeint: the extra arguments"):
        odeint(decay, 1.0, TS, "fast")
