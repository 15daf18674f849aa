"""The fused CUDA kernel planner and generator (``fnx.kernels.fusion``, issue 19).

Three kinds of checks:

* planning, on IRs from ``fnx.make_ir``: how many kernels, which equations each holds, the
  steps' order, and that a kernel writes exactly the values read after it (every
  equation in exactly one step; the acceptance function gelu(x) * w + layernorm(x) on
  (8192, 4096) float32 in one kernel);
* the generated program compiles with NVRTC for sm_80 and sm_90 (skipped without NVRTC);
* each planned program run step by step -- Eqn steps by their primitive on NumPy arrays,
  kernels in the CPU emulator (``fnx.kernels.emulate``, skipped without g++) -- equals the
  IR evaluated by ``eval_ir``: exactly for integer, bool and random bits, to a few ulp for
  float elementwise kernels, and to a tolerance scaled by the reduced length where a
  kernel sums in its own (tree) order.

The kernels of all the fixed cases compile as one program, once per module.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.core.ir import Eqn, Literal, eval_ir
from fnx.kernels import emulate
from fnx.kernels.cuda import KernelUnsupported
from fnx.kernels.fusion import Kernel, plan_program, plan_summary, program_source
from fnx.random import threefry2x32_p

S = fnx.ShapeDtypeStruct
F32 = np.float32


# --- helpers ---------------------------------------------------------------------------------

def kernels(steps):
    return [s for s in steps if isinstance(s, Kernel)]


def check_plan(ir, steps):
    """The invariants of every plan: each equation in exactly one step; steps in an order
    where everything a step reads exists; a kernel's outputs are exactly the values it
    computes that a later step or the IR's outputs read, its inputs what it reads from
    outside."""
    listed = [id(e) for s in steps for e in (s.eqns if isinstance(s, Kernel) else [s])]
    assert sorted(listed) == sorted(id(e) for e in ir.eqns)
    have = set(ir.invars) | set(ir.constvars)
    reads_later = []
    for k, s in enumerate(steps):
        ins = s.inputs if isinstance(s, Kernel) else [v for v in s.inputs
                                                      if type(v) is not Literal]
        assert all(v in have for v in ins), f"step {k} reads a value not computed yet"
        outs = s.outputs
        have.update(outs)
        reads_later.append(set(ins))
    final = {v for v in ir.outvars if type(v) is not Literal}
    for k, s in enumerate(steps):
        if not isinstance(s, Kernel):
            continue
        computed = {o for e in s.eqns for o in e.outputs}
        assert set(s.outputs) <= computed
        assert not set(s.inputs) & set(s.outputs)
        later = set().union(*reads_later[k + 1:], final)
        assert set(s.outputs) == computed & later, "a kernel writes more or less than leaves it"
        assert s.name in s.source and s.source.count("__global__") == 1
        assert len(s.grid) == 3 and len(s.block) == 3 and s.shared_bytes == 0
        assert s.block[0] * s.block[1] * s.block[2] <= 1024


def plan(f, *args):
    ir = fnx.make_ir(f)(*args)
    steps = plan_program(ir)
    check_plan(ir, steps)
    return ir, steps


def nvrtc_or_skip(source):
    try:
        return emulate.nvrtc_check(source)
    except KernelUnsupported as e:
        pytest.skip(str(e))


def run_plan(ir, args, steps, module):
    """The IR's outputs, computed step by step: kernels in the emulator, the other steps by
    their primitive on NumPy arrays."""
    env = dict(zip(ir.constvars, [np.asarray(c) for c in ir.consts]))
    env.update(zip(ir.invars, [np.asarray(a) for a in args]))

    def read(v):
        return np.asarray(v.value, v.aval.dtype) if type(v) is Literal else env[v]

    def flat(a):   # a rank-0 value travels as a 1-element buffer
        return a.reshape(1) if a.ndim == 0 else a

    for s in steps:
        if isinstance(s, Kernel):
            ins = [flat(np.ascontiguousarray(read(v), v.aval.dtype)) for v in s.inputs]
            outs = [np.empty(v.aval.shape, v.aval.dtype) for v in s.outputs]
            module.launch(s.name, s.grid, s.block, [*ins, *map(flat, outs)],
                          shared_bytes=s.shared_bytes)
            env.update(zip(s.outputs, outs))
        else:
            out = s.prim.bind(*[fnp.asarray(read(v)) for v in s.inputs], **s.params)
            out = out if s.prim.multiple_results else [out]
            env.update(zip(s.outputs, [np.asarray(o) for o in out]))
    return [read(v) for v in ir.outvars]


def compare(got, want, tol):
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if tol == 0 or w.dtype.kind not in "fc":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def reduction_tol(n, dtype=F32):
    """A summation order other than NumPy's moves a sum of n terms of magnitude ~1 by up
    to about n ulp; a few times that, plus the elementwise ulps."""
    return 8 * max(n, 4) * float(np.finfo(dtype).eps)


# --- the functions -----------------------------------------------------------------------------

def layernorm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / fnp.sqrt(v + eps) * g + b


def gelu_layernorm(x, w, g, b):
    return fnx.nn.gelu(x) * w + layernorm(x, g, b)


def nll(logits, labels):
    logp = fnx.nn.log_softmax(logits)
    return -fnp.take_along_axis(logp, labels[:, None], axis=-1).mean()


def mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = fnx.nn.relu(x @ w1 + b1)
    return -fnp.mean(fnp.sum(fnx.nn.log_softmax(h @ w2 + b2) * y, axis=-1))


def batchnorm_nchw(x, g, b):
    m = x.mean((0, 2, 3), keepdims=True)
    v = ((x - m) ** 2).mean((0, 2, 3), keepdims=True)
    return (x - m) * lax.rsqrt(v + 1e-5) * g[None, :, None, None] + b[None, :, None, None]


# --- planning ------------------------------------------------------------------------------------

def test_acceptance_gelu_layernorm_is_one_row_kernel_that_nvrtc_compiles():
    x, w = S((8192, 4096), "float32"), S((4096,), "float32")
    ir, steps = plan(gelu_layernorm, x, w, w, w)
    assert len(kernels(steps)) <= 3          # the bound; the plan does it in one
    (k,) = steps
    assert k.kind == "block" and k.block == (512, 1, 1) and k.grid == (8192, 1, 1)
    assert k.inputs == ir.invars and k.outputs == ir.outvars
    # x is read from global memory once: loaded in the first pass, kept in registers
    assert k.source.count("in0[") == 1 and "fnx_c0[k] = " in k.source
    nvrtc_or_skip(program_source(steps))


def test_softmax_and_log_softmax_nll():
    _, steps = plan(fnx.nn.softmax, S((8192, 4096), "float32"))
    assert [k.kind for k in kernels(steps)] == ["block"]
    # log_softmax + NLL: the row kernel, the label arithmetic, a constant index kernel;
    # gather and pad stay steps; the mean and negation join the final sum
    _, steps = plan(nll, S((128, 10), "float32"), S((128,), "int32"))
    ks = kernels(steps)
    assert len(ks) == 4 and ks[0].kind == "warp"
    assert {s.prim.name for s in steps if isinstance(s, Eqn)} == {"pad", "gather"}
    assert [e.prim.name for e in ks[-1].eqns] == ["reduce_sum", "div", "neg"]
    assert ks[-1].outputs[0].aval.shape == ()


def test_mlp_layer_bias_relu_is_one_kernel_after_the_matmul():
    ir, steps = plan(lambda w, b, x: fnx.nn.relu(x @ w + b),
                     S((784, 512), "float32"), S((512,), "float32"), S((128, 784), "float32"))
    dot, k = steps
    assert isinstance(dot, Eqn) and dot.prim.name == "dot_general"
    assert k.kind == "map" and k.outputs == ir.outvars
    # the bias is read through its broadcast (stride 0), never materialized
    assert [v.aval.shape for v in k.inputs] == [(128, 512), (512,)]
    assert "in1[(i % 512)]" in k.source


def test_mlp_gradient_plan():
    p = ((S((784, 512), "float32"), S((512,), "float32")),
         (S((512, 10), "float32"), S((10,), "float32")))
    ir, steps = plan(fnx.grad(mlp_loss), p, S((128, 784), "float32"), S((128, 10), "float32"))
    ks = kernels(steps)
    # bias + relu (writing the mask and h), the softmax forward and backward rows, and the
    # two bias gradients (column sums in (32, Y) tiles); the six matmuls stay steps
    assert [k.kind for k in ks] == ["map", "warp", "tile", "tile"]
    assert sum(isinstance(s, Eqn) for s in steps) == 5
    assert all(s.prim.name == "dot_general" for s in steps if isinstance(s, Eqn))


def test_only_values_read_later_are_written():
    def f(x, w):
        y = fnp.tanh(x) * 2.0            # read by the matmul and after it: written
        z = fnp.exp(y) + 1.0             # only inside the kernel: not written
        return (y @ w) + z, z.sum()
    ir, steps = plan(f, S((8, 16), "float32"), S((16, 16), "float32"))
    first = steps[0]
    assert isinstance(first, Kernel)
    (y,) = first.outputs
    mm = next(s for s in steps if isinstance(s, Eqn) and s.prim.name == "dot_general")
    assert y in mm.inputs


def test_a_value_feeding_a_matmul_that_feeds_back_splits_the_cluster():
    # exp(x) -> dot -> (dot * exp(x)): one kernel cannot both precede and follow the dot
    ir, steps = plan(lambda x, w: (fnp.exp(x) @ w) * fnp.exp(x),
                     S((8, 8), "float32"), S((8, 8), "float32"))
    names = [s.kind if isinstance(s, Kernel) else s.prim.name for s in steps]
    assert names == ["map", "dot_general", "map"]


def test_steps_that_are_not_fusible_stay_eqns():
    # float16 has no C type; complex neither; sort and cumsum are not fused
    for f, arg in [(lambda x: fnp.sin(x) + 1, S((4, 4), "float16")),
                   (lambda x: x * x, S((4,), "complex64")),
                   (lambda x: fnp.sort(fnp.cumsum(x)), S((16,), "float32"))]:
        _, steps = plan(f, arg)
        assert not kernels(steps)
    # a lone transpose or broadcast is a view for the backend, not a copying kernel
    _, steps = plan(lambda x, w: x.T @ w, S((4, 8), "float32"), S((4, 3), "float32"))
    assert not kernels(steps)


def test_constants_read_by_other_steps_get_a_buffer():
    # a constant (iota arithmetic) that an IR output and a gather need: a kernel without
    # inputs makes it; a constant broadcast a matmul reads is a step of its own (a view)
    def f(x):
        idx = (lax.iota(np.int32, 8) * 3) % 8
        return x[idx] + 1.0, idx, fnp.ones((8, 8), F32) @ x[:, None]
    ir, steps = plan(f, S((8,), "float32"))
    const = [k for k in kernels(steps) if not k.inputs]
    assert len(const) == 1 and ir.outvars[1] in const[0].outputs
    assert {"iota", "mul", "rem"} <= {e.prim.name for e in const[0].eqns}


def test_huge_domains_index_in_64_bits():
    x = S((65536, 32768), "float32")     # 2**31 elements: int indices would overflow
    _, steps = plan(lambda x, b: fnp.exp(x) + b, x, S((32768,), "float32"))
    (k,) = steps
    assert "long long i = " in k.source
    _, steps = plan(fnx.nn.softmax, x)
    assert "long long o = " in steps[0].source
    nvrtc_or_skip(program_source(steps))


def test_kernel_names_are_stable_and_program_source_dedups():
    args = (S((6, 1000), "float32"), S((1000,), "float32"))
    _, a = plan(gelu_layernorm, *args, args[1], args[1])
    _, b = plan(gelu_layernorm, *args, args[1], args[1])
    assert [k.name for k in kernels(a)] == [k.name for k in kernels(b)]
    src = program_source(kernels(a) + kernels(b))
    assert src.count("__global__") == 1


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_broadcast_patterns_plan_to_one_kernel(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    ops = []
    for _ in range(data.draw(st.integers(2, 4))):   # operands broadcasting into shape
        keep = [data.draw(st.booleans()) for _ in shape]
        ops.append(tuple(s if k else 1 for s, k in zip(shape, keep)))
    ops[0] = shape

    def f(*xs):
        acc = xs[0]
        for k, x in enumerate(xs[1:]):
            acc = fnp.where(acc > x, acc * x, acc - x) if k % 2 else fnp.maximum(acc, x) + x
        return acc
    ir, steps = plan(f, *[S(s, "float32") for s in ops])
    (k,) = steps    # one elementwise kernel: every broadcast is index arithmetic in it
    assert k.kind == "map" and k.outputs == ir.outvars and len(k.eqns) == len(ir.eqns)
    # the operands are read as they are (no broadcast materialized), each once an element
    assert set(k.inputs) == set(ir.invars)
    assert all(k.source.count(f"in{j}[") == 1 for j in range(len(k.inputs)))


# --- running the kernels ------------------------------------------------------------------------

def _rng():
    return np.random.default_rng(19)


def _normal(*shape):
    return _rng().standard_normal(shape).astype(F32)


def _ints(lo, hi, *shape, dtype=np.int32):
    return _rng().integers(lo, hi, shape).astype(dtype)


# name: (function, args, tolerance: 0 = exact, or a float; x64)
CASES = {
    "gelu_layernorm_block": (gelu_layernorm, lambda: (_normal(5, 1000), _normal(1000),
                                                      _normal(1000), _normal(1000)),
                             reduction_tol(1000)),
    "gelu_layernorm_wide_rows": (gelu_layernorm, lambda: (_normal(2, 5000), _normal(5000),
                                                          _normal(5000), _normal(5000)),
                                 reduction_tol(5000)),
    "layernorm_rows_not_unrolled": (layernorm, lambda: (_normal(2, 20000), _normal(20000),
                                                        _normal(20000)), reduction_tol(20000)),
    "gelu_layernorm_warp": (gelu_layernorm, lambda: (_normal(9, 40), _normal(40), _normal(40),
                                                     _normal(40)), reduction_tol(40)),
    "softmax": (fnx.nn.softmax, lambda: (_normal(3, 300),), reduction_tol(300)),
    "nll": (nll, lambda: (_normal(64, 10), _ints(0, 10, 64)), reduction_tol(64)),
    "mlp_grad": (fnx.grad(mlp_loss),
                 lambda: (((_normal(20, 30), _normal(30)), (_normal(30, 10), _normal(10))),
                          _normal(40, 20), np.eye(10, dtype=F32)[_ints(0, 10, 40)]),
                 reduction_tol(40)),
    "bias_grad_column_sum": (lambda x: x.sum(0) * 0.5, lambda: (_normal(300, 70),),
                             reduction_tol(300)),
    "middle_axis_max_min": (lambda x: fnp.exp(x).max(1) - x.min(1),
                            lambda: (_normal(3, 100, 40),), 1e-6),
    "batchnorm_nchw": (batchnorm_nchw, lambda: (_normal(4, 3, 5, 6), _normal(3), _normal(3)),
                       reduction_tol(120)),
    "sum_to_scalar": (lambda x: fnp.sum(x * x) / fnp.max(x), lambda: (_normal(50, 60),),
                      reduction_tol(3000)),
    "int_elementwise": (lambda a, b: (a * b + 3) // 2 - (a > b) + fnp.abs(a) % 7,
                        lambda: (_ints(-100, 100, 5, 6), _ints(-100, 100, 6)), 0),
    "int_bool_reductions": (lambda a: (a.max(1), a.min(0), (a > 0).any(1), (a > -50).all(0),
                                       fnp.prod(a % 3 + 1, axis=1), (a * 12345679).sum(0)),
                            lambda: (_ints(-100, 100, 7, 9),), 0),
    "transpose_broadcast": (lambda a, b: fnp.sin(a).T + b,
                            lambda: (_normal(5, 6), _normal(6, 1)), 1e-6),
    "reshape_in_elementwise": (lambda a: fnp.exp(a).reshape(6, 5) * 2,
                               lambda: (_normal(5, 6),), 1e-6),
    "one_hot_iota": (lambda y: fnx.nn.one_hot(y, 10) * 3.0, lambda: (_ints(0, 10, 33),), 0),
    "random_bits": (lambda k: fnx.random.bits(k, (7, 9)),
                    lambda: (np.asarray(fnx.random.PRNGKey(5)),), 0),
    "random_uniform": (lambda k: fnx.random.uniform(k, (40, 50)),
                       lambda: (np.asarray(fnx.random.PRNGKey(3)),), 0),
    "threefry_scalar_key": (lambda k1, k2, x1, x2: threefry2x32_p.bind(k1, k2, x1, x2),
                            lambda: (np.uint32(7), _ints(0, 2**31, 13, dtype=np.uint32),
                                     _ints(0, 2**31, 13, dtype=np.uint32),
                                     np.uint32(12345)), 0),
}
CASES_X64 = {
    "float64_softmax": (fnx.nn.log_softmax, lambda: (_rng().standard_normal((6, 500)),),
                        reduction_tol(500, np.float64)),
}


@pytest.fixture(scope="module")
def compiled():
    """Every case planned, and all their kernels compiled as one emulated program."""
    if not emulate.emulator_available():
        pytest.skip("the CUDA emulator needs g++")
    plans = {}
    for name, (f, make, tol) in CASES.items():
        args = make()
        ir = fnx.make_ir(f)(*args)
        plans[name] = (ir, args, plan_program(ir), tol)
    with fnx.enable_x64():
        for name, (f, make, tol) in CASES_X64.items():
            args = make()
            ir = fnx.make_ir(f)(*args)
            plans[name] = (ir, args, plan_program(ir), tol)
    source = program_source([k for p in plans.values() for k in kernels(p[2])])
    return plans, source, emulate.compile_kernels(source)


def test_all_case_kernels_compile_with_nvrtc(compiled):
    nvrtc_or_skip(compiled[1])


@pytest.mark.parametrize("name", list(CASES) + list(CASES_X64))
def test_planned_program_equals_the_ir(compiled, name):
    plans, _, module = compiled
    ir, args, steps, tol = plans[name]
    check_plan(ir, steps)
    assert kernels(steps), plan_summary(steps)
    flat = fnx.tree_util.tree_leaves(args)
    with fnx.enable_x64():   # the IR is typed: evaluate it as traced (64-bit cases too)
        got = run_plan(ir, flat, steps, module)
        want = eval_ir(ir, *[fnp.asarray(a) for a in flat])
    compare(got, want, tol)


def test_results_do_not_depend_on_thread_order(compiled):
    """The reductions' trees are fixed: a reversed and a shuffled schedule of each block's
    threads give the same bits."""
    plans, _, module = compiled
    for name in ("gelu_layernorm_block", "bias_grad_column_sum", "nll", "batchnorm_nchw"):
        ir, args, steps, _ = plans[name]
        flat = fnx.tree_util.tree_leaves(args)
        runs = []
        for schedule in ("forward", "reverse", "shuffle"):
            class Scheduled:
                def launch(self, *a, **k):
                    return module.launch(*a, schedule=schedule, seed=3, **k)
            runs.append(run_plan(ir, flat, steps, Scheduled()))
        for other in runs[1:]:
            for a, b in zip(runs[0], other):
                np.testing.assert_array_equal(a, b)


@settings(max_examples=8, deadline=None)
@given(st.data())
def test_broadcast_patterns_run_exactly(data):
    """Integer elementwise kernels over drawn broadcast patterns equal the IR bit for bit."""
    if not emulate.emulator_available():
        pytest.skip("the CUDA emulator needs g++")
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    shapes = [shape] + [tuple(s if data.draw(st.booleans()) else 1 for s in shape)
                        for _ in range(2)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    args = [rng.integers(-9, 9, s).astype(np.int32) for s in shapes]
    ir, steps = plan(lambda a, b, c: fnp.where(a > b, a * c - b, c // 2) + (b ^ c), *args)
    module = emulate.compile_kernels(program_source(steps))
    compare(run_plan(ir, args, steps, module), eval_ir(ir, *map(fnp.asarray, args)), 0)
