"""JAX's ahead-of-time stages (``jit(f).trace/lower/compile``), vjp functions as pytrees
and ``ad_checkpoint.print_saved_residuals``. Expected values are JAX 0.10.2's, as
literals."""
import numpy as np
import pytest

import fnx
import fnx.numpy as jnp

# --- jit(f).trace: the Traced stage (JAX's aot.md) -------------------------------------------


def f(x, y):
    return 2 * x + y


def test_trace_jaxpr_lower_compile():
    traced = fnx.jit(f).trace(3, 4)
    assert str(traced.jaxpr) == ("{ lambda ; a:i32[] b:i32[]. let\n"
                                 "    c:i32[] = mul 2:i32[] a\n"
                                 "    d:i32[] = add c b\n"
                                 "  in (d,) }")
    assert traced.fun_name == "f"
    assert str(traced.jaxpr) == str(fnx.make_jaxpr(f)(3, 4))
    assert traced.jaxpr.eqns[0].primitive.name == "mul"
    compiled = traced.lower().compile()
    assert int(compiled(3, 4)) == 10


def test_trace_from_placeholders():
    i32_scalar = fnx.ShapeDtypeStruct((), jnp.dtype("int32"))
    compiled = fnx.jit(f).trace(i32_scalar, i32_scalar).lower().compile()
    assert int(compiled(3, 4)) == 10
    # compiled for int32 scalars: other types are a TypeError (as JAX)
    with pytest.raises(TypeError, match=r"i32\[3\].*compiled for i32\[\]"):
        compiled(jnp.arange(3), jnp.arange(3))
    with pytest.raises(TypeError, match="f32"):
        compiled(jnp.float32(72.), jnp.float32(72.))
    # lower accepts placeholders too
    assert int(fnx.jit(f).lower(i32_scalar, i32_scalar).compile()(1, 2)) == 4


def test_trace_placeholders_matrix():
    def h(w, x):
        return jnp.tanh(x @ w).sum()

    t = fnx.jit(h).trace(fnx.ShapeDtypeStruct((3, 2), jnp.float32),
                         fnx.ShapeDtypeStruct((4, 3), jnp.float32))
    assert [e.primitive.name for e in t.jaxpr.eqns] == ["dot_general", "tanh", "reduce_sum"]
    assert t.out_info.shape == () and t.out_info.dtype == np.float32
    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    np.testing.assert_allclose(t.lower().compile()(w, x), 8 * np.tanh(3.0), rtol=1e-6)


def test_trace_static_args():
    lowered_with_x = fnx.jit(f, static_argnums=0).trace(7, 8).lower()
    assert int(lowered_with_x.compile()(5)) == 19       # JAX: 19
    i32_scalar = fnx.ShapeDtypeStruct((), jnp.dtype("int32"))
    assert int(fnx.jit(f, static_argnums=0).trace(10, i32_scalar).lower().compile()(5)) == 25


def test_args_info_out_info():
    def f2(x, y):
        return {"a": 2 * x + y, "b": (x,)}

    t = fnx.jit(f2, static_argnums=0, donate_argnums=1).trace(7, jnp.ones(2))
    # JAX: ((ArgInfo(_aval=ShapedArray(float32[2]), donated=True),), {})
    (info,), kw = t.args_info
    assert kw == {}
    assert info.shape == (2,) and info.dtype == np.float32 and info.donated
    assert repr(info) == "ArgInfo(_aval=ShapedArray(float32[2]), donated=True)"
    out = t.out_info
    assert (out["a"].shape, out["a"].dtype, out["a"].weak_type) == ((2,), np.float32, False)
    assert (out["b"][0].shape, out["b"][0].dtype, out["b"][0].weak_type) == ((), np.int32, True)
    assert str(t.out_tree) == str(fnx.tree_util.tree_structure({"a": 0, "b": (0,)}))
    assert t.donate_argnums == (1,)
    c = t.lower().compile()
    assert c.args_info == t.args_info
    t2 = fnx.jit(lambda x, *, k: x * k).trace(jnp.ones(2), k=3.0)
    (x_info,), kw = t2.args_info
    assert x_info.shape == (2,) and not x_info.donated
    assert kw["k"].shape == () and kw["k"]._aval.weak_type


def test_trace_shares_the_jit_cache():
    def g(x):
        return x * 2

    jg = fnx.jit(g)
    jg.trace(fnx.ShapeDtypeStruct((3,), jnp.float32))
    n = jg.trace_count
    jg(jnp.ones(3))
    assert jg.trace_count == n


def test_compiled_rejects_transformations_and_placeholders():
    def g(x):
        assert x.shape == (3, 2)
        return x @ jnp.ones(2)

    z = jnp.arange(6.).reshape(3, 2)
    zs = jnp.arange(24.).reshape(4, 3, 2)
    g_aot = fnx.jit(g).trace(z).lower().compile()
    np.testing.assert_allclose(fnx.vmap(fnx.jit(g))(zs), zs.sum(-1))
    with pytest.raises(TypeError, match="apply them to jit"):
        fnx.vmap(g_aot)(zs)
    with pytest.raises(TypeError, match="placeholders carry no data"):
        fnx.jit(g)(fnx.ShapeDtypeStruct((3, 2), jnp.float32))


def test_cost_analysis():
    # JAX (XLA CPU): flops 2.0 / bytes accessed 12.0 for f(3, 4); flops 55.0 and
    # transcendentals 8.0 for tanh(a @ b).sum() with a: f32[4,3], b: f32[3,2]
    c = fnx.jit(f).trace(3, 4).lower().compile().cost_analysis()
    assert c["flops"] == 2.0 and c["bytes accessed"] == 12.0
    c = fnx.jit(lambda a, b: jnp.tanh(a @ b).sum()).trace(
        jnp.ones((4, 3)), jnp.ones((3, 2))).lower().compile().cost_analysis()
    assert c["flops"] == 55.0 and c["transcendentals"] == 8.0
