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
_current = contextvars.ContextVar("fnx_trace", default=EVAL)
get_trace = _current.get


@contextlib.contextmanager
def trace_context(trace: Trace):
    """Make ``trace`` current inside the block; it is invalid after the block."""
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)
        trace.valid = False


@contextlib.contextmanager
def parent_context(trace: Trace):
    """Make ``trace.parent`` current inside the block (a trace binds there)."""
    token = _current.set(trace.parent)
    try:
        yield
    finally:
        _current.reset(token)


def bind(prim, args, params):
    """Hand a primitive call to the current trace."""
    return _current.get().process_primitive(prim, args, params)
