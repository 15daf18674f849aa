"""The IR: typed SSA over primitives.

An ``IR`` has input variables, constant variables (bound to concrete values
or, while nested in an outer trace, to that trace's tracers), a list of
equations and outputs. Every variable has a ``ShapeDtypeStruct``; every
equation is one primitive applied to variables and literals, with static
params and the user source line that made it. ``print(ir)`` reads like a
jaxpr; ``eval_ir`` binds each equation on the current trace, so evaluating an
IR under a transformation transforms it; ``check_ir`` re-runs every shape
rule; ``dce`` drops equations no output needs.
"""
from __future__ import annotations

import itertools

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


def _format_param(value, namer, indent):
    if isinstance(value, IR):
        return "\n" + format_ir(value, indent + 4, namer)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, (tuple, list)) and any(isinstance(v, IR) for v in value):
        return "(" + ", ".join(_format_param(v, namer, indent) for v in value) + ")"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value)


def format_ir(ir: IR, indent: int = 0, namer=None) -> str:
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
    lines = [f"{pad}{{ lambda {consts}{'; ' if consts else ''}{args}. let"]
    for e in ir.eqns:
        outs = " ".join(decl(v) for v in e.outputs)
        params = ", ".join(f"{k}={_format_param(p, namer, indent + 4)}"
                           for k, p in sorted(e.params.items()))
        ins = " ".join(name(v) for v in e.inputs)
        head = f"{e.prim.name}[{params}]" if params else e.prim.name
        lines.append(f"{pad}    {outs} = {head} {ins}".rstrip())
    outs = ", ".join(name(v) for v in ir.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(ir.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


# --- evaluation ----------------------------------------------------------------

def eval_ir(ir: IR, *args, consts=None):
    """Evaluate ``ir`` on Arrays/tracers by binding each equation on the current trace."""
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
        if e.prim.multiple_results:
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


# --- dead code elimination ----------------------------------------------------------

def dce(ir: IR) -> IR:
    """Drop equations whose outputs no output needs, and unused constants. A primitive
    with a ``dce_rule(eqn, used_outputs) -> (eqn or None, inputs it needs)`` (control
    flow) also drops the outputs nobody uses and the work inside its sub-IRs that only
    they needed."""
    live = {v for v in ir.outvars if type(v) is Var}
    kept = []
    for e in reversed(ir.eqns):
        used = [v in live for v in e.outputs]
        if not any(used):
            continue
        rule = getattr(e.prim, "dce_rule", None)
        if rule is not None:  # a primitive holding sub-IRs: prune inside them too
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

def _is_one(v, ones):
    """A literal one, or a var known to hold only ones (not complex: (a+bi)(1+0i) turns
    an infinite b into NaN)."""
    if type(v) is Literal:
        return v.aval.dtype.kind != "c" and bool(v.value == 1)
    return v in ones


def simplify(ir: IR) -> IR:
    """Drop the identities transformations leave behind: ``x * 1`` and ``1 * x`` are
    ``x`` when the product has ``x``'s exact type (the ones may be a literal or a
    broadcast of one, e.g. the seed cotangent of a sum), exact for every dtype, NaN and
    signed zeros included; and scalars computed from literals only become literals
    (computed once by the primitive's own impl, so bitwise what the call would give).
    Run ``dce`` afterwards to drop the unused broadcasts."""
    ones, subst, eqns = set(), {}, []
    for e in ir.eqns:
        ins = [subst.get(v, v) if type(v) is Var else v for v in e.inputs]
        name = e.prim.name
        if (ins and not e.prim.multiple_results and not e.outputs[0].aval.shape
                and all(type(v) is Literal for v in ins) and not any(sub_irs(e.params))):
            # a scalar computed from literals only (e.g. a converted pad value): fold it
            value = np.asarray(e.prim.impl(*[np.asarray(v.value) for v in ins], **e.params))
            subst[e.outputs[0]] = Literal(value[()], e.outputs[0].aval)
            continue
        if name == "mul":
            (a, b), out = ins, e.outputs[0]
            if _is_one(b, ones) and a.aval == out.aval:
                subst[out] = a
                continue
            if _is_one(a, ones) and b.aval == out.aval:
                subst[out] = b
                continue
        elif name == "integer_pow" and e.params["y"] == 1 and ins[0].aval == e.outputs[0].aval:
            subst[e.outputs[0]] = ins[0]  # x ** 1 (the jvp of x ** 2 asks for it)
            continue
        elif name == "broadcast_in_dim" and type(ins[0]) is Literal and _is_one(ins[0], ones):
            ones.add(e.outputs[0])
        eqns.append(e if ins == e.inputs else Eqn(e.prim, ins, e.outputs, e.params, e.source))
    if not subst:
        return ir
    outvars = [subst.get(v, v) if type(v) is Var else v for v in ir.outvars]
    return IR(ir.invars, outvars, eqns, ir.constvars, ir.consts)
