"""``fnx.debug``: printing and callbacks at run time, under jit, vmap and grad.

    @fnx.jit
    def step(x):
        fnx.debug.print("x = {x}, sum = {}", x.sum(), x=x)
        return x * 2

``fnx.debug.print`` and ``fnx.debug.callback`` bind the effectful ``debug_callback``
primitive (``fnx.lax.callback``), so they run when the program runs, not when it is
traced: eagerly at once; under ``jit`` on every call of the compiled function (a
Python ``print`` in a jitted function runs once, at trace time); under ``vmap`` once
per batch element, in order; under ``grad`` once, in the forward pass (values are the
primals). As in JAX, format with ``str.format`` placeholders, not f-strings: an
f-string is formatted at trace time, when values are tracers.

``fnx.debug.log`` formats like ``print`` and hands the text to the ``logging`` logger
``"fnx.debug"`` (INFO, with the calling source line in the record), as ``jax.debug.log``.

Arrays reach the callback as fnx Arrays (copies: keeping them is safe); other leaves
(strings, None, objects) as they were passed. ``ordered`` and ``partitioned`` are
accepted: fnx runs callbacks in program order on one device, so both hold always.
"""
from __future__ import annotations

import copy
import logging
import string

import numpy as np

from .lax.callback import debug_callback as _bind_debug_callback

__all__ = ["callback", "log", "print"]

_builtin_print = print


def callback(callback=None, *args, ordered=False, partitioned=False, **kwargs):
    """Call ``callback(*args, **kwargs)`` at run time (see the module doc); returns None.

    Also the two-call form ``fnx.debug.callback(ordered=True)(fn, *args, **kwargs)``."""
    if callback is None:
        if args or kwargs:
            raise TypeError("debug.callback: give the callback first: "
                            "debug.callback(fn, *args, **kwargs)")

        def call(callback, *args, **kwargs):
            _bind_debug_callback(callback, *args, **kwargs)
        return call
    _bind_debug_callback(callback, *args, **kwargs)
    return None


class _Blank:
    """A stand-in argument that formats under any format spec (checks placeholders)."""

    def __format__(self, spec):
        return ""

    def __getattr__(self, name):
        return self

    def __getitem__(self, key):
        return self


def _check_format(fmt, args, kwargs):
    """Raise now, at trace time, for a placeholder with no argument (JAX checks too)."""
    try:
        list(string.Formatter().parse(fmt))
        fmt.format(*[_Blank()] * len(args), **{k: _Blank() for k in kwargs})
    except (IndexError, KeyError) as e:
        raise ValueError(
            f"debug.print/log: the format string {fmt!r} names a placeholder {e} that no "
            f"argument fills (got {len(args)} positional arguments and keywords "
            f"{sorted(kwargs)}). Pass the value as an argument: "
            f"debug.print('x={{x}}', x=x), not an f-string.") from None
    except ValueError as e:
        raise ValueError(f"debug.print/log: bad format string {fmt!r}: {e}") from None


def _format_value(x):
    """The value ``str.format`` sees: a NumPy scalar for a 0-d array (so ``{:.2f}``
    works), else the NumPy array (printed as NumPy prints it, as JAX does)."""
    v = np.asarray(x)
    return v[()] if v.ndim == 0 else v


def print(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
          **kwargs):
    """Print ``fmt.format(*args, **kwargs)`` at run time (see the module doc).

    Also the two-call form ``fnx.debug.print(ordered=True)("x={x}", x=x)``."""
    return _emit("print", fmt, args, kwargs, skip_format_check, None)


def log(fmt=None, *args, ordered=False, partitioned=False, skip_format_check=False,
        **kwargs):
    """Like ``print``, but the text goes to the ``logging`` logger ``"fnx.debug"`` at INFO
    level, in a record naming the user's source line that called ``log``."""
    return _emit("log", fmt, args, kwargs, skip_format_check, logging.INFO)


_LOGGER = logging.getLogger("fnx.debug")


def _user_site():
    """(file, line) of the user's code calling into fnx (for a log record)."""
    from .core.trace import user_frame_info
    where = user_frame_info(3)
    head = where.rsplit(" (", 1)[0]
    file, _, line = head.rpartition(":")
    return (file, int(line)) if line.isdigit() else ("(unknown file)", 0)


def _emit(what, fmt, args, kwargs, skip_format_check, level):
    if fmt is None:
        if args or kwargs:
            raise TypeError(f"debug.{what}: give the format string first: "
                            f"debug.{what}('x={{x}}', x=x)")

        def call(fmt, *args, **kwargs):
            return _emit(what, fmt, args, kwargs, skip_format_check, level)
        return call
    if not isinstance(fmt, str):
        raise TypeError(f"debug.{what}: the first argument must be a format string, got "
                        f"{type(fmt).__name__}; write debug.{what}('{{}}', x) to show x")
    if not skip_format_check:
        _check_format(fmt, args, kwargs)
    record = None
    if level is not None:
        file, line = _user_site()
        record = _LOGGER.makeRecord(_LOGGER.name, level, file, line, "", (), None)

    def emit(*args, **kwargs):
        args = [_format_value(a) if _arraylike(a) else a for a in args]
        kwargs = {k: _format_value(v) if _arraylike(v) else v for k, v in kwargs.items()}
        text = fmt.format(*args, **kwargs)
        if record is None:
            _builtin_print(text, flush=True)
        elif _LOGGER.isEnabledFor(level):
            r = copy.copy(record)
            r.msg = text
            _LOGGER.handle(r)

    _bind_debug_callback(emit, *args, name=f"{what}({fmt!r})", **kwargs)
    return None


def _arraylike(x):
    from .core.array import Array
    return isinstance(x, (Array, np.ndarray, np.generic))

