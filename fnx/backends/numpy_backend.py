"""The NumPy backend: an IR lowered to one generated Python function over NumPy arrays
(``numpy_codegen``), its buffers kept between calls (``buffers``), on the CPU; a scan
loop as one generated function too (``numpy_loops``). Before lowering, the scans of an IR
are restructured by the planner pass (``fnx.lax.control_flow.scan_plan.plan_scans``)
with the backend's BLAS relayout hook (``numpy_loops.blas_relayout``)."""
from __future__ import annotations

import sys
import weakref

import numpy as np

from ..core.array import Array
from ..core.backend import Backend
from ..lax.control_flow.scan_plan import ScanPlan, Unplanned, plan_scans, scan_plan_for
from . import buffers
from .buffers import RING_HELD
from .native_loops import plan_native
from .numpy_codegen import Compiled, compile_ir
from .numpy_loops import blas_relayout, scan_runner

_AS_IS = object()  # a scan with nothing to move out of its loop: run as it is


class _WithKernels(Compiled):
    """A lowered IR with native loops: ``kernels`` is their C++ text."""
    __slots__ = ("kernels",)

    def __init__(self, compiled, kernels):
        super().__init__(compiled.fn, compiled.source, compiled.pool)
        self.kernels = list(kernels)


class NumPyBackend(Backend):
    name = "numpy"
    platform = "cpu"
    # The scan planner's hook for the operands of loop matmuls: a loop-invariant matrix
    # BLAS would read through a transposed view is transposed once before the loop.
    scan_relayout = staticmethod(blas_relayout)

    def __init__(self):
        super().__init__()
        # scan body -> {loop shape: _AS_IS, its ScanPlan (run once so far, eagerly) or
        # the compiled restructured program}
        self.scans = weakref.WeakKeyDictionary()

    def compile(self, ir, name="jit", donated=()):
        """The generated function of ``ir`` with its scans restructured (``plan_scans``
        with ``scan_relayout``) and its large fused clusters as native loops
        (``native_loops.plan_native``), then ``numpy_codegen.compile_ir``: ``.fn``,
        ``.source``, ``.pool`` (its buffers) and ``.kernels`` (the native loops' C++)."""
        ir = plan_native(plan_scans(ir, relayout=self.scan_relayout))
        exe = compile_ir(ir, name, tuple(donated))
        kernels = getattr(ir, "native_kernels", None)
        return exe if not kernels else _WithKernels(exe, kernels)

    def clear_cache(self):
        """Forget the cached executables and scan plans, and release the buffers every
        compiled function keeps between calls (those of pools still reachable too)."""
        super().clear_cache()
        self.scans.clear()
        buffers.release_all()

    def run_scan(self, body, buffers, *, num_consts, num_carry, length, reverse, unroll=1):
        """The scan restructured by the planner (with ``scan_relayout``), its loop one
        generated function (``numpy_loops.scan_runner``: the body's code inlined in a
        Python ``for``, ys written into preallocated arrays). What to run is cached per
        body and loop shape: a scan that a compiled function runs has a body the planner
        already restructured, which runs as it is; another (an eager scan, whose body is
        traced afresh on every call) runs its plan eagerly the first time
        (``ScanPlan.run``) and its restructured program compiled from the second.
        ``unroll`` changes nothing here."""
        key = (num_consts, num_carry, length, reverse, unroll)
        per = self.scans.get(body)
        if per is None:
            per = self.scans[body] = {}
        run = per.get(key)
        if run is None:
            plan = None if length == 0 else scan_plan_for(
                body, num_consts=num_consts, num_carry=num_carry, relayout=self.scan_relayout)
            if plan is not None:
                try:
                    outs = plan.run(buffers, length, reverse, unroll)
                except Unplanned:
                    pass  # a batching rule refused: run the loop as it is
                else:
                    per[key] = plan
                    return outs
            run = per[key] = _AS_IS
        if run is _AS_IS:
            return scan_runner(body, num_consts, num_carry, length, reverse)(*buffers)
        if type(run) is ScanPlan:  # run a second time: compile the restructured program
            try:
                run = per[key] = self.compile(run.program(length, reverse, unroll), "scan").fn
            except Unplanned:  # pragma: no cover - ``run`` batched the same work
                per[key] = _AS_IS
                return scan_runner(body, num_consts, num_carry, length, reverse)(*buffers)
        return list(run(*buffers))

    def put(self, value):
        return np.asarray(value)

    def fetch(self, buffer):
        return np.asarray(buffer)

    def wrap(self, buffer, weak_type=False):
        return Array._wrap(buffer, weak_type)

    def owns(self, buffer):
        return isinstance(buffer, (np.ndarray, np.generic))

    def offer_donated(self, raw, positions):
        """For each donated position ``k``, ``raw[k]`` when the call may overwrite it
        (``sole_buffer``), else None."""
        return [raw[k] if sole_buffer(raw, k) else None for k in positions]


def _buffer_refs(raw, k):
    return sys.getrefcount(raw[k])


def sole_buffer(raw, k):
    """Whether ``raw[k]`` is a C-contiguous ndarray owning its memory that nothing
    references but ``raw``, the one Array holding it and (for an earlier output) the
    ring it came from; if so it is made writeable."""
    refs = _buffer_refs(raw, k)
    if refs != _SOLE_REFS and not (refs == _SOLE_REFS + 1
                                   and RING_HELD.get(id(raw[k])) is raw[k]):
        return False
    v = raw[k]
    if type(v) is not np.ndarray or v.base is not None or not v.flags.c_contiguous:
        return False
    v.flags.writeable = True  # read-only only to keep others from writing: none are left
    return True


def _sole_refs():
    """``_buffer_refs`` of a buffer held by a list and one Array only (it depends on the
    interpreter, so it is measured)."""
    a = Array._wrap(np.empty(1))
    raw = [a._value]
    return _buffer_refs(raw, 0)


_SOLE_REFS = _sole_refs()
