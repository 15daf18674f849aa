"""custom_jvp and custom_vjp: the user's rules are used by jvp, grad and under jit."""
from functools import partial

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import FnxError


@fnx.custom_jvp
def log1pexp(x):
    return fnp.log1p(fnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * fnx.lax.logistic(x)  # stable where exp overflows


def test_custom_jvp_rule_is_used_in_both_modes_and_under_jit():
    x = fnp.asarray([0.0, 10.0, 1000.0])
    g = fnx.grad(lambda x: log1pexp(x).sum())(x)
    np.testing.assert_allclose(g, [0.5, 1 / (1 + np.exp(-10.0)), 1.0], rtol=1e-6)
    _, t = fnx.jvp(log1pexp, (x,), (fnp.ones(3),))
    np.testing.assert_allclose(t, g, rtol=1e-6)
    np.testing.assert_allclose(fnx.jit(fnx.grad(lambda x: log1pexp(x).sum()))(x), g, rtol=1e-6)
    np.testing.assert_allclose(fnx.jit(log1pexp)(fnp.asarray([0.0])), [np.log(2.0)], rtol=1e-6)


def test_custom_jvp_second_order_uses_the_rule_again():
    d2 = fnx.grad(fnx.grad(lambda x: log1pexp(x)))(0.0)
    np.testing.assert_allclose(d2, 0.25, rtol=1e-6)  # logistic'(0)


@fnx.custom_vjp
def clip_gradient(x):
    return x * 1.0


def _clip_fwd(x):
    return x * 1.0, {"scale": fnp.ones_like(x)}


def _clip_bwd(res, g):
    return (fnp.clip(g, -1.0, 1.0) * res["scale"],)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_bwd_is_used_with_pytree_residuals():
    f = lambda x: (clip_gradient(x) * fnp.asarray([0.5, 5.0])).sum()  # noqa: E731
    x = fnp.asarray([1.0, 2.0])
    np.testing.assert_allclose(fnx.grad(f)(x), [0.5, 1.0])
    np.testing.assert_allclose(fnx.jit(fnx.grad(f))(x), [0.5, 1.0])
    np.testing.assert_allclose(fnx.grad(fnx.jit(f))(x), [0.5, 1.0])
    np.testing.assert_allclose(clip_gradient(x), x)


def test_custom_vjp_nondiff_argnums_through_partial():
    @partial(fnx.custom_vjp, nondiff_argnums=(0,))
    def scaled(k, x):
        return x * k

    scaled.defvjp(lambda k, x: (x * k, None), lambda k, res, g: (g * k * 10,))
    assert float(fnx.grad(lambda x: scaled(3.0, x))(1.0)) == 30.0


def test_custom_vjp_refuses_forward_mode_and_bad_bwd():
    with pytest.raises(FnxError, match="forward mode"):
        fnx.jvp(clip_gradient, (fnp.ones(2),), (fnp.ones(2),))

    @fnx.custom_vjp
    def h(x):
        return x

    h.defvjp(lambda x: (x, None), lambda res, g: g)  # not a tuple
    with pytest.raises(TypeError, match="tuple"):
        fnx.grad(lambda x: h(x).sum())(fnp.ones(2))


def _block(x):
    for _ in range(6):
        x = fnp.sin(x) * 1.1
    return x


def test_checkpoint_gives_the_same_derivatives():
    f = lambda x: _block(_block(x)).sum()  # noqa: E731
    g = lambda x: fnx.checkpoint(_block)(fnx.remat(_block)(x)).sum()  # noqa: E731
    x = fnp.linspace(0.0, 1.0, 50)
    np.testing.assert_allclose(fnx.grad(g)(x), fnx.grad(f)(x), rtol=1e-6)
    np.testing.assert_allclose(fnx.jit(fnx.grad(g))(x), fnx.grad(f)(x), rtol=1e-6)
    np.testing.assert_allclose(fnx.jvp(g, (x,), (fnp.ones_like(x),))[1],
                               fnx.jvp(f, (x,), (fnp.ones_like(x),))[1], rtol=1e-6)
    np.testing.assert_allclose(g(x), f(x), rtol=1e-6)


def test_checkpoint_keeps_python_defaults_and_takes_keywords_as_operands():
    # as JAX: a parameter left out keeps its Python default (here a flag branched on),
    # and keyword arguments are traced operands passed on by keyword
    def f(x, y=None, *, scale=2.0, reverse=False):
        assert reverse is False
        return x * scale if y is None else x * y * scale

    x = fnp.asarray([1.0, 2.0])
    scan = fnx.checkpoint(partial(fnx.lax.scan, lambda c, a: (c + a, c * a)))
    c, ys = fnx.jit(scan)(fnp.float32(0.0), x)
    np.testing.assert_allclose(ys, [0.0, 2.0])
    np.testing.assert_allclose(fnx.checkpoint(f)(x), [2.0, 4.0])
    np.testing.assert_allclose(fnx.jit(fnx.grad(lambda x: fnx.checkpoint(f)(
        x, y=x, scale=fnp.float32(3.0)).sum()))(x), [6.0, 12.0])
    np.testing.assert_allclose(fnx.grad(lambda s: fnx.checkpoint(f)(x, scale=s).sum())(
        fnp.float32(1.0)), 3.0)


def test_checkpoint_saves_only_inputs_as_residuals():
    from fnx.transforms.vjp import linearize_flat
    x = fnp.linspace(0.0, 1.0, 1000)
    _, plain = linearize_flat(lambda x: [_block(_block(x)).sum()], [x])
    _, remat = linearize_flat(
        lambda x: [fnx.checkpoint(_block)(fnx.checkpoint(_block)(x)).sum()], [x])
    saved = lambda ir: sum(c.size for c in ir.consts)  # noqa: E731
    assert saved(plain) == 12 * 1000  # one cos (and more) per layer
    assert saved(remat) == 2 * 1000   # just the two blocks' inputs


# --- custom rules stay in force under vmap -----------------------------------------------------

def _twice_rule_sin():
    @fnx.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2.0 * t  # deliberately not cos(x): shows which rule ran

    return f


def test_custom_jvp_rule_applies_when_vmap_is_inside_grad_and_jvp():
    f = _twice_rule_sin()
    x = fnp.asarray(np.linspace(-1.0, 1.0, 5))
    g = fnx.grad(lambda v: fnp.sum(fnx.vmap(f)(v)))(x)
    np.testing.assert_array_equal(np.asarray(g), np.full(5, 2.0))
    _, t = fnx.jvp(fnx.vmap(f), (x,), (fnp.ones(5, dtype=x.dtype),))
    np.testing.assert_array_equal(np.asarray(t), np.full(5, 2.0))
    jac = fnx.jacrev(fnx.vmap(f))(x)
    np.testing.assert_array_equal(np.asarray(jac), 2.0 * np.eye(5))
    # nested vmap over a matrix, and the primal values are still f's own
    m = fnp.asarray(np.arange(6.0).reshape(2, 3))
    out = fnx.vmap(fnx.vmap(f))(m)
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(6.0).reshape(2, 3)))
    gm = fnx.grad(lambda v: fnp.sum(fnx.vmap(fnx.vmap(f))(v)))(m)
    np.testing.assert_array_equal(np.asarray(gm), np.full((2, 3), 2.0))


def test_custom_vjp_rule_applies_under_vmap_with_a_shared_argument():
    @fnx.custom_vjp
    def scaled(x, w):
        return x * w

    def fwd(x, w):
        return x * w, (x, w)

    def bwd(res, g):
        x, w = res
        return (3.0 * g * w, 5.0 * g * x)  # deliberately scaled: shows which rule ran

    scaled.defvjp(fwd, bwd)
    x = fnp.asarray(np.array([1.0, 2.0, 3.0]))
    w = fnp.asarray(np.array(0.5))

    def loss(x, w):
        return fnp.sum(fnx.vmap(scaled, in_axes=(0, None))(x, w))

    gx, gw = fnx.grad(loss, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(np.asarray(gx), np.full(3, 1.5))
    np.testing.assert_allclose(float(gw), 5.0 * 6.0)  # summed over the shared argument
    gx_j, gw_j = fnx.jit(fnx.grad(loss, argnums=(0, 1)))(x, w)
    np.testing.assert_allclose(np.asarray(gx_j), np.asarray(gx))
    np.testing.assert_allclose(float(gw_j), float(gw))


def test_checkpoint_under_vmap_inside_grad():
    def layer(x):
        return fnp.tanh(x) * x

    x = fnp.asarray(np.linspace(-1.0, 1.0, 4).reshape(2, 2))
    plain = fnx.grad(lambda v: fnp.sum(fnx.vmap(layer)(v)))(x)
    remat = fnx.grad(lambda v: fnp.sum(fnx.vmap(fnx.checkpoint(layer))(v)))(x)
    np.testing.assert_allclose(np.asarray(remat), np.asarray(plain), rtol=1e-12)
    # the forward stays one checkpointed call, and the backward pass recomputes tanh
    names = [e.prim.name for e in fnx.make_ir(fnx.value_and_grad(
        lambda v: fnp.sum(fnx.vmap(fnx.checkpoint(layer))(v))))(x).eqns]
    assert names.count("remat_call") == 1 and names.count("tanh") == 1


@pytest.mark.x64  # the four Hessian orders agree to 1e-12: float64 work
def test_checkpoint_second_derivatives_in_every_mode():
    def f(x):
        return fnp.sum(fnp.sin(x) * fnp.exp(0.5 * x))

    x = fnp.asarray(np.array([0.3, -0.7, 1.1]))
    g = fnx.checkpoint(f)
    want = np.asarray(fnx.hessian(f)(x))
    for hess in (fnx.jacfwd(fnx.jacrev(g)), fnx.jacrev(fnx.jacrev(g)),
                 fnx.jacfwd(fnx.jacfwd(g)), fnx.jacrev(fnx.jacfwd(g))):
        np.testing.assert_allclose(np.asarray(hess(x)), want, rtol=1e-12, atol=1e-12)
    t = fnp.asarray(np.array([1.0, 2.0, -1.0]))
    _, hvp = fnx.jvp(fnx.grad(g), (x,), (t,))
    np.testing.assert_allclose(np.asarray(hvp), want @ np.asarray(t), rtol=1e-12)


def test_custom_vjp_has_no_forward_mode_also_under_vmap():
    from fnx.errors import FnxError

    @fnx.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g * 2.0,))
    x = fnp.ones(3)
    _, f_jvp = fnx.linearize(f, x)
    with pytest.raises(FnxError, match="forward mode"):
        f_jvp(x)
    with pytest.raises(FnxError, match="forward mode"):
        fnx.vmap(f_jvp)(fnp.ones((2, 3)))
