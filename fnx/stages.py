"""``fnx.stages``, JAX's ``jax.stages``: the types of a jitted function's ahead-of-time
stages, for ``isinstance`` checks and annotations in ported code.

``Wrapped``: what ``fnx.jit(f)`` returns; ``Traced``: ``jitted.trace(*args)``;
``Lowered``: ``jitted.lower(*args)`` (or ``traced.lower()``); ``Compiled``:
``lowered.compile()``, callable with arguments of the lowered types; ``ArgInfo``: one
dynamic argument of a stage (``args_info``); ``CompilerOptions``: the dict type of
``compile``'s options (fnx takes and ignores them)."""
from __future__ import annotations

from typing import Any

from .transforms.jit import ArgInfo, Compiled, JitFunction, Lowered, Traced

Wrapped = JitFunction
CompilerOptions = dict[str, Any]

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
