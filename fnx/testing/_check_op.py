"""``check_op``: every rule of an op, property-tested in one call.

For inputs drawn from a hypothesis strategy, ``check_op`` runs these checks, in
this order, and stops at the first that fails:

==========  ===================================================================
``impl``    the op (eager, the NumPy impl) against a NumPy ``reference``
``shape``   ``fnx.eval_shape`` (the shape rule) against the actual output's
            shape and dtype; and again with ``jax_enable_x64`` off, where
            64-bit operands and placeholders must narrow alike
``jit``     ``fnx.jit(op)`` against eager
``vmap``    ``fnx.vmap(op, in_axes)`` over a batch of 2-3 inputs against a
            Python loop; each argument mapped at a drawn axis (first, last, in
            between) or not at all
``jvp``     forward mode against central finite differences (``check_grads``,
            mode "fwd", to ``order``)
``vjp``     reverse mode against forward mode and finite differences (the
            dot-product identity; mode "rev", to ``order``): for a primitive,
            this is where a wrong transpose rule shows
``kernel``  a primitive's GPU kernel (``prim.kernel``): run on the device
            against the impl where a CUDA device exists; otherwise its CUDA
            source compiled by NVRTC and the same source run on the CPU
            (g++), against the impl
``onnx``    a primitive's ONNX lowering (or the export of a function) run by
            onnxruntime against the impl
==========  ===================================================================

The checks run in four phases (impl and shape; jit and vmap; jvp and vjp;
kernel and onnx), each its own hypothesis run over ``max_examples`` inputs, so
a failure is blamed on the earliest rule that breaks anywhere: a wrong impl
also makes finite differences disagree, and is reported as the impl.

A check whose tools are missing (no kernel hook, no onnxruntime, no float
argument to differentiate) is skipped and listed in the returned
``OpReport``. On failure hypothesis shrinks the input, and ``OpCheckError``
names the check, the rule it tests, the shrunk input (shapes, dtypes, values,
params) and the observed against the expected numbers.

The other lanes of a vmap batch are further draws from ``args`` when they
have the first lane's shapes and dtypes (a strategy with fixed shapes), and
otherwise the first lane reversed along every axis, or rolled by one element,
so they stay inside the strategy's domain.

Tolerances (``value_tolerance``) depend on the output dtype: float16 1e-2,
bfloat16 4e-2, float32 2e-5, float64 1e-12 (complex as its parts) relative,
and the same times the largest magnitude of the expected output as the
absolute floor (normwise); integer and bool results must be equal; NaN and
infinities must sit in the same places. Derivative checks use
``check_grads``' dtype-aware defaults. ``tolerances={"impl": dict(rtol=...,
atol=...), "jvp": dict(rtol=..., eps=...), ...}`` overrides them per check.
"""
from __future__ import annotations

import traceback

import numpy as np

from .. import tree_util
from .._config import enable_x64
from ..core import dtypes
from ..core.array import Array, to_array
from ..core.primitive import Primitive, ShapeDtypeStruct
from ..core.tracing import eval_shape
from ..errors import MissingRuleError
from ..transforms.jit import jit
from ..transforms.vmap import vmap
from ._grads import _fmt, _fmt_array, _precision, _sig, check_grads

__all__ = ["CHECKS", "Example", "OpCheckError", "OpReport", "check_op", "value_tolerance"]

CHECKS = ("impl", "shape", "jit", "vmap", "jvp", "vjp", "kernel", "onnx", "gpu")
_PHASES = (("impl", "shape"), ("jit", "vmap"), ("jvp", "vjp"), ("kernel", "onnx", "gpu"))

_RULE_OF = {  # which rule a failed check accuses, for a primitive / for a function
    "impl": ("the impl (NumPy implementation)", "the function's value"),
    "shape": ("the shape rule", "the output shape/dtype that tracing infers"),
    "jit": ("jit (the NumPy lowering of the impl)", "the function under jit"),
    "vmap": ("the batching rule", "the function under vmap (a batching rule inside it)"),
    "jvp": ("the jvp rule", "forward mode (a jvp rule inside the function)"),
    "vjp": ("the transpose rule (reverse mode, derived from the jvp rule through it)",
            "reverse mode (a transpose rule or custom_vjp backward pass inside it)"),
    "kernel": ("the GPU kernel (prim.kernel)", "a GPU kernel"),
    "onnx": ("the ONNX lowering (prim.onnx)", "the ONNX export of the function"),
    "gpu": ("the CUDA backend's program for it (its generated kernel, or its impl on "
            "device arrays)", "the function on the GPU device"),
}

_VALUE_RTOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 2e-5, "float64": 1e-12}


class OpCheckError(AssertionError):
    """A rule of the op under test disagrees; the message says which and where."""


class Example:
    """One drawn input: positional operands and static params, for strategies that draw
    params together with the operands (``st.builds(Example, x, axis=...)``).

    ``example.lanes(make)`` attaches ``make(k) -> operands``, which builds further inputs
    of the same shapes and dtypes (lane ``k`` of a vmap batch, k >= 1), for strategies
    whose shapes vary from draw to draw."""
    __slots__ = ("args", "params", "lane_maker")

    def __init__(self, *args, **params):
        self.args = args
        self.params = params
        self.lane_maker = None

    def lanes(self, make):
        self.lane_maker = make
        return self

    def __repr__(self):
        return f"Example(args={self.args!r}, params={self.params!r})"


class OpReport:
    """What ``check_op`` checked: examples per check, and the checks skipped and why."""

    def __init__(self, name):
        self.name = name
        self.ran = {c: 0 for c in CHECKS}
        self.skipped = {}          # check -> reason (the first one seen)

    def skip(self, check, reason):
        self.skipped.setdefault(check, reason)

    def __str__(self):
        lines = [f"check_op({self.name}):"]
        for c in CHECKS:
            if self.ran[c]:
                lines.append(f"  {c:7s} passed on {self.ran[c]} examples")
            elif c in self.skipped:
                lines.append(f"  {c:7s} skipped: {self.skipped[c]}")
        return "\n".join(lines)

    __repr__ = __str__


class _Failed(Exception):
    """A check failed on the current example (one subclass per check, so hypothesis keeps
    shrinking toward the same failure)."""

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


_FAILED = {c: type(f"_{c.capitalize()}Failed", (_Failed,), {"check": c}) for c in CHECKS}


def value_tolerance(dtype):
    """``{"rtol": ..., "atol": None}`` for comparing values of ``dtype`` (None: the rtol
    times the largest expected magnitude); integer and bool values compare exactly."""
    dtype = np.dtype(dtype)
    if not dtypes.is_inexact(dtype):
        return {"rtol": 0.0, "atol": 0.0}
    return {"rtol": _VALUE_RTOL[_precision(dtype)], "atol": None}


# --- comparisons --------------------------------------------------------------------------

def _mismatch(got, want, tol, *, check_dtype=True):
    """None when ``got`` matches ``want``, else what differs (observed vs expected)."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {g.shape}, expected {w.shape}"
    if check_dtype and g.dtype != w.dtype:
        return f"dtype {g.dtype}, expected {w.dtype}"
    if not dtypes.is_inexact(w.dtype) and not dtypes.is_inexact(g.dtype):
        bad = g != w
        if not bad.any():
            return None
        return _describe_bad(g, w, bad, "not equal")
    g = g.astype(np.complex128 if g.dtype.kind == "c" or w.dtype.kind == "c" else np.float64)
    w = w.astype(g.dtype)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if (nan_g != nan_w).any():
        return _describe_bad(g, w, nan_g != nan_w, "NaN in one and not the other")
    inf_w = np.isinf(w) | np.isinf(g)
    if (g[inf_w & ~nan_w] != w[inf_w & ~nan_w]).any():
        return _describe_bad(g, w, inf_w & ~nan_w & (g != w), "infinities differ")
    fin = ~(nan_w | inf_w)
    scale = float(np.abs(w[fin]).max()) if fin.any() else 0.0
    rtol = tol["rtol"]
    atol = tol["atol"] if tol.get("atol") is not None else rtol * scale
    err = np.where(fin, np.abs(g - w), 0.0)
    bad = err > atol + rtol * np.abs(np.where(fin, w, 0))
    if not bad.any():
        return None
    return _describe_bad(g, w, bad, f"beyond rtol={rtol:.3g}, atol={atol:.3g}")


def _describe_bad(g, w, bad, why):
    """How many elements differ, and the worst one (the first, for exact comparisons)."""
    n = int(bad.sum())
    if g.dtype.kind in "fc":
        err = np.where(bad, np.nan_to_num(np.abs(g - w), nan=np.inf), -1.0)
        at = np.unravel_index(int(np.argmax(err)), w.shape) if w.ndim else ()
    else:
        at = tuple(np.argwhere(bad)[0]) if w.ndim else ()
    at = tuple(int(i) for i in at)
    lines = [f"{n} of {max(w.size, 1)} elements differ ({why}); at index {at}: "
             f"got {_fmt(g[at])}, expected {_fmt(w[at])}"]
    if w.size <= 16:
        lines.append(f"got      {_fmt_array(g, 16)}")
        lines.append(f"expected {_fmt_array(w, 16)}")
    return "\n".join(lines)


def _describe_input(args, params):
    lines = []
    for i, a in enumerate(args):
        if isinstance(a, (np.ndarray, Array, np.generic)):
            a = np.asarray(a)
            with np.printoptions(precision=6, threshold=24, edgeitems=4):
                body = np.array2string(a, separator=", ").replace("\n", "\n" + " " * 8)
            lines.append(f"    args[{i}]: {_sig(a)} = {body}")
        else:
            lines.append(f"    args[{i}]: {type(a).__name__} {a!r:.60}")
    if params:
        lines.append(f"    params: {params!r}")
    return "\n".join(lines)


# --- the op as a function of arrays --------------------------------------------------------

def _name_of(op):
    if isinstance(op, Primitive):
        return op.name
    return getattr(op, "__name__", None) or type(op).__name__


def _caller(op, params):
    if isinstance(op, Primitive):
        return lambda *xs: op.bind(*[to_array(x) for x in xs], **params)
    return lambda *xs: op(*xs, **params)


def _numpy_leaves(out):
    return [np.asarray(o) for o in tree_util.tree_leaves(out)]


def _as_numpy(operands):
    """Array operands as NumPy arrays (Python scalars stay as they are)."""
    return [np.asarray(a) if isinstance(a, (np.ndarray, Array, np.generic)) else a
            for a in operands]


def _as_fnx(operands):
    """NumPy operands as fnx Arrays (Python scalars stay as they are)."""
    return [to_array(a) if isinstance(a, np.ndarray) else a for a in operands]


def _compare_outputs(got, want, tolerance, what, check_dtype=True):
    """None when ``got`` matches ``want`` leaf by leaf, else the first mismatch, with
    ``what`` in front."""
    g, w = _numpy_leaves(got), _numpy_leaves(want)
    if len(g) != len(w):
        return f"{what}: {len(g)} outputs, expected {len(w)}"
    for k, (gk, wk) in enumerate(zip(g, w)):
        tol = tolerance(gk.dtype)   # the precision of the op's own output
        m = _mismatch(gk, wk, tol, check_dtype=check_dtype)
        if m is not None:
            out = f"output {k}" if len(w) > 1 else "output"
            return f"{what}, {out}: {m}"
    return None


# --- the lanes of a vmap batch -----------------------------------------------------------------

def _lane(a, k):
    """The ``k``-th lane built from ``a``: itself, reversed on every axis, rolled by one."""
    a = np.asarray(a)
    if k == 0 or a.ndim == 0:
        return a
    if k == 1:
        return np.flip(a).copy()
    return np.roll(a.ravel(), 1).reshape(a.shape)


# --- the default mode -------------------------------------------------------------------------

def _check_default_mode(f, np_args, avals, fail):
    """With ``jax_enable_x64`` off (what users run by default), eager narrows 64-bit
    operands to 32 bits; ``eval_shape`` on the 64-bit placeholders must narrow alike and
    give eager's shapes and dtypes. An example eager rejects in that mode (a Python int
    past int32) is not checked."""
    with enable_x64(False):
        try:
            out = tree_util.tree_leaves(f(*_as_fnx(np_args)))
        except Exception:   # noqa: BLE001 - a 32-bit limit; the 64-bit checks cover the op
            return
        try:
            shapes = tree_util.tree_leaves(eval_shape(f, *avals))
        except Exception as e:
            fail("shape", f"with jax_enable_x64 off, eval_shape raised {type(e).__name__}: "
                          f"{e}, while eager returns {[_sig(np.asarray(o)) for o in out]}")
    got = [(tuple(s.shape), s.dtype) for s in shapes]
    want = [(tuple(np.shape(o)), np.asarray(o).dtype) for o in out]
    if got != want:
        fail("shape", "with jax_enable_x64 off, eval_shape gives "
                      f"{[s.str_short() for s in shapes]} and eager "
                      f"{[_sig(np.asarray(o)) for o in out]} (64-bit operands and "
                      "placeholders must narrow alike)")


# --- check_op -----------------------------------------------------------------------------------

def check_op(op, args, *, reference=None, params=None, checks=None, skip=(), order=2,
             modes=("fwd", "rev"), nondiff_argnums=(), unbatched_argnums=(),
             tolerances=None, max_examples=None, name=None):
    """Property-test every rule of ``op`` on inputs drawn from ``args``.

    ``op`` is a ``Primitive`` (called as ``op.bind(*arrays, **params)``) or any
    function of arrays (a ``custom_jvp``/``custom_vjp`` function, an ``fnx.numpy``
    function, ...). ``args`` is a hypothesis strategy of a tuple of operands (NumPy
    arrays, fnx Arrays or Python scalars), a tuple of strategies (one per operand), or
    a strategy of ``Example(*operands, **params)`` when params are drawn with the
    operands. ``params`` are fixed static params (a dict) for every example.
    ``reference(*numpy_operands, **params)`` is the expected value (a NumPy function);
    without it the ``impl`` check is skipped.

    ``checks`` (default: all of ``CHECKS``) minus ``skip`` selects the checks;
    ``order`` (1 or 2) and ``modes`` go to the derivative checks ("fwd" is the ``jvp``
    check, "rev" the ``vjp`` check). ``nondiff_argnums`` are float operands held fixed
    when differentiating; ``unbatched_argnums`` are never mapped by ``vmap``.
    ``tolerances`` maps a check name to overrides (``rtol``/``atol`` for value checks;
    ``rtol``/``atol``/``eps`` for ``jvp``/``vjp``). ``max_examples`` defaults to the
    current hypothesis profile's.

    Returns an ``OpReport``; raises ``OpCheckError`` on the first failing check, with
    the shrunk input. Call it in a test function, not inside another ``@given``.

    The checks run with ``jax_enable_x64`` on (restored afterwards), as ``check_grads``
    does and as JAX's suite runs its 64-bit tests: the strategies draw float64/int64
    examples and references are computed in float64, which would otherwise narrow to 32
    bits (JAX's test utilities instead drop 64-bit dtypes when the flag is off, which
    would leave the 64-bit paths untested in the default mode). The default mode is not
    left out: the ``shape`` check also runs each example with the flag off, where eager
    narrows 64-bit operands, and ``eval_shape`` on the example's (64-bit) placeholders
    must give the same shapes and dtypes.
    """
    with enable_x64():
        return _check_op(op, args, reference, params, checks, skip, order, modes,
                         nondiff_argnums, unbatched_argnums, tolerances, max_examples, name)


def _check_op(op, args, reference, params, checks, skip, order, modes, nondiff_argnums,
              unbatched_argnums, tolerances, max_examples, name):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    selected = tuple(CHECKS if checks is None else checks)
    unknown = [c for c in tuple(selected) + tuple(skip) if c not in CHECKS]
    if unknown:
        raise ValueError(f"check_op: unknown checks {unknown}; the checks are {CHECKS}")
    selected = [c for c in CHECKS if c in selected and c not in skip]
    if order not in (1, 2):
        raise ValueError(f"check_op: order must be 1 or 2, got {order!r}")
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    tolerances = dict(tolerances or {})
    is_prim = isinstance(op, Primitive)
    name = name or _name_of(op)
    report = OpReport(name)
    if isinstance(args, (tuple, list)):
        args = st.tuples(*args)
    fixed_params = dict(params or {})

    def value_tol(check):
        over = tolerances.get(check, {})

        def tol(dtype):
            t = value_tolerance(dtype)
            t.update({k: v for k, v in over.items() if k in ("rtol", "atol")})
            return t
        return tol

    def run_checks(data, selected):
        drawn = data.draw(args, label="args")
        lane_maker = None
        if isinstance(drawn, Example):
            operands, p = tuple(drawn.args), {**fixed_params, **drawn.params}
            lane_maker = drawn.lane_maker
        else:
            operands, p = tuple(drawn), dict(fixed_params)
        f = _caller(op, p)
        np_args = _as_numpy(operands)
        fx_args = [to_array(a) for a in operands]
        inp = _describe_input(np_args, p)

        def fail(check, detail):
            """This example fails ``check``: the message ends with the input."""
            raise _FAILED[check](f"{detail}\n  input:\n{inp}")

        def guarded(check, thunk, context=""):
            try:
                return thunk()
            except _Failed:
                raise
            except AssertionError as e:
                fail(check, f"{context}{e}")
            except Exception as e:  # the rule under test raised: that is its failure
                tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-3))
                fail(check, f"{context}raised {type(e).__name__}: {e}\n  (last frames)\n{tb}")

        first = "impl" if "impl" in selected else selected[0]
        out = guarded(first, lambda: f(*fx_args))
        out_leaves = tree_util.tree_leaves(out)

        if "impl" in selected:
            if reference is None:
                report.skip("impl", "no reference given")
            else:
                want = guarded("impl", lambda: reference(*np_args, **p))
                m = _compare_outputs(out, want, value_tol("impl"), "against the reference",
                                     check_dtype=False)
                if m:
                    fail("impl", m)
                report.ran["impl"] += 1

        if "shape" in selected:
            avals = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in fx_args]
            shapes = guarded("shape", lambda: tree_util.tree_leaves(eval_shape(f, *avals)))
            for k, (s, o) in enumerate(zip(shapes, out_leaves)):
                if tuple(s.shape) != tuple(o.shape) or s.dtype != o.dtype:
                    fail("shape", f"output {k}: the shape rule says {s.str_short()}, the impl "
                                  f"returns {_sig(np.asarray(o))}")
            if len(shapes) != len(out_leaves):
                fail("shape", f"the shape rule gives {len(shapes)} outputs, the impl "
                              f"{len(out_leaves)}")
            _check_default_mode(f, np_args, avals, fail)
            report.ran["shape"] += 1

        if "jit" in selected:
            got = guarded("jit", lambda: jit(f)(*fx_args))
            m = _compare_outputs(got, out, value_tol("jit"), "jit against eager")
            if m:
                fail("jit", m)
            report.ran["jit"] += 1

        if "vmap" in selected:
            lane_count = [0]

            def draw_lane():
                if lane_maker is not None:
                    lane_count[0] += 1
                    more = tuple(lane_maker(lane_count[0]))
                else:
                    more = data.draw(args, label="another vmap lane")
                    more = more.args if isinstance(more, Example) else tuple(more)
                more = _as_numpy(more)
                same = len(more) == len(np_args) and all(
                    type(m) is type(a) and np.shape(m) == np.shape(a)
                    and getattr(m, "dtype", None) == getattr(a, "dtype", None)
                    for m, a in zip(more, np_args))
                return more if same else None
            _check_vmap(f, np_args, out, data, draw_lane, unbatched_argnums, value_tol("vmap"),
                        guarded, fail, report)

        for check, mode in (("jvp", "fwd"), ("vjp", "rev")):
            if check not in selected or mode not in modes:
                continue
            diff = [i for i, a in enumerate(fx_args)
                    if dtypes.is_inexact(a.dtype) and i not in nondiff_argnums]
            if not diff:
                report.skip(check, "no float operand to differentiate")
                continue
            if not any(dtypes.is_inexact(o.dtype) for o in out_leaves):
                report.skip(check, "no float output: nothing to differentiate")
                continue

            def fd(*xs):
                full = list(fx_args)
                for i, x in zip(diff, xs):
                    full[i] = x
                return f(*full)
            fd.__qualname__ = f"{name} (its float operands {diff})"
            seed = data.draw(st.integers(0, 2 ** 31 - 1), label=f"{check} seed")
            over = tolerances.get(check, {})
            guarded(check, lambda: check_grads(fd, tuple(np_args[i] for i in diff),
                                               order=order, modes=(mode,), seed=seed, **over))
            report.ran[check] += 1

        for check, (_backend, checker) in BACKEND_CHECKS.items():
            if check in selected:
                checker(op, is_prim, f, np_args, fx_args, p, out, value_tol(check), guarded,
                        fail, report)

    if max_examples is None:
        max_examples = settings.default.max_examples
    # One hypothesis run per phase, in the order of CHECKS: a bug is blamed on the first
    # rule that breaks on any input (a wrong impl also makes finite differences disagree).
    for phase in _PHASES:
        todo = [c for c in phase if c in selected]
        if not todo:
            continue
        run = settings(max_examples=max_examples, deadline=None, database=None,
                       report_multiple_bugs=False,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                              HealthCheck.filter_too_much])(
            given(data=st.data())(_bound(run_checks, todo)))
        try:
            run()
        except _Failed as e:
            check = e.check
            rule = _RULE_OF[check][0 if is_prim else 1]
            raise OpCheckError(
                f"check_op({name}): check {check!r} failed: {rule} is wrong.\n"
                f"  (hypothesis shrank the input to the one shown)\n  {e.detail}\n"
                f"  To leave this check out: check_op(..., skip=({check!r},)).") from None
    return report


def _bound(run_checks, todo):
    def run(data):
        run_checks(data, todo)
    return run


def _check_vmap(f, np_args, out, data, draw_lane, unbatched, tol, guarded, fail, report):
    from hypothesis import strategies as st

    arrays = [i for i, a in enumerate(np_args) if isinstance(a, np.ndarray)
              and i not in unbatched]
    if not arrays:
        report.skip("vmap", "no array operand to map")
        return
    size = data.draw(st.integers(2, 3), label="vmap batch size")
    axes = []
    for i, a in enumerate(np_args):
        if i not in arrays:
            axes.append(None)
            continue
        axes.append(data.draw(st.one_of(st.none(), st.integers(0, a.ndim), st.just(-1)),
                              label=f"in_axes[{i}]"))
    if all(a is None for a in axes):
        axes[arrays[0]] = 0
    lanes = [list(np_args)]
    for k in range(1, size):
        other = draw_lane()   # another draw: used when it has the same types as lane 0
        lanes.append([np_args[i] if ax is None else
                      other[i] if other is not None else _lane(np_args[i], k)
                      for i, ax in enumerate(axes)])
    batched = [np_args[i] if ax is None else np.stack([lane[i] for lane in lanes], axis=ax)
               for i, ax in enumerate(axes)]
    where = f"vmap with in_axes={tuple(axes)}, batch of {size}"
    got = guarded("vmap", lambda: vmap(f, in_axes=tuple(axes))(*_as_fnx(batched)),
                  where + ": ")
    per_lane = [guarded("vmap", lambda lane=lane: f(*_as_fnx(lane))) for lane in lanes]
    want = [np.stack([np.asarray(tree_util.tree_leaves(o)[k]) for o in per_lane])
            for k in range(len(tree_util.tree_leaves(out)))]
    m = _compare_outputs(got, want, tol, f"{where}, against a loop over the batch")
    if m:
        lanes_text = "\n".join(f"  lane {k}: " + ", ".join(
            np.array2string(np.asarray(x), precision=6, threshold=12).replace("\n", "")
            for i, x in enumerate(lane) if axes[i] is not None)
            for k, lane in enumerate(lanes))
        fail("vmap", f"{m}\n  the mapped operands of each lane:\n{lanes_text}\n"
                     "  (the input below is lane 0)")
    report.ran["vmap"] += 1


def _check_kernel(op, is_prim, f, np_args, fx_args, params, out, tol, guarded, fail, report):
    if not is_prim or op.kernel is None:
        report.skip("kernel", "no GPU kernel (prim.kernel)" if is_prim else
                    "a function, not a primitive: check its primitives' kernels")
        return
    from ..kernels import cuda
    avals = [ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in np_args]
    try:
        source = cuda.elementwise_source(op, avals, params)
    except cuda.KernelUnsupported as e:
        report.skip("kernel", str(e))
        return
    want = _numpy_leaves(out)
    if cuda.device_available():
        got = guarded("kernel", lambda: cuda.run_elementwise(op, np_args, params))
        where = "the kernel on the GPU against the impl"
    else:
        if not cuda.compiler_available():
            report.skip("kernel", "neither a CUDA device nor NVRTC is available")
            return
        guarded("kernel", lambda: cuda.compile_source(source))
        if not cuda.host_compiler_available():
            report.ran["kernel"] += 1
            report.skip("kernel", "compiled with NVRTC only (no device, no g++ to run it)")
            return
        got = guarded("kernel", lambda: cuda.host_check(op, np_args, params))
        where = "the kernel source (NVRTC-compiled; run on the CPU) against the impl"
    m = _compare_outputs([got], want, tol, where)
    if m:
        fail("kernel", f"{m}\n  kernel source:\n{source.source}")
    report.ran["kernel"] += 1


def _check_onnx(op, is_prim, f, np_args, fx_args, params, out, tol, guarded, fail, report):
    if is_prim and op.onnx is None:
        report.skip("onnx", "no ONNX lowering (prim.onnx)")
        return
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        report.skip("onnx", "onnxruntime is not installed (pip install fnx[onnx])")
        return
    from .. import onnx as fnx_onnx
    try:
        if is_prim:
            avals = [ShapeDtypeStruct(a.shape, a.dtype) for a in fx_args]
            model = fnx_onnx.lower_primitive(op, avals, params)
        else:
            model = fnx_onnx.export(f, *fx_args)
    except MissingRuleError as e:   # a primitive inside without a lowering, complex dtypes
        report.skip("onnx", str(e).splitlines()[0])
        return
    except Exception as e:
        if is_prim:
            fail("onnx", f"lowering raised {type(e).__name__}: {e}")
        report.skip("onnx", f"export failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        return
    try:
        got = fnx_onnx.run(model, *np_args)
    except Exception as e:
        if type(e).__name__ == "NotImplemented":   # onnxruntime lacks a kernel for a dtype
            report.skip("onnx", f"onnxruntime: {str(e).splitlines()[0]}")
            return
        fail("onnx", f"onnxruntime raised {type(e).__name__}: {e}")
    m = _compare_outputs(got, out, tol, "onnxruntime against the impl")
    if m:
        fail("onnx", m)
    report.ran["onnx"] += 1


# The checks of a primitive's backend lowerings, by check name: the backend whose rule
# (``lowering(prim, backend)``) each runs against the impl, and how. The "numpy" backend's
# rules are what the "jit" check runs.
# Examples per check_op call run on the GPU device: each new shape is a new program to
# compile (for the emulated device, with g++), so a few examples, not all of them.
GPU_EXAMPLES = 2


def _check_gpu(op, is_prim, f, np_args, fx_args, params, out, tol, guarded, fail, report):
    """The op on the GPU device (the emulated one without a GPU), eagerly and under jit,
    against the CPU: its outputs must stay on the device and equal the CPU's."""
    from ..core.array import device_put_array
    from ..core.backend import all_devices
    gpus = [d for d in all_devices() if d.platform == "gpu"]
    if not gpus:
        report.skip("gpu", "no GPU device (FNX_GPU_EMULATE=1 gives the emulated one)")
        return
    if report.ran["gpu"] >= GPU_EXAMPLES:
        return
    gpu = gpus[0]
    if getattr(gpu, "emulated", False):
        from ..kernels import emulate
        if not emulate.emulator_available():
            report.skip("gpu", "the emulated GPU needs g++ to run its kernels")
            return
    dev_args = [device_put_array(a, gpu) if isinstance(a, Array) else a for a in fx_args]
    for how, run in (("eagerly", lambda: f(*dev_args)), ("under jit", lambda: jit(f)(*dev_args))):
        got = guarded("gpu", run)
        leaves = tree_util.tree_leaves(got)
        for k, o in enumerate(leaves):
            # (eagerly, an output made from no operand is on the default device, as JAX)
            if how == "under jit" and isinstance(o, Array) and o.device is not gpu:
                fail("gpu", f"{how}: output {k} came back on {o.device}, not on {gpu}")
        m = _compare_outputs(got, out, tol, f"on {gpu} {how}, against the CPU")
        if m:
            fail("gpu", m)
    report.ran["gpu"] += 1


BACKEND_CHECKS = {"kernel": ("cuda", _check_kernel), "onnx": ("onnx", _check_onnx),
                  "gpu": ("cuda", _check_gpu)}
