"""custom_jvp / custom_vjp / checkpoint as JAX's "Custom derivative rules" notebook uses
them. Expected numbers are JAX 0.10.2's outputs for the same programs."""
from collections import namedtuple
from functools import partial

import numpy as np
import pytest

import fnx
import fnx.numpy as jnp
from fnx import custom_jvp, custom_vjp, grad, jit, jvp, lax, vjp, vmap
from fnx.custom_derivatives import SymbolicZero
from fnx.errors import CustomRuleError


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), b, rtol=rtol, atol=atol)


# --- outside transformations a decorated function is plain Python ---------------------------

def test_custom_jvp_runs_once_and_branches_on_values_when_called_directly():
    calls = []

    @custom_jvp
    def f(x):
        calls.append("f")
        return jnp.sin(x) if x > 0 else jnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append("f_jvp")
        (x,), (t,) = primals, tangents
        ans = f(x)
        return ans, (2 * t if x > 0 else 3 * t)

    close(f(3.0), np.sin(3.0))
    assert calls == ["f"]
    calls.clear()
    close(grad(f)(1.0), 2.0)
    close(grad(f)(-1.0), 3.0)
    assert calls == ["f_jvp", "f", "f_jvp", "f"]
    calls.clear()
    y, t = jvp(f, (3.0,), (1.0,))
    close(y, 0.14112)
    close(t, 2.0)
    assert calls == ["f_jvp", "f"]


def test_custom_vjp_runs_only_f_when_not_differentiated():
    calls = []

    @custom_vjp
    def f(x):
        calls.append("f")
        return jnp.sin(x)

    def f_fwd(x):
        calls.append("fwd")
        return f(x), jnp.cos(x)

    def f_bwd(cos_x, g):
        calls.append("bwd")
        return (cos_x * g,)

    f.defvjp(f_fwd, f_bwd)
    close(f(3.0), 0.14112)
    assert calls == ["f"]
    calls.clear()
    close(grad(f)(3.0), -0.9899925)
    assert calls == ["fwd", "f", "bwd"]
    calls.clear()
    y, f_vjp = vjp(f, 3.0)
    close(y, 0.14112)
    close(f_vjp(1.0)[0], -0.9899925)
    out = vmap(f)(jnp.arange(3.0))  # vmap alone runs f once, batched
    close(out, np.sin(np.arange(3.0)))
    assert calls == ["fwd", "f", "bwd", "f"]  # vjp: fwd (calling f), bwd; vmap: f once


def test_jvp_of_custom_vjp_is_a_type_error():
    @custom_vjp
    def f(x):
        return jnp.sin(x)

    f.defvjp(lambda x: (f(x), jnp.cos(x)), lambda c, g: (c * g,))
    with pytest.raises(TypeError, match="forward mode"):
        jvp(f, (3.0,), (1.0,))
    with pytest.raises(CustomRuleError):
        fnx.jacfwd(f)(3.0)


# --- the notebook's examples -----------------------------------------------------------------

@custom_jvp
def log1pexp(x):
    return jnp.log(1.0 + jnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return log1pexp(x), (1 - 1 / (1 + jnp.exp(x))) * x_dot


def test_log1pexp_stable_derivative_in_every_composition():
    close(log1pexp(3.0), 3.0485899)
    close(grad(log1pexp)(3.0), 0.95257)
    close(jit(grad(log1pexp))(3.0), 0.95257)
    close(vmap(jit(grad(log1pexp)))(jnp.arange(3.0)), [0.5, 0.7310586, 0.8807971])
    close(grad(log1pexp)(100.0), 1.0)  # nan without the rule
    close(jit(vmap(grad(log1pexp)))(jnp.arange(4.0)), [0.5, 0.7310586, 0.8807971, 0.9525741])


def test_defjvps_one_rule_per_argument_and_none():
    @custom_jvp
    def f1(x):
        return jnp.log(1.0 + jnp.exp(x))

    f1.defjvps(lambda t, ans, x: (1 - 1 / (1 + jnp.exp(x))) * t)
    close(grad(f1)(100.0), 1.0)
    close(grad(grad(f1))(2.0), 0.10499359)

    @custom_jvp
    def f(x, y):
        return x ** 2 * y

    f.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot,
              lambda y_dot, primal_out, x, y: x ** 2 * y_dot)
    close(grad(f)(2.0, 3.0), 12.0)
    close(grad(f, 1)(2.0, 3.0), 4.0)

    @custom_jvp
    def g(x, y):
        return x ** 2 * y

    g.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot, None)
    close(grad(g)(2.0, 3.0), 12.0)
    close(grad(g, 1)(2.0, 3.0), 0.0)
    close(jvp(g, (2.0, 3.0), (1.0, 1.0))[1], 12.0)

    with pytest.raises(TypeError, match="nondiff_argnums"):
        partial(custom_jvp, nondiff_argnums=(0,))(lambda f, x: f(x)).defjvps(None)


def test_enforcing_a_differentiation_convention():
    @custom_jvp
    def f(x):
        return x / (1 + jnp.sqrt(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return f(x), ((jnp.sqrt(x) + 2) / (2 * (jnp.sqrt(x) + 1) ** 2)) * x_dot

    close(grad(f)(0.0), 1.0)


@custom_vjp
def clip_gradient(lo, hi, x):
    return x


clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                     lambda res, g: (None, None, jnp.clip(g, res[0], res[1])))


def test_clip_gradient_with_none_cotangents():
    t = jnp.linspace(0, 10, 11)
    want = [0.75, 0.5403023, -0.4161468, -0.75, -0.6536436, 0.2836622, 0.75, 0.75,
            -0.1455000, -0.75, -0.75]
    f = grad(lambda x: jnp.sin(clip_gradient(-0.75, 0.75, x)))
    close(vmap(f)(t), want)
    close(jit(vmap(f))(t), want)
    close(grad(lambda lo, x: clip_gradient(lo, 1.0, x) * 3)(0.0, 2.0), 0.0)


def _fixed_point_solver():
    @partial(custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        def cond_fun(carry):
            x_prev, x = carry
            return jnp.abs(x_prev - x) > 1e-6

        def body_fun(carry):
            _, x = carry
            return x, f(a, x)

        _, x_star = lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
        return x_star

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, jnp.zeros_like(x_star)

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)

    def newton_sqrt(a):
        return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)
    return newton_sqrt


def test_implicit_differentiation_of_a_fixed_point():
    newton_sqrt = _fixed_point_solver()
    close(newton_sqrt(2.0), 1.4142135)
    close(grad(newton_sqrt)(2.0), 0.35355338)
    close(grad(grad(newton_sqrt))(2.0), -0.08838835, rtol=1e-4)
    close(jit(grad(newton_sqrt))(4.0), 0.25)
    close(vmap(grad(newton_sqrt))(jnp.array([1.0, 4.0, 9.0])), [0.5, 0.25, 0.1666667])
    close(jit(vmap(newton_sqrt))(jnp.array([1.0, 2.0, 3.0, 4.0])),
          [1.0, 1.4142135, 1.7320508, 2.0])


def test_nondiff_argnums_callables():
    @partial(custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        return f(primals[0]), 2.0 * tangents[0]

    close(app(lambda x: x ** 3, 3.0), 27.0)
    close(grad(app, 1)(lambda x: x ** 3, 3.0), 2.0)

    @partial(custom_jvp, nondiff_argnums=(0, 2))
    def app2(f, x, g):
        return f(g(x))

    @app2.defjvp
    def app2_jvp(f, g, primals, tangents):
        return f(g(primals[0])), 3.0 * tangents[0]

    close(app2(lambda x: x ** 3, 3.0, lambda y: 5 * y), 3375.0)
    close(grad(app2, 1)(lambda x: x ** 3, 3.0, lambda y: 5 * y), 3.0)

    @partial(custom_vjp, nondiff_argnums=(0,))
    def app3(f, x):
        return f(x)

    app3.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (5 * g,))
    close(app3(lambda x: x ** 2, 4.0), 16.0)
    close(grad(app3, 1)(lambda x: x ** 2, 4.0), 5.0)


Point = namedtuple("Point", ["x", "y"])


def test_pytree_arguments_and_outputs():
    @custom_jvp
    def f(pt):
        return {"a": pt.x ** 2, "b": (jnp.sin(pt.x), jnp.cos(pt.y))}

    @f.defjvp
    def f_jvp(primals, tangents):
        (pt,), (pt_dot,) = primals, tangents
        return f(pt), {"a": 2 * pt.x * pt_dot.x,
                       "b": (jnp.cos(pt.x) * pt_dot.x, -jnp.sin(pt.y) * pt_dot.y)}

    def fun(pt):
        d = f(pt)
        return d["a"] + d["b"][0]

    g = grad(fun)(Point(1.0, 2.0))
    assert isinstance(g, Point)
    close(g.x, 2.5403023)
    close(g.y, 0.0)

    @custom_vjp
    def h(pt):
        return {"a": pt.x ** 2, "b": (jnp.sin(pt.x), jnp.cos(pt.y))}

    def h_bwd(pt, g):
        a_bar, (b0_bar, b1_bar) = g["a"], g["b"]
        return (Point(2 * pt.x * a_bar + jnp.cos(pt.x) * b0_bar, -jnp.sin(pt.y) * b1_bar),)

    h.defvjp(lambda pt: (h(pt), pt), h_bwd)
    g = grad(lambda pt: h(pt)["a"] + h(pt)["b"][0])(Point(1.0, 2.0))
    close(g.x, 2.5403023)
    close(g.y, 0.0)


def test_keyword_arguments_and_defaults_map_to_positions():
    @custom_jvp
    def kw(x, y=2.0):
        return x * y

    kw.defjvp(lambda p, t: (kw(*p), t[0] * p[1] + t[1] * p[0]))
    close(kw(3.0), 6.0)
    close(kw(3.0, y=4.0), 12.0)
    close(grad(kw)(3.0), 2.0)
    close(grad(lambda x: kw(x, y=5.0))(3.0), 5.0)
    close(grad(kw, 1)(3.0, 4.0), 3.0)


def test_symbolic_zeros():
    seen = []

    @custom_jvp
    def f(x, y):
        return x * y

    @partial(f.defjvp, symbolic_zeros=True)
    def f_jvp(primals, tangents):
        (x, y), (xd, yd) = primals, tangents
        seen.append((type(xd) is SymbolicZero, type(yd) is SymbolicZero))
        out = f(x, y)
        t = jnp.zeros_like(out)
        if type(xd) is not SymbolicZero:
            t = t + xd * y
        if type(yd) is not SymbolicZero:
            t = t + x * yd
        return out, t

    close(grad(f)(2.0, 3.0), 3.0)
    close(grad(f, 1)(2.0, 3.0), 2.0)
    assert seen == [(False, True), (True, False)]

    log = []

    @custom_vjp
    def g(x, y):
        return x * y, x + y

    def g_fwd(x, y):
        log.append(("perturbed", x.perturbed, y.perturbed))
        return g(x.value, y.value), (x.value, y.value)

    def g_bwd(res, cts):
        (x, y), (c0, c1) = res, cts
        log.append(("zero", type(c0) is SymbolicZero, type(c1) is SymbolicZero))
        c0 = jnp.zeros(()) if type(c0) is SymbolicZero else c0
        c1 = jnp.zeros(()) if type(c1) is SymbolicZero else c1
        return c0 * y + c1, c0 * x + c1

    g.defvjp(g_fwd, g_bwd, symbolic_zeros=True)
    close(grad(lambda x: g(x, 3.0)[0])(2.0), 3.0)
    assert log == [("perturbed", True, False), ("zero", False, True)]


def test_bad_rules_raise_type_errors_naming_the_function():
    @custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (x * 2.0, None), lambda r, g: (g * 2.0, g))
    with pytest.raises(TypeError, match="custom_vjp f: bwd returned 2 cotangents"):
        grad(f)(1.0)

    @custom_vjp
    def h(x):
        return x * 2.0

    h.defvjp(lambda x: (x * 2.0, None), lambda r, g: (jnp.ones(3),))
    with pytest.raises(TypeError, match=r"shape \(3,\), but its primal has shape \(\)"):
        grad(h)(1.0)

    @custom_jvp
    def k(x):
        return x * 2.0

    k.defjvp(lambda p, t: (p[0] * 2.0, jnp.ones(2)))
    with pytest.raises(TypeError, match="output tangent 0 has shape"):
        jvp(k, (1.0,), (1.0,))
    k.defjvp(lambda p, t: p[0] * 2.0)
    with pytest.raises(TypeError, match="must return a pair"):
        jvp(k, (1.0,), (1.0,))


def test_custom_functions_closing_over_traced_values():
    w = jnp.array([0.5, -0.3, 0.8])
    x = jnp.ones(3)

    def f(w, x):
        g = custom_jvp(lambda c: jnp.sin(c * w))
        g.defjvps(lambda t, ans, c: jnp.cos(c * w) * w * t)
        return g(x).sum()

    close(jit(f)(w, x), 0.90126145)  # closes over a jit argument: its operand now
    close(jit(grad(f, 1))(w, x), [0.43879128, -0.28660098, 0.55736536])
    with pytest.raises(CustomRuleError, match="closes over a value that is being "
                                              "differentiated"):
        jit(grad(f))(w, x)


# --- checkpoint ---------------------------------------------------------------------------------

W = jnp.array([0.5, -0.3, 0.8])
XS = jnp.linspace(0.0, 1.0, 12).reshape(4, 3)


def _scan_loss(w, remat):
    def body(c, x):
        c = jnp.tanh(c * w + x)
        return c, (c * w).sum()
    c, ys = lax.scan(fnx.checkpoint(body) if remat else body, jnp.zeros(3), XS)
    return ys.sum() + c.sum()


def test_checkpointed_scan_body_differentiates_its_closed_over_weights():
    want = np.asarray(grad(_scan_loss)(W, False))
    close(want, [2.1057658, 1.6311798, 2.9765031])  # JAX's numbers
    close(grad(_scan_loss)(W, True), want)
    close(jit(grad(_scan_loss), static_argnums=1)(W, True), want)
    ws = jnp.stack([W, 2 * W])
    close(vmap(grad(_scan_loss), (0, None))(ws, True),
          vmap(grad(_scan_loss), (0, None))(ws, False))

    def fori(w, remat):
        b = lambda i, c: jnp.tanh(c * w + 1.0)  # noqa: E731
        return lax.fori_loop(0, 3, fnx.checkpoint(b) if remat else b, jnp.ones(3)).sum()
    close(grad(fori)(W, True), grad(fori)(W, False))


def _block(x):
    for _ in range(3):
        x = jnp.sin(x) * 1.5
    return x


@pytest.mark.parametrize("policy", [None, "everything_saveable", "nothing_saveable",
                                    "dots_saveable", "dots_with_no_batch_dims_saveable"])
def test_checkpoint_policies_change_nothing_but_memory(policy):
    pol = None if policy is None else getattr(fnx.checkpoint_policies, policy)
    f = fnx.checkpoint(_block, policy=pol)
    close(grad(f)(0.3), 2.33036)  # JAX's value, every policy
    close(jit(grad(f))(0.3), 2.33036)
    g = fnx.remat(_block, prevent_cse=False, policy=pol)
    close(grad(g)(0.3), 2.33036)


def test_checkpoint_as_decorator_with_static_argnums_and_names():
    @partial(fnx.checkpoint, static_argnums=(1,))
    def power(x, n):
        for _ in range(n - 1):  # Python control flow on a static argument
            x = x * x if n > 2 else x * 2
        return x
    close(grad(lambda x: power(x, 2))(2.0), 2.0)
    pol = fnx.checkpoint_policies.save_only_these_names("a")
    f = fnx.ad_checkpoint.checkpoint(
        lambda x: fnx.ad_checkpoint.checkpoint_name(jnp.sin(x), "a") * 2, policy=pol)
    close(grad(f)(1.0), 2 * np.cos(1.0))
    with pytest.raises(TypeError, match="policy"):
        fnx.checkpoint(_block, policy="nothing")


def test_checkpoint_called_outside_transformations_is_plain_python():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2 if x > 0 else -x

    close(fnx.checkpoint(f)(3.0), 6.0)
    assert calls == [1]


def test_jit_of_a_custom_rule_keeps_the_rule():
    # @jit stacked on @custom_jvp/@custom_vjp (JAX: grad(jit(f))(1.) == 100.); the jit
    # wrapper once copied the custom object's fields and differentiated sin instead
    @fnx.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), 100.0 * t[0]))

    @fnx.custom_vjp
    def g(x):
        return jnp.sin(x)
    g.defvjp(lambda x: (g(x), None), lambda r, ct: (7.0 * ct,))

    h = fnx.custom_jvp(fnx.jit(lambda x: jnp.cos(x)))
    h.defjvp(lambda p, t: (h(p[0]), 5.0 * t[0]))
    assert float(fnx.grad(fnx.jit(f))(1.0)) == 100.0
    assert float(fnx.grad(fnx.jit(g))(1.0)) == 7.0
    assert float(fnx.grad(fnx.jit(h))(1.0)) == 5.0


def test_jit_of_a_custom_jvp_function_runs_its_python_once():
    # JAX's notebook: a print inside a custom_jvp function under jit runs once (at trace
    # time); later calls run the compiled code, not the Python function
    calls = []

    @fnx.custom_jvp
    def f(x):
        calls.append(1)
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), 100.0 * t[0]))
    g = fnx.jit(f)
    np.testing.assert_allclose(float(g(1.0)), np.sin(1.0), rtol=1e-6)
    g(2.0)
    assert len(calls) == 1
    assert float(fnx.jit(fnx.grad(f))(1.0)) == 100.0
