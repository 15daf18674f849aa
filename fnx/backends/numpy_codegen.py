"""Lowering an IR to one generated Python function over NumPy arrays.

The generated function is straight-line code: one line per equation calling
the primitive's ufunc or impl (bound once, with its params, as a global of the
function), literals and constants bound once, and a ``del`` right after each
value's last use so intermediate buffers are freed as early as possible.
Nothing interprets the IR per call.
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


def compile_ir(ir: IR, name="f") -> Compiled:
    """Generate and compile the NumPy function for ``ir`` (constants bound as globals)."""
    glb = {"np": np}
    names = {}
    fresh = (f"v{i}" for i in itertools.count())

    def bind_global(prefix, value):
        key = f"_{prefix}{len(glb)}"
        glb[key] = value
        return key

    def ref(v):
        if type(v) is Literal:  # a 0-d array: NumPy's scalar kernels can round differently
            return bind_global("lit", np.asarray(v.value))
        return names[v]

    for v, c in zip(ir.constvars, ir.consts):
        names[v] = bind_global("const", c._value if hasattr(c, "_value") else c)
    args = []
    for v in ir.invars:
        names[v] = next(fresh)
        args.append(names[v])

    last_use = {}
    for i, e in enumerate(ir.eqns):
        for v in e.inputs:
            if type(v) is not Literal:
                last_use[v] = i
    keep = set(ir.outvars) | set(ir.constvars)

    body, quiet = [], False
    for i, e in enumerate(ir.eqns):
        prim = e.prim
        ins = ", ".join(ref(v) for v in e.inputs)
        ufunc = getattr(prim, "ufunc", None)
        if ufunc is not None and not e.params:
            fn = bind_global(ufunc.__name__, ufunc)
            quiet |= hasattr(prim.impl, "raw")
        elif prim.numpy_codegen is not None:
            fn = None
            expr = prim.numpy_codegen([ref(v) for v in e.inputs], e.params, bind_global)
        else:
            impl = functools.partial(prim.impl, **e.params) if e.params else prim.impl
            fn = bind_global(prim.name, impl)
        for v in e.outputs:
            names[v] = next(fresh)
        outs = ", ".join(names[v] for v in e.outputs)
        if prim.multiple_results:
            outs = outs + ("," if len(e.outputs) == 1 else "")
        body.append(f"{outs} = {fn}({ins})" if fn is not None else f"{outs} = {expr}")
        dead = [names[v] for v in dict.fromkeys(e.inputs)
                if type(v) is not Literal and last_use.get(v) == i and v not in keep]
        dead += [names[v] for v in e.outputs if v not in last_use and v not in keep]
        if dead:
            body.append(f"del {', '.join(dead)}")
    outs = ", ".join(ref(v) for v in ir.outvars)
    body.append(f"return ({outs}{',' if len(ir.outvars) == 1 else ''})")
    fname = f"_fnx_{''.join(c if c.isalnum() else '_' for c in name)}_{next(_counter)}"
    if quiet:  # one floating-point-error state for the whole call, not one per op
        if _rules._extobj_contextvar is not None:
            glb["_fp_state"], glb["_fp_ignore"] = _rules._extobj_contextvar, _rules._IGNORE_ALL
            body = (["_fp_token = _fp_state.set(_fp_ignore)", "try:"]
                    + ["    " + line for line in body]
                    + ["finally:", "    _fp_state.reset(_fp_token)"])
        else:  # pragma: no cover - NumPy without the context variable
            glb["_errstate"] = np.errstate
            body = ["with _errstate(all='ignore'):"] + ["    " + line for line in body]
    source = f"def {fname}({', '.join(args)}):\n" + "\n".join("    " + l for l in body) + "\n"
    exec(compile(source, f"<fnx jit {name}>", "exec"), glb)
    return Compiled(glb[fname], source, ir)
