"""Control flow as primitives holding sub-IRs: cond, switch, while_loop, fori_loop, scan, map.

Each construct traces its Python functions into closed IRs (no constants of their own:
values they close over, concrete arrays or tracers of enclosing transformations, become
leading operands of the primitive), and binds one primitive that carries them:

* ``cond``: operands ``index, *ops``; param ``branches`` (one IR per branch, each taking
  ``ops``). The impl runs the chosen branch; ``cond``/``switch`` with a concrete index
  and no enclosing trace just call the chosen Python function.
* ``while``: operands ``*cond_consts, *body_consts, *carry``; params ``cond_ir``,
  ``body_ir``, ``cond_nconsts``, ``body_nconsts``.
* ``scan``: operands ``*consts, *init, *xs``; params ``body`` (``consts, carry, x ->
  carry, y``), ``num_consts``, ``num_carry``, ``length``, ``reverse``, ``unroll``.

Rules. jvp: ``scan`` and ``cond`` linearize their bodies: a forward primitive computes
the primal outputs and the residuals (a scan stacks per-iteration residuals like ys;
residuals that are loop-invariant or an ``xs`` slice are not stacked), and a second,
linear one maps tangents, so reverse mode transposes only the linear one (a reverse
scan of the transposed body, a cond of transposed branches). ``while`` differentiates
in forward mode only (its trip count is unknown; use ``scan`` or ``fori_loop`` with
static bounds for reverse mode). vmap: a batched ``cond`` index becomes a select of
every branch's outputs; a batched ``while`` predicate loops until every lane is done,
freezing finished lanes with a select. Impls: the bodies run on the backend holding
the operands, through ``fnx.core.backend`` (``apply_ir`` for a branch, ``executable``
for the while bodies, ``apply_scan`` for a whole scan, which the NumPy backend
restructures with ``scan_plan.plan_scans`` and runs as one generated function:
``fnx.backends.numpy_loops``); control flow imports no backend.
DCE: unused outputs of ``scan``/``cond`` are dropped, with what only they needed
inside the bodies. ONNX: ``cond`` lowers to ``If`` (a chain of them for more than two
branches), ``scan`` to ``Scan``, ``while`` to ``Loop``; the bodies become subgraphs
lowered by the exporter's own IR lowering, reading operands and loop constants from the
enclosing graph (ONNX outer scope).

Modules: ``common`` (tracing into closed IRs, jvp/vmap of an IR inside a rule, carry
checks), ``conditionals`` (``cond``/``switch``), ``loops`` (``while_loop``,
``fori_loop``, ``scan``, ``map``), ``scan_plan`` (``plan_scans``: the IR pass a backend
runs before lowering, moving the work a scan body need not do on every step out of the
loop; ``scan`` binds the loop as written).
"""
from __future__ import annotations

from .conditionals import cond, cond_p, switch
from .loops import fori_loop, map, scan, scan_p, while_loop, while_p
from .scan_plan import plan_scans, scan_plan_for

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]
