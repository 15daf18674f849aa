"""Shared machinery of the rule sweeps (``tests/test_rules_*.py``).

A sweep file defines ``RULES`` (a list of ``Rule`` lines: a primitive, a hypothesis
strategy of ``Case``s per dtype, the dtypes of its batching and gradient sweeps), and
optionally ``NO_GRAD`` / ``NO_BATCH`` (primitive -> the reason it is not
gradient-checked / batched), and runs ``run_rule`` on every line.
``tests/test_rules_property.py::test_every_primitive_has_a_line`` gathers the lines of
every sweep file and fails when a registered primitive has none.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fnx import lax
from fnx.core.primitive import REGISTRY
from fnx.testing import Example, check_op


BOOL, I8, I32, U8 = map(np.dtype, ("bool", "int8", "int32", "uint8"))
F32, F64, C64, C128 = map(np.dtype, ("float32", "float64", "complex64", "complex128"))
FLOAT = (F32, F64)
CPLX = (C64, C128)
NUM = (F32, F64, I32)
INTS = (I32, I8, U8)
ALLDT = (F32, F64, I32, BOOL, C64)     # the batching sweep of dtype-agnostic primitives
BITS = (BOOL, I32, U8)


# --- values ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dom:
    """Where values are drawn: floats uniform in [lo, hi] (``away0``: |x| in [lo, hi] with a
    random sign; ``frac``: the fractional part in [0.15, 0.85], or away from the halves too
    for "half"; ``distinct``: all elements at least (hi - lo) / (4 size) apart), complex
    parts likewise with the imaginary part in [-imag, imag]; integers in [ilo, ihi]."""
    lo: float = -2.0
    hi: float = 2.0
    away0: bool = False
    frac: str = ""
    distinct: bool = False
    specials: bool = False
    integral: bool = False      # integer-valued floats
    imag: float = 0.5
    ilo: int = -20
    ihi: int = 20


ANY = Dom()
POS = Dom(0.5, 3.0)
AWAY0 = Dom(0.3, 2.0, away0=True, ilo=1, ihi=20)
UNIT = Dom(-0.8, 0.8, imag=0.2)
DISTINCT = Dom(-3.0, 3.0, distinct=True)


def values(rng, shape, dtype, dom=ANY):
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(dom.ilo, int(info.min)), min(dom.ihi, int(info.max))
        if dom.distinct:
            n = int(np.prod(shape))
            return rng.permutation(np.arange(n) + max(lo, -n // 2))[:n].reshape(shape) \
                .astype(dtype)
        v = rng.integers(lo, hi + 1, shape)
        if dom.away0:
            v = np.where(v == 0, 1, v)
        return v.astype(dtype)
    n = int(np.prod(shape))
    if dom.distinct:
        gap = (dom.hi - dom.lo) / max(n, 1)
        v = dom.lo + gap * (rng.permutation(n) + rng.uniform(0.25, 0.75, n))
    elif dom.frac:
        k = rng.integers(int(np.floor(dom.lo)), int(np.ceil(dom.hi)), n)
        f = rng.uniform(0.15, 0.35, n) + rng.integers(0, 2, n) * 0.5 if dom.frac == "half" \
            else rng.uniform(0.15, 0.85, n)
        v = k + f
    else:
        v = rng.uniform(dom.lo, dom.hi, n)
        if dom.away0:
            v = v * rng.choice([-1.0, 1.0], n)
    if dom.integral:
        v = np.round(v)
    if dom.specials and n:
        pick = rng.random(n) < 0.3
        v = np.where(pick, rng.choice([np.nan, np.inf, -np.inf, 0.0], n), v)
    if dtype.kind == "c":
        v = v + 1j * rng.uniform(-dom.imag, dom.imag, n)
    return v.reshape(shape).astype(dtype)


# --- cases and table lines ---------------------------------------------------------------------

@dataclass
class Case:
    fn: object                  # fn(*arrays) -> array or tuple of arrays (static params bound)
    make: object                # make(rng) -> tuple of NumPy arrays: one example's operands
    label: str = ""             # static params, for failure reports
    params: dict = None         # elementwise lines: the primitive's own params (fn binds them)

    def example(self, rng):
        return tuple(self.make(rng))

    def __repr__(self):
        return f"Case({self.label})"


def arrays(*specs):
    """``make`` for independent operands: specs are (shape, dtype, dom)."""
    return lambda rng: tuple(values(rng, s, d, dom) for s, d, dom in specs)


@dataclass(frozen=True)
class Rule:
    prim: str
    cases: object               # dtype -> strategy of Case
    bdtypes: tuple = FLOAT      # dtypes of the batching sweep
    gdtypes: tuple = FLOAT      # dtypes of the gradient sweep (unless prim is in NO_GRAD)
    order: int = 2
    modes: tuple = ("fwd", "rev")
    why: str = ""               # why order 1 or one mode only
    variant: str = ""
    direct: bool = False        # check the primitive itself (elementwise lines: params only)
    unbatched: tuple = ()       # operand positions that vmap never maps
    nondiff: tuple = ()         # float operand positions held fixed when differentiating

    @property
    def id(self):
        return f"{self.prim}[{self.variant}]" if self.variant else self.prim

    def __repr__(self):
        return self.id


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
SHAPES1 = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def elementwise(prim, *doms, fn=None, bdtypes=FLOAT, gdtypes=FLOAT, params=None, **kw):
    """An elementwise line: operands of one shape (for two operands, sometimes one of rank
    0, which lax broadcasts); ``params`` maps names to strategies of static params."""
    fn = fn or getattr(lax, prim)
    params = params or {}

    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        shapes = [shape] * len(doms)
        if len(doms) == 2 and draw(st.integers(0, 3)) == 0:
            shapes[draw(st.integers(0, 1))] = ()
        p = {k: draw(v) for k, v in params.items()}
        f = (lambda *xs: fn(*xs, **p)) if p else fn
        return Case(f, arrays(*[(s, dtype, d) for s, d in zip(shapes, doms)]), str(p or ""), p)

    return Rule(prim, cases, bdtypes, gdtypes, direct=True, **kw)


def coupled(prim, make, fn=None, bdtypes=FLOAT, gdtypes=FLOAT, **kw):
    """An elementwise line whose operands are drawn together: ``make(rng, shape, dtype)``."""
    fn = fn or getattr(lax, prim)

    @st.composite
    def cases(draw, dtype):
        shape = draw(SHAPES)
        return Case(fn, lambda rng: make(rng, shape, dtype), params={})

    return Rule(prim, cases, bdtypes, gdtypes, direct=True, **kw)


def structured(prim, strategy, bdtypes=FLOAT, gdtypes=FLOAT, **kw):
    return Rule(prim, strategy, bdtypes, gdtypes, **kw)



# --- the sweep: check_op on every line ----------------------------------------------------------

def _apply(*xs, fn):
    """A line's function of its operands (``fn`` carries its static params)."""
    return fn(*xs)


def examples(rule, dtypes):
    """Hypothesis examples of a line: a dtype, a case and a seed for its values; a vmap
    batch gets further examples of the same case (same shapes)."""
    @st.composite
    def draw_example(draw):
        dtype = np.dtype(draw(st.sampled_from(dtypes), label="dtype"))
        case = draw(rule.cases(dtype), label="case")
        seed = draw(st.integers(0, 2 ** 32 - 1), label="seed")
        operands = case.example(np.random.default_rng(seed))
        more = np.random.default_rng(seed + 1)
        params = case.params if rule.direct else {"fn": case.fn}
        return Example(*operands, **params).lanes(lambda k: case.example(more))
    return draw_example()


def _checks_of(rule, no_grad, no_batch):
    skip = []
    if rule.prim in no_grad or not rule.gdtypes:
        skip += ["jvp", "vjp"]
    if rule.prim in no_batch:
        skip.append("vmap")
    if not rule.direct:
        skip.append("kernel")   # kernels belong to elementwise primitives, checked directly
    return tuple(skip)


def run_rule(rule, no_grad=(), no_batch=()):
    """check_op on one line: shape rule, jit, vmap against a loop, jvp against finite
    differences, vjp against jvp, GPU kernel and ONNX lowering where the primitive has
    them (gradients skipped for primitives in ``no_grad``, batching for ``no_batch``)."""
    grad = rule.prim not in no_grad and rule.gdtypes
    dts = tuple(dict.fromkeys(rule.bdtypes + (rule.gdtypes if grad else ())))
    op = REGISTRY[rule.prim] if rule.direct else _apply
    check_op(op, examples(rule, dts), skip=_checks_of(rule, no_grad, no_batch),
             order=rule.order, modes=rule.modes, nondiff_argnums=rule.nondiff,
             unbatched_argnums=rule.unbatched, name=rule.id)
