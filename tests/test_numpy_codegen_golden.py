"""The NumPy backend generates the same code as recorded in
``tests/data/numpy_codegen_golden.txt`` for the golden corpus of
``tests/numpy_codegen_corpus.py`` (small ``fnx.lax`` IRs, each aimed at one job of the
lowering), and each case still exercises the job it was written for.

The generated code depends only on shapes, dtypes and the backend's thresholds, so the file
holds on any machine; NumPy 1 wraps the body in ``np.errstate`` instead of setting NumPy 2's
error-state variable, so there the comparison is skipped. After an intended change of the
generated code, rewrite the file (``python tests/numpy_codegen_corpus.py --write``) and
review its diff; a restructuring of the backend must leave it as it is.
"""
import difflib

import numpy as np
import pytest

import numpy_codegen_corpus as corpus

# Each case and what its code must contain: the job it exercises.
JOBS = {
    "transpose_fused_into_dot": ["_dot_general1(v0, v1)\n        del v0, v1\n        return (v2,)"],
    "transpose_of_dot_used_twice": ["v2.transpose((1, 0))"],
    "tie_weight": ["_tie_weight1(v0, v1, out=_mo[0])"],
    "scale_by_tie_weight": ["_scale_by_tie_weight1(v0, v1, v2, out=_mo[0])"],
    "tie_weight_scalar_b": ["_tie_weight2(v0, _lit1, out=_mo[0])"],
    "tie_weight_broadcast_b": ["_tie_weight5(v0, _k4, out=_mo[0])"],
    "logistic_large": ["_logistic1(v0, out=_mo[0])", "fnx.backends.*._logistic"],
    "logistic_small": ["_logistic1(v0)", "fnx.lax."],
    "select_int_3": ["_select_int1(v0, v1, v2, v3, out=_mo[0])"],
    "fused_reduce_sum_exp": ["_fused_reduce_sum1(v0)", "ufunc=ufunc exp"],
    "fused_reduce_max_mul": ["_fused_reduce_max1(v0, v1)", "reducer=ufunc maximum"],
    "reduce_axis0_not_fused": ["_exp1(v0, out=_ms[0])", "axis=(0,)"],
    "blocked_chain": ["_fused_elementwise2(v0, v2, out=_mo[0])", "for s in range(0, 1024, 256)"],
    "blocked_chain_scalar_broadcast": ["_fused_elementwise1(v0, out=_mo[0])"],
    "selects_sharing_a_mask": ["_fused_elementwise1(v0, out=_mo[0])", "_negative9(t0, dtype="],
    "blocked_select_zero_case": ["_bitwise_and5(x0.view(", "_subtract16(t0, 1, dtype="],
    "unbroadcast_trailing": ["_add1(v0, v1, out=_mo[0])", "_multiply2(v2, v0, out=v2)"],
    "unbroadcast_reshaped": ["_subtract1(v0, v1.reshape((64, 1)), out=_mo[0])"],
    "broadcast_read_twice": ["v2 = _broadcast_in_dim1(v1)", "_add2(v0, v1, out=_mo[0])"],
    "select_unbroadcast": ["v3 = _select_n1(v0, v1, v2)"],
    "maximum_full_operand": ["_maximum3(v0, _full2, out=_mo[0])", "writeable=False"],
    "maximum_small_no_full_operand": ["_maximum2(v0, _lit1)"],
    "folded_iota": ["v1 = _add7(v0, _k6)"],
    "div_and_square": ["_square1(v0, out=_mo[0])", "_divide2(v2, v1, out=v2)"],
    "int_div": ["v2 = _div1(v0, v1)"],
    "in_place_chain": ["_add3(v1, _lit2, out=v1)", "_log4(v2, out=v2)"],
    "in_place_after_view": ["v2 = v1.reshape((128, 64))", "_exp3(v2, out=_mo[0])"],
    "matmul_scratch_and_ring": ["_dot_general1(v0, v1, out=_ms[0])", "_tanh2(v3, out=v3)",
                                "_dot_general3(v4, v2, out=_mo[0])"],
    "donated_sgd": ["_pool.enter(_dn)", "_subtract6(v0, v5, out=_mo[1])", "donors=[None, 0]"],
    "donated_view_escapes": ["v1 = v0.reshape((128, 512))", "donors=[None]"],
    "donated_large_blocked": ["_fused_elementwise1(v1, v0, out=_mo[0])", "donors=[0]"],
    "conv_relu_pool": ["_conv_general_dilated1(v0, v1)", "_maximum4(v2, _full3)"],
    "scan_call": ["v3, v4 = _scan1(v0, v1, v2)"],
    "scan_body": ["for t in range(10):", "out=y0[t]", "c0 = np.ascontiguousarray(c0)"],
    "scan_body_reverse": ["for t in range(9, -1, -1):"],
}

NUMPY_1 = np.lib.NumpyVersion(np.__version__) < "2.0.0"


@pytest.fixture(scope="module")
def generated():
    return corpus.describe_golden()


@pytest.mark.skipif(NUMPY_1, reason="the golden code sets NumPy 2's error-state variable")
def test_generated_code_is_the_golden_code(generated):
    golden = corpus.read_golden()
    assert sorted(generated) == sorted(golden), "the golden file lists other cases"
    diffs = []
    for label in sorted(golden):
        if generated[label] != golden[label]:
            diffs.append(f"{label}:\n" + "".join(difflib.unified_diff(
                golden[label].splitlines(True), generated[label].splitlines(True),
                "golden", "generated", n=2)))
    assert not diffs, ("the NumPy backend's generated code changed for "
                       f"{len(diffs)} golden case(s):\n" + "\n".join(diffs[:3]))


def test_every_golden_case_exercises_its_job(generated):
    assert sorted(JOBS) == sorted(generated)
    missing = [(label, m) for label, ms in JOBS.items() for m in ms if m not in generated[label]]
    assert not missing, f"golden cases no longer exercising their job: {missing}"


def test_the_golden_file_round_trips(tmp_path):
    """``write_golden``/``read_golden`` keep every description byte for byte (the file's
    separators are not part of any description)."""
    d = {"b": "line\n", "a": "x\n--- globals\n  _k1 = 1\n", "c": "last\n"}
    corpus.write_golden(d, tmp_path / "g.txt")
    assert corpus.read_golden(tmp_path / "g.txt") == d


def test_the_passes_annotate_the_equations():
    """``numpy_passes.plan``: the side tables the emitter reads (a group's root computed by
    a blocked loop, its members skipped; a fused transpose; the tie-weight helper), and
    the cluster analysis callable on its own (``elementwise_groups``)."""
    from fnx.backends import numpy_passes

    cases = {label: payload for label, kind, payload in corpus.golden_cases() if kind == "ir"}
    ir, _ = cases["blocked_chain"]
    p = numpy_passes.plan(ir)
    (root, special), = p.special.items()
    assert special.name == "fused_elementwise" and special.writes_into == "any"
    # mul, add, tanh, mul, the broadcast of w (eqn 4, emitted: the loop reads it), the root add
    assert root == 5 and p.skip == {0, 1, 2, 3} and 4 not in p.skip
    groups = numpy_passes.elementwise_groups(ir, set(), {}, {}, p.uses0, p.keep, p.producer,
                                             p.readers0)
    assert [(r, ms) for r, ms, _ in groups] == [(5, [0, 1, 2, 3, 5])]

    ir, _ = cases["transpose_fused_into_dot"]
    p = numpy_passes.plan(ir)
    assert p.fused_into == {0: ir.eqns[1]} and p.skip == {1}

    ir, _ = cases["scale_by_tie_weight"]
    p = numpy_passes.plan(ir)
    assert [s.name for s in p.special.values()] == ["scale_by_tie_weight"]
    assert len(p.skip) == len(ir.eqns) - 1


def test_facts_about_primitives_are_declared_by_the_primitives():
    from fnx import lax

    assert lax.dot_general_p.never_aliases_operands and lax.dot_general_p.fresh_result
    assert all(p.never_aliases_operands for p in (lax.reduce_sum_p, lax.reduce_prod_p,
                                                   lax.reduce_max_p, lax.reduce_min_p))
    assert lax.convert_element_type_p.fresh_result_when_casting
    assert lax.broadcast_in_dim_p.broadcasts_operand and lax.transpose_p.permutes
    assert not lax.add_p.never_aliases_operands


def test_numpy_lowerings_are_numpy_rules_registered_by_the_primitives():
    from fnx import lax
    from fnx.backends import lowering
    from fnx.core.numpy_rules import NumpyRule, numpy_rule

    assert numpy_rule(lax.reduce_sum_p).reducer is np.add
    assert numpy_rule(lax.reduce_prod_p).reducer is None  # a product is not fused
    assert numpy_rule(lax.div_p).float_ufunc is not None
    assert numpy_rule(lax.add_p).float_ufunc is None and numpy_rule(lax.add_p).reducer is None
    assert numpy_rule(lax.add_p).ufunc is np.add and numpy_rule(lax.sin_p).ufunc is np.sin
    assert numpy_rule(lax.dot_general_p).specialize is not None
    assert numpy_rule(lax.select_n_p).broadcasts
    assert numpy_rule(lax.cumsum_p).ufunc is None  # no rule: the impl computes
    for p in (lax.add_p, lax.dot_general_p, lax.transpose_p, lax.reduce_max_p):
        assert isinstance(lowering(p, "numpy"), NumpyRule)
    # a rule is callable as a plain expression hook
    assert lax.transpose_p.numpy_codegen(["x"], {"permutation": (1, 0)}, None, None,
                                         None) == "x.transpose((1, 0))"
    with pytest.raises(TypeError, match="ufunc must be a NumPy ufunc"):
        NumpyRule(ufunc=abs)


def test_a_transpose_fuses_only_into_rules_that_apply_it():
    """A ``specialize`` written without transposes in mind (it ignores ``permutation``)
    never gets one: jit fuses a consumer transpose only into ``transposes=True`` rules."""
    import fnx
    from fnx.core.backend import register_lowering
    from fnx.core.numpy_rules import NumpyRule
    from fnx.core.primitive import Primitive, ShapeDtypeStruct

    twice_p = Primitive("twice_for_test", shape_rule=lambda x: ShapeDtypeStruct(x.shape, x.dtype),
                        impl=lambda x: x * 2)
    register_lowering(twice_p, "numpy", NumpyRule(
        specialize=lambda avals, params, permutation=None: lambda x: x * 2))
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    f = fnx.jit(lambda x: twice_p.bind(x).T + 1)
    np.testing.assert_array_equal(np.asarray(f(x)), x.T * 2 + 1)
    assert ".transpose(" in f.lower(x).source
    from fnx.core.numpy_rules import numpy_rule
    assert numpy_rule(fnx.lax.dot_general_p).transposes


def test_an_in_place_rule_gets_its_dying_operand_as_out():
    """``NumpyRule(in_place=True)``: jit hands the function its first operand as ``out=``
    where that operand dies there (as it does a ufunc); without the flag, or where the
    operand is read later, never."""
    import fnx
    from fnx.core.backend import register_lowering
    from fnx.core.numpy_rules import NumpyRule
    from fnx.core.primitive import Primitive, ShapeDtypeStruct

    def make(in_place):
        def specialize(avals, params, permutation=None):
            def fn(x, out=None):
                return np.multiply(x, 2, out=out)
            fn.takes_out = True
            return fn
        prim = Primitive(f"twice_in_place_{in_place}",
                         shape_rule=lambda x: ShapeDtypeStruct(x.shape, x.dtype),
                         impl=lambda x: x * 2)
        register_lowering(prim, "numpy", NumpyRule(specialize=specialize, in_place=in_place))
        return prim
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    for in_place in (True, False):
        prim = make(in_place)
        f = fnx.jit(lambda x: prim.bind(x + 1) - 3)
        np.testing.assert_array_equal(np.asarray(f(x)), (x + 1) * 2 - 3)
        line = next(ln for ln in f.lower(x).source.splitlines() if "twice" in ln)
        operand = line.split("(", 1)[1].split(",")[0].rstrip(")")
        assert (f"out={operand})" in line) == in_place, line
        g = fnx.jit(lambda x: (lambda y: prim.bind(y) + y)(x + 1))  # the operand lives on
        np.testing.assert_array_equal(np.asarray(g(x)), (x + 1) * 3)
        line = next(ln for ln in g.lower(x).source.splitlines() if "twice" in ln)
        assert f"out={line.split('(', 1)[1].split(',')[0].rstrip(')')})" not in line, line
    # a function of the params names the operands: here the second one
    def specialize2(avals, params, permutation=None):
        def fn(x, y, out=None):
            return np.subtract(y, x, out=out)
        fn.takes_out = True
        return fn
    minus_p = Primitive("minus_in_place", shape_rule=lambda x, y: ShapeDtypeStruct(x.shape, x.dtype),
                        impl=lambda x, y: y - x)
    register_lowering(minus_p, "numpy", NumpyRule(specialize=specialize2,
                                                   in_place=lambda params: (1,)))
    f = fnx.jit(lambda x: minus_p.bind(x + 1, x * 3) + 2)
    np.testing.assert_array_equal(np.asarray(f(x)), x * 3 - (x + 1) + 2)
    line = next(ln for ln in f.lower(x).source.splitlines() if "minus" in ln)
    second = line.split("(", 1)[1].split(",")[1].strip()
    assert f"out={second})" in line, line
    with pytest.raises(TypeError, match="in_place describes the specialize function"):
        NumpyRule(in_place=True)
    with pytest.raises(TypeError, match="in_place must be True, False or a function"):
        NumpyRule(specialize=specialize2, in_place=(1,))


def test_jit_grad_of_maximum_with_a_broadcast_zero():
    """The tie weights of ``max(x, zeros_like(x))`` read the broadcast zeros: the planner
    kept it (it used to drop it as read only by skipped equations, a KeyError at compile)."""
    import fnx
    import fnx.numpy as fnp

    x = np.linspace(-1, 1, 64 * 128, dtype=np.float32).reshape(64, 128)
    x[0, :4] = 0  # ties: weight 1/2

    def f(x):
        return fnp.sum(fnp.maximum(x, fnp.zeros_like(x)) * 3)
    g = fnx.jit(fnx.grad(f))(x)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(fnx.grad(f)(x)))
    assert float(g[0, 0]) == 1.5 and float(g[-1, -1]) == 3 and float(g[0, 10]) == 0
