"""Lowering an IR to one generated Python function over NumPy arrays.

The generated function is straight-line code: one line per equation calling
the primitive's ufunc or impl (bound once, with its params, as a global of the
function), literals and constants bound once, and a ``del`` right after each
value's last use so intermediate buffers are freed as early as possible.
Nothing interprets the IR per call.

A primitive may provide ``numpy_codegen(input_exprs, params, bind_global)`` (an
expression string) or ``numpy_specialize(in_avals, params, permutation)`` (a
function of the input arrays for those avals; eager impls must pick the same
computation so jit stays bitwise equal to eager). With ``numpy_specialize``, a
``transpose`` that is the only use of the result is fused in: the function is
asked for the transposed result directly (``dot_general`` then writes an outer
product in the consumer's layout instead of materializing and transposing).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from ..core.ir import IR, Literal
from ..lax import _rules

_counter = itertools.count()


class Compiled:
    """A lowered IR: ``fn(*numpy_values) -> tuple of numpy values``."""

    def __init__(self, fn, source, ir):
        self.fn = fn
        self.source = source
        self.ir = ir

    def __call__(self, *args):
        return self.fn(*args)


def _binder(glb):
    def bind_global(prefix, value):
        key = f"_{prefix}{len(glb)}"
        glb[key] = value
        return key
    return bind_global


def emit_eqns(ir: IR, glb, names, fresh, *, in_loop=False, out_into=None):
    """The lines computing ``ir``'s equations, given ``names`` for its inputs (and
    constants): ``(lines, quiet, ref)``; ``ref(v)`` names a value (or literal) after them.

    ``in_loop``: the lines are a loop body run many times (no ``del``s: every input stays
    alive for the next step). ``out_into``: ``{var: expression}`` of preallocated
    buffers; an equation computing such a var with a plain ufunc writes it there
    (``out=``) instead of allocating (the var then names that buffer)."""
    bind_global = _binder(glb)

    def ref(v):
        if type(v) is Literal:  # a 0-d array: NumPy's scalar kernels can round differently
            return bind_global("lit", np.asarray(v.value))
        return names[v]

    last_use, uses, producer = {}, {}, {}
    for i, e in enumerate(ir.eqns):
        for v in e.inputs:
            if type(v) is not Literal:
                last_use[v] = i
                uses[v] = uses.get(v, 0) + 1
        for v in e.outputs:
            producer[v] = i
    for v in ir.outvars:
        if type(v) is not Literal:
            uses[v] = uses.get(v, 0) + 1
    keep = set(ir.outvars) | set(ir.constvars)

    # A ``transpose`` that is the only use of a specializable primitive's result is
    # computed by that primitive (``numpy_specialize(..., permutation)``): same values,
    # laid out for the consumer, no intermediate.
    fused_into, skip = {}, set()
    for i, e in enumerate(ir.eqns):
        if e.prim.name == "transpose" and len(e.inputs) == 1 and type(e.inputs[0]) is not Literal:
            j = producer.get(e.inputs[0])
            if (j is not None and uses[e.inputs[0]] == 1 and j not in fused_into
                    and getattr(ir.eqns[j].prim, "numpy_specialize", None) is not None
                    and not ir.eqns[j].prim.multiple_results):
                fused_into[j] = e
                skip.add(i)

    body, quiet = [], False
    out_into = out_into or {}
    written = set()
    for i, e in enumerate(ir.eqns):
        if i in skip:
            continue
        prim = e.prim
        ins = ", ".join(ref(v) for v in e.inputs)
        ufunc = getattr(prim, "ufunc", None)
        specialize = getattr(prim, "numpy_specialize", None)
        outputs = e.outputs
        if ufunc is not None and not e.params:
            fn = bind_global(ufunc.__name__, ufunc)
            quiet |= hasattr(prim.impl, "raw")
        elif specialize is not None:
            # A function for these avals (e.g. dot_general's plan), the same one eager
            # calls pick, so jit stays bitwise equal to eager.
            consumer = fused_into.get(i)
            perm = None if consumer is None else tuple(consumer.params["permutation"])
            if consumer is not None:
                outputs = consumer.outputs
            fn = bind_global(prim.name, specialize([v.aval for v in e.inputs], e.params, perm))
            quiet |= hasattr(prim.impl, "raw")
        elif prim.numpy_codegen is not None:
            fn = None
            expr = prim.numpy_codegen([ref(v) for v in e.inputs], e.params, bind_global)
        else:
            impl = prim.impl
            if hasattr(impl, "raw"):  # the whole function runs in the quiet state
                impl, quiet = impl.raw, True
            impl = functools.partial(impl, **e.params) if e.params else impl
            fn = bind_global(prim.name, impl)
        for v in outputs:
            names[v] = next(fresh)
        outs = ", ".join(names[v] for v in outputs)
        if prim.multiple_results:
            outs = outs + ("," if len(outputs) == 1 else "")
        target = out_into.get(outputs[0]) if (ufunc is not None and not e.params
                                               and len(outputs) == 1) else None
        if target is not None and outputs[0] not in written:
            written.add(outputs[0])
            body.append(f"{outs} = {fn}({ins}, out={target})")
        else:
            body.append(f"{outs} = {fn}({ins})" if fn is not None else f"{outs} = {expr}")
        if in_loop:
            continue
        dead = [names[v] for v in dict.fromkeys(e.inputs)
                if type(v) is not Literal and last_use.get(v) == i and v not in keep]
        dead += [names[v] for v in outputs if v not in last_use and v not in keep]
        if dead:
            body.append(f"del {', '.join(dead)}")
    return body, quiet, ref, written


def quiet_lines(body, glb):
    """``body`` run in the floating-point "ignore" state: one state for the whole call,
    not one per op."""
    if _rules._extobj_contextvar is not None:
        glb["_fp_state"], glb["_fp_ignore"] = _rules._extobj_contextvar, _rules._IGNORE_ALL
        return (["_fp_token = _fp_state.set(_fp_ignore)", "try:"]
                + ["    " + line for line in body]
                + ["finally:", "    _fp_state.reset(_fp_token)"])
    glb["_errstate"] = np.errstate  # pragma: no cover - NumPy without the context variable
    return ["with _errstate(all='ignore'):"] + ["    " + line for line in body]


def compile_ir(ir: IR, name="f") -> Compiled:
    """Generate and compile the NumPy function for ``ir`` (constants bound as globals)."""
    glb = {"np": np}
    names = {}
    fresh = (f"v{i}" for i in itertools.count())
    for v, c in zip(ir.constvars, ir.consts):
        names[v] = _binder(glb)("const", c._value if hasattr(c, "_value") else c)
    args = []
    for v in ir.invars:
        names[v] = next(fresh)
        args.append(names[v])
    body, quiet, ref, _ = emit_eqns(ir, glb, names, fresh)
    outs = ", ".join(ref(v) for v in ir.outvars)
    body.append(f"return ({outs}{',' if len(ir.outvars) == 1 else ''})")
    fname = f"_fnx_{''.join(c if c.isalnum() else '_' for c in name)}_{next(_counter)}"
    body = quiet_lines(body, glb) if quiet else body
    source = f"def {fname}({', '.join(args)}):\n" + "\n".join("    " + ln for ln in body) + "\n"
    exec(compile(source, f"<fnx jit {name}>", "exec"), glb)
    return Compiled(glb[fname], source, ir)
