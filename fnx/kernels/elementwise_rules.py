"""The CUDA expressions of the built-in elementwise primitives, as a table (kept for
code that reads it; nothing needs importing it).

Each expression is the primitive's ``"cuda"`` lowering, registered beside its other
rules in ``fnx.lax.elementwise`` and written with the helpers of ``fnx.core.cuda_rules``
(whose docstring states the semantics the expressions follow and what is left out).

``HOOKS`` maps each elementwise primitive that has one to its expression (its
``kernel`` rule); ``LEFT_OUT`` names the elementwise primitives without one and why.
"""
from __future__ import annotations

from ..core.backend import lowering
from ..core.cuda_rules import LEFT_OUT  # noqa: F401
from ..core.primitive import Primitive
from ..lax import elementwise as _E

HOOKS = {p: lowering(p, "cuda") for p in vars(_E).values()
         if isinstance(p, Primitive) and lowering(p, "cuda") is not None}
