"""``from fnx.experimental import checkify``: JAX's ``jax.experimental.checkify``.

``checkify.check(pred, msg, *fmt_args, **fmt_kwargs)`` inside a function and
``checkify.checkify(f, errors=...)`` around it give ``(err, out)``; ``err.get()`` is the
first error's message (or None), ``err.throw()`` raises ``JaxRuntimeError`` (a
``ValueError``). Error sets: ``user_checks``, ``nan_checks``, ``div_checks``,
``index_checks``, ``float_checks``, ``automatic_checks``, ``all_checks`` (combine with
``|``). The transformation and the ``check`` primitive live in
``fnx.transforms.checkify``.
"""
from ..transforms.checkify import (  # noqa: F401
    BatchedError, DivisionByZeroError, Error, ErrorCategory, FailedCheckError, JaxException,
    JaxRuntimeError, NaNError, OOBError, all_checks, automatic_checks, check, check_error,
    checkify, debug_check, div_checks, float_checks, index_checks, init_error, nan_checks,
    user_checks)

__all__ = ["Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks",
           "check", "check_error", "checkify", "debug_check", "div_checks", "float_checks",
           "index_checks", "init_error", "nan_checks", "user_checks"]
