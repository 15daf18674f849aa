"""Testing helpers for code written with fnx, and for new ops.

    from fnx.testing import check_grads, check_op, rules_report
    from fnx.testing import strategies as fst   # hypothesis strategies (needs hypothesis)

    check_grads(f, (x, params), order=2, modes=("fwd", "rev"))
    check_op(my_prim, fst.arrays(...).map(lambda x: (x,)), reference=np_version)
    print(rules_report())

``check_grads`` compares forward mode (``fnx.jvp``) against central finite
differences and reverse mode (``fnx.vjp``) against both, through the
dot-product identity, up to the requested order; a failure names the mode,
the order, the argument and the output that disagree.

``check_op`` property-tests every rule of an op (impl against a reference,
shape rule, jit, vmap, jvp, vjp, GPU kernel, ONNX lowering) on inputs drawn
by hypothesis, and names the rule that broke with a shrunk input.
``rules_report`` tabulates which rules every registered primitive has.

This package imports only NumPy and fnx: hypothesis (a test extra) is imported
by ``check_op`` when it runs and by ``fnx.testing.strategies``, so
``import fnx.testing`` works without it.
"""
from ._check_op import CHECKS, Example, OpCheckError, OpReport, check_op, value_tolerance
from ._grads import check_grads, default_tolerances
from ._report import RulesReport, rules_report

__all__ = ["CHECKS", "Example", "OpCheckError", "OpReport", "RulesReport", "check_grads",
           "check_op", "default_tolerances", "rules_report", "value_tolerance"]
