"""``jax_debug_nans`` / ``jax_debug_infs``: a FloatingPointError naming the primitive
that made the NaN (or inf) and the user's line, eagerly, under jit (also for a NaN
only in an intermediate, which JAX's output check misses), under grad and vmap; and
nothing changes when the flags are off."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core import trace as trace_mod
from fnx.core.trace import EVAL


def f(x):
    w = 3 * fnp.square(x)
    return fnp.log(-w)            # the NaN is made here


_LOG_LINE = f"{__file__}:{f.__code__.co_firstlineno + 2}"


def test_eager_names_primitive_and_line():
    with fnx.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in "
                           r"log, at .*test_debug_nans.py:\d+ \(f\)") as e:
            f(fnp.asarray(5.0))
    assert _LOG_LINE in str(e.value)


def test_jit_reruns_equation_by_equation():
    g = fnx.jit(f)
    with fnx.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"nan\) encountered in log \(inside "
                           r"jit\(f\)\)") as e:
            g(fnp.asarray(5.0))
    assert _LOG_LINE in str(e.value)
    # Off again: the same jitted function returns the NaN, through its fast path.
    assert np.isnan(g(fnp.asarray(5.0)))
    assert np.isnan(g(fnp.asarray(5.0)))


def test_jit_catches_a_nan_only_in_an_intermediate():
    # JAX checks only a jitted function's outputs; fnx checks every value it computes.
    def g(x):
        y = fnp.sqrt(x - 10.0)
        return fnp.where(fnp.isnan(y), 0.0, y)
    with fnx.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"encountered in sqrt \(inside jit\(g\)\)"):
            fnx.jit(g)(fnp.ones(4))
    np.testing.assert_array_equal(fnx.jit(g)(fnp.ones(4)), np.zeros(4))


def test_nested_jit_names_the_inner_primitive():
    inner = fnx.jit(lambda y: fnp.arcsin(y * 2))
    outer = fnx.jit(lambda x: inner(x) + 1)
    with fnx.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"encountered in asin"):
            outer(fnp.ones(3))


def test_under_grad_forward_and_backward():
    with fnx.debug_nans(True):
        with pytest.raises(FloatingPointError, match="encountered in log"):
            fnx.grad(f)(fnp.asarray(5.0))
        # sqrt'(0) is inf; times the zero cotangent: a NaN made in the backward pass
        with pytest.raises(FloatingPointError, match="nan"):
            fnx.grad(lambda x: fnp.sqrt(x) * 0.0)(fnp.asarray(0.0))
        with pytest.raises(FloatingPointError, match="nan"):
            fnx.jit(fnx.grad(lambda x: fnp.sqrt(x) * 0.0))(fnp.asarray(0.0))
        # finite gradients are unchanged
        x = fnp.asarray([1.0, 2.0, 4.0])
        g = fnx.grad(lambda x: fnp.log(x).sum())(x)
    np.testing.assert_allclose(g, [1.0, 0.5, 0.25])
    np.testing.assert_array_equal(fnx.grad(lambda x: fnp.log(x).sum())(x), g)


def test_under_vmap():
    with fnx.debug_nans(True):
        with pytest.raises(FloatingPointError, match="encountered in log"):
            fnx.vmap(lambda x: fnp.log(-x))(fnp.ones(3))


def test_debug_infs():
    with fnx.debug_infs(True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
            fnx.jit(lambda x: 1 / x)(fnp.asarray(0.0))
        with pytest.raises(FloatingPointError, match=r"\(inf\) encountered in div"):
            (lambda x: 1 / x)(fnp.asarray(0.0))
        assert np.isnan(fnp.log(-fnp.ones(2))).all()   # a NaN is not an inf
    with fnx.debug_nans(True):
        assert np.isinf(fnx.jit(lambda x: 1 / x)(fnp.asarray(0.0)))


def test_config_update_and_ints_untouched():
    fnx.config.update("jax_debug_nans", True)
    try:
        np.testing.assert_array_equal(fnp.arange(3) // 1, [0, 1, 2])
        np.testing.assert_allclose(fnx.jit(fnp.log)(fnp.ones(2) * 2), np.log([2.0, 2.0]))
        with pytest.raises(FloatingPointError):
            fnp.ones(2) * fnp.nan     # a NaN input propagated by mul: mul made it (as JAX)
    finally:
        fnx.config.update("jax_debug_nans", False)


def test_donated_argument_still_invalidated():
    g = fnx.jit(lambda x: x + 1, donate_argnums=0)
    x = fnp.ones(3)
    with fnx.debug_nans(True):
        np.testing.assert_array_equal(g(x), [2, 2, 2])
    assert x.is_deleted()


def test_off_costs_nothing():
    # No wrapper on the eager dispatch and the libraries' fast paths are their own.
    assert "process_primitive" not in EVAL.__dict__
    from fnx.backends import numpy_eager  # fnx.numpy's eager shortcuts
    assert numpy_eager.EVAL is EVAL
    with fnx.debug_nans(True):
        assert "process_primitive" in EVAL.__dict__
        assert numpy_eager.EVAL is not EVAL
    assert "process_primitive" not in EVAL.__dict__ and numpy_eager.EVAL is EVAL
    assert not trace_mod._SAVED_CACHE_VJP
    # the jit code is the same with and without the flag
    g = fnx.jit(f)
    src = g.lower(fnp.asarray(1.0)).source
    with fnx.debug_nans(True):
        assert g(fnp.asarray(0.0)) == -np.inf   # log(-0): an inf, not checked here
    assert g.lower(fnp.asarray(1.0)).source == src


def test_loops_and_branches_are_stepped_into():
    x = fnp.asarray([1.0, -1.0, 0.2])
    cases = [
        (lambda x: lax.fori_loop(0, 3, lambda i, c: fnp.sqrt(c - 2.0), x),
         r"sqrt \(inside step 0 of scan"),
        (lambda x: lax.while_loop(lambda c: c[0] < 3,
                                  lambda c: (c[0] + 1, fnp.arccos(c[1] * 2)), (0, x))[1],
         r"acos \(inside iteration 0 of while"),
        (lambda x: lax.cond(x[0] > 0, lambda x: fnp.log(-x), lambda x: x, x),
         r"log \(inside branch 1 of cond"),
        (lambda x: lax.scan(lambda c, xt: (c * xt, fnp.log(c * xt)), 1.0, x)[1],
         r"log \(inside step 1 of scan"),
    ]
    with fnx.debug_nans(True):
        for f, msg in cases:
            with pytest.raises(FloatingPointError, match=msg):
                fnx.jit(f)(x)
        with pytest.raises(FloatingPointError, match=r"acos \(inside iteration 0 of while\)"):
            cases[1][0](x)


def test_the_flag_from_the_environment_applies_at_import():
    import os
    import subprocess
    import sys
    code = ("import fnx, fnx.numpy as fnp\n"
            "try:\n    fnp.log(fnp.float32(-1.0))\nexcept FloatingPointError:\n    print('raised')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "JAX_DEBUG_NANS": "1"})
    assert out.returncode == 0, out.stderr   # importing fnx with the flag set used to fail
    assert out.stdout.strip() == "raised"
