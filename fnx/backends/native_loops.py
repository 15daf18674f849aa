"""Fused native loops for the NumPy backend: jit's elementwise clusters and row
reductions as compiled C++ loops, where NumPy's one-pass-per-ufunc model is the limit.

``plan_native(ir)`` is an IR pass the NumPy backend runs before lowering. It plans the IR
with the GPU backend's kernel generator (``fnx.kernels.fusion.plan_program(ir,
target="host")``: the same clusters, rendered as C++ for the CPU), and replaces each
cluster worth it by one ``native_loop`` equation: its operands in, the values it computes
that anything outside reads out. The NumPy code generator then lowers that equation like
any other, so ``jitted.lower(...).source`` shows it (a ``native_loop`` call) and
``.kernels`` the C++ text of its loops. All the kernels of one jitted function
compile as one library (``fnx.kernels.host``), cached on disk.

**Which clusters.** Those whose loops vectorize (they call no C library function but
the float32 vector math of ``fnx.kernels.host``: NumPy's SIMD loops beat a fused loop of
scalar ``exp`` calls), and of those elementwise kernels of two computing equations or
more, and row kernels (softmax, layernorm, log-sum-exp: reductions over trailing axes,
with their producers and consumers), whose domain has at least ``FNX_NATIVE_MIN``
elements (default 65536), or, for an elementwise kernel of arithmetic alone, 16 times that
for two equations and 4 times for three (NumPy's in-place ufuncs make one pass over
memory per equation, a fused loop one in all; few passes gain little, and lose the
in-place buffers the NumPy lowering writes into). Smaller ones
stay on NumPy's ufuncs, whose call overhead is lower than a native call's (a few µs). Reductions over leading or middle axes, products, and reductions
eager computes with a plan of its own (``core.numpy_rules.reduce_plan``) stay on NumPy:
a native loop could not keep eager's order of operations.

**Results.** Elementwise arithmetic, comparisons, conversions and selection round exactly
as NumPy's ufuncs do (IEEE single and double operations, no fused multiply-add, no fast
math), so a native loop gives the eager result bit for bit. Transcendental functions come
from the C library and may differ from NumPy's own SIMD implementations in the last bit
(within the ulp bounds ``tests/test_native_loops.py`` checks). A float sum stores its
row's terms and adds them with NumPy's own pairwise summation (``fnx.kernels.host``), so
it equals eager's to the bit; ``max``/``min``/``and``/``or`` are exact in any order. So jit
and eager agree bit for bit wherever no transcendental function is in a native loop.

``FNX_NATIVE=0`` turns native loops off; without a C++ compiler they are off, and the
first jit that would have used them says once (a ``NativeLoopsUnavailable`` warning) how to
get them.
"""
from __future__ import annotations

import ctypes
import math
import os
import re
import threading
import warnings

import numpy as np

from ..core import rings
from ..core.backend import register_lowering
from ..core.cuda_rules import KernelUnsupported
from ..core.ir import Eqn, Literal, dce, sub_irs
from ..core.numpy_rules import NumpyRule, reduce_plan
from ..core.primitive import Primitive

__all__ = ["NativeLoopsUnavailable", "native_loop_p", "plan_native", "enabled"]


class NativeLoopsUnavailable(UserWarning):
    """jit would run fused native loops here, but there is no C++ compiler."""


def enabled() -> bool:
    return os.environ.get("FNX_NATIVE", "1") not in ("", "0")


def native_min() -> int:
    try:
        return max(1, int(os.environ.get("FNX_NATIVE_MIN", "65536")))
    except ValueError:
        return 65536


class NativeKernel:
    """One compiled loop: ``__call__(*operands) -> results``, NumPy arrays it writes (a
    fresh one, or one of its last two calls' results that nothing else holds); a kernel of
    one result also takes ``out=``, a C-contiguous buffer of its shape and dtype, as a
    ufunc does (jit hands it a buffer of its scratch arena or output ring). It never
    returns an operand's buffer."""

    def __init__(self, kernel, into=()):
        self.name = kernel.name
        self.source = kernel.source
        self.out_avals = [o.aval for o in kernel.outputs]
        self.in_dtypes = [np.dtype(x.aval.dtype) for x in kernel.inputs]
        self.kind = kernel.kind
        self.into = into  # the operands its result may be written over (_native_kernel)
        self.fn = None  # the library's function, bound when the program is loaded
        self._rings = [[] for _ in self.out_avals]
        self._lock = threading.Lock()
        self.takes_out = len(self.out_avals) == 1

    def __call__(self, *xs, out=None):
        if out is not None:
            av = self.out_avals[0]
            if not (self.takes_out and isinstance(out, np.ndarray) and out.flags.c_contiguous
                    and out.flags.writeable and out.shape == tuple(av.shape)
                    and out.dtype == np.dtype(av.dtype)):
                raise ValueError(f"native loop {self.name}: out= must be a writable "
                                 f"C-contiguous {av.dtype}{list(av.shape)} array (one "
                                 f"result), got {getattr(out, 'dtype', type(out).__name__)}"
                                 f"{list(getattr(out, 'shape', ()))}")
            outs = [out]
        else:
            # results of the last two calls that nothing else holds any more are written
            # again (a fresh large array costs a page fault per 4 KiB on first touch; two,
            # as a caller often still holds the last result while it makes the next)
            with self._lock:
                outs = [rings.take(ring, av.shape, av.dtype)
                        for ring, av in zip(self._rings, self.out_avals)]
        ins = [np.ascontiguousarray(x, d) for x, d in zip(xs, self.in_dtypes)]  # (kept alive)
        self.fn(*[a.ctypes.data for a in ins], *[o.ctypes.data for o in outs], threads())
        return list(outs)

    def __repr__(self):
        return f"NativeKernel({self.name}, {self.kind})"


def _native_loop_rule(*avals, kernel):
    return list(kernel.out_avals)


def _native_loop_impl(*xs, kernel):
    return kernel(*xs)


native_loop_p = Primitive("native_loop", shape_rule=_native_loop_rule, impl=_native_loop_impl,
                          multiple_results=True)
# its results are buffers of its own or jit's, never an operand's: so an operand may sit in
# jit's scratch arena (a gradient read by a fused update no longer costs a fresh buffer,
# and its page faults, per call)
native_loop_p.never_aliases_operands = True
_LOWERED = "made by the NumPy backend's lowering, after every transformation has run"
native_loop_p.not_needed = {"jvp": _LOWERED, "batch": _LOWERED}


def _native_loop_specialize(avals, params, permutation=None):
    """The generated code calls the kernel itself (a transpose fused into it, applied to
    its result)."""
    kernel = params["kernel"]
    if permutation is None:
        return kernel
    if len(kernel.out_avals) != 1:  # pragma: no cover - transposes fuse into one result
        raise NotImplementedError("native_loop: a transpose of one of several results")
    return lambda *xs: [kernel(*xs)[0].transpose(permutation)]


register_lowering(native_loop_p, "numpy", NumpyRule(
    specialize=_native_loop_specialize, transposes=True,
    in_place=lambda params: params["kernel"].into))


_warned = []
_THREADS = []  # the threads a loop may use, once known (1 after a fork)


def threads() -> int:
    """How many threads a native loop may use: ``OMP_NUM_THREADS``, else the CPUs this
    process may run on; 1 in a child process forked from this one (the OpenMP runtime's
    threads are not in the child, and a parallel loop would wait for them forever)."""
    if not _THREADS:
        try:
            n = int(os.environ.get("OMP_NUM_THREADS", "").split(",")[0])
        except ValueError:
            n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
                os.cpu_count() or 1)
        _THREADS.append(max(1, n))
    return _THREADS[0]


def _after_fork_in_child():
    _THREADS[:] = [1]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

# the reductions a native loop computes as eager does: their NumPy ufunc (a float sum adds
# as NumPy's pairwise summation; max, min, and, or give the same result in any order)
_REDUCE_UFUNCS = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum,
                  "reduce_and": np.logical_and, "reduce_or": np.logical_or}


# what a kernel may call and still run vectorized: the vector math (float32), operations
# that are instructions (square root, rounding, sign), fnx's helpers built from them, and
# the row sums (and the next row's prefetch); any other call (a double exp, a float sin or
# erf) is the C library's, one element at a time, and NumPy's own SIMD loops beat the fused
# loop there
_VECTOR_CALLS = frozenset({
    "expf", "expm1f", "logf", "log1pf", "tanhf", "erff", "sqrtf", "sqrt", "fabsf", "fabs", "floorf",
    "floor", "ceilf", "ceil", "truncf", "trunc", "rintf", "rint", "nearbyintf", "nearbyint",
    "copysignf", "copysign", "fnx_max", "fnx_min", "fnx_fsign", "fnx_f2i", "fnx_copysign",
    "fnx_floor", "fnx_logistic", "fnx_pairwise_sum", "fnx_pairwise_sum_n", "__builtin_prefetch",
    "malloc", "free"})
_NOT_CALLS = frozenset({"for", "if", "while", "return", "sizeof", "float", "double", "int",
                        "bool", "long", "unsigned", "char", "short", "signed", "void"})
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\s*\(")


_TRANSCENDENTAL = frozenset({"expf", "expm1f", "logf", "log1pf", "tanhf", "erff",
                             "fnx_logistic"})
# An elementwise kernel of arithmetic only saves NumPy's passes over memory, one per
# equation but the first: it needs this many times FNX_NATIVE_MIN elements, by its number
# of computing equations. Measured on one core: four equations or more gain from 65536
# float32 elements on (a BatchNorm + ReLU over 401408: 0.35 ms -> 0.07 ms); two gain
# little, and in a training step lose the in-place buffers NumPy's ufuncs write into
# (an SGD update ``p - lr * g`` of 401408 weights ran 1.5% slower native).
_ARITHMETIC_ONLY_FACTOR = {2: 16, 3: 4}


def _calls(source):
    """The functions a host kernel's loops call (``None``: one that does not vectorize,
    see ``_VECTOR_CALLS``)."""
    body = "\n".join(ln for ln in source.split("{", 1)[1].splitlines()
                     if not ln.lstrip().startswith("#"))  # (pragmas' clauses are not calls)
    calls = {c for c in _CALL.findall(body) if c not in _NOT_CALLS}
    if "double" in body and "fnx_logistic" in calls:  # its double form calls exp
        return None
    return calls if calls <= _VECTOR_CALLS else None


def _worth_it(k, fusion, least):
    """Whether kernel ``k`` runs as a native loop: its loops vectorize, and it is an
    elementwise kernel of two or more computing equations over ``least`` elements or more
    (up to 16 times that with no transcendental function: ``_ARITHMETIC_ONLY_FACTOR``), or
    a row kernel over ``least`` or
    more whose every reduction is one eager computes with ``ufunc.reduce`` over its
    operand's trailing axes (NumPy's order, which the loop keeps; not a product, and not
    one with a reduction plan of its own)."""
    calls = _calls(k.source)
    size = math.prod(k.domain)
    if calls is None or size < least:
        return False
    if k.kind == "map":
        computing = sum(map(fusion.computes, k.eqns))
        if computing < 2:
            return False
        factor = 1 if calls & _TRANSCENDENTAL else _ARITHMETIC_ONLY_FACTOR.get(computing, 1)
        return size >= least * factor
    if k.kind != "rows":
        return False
    for e in k.eqns:
        if not e.prim.name.startswith("reduce_"):
            continue
        ufunc = _REDUCE_UFUNCS.get(e.prim.name)
        x = e.inputs[0].aval
        axes = sorted(a % x.ndim for a in e.params["axes"])
        if ufunc is None or axes != list(range(x.ndim - len(axes), x.ndim)):
            return False
        if reduce_plan(ufunc, tuple(x.shape), x.dtype, tuple(axes)) is not None:
            return False
    return True


def plan_native(ir):
    """``ir`` with its large fused clusters as ``native_loop`` equations (see the module
    docstring); ``ir`` itself where there are none, or native loops are off."""
    if not enabled() or not ir.eqns:
        return ir
    from ..kernels import fusion
    from ..kernels import host
    least = native_min()
    # planning costs time (about 0.1 ms an equation): only where some value is large enough
    if not any(fusion.computes(e) and math.prod(o.aval.shape) >= least
               for e in ir.eqns for o in e.outputs):
        return ir
    try:
        steps = fusion.plan_program(ir, target="host")
    except KernelUnsupported:
        return ir
    chosen = [s for s in steps if isinstance(s, fusion.Kernel) and s.outputs
              and _worth_it(s, fusion, least)]
    if not chosen:
        return ir
    if not host.compiler_available():
        if not _warned:
            _warned.append(True)
            warnings.warn(f"fnx: jit could run fused native loops here but finds no C++ "
                          f"compiler ({host.compiler()!r}): it runs NumPy's ufuncs instead. "
                          "Install g++ (or set CXX) for the fast path; FNX_NATIVE=0 "
                          "silences this.", NativeLoopsUnavailable, stacklevel=2)
        return ir
    kernels = {k.name: _native_kernel(k, fusion) for k in chosen}
    try:
        lib = host.load("".join(k.source for k in kernels.values()))
    except (host.HostCompileError, OSError) as e:
        # a compiler that cannot build them (too old, no OpenMP, no disk space): NumPy's
        # ufuncs, and the reason said once
        if not _warned:
            _warned.append(True)
            warnings.warn(f"fnx: native loops could not be built ({type(e).__name__}: "
                          f"{str(e).splitlines()[0]}); jit runs NumPy's ufuncs instead. "
                          "FNX_NATIVE=0 silences this.", NativeLoopsUnavailable, stacklevel=2)
        return ir
    for k in chosen:
        fn = kernels[k.name].fn = getattr(lib, kernels[k.name].name)
        fn.argtypes = [ctypes.c_void_p] * (len(k.inputs) + len(k.outputs)) + [ctypes.c_int]
        fn.restype = None
    absorbed = set()
    for k in chosen:
        absorbed.update(map(id, k.eqns))
    chosen_ids = set(map(id, chosen))
    # the new equations in the planned order: constants (computed from literals only, and
    # possibly inlined by several kernels) first, for whichever equation still reads them
    consts = _constant_eqns(ir)
    const_ids = set(map(id, consts))
    eqns = list(consts)
    for s in steps:
        if id(s) in chosen_ids:
            eqns.append(Eqn(native_loop_p, list(s.inputs), list(s.outputs),
                            {"kernel": kernels[s.name]}))
        else:
            for e in ([s] if isinstance(s, Eqn) else s.eqns):
                if id(e) not in const_ids:
                    eqns.append(e)
    out = dce(ir.replace(eqns=eqns))
    out.native_kernels = [k.source for k in kernels.values()]
    return out


def _native_kernel(k, fusion):
    """The ``NativeKernel`` of host kernel ``k``. An elementwise kernel of one result may
    write it over an operand that it reads only at the element it writes (``into``: their
    positions; those pointers lose ``__restrict__``): jit then hands it such an operand
    where it dies, as it does a ufunc, so a fused update ``p - lr * g`` writes over the
    gradient instead of into a third buffer."""
    into = ()
    if k.kind == "map" and len(k.outputs) == 1:
        into = tuple(j for j in range(len(k.inputs))
                     if fusion.in_place(k, [(j, 0)]) is not None)
        if into:
            k = fusion.in_place(k, [(j, 0) for j in into])
    return NativeKernel(k, into)


def _constant_eqns(ir):
    """The equations of ``ir`` that compute from literals only (through each other)."""
    out, made = [], set()
    for e in ir.eqns:
        if (not any(sub_irs(e.params)) and not getattr(e.prim, "effectful", False)
                and all(type(v) is Literal or v in made for v in e.inputs)):
            out.append(e)
            made.update(e.outputs)
    return out
