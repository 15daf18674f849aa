"""NumPy's floating-point error state, switched to "ignore all" cheaply.

fnx follows JAX: no floating-point warnings (overflow, ``inf - inf``, ``0 * inf``,
division by zero); the values are IEEE's. ``np.errstate`` costs about 1 us per use,
as much as a small ufunc call, so hot code sets NumPy's error-state context variable
to a prebuilt "ignore all" state directly:

- ``quiet_set(IGNORE_ALL)`` / ``quiet_reset(token)`` around a block (primitive impls
  through ``quiet(f)``; the NumPy backend's generated functions, once per call);
- ``quiet_run(f, *args, **kw)``, the cheapest for one call (about 20 ns against 130 ns
  for set/reset: it enters a prebuilt context instead of building one), used by the
  eager fast path of ``fnx.numpy``. That context is a single object: where it is
  already entered (another thread inside it) ``quiet_run`` raises ``RuntimeError``
  before calling ``f``; callers then use ``quiet_call``, which always works.

On NumPy versions without the context variable (1.x) every name falls back to
``np.seterr`` (what ``np.errstate`` does there), so callers need no second branch.
A helper of the NumPy backend that imports only NumPy, so every layer (``lax``
included) may import it.
"""
from __future__ import annotations

import contextvars

import numpy as np

__all__ = ["IGNORE_ALL", "ERROR_STATE", "quiet_set", "quiet_reset", "quiet_run", "quiet_call",
           "quiet"]

try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    IGNORE_ALL = _make_extobj(all="ignore")
    ERROR_STATE = _extobj_contextvar          # the context variable itself (generated code
    #                                           sets and resets it around a whole call)
    quiet_set = _extobj_contextvar.set        # quiet_set(IGNORE_ALL) -> token
    quiet_reset = _extobj_contextvar.reset    # quiet_reset(token)
    _QUIET_CONTEXT = contextvars.Context()
    _QUIET_CONTEXT.run(quiet_set, IGNORE_ALL)
    quiet_run = _QUIET_CONTEXT.run            # quiet_run(f, *args, **kw) -> f(*args, **kw)
except (ImportError, AttributeError, TypeError):  # pragma: no cover - NumPy 1.x
    IGNORE_ALL = "ignore"
    ERROR_STATE = None                        # no context variable: use np.errstate

    def quiet_set(state):
        """Ignore every floating-point error; returns the previous settings."""
        return np.seterr(all=state)

    def quiet_reset(token):
        """Restore the settings ``quiet_set`` returned."""
        np.seterr(**token)

    def quiet_run(f, *args, **kw):
        return quiet_call(f, *args, **kw)


def quiet_call(f, *args, **kw):
    """``f(*args, **kw)`` with NumPy's floating-point errors ignored (any thread)."""
    token = quiet_set(IGNORE_ALL)
    try:
        return f(*args, **kw)
    finally:
        quiet_reset(token)


def quiet(f):
    """``f`` run without NumPy floating-point warnings. ``quiet(f).raw`` is ``f`` (the
    NumPy backend calls raw functions inside one quiet state for a whole function)."""
    def impl(*args, **kw):
        token = quiet_set(IGNORE_ALL)
        try:
            return f(*args, **kw)
        finally:
            quiet_reset(token)
    impl.__name__ = getattr(f, "__name__", "impl")
    impl.raw = f
    return impl
