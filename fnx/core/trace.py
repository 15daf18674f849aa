"""Traces: how a primitive call finds out what to do.

fnx dispatches "stacklessly": the trace that handles primitive calls lives in
a context variable. Eager code runs under ``EVAL``, which calls the NumPy impl
at once. A transformation makes a new trace whose ``parent`` is the trace that
was current, sets it as current while the user's function runs, and processes
each primitive call itself (recording it, differentiating it, ...), binding
whatever it computes on the parent. Values from outer traces that reach an
inner one are its constants, so nested transformations never confuse their
values. When a trace exits it is marked invalid, and any later use of its
tracers raises ``LeakedTracerError``.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys

import numpy as np

from .._config import config
from ..errors import LeakedTracerError

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame_info(skip: int = 1) -> str:
    """``file:line (function)`` of the innermost frame outside the fnx package."""
    f = sys._getframe(skip)
    inside = _INSIDE_FNX
    while f is not None:
        code = f.f_code
        ins = inside.get(code)
        if ins is None:
            fn = code.co_filename
            if len(inside) > 4096:  # code made at run time (exec, jit) must not pile up
                inside.clear()
            ins = inside[code] = fn.startswith(_PKG_DIR) and "/tests/" not in fn
        if not ins:
            return f"{code.co_filename}:{f.f_lineno} ({code.co_name})"
        f = f.f_back
    return "<unknown>"


# code object -> whether it belongs to fnx itself (tracers record the user's line,
# which is found by walking out of fnx's frames; this keeps the walk cheap).
_INSIDE_FNX: dict = {}


class Trace:
    """Base class: a way of handling primitive calls.

    Subclasses implement ``process_primitive(prim, args, params)`` where
    ``args`` are Arrays/tracers; they return the primitive's outputs (a list
    when ``prim.multiple_results``).
    """
    parent: "Trace | None" = None
    valid = True
    name = "trace"

    def process_primitive(self, prim, args, params):  # pragma: no cover - abstract
        raise NotImplementedError

    def is_ancestor_of(self, other: "Trace") -> bool:
        t = other
        while t is not None:
            if t is self:
                return True
            t = t.parent
        return False

    def check_foreign_tracer(self, tracer, prim_name):
        """Raise unless ``tracer`` (not ours) belongs to a live trace enclosing this one."""
        owner = tracer._trace
        if not owner.valid:
            raise LeakedTracerError(
                f"{prim_name}: a tracer of an ended {owner.name} trace was used. It was "
                f"made at {tracer._origin}, and the trace it belonged to has finished, so "
                "the value no longer exists. This happens when a traced value is stored "
                "outside the traced function (a global, a list, an attribute) and used "
                "later. Return it from the function instead.")
        if not owner.is_ancestor_of(self):
            raise LeakedTracerError(
                f"{prim_name}: a tracer of a {owner.name} trace (made at "
                f"{tracer._origin}) reached a {self.name} trace that is not nested in "
                "it. Values must not be passed between unrelated traced functions "
                "through side channels; pass them as arguments.")


class EvalTrace(Trace):
    """Eager evaluation: every primitive call runs its NumPy impl at once.
    (``process_primitive`` is installed by ``fnx.core.array``, which owns Array.)"""
    name = "eager"


EVAL = EvalTrace()
CURRENT_TRACE = contextvars.ContextVar("fnx_trace", default=EVAL)  # the trace bind hands to
get_trace = CURRENT_TRACE.get


@contextlib.contextmanager
def trace_context(trace: Trace):
    """Make ``trace`` current inside the block; it is invalid after the block."""
    token = CURRENT_TRACE.set(trace)
    try:
        yield trace
    finally:
        CURRENT_TRACE.reset(token)
        trace.valid = False


@contextlib.contextmanager
def parent_context(trace: Trace):
    """Make ``trace.parent`` current inside the block (a trace binds there)."""
    token = CURRENT_TRACE.set(trace.parent)
    try:
        yield
    finally:
        CURRENT_TRACE.reset(token)


def bind(prim, args, params):
    """Hand a primitive call to the current trace."""
    return CURRENT_TRACE.get().process_primitive(prim, args, params)


# --- jax_debug_nans / jax_debug_infs ---------------------------------------------------------
# With either flag on, every primitive evaluated eagerly has its floating-point outputs
# checked, and a NaN (or inf) raises FloatingPointError naming the primitive and the
# user's line. The check is installed on ``EVAL`` itself when a flag turns on and removed
# when both are off, so eager dispatch costs nothing extra otherwise. ``jit`` checks its
# compiled function's values and re-runs the IR one equation at a time
# (``check_ir_values``) to find the culprit.

def nonfinite_kind(value):
    """``"nan"`` or ``"inf"`` when ``value`` (a NumPy array or scalar) holds one that the
    debug flags ask about, else None."""
    dt = getattr(value, "dtype", None)
    if dt is None or dt.kind not in "fc":
        return None
    v = config.values
    if v["jax_debug_nans"] and np.isnan(value).any():
        return "nan"
    if v["jax_debug_infs"] and np.isinf(value).any():
        return "inf"
    return None


def _raise_nonfinite(kind, prim_name, source, where=""):
    flag = "jax_debug_nans" if kind == "nan" else "jax_debug_infs"
    raise FloatingPointError(
        f"invalid value ({kind}) encountered in {prim_name}{where}, at {source}. "
        f"({flag} is on, so every floating-point result is checked; turn it off with "
        f"fnx.config.update({flag!r}, False) if this value is intended.)")


def _checking_process_primitive(prim, args, params):
    out = EvalTrace.process_primitive(EVAL, prim, args, params)
    outs = out if prim.multiple_results else (out,)
    for o in outs:
        kind = nonfinite_kind(o._value)
        if kind is not None:
            from .ir import Eqn
            try:  # a call or a loop: name the primitive inside it
                _enter(Eqn(prim, [], [], params), list(args), "")
            except FloatingPointError:
                raise
            except Exception:  # noqa: BLE001 - only a better message was at stake
                pass
            _raise_nonfinite(kind, prim.name, user_frame_info(2))
    return out


def check_ir_values(ir, args, where):
    """Evaluate ``ir`` on concrete ``args`` one equation at a time, raising
    FloatingPointError at the first equation whose output holds a NaN/inf the debug
    flags ask about, with its primitive and the line that traced it. Calls (jit) are
    entered, and so are the bodies of ``scan``, ``while`` and ``cond`` (step by step).
    Raises FloatingPointError naming ``where`` if no equation produced one (only the
    compiled code did)."""
    token = CURRENT_TRACE.set(EVAL)
    try:
        _locate(ir, list(args), where)
    finally:
        CURRENT_TRACE.reset(token)
    kind = "nan" if config.values["jax_debug_nans"] else "inf"
    raise FloatingPointError(
        f"invalid value ({kind}) encountered in {where}: its compiled code produced it, but "
        "evaluating its equations one at a time did not (a difference between the compiled "
        "and the eager code worth reporting)")


def _locate(ir, args, where, consts=None):
    """``ir``'s outputs, evaluated one equation at a time with each output checked."""
    from .array import Array
    from .ir import Literal
    env = {}
    for v, x in zip(ir.constvars, ir.consts if consts is None else consts):
        env[v] = x if isinstance(x, Array) else Array._wrap(x)
    env.update(zip(ir.invars, args))

    def read(v):
        return Array._wrap(v.value, v.aval.weak_type) if type(v) is Literal else env[v]

    for e in ir.eqns:
        ins = [read(v) for v in e.inputs]
        out = EvalTrace.process_primitive(EVAL, e.prim, ins, e.params)
        outs = out if e.prim.multiple_results else [out]
        for o in outs:
            kind = nonfinite_kind(o._value)
            if kind is None:
                continue
            try:
                _enter(e, ins, where)
            except FloatingPointError:
                raise
            except Exception:  # noqa: BLE001 - only a better message was at stake
                pass
            _raise_nonfinite(kind, e.prim.name, e.source, f" (inside {where})")
        env.update(zip(e.outputs, outs))
    return [read(v) for v in ir.outvars]


def _enter(e, ins, where):
    """Re-run a call or control-flow equation's inner IRs one equation at a time
    (raising where they make the NaN/inf): a call's IR (jit) directly, a loop's or a
    conditional's through its primitive's ``locate_nonfinite`` rule."""
    p, name = e.params, e.prim.name
    sub = p.get("ir")
    if sub is not None and hasattr(sub, "eqns"):  # a call (jit)
        _locate(sub, ins, f"jit({p.get('name', name)})")
    elif e.prim.locate_nonfinite is not None:
        e.prim.locate_nonfinite(p, ins, f"{name} inside {where}" if where else name,
                                locate_nonfinite)


def locate_nonfinite(ir, args, where):
    """Evaluate ``ir`` on ``args`` one equation at a time, raising FloatingPointError at
    the first that makes a NaN/inf the debug flags ask about (its primitive, its source
    line and ``where``); its outputs otherwise. What a ``locate_nonfinite`` rule calls
    for each inner IR it runs."""
    return _locate(ir, args, where)


def apply_debug_flags(_value=None):
    """Install or remove the eager check, as jax_debug_nans and jax_debug_infs say (the
    flags' change hook; jit calls it once more when the flags came from the environment).
    Eager ``grad`` normally runs each primitive's derivative as compiled code
    (``cache_eager_vjp``); while checking, it evaluates them primitive by primitive
    instead, forward and backward, so each one is checked."""
    from .primitive import REGISTRY
    v = config.values
    if v["jax_debug_nans"] or v["jax_debug_infs"]:
        EVAL.process_primitive = _checking_process_primitive
        for prim in list(REGISTRY.values()):
            if prim not in _SAVED_CACHE_VJP:
                _SAVED_CACHE_VJP[prim] = prim.cache_eager_vjp
                prim.cache_eager_vjp = False
        # The libraries' eager shortcuts (``fnx.numpy``'s binary ops calling the ufunc
        # when ``get_trace() is EVAL``) skip dispatch: point their ``EVAL`` at an object
        # no trace is, so every op goes through the checked dispatch.
        for name, mod in list(sys.modules.items()):
            if (name.startswith(_LIBRARY_PREFIXES) and mod is not None
                    and mod.__dict__.get("EVAL") is EVAL):
                mod.EVAL = _NOT_EVAL
                _PATCHED_MODULES.append(mod)
    else:
        EVAL.__dict__.pop("process_primitive", None)
        for prim, cached in _SAVED_CACHE_VJP.items():
            prim.cache_eager_vjp = cached
        _SAVED_CACHE_VJP.clear()
        for mod in _PATCHED_MODULES:
            mod.EVAL = EVAL
        _PATCHED_MODULES.clear()


_SAVED_CACHE_VJP: dict = {}
_PATCHED_MODULES: list = []
_LIBRARY_PREFIXES = ("fnx.numpy", "fnx.lax", "fnx.nn", "fnx.scipy", "fnx.random",
                     "fnx.backends.numpy_eager")
_NOT_EVAL = object()
config.on_change("jax_debug_nans", apply_debug_flags)
config.on_change("jax_debug_infs", apply_debug_flags)
# flags set by the environment are applied by fnx/__init__, once every primitive exists
