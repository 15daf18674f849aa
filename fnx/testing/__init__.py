"""Testing helpers for code written with fnx.

    from fnx.testing import check_grads

    check_grads(f, (x, params), order=2, modes=("fwd", "rev"))

``check_grads`` compares forward mode (``fnx.jvp``) against central finite
differences and reverse mode (``fnx.vjp``) against both, through the
dot-product identity, up to the requested order; a failure names the mode,
the order, the argument and the output that disagree.

This package imports only NumPy and fnx: hypothesis (a test extra) is never
imported here at module level, so ``import fnx.testing`` works without it.
"""
from ._grads import check_grads, default_tolerances

__all__ = ["check_grads", "default_tolerances"]
