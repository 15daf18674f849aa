"""Custom derivative rules and grad's output checks: a rule or a function that returns
the wrong thing raises a TypeError naming the function, the argument and the types,
eagerly and under jit, vmap and grad, instead of giving a wrong gradient."""
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import CustomRuleError, GradOutputError


def _vjp_fn(bwd, fwd=None):
    @fnx.custom_vjp
    def mul(x, y):
        return x * y

    mul.defvjp(fwd or (lambda x, y: (x * y, (x, y))), bwd)
    return mul


WRAPS = {
    "eager": lambda g: g,
    "jit": fnx.jit,
    "vmap": lambda g: (lambda *a: fnx.vmap(g)(*[fnp.stack([x, x]) for x in a])),
}

BAD_BWD = [
    ("too few", lambda r, g: (g * r[1],), r"bwd returned 1 cotangents.* 2 differentiable"),
    ("too many", lambda r, g: (g * r[1], g * r[0], g), r"bwd returned 3 cotangents"),
    ("not a tuple", lambda r, g: g * r[1], r"bwd must return a tuple"),
    ("wrong shape", lambda r, g: (g * r[1], fnp.ones(3)),
     r"cotangent of input 1 has shape \(3,\), but its primal has shape \(\)"),
    ("integer dtype", lambda r, g: (g * r[1], (g * r[0]).astype("int32")),
     r"cotangent of input 1 has dtype int32, but its primal has dtype float32.*astype"),
    ("narrower float", lambda r, g: (g * r[1], (g * r[0]).astype("float16")),
     r"cotangent of input 1 has dtype float16, but its primal has dtype float32"),
]


@pytest.mark.parametrize("wrap", list(WRAPS))
@pytest.mark.parametrize("what,bwd,msg", BAD_BWD, ids=[c[0] for c in BAD_BWD])
def test_custom_vjp_bwd_outputs_are_checked(what, bwd, msg, wrap):
    mul = _vjp_fn(bwd)
    g = WRAPS[wrap](fnx.grad(lambda x, y: mul(x, y), argnums=(0, 1)))
    with pytest.raises(TypeError, match=r"custom_vjp mul: " + msg) as e:
        g(fnp.float32(2.0), fnp.float32(3.0))
    assert isinstance(e.value, CustomRuleError)


def test_custom_vjp_bwd_structure_names_the_argument():
    @fnx.custom_vjp
    def f(d):
        return d["a"] * d["b"]

    f.defvjp(lambda d: (f(d), d), lambda r, g: ({"a": g * r["b"]},))
    with pytest.raises(TypeError, match=r"custom_vjp f: bwd's cotangent for argument 0 is "
                                        r"structured as .*'a'.*but the argument as .*'b'"):
        fnx.grad(f)({"a": 2.0, "b": 3.0})


def test_custom_vjp_accepts_python_numbers_and_none():
    # weakly typed Python numbers and None (a zero) are fine, as in JAX
    mul = _vjp_fn(lambda r, g: (g * r[1], 0.0))
    assert fnx.grad(mul, argnums=(0, 1))(2.0, 3.0) == (3.0, 0.0)
    mul = _vjp_fn(lambda r, g: (None, g * r[0]))
    assert fnx.grad(mul, argnums=(0, 1))(2.0, 3.0) == (0.0, 2.0)


def test_custom_vjp_fwd_primal_output_is_checked_under_jit():
    f = fnx.custom_vjp(lambda x: x * 2)
    f.__name__ = "double"
    f.defvjp(lambda x: ((x * 2).astype("float16"), None), lambda r, g: (g,))
    with pytest.raises(TypeError, match=r"custom_vjp .*fwd rule's primal output 0 is f16\[\], "
                                        r"but the function returns f32\[\]"):
        fnx.jit(fnx.grad(f))(1.0)


@fnx.custom_jvp
def _sin(x):
    return fnp.sin(x)


BAD_JVP = [
    ("tangent shape", lambda p, t: (fnp.sin(p[0]), fnp.ones(3)),
     r"output tangent 0 has shape \(3,\), but its primal has shape \(2,\)"),
    ("tangent dtype", lambda p, t: (fnp.sin(p[0]), t[0].astype("int32")),
     r"output tangent 0 has dtype int32, but its primal has dtype float32"),
    ("tangent structure", lambda p, t: (fnp.sin(p[0]), (t[0], t[0])),
     r"tangent output is structured as .*but its primal output as"),
    ("not a pair", lambda p, t: fnp.sin(p[0]), r"must return a pair"),
]


@pytest.mark.parametrize("wrap", list(WRAPS))
@pytest.mark.parametrize("what,rule,msg", BAD_JVP, ids=[c[0] for c in BAD_JVP])
def test_custom_jvp_rule_outputs_are_checked(what, rule, msg, wrap):
    @fnx.custom_jvp
    def f(x):
        return fnp.sin(x)

    f.defjvp(rule)
    g = WRAPS[wrap](lambda x: fnx.jvp(f, (x,), (fnp.ones_like(x),)))
    with pytest.raises(TypeError, match=r"custom_jvp f: .*" + msg):
        g(fnp.ones(2))


def test_custom_jvp_primal_output_is_checked_where_the_function_was_traced():
    @fnx.custom_jvp
    def f(x):
        return fnp.sin(x)

    f.defjvp(lambda p, t: (fnp.sin(p[0])[None], t[0][None]))
    with pytest.raises(TypeError, match=r"custom_jvp f: the jvp rule's primal output 0 is "
                                        r"f32\[1\], but the function returns f32\[\]"):
        fnx.jit(lambda x: fnx.jvp(f, (x,), (x,)))(1.0)


@pytest.mark.parametrize("out,kind", [
    (lambda x: (x * 2.0, x), "tuple of 2 values"),
    (lambda x: (x * 2.0, {"a": x}), "tuple of 2 values"),
    (lambda x: [x * 2.0], "list of 1 values"),
    (lambda x: {"loss": x * 2.0}, "dict of 1 values"),
    (lambda x: None, "NoneType"),
])
@pytest.mark.parametrize("api", ["grad", "value_and_grad", "jit(grad)"])
def test_grad_of_several_outputs_suggests_has_aux(out, kind, api):
    g = {"grad": fnx.grad(out), "value_and_grad": fnx.value_and_grad(out),
         "jit(grad)": fnx.jit(fnx.grad(out))}[api]
    with pytest.raises(GradOutputError, match=rf"grad: the function returned a {kind}.*"
                                              r"pass has_aux=True"):
        g(1.0)


def test_has_aux_without_a_pair_says_so():
    with pytest.raises(TypeError, match=r"has_aux=True the function must return a pair "
                                        r"\(output, aux\), got a single array"):
        fnx.value_and_grad(lambda x: x * 2.0, has_aux=True)(1.0)
    with pytest.raises(TypeError, match=r"must return a pair \(output, aux\), got tuple of "
                                        r"length 3"):
        fnx.grad(lambda x: (x * 2.0, 1, 2), has_aux=True)(1.0)


def test_jit_static_argnums_out_of_range():
    with pytest.raises(ValueError, match=r"static_argnums=\(3,\).*only accepts 1 positional"):
        fnx.jit(lambda x: x, static_argnums=3)(1.0)
