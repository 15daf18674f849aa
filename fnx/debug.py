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

``fnx.debug.breakpoint()`` stops the program when it runs (under ``jit`` on every call,
under ``vmap`` once per batch element) in a small pdb-like debugger, ``jdb`` as in JAX,
where the traced function's local variables hold their run-time values: ``p expr``,
``pp expr``, any Python expression or statement, ``u``/``d`` (up/down a frame), ``l``/``ll``
(source), ``w`` (where), ``c`` (continue), ``q`` (quit: exits the program, as JAX). One
difference: at the end of input (no terminal, stdin closed) it continues, where JAX exits.

Arrays reach the callback as fnx Arrays (copies: keeping them is safe); other leaves
(strings, None, objects) as they were passed. ``ordered`` and ``partitioned`` are
accepted: fnx runs callbacks in program order on one device, so both hold always.
"""
from __future__ import annotations

import copy
import logging
import os
import string
import sys

import numpy as np

from . import tree_util
from .core.array import Array, Tracer
from .core.trace import get_trace, user_frame_info
from .lax import stop_gradient
from .lax.callback import debug_callback as _bind_debug_callback

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))  # fnx's own frames are left out

__all__ = ["breakpoint", "callback", "log", "print"]

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
    return isinstance(x, (Array, np.ndarray, np.generic))



# --- breakpoint ------------------------------------------------------------------------------

_BACKENDS = ("cli", None)


class _Frame:
    """A user stack frame as the debugger shows it: name, file, line, source, and its
    locals (tracers among them stand for the run-time values filled in at each stop)."""

    def __init__(self, frame, lineno):
        code = frame.f_code
        self.filename, self.lineno, self.name = code.co_filename, lineno, code.co_name
        self.globals = frame.f_globals
        self.locals = dict(frame.f_locals) if code.co_name != "<module>" else {}
        try:
            import inspect
            lines, start = inspect.getsourcelines(frame)
            self.source, self.start = [ln.rstrip("\n") for ln in lines], max(start, 1)
        except (OSError, TypeError):
            self.source, self.start = [], lineno

    def namespace_with(self, values):
        new = object.__new__(_Frame)
        new.__dict__.update(self.__dict__)
        new.locals = values
        return new


def _live_tracer(x):
    """A tracer of a trace that is still open around the current one (usable here)."""
    return isinstance(x, Tracer) and x._trace.valid and x._trace.is_ancestor_of(get_trace())


def _split_locals(frames):
    """(dynamic values, how to rebuild each frame's locals): live tracers, also inside
    pytrees, become the callback's operands; everything else is kept as it is."""
    dyn, plans = [], []
    for fr in frames:
        plan = {}
        for name, v in fr.locals.items():
            try:
                leaves, tree = tree_util.tree_flatten(v)
            except Exception:  # an object tree_util cannot walk: keep it as it is
                plan[name] = ("static", v)
                continue
            if not any(isinstance(x, Tracer) for x in leaves):
                plan[name] = ("static", v)
                continue
            slots = []
            for x in leaves:
                if _live_tracer(x):
                    slots.append(len(dyn))
                    dyn.append(x)
                elif isinstance(x, Tracer):
                    slots.append(_EndedTracer(x))
                else:
                    slots.append(_Static(x))
            plan[name] = ("tree", tree, slots)
        plans.append(plan)
    return dyn, plans


class _Static:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _EndedTracer:
    """Shown for a tracer in a local whose trace has ended (it has no value here)."""
    __slots__ = ("text",)

    def __init__(self, t):
        self.text = f"<{t!r}: a traced value of an ended trace>"

    def __repr__(self):
        return self.text


def _rebuild(plan, values):
    out = {}
    for name, p in plan.items():
        if p[0] == "static":
            out[name] = p[1]
        else:
            _, tree, slots = p
            leaves = [values[s] if isinstance(s, int) else
                      s.value if isinstance(s, _Static) else s for s in slots]
            out[name] = tree_util.tree_unflatten(tree, leaves)
    return out


def breakpoint(*, backend=None, filter_frames=True, num_frames=None, ordered=False,  # noqa: A001
               token=None, **kwargs):
    """Stop in the ``jdb`` debugger when the program runs here (see the module doc).

    ``num_frames`` limits the frames shown (innermost first); ``filter_frames=False``
    keeps fnx's own frames too. ``stdin``/``stdout`` (keywords) replace the terminal.
    With ``token`` (an array or pytree), the debugger runs once it is computed and the
    token is returned unchanged (pass it on); without, returns None."""
    if token is not None and ordered:
        raise ValueError("debug.breakpoint: `ordered` and `token` are mutually exclusive; "
                         "give one of them")
    if backend not in _BACKENDS:
        raise ValueError(f"debug.breakpoint: backend {backend!r} is not available; fnx has "
                         "the command-line debugger only (backend=None or 'cli')")
    unknown = set(kwargs) - {"stdin", "stdout"}
    if unknown:
        raise TypeError(f"debug.breakpoint: unexpected keyword arguments {sorted(unknown)}; "
                        "it takes backend, filter_frames, num_frames, ordered, token, "
                        "stdin and stdout")
    frames, f = [], sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        inside = fn.startswith(_PKG_DIR) and "/tests/" not in fn
        if not (filter_frames and inside):
            frames.append(_Frame(f, f.f_lineno))
        f = f.f_back
    if num_frames is not None:
        frames = frames[:num_frames]
    dyn, plans = _split_locals(frames)
    stdin, stdout = kwargs.get("stdin"), kwargs.get("stdout")

    def stop(*values):
        shown = [fr.namespace_with(_rebuild(p, values)) for fr, p in zip(frames, plans)]
        _Debugger(shown, stdin, stdout).run()

    if token is None:
        _bind_debug_callback(stop, *dyn, name="breakpoint")
        return None
    _bind_debug_callback(lambda tok, *values: stop(*values), stop_gradient(token), *dyn,
                         name="breakpoint")
    return token


class _Debugger:
    """The ``jdb`` command loop over the stopped frames (innermost first)."""
    prompt = "(jdb) "

    def __init__(self, frames, stdin=None, stdout=None):
        self.frames, self.index = frames, 0
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stdout = stdout if stdout is not None else sys.stdout

    def out(self, text=""):
        self.stdout.write(f"{text}\n")
        self.stdout.flush()

    @property
    def frame(self):
        return self.frames[self.index]

    def run(self):
        self.out("Entering jdb (fnx.debug.breakpoint; 'help' lists the commands):")
        if not self.frames:
            self.out("(no frames to show)")
        else:
            self.context()
        while True:
            self.stdout.write(self.prompt)
            self.stdout.flush()
            line = self.stdin.readline()
            if not line:
                self.out("\n(end of input: continuing)")
                return
            line = line.strip()
            if not line:
                continue
            cmd, _, arg = line.partition(" ")
            handler = self.COMMANDS.get(cmd)
            if handler is None:
                self.execute(line)
            elif handler(self, arg.strip()) == "continue":
                return

    # -- commands (each returns "continue" to leave the loop)
    def do_help(self, arg):
        self.out("p EXPR / pp EXPR: print an expression (pretty-printed); any other line\n"
                 "  is run as Python in the current frame, an expression's value printed\n"
                 "u(p) / d(own): move out / in one frame;  w(here), bt: the stack\n"
                 "l(ist): the source around the line;  ll: the whole function\n"
                 "c(ont(inue)): run on;  q(uit), exit: stop the program (SystemExit)")

    def do_p(self, arg):
        ok, v = self.evaluate(arg)
        if ok:
            self.out(repr(v))

    def do_pp(self, arg):
        import pprint
        ok, v = self.evaluate(arg)
        if ok:
            self.out(pprint.pformat(v))

    def do_up(self, arg):
        if self.index + 1 >= len(self.frames):
            self.out("*** at the outermost frame")
        else:
            self.index += 1
            self.context()

    def do_down(self, arg):
        if self.index == 0:
            self.out("*** at the innermost frame")
        else:
            self.index -= 1
            self.context()

    def do_list(self, arg):
        self.context(5)

    def do_longlist(self, arg):
        self.context(None)

    def do_where(self, arg):
        for i in reversed(range(len(self.frames))):
            f = self.frames[i]
            mark = ">" if i == self.index else " "
            self.out(f"{mark} {f.filename}({f.lineno}){f.name}()")

    def do_continue(self, arg):
        return "continue"

    def do_quit(self, arg):
        raise SystemExit(0)

    COMMANDS = {"help": do_help, "h": do_help, "p": do_p, "pp": do_pp, "u": do_up,
                "up": do_up, "d": do_down, "down": do_down, "l": do_list, "list": do_list,
                "ll": do_longlist, "longlist": do_longlist, "w": do_where,
                "where": do_where, "bt": do_where, "c": do_continue, "cont": do_continue,
                "continue": do_continue, "q": do_quit, "quit": do_quit, "exit": do_quit}

    def context(self, around=2):
        f = self.frame
        self.out(f"> {f.filename}({f.lineno}){f.name}()")
        if not f.source:
            return
        lo, hi = 0, len(f.source)
        if around is not None:
            at = f.lineno - f.start
            lo, hi = max(at - around, 0), min(at + around + 1, hi)
        for k in range(lo, hi):
            n = f.start + k
            mark = "->" if n == f.lineno else "  "
            self.out(f"{n:4d} {mark} {f.source[k]}")

    def evaluate(self, expr):
        try:
            return True, eval(expr, self.frame.globals, self.frame.locals)  # noqa: S307
        except Exception as e:  # a user's typo must not end the session
            self.out(f"*** {type(e).__name__}: {e}")
            return False, None

    def execute(self, line):
        try:
            code = compile(line, "<jdb>", "eval")
        except SyntaxError:
            try:
                exec(compile(line, "<jdb>", "exec"), self.frame.globals,  # noqa: S102
                     self.frame.locals)
            except Exception as e:
                self.out(f"*** {type(e).__name__}: {e}")
            return
        try:
            v = eval(code, self.frame.globals, self.frame.locals)  # noqa: S307
        except Exception as e:
            self.out(f"*** {type(e).__name__}: {e}")
            return
        if v is not None:
            self.out(repr(v))
