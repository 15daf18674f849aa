"""fnx.debug.print / fnx.debug.callback / fnx.pure_callback: when they run (eagerly, at every
call of a jitted function, per batch element under vmap, in the forward pass under grad) and
what they print. Expected texts are JAX 0.10's output for the same programs."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core.ir import dce


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def scaled(x):
    fnx.debug.print("x={x} sum={}", x.sum(), x=x)
    return x * 2


def test_eager_print(capsys):
    np.testing.assert_array_equal(scaled(fnp.arange(3.0)), [0.0, 2.0, 4.0])
    assert lines(capsys) == ["x=[0. 1. 2.] sum=3.0"]


def test_jit_prints_at_every_call_not_at_trace_time(capsys):
    g = fnx.jit(scaled)
    for _ in range(3):
        g(fnp.arange(3.0))
    assert lines(capsys) == ["x=[0. 1. 2.] sum=3.0"] * 3
    g(fnp.arange(3.0) + 1)  # same signature: no retrace, new values
    assert lines(capsys) == ["x=[1. 2. 3.] sum=6.0"]
    assert g.trace_count == 1
    assert "debug_callback" in str(fnx.make_ir(scaled)(fnp.arange(3.0)))


def test_vmap_prints_once_per_batch_element(capsys):
    fnx.vmap(scaled)(fnp.arange(6.0).reshape(2, 3))
    assert lines(capsys) == ["x=[0. 1. 2.] sum=3.0", "x=[3. 4. 5.] sum=12.0"]
    fnx.vmap(lambda x: fnx.debug.print("s {}", x))(fnp.arange(3))
    assert lines(capsys) == ["s 0", "s 1", "s 2"]
    fnx.jit(fnx.vmap(scaled))(fnp.arange(6.0).reshape(2, 3))
    assert lines(capsys) == ["x=[0. 1. 2.] sum=3.0", "x=[3. 4. 5.] sum=12.0"]
    # an unbatched operand is the same for every element
    fnx.vmap(lambda x, y: fnx.debug.print("{} {}", x, y), in_axes=(0, None))(
        fnp.arange(2), fnp.float32(7.0))
    assert lines(capsys) == ["0 7.0", "1 7.0"]


def test_grad_prints_the_forward_pass_once(capsys):
    loss = lambda x: scaled(x).sum()  # noqa: E731
    g = fnx.grad(loss)(fnp.arange(3.0))
    np.testing.assert_array_equal(g, [2.0, 2.0, 2.0])
    assert lines(capsys) == ["x=[0. 1. 2.] sum=3.0"]
    jg = fnx.jit(fnx.grad(loss))
    jg(fnp.arange(3.0))
    jg(fnp.arange(3.0))
    assert lines(capsys) == ["x=[0. 1. 2.] sum=3.0"] * 2
    fnx.jvp(scaled, (fnp.arange(2.0),), (fnp.ones(2),))
    assert lines(capsys) == ["x=[0. 1.] sum=1.0"]
    fnx.value_and_grad(loss)(fnp.arange(2.0))  # eager grad twice more: no cached drop
    fnx.value_and_grad(loss)(fnp.arange(2.0))
    assert lines(capsys) == ["x=[0. 1.] sum=1.0"] * 2


def test_print_in_loops_and_branches_runs_per_step(capsys):
    lax.scan(lambda c, x: (fnx.debug.print("step {}", x) or c, None), 0.0, fnp.arange(3))
    assert lines(capsys) == ["step 0", "step 1", "step 2"]
    fnx.jit(lambda n: lax.fori_loop(0, 3, lambda i, c: (fnx.debug.print("i {}", i), c + 1)[1],
                                    n))(0)
    assert lines(capsys) == ["i 0", "i 1", "i 2"]
    # loop-invariant prints are not hoisted out of the loop
    fnx.jit(lambda c: lax.scan(lambda c, x: (fnx.debug.print("tick"), (c, None))[1], c,
                               None, length=2))(1.0)
    assert lines(capsys) == ["tick", "tick"]
    branch = lambda tag: lambda x: (fnx.debug.print(tag + " {}", x), x)[1]  # noqa: E731
    lax.cond(True, branch("T"), branch("F"), 1.0)
    assert lines(capsys) == ["T 1.0"]
    # a batched predicate runs both branches on every element (JAX prints the same)
    fnx.vmap(lambda p: lax.cond(p > 0, branch("T"), branch("F"), p))(fnp.array([1.0, -1.0]))
    assert lines(capsys) == ["F 1.0", "F -1.0", "T 1.0", "T -1.0"]
    fnx.jit(lambda x: lax.while_loop(lambda c: c < 2, lambda c: (fnx.debug.print("w {}", c),
                                                                 c + 1)[1], x))(0)
    assert lines(capsys) == ["w 0", "w 1"]


def test_formats_and_value_types(capsys):
    fnx.debug.print("{} {} {}", 1, fnp.int32(3), fnp.float32(2.5))
    fnx.jit(lambda a: fnx.debug.print("{} {}", a, fnp.array([True, False])))(
        fnp.array(2, fnp.int8))
    fnx.debug.print("{x:.2f}", x=fnp.float32(1.23456))
    fnx.jit(lambda x: (fnx.debug.print("hello"), x)[1])(1.0)
    fnx.debug.print("{} and {}", "text", None)   # non-array arguments pass through
    fnx.debug.print(ordered=True)("two-call {}", 5)
    assert lines(capsys) == ["1 3 2.5", "2 [ True False]", "1.23", "hello", "text and None",
                             "two-call 5"]
    with pytest.raises(ValueError, match="placeholder"):
        fnx.debug.print("{y}", x=1)
    with pytest.raises(TypeError, match="format string"):
        fnx.debug.print(fnp.ones(2))


def test_callback_receives_arrays_and_keeps_them_safely(capsys):
    seen = []
    f = fnx.jit(lambda x: (fnx.debug.callback(lambda v, w: seen.append((v, w)), x, w=2),
                           x * 3)[1])
    f(fnp.arange(3.0))
    f(fnp.ones(3))
    assert [type(v).__name__ for v, _ in seen] == ["Array", "Array"]
    np.testing.assert_array_equal(seen[0][0], [0.0, 1.0, 2.0])   # not overwritten later
    np.testing.assert_array_equal(seen[1][0], [1.0, 1.0, 1.0])
    assert seen[0][1] == 2 and seen[0][0].dtype == np.float32
    fnx.vmap(lambda x: fnx.debug.callback(lambda v: print("cb", v.shape, v), x))(
        fnp.arange(3.0))
    assert lines(capsys) == ["cb () 0.0", "cb () 1.0", "cb () 2.0"]
    fnx.debug.callback(ordered=True)(lambda: print("called"))
    assert lines(capsys) == ["called"]
    with pytest.raises(TypeError, match="callable"):
        fnx.debug.callback(3)


def test_effects_survive_the_ir_passes():
    ir = fnx.make_ir(lambda x: (fnx.debug.print("a {}", x), fnx.debug.print("a {}", x), x)[2])(
        fnp.ones(2))
    assert str(ir).count("debug_callback") == 2   # not merged by CSE
    assert len(dce(ir.replace(outvars=[])).eqns) == 2   # nor dropped by DCE


def test_pure_callback(capsys):
    def h(x):
        return fnx.pure_callback(np.sin, fnx.ShapeDtypeStruct(x.shape, x.dtype), x)

    np.testing.assert_allclose(fnx.jit(h)(fnp.arange(3.0)), np.sin(np.arange(3.0)), rtol=1e-6)
    assert fnx.jit(h)(fnp.arange(3.0)).dtype == np.float32
    # float64 results are cast to the declared float32, as JAX does
    f64 = lambda x: fnx.pure_callback(lambda v: np.asarray(v, np.float64) * 2,  # noqa: E731
                                      fnx.ShapeDtypeStruct((3,), np.float32), x)
    assert fnx.jit(f64)(fnp.ones(3)).dtype == np.float32
    with pytest.raises(ValueError, match="custom_jvp"):
        fnx.grad(lambda x: h(x).sum())(fnp.arange(3.0))
    # unused: dropped under jit with the computation that needs it (pure)
    fnx.jit(lambda x: (fnx.pure_callback(lambda v: print("ran") or v,
                                         fnx.ShapeDtypeStruct((3,), np.float32), x), x)[1])(
        fnp.arange(3.0))
    assert lines(capsys) == []
    probe = lambda method: fnx.vmap(lambda x: fnx.pure_callback(  # noqa: E731
        lambda v: print("shape", v.shape) or v, fnx.ShapeDtypeStruct((), np.float32), x,
        vmap_method=method))(fnp.arange(3.0))
    np.testing.assert_array_equal(probe("sequential"), [0.0, 1.0, 2.0])
    assert lines(capsys) == ["shape ()"] * 3
    for method in ("expand_dims", "broadcast_all"):
        np.testing.assert_array_equal(probe(method), [0.0, 1.0, 2.0])
        assert lines(capsys) == ["shape (3,)"]
    with pytest.raises(NotImplementedError, match="vmap_method"):
        probe(None)
    with pytest.raises(fnx.errors.ShapeError, match="shape"):
        fnx.pure_callback(lambda v: np.ones(2), fnx.ShapeDtypeStruct((3,), np.float32),
                          fnp.ones(3))
    # pytrees in and out
    out = fnx.jit(lambda d: fnx.pure_callback(
        lambda d: {"s": d["a"] + d["b"]}, {"s": fnx.ShapeDtypeStruct((2,), np.float32)}, d))(
        {"a": fnp.ones(2), "b": fnp.ones(2)})
    np.testing.assert_array_equal(out["s"], [2.0, 2.0])


def test_io_callback_runs_even_when_unused(capsys):
    from fnx.experimental import io_callback
    f = fnx.jit(lambda x: (io_callback(lambda v: print("io", v) or v,
                                       fnx.ShapeDtypeStruct((), np.float32), x), x)[1])
    f(1.0)
    f(2.0)
    assert lines(capsys) == ["io 1.0", "io 2.0"]
    with pytest.raises(ValueError, match="derivative"):
        fnx.grad(lambda x: io_callback(lambda v: v, fnx.ShapeDtypeStruct((), np.float32), x))(
            1.0)


def test_log_goes_to_the_logger_with_the_users_line(caplog):
    import logging
    with caplog.at_level(logging.INFO, logger="fnx.debug"):
        fnx.jit(lambda x: (fnx.debug.log("v={}", x), x)[1])(2.0)
        fnx.jit(lambda x: (fnx.debug.log("v={}", x), x)[1])(3.0)
    recs = [r for r in caplog.records if r.name == "fnx.debug"]
    assert [r.getMessage() for r in recs] == ["v=2.0", "v=3.0"]
    assert recs[0].pathname.endswith("test_debug_callback.py") and recs[0].levelno == logging.INFO
