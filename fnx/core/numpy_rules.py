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
  None. A function that may take ``out=`` says so with ``takes_out = True``;
* ``expression(ins, params, bind_global, in_avals, out_avals)``: the equation as one
  Python expression over the input expressions ``ins`` (``bind_global(prefix, value)``
  names a global), or None to fall through to the impl;
* ``reducer``: the ufunc whose ``reduce`` over ``axes`` the impl is (the backend fuses an
  elementwise producer into a blocked reduction with it);
* ``broadcasts``: the impl broadcasts its operands as a ufunc does (so an operand that is
  a ``broadcast_in_dim`` of a smaller value can be read unbroadcast).

A plain callable registered as a primitive's ``"numpy"`` lowering (``fnx.extend``'s and
older code's ``prim.numpy_codegen = fn``) is an ``expression``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["NumpyRule", "numpy_rule", "ufunc_of"]


class NumpyRule:
    """How the NumPy backend's generated code computes a primitive's equations (see the
    module docstring); every field is optional."""

    __slots__ = ("ufunc", "float_ufunc", "specialize", "expression", "reducer", "broadcasts")

    def __init__(self, *, ufunc=None, float_ufunc=None, specialize=None, expression=None,
                 reducer=None, broadcasts=False):
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
        self.expression = expression
        self.reducer = reducer
        self.broadcasts = bool(broadcasts)

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
