"""``rules_report``: which rules every registered primitive has, as a table.

A primitive needs an impl, a shape rule, a jvp rule and a batching rule, and a
transpose rule when it is linear (``deflinear``/``deflinear_in`` mark it, and
so does giving it a transpose); a primitive can waive a rule it cannot have by
naming it, with the reason, in ``prim.not_needed`` (``iota`` has no operands
to batch). The ONNX lowering and the GPU kernel are optional and shown for
information.
"""
from __future__ import annotations

from ..core.primitive import REGISTRY

__all__ = ["RULES", "RulesReport", "rules_report"]

RULES = ("impl", "shape_rule", "jvp", "transpose", "batch", "onnx", "kernel")
_OPTIONAL = ("onnx", "kernel")


def _needs(prim):
    need = {"impl", "shape_rule", "jvp", "batch"}
    if prim.linear:
        need.add("transpose")
    return need - set(getattr(prim, "not_needed", {}))


class RulesReport:
    """The table of rules per primitive. ``missing`` maps each primitive that lacks a
    rule it needs to those rules; ``str(report)`` is the table (``markdown()`` too)."""

    def __init__(self, prims):
        self.rows = []
        self.missing = {}
        for prim in prims:
            have = prim.rules()
            need = _needs(prim)
            cells = {}
            for r in RULES:
                if have[r]:
                    cells[r] = "yes"
                elif r in need:
                    cells[r] = "MISSING"
                elif r in getattr(prim, "not_needed", {}):
                    cells[r] = "n/a"
                else:
                    cells[r] = "-"
            self.rows.append((prim.name, cells))
            lacking = sorted(r for r in need if not have[r])
            if lacking:
                self.missing[prim.name] = lacking

    def counts(self):
        """Rule -> how many primitives have it."""
        return {r: sum(c[r] == "yes" for _, c in self.rows) for r in RULES}

    def _table(self, sep, rule_line):
        total = f"({len(self.rows)} primitives)"
        width = max([len("primitive"), len(total)] + [len(n) for n, _ in self.rows])
        head = sep.join([f"{'primitive':{width}s}"] + [f"{r:10s}" for r in RULES])
        lines = [head, rule_line(width)]
        for name, cells in self.rows:
            lines.append(sep.join([f"{name:{width}s}"] + [f"{cells[r]:10s}" for r in RULES]))
        counts = self.counts()
        lines.append(sep.join([f"{total:{width}s}"] + [f"{counts[r]:<10d}" for r in RULES]))
        return lines

    def __str__(self):
        lines = self._table("  ", lambda w: "  ".join(["-" * w] + ["-" * 10] * len(RULES)))
        note = ("MISSING: a rule the primitive needs; n/a: waived (prim.not_needed); "
                "-: optional (onnx, kernel) or not applicable (transpose of a nonlinear op)")
        return "\n".join([line.rstrip() for line in lines] + [note])

    def markdown(self):
        lines = self._table(" | ", lambda w: "|".join(["---"] * (len(RULES) + 1)))
        return "\n".join("| " + line.rstrip() + " |" if i != 1 else "|" + line + "|"
                         for i, line in enumerate(lines))

    __repr__ = __str__


def rules_report(primitives=None) -> RulesReport:
    """The rules of ``primitives`` (names or Primitive objects; default: every registered
    primitive, built-in and user-defined, sorted by name)."""
    if primitives is None:
        prims = [REGISTRY[n] for n in sorted(REGISTRY)]
    else:
        prims = [REGISTRY[p] if isinstance(p, str) else p for p in primitives]
    return RulesReport(prims)
