"""A primitive's lowering on the NumPy backend (``register_lowering(p, "numpy", rule)``),
and the constructors the primitive families build it with (a backend rule helper: it
imports only ``fnx.core``, so ``fnx.lax`` imports it downward).

A primitive's impl is NumPy code already, so on the NumPy backend the impl is the rule
of last resort: jit's generated function calls it with the equation's params bound. A
``NumpyRule`` says how the generated code can do better for an equation, in the order
the backend asks:

* ``ufunc``: the impl *is* this ufunc, called as is (no params): the code calls the ufunc
  directly and may hand it a buffer with ``out=``;
* ``float_ufunc(eqn)``: for an equation on floats, the ufunc the impl runs (``div``'s
  ``true_divide``, ``integer_pow`` by 2's ``square``), or None;
* ``specialize(in_avals, params, permutation)``: a function for these avals (a
  ``dot_general`` or convolution plan: the same one eager calls pick, so jit stays
  bitwise equal to eager); ``permutation``: a ``transpose`` of the result to fuse in, or
  None (jit fuses one only into a rule made with ``transposes=True``, whose function
  applies it). A function that may take ``out=`` says so with ``takes_out = True``;
* ``in_place``: that function may be handed an operand as ``out=`` (it reads each element
  before writing it, and returns a new buffer or ``out``, never a view of an operand, as
  a ufunc does): jit then writes its result into an operand that dies there, as it does a
  ufunc's (a collective's result into the gradient it reduces). ``True``: the first
  operand; or ``in_place(params)``: the positions of the operands it may be handed;
* ``expression(ins, params, bind_global, in_avals, out_avals)``: the equation as one
  Python expression over the input expressions ``ins`` (``bind_global(prefix, value)``
  names a global), or None to fall through to the impl;
* ``reducer``: the ufunc whose ``reduce`` over ``axes`` the impl is (the backend fuses an
  elementwise producer into a blocked reduction with it);
* ``broadcasts``: the impl broadcasts its operands as a ufunc does (so an operand that is
  a ``broadcast_in_dim`` of a smaller value can be read unbroadcast).

A plain callable registered as a primitive's ``"numpy"`` lowering (``fnx.extend``'s and
older code's ``prim.numpy_codegen = fn``) is an ``expression``.

``reduce_plan``: the NumPy plan of a ufunc's reduction over given axes of a given shape
where ``ufunc.reduce`` itself is slow (chosen by shapes alone, so eager host impls and
jit's generated code pick the same one).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

__all__ = ["NumpyRule", "REDUCE_PLAN_MIN_SIZE", "numpy_rule", "reduce_plan", "ufunc_of"]


class NumpyRule:
    """How the NumPy backend's generated code computes a primitive's equations (see the
    module docstring); every field is optional."""

    __slots__ = ("ufunc", "float_ufunc", "specialize", "transposes", "in_place", "expression",
                 "reducer", "broadcasts")

    def __init__(self, *, ufunc=None, float_ufunc=None, specialize=None, transposes=False,
                 in_place=False, expression=None, reducer=None, broadcasts=False):
        if ufunc is not None and not isinstance(ufunc, np.ufunc):
            raise TypeError(f"NumpyRule: ufunc must be a NumPy ufunc, got {ufunc!r}")
        if reducer is not None and not isinstance(reducer, np.ufunc):
            raise TypeError(f"NumpyRule: reducer must be a NumPy ufunc, got {reducer!r}")
        for what, fn in (("float_ufunc", float_ufunc), ("specialize", specialize),
                         ("expression", expression)):
            if fn is not None and not callable(fn):
                raise TypeError(f"NumpyRule: {what} must be callable, got {fn!r}")
        self.ufunc = ufunc
        self.float_ufunc = float_ufunc
        self.specialize = specialize
        self.transposes = bool(transposes)
        if in_place is not False and not (in_place is True or callable(in_place)):
            raise TypeError(f"NumpyRule: in_place must be True, False or a function of "
                            f"the params, got {in_place!r}")
        self.in_place = in_place
        if in_place and specialize is None:
            raise TypeError("NumpyRule: in_place describes the specialize function; "
                            "pass one")
        self.expression = expression
        self.reducer = reducer
        self.broadcasts = bool(broadcasts)

    def written_into(self, params) -> tuple:
        """The positions of the operands the function may be handed as ``out=``."""
        if self.in_place is True:
            return (0,)
        return tuple(self.in_place(params)) if self.in_place else ()

    def __call__(self, ins, params, bind_global, in_avals, out_avals):
        """The ``expression`` hook (None without one): a NumpyRule is callable as the
        plain expression rules are."""
        if self.expression is None:
            return None
        return self.expression(ins, params, bind_global, in_avals, out_avals)

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__
                           if getattr(self, k) not in (None, False))
        return f"NumpyRule({fields})"


_NO_RULE = NumpyRule()


def numpy_rule(prim) -> NumpyRule:
    """``prim``'s NumPy lowering as a ``NumpyRule`` (a plain callable is its
    ``expression``; none registered: an empty rule, the impl computes)."""
    rule = prim.lowerings.get("numpy")
    if rule is None:
        return _NO_RULE
    if isinstance(rule, NumpyRule):
        return rule
    return NumpyRule(expression=rule)


def ufunc_of(impl):
    """The ufunc ``impl`` is (or, for a quiet impl, whose ``.raw`` is), else None."""
    raw = getattr(impl, "raw", impl)
    return raw if isinstance(raw, np.ufunc) else None


# --- reductions NumPy runs slowly ---------------------------------------------------------------
# ``ufunc.reduce`` runs its inner loop once per output element along the reduced axes when
# only a short contiguous run of kept elements follows the last reduced axis: a 2x2
# pooling window after a reshape (``(n, c, h, 2, w, 2)`` over axes (3, 5)), the last axis
# of ``(n, 2)``. That costs some 20-60 ns per output element: ``maximum.reduce`` of
# (32, 16, 13, 2, 13, 2) float32 over (3, 5) takes 4.9 ms. The same reduction as ``k - 1``
# calls of the binary ufunc over strided views (one view per position in the window, ``k``
# positions, combined in their row-major order) takes 0.12 ms. Measured on a 2-core EPYC
# (float32, NumPy 2.4): 10-60x faster for k <= 8 over many outputs; at equal speed, or
# slower, once the contiguous run after the last reduced axis reaches about 1000 elements
# ((100, 4, 1000) over axis 1: 36 vs 43 us) or when there are few outputs per term
# ((32, 10) over axis 1: 1.1 vs 2.1 us).
PAIRWISE_MAX_TERMS = 16        # k: elements reduced into each output
PAIRWISE_MAX_INNER = 512       # kept elements after the last reduced axis (contiguous run)
PAIRWISE_MIN_OUT_PER_TERM = 8  # outputs per term (below: the calls' overhead dominates)
# No plan for fewer elements (2 terms of 8 outputs each at least): callers may skip asking.
REDUCE_PLAN_MIN_SIZE = 2 * 2 * PAIRWISE_MIN_OUT_PER_TERM

# The ufuncs planned. maximum/minimum/and/or give the same values in any order (NaNs
# propagate through ``maximum`` as through its ``reduce``); add/multiply round once per
# step in the array's dtype, in row-major window order, which may differ in the last bits
# from NumPy's reduce order. Only dtypes whose ``reduce`` accumulates in the dtype itself
# (float16's accumulates in float32, so its sums stay on ``reduce``).
_EXACT_UFUNCS = (np.maximum, np.minimum, np.bitwise_and, np.bitwise_or)
_ROUNDING_UFUNCS = (np.add, np.multiply)
_ROUNDING_KINDS = "iufc"


def _plannable(ufunc, dtype):
    if dtype.type.__module__ != "numpy" or dtype.kind not in "biufc":
        return False
    if ufunc in _ROUNDING_UFUNCS:
        if dtype.kind not in _ROUNDING_KINDS or dtype == np.float16:
            return False
    elif ufunc not in _EXACT_UFUNCS:
        return False
    try:
        return ufunc.resolve_dtypes((dtype, dtype, None))[2] == dtype
    except (TypeError, AttributeError):  # no loop for the dtype / NumPy < 1.24
        return False


# Sums over leading (batch) axes, with or without trailing ones (a bias gradient over
# (0, 2, 3) of NCHW): ``add.reduce`` walks the kept axis in the middle with short inner
# loops, or adds row after row; BLAS does it as matrix-vector products with vectors of
# ones, ``x`` seen as (A, K, B) (A leading reduced, K kept, B trailing reduced elements):
# (A*K, B) @ ones(B), then ones(A) @ (A, K). Measured (float32, 1 thread): (32, 16, 26, 26)
# over (0, 2, 3) 54 -> 17 us, (32, 16, 8, 8) 12.3 -> 3.1 us, (64, 64, 64) over (0, 2)
# 85 -> 14 us; over axis 0 only, (1024, 16) 16 -> 1.3 us, (100000, 4) 1127 -> 48 us,
# (128, 128) 3.0 -> 1.3 us, from rows of 512 on less (1.2-1.8x: (4096, 1024) 286 -> 264
# us), and there it stays on NumPy. BLAS's order of summation is its own: the result
# differs from NumPy's in the last bits (as NumPy's pairwise sums differ from a loop's), is
# as accurate (measured against float64 sums), and a sum of negative zeros is +0.0 (as
# XLA's, which starts from +0.0). Sums over trailing axes only stay on NumPy (the backend
# fuses their elementwise producers into blocked reductions).
MATMUL_SUM_MIN_SIZE = 1 << 12
MATMUL_SUM_MAX_ROW = 512   # axis 0 only: kept elements per row, below which BLAS is used
_BLAS_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _matmul_sum_plan(shape, dtype, axes):
    nd = len(shape)
    kept = [d for d in range(nd) if d not in axes]
    if (dtype not in _BLAS_DTYPES or axes[0] != 0 or not kept
            or kept != list(range(kept[0], kept[-1] + 1))
            or math.prod(shape) < MATMUL_SUM_MIN_SIZE):
        return None
    a = math.prod(shape[:kept[0]])
    k = math.prod(shape[d] for d in kept)
    b = math.prod(shape[kept[-1] + 1:])
    if b == 1 and k >= MATMUL_SUM_MAX_ROW:
        return None
    ones_a, ones_b = np.ones(a, dtype), np.ones(b, dtype)
    ones_a.flags.writeable = ones_b.flags.writeable = False
    out_shape = tuple(shape[d] for d in kept)
    matmul = np.matmul

    def plan(x, out=None):
        rows = x.reshape(a, k) if b == 1 else matmul(x.reshape(a * k, b), ones_b).reshape(a, k)
        if out is None:
            return matmul(ones_a, rows).reshape(out_shape)
        matmul(ones_a, rows, out=out.reshape(k))
        return out
    plan.takes_out = True
    plan.__qualname__ = plan.__name__ = "matmul_sum"
    plan.__doc__ = (f"add.reduce over axes {tuple(axes)} of {shape} {dtype}: ones({a}) @ "
                    + (f"x.reshape({a}, {k})" if b == 1 else
                       f"(x.reshape({a * k}, {b}) @ ones({b})).reshape({a}, {k})"))
    return plan


@functools.lru_cache(maxsize=1024)
def reduce_plan(ufunc, shape, dtype, axes):
    """``ufunc.reduce(x, axis=axes)`` for an ``x`` of ``shape`` and ``dtype`` as ``k - 1``
    calls of ``ufunc`` over strided views of ``x`` (see ``PAIRWISE_MAX_TERMS``), or for a
    float sum over leading axes as matrix-vector products with ones (see
    ``MATMUL_SUM_MIN_SIZE``), where that is the faster plan: ``plan(x, out=None)``,
    writing into ``out`` (C-contiguous) when given. None: ``ufunc.reduce`` as it is.
    Depends only on the arguments (hashable: a tuple of ints, a ``np.dtype``, a tuple of
    axes), so every caller with these avals runs the same plan and gets the same bits."""
    dtype = np.dtype(dtype)
    nd = len(shape)
    axes = tuple(sorted({a % nd for a in axes})) if nd else ()
    if not axes or math.prod(shape) < REDUCE_PLAN_MIN_SIZE or not _plannable(ufunc, dtype):
        return None
    k = math.prod(shape[a] for a in axes)
    out_size = math.prod(shape) // k
    inner = math.prod(shape[axes[-1] + 1:])
    if not (2 <= k <= PAIRWISE_MAX_TERMS and inner <= PAIRWISE_MAX_INNER
            and out_size >= PAIRWISE_MIN_OUT_PER_TERM * k and len(axes) < nd):
        return _matmul_sum_plan(shape, dtype, axes) if ufunc is np.add else None
    views = []
    for pos in itertools.product(*(range(shape[a]) for a in axes)):
        index = [slice(None)] * nd
        for a, i in zip(axes, pos):
            index[a] = i
        views.append(tuple(index))
    first, second, rest = views[0], views[1], tuple(views[2:])

    def plan(x, out=None):
        out = ufunc(x[first], x[second], out=out)
        for index in rest:
            ufunc(out, x[index], out=out)
        return out
    plan.takes_out = True
    plan.__qualname__ = plan.__name__ = f"pairwise_{ufunc.__name__}_reduce"
    plan.__doc__ = f"{ufunc.__name__}.reduce over axes {axes} of {shape} {dtype}: {k} terms"
    return plan
