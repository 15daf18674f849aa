"""Fused CUDA kernels for the GPU backend: which equations of an IR run together in one
generated kernel, and the CUDA text of each such kernel.

``plan_program(ir)`` returns the IR's steps in execution order: each is either one of the
IR's equations (an ``Eqn``, which the backend runs through its primitive's CUDA rule or a
CuPy call) or a ``Kernel``, one generated ``__global__`` function computing a *cluster* of
equations. ``program_source(kernels)`` is the text of ONE NVRTC program holding every
kernel of a jitted function (``fnx.kernels.cuda.PREAMBLE``, this module's ``PREAMBLE``,
then the kernels). Every equation of the IR is in exactly one step.

Launching
---------
``kernel(grid, block, (*input_buffers, *output_buffers), shared_mem=shared_bytes)``.
``inputs`` are the IR variables the kernel reads (``const T* __restrict__``, C-contiguous;
a rank-0 value is a 1-element buffer), ``outputs`` the ones it writes (``T* __restrict__``,
C-contiguous buffers of ``aval.shape`` the caller allocates): exactly the values it
computes that a later step or the IR's outputs read. There are no scalar arguments: the
shapes of a jit signature are static, so sizes and strides are constants in the source.
Literals are folded in as C literals (``fnx.core.cuda_rules.c_literal``). Kernels are
named ``fnx_fused_<hash of their text>``, so equal kernels have equal names. No kernel
uses dynamic shared memory today (``shared_bytes`` is 0; its ``__shared__`` arrays are
static) and none uses atomics, so every result is the same from run to run.

What fuses
----------
* Elementwise primitives with a ``"cuda"`` rule (``lowering(p, "cuda")``, the C expression
  of one element, see ``fnx.core.cuda_rules``), ``convert_element_type`` and ``select_n``
  among them; operands are shaped like the result or rank 0.
* Index-only primitives, which generate no code of their own: ``broadcast_in_dim`` (the
  operand is read with a stride of 0 along the broadcast axes, never materialized),
  ``transpose`` (permuted index arithmetic), ``squeeze``, ``expand_dims`` and a
  ``reshape`` that only adds or drops size-1 axes; a general ``reshape`` (no
  ``dimensions``) inside an elementwise-only kernel whose result is in the kernel's own
  layout (the element's flat index is the same); and ``iota`` (the value is an index).
* Reductions ``reduce_sum``, ``reduce_max``, ``reduce_min``, ``reduce_prod``,
  ``reduce_and``, ``reduce_or`` over any axes, together with their elementwise producers
  and the consumers that use the reduced value broadcast back over the reduced axes
  (softmax, layernorm, log-sum-exp, cross-entropy: elementwise -> reduce -> elementwise
  using the row value -> maybe another reduce -> elementwise; batch norm over N, H, W of
  NCHW) or at the reduced rank (the mean of a loss), any number of reductions in sequence
  or side by side, all over the same axes.
* A multiple-results primitive with a ``"cuda"`` rule (``threefry2x32``) under the
  convention below.
Everything else (``dot_general``, gather/scatter, sort, cumulative ops, control flow,
convolutions, ...) is an ``Eqn`` step, and so is an equation with a dtype that has no C
type (float16, bfloat16, complex: ``cuda_type`` raises ``KernelUnsupported``), an empty
array, a reduction over size-1 axes only (a reshape), or a cluster made only of
index-only primitives (a broadcast or transpose alone is a view for CuPy, not a copy).
Constant equations read by such a step get a buffer: an index-only one is an ``Eqn``
step, one that computes (an ``iota`` and arithmetic on it) a kernel without inputs.

The convention for a rule with several results (``prim.multiple_results``): it is called as
``rule(xs, in_dtypes, out_dtypes, ys, **params)``, where ``xs`` are the operands' C
expressions as for a one-result rule and ``ys[k]`` names a variable of type
``cuda_type(out_dtypes[k])`` the caller has declared; it returns C *statements* that assign
every ``ys[k]``. The caller puts them in a block of their own (``{ ... }``), so temporaries
the statements declare are local to it; their names must not start with ``v``, ``in``,
``out`` or ``fnx_`` (the generator's).

How clusters are formed
-----------------------
The equations are visited last to first (consumers before producers). Each cluster has a
*domain*, the index space its threads cover (the shape of the value it was started from,
or, for a reduction, the shape of its operand, its kept axes first when the reduced axes
are not consecutive), and each value computed in it a *view*: for each of the value's
axes, the domain axis it is indexed by (or none: a size-1 axis). An equation joins the
cluster of a consumer when the consumers in that cluster need its results under one view,
which the primitive's index rule carries back to its operands (a broadcast drops axes, a
transpose permutes them, a reduction puts its reduced axes on the domain's reduced block,
which must be consecutive domain axes and the same for every reduction of the cluster).
A reduction joining an elementwise cluster may change its domain: the cluster's axes are
reordered so that the reduced ones come last, or, when the cluster works at the reduced
rank (a per-row value, a scalar), its domain becomes the reduction's operand shape. When
the equation's results are also needed outside the cluster, each element must be computed
by exactly one thread (the view covers the domain, or the kept axes for a value of the
reduced rank), and no path may lead from those outside consumers back into the cluster
(the steps must stay a DAG). Otherwise the equation starts a cluster of its own.
Equations computed from literals only (a ``broadcast_in_dim`` of 0.0, an ``iota`` and the
index arithmetic on it) are computed inline by every kernel that reads them, and listed
in the first one's ``eqns``. Independent clusters over the same domain are then merged, so
one kernel reads their common operands once. The steps are ordered topologically, ties by
the position of their first equation.

The kernels
-----------
* Elementwise (no reduction): a grid-stride loop over the domain's flat index ``i``
  (256 threads a block); each operand element is read once per element, each result
  written once. A value's index is computed from ``i`` with the domain's sizes as
  constants (``i / 4096``, ``i % 4096``; a run of axes in the domain's order is one term).
* With reductions, the domain is ``outer + reduced + inner`` (groups of axes of sizes
  ``O``, ``R``, ``I``): a *slot* is one element of the reduced result (``o``, ``j``), the
  reduced index is ``r``. Values that do not depend on the reduced axes (the reduced
  values themselves, per-row terms such as ``1 / sqrt(var + eps)``) are computed once per
  slot; the others in loops over ``r``, one pass per level of dependent reductions (the
  reductions that need no other reduction's result first, then the ones that need only
  those, ...), each result written in the first pass that can compute it, or in a final
  pass. Three shapes:

  - ``I == 1``, ``R > 256``: a block per row (``T`` threads, a power of two from 128 to
    1024, about ``R / 8``); thread ``t`` takes ``r = t, t + T, ...``;
  - ``I == 1``, ``R <= 256``: a warp per row, 8 rows per block of (32, 8) threads;
    lane ``l`` takes ``r = l, l + 32, ...``;
  - ``I > 1`` (a reduction over leading or middle axes, e.g. a bias gradient): a block of
    (32, Y) threads per slot tile (32 consecutive ``j``, read coalesced; ``Y`` a power of
    two up to 32), thread ``(x, y)`` takes ``r = y, y + Y, ...``.

  When each thread takes at most 16 elements of a row, the passes are unrolled and an
  operand read by more than one pass is kept in registers (up to 64 per thread), so it is
  read from global memory once (layernorm reads x once).

Rounding
--------
Each element is computed by the primitive's rule, with its NumPy semantics: kernels are
compiled without FMA contraction (NVRTC ``-fmad=false``; no ``fmaf`` is written here),
with IEEE division and square root and without flush-to-zero. Elementwise results equal
the NumPy impl's up to the CUDA math library's ulp bounds (bit for bit for integer and
bool ops). Reductions are deterministic but summed in a different order than NumPy's
pairwise sum: each thread combines its elements in increasing ``r``; then a block per row
combines its threads by warp shuffles (offsets 16, 8, 4, 2, 1: a tree over the 32 lanes),
then the per-warp results by the same tree in the first warp; a warp per row uses the
shuffle tree only; the (32, Y) tiles combine the Y partial results of a column by a tree in
shared memory (``y`` with ``y + Y/2``, then ``y + Y/4``, ...). Float sums therefore differ
from NumPy's in the last bits, by at most about ``n * eps`` relative to the sum of
magnitudes. ``max``/``min`` propagate NaN as NumPy does.

On the CPU
----------
``plan_program(ir, target="host")`` forms the same clusters and renders each as a C++
function of the same arguments (``extern "C" void name(const T* in0, ..., T* out0)``, no
CUDA keywords), for ``fnx.kernels.host`` to compile and ``fnx.backends.native_loops`` to
call. An elementwise kernel is a nest of loops, one per run of domain axes that every
value indexes alike (an operand broadcast along some axes is indexed by the other runs'
counters: no division, contiguous loads; an unbroadcast cluster is one flat loop), the
innermost vectorized (``#pragma omp simd``), the outer ones split over ``fnx_nt`` threads
(the kernel's last argument) from ``FNX_PARALLEL_MIN`` elements on. A
reduction kernel loops over its slots in parallel, one slot per iteration, and runs each
pass over ``r`` in lanes of 16 consecutive elements (``#pragma omp simd``; the last,
partial lane after). ``max``/``min``/``and``/``or`` and integer sums keep one partial
result per lane, combined by a pairwise tree over the lanes at the end of the pass; a
float sum stores its terms in a per-thread row buffer and adds them with NumPy's own
pairwise summation (``fnx_pairwise_sum``), so it is NumPy's sum to the bit; a sum of an
input's contiguous rows as they are (a mean of ``x``) adds them where they lie, no copy.
A row kernel's last pass prefetches the next slot's input rows (its first pass would
otherwise wait on memory). Kernels of
kind ``"rows"`` reduce trailing axes (``I == 1``), ``"columns"`` leading or middle ones.

Limits
------
One slot (a reduced element) is always computed by one block or one warp: a reduction of
a whole large array to a scalar runs on one block (correct, but on one multiprocessor).
Reductions in one kernel all reduce the same domain axes (a column sum of a row kernel's
result is a second kernel); ``argmax``/``argmin``, ``cumsum`` and friends are not fused; a
``reshape`` that merges or splits axes fuses only into elementwise kernels; ``slice``,
``pad``, ``concatenate``, ``rev`` and ``dynamic_slice`` are steps of their own; no value is
computed twice to save a write (constants aside, an equation is in one kernel only).
Planning is quadratic in the worst case (a reachability check when a value leaves a
cluster): about 0.2 s for the 1740 equations of a CNN training step.
"""
from __future__ import annotations

import dataclasses
import hashlib
import heapq
import math
import re

import numpy as np

from ..core.backend import lowering
from ..core.cuda_rules import KernelUnsupported, c_literal, cuda_type, wrap
from ..core.ir import Literal, sub_irs
from ..lax.reduction import (reduce_and_p, reduce_max_p, reduce_min_p, reduce_or_p,
                             reduce_prod_p, reduce_sum_p)
from ..lax.shape import (broadcast_in_dim_p, expand_dims_p, iota_p, reshape_p, squeeze_p,
                         transpose_p)
from . import cuda as _cuda

__all__ = ["Kernel", "plan_program", "program_source", "PREAMBLE", "plan_summary"]

# Helpers of the fused kernels, after ``fnx.kernels.cuda.PREAMBLE`` (whose ``FNX_FN`` they
# use): warp shuffles of every kernel type (CUDA's own take 32- and 64-bit types only).
PREAMBLE = r"""// ---- fnx fused-kernel helpers: warp shuffles of every element type ----
template <typename T> FNX_FN T fnx_shfl_down(T v, int d) {
    return __shfl_down_sync(0xffffffffu, v, d);
}
template <typename T> FNX_FN T fnx_shfl_idx(T v, int lane) {
    return __shfl_sync(0xffffffffu, v, lane);
}
#define FNX_SHFL_VIA_INT(T)                                                              \
    FNX_FN T fnx_shfl_down(T v, int d) { return (T)__shfl_down_sync(0xffffffffu, (int)v, d); } \
    FNX_FN T fnx_shfl_idx(T v, int l) { return (T)__shfl_sync(0xffffffffu, (int)v, l); }
FNX_SHFL_VIA_INT(bool)
FNX_SHFL_VIA_INT(signed char)
FNX_SHFL_VIA_INT(unsigned char)
FNX_SHFL_VIA_INT(short)
FNX_SHFL_VIA_INT(unsigned short)
#undef FNX_SHFL_VIA_INT
// ---- end of fused-kernel helpers ----
"""

_MAP_BLOCK = 256
_HOST_LANES = 16         # on the CPU, a reduction keeps this many partial results
_MAX_GRID = 65535
_WARP_ROW_MAX = 256      # rows up to this long get a warp each
_UNROLL_MAX = 16         # elements per thread up to which passes are unrolled and cached
_CACHE_REGS = 64         # cached operand elements per thread at most
_SHARED_LIMIT = 40 * 1024


@dataclasses.dataclass(eq=False)
class Kernel:
    """One generated ``__global__`` function computing a cluster of equations.

    ``name``: its C identifier (``fnx_fused_<hash of its text>``); ``source``: its CUDA
    text (``extern "C" __global__ ...``), without the preambles; ``inputs``/``outputs``:
    the IR variables it reads and writes, in argument order (inputs first); ``grid``,
    ``block``: the launch shape; ``shared_bytes``: dynamic shared memory; ``eqns``: the
    IR equations it computes, in IR order; ``kind``: ``"map"`` (elementwise), ``"block"``
    (a block per row), ``"warp"`` (a warp per row) or ``"tile"`` (columns in (32, Y)
    tiles); ``domain``: the index space its threads cover."""
    name: str
    source: str
    inputs: list
    outputs: list
    grid: tuple
    block: tuple
    shared_bytes: int
    eqns: list
    kind: str = "map"
    domain: tuple = ()

    def __repr__(self):
        prims = ", ".join(e.prim.name for e in self.eqns)
        return (f"Kernel({self.name}, {self.kind} over {self.domain}, grid={self.grid}, "
                f"block={self.block}, {len(self.inputs)} in, {len(self.outputs)} out: "
                f"{prims})")


def program_source(kernels) -> str:
    """The text of one NVRTC program holding ``kernels`` (each once, by name): the two
    preambles, then every kernel."""
    seen, parts = set(), []
    for k in kernels:
        if isinstance(k, Kernel) and k.name not in seen:
            seen.add(k.name)
            parts.append(k.source)
    return _cuda.PREAMBLE + PREAMBLE + "".join(parts)


def plan_summary(steps) -> str:
    """One line per step: the kernels with their kind and equations, the other steps by
    primitive (for reading a plan)."""
    lines = []
    for s in steps:
        if isinstance(s, Kernel):
            lines.append(f"kernel {s.name} [{s.kind} {s.domain}] "
                         f"{' '.join(e.prim.name for e in s.eqns)}")
        else:
            lines.append(f"eqn    {s.prim.name}")
    return "\n".join(lines)


# --- views ------------------------------------------------------------------------------
# A view says where a value's elements sit in a cluster's domain: one entry per axis of
# the value, the domain axis that indexes it, or None for a size-1 axis (index 0). LINEAR
# (elementwise kernels only): the value's flat index is the domain's flat index.

LINEAR = "linear"


class _Reject(Exception):
    """The equation cannot join the cluster."""


def _identity_view(shape):
    return tuple(k if s != 1 else None for k, s in enumerate(shape))


def _norm_view(view, shape, domain):
    if view is LINEAR:
        return _identity_view(shape) if tuple(shape) == tuple(domain) else LINEAR
    return tuple(None if s == 1 else a for a, s in zip(view, shape))


_VIEW_PRIMS = (broadcast_in_dim_p, reshape_p, squeeze_p, expand_dims_p, transpose_p)
_REDUCERS = {reduce_sum_p: "sum", reduce_max_p: "max", reduce_min_p: "min",
             reduce_prod_p: "prod", reduce_and_p: "and", reduce_or_p: "or"}


def _axes(params_axes, ndim):
    return tuple(sorted(a % ndim for a in params_axes))


def _classify(e):
    """"elem", "view", "iota", "reduce", or None (the equation is a step of its own)."""
    avals = [v.aval for v in e.inputs] + [v.aval for v in e.outputs]
    if not e.outputs or any(0 in tuple(a.shape) for a in avals):
        return None
    if any(True for _ in sub_irs(e.params)) or getattr(e.prim, "effectful", False):
        return None
    try:
        for a in avals:
            cuda_type(a.dtype)
    except KernelUnsupported:
        return None
    p = e.prim
    if p in _VIEW_PRIMS:
        if p is reshape_p and e.params.get("dimensions") is not None:
            return None
        return "view"
    if p is iota_p:
        return "iota"
    if p in _REDUCERS:
        x = e.inputs[0]
        if type(x) is Literal or not x.aval.shape:
            return None
        axes = _axes(e.params["axes"], x.aval.ndim)
        if all(x.aval.shape[a] == 1 for a in axes):
            return None   # nothing to reduce: a reshape
        if _REDUCERS[p] in ("sum", "prod") and x.aval.dtype.kind == "b":
            return None
        return "reduce"
    rule = lowering(p, "cuda")
    if rule is None:
        return None
    out_shape = tuple(e.outputs[0].aval.shape)
    if any(tuple(o.aval.shape) != out_shape for o in e.outputs):
        return None
    if any(tuple(x.aval.shape) not in ((), out_shape) for x in e.inputs):
        return None
    if len(e.outputs) > 1 and not p.multiple_results:
        return None
    try:   # the rule may refuse a dtype (integer_pow on uint64, a float-only function)
        _call_rule(e, [f"x{k}" for k in range(len(e.inputs))],
                   [f"y{k}" for k in range(len(e.outputs))])
    except KernelUnsupported:
        return None
    return "elem"


def _call_rule(e, xs, ys):
    """The rule's text: an expression (one result) or statements assigning ``ys``."""
    rule = lowering(e.prim, "cuda")
    in_dtypes = [np.dtype(v.aval.dtype) for v in e.inputs]
    if e.prim.multiple_results:
        text = rule(xs, in_dtypes, [np.dtype(o.aval.dtype) for o in e.outputs], ys, **e.params)
    else:
        text = rule(xs, in_dtypes, np.dtype(e.outputs[0].aval.dtype), **e.params)
    if not isinstance(text, str) or not text.strip():
        raise KernelUnsupported(f"{e.prim.name}: its cuda rule returned {text!r}, not C text")
    return text


def _input_views(e, kind, vo, domain, split):
    """The views of ``e``'s operands (None for a literal) when its results have view
    ``vo`` in a cluster over ``domain`` with reduced block ``split`` (None: elementwise
    only); for a reduction also the split it implies. Raises _Reject."""
    p = e.prim
    if kind == "iota":
        return [], split
    if kind == "reduce":
        view, split = _reduce_view(e, vo, domain, split)
        return [view], split
    if kind == "elem":
        return [None if type(x) is Literal else (() if not x.aval.shape else vo)
                for x in e.inputs], split
    x = e.inputs[0]
    if type(x) is Literal:
        return [None], split
    xs, os_ = tuple(x.aval.shape), tuple(e.outputs[0].aval.shape)
    if p is broadcast_in_dim_p:
        if vo is LINEAR:
            raise _Reject
        bd = e.params["broadcast_dimensions"]
        return [tuple(None if xs[i] == 1 else vo[bd[i]] for i in range(len(xs)))], split
    if p is transpose_p:
        if vo is LINEAR:
            raise _Reject
        v = [None] * len(xs)
        for k, q in enumerate(e.params["permutation"]):
            v[q] = vo[k]
        return [tuple(v)], split
    if p is squeeze_p:
        if vo is LINEAR:
            return [LINEAR], split
        dims = {d % len(xs) for d in e.params["dimensions"]}
        it = iter(vo)
        return [tuple(None if k in dims else next(it) for k in range(len(xs)))], split
    if p is expand_dims_p:
        if vo is LINEAR:
            return [LINEAR], split
        dims = {d % len(os_) for d in e.params["dimensions"]}
        return [tuple(vo[k] for k in range(len(os_)) if k not in dims)], split
    if p is reshape_p:
        if vo is LINEAR:
            return [LINEAR], split
        xn = [k for k, s in enumerate(xs) if s != 1]
        on = [k for k, s in enumerate(os_) if s != 1]
        if [xs[k] for k in xn] == [os_[k] for k in on]:
            v = [None] * len(xs)
            for kx, ko in zip(xn, on):
                v[kx] = vo[ko]
            return [tuple(v)], split
        if split is None and os_ == tuple(domain) and vo == _identity_view(domain):
            return [LINEAR], split
        raise _Reject
    raise _Reject


def _reduce_view(e, vo, domain, split):
    """The operand view of a reduction whose result has view ``vo``: its kept axes as the
    result's, its (non-1) reduced axes on the domain axes the result does not use, which
    must be one block of consecutive axes (the cluster's reduced block, if it has one)."""
    if vo is LINEAR:
        raise _Reject
    s = e.inputs[0].aval
    axes = _axes(e.params["axes"], s.ndim)
    used = {a for a in vo if a is not None}
    free = [a for a in range(len(domain)) if domain[a] != 1 and a not in used]
    red = [k for k in axes if s.shape[k] != 1]
    if not free or [domain[a] for a in free] != [s.shape[k] for k in red]:
        raise _Reject
    a, b = free[0], free[-1] + 1
    if any(domain[x] != 1 and x not in free for x in range(a, b)):
        raise _Reject
    if split is not None and split != (a, b):
        raise _Reject
    view = [None] * s.ndim
    for k, ax in zip([k for k in range(s.ndim) if k not in axes], vo):
        view[k] = ax
    for k, ax in zip(red, free):
        view[k] = ax
    return tuple(view), (a, b)


def _reduce_domain(shape, axes):
    """The domain of a reduction's kernel, and the operand axis each domain axis is: the
    operand's shape when its (non-1) reduced axes are one block, else its kept axes
    followed by its reduced axes (a block per kept element then reads its reduced
    elements in their memory order)."""
    red = [a for a in axes if shape[a] != 1]
    if all(shape[a] == 1 or a in axes for a in range(red[0], red[-1] + 1)):
        order = list(range(len(shape)))
    else:
        order = [a for a in range(len(shape)) if a not in axes] + list(axes)
    return tuple(shape[a] for a in order), order


def _placeable(view, domain, split):
    """Whether a value with this view can be written by exactly one thread per element:
    its view covers the domain (or, for a value not indexed by the reduced axes, the
    slot axes)."""
    if view is LINEAR:
        return split is None
    axes = {a for a in view if a is not None}
    non1 = {a for a in range(len(domain)) if domain[a] != 1}
    if split is None:
        return axes == non1
    red = set(range(*split)) & non1
    return axes == non1 if axes & red else axes == non1 - red


# --- clusters ------------------------------------------------------------------------------

class _Cluster:
    """A set of equations computed by one kernel over one domain."""
    __slots__ = ("domain", "split", "members", "view", "in_views", "linear")

    def __init__(self, domain, split=None):
        self.domain = tuple(domain)
        self.split = split
        self.members = set()     # eqn indices (non-constant ones)
        self.view = {}           # Var -> view, for the members' results
        self.in_views = {}       # eqn index -> the views of its operands
        self.linear = False      # some view is LINEAR

    def key(self):
        return min(self.members)


class _Planner:
    def __init__(self, ir, target="cuda"):
        self.ir = ir
        self.target = target
        self.eqns = list(ir.eqns)
        n = len(self.eqns)
        self.kind = [_classify(e) for e in self.eqns]
        self.producer = {}
        self.consumers = {}
        for i, e in enumerate(self.eqns):
            for o in e.outputs:
                self.producer[o] = i
            for x in e.inputs:
                if type(x) is not Literal:
                    self.consumers.setdefault(x, []).append(i)
        self.outvars = {v for v in ir.outvars if type(v) is not Literal}
        # constant equations: fusible, and computed from literals only
        self.const = [False] * n
        for i, e in enumerate(self.eqns):
            self.const[i] = self.kind[i] in ("elem", "view", "iota") and all(
                type(x) is Literal or (x in self.producer and self.const[self.producer[x]])
                for x in e.inputs)
        self.node = [None] * n    # eqn index -> its cluster (None: a step of its own)
        self.clusters = []

    # -- reachability between steps (a step: a cluster or an unclustered eqn index) --
    def _succ(self, node):
        members = node.members if isinstance(node, _Cluster) else (node,)
        out = []
        for m in members:
            for o in self.eqns[m].outputs:
                for c in self.consumers.get(o, ()):
                    t = self.node[c] if self.node[c] is not None else c
                    if t is not node:
                        out.append(t)
        return out

    def _reaches(self, starts, target):
        """Whether a path of reads leads from one of the steps ``starts`` to ``target``."""
        seen_eqns, seen_clusters, stack = set(), set(), list(starts)
        while stack:
            t = stack.pop()
            if t is target:
                return True
            seen = seen_clusters if isinstance(t, _Cluster) else seen_eqns
            key = id(t) if isinstance(t, _Cluster) else t
            if key in seen:
                continue
            seen.add(key)
            stack.extend(self._succ(t))
        return False

    def _external(self, i, cluster):
        """The steps (other than ``cluster``) reading results of eqn ``i``; whether an IR
        output is one of them (as True in the list)."""
        ext = []
        for o in self.eqns[i].outputs:
            if o in self.outvars:
                ext.append(True)
            for c in self.consumers.get(o, ()):
                t = self.node[c] if self.node[c] is not None else c
                if t is not cluster:
                    ext.append(t)
        return ext

    # -- joining --
    def _commit(self, cl, i, vo, in_views, split):
        e = self.eqns[i]
        cl.members.add(i)
        cl.split = split
        for o in e.outputs:
            cl.view[o] = _norm_view(vo, o.aval.shape, cl.domain)
        cl.in_views[i] = [None if v is None else _norm_view(v, x.aval.shape, cl.domain)
                          for v, x in zip(in_views, e.inputs)]
        if any(v is LINEAR for v in list(cl.view.values()) + cl.in_views[i]):
            cl.linear = True
        self.node[i] = cl

    def _try_join(self, cl, i):
        e = self.eqns[i]
        vo = None
        for o in e.outputs:
            for c in self.consumers.get(o, ()):
                if self.node[c] is not cl:
                    continue
                for x, v in zip(self.eqns[c].inputs, cl.in_views[c]):
                    if x is o:
                        if vo is None:
                            vo = v
                        elif vo != v:
                            return False
        if vo is None:
            return False
        kind = self.kind[i]
        if kind == "reduce" and cl.linear:
            return False
        grown = None
        try:
            in_views, split = _input_views(e, kind, vo, cl.domain, cl.split)
        except _Reject:
            grown = self._grow(cl, e, vo) if kind == "reduce" else None
            if grown is None:
                return False
            domain, axis_map, vo, in_views, split = grown
        if grown is not None:   # check against the grown domain, then adopt it
            saved = (cl.domain, cl.split, dict(cl.view), dict(cl.in_views))
            self._remap(cl, domain, axis_map)
        ext = self._external(i, cl)
        ok = True
        if ext:
            ok = all(_placeable(_norm_view(vo, o.aval.shape, cl.domain), cl.domain, split)
                     for o in e.outputs)
            nodes = [t for t in ext if t is not True]
            ok = ok and not (nodes and self._reaches(nodes, cl))
        if grown is not None and ok:   # the cluster's own results must stay placeable
            ok = all(_placeable(cl.view[o], cl.domain, split) for o in self._leaving(cl))
        if not ok:
            if grown is not None:
                cl.domain, cl.split, cl.view, cl.in_views = saved
            return False
        self._commit(cl, i, vo, in_views, split)
        return True

    def _leaving(self, cl):
        for m in cl.members:
            for o in self.eqns[m].outputs:
                if o in self.outvars or any(self.node[c] is not cl
                                            for c in self.consumers.get(o, ())):
                    yield o

    def _grow(self, cl, e, vo):
        """A new domain for an elementwise cluster in which reduction ``e`` fits: when the
        cluster uses the reduced value at the reduced rank (a row value, a scalar), the
        reduction's operand shape (each old axis becoming the kept axis it indexes); when
        the cluster's domain holds the reduced axes but not as one block, the same axes
        reordered (the others first, then the reduced ones). None if neither fits."""
        if cl.split is not None or cl.linear or vo is LINEAR:
            return None
        s = e.inputs[0].aval
        axes = _axes(e.params["axes"], s.ndim)
        kept = [k for k in range(s.ndim) if k not in axes]
        d = cl.domain
        used = {a for a in vo if a is not None}
        free = [a for a in range(len(d)) if d[a] != 1 and a not in used]
        if free and [d[a] for a in free] == [s.shape[k] for k in axes if s.shape[k] != 1]:
            order = [a for a in range(len(d)) if a not in free] + free
            axis_map = {old: new for new, old in enumerate(order)}
            domain = tuple(d[a] for a in order)
        else:
            domain, order = _reduce_domain(s.shape, axes)
            pos = {old: new for new, old in enumerate(order)}
            axis_map = {a: pos[kept[k]] for k, a in enumerate(vo) if a is not None}
            if any(n != 1 and a not in axis_map for a, n in enumerate(d)):
                return None
            axis_map.update({a: None for a, n in enumerate(d) if n == 1})
        new_vo = tuple(None if a is None else axis_map[a] for a in vo)
        try:
            in_views, split = _input_views(e, "reduce", new_vo, domain, None)
        except _Reject:
            return None
        return domain, axis_map, new_vo, in_views, split

    @staticmethod
    def _remap(cl, domain, axis_map):
        def m(v):
            return None if v is None else tuple(None if a is None else axis_map.get(a)
                                                for a in v)
        cl.domain = domain
        cl.view = {x: m(v) for x, v in cl.view.items()}
        cl.in_views = {i: [m(v) for v in vs] for i, vs in cl.in_views.items()}

    def _new_cluster(self, i):
        e = self.eqns[i]
        kind = self.kind[i]
        if kind == "reduce":
            s = e.inputs[0].aval
            axes = _axes(e.params["axes"], s.ndim)
            kept = [k for k in range(s.ndim) if k not in axes]
            domain, order = _reduce_domain(s.shape, axes)
            pos = {old: new for new, old in enumerate(order)}
            out = e.outputs[0].aval
            vo = tuple(None if out.shape[k] == 1 else pos[ax] for k, ax in enumerate(kept))
            cl = _Cluster(domain)
        else:
            shape = tuple(e.outputs[0].aval.shape)
            vo = _identity_view(shape)
            cl = _Cluster(shape)
        try:
            in_views, split = _input_views(e, kind, vo, cl.domain, None)
        except _Reject:
            return None
        self._commit(cl, i, vo, in_views, split)
        self.clusters.append(cl)
        return cl

    def cluster(self):
        for i in range(len(self.eqns) - 1, -1, -1):
            if self.kind[i] is None or self.const[i]:
                continue
            cands, counts = [], {}
            for o in self.eqns[i].outputs:
                for c in self.consumers.get(o, ()):
                    cl = self.node[c]
                    if cl is not None:
                        if id(cl) not in counts:
                            cands.append(cl)
                        counts[id(cl)] = counts.get(id(cl), 0) + 1
            cands.sort(key=lambda cl: -counts[id(cl)])
            if not any(self._try_join(cl, i) for cl in cands):
                self._new_cluster(i)
        # a cluster of index-only equations would only copy: leave them to the backend
        kept = []
        for cl in self.clusters:
            if all(self.kind[m] == "view" for m in cl.members):
                for m in cl.members:
                    self.node[m] = None
            else:
                kept.append(cl)
        self.clusters = kept
        self._merge()

    def _merge(self):
        """Merge independent clusters over the same domain (one kernel, fewer launches,
        shared operands read once)."""
        done = False
        while not done:
            done = True
            order = sorted(self.clusters, key=_Cluster.key)
            for ia, a in enumerate(order):
                for b in order[ia + 1:]:
                    if a.domain != b.domain:
                        continue
                    if a.split is not None and b.split is not None and a.split != b.split:
                        continue
                    if (a.split is not None and b.linear) or (b.split is not None and a.linear):
                        continue
                    if self._reaches(self._succ(a), b) or self._reaches(self._succ(b), a):
                        continue
                    for m in b.members:
                        self.node[m] = a
                    a.members |= b.members
                    a.view.update(b.view)
                    a.in_views.update(b.in_views)
                    a.linear = a.linear or b.linear
                    a.split = a.split if a.split is not None else b.split
                    self.clusters.remove(b)
                    done = False
                    break
                if not done:
                    break

    # -- steps --
    def steps(self):
        self.cluster()
        gens = [_KernelGen(self, cl) for cl in self.clusters]
        for g in gens:
            g.generate()
        # constants: where a step that is not a kernel (or the IR's outputs, or a kernel
        # that could not compute them inline) needs a constant's buffer, it gets one: an
        # index-only constant is an Eqn step, one that computes is a kernel of its own
        need = [v for v in self.outvars if v in self.producer and self.const[self.producer[v]]]
        for i, e in enumerate(self.eqns):
            if self.node[i] is None and not self.const[i]:
                need += [x for x in e.inputs if x in self.producer and
                         self.const[self.producer[x]]]
        for g in gens:
            need += [x for x in g.inputs if x in self.producer and self.const[self.producer[x]]]
        const_steps, const_gens = set(), []
        while need:
            v = need.pop()
            i = self.producer[v]
            if i in const_steps:
                continue
            const_steps.add(i)
            e = self.eqns[i]
            if self.kind[i] == "view":
                need += [x for x in e.inputs if type(x) is not Literal]
            else:
                cl = _Cluster(tuple(e.outputs[0].aval.shape))
                cl.members.add(i)
                for o in e.outputs:
                    cl.view[o] = _identity_view(o.aval.shape)
                g = _KernelGen(self, cl, root=i)
                g.generate()
                const_gens.append(g)
                need += [x for x in g.inputs if x in self.producer]
        # the steps: kernels, and eqns (unclustered, or constant index-only ones), ordered
        # topologically, ties by their first equation's position in the IR
        nodes = gens + const_gens + [
            i for i in range(len(self.eqns)) if self.node[i] is None and (
                not self.const[i] or (i in const_steps and self.kind[i] == "view"))]
        owner = {}
        for k, nd in enumerate(nodes):
            for o in (nd.outputs if isinstance(nd, _KernelGen) else self.eqns[nd].outputs):
                owner[o] = k
        succs = [[] for _ in nodes]
        indeg = [0] * len(nodes)
        for k, nd in enumerate(nodes):
            reads = nd.inputs if isinstance(nd, _KernelGen) else [
                x for x in self.eqns[nd].inputs if type(x) is not Literal]
            for d in {owner[x] for x in reads if x in owner} - {k}:
                succs[d].append(k)
                indeg[k] += 1
        first = [min(nd.cluster.members) if isinstance(nd, _KernelGen) else nd for nd in nodes]
        heap = [(first[k], k) for k in range(len(nodes)) if indeg[k] == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            _, k = heapq.heappop(heap)
            order.append(nodes[k])
            for t in succs[k]:
                indeg[t] -= 1
                if indeg[t] == 0:
                    heapq.heappush(heap, (first[t], t))
        if len(order) != len(nodes):   # pragma: no cover - the clustering keeps a DAG
            raise AssertionError("fusion: the planned steps have a cycle")
        # every constant eqn not a step of its own is listed by the first kernel inlining it
        assigned = set(const_steps)
        steps = []
        for nd in order:
            if isinstance(nd, _KernelGen):
                extra = sorted(c for c in nd.inlined if c not in assigned)
                assigned.update(extra)
                steps.append(nd.kernel(extra))
            else:
                steps.append(self.eqns[nd])
        left = [i for i in range(len(self.eqns)) if self.const[i] and i not in assigned
                and self.node[i] is None and i not in const_steps]
        if left:   # constants nothing reads (not removed by DCE): run them first
            steps = [self.eqns[i] for i in left] + steps
        return steps


# --- code generation ---------------------------------------------------------------------

def _block_threads(R):
    """Threads of a block-per-row kernel over rows of ``R``: about 8 elements each, a power
    of two from 128 to 1024 (benchmarks/gpu.py --sweep tries others on a real GPU)."""
    return min(1024, max(128, _pow2_at_least(-(-R // 8))))


def _pow2_at_least(n):
    return 1 << max(0, (int(n) - 1).bit_length())


def _identity(op, dtype):
    d = np.dtype(dtype)
    if op == "sum" or op == "or":
        return c_literal(0, d)
    if op == "prod":
        return c_literal(1, d)
    if op == "and":
        return c_literal(True if d.kind == "b" else (-1 if d.kind == "i" else np.iinfo(d).max),
                         d)
    if op == "max":
        if d.kind == "f":
            return c_literal(-np.inf, d)
        return c_literal(False if d.kind == "b" else np.iinfo(d).min, d)
    if d.kind == "f":
        return c_literal(np.inf, d)
    return c_literal(True if d.kind == "b" else np.iinfo(d).max, d)


def _combine(op, a, b, dtype):
    d = np.dtype(dtype)
    if op in ("sum", "prod"):
        c = "+" if op == "sum" else "*"
        return wrap(c, a, b, d) if d.kind in "iu" else f"({a} {c} {b})"
    if op == "max":
        return f"fnx_max({a}, {b})"
    if op == "min":
        return f"fnx_min({a}, {b})"
    if d.kind == "b":
        return f"({a} {'&&' if op == 'and' else '||'} {b})"
    return f"({cuda_type(d)})({a} {'&' if op == 'and' else '|'} {b})"


class _Scope:
    def __init__(self, level, parent=None, npass=0):
        self.level = level       # "map", "slot" or "elem"
        self.parent = parent
        self.npass = npass
        self.stmts = []
        self.memo = {}


class _KernelGen:
    """The CUDA text of one cluster: values pulled from the results it writes back to its
    operands, each (value, view) computed once per scope."""

    def __init__(self, planner, cluster, root=None):
        self.p = planner
        self.cluster = cluster
        self.root = root           # a constant kernel: the eqn whose result it writes
        d = cluster.domain
        self.domain = d
        self.split = cluster.split
        self.inputs = []
        self.in_slot = {}
        self.inlined = set()
        self.count = 0
        self.loads = {}            # (var, view) -> set of passes reading it (element loads)
        self.scratch = []          # host float sums: (accumulator name, C type)
        self.pairwise_src = {}     # host float sums of an input's row: accumulator -> row
        self.prefetch = None       # host row kernels: (last pass, its next-row prefetches)
        self.cached = {}           # (var, view) -> the register array caching it
        n = math.prod(d)
        self.idx = "int" if n < 2**31 - 1 else "long long"
        self.host = planner.target == "host"
        if self.split is None and self.host:
            # a loop per run of domain axes every value indexes alike: an operand broadcast
            # along some axes is indexed by the others' counters (no division, so its loads
            # stay contiguous and vectorize), and the innermost loop is as long as it can be
            self.groups = [(a, b, f"i{g}") for g, (a, b) in enumerate(self._host_runs())]
        elif self.split is None:
            self.groups = [(0, len(d), "i")]
        else:
            a, b = self.split
            self.groups = [(0, a, "o"), (a, b, "r"), (b, len(d), "j")]

    def _host_runs(self):
        """The domain's axes cut into runs ``(first, end)``: adjacent axes stay together
        when every view indexes both, in order, or neither (one flat run with a LINEAR
        view, which is indexed by the flat position)."""
        d, cl = self.domain, self.cluster
        views = list(cl.view.values()) + [v for vs in cl.in_views.values() for v in vs]
        if cl.linear or any(v is LINEAR for v in views):
            return [(0, len(d))] if d else []
        views = [v for v in views if v is not None]
        runs, start = [], 0
        for k in range(len(d) - 1):
            together = True
            for v in views:
                has_k, has_next = k in v, k + 1 in v
                if has_k != has_next or (has_k and v.index(k + 1) != v.index(k) + 1):
                    together = False
                    break
            if not together:
                runs.append((start, k + 1))
                start = k + 1
        if d:
            runs.append((start, len(d)))
        return runs

    # -- names, indices --
    def fresh(self):
        self.count += 1
        return f"v{self.count}"

    def input_slot(self, x):
        if x not in self.in_slot:
            self.in_slot[x] = len(self.inputs)
            self.inputs.append(x)
        return self.in_slot[x]

    def _group_of(self, ax):
        for g in self.groups:
            if g[0] <= ax < g[1]:
                return g
        raise AssertionError(ax)

    def coord(self, first, last):
        """The index along the run of domain axes first..last (one group)."""
        g0, g1, var = self._group_of(first)
        d = self.domain
        inner = math.prod(d[last + 1:g1])
        expr = var if inner == 1 else f"({var} / {inner})"
        if math.prod(d[g0:first]) != 1:
            expr = f"({expr} % {math.prod(d[first:last + 1])})"
        return expr

    def index(self, view, shape):
        """The flat index of the element of a value of ``shape`` seen through ``view``."""
        if view is LINEAR:
            return "i"
        strides, acc = [0] * len(shape), 1
        for k in range(len(shape) - 1, -1, -1):
            strides[k] = acc
            acc *= shape[k]
        pairs = [(ax, strides[k]) for k, ax in enumerate(view) if ax is not None]
        terms, k = [], 0
        d = self.domain
        while k < len(pairs):
            first, _ = pairs[k]
            last = first
            while k + 1 < len(pairs):
                nxt, st = pairs[k + 1]
                between = [x for x in range(last + 1, nxt) if d[x] != 1]
                if (not between and nxt > last and self._group_of(nxt) == self._group_of(first)
                        and pairs[k][1] == st * d[nxt]):
                    last, k = nxt, k + 1
                else:
                    break
            stride = pairs[k][1]
            c = self.coord(first, last)
            terms.append(c if stride == 1 else f"{c} * {stride}")
            k += 1
        return " + ".join(terms) if terms else "0"

    def level(self, view):
        if self.split is None:
            return "map"
        if view is LINEAR:
            raise AssertionError("a LINEAR view in a reduction kernel")
        a, b = self.split
        return "elem" if any(v is not None and a <= v < b for v in view) else "slot"

    # -- pulling values --
    def value(self, x, view, scope):
        if type(x) is Literal:
            return c_literal(x.value, x.aval.dtype)
        view = _norm_view(view, x.aval.shape, self.domain)
        lvl = self.level(view)
        if scope.level == "elem" and lvl == "slot":
            scope = scope.parent
        key = (x, view)
        s = scope
        while s is not None:
            if key in s.memo:
                return s.memo[key]
            s = s.parent
        i = self.p.producer.get(x)
        if i is not None and i in self.cluster.members:
            if self.p.kind[i] == "reduce":
                raise AssertionError("a reduced value used before its pass")
            return self.compute(i, x, view, scope)
        if i is not None and self.p.const[i]:
            try:   # a constant is computed where it is used...
                name = self.compute(i, x, view, scope)
                self.inlined.add(i)   # (listed as this kernel's unless a step of its own)
                return name
            except _Reject:   # ... unless its index arithmetic does not fit this kernel
                pass
        return self.load(x, view, scope)

    def load(self, x, view, scope):
        k = self.input_slot(x)
        t = cuda_type(x.aval.dtype)
        name = self.fresh()
        src = f"in{k}[{self.index(view, x.aval.shape)}]"
        if scope.level == "elem":
            self.loads.setdefault((x, view), set()).add(scope.npass)
            scope.stmts.append(("load", (x, view), name, t, src, scope.npass))
        elif scope.level == "slot" and self.kind == "tile":
            scope.stmts.append(f"const {t} {name} = active ? {src} : ({t})0;")
        else:
            scope.stmts.append(f"const {t} {name} = {src};")
        scope.memo[(x, view)] = name
        return name

    def compute(self, i, x, view, scope):
        e = self.p.eqns[i]
        kind = self.p.kind[i]
        if kind == "iota":
            dim = e.params["dimension"]
            if view is LINEAR:
                shape = e.params["shape"]
                inner = math.prod(shape[dim + 1:])
                c = "i" if inner == 1 else f"(i / {inner})"
                if math.prod(shape[:dim]) != 1:
                    c = f"({c} % {shape[dim]})"
            else:
                ax = view[dim]
                c = "0" if ax is None else self.coord(ax, ax)
            t = cuda_type(x.aval.dtype)
            name = self.fresh()
            scope.stmts.append(f"const {t} {name} = ({t})({c});")
            scope.memo[(x, view)] = name
            return name
        in_views, _ = _input_views(e, kind, view, self.domain, self.split)
        args = [self.value(y, v, scope) if type(y) is not Literal else
                c_literal(y.value, y.aval.dtype) for y, v in zip(e.inputs, in_views)]
        if kind == "view":
            scope.memo[(x, view)] = args[0]
            return args[0]
        if len(e.outputs) == 1 and not e.prim.multiple_results:
            t = cuda_type(x.aval.dtype)
            name = self.fresh()
            scope.stmts.append(f"const {t} {name} = ({t})({_call_rule(e, args, [])});")
            scope.memo[(x, view)] = name
            return name
        names = [self.fresh() for _ in e.outputs]
        decl = " ".join(f"{cuda_type(o.aval.dtype)} {n};" for o, n in zip(e.outputs, names))
        body = _call_rule(e, args, names).strip()
        scope.stmts.append(f"{decl}\n{{ // {e.prim.name}\n{body}\n}}")
        for o, n in zip(e.outputs, names):
            scope.memo[(o, _norm_view(view, o.aval.shape, self.domain))] = n
        return scope.memo[(x, view)]

    # -- the whole kernel --
    def generate(self):
        cl, p = self.cluster, self.p
        members = sorted(cl.members)
        # results leaving the kernel
        outs = []
        for i in members:
            for o in p.eqns[i].outputs:
                if self.root is not None:
                    leaves = True
                else:
                    leaves = o in p.outvars or any(p.node[c] is not cl
                                                   for c in p.consumers.get(o, ()))
                if leaves:
                    outs.append(o)
        self.outputs = outs
        if self.split is None:
            self.kind = "map"
            self._generate_map()
        else:
            self._generate_reduce()

    def _out_view(self, o):
        return self.cluster.view[o]

    def _generate_map(self):
        scope = _Scope("map")
        for m, o in enumerate(self.outputs):
            v = self.value(o, self._out_view(o), scope)
            scope.stmts.append(f"out{m}[{self.index(self._out_view(o), o.aval.shape)}] = {v};")
        n = math.prod(self.domain)
        T = self.idx
        body = self._render(scope.stmts, "        ")
        if self.host:  # a loop nest, the innermost vectorized, split over fnx_nt threads
            d = [math.prod(self.domain[a:b]) for a, b, _ in self.groups] or [1]
            if len(d) <= 1:
                par = "    #pragma omp parallel for simd schedule(static) num_threads(fnx_nt)\n"
                loops = (f"    for ({T} i0 = 0; i0 < {n}; ++i0) {{\n"
                         f"        const {T} i = i0;\n{body}    }}\n")
                serial = "    #pragma omp simd\n" + loops
            else:
                flat = "i0"
                for k in range(1, len(d)):
                    flat = f"({flat}) * {d[k]} + i{k}"
                last = len(d) - 1
                loops = ("".join(f"    for ({T} i{k} = 0; i{k} < {d[k]}; ++i{k})\n"
                                 for k in range(last))
                         + f"    #pragma omp simd\n"
                         f"    for ({T} i{last} = 0; i{last} < {d[last]}; ++i{last}) {{\n"
                         f"        const {T} i = {flat};\n{body}    }}\n")
                par = (f"    #pragma omp parallel for collapse({last}) schedule(static) "
                       f"num_threads(fnx_nt)\n")
                serial = loops
            # threads only from FNX_PARALLEL_MIN elements on (the preprocessor decides) and
            # when asked for (fnx_nt > 1); the serial loop is its own copy, as GCC does not
            # vectorize the serial path of a parallel simd loop with an if clause
            self.text = (f"{self._signature(0)}\n{{\n"
                         f"#if {n} >= FNX_PARALLEL_MIN\n    if (fnx_nt > 1) {{\n{par}{loops}"
                         f"    return;\n    }}\n#endif\n{serial}}}\n")
            self.grid, self.block = (1, 1, 1), (1, 1, 1)
            return
        self.text = (
            f"{self._signature(_MAP_BLOCK)}\n{{\n"
            f"    for ({T} i = ({T})blockIdx.x * blockDim.x + threadIdx.x; i < {n};\n"
            f"         i += ({T})blockDim.x * gridDim.x) {{\n{body}    }}\n}}\n")
        self.grid = (max(1, min(-(-n // _MAP_BLOCK), _MAX_GRID)), 1, 1)
        self.block = (_MAP_BLOCK, 1, 1)

    def _levels(self):
        """For each member value, the number of reduction passes it needs first."""
        p, cl = self.p, self.cluster
        lv = {}
        for i in sorted(cl.members):
            e = p.eqns[i]
            deps = [lv.get(x, 0) for x in e.inputs if type(x) is not Literal]
            m = max(deps, default=0)
            if p.kind[i] == "reduce":
                m += 1
            for o in e.outputs:
                lv[o] = m
        return lv

    def _generate_reduce(self):
        p, cl = self.p, self.cluster
        d, (a, b) = self.domain, self.split
        O, R, I = math.prod(d[:a]), math.prod(d[a:b]), math.prod(d[b:])
        reds = [i for i in sorted(cl.members) if p.kind[i] == "reduce"]
        lv = self._levels()
        npasses = max(lv[p.eqns[i].outputs[0]] for i in reds)
        itemsizes = [np.dtype(p.eqns[i].outputs[0].aval.dtype).itemsize for i in reds]
        if self.host:
            # one CPU thread per slot: the reduced index r runs in order, no tree
            self.kind = "rows" if I == 1 else "columns"
            step, tid, block = 1, "0", (1, 1, 1)
        elif I > 1:
            self.kind = "tile"
            Y = min(32, _pow2_at_least(R))
            while Y > 1 and 32 * Y * sum(itemsizes) > _SHARED_LIMIT:
                Y //= 2
            step, tid, block = Y, "threadIdx.y", (32, Y, 1)
        elif R <= _WARP_ROW_MAX:
            self.kind = "warp"
            rows = min(8, O)
            step, tid, block = 32, "threadIdx.x", (32, rows, 1)
        else:
            self.kind = "block"
            T = _block_threads(R)
            step, tid, block = T, "threadIdx.x", (T, 1, 1)
        self.block = block
        kmax = -(-R // step)
        unrolled = kmax <= _UNROLL_MAX
        IDX = self.idx

        slot = _Scope("slot")
        elem_outs = [o for o in self.outputs if self.level(self._out_view(o)) == "elem"]
        slot_outs = [o for o in self.outputs if o not in elem_outs]
        acc_names = {}
        shared = []
        for k in range(1, npasses + 2):
            here = [i for i in reds if lv[p.eqns[i].outputs[0]] == k]
            writes = [o for o in elem_outs if min(lv[o] + 1, npasses + 1) == k]
            if not here and not writes:
                continue
            for i in here:
                e = p.eqns[i]
                t = cuda_type(e.outputs[0].aval.dtype)
                acc = acc_names[i] = f"acc{len(acc_names)}"
                ident = _identity(_REDUCERS[e.prim], e.outputs[0].aval.dtype)
                if self.host and self._host_pairwise(e):  # its terms, then NumPy's sum
                    self.scratch.append((acc, t))
                elif self.host:  # one accumulator per lane (see _host_lanes)
                    slot.stmts.append(f"{t} {acc}_l[{_HOST_LANES}];\n"
                                      f"for (int l = 0; l < {_HOST_LANES}; ++l) {acc}_l[l] = {ident};")
                else:
                    slot.stmts.append(f"{t} {acc} = {ident};")
            scope = _Scope("elem", slot, k)
            direct = []
            for i in here:
                e = p.eqns[i]
                v = self.value(e.inputs[0], cl.in_views[i][0], scope)
                if self.host and self._host_pairwise(e):
                    acc, t = acc_names[i], cuda_type(e.outputs[0].aval.dtype)
                    row = self._host_row(v, scope, t, R)
                    if row is None:
                        scope.stmts.append(f"{acc}_t[r] = {v};")
                    else:  # its terms are an input's row as it is: summed in place
                        self.pairwise_src[acc] = row
                        self.scratch.remove((acc, t))
                        direct.append(v)
                    continue
                acc = acc_names[i] + ("_l[l]" if self.host else "")
                scope.stmts.append(
                    f"{acc} = {_combine(_REDUCERS[e.prim], acc, v, e.outputs[0].aval.dtype)};")
            for o in writes:
                m = self.outputs.index(o)
                v = self.value(o, self._out_view(o), scope)
                scope.stmts.append(f"out{m}[{self.index(self._out_view(o), o.aval.shape)}] = {v};")
            self._drop_unused_loads(scope, direct)
            if scope.stmts:
                slot.stmts.append(("loop", k, scope))
            if here and self.host:
                slot.stmts.append(self._host_lanes(here, acc_names))
            elif here:
                slot.stmts.append(self._block_reduce(here, acc_names, shared))
            if here:
                for i in here:
                    o = p.eqns[i].outputs[0]
                    slot.memo[(o, cl.view[o])] = acc_names[i]
        leader = {"block": "threadIdx.x == 0", "warp": "threadIdx.x == 0",
                  "tile": "threadIdx.y == 0 && active", "rows": "true",
                  "columns": "true"}[self.kind]
        writes = []
        for o in slot_outs:
            m = self.outputs.index(o)
            v = self.value(o, self._out_view(o), slot)
            writes.append(f"out{m}[{self.index(self._out_view(o), o.aval.shape)}] = {v};")
        if writes:
            slot.stmts.append(f"if ({leader}) {{\n" + "\n".join(writes) + "\n}")

        # registers: operands read by several passes, while the budget lasts
        cached = {}
        if unrolled and not self.host:
            budget = _CACHE_REGS
            for key, passes in self.loads.items():
                if len(passes) > 1 and budget >= kmax:
                    cached[key] = f"fnx_c{len(cached)}"
                    budget -= kmax
        self.cached, self.first_pass = cached, {k: min(v) for k, v in self.loads.items()}

        guard = "active && " if self.kind == "tile" else ""
        if self.host:
            # lanes of _HOST_LANES consecutive r, vectorized; the last partial one after
            W, whole = _HOST_LANES, R - R % _HOST_LANES
            loop_open = (f"for ({IDX} r0 = 0; r0 < {whole}; r0 += {W}) {{\n"
                         f"#pragma omp simd\nfor (int l = 0; l < {W}; ++l) {{\n"
                         f"const {IDX} r = r0 + l;\n")
            loop_close = "}\n}\n"
            if whole < R:
                tail = (f"for ({IDX} r = {whole}; r < {R}; ++r) {{\n"
                        f"const int l = (int)(r - {whole});\n")
                loop_open, loop_close = ((loop_open, loop_close + tail), "}\n")
        elif unrolled:
            loop_open = (f"#pragma unroll\nfor (int k = 0; k < {kmax}; ++k) {{\n"
                         f"const {IDX} r = ({IDX}){tid} + ({IDX})k * {step};\n"
                         f"if ({guard}r < {R}) {{\n")
            loop_close = "}\n}\n"
        else:
            loop_open = (f"{'if (active) ' if self.kind == 'tile' else ''}"
                         f"for ({IDX} r = {tid}; r < {R}; r += {step}) {{\n")
            loop_close = "}\n"
        self.loop = (loop_open, loop_close)
        if self.host and self.kind == "rows" and O > 1 and R >= _HOST_LANES:
            self._host_prefetch(slot, R, O)
        decls = [f"{cuda_type(key[0].aval.dtype)} {name}[{kmax}];" for key, name in cached.items()]
        inner = self._render(decls + slot.stmts, "        ")
        sync_end = "        __syncthreads();\n" if self.kind in ("block", "tile") else ""
        if self.host:
            # each thread: scratch rows for the float sums' terms, then its slots
            alloc = "".join(f"        {t}* {acc}_t = ({t}*)malloc(sizeof({t}) * {R});\n"
                            for acc, t in self.scratch)
            free = "".join(f"        free({acc}_t);\n" for acc, _ in self.scratch)
            par = (f"#if {O * R * I} >= FNX_PARALLEL_MIN\n"
                   f"    #pragma omp parallel if (fnx_nt > 1) num_threads(fnx_nt > 1 ? fnx_nt : 1)\n"
                   f"#endif\n    {{\n{alloc}        #pragma omp for schedule(static)\n")
            if self.kind == "rows":
                head = f"{par}    for ({IDX} o = 0; o < {O}; ++o) {{\n"
            else:
                head = (f"{par}    for ({IDX} s = 0; s < {O * I}; ++s) {{\n"
                        f"        const {IDX} o = s / {I};\n"
                        f"        const {IDX} j = s % {I};\n")
            self.grid = (1, 1, 1)
            self.text = (f"{self._signature(0)}\n{{\n{head}{inner}    }}\n{free}    }}\n}}\n")
            return
        if self.kind == "block":
            head = f"    for ({IDX} o = blockIdx.x; o < {O}; o += gridDim.x) {{\n"
            grid = min(O, _MAX_GRID)
        elif self.kind == "warp":
            rows = block[1]
            head = (f"    for ({IDX} o = ({IDX})blockIdx.x * {rows} + threadIdx.y; o < {O};\n"
                    f"         o += ({IDX})gridDim.x * {rows}) {{\n")
            grid = min(-(-O // rows), _MAX_GRID)
        else:
            tiles = -(-I // 32)
            head = (f"    for ({IDX} s = blockIdx.x; s < {O * tiles}; s += gridDim.x) {{\n"
                    f"        const {IDX} o = s / {tiles};\n"
                    f"        const {IDX} j = (s % {tiles}) * 32 + threadIdx.x;\n"
                    f"        const bool active = j < {I};\n")
            grid = min(O * tiles, _MAX_GRID)
        self.grid = (max(1, grid), 1, 1)
        shared_text = "".join(f"    {s}\n" for s in shared)
        self.text = (f"{self._signature(block[0] * block[1])}\n{{\n{shared_text}"
                     f"{head}{inner}{sync_end}    }}\n}}\n")

    def _host_pairwise(self, e):
        """Whether the host kernel sums reduction ``e`` as NumPy does (a float sum: its terms
        are stored, then added by ``fnx_pairwise_sum``, NumPy's pairwise summation)."""
        return _REDUCERS[e.prim] == "sum" and np.dtype(e.outputs[0].aval.dtype).kind == "f"

    def _host_prefetch(self, slot, R, O):
        """A host row kernel reads its inputs' rows in its first pass, which then waits on
        memory: its last pass asks for the next slot's rows (``__builtin_prefetch``, a line
        per 64 bytes), so they are in the cache when the next slot starts (gelu+layernorm:
        a fifth faster)."""
        passes = [s[1] for s in slot.stmts if isinstance(s, tuple) and s[0] == "loop"]
        rows = {}
        for (x, view), _ in self.loads.items():
            k = self.in_slot[x]
            if self.index(view, x.aval.shape) == f"o * {R} + r":
                rows[k] = np.dtype(x.aval.dtype).itemsize
        for src in self.pairwise_src.values():
            m = re.fullmatch(r"in(\d+) \+ o \* \d+", src)
            if m:
                k = int(m.group(1))
                rows[k] = np.dtype(self.inputs[k].aval.dtype).itemsize
        if not passes or not rows:
            return
        lines = []
        for k, size in sorted(rows.items()):
            for off in range(0, _HOST_LANES * size, 64):
                at = "r0" if off == 0 else f"r0 + {off // size}"
                lines.append(f"__builtin_prefetch(in{k} + (o + 1) * {R} + {at}, 0, 3);")
        self.prefetch = (max(passes), f"if (o + 1 < {O}) {{\n" + "\n".join(lines) + "\n}\n")

    def _host_row(self, v, scope, t, R):
        """Where value ``v`` of a host float sum's pass is a plain load of the accumulator's
        type from a contiguous row of an input (``in{k}[o * R + r]``, or ``in{k}[r]`` for an
        operand broadcast over the slots), a pointer to that row: ``fnx_pairwise_sum`` adds
        it in place instead of a copy in the scratch row (same terms, same order). None
        otherwise."""
        if self.kind != "rows":
            return None
        for st in scope.stmts:
            if isinstance(st, tuple) and st[0] == "load" and st[2] == v:
                m = re.fullmatch(r"in(\d+)\[(.*)\]", st[4])
                if m is None or st[3] != t:
                    return None
                if m.group(2) == f"o * {R} + r":
                    return f"in{m.group(1)} + o * {R}"
                if m.group(2) == "r":
                    return f"in{m.group(1)}"
                return None
        return None

    @staticmethod
    def _drop_unused_loads(scope, names):
        """Take the loads of ``names`` out of a pass when nothing else in it reads them (a
        row summed in place needs no loop over its elements)."""
        for name in names:
            used = re.compile(rf"\b{name}\b")
            if any(not (isinstance(st, tuple) and st[0] == "load") and used.search(str(st))
                   for st in scope.stmts):
                continue
            scope.stmts = [st for st in scope.stmts
                           if not (isinstance(st, tuple) and st[0] == "load" and st[2] == name)]

    def _host_lanes(self, here, acc_names):
        """On the CPU: the lanes' partial results of the reductions ``here`` combined by a
        pairwise tree (lane l with l + W/2, then l + W/4, ...) into ``acc``; a float sum's
        stored terms added as NumPy adds them (``0 + pairwise_sum``)."""
        p = self.p
        lines = []
        R = math.prod(self.domain[self.split[0]:self.split[1]])
        for i in here:
            e = p.eqns[i]
            acc, op, dt = acc_names[i], _REDUCERS[e.prim], e.outputs[0].aval.dtype
            if self._host_pairwise(e):
                t = cuda_type(dt)
                src = self.pairwise_src.get(acc, f"{acc}_t")
                lines.append(f"const {t} {acc} = ({t})0 + fnx_pairwise_sum_n<{R}>({src});")
                continue
            half = _HOST_LANES // 2
            while half >= 1:
                lines.append(f"for (int l = 0; l < {half}; ++l) {acc}_l[l] = "
                             f"{_combine(op, f'{acc}_l[l]', f'{acc}_l[l + {half}]', dt)};")
                half //= 2
            lines.append(f"const {cuda_type(dt)} {acc} = {acc}_l[0];")
        return "\n".join(lines)

    def _block_reduce(self, here, acc_names, shared):
        """Combine the threads' partial results of the reductions ``here`` into every
        thread's ``acc``."""
        p = self.p
        lines = []
        ops = [(acc_names[i], _REDUCERS[p.eqns[i].prim], p.eqns[i].outputs[0].aval.dtype)
               for i in here]
        def shuffle_step(off):
            # every lane shuffles: a shuffle inside || or && could be skipped by some lanes
            for acc, op, dt in ops:
                lines.append(f"{{ const {cuda_type(dt)} fnx_t = fnx_shfl_down({acc}, {off}); "
                             f"{acc} = {_combine(op, acc, 'fnx_t', dt)}; }}")

        if self.kind in ("warp", "block"):
            for off in (16, 8, 4, 2, 1):
                shuffle_step(off)
        if self.kind == "warp":
            for acc, op, dt in ops:
                lines.append(f"{acc} = fnx_shfl_idx({acc}, 0);")
            return "\n".join(lines)
        if self.kind == "block":
            nw = self.block[0] // 32
            names = []
            for acc, op, dt in ops:
                sm = f"fnx_sm{len(shared)}"
                shared.append(f"__shared__ {cuda_type(dt)} {sm}[32];")
                names.append(sm)
            lines.append("if ((threadIdx.x & 31) == 0) {")
            lines += [f"{sm}[threadIdx.x >> 5] = {acc};" for sm, (acc, _, _) in zip(names, ops)]
            lines.append("}\n__syncthreads();\nif (threadIdx.x < 32) {")
            for sm, (acc, op, dt) in zip(names, ops):
                lines.append(f"{acc} = threadIdx.x < {nw} ? {sm}[threadIdx.x] : "
                             f"{_identity(op, dt)};")
            off = 16
            while off >= 1:
                if off < nw:
                    shuffle_step(off)
                off //= 2
            lines.append("if (threadIdx.x == 0) {")
            lines += [f"{sm}[0] = {acc};" for sm, (acc, _, _) in zip(names, ops)]
            lines.append("}\n}\n__syncthreads();")
            lines += [f"{acc} = {sm}[0];" for sm, (acc, _, _) in zip(names, ops)]
            return "\n".join(lines)
        Y = self.block[1]
        names = []
        for acc, op, dt in ops:
            sm = f"fnx_sm{len(shared)}"
            shared.append(f"__shared__ {cuda_type(dt)} {sm}[{32 * Y}];")
            names.append(sm)
        lines += [f"{sm}[threadIdx.y * 32 + threadIdx.x] = {acc};"
                  for sm, (acc, _, _) in zip(names, ops)]
        lines.append("__syncthreads();")
        half = Y // 2
        while half >= 1:
            lines.append(f"if (threadIdx.y < {half}) {{")
            for sm, (acc, op, dt) in zip(names, ops):
                here_ = f"{sm}[threadIdx.y * 32 + threadIdx.x]"
                there = f"{sm}[(threadIdx.y + {half}) * 32 + threadIdx.x]"
                lines.append(f"{here_} = {_combine(op, here_, there, dt)};")
            lines.append("}\n__syncthreads();")
            half //= 2
        lines += [f"{acc} = {sm}[threadIdx.x];" for sm, (acc, _, _) in zip(names, ops)]
        return "\n".join(lines)

    def _render(self, stmts, pad):
        out = []
        for s in stmts:
            if isinstance(s, tuple) and s[0] == "loop":
                _, k, scope = s
                body = self._render(scope.stmts, "")
                if isinstance(self.loop[0], tuple):  # the host's main loop, then its tail
                    (main_open, main_close), close = self.loop
                    text = main_open + body + main_close + body + close
                else:
                    text = self.loop[0] + body + self.loop[1]
                if self.prefetch and k == self.prefetch[0]:
                    head, rest = text.split("\n", 1)   # the next row's lines, in the main loop
                    text = f"{head}\n{self.prefetch[1]}{rest}"
            elif isinstance(s, tuple) and s[0] == "load":
                _, key, name, t, src, npass = s
                cache = self.cached.get(key)
                if cache is None:
                    text = f"const {t} {name} = {src};"
                elif self.first_pass[key] == npass:
                    text = f"const {t} {name} = {src};\n{cache}[k] = {name};"
                else:
                    text = f"const {t} {name} = {cache}[k];"
            else:
                text = s
            out.append(text)
        return _indent("\n".join(out), pad)

    def _signature(self, threads):
        p = self.p
        args = [f"const {cuda_type(x.aval.dtype)}* __restrict__ in{k}"
                for k, x in enumerate(self.inputs)]
        args += [f"{cuda_type(o.aval.dtype)}* __restrict__ out{m}"
                 for m, o in enumerate(self.outputs)]
        if self.host:  # (and the number of threads to use)
            return f'extern "C" void @NAME@(' + ", ".join(args + ["int fnx_nt"]) + ")"
        return (f'extern "C" __global__ void __launch_bounds__({threads}) @NAME@('
                + ", ".join(args) + ")")

    def kernel(self, extra):
        p = self.p
        eqn_ids = sorted(set(self.cluster.members) | set(extra))
        prims = " ".join(p.eqns[i].prim.name for i in eqn_ids)
        if len(prims) > 200:
            prims = prims[:200] + " ..."
        shape = "x".join(map(str, self.domain)) or "scalar"
        head = f"\n// fused {self.kind} kernel over {shape}: {prims}\n"
        body = head + self.text
        digest = hashlib.sha1(body.encode()).hexdigest()[:12]
        name = f"fnx_fused_{digest}"
        return Kernel(name=name, source=body.replace("@NAME@", name), inputs=list(self.inputs),
                      outputs=list(self.outputs), grid=self.grid, block=self.block,
                      shared_bytes=0, eqns=[p.eqns[i] for i in eqn_ids], kind=self.kind,
                      domain=tuple(self.domain))


def _indent(text, pad):
    """Indent C text by braces (generated lines carry no indentation of their own)."""
    out, depth = [], 0
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        if line.startswith("}"):
            depth -= 1
        out.append(pad + "    " * depth + line)
        depth += line.count("{") - line.count("}") + (1 if line.startswith("}") else 0)
    return "\n".join(out) + "\n" if out else ""


def in_place(kernel, pairs):
    """``kernel`` with output ``o`` allowed to share its buffer with input ``k`` for each
    ``(k, o)`` of ``pairs`` (a donated input, or on the CPU any operand read for the last
    time): the pairs' pointers lose ``__restrict__`` (so no load of the input is moved or
    repeated past a store of the output) and the kernel a new name. None where sharing
    would be unsafe: a kernel that is not a map, or an input or output of another shape
    than the kernel's domain or read or written anywhere but at the element the thread (on
    the CPU, the loop iteration) writes its outputs at (another one could then read an
    element this one has already overwritten)."""
    if kernel.kind != "map" or not pairs:
        return None
    domain, text = tuple(kernel.domain), kernel.source
    body = text.split("{", 1)[1]
    for k, o in pairs:
        x, y = kernel.inputs[k], kernel.outputs[o]
        if tuple(x.aval.shape) != domain or tuple(y.aval.shape) != domain \
                or x.aval.dtype != y.aval.dtype:
            return None
        at = {ptr: _subscripts(body, ptr) for ptr in (f"in{k}", f"out{o}")}
        if any(len(a) != 1 for a in at.values()) or at[f"in{k}"] != at[f"out{o}"]:
            return None
        for ptr in at:
            text = re.sub(rf"\* __restrict__ {ptr}\b", f"* {ptr}", text, count=1)
    tag = "_".join(f"{k}o{o}" for k, o in sorted(pairs))
    name = f"{kernel.name}_ip{tag}"
    return dataclasses.replace(kernel, name=name, source=text.replace(kernel.name, name))


def _subscripts(body, ptr):
    """The index expressions ``body`` reads or writes ``ptr`` at (whitespace dropped); a
    use that is not a plain subscript counts as one of its own, so it never matches."""
    uses = re.findall(rf"\b{ptr}\b(\[[^\[\]]*\])?", body)
    return {u.replace(" ", "") if u else object() for u in uses}


def computes(e) -> bool:
    """Whether equation ``e`` computes values in a kernel (an elementwise operation or a
    reduction), rather than only indexing (a broadcast, transpose, reshape, ...)."""
    return _classify(e) in ("elem", "reduce")


def plan_program(ir, target="cuda") -> list:
    """The steps of ``ir`` in execution order: ``Eqn`` (one of the IR's equations, run by
    the backend one at a time) or ``Kernel`` (generated, computing a cluster of them).
    See the module docstring for what fuses and how the kernels are shaped.
    ``target="host"``: the same clusters as C++ functions for the CPU (see "On the CPU")."""
    return _Planner(ir, target).steps()
