"""The IR: typed SSA over primitives.

An ``IR`` has input variables, constant variables (bound to concrete values
or, while nested in an outer trace, to that trace's tracers), a list of
equations and outputs. Every variable has a ``ShapeDtypeStruct``; every
equation is one primitive applied to variables and literals, with static
params and the user source line that made it. ``print(ir)`` reads like a
jaxpr; ``eval_ir`` binds each equation on the current trace, so evaluating an
IR under a transformation transforms it; ``check_ir`` re-runs every shape
rule; ``dce`` drops equations no output needs, and ``optimize`` runs the
simplification passes (``simplify``, ``cse``, ``dce``) on every traced IR.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import IRCheckError
from .primitive import ShapeDtypeStruct


class Var:
    """A value of the IR: only its type is known."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapeDtypeStruct):
        self.aval = aval

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in an equation."""
    __slots__ = ("value", "aval")

    def __init__(self, value, aval: ShapeDtypeStruct):
        self.value = value
        self.aval = aval

    val = property(lambda self: self.value)  # JAX's name (interpreters read ``lit.val``)

    def __repr__(self):
        return f"Literal({self.value!r})"


class Eqn:
    """``outputs = prim[params](*inputs)``, made at ``source``."""
    __slots__ = ("prim", "inputs", "outputs", "params", "source")

    def __init__(self, prim, inputs, outputs, params, source="<unknown>"):
        self.prim = prim
        self.inputs = inputs
        self.outputs = outputs
        self.params = params
        self.source = source

    # JAX's names for the same fields (``jaxpr.eqns[0].primitive.name``)
    primitive = property(lambda self: self.prim)
    invars = property(lambda self: self.inputs)
    outvars = property(lambda self: self.outputs)


class IR:
    """A closed, typed function: ``outvars = f(*invars)`` with ``constvars = consts``."""

    def __init__(self, invars, outvars, eqns, constvars=(), consts=()):
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.constvars = list(constvars)
        self.consts = list(consts)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __str__(self):
        return format_ir(self)

    __repr__ = __str__

    def replace(self, **kw):
        fields = dict(invars=self.invars, outvars=self.outvars, eqns=self.eqns,
                      constvars=self.constvars, consts=self.consts)
        fields.update(kw)
        return IR(**fields)

    def hoist_consts(self):
        """The same function with constants turned into leading inputs."""
        return IR(self.constvars + self.invars, self.outvars, self.eqns), list(self.consts)


# --- printing ------------------------------------------------------------------

def _names():
    for n in itertools.count(1):
        for t in itertools.product("abcdefghijklmnopqrstuvwxyz", repeat=n):
            yield "".join(t)


def _format_param(value, namer, indent, jaxpr=False):
    if isinstance(value, IR):
        return "\n" + format_ir(value, indent + 4, namer, jaxpr=jaxpr)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, (tuple, list)) and any(isinstance(v, IR) for v in value):
        return "(" + ", ".join(_format_param(v, namer, indent, jaxpr) for v in value) + ")"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value)


def format_ir(ir: IR, indent: int = 0, namer=None, *, jaxpr=False) -> str:
    """The text of ``ir``. ``jaxpr=True``: JAX's jaxpr layout (``{ lambda consts ; args.``
    with the ``;`` always there, params separated by spaces), as ``fnx.make_jaxpr``
    prints."""
    names = {}
    namer = namer or _names()

    def name(v):
        if isinstance(v, Literal):
            return f"{str(v.value)}:{v.aval.str_short()}"  # str: shortest repr for the dtype
        if v not in names:
            names[v] = next(namer)
        return names[v]

    def decl(v):
        return f"{name(v)}:{v.aval.str_short()}"

    pad = " " * indent
    consts = " ".join(decl(v) for v in ir.constvars)
    args = " ".join(decl(v) for v in ir.invars)
    if jaxpr:
        lines = [f"{pad}{{ lambda {consts}; {args}. let"]
    else:
        lines = [f"{pad}{{ lambda {consts}{'; ' if consts else ''}{args}. let"]
    for e in ir.eqns:
        outs = " ".join(decl(v) for v in e.outputs)
        params = (" " if jaxpr else ", ").join(
            f"{k}={_format_param(p, namer, indent + 4, jaxpr)}"
            for k, p in sorted(e.params.items()))
        ins = " ".join(name(v) for v in e.inputs)
        head = f"{e.prim.name}[{params}]" if params else e.prim.name
        lines.append(f"{pad}    {outs + ' = ' if outs else ''}{head} {ins}".rstrip())
    outs = ", ".join(name(v) for v in ir.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(ir.outvars) == 1 else ''}) }}")
    if jaxpr and not indent and not any("\n" in ln for ln in lines):
        # JAX writes a jaxpr that fits in 80 columns on one line, equations split by "; "
        one = (f"{lines[0]} {'; '.join(ln.strip() for ln in lines[1:-1])} "
               f"{lines[-1].strip()}")
        if len(one) <= 80:
            return one
    return "\n".join(lines)


# --- evaluation ----------------------------------------------------------------

def eval_ir(ir: IR, *args, consts=None, after=None):
    """Evaluate ``ir`` on Arrays/tracers by binding each equation on the current trace.

    ``after(eqn, outs) -> outs``, if given, sees each equation's outputs (a list) as they
    are bound and returns the values the rest of the IR reads."""
    from .array import Array  # local: array imports nothing from here
    if len(args) != len(ir.invars):
        raise TypeError(f"eval_ir: the IR takes {len(ir.invars)} inputs, got {len(args)}")
    env = {}
    consts = ir.consts if consts is None else consts
    for v, x in zip(ir.constvars, consts):
        env[v] = x if isinstance(x, Array) else Array._wrap(x)
    env.update(zip(ir.invars, args))

    def read(v):
        if type(v) is Literal:
            return Array._wrap(v.value, v.aval.weak_type)
        return env[v]

    for e in ir.eqns:
        out = e.prim.bind(*[read(v) for v in e.inputs], **e.params)
        if after is not None:
            env.update(zip(e.outputs, after(e, out if e.prim.multiple_results else [out])))
        elif e.prim.multiple_results:
            env.update(zip(e.outputs, out))
        else:
            env[e.outputs[0]] = out
    return [read(v) for v in ir.outvars]


# --- checking --------------------------------------------------------------------

def sub_irs(params):
    for p in params.values():
        if isinstance(p, IR):
            yield p
        elif isinstance(p, (tuple, list)):
            yield from (q for q in p if isinstance(q, IR))


def check_ir(ir: IR) -> IR:
    """Re-run every equation's shape rule and check variables are defined before use."""
    defined = set(ir.constvars) | set(ir.invars)
    if len(ir.consts) != len(ir.constvars):
        raise IRCheckError(f"{len(ir.constvars)} constvars but {len(ir.consts)} consts")
    for e in ir.eqns:
        for v in e.inputs:
            if type(v) is not Literal and v not in defined:
                raise IRCheckError(f"{e.prim.name} (from {e.source}) uses a variable "
                                   f"{v} that is not defined before it")
        try:
            expect = e.prim.shape_rule(*[v.aval for v in e.inputs], **e.params)
        except Exception as err:
            raise IRCheckError(f"{e.prim.name} (from {e.source}): its shape rule rejects "
                               f"its recorded inputs: {err}") from err
        expect = expect if e.prim.multiple_results else [expect]
        got = [v.aval for v in e.outputs]
        if list(expect) != got:
            raise IRCheckError(f"{e.prim.name} (from {e.source}): outputs recorded as "
                               f"{got}, but its shape rule gives {list(expect)}")
        for sub in sub_irs(e.params):
            check_ir(sub)
        defined.update(e.outputs)
    for v in ir.outvars:
        if type(v) is not Literal and v not in defined:
            raise IRCheckError(f"output {v} is not defined")
    return ir


# --- effects -------------------------------------------------------------------------
#
# A primitive with ``effectful = True`` (``fnx.debug.callback``/``print``, io callbacks)
# does something besides computing its outputs, so it runs whether or not its outputs
# are used: DCE keeps it, CSE never merges it, the lowering never folds it, and loops
# never hoist it. An equation holding sub-IRs (cond, scan, while, jit) has effects when
# any equation inside has.

def ir_has_effects(ir: IR) -> bool:
    """Whether any equation of ``ir`` (or of IRs nested in it) has effects."""
    eff = getattr(ir, "_has_effects", None)
    if eff is None:
        eff = any(has_effects(e) for e in ir.eqns)
        try:
            ir._has_effects = eff
        except AttributeError:  # pragma: no cover - an IR-like object without a dict
            pass
    return eff


def has_effects(e: Eqn) -> bool:
    """Whether equation ``e`` has effects (see above)."""
    if getattr(e.prim, "effectful", False):
        return True
    return any(ir_has_effects(sub) for sub in sub_irs(e.params))


# --- dead code elimination ----------------------------------------------------------

def dce(ir: IR) -> IR:
    """Drop equations whose outputs no output needs, and unused constants. A primitive
    with a ``dce_rule(eqn, used_outputs) -> (eqn or None, inputs it needs)`` (control
    flow) also drops the outputs nobody uses and the work inside its sub-IRs that only
    they needed. Equations with effects (``has_effects``) are always kept."""
    live = {v for v in ir.outvars if type(v) is Var}
    kept = []
    for e in reversed(ir.eqns):
        used = [v in live for v in e.outputs]
        if not any(used):
            if not has_effects(e):
                continue
            used = [True] * len(e.outputs)
        rule = getattr(e.prim, "dce_rule", None)
        if rule is not None and used:  # a primitive holding sub-IRs: prune inside them too
            e, inputs = rule(e, used)
            if e is None:
                continue
        else:
            inputs = e.inputs
        kept.append(e)
        live.update(v for v in inputs if type(v) is Var)
    kept.reverse()
    pairs = [(v, c) for v, c in zip(ir.constvars, ir.consts) if v in live]
    return IR(ir.invars, ir.outvars, kept, [v for v, _ in pairs], [c for _, c in pairs])


# --- algebraic simplification --------------------------------------------------------
# Each rewrite is a rule of its primitive (``prim.simplify``, registered in the module that
# defines the primitive): ``rule(eqn, ins, lits, producer)`` with the equation's inputs
# already substituted, ``lits`` (var -> the Literal it is a broadcast of) and ``producer``
# (var -> the equation computing it) returns the var or literal its single output
# equals, a cheaper ``Eqn`` computing the same output, or None. The helpers below are
# what rules are written with.

def literal_scalar(v, lits):
    """The value of a literal, or of a var known to be a broadcast of one; else None."""
    lit = v if type(v) is Literal else lits.get(v)
    return None if lit is None else np.asarray(lit.value)


def is_literal_one(v, lits):
    """A (broadcast) literal one (not complex: (a+bi)(1+0i) turns an infinite b into NaN,
    and a complex quotient is not computed part by part either)."""
    c = literal_scalar(v, lits)
    return c is not None and v.aval.dtype.kind != "c" and bool(c == 1)


def is_literal_zero(v, lits, negative):
    """A (broadcast) literal zero whose sign bit is set (``negative``) or clear."""
    c = literal_scalar(v, lits)
    return (c is not None and v.aval.dtype.kind in "iuf" and bool(c == 0)
            and bool(np.signbit(c)) == negative)


def is_identity_permutation(perm):
    return tuple(perm) == tuple(range(len(perm)))


def producer_of(x, producer, prim):
    """The equation of primitive ``prim`` that computes var ``x``, or None."""
    e = producer.get(x) if type(x) is Var else None
    return e if e is not None and e.prim is prim else None


def simplify(ir: IR) -> IR:
    """Rewrite away the identities that tracing and transformations leave behind. Each
    rewrite is exact: the result is bitwise what the original equation gives for every
    input (NaN, infinities and signed zeros included), and a value replaces an
    equation's output only when it has that output's exact type (shape, dtype and weak
    type). "A one" or "a zero" is a literal or a ``broadcast_in_dim`` of one (e.g. the
    seed cotangent of a sum). The rules:

    - ``x * 1``, ``1 * x`` and ``x / 1`` are ``x``: IEEE multiplication and division by
      one are exact, NaN and signed zeros included (not for complex: (a+bi)(1+0i) turns
      an infinite b into NaN);
    - ``x - 0`` is ``x`` for a +0 (floats and integers): ``-0.0 - +0.0`` is ``-0.0``;
    - ``x + (-0.0)`` and ``(-0.0) + x`` are ``x`` for floats, and ``x + 0``, ``0 + x`` for
      integers; a float ``x + 0.0`` stays, as ``-0.0 + 0.0`` is ``+0.0``;
    - ``x ** 1`` (``integer_pow``) and ``neg(neg(x))`` are ``x`` (negation flips the sign
      bit, or wraps for integers, so twice is the identity);
    - ``transpose(transpose(x, p), q)`` is one transpose by ``p[q[i]]``, and a transpose
      by the identity permutation is ``x``; ``reshape(reshape(x))`` (no ``dimensions``
      permutation) is one reshape, and a reshape to ``x``'s own shape is ``x``: these
      only move or relabel elements;
    - ``convert_element_type`` to ``x``'s own dtype and weak type, ``broadcast_in_dim``
      to ``x``'s own shape along its own axes, and ``squeeze``/``expand_dims`` of no
      axes are ``x`` (each returns ``x``'s values unchanged, in ``x``'s layout);
    - scalars computed from literals only become literals (computed once by the
      primitive's own impl, so bitwise what the call would give).

    Run ``dce`` afterwards to drop the equations this leaves unused (``optimize`` does).
    Each rule is its primitive's ``simplify`` rule (``fnx/lax/elementwise.py`` and
    ``fnx/lax/shape.py``); a primitive with ``broadcasts_operand`` set (``broadcast_in_dim``)
    makes "a broadcast of a literal" count as that literal.
    """
    lits, producer, subst, eqns, changed = {}, {}, {}, [], False
    for e in ir.eqns:
        ins = [subst.get(v, v) if type(v) is Var else v for v in e.inputs]
        if (ins and not e.prim.multiple_results and not e.outputs[0].aval.shape
                and all(type(v) is Literal for v in ins) and not any(sub_irs(e.params))
                and e.prim.named_batch is None):
            # a scalar computed from literals only (e.g. a converted pad value): fold it
            # (not a collective: psum(1, 'i') is the axis size, known only when it runs)
            value = np.asarray(e.prim.impl(*[np.asarray(v.value) for v in ins], **e.params))
            subst[e.outputs[0]] = Literal(value[()], e.outputs[0].aval)
            continue
        new = None
        rule = e.prim.simplify
        if rule is not None and not e.prim.multiple_results and not any(sub_irs(e.params)):
            new = rule(e, ins, lits, producer)
        if new is not None and type(new) is not Eqn:
            if new.aval == e.outputs[0].aval:
                subst[e.outputs[0]] = new
                continue
            new = None
        if new is None and ins != e.inputs:
            new = Eqn(e.prim, ins, e.outputs, e.params, e.source)
        if new is not None:
            e, changed = new, True
        if e.prim.broadcasts_operand and literal_scalar(e.inputs[0], lits) is not None:
            src = e.inputs[0]
            lits[e.outputs[0]] = src if type(src) is Literal else lits[src]
        if not e.prim.multiple_results:
            producer[e.outputs[0]] = e
        eqns.append(e)
    if not subst and not changed:
        return ir
    outvars = [subst.get(v, v) if type(v) is Var else v for v in ir.outvars]
    return IR(ir.invars, outvars, eqns, ir.constvars, ir.consts)


# --- common subexpression elimination ---------------------------------------------------

class _Unkeyable(Exception):
    pass


def _param_key(p):
    """A hashable key equal only for params that are certainly the same (floats by their
    bits, so 0.0 and -0.0 differ); raises ``_Unkeyable`` for anything else (arrays,
    functions, sub-IRs, unknown objects)."""
    t = type(p)
    if p is None or t in (bool, int, str):
        return (t.__name__, p)
    if t is float:  # equal floats with equal signs (NaN is never equal: never merged)
        return ("float", p, math.copysign(1.0, p))
    if t is complex:
        return ("complex", np.asarray(p).tobytes())
    if isinstance(p, np.generic):
        return ("np", p.dtype.str, p.tobytes())
    if isinstance(p, np.dtype):
        return ("dtype", p.str, p.name)
    if isinstance(p, ShapeDtypeStruct):
        return ("aval", p.shape, p.dtype.str, p.weak_type)
    if t is tuple or t is list:
        return (t.__name__, *[_param_key(q) for q in p])
    if t is dict:
        return ("dict",) + tuple((k, _param_key(v)) for k, v in sorted(p.items()))
    raise _Unkeyable


def _atom_key(v):
    if type(v) is Var:
        return v
    value = v.value if isinstance(v.value, np.generic) else np.asarray(v.value)
    return ("lit", v.aval.dtype.str, v.aval.weak_type, value.dtype.str, value.tobytes())


def cse(ir: IR) -> IR:
    """Common subexpression elimination: an equation with the same primitive, equal
    params and the same inputs (variables by identity, literals by dtype, weak type and
    bits) as an earlier one computes the same outputs (primitives are pure; random bits
    come from explicit keys), so uses of its outputs are redirected to the earlier
    equation's and it is dropped. Equations holding sub-IRs, functions, arrays or other
    params not safely comparable are left alone. Run ``dce`` afterwards."""
    seen, subst, eqns = {}, {}, []
    for e in ir.eqns:
        ins = [subst.get(v, v) if type(v) is Var else v for v in e.inputs]
        if ins != e.inputs:
            e = Eqn(e.prim, ins, e.outputs, e.params, e.source)
        try:
            key = (e.prim, _param_key(e.params), tuple(_atom_key(v) for v in ins))
            if getattr(e.prim, "effectful", False):
                key = None  # each effect happens once per equation
        except _Unkeyable:
            key = None
        first = seen.get(key) if key is not None else None
        if first is not None and len(first.outputs) == len(e.outputs) and all(
                a.aval == b.aval for a, b in zip(first.outputs, e.outputs)):
            subst.update(zip(e.outputs, first.outputs))
            continue
        if key is not None:
            seen[key] = e
        eqns.append(e)
    if not subst:
        return ir
    outvars = [subst.get(v, v) if type(v) is Var else v for v in ir.outvars]
    return IR(ir.invars, outvars, eqns, ir.constvars, ir.consts)


def optimize(ir: IR) -> IR:
    """The simplification passes run on every traced IR before it is lowered or
    evaluated: ``simplify`` (exact algebraic identities, constant scalars folded), then
    ``cse``, then ``dce``."""
    return dce(cse(simplify(ir)))
