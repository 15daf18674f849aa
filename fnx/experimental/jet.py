"""``jet``: Taylor-mode derivatives, as ``jax.experimental.jet``.

``jet(fun, primals, series)`` takes a truncated Taylor polynomial of the inputs, ``x(t) =
x0 + x1 t + x2 t**2 / 2! + ... + xK t**K / K!`` (``primals`` the ``x0``, ``series`` the
lists ``[x1, ..., xK]``, one per argument), and returns ``fun(x0)`` and the derivatives
``[y1, ..., yK]`` of ``y(t) = fun(x(t))`` at ``t = 0``, so that ``y0 + y1 t + ... + yK
t**K / K!`` is the same truncation of ``y``. With ``factorial_scaled=False`` (``jet2``)
both series hold the plain coefficients (``x(t) = x0 + x1 t + x2 t**2 + ...``).

The derivatives are those of the curve ``t -> fun(x(t))``, taken by ``K`` nested ``jvp``s
in ``t`` (each level one forward derivative of the level below), so every primitive
with a ``jvp`` rule has a Taylor rule, and the results are exact to rounding, as JAX's
propagation rules are. The cost grows as ``2**K`` evaluations of ``fun`` (JAX's
propagation grows as ``K**2``): it suits the low orders jet is used at.
"""
from __future__ import annotations

import math

from .. import numpy as fnp
from .. import tree_util
from ..core import dtypes
from ..core.array import to_array
from ..transforms.jvp import jvp

__all__ = ["jet", "jet2"]


def jet(fun, primals, series, factorial_scaled=True, **_):
    """``(fun(*primals), series_out)``: ``series_out`` has ``fun``'s output structure with
    each array replaced by the list of its ``K`` Taylor terms (see the module)."""
    try:
        (order,) = set(map(len, series))
    except ValueError:
        raise ValueError("jet terms have inconsistent lengths for different arguments: "
                         f"{[len(s) for s in series]}; give every argument the same "
                         "number of terms") from None
    if len(primals) != len(series):
        raise ValueError(f"jet: {len(primals)} primals but {len(series)} series; give one "
                         "list of terms per argument")
    xs, coeffs = [], []
    for i, (x, terms) in enumerate(zip(primals, series)):
        if not tree_util.treedef_is_leaf(tree_util.tree_structure(x)):
            raise ValueError(f"primal value at position {i} is not an array")
        for j, t in enumerate(terms):
            if not tree_util.treedef_is_leaf(tree_util.tree_structure(t)):
                raise ValueError(f"term {j} for argument {i} is not an array")
        x = to_array(x, "jet")
        xs.append(x)
        coeffs.append([to_array(t, "jet") / math.factorial(k + 1) if factorial_scaled
                       else to_array(t, "jet") for k, t in enumerate(terms)])
    out_tree = []

    def curve(t):
        args = [(x + sum(c * t ** (k + 1) for k, c in enumerate(cs))).astype(x.dtype)
                if cs else x for x, cs in zip(xs, coeffs)]
        leaves, tree = tree_util.tree_flatten(fun(*args))
        out_tree[:] = [tree]
        return [to_array(v) for v in leaves]

    levels = _derivatives(curve, order)(to_array(0.0))
    outs = levels[0]
    terms = []
    for leaf, derivs in zip(outs, zip(*levels[1:]) if order else [() for _ in outs]):
        if not dtypes.is_inexact(leaf.dtype):
            derivs = [fnp.zeros_like(leaf)] * order   # integer outputs have no series
        elif not factorial_scaled:
            derivs = [d / math.factorial(k + 1) for k, d in enumerate(derivs)]
        terms.append(list(derivs))
    tree = out_tree[0]
    return tree_util.tree_unflatten(tree, outs), tree_util.tree_unflatten(tree, terms)


def jet2(fun, primals, series, **kwargs):
    """``jet`` with plain Taylor coefficients in and out (``factorial_scaled=False``)."""
    return jet(fun, primals, series, factorial_scaled=False, **kwargs)


def _derivatives(f, order):
    """``t -> [f(t), f'(t), ..., f^(order)(t)]`` for ``f`` returning a list of arrays:
    each level is the ``jvp`` in ``t`` of the level below, keeping its values and adding
    the tangent of its highest derivative."""
    if order == 0:
        return lambda t: [f(t)]
    below = _derivatives(f, order - 1)

    def level(t):
        values, tangents = jvp(below, (t,), (fnp.ones_like(t),))
        return list(values) + [tangents[-1]]
    return level
