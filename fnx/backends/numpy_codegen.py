"""Lowering an IR to one generated Python function over NumPy arrays.

The generated function is straight-line code: one line per equation calling
the primitive's ufunc or impl (bound once, with its params, as a global of the
function), literals and constants bound once, and a ``del`` right after each
value's last use so intermediate buffers are freed as early as possible.
Nothing interprets the IR per call.

A primitive's ``"numpy"`` lowering (``fnx.core.numpy_rules.NumpyRule``, registered
beside its other rules) may name the ufunc its impl is, give an ``expression`` (a string,
e.g. ``x.reshape((3, 1))`` for a view, or None to call the impl) or ``specialize(in_avals,
params, permutation)`` (a function of the input arrays for those avals; eager impls must
pick the same computation so jit stays bitwise equal to eager). With ``specialize``, a
``transpose`` that is the only use of the result is fused in: the function is asked for
the transposed result directly (``dot_general`` then writes an outer product in the
consumer's layout instead of materializing and transposing).

Everything else the lowering does (fusions, helpers in place of groups of equations,
unbroadcast operands, in-place writes, donation) is decided first by the planning passes
of ``numpy_passes``, which annotate the equations; ``emit_eqns`` then writes one line per
equation from those annotations and the primitive's rule. The helpers the generated code
calls are in ``numpy_helpers``.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from ..core.numpy_rules import numpy_rule
from ..core.ir import IR, Literal
from ..core.numpy_errstate import ERROR_STATE, IGNORE_ALL
from . import buffers
from .numpy_helpers import _fused_reduce  # noqa: F401 (tests call it from here)
from .numpy_passes import PoolPlan, binder, nbytes, plan

_counter = itertools.count()

class Compiled:
    """A lowered IR: ``fn(*numpy_values) -> tuple of numpy values``; ``pool``: its
    ``buffers.BufferPool`` (None when it keeps no buffers).

    It holds neither the IR nor anything that refers back to it (jit caches it weakly
    keyed by the IR, so a reference from here would keep the IR, and the cache entry,
    alive forever), and ``fn`` is not among its own globals: dropping the Compiled
    frees the function, its constants and its buffers at once, without waiting for the
    cycle collector."""
    __slots__ = ("fn", "source", "pool", "__weakref__")

    def __init__(self, fn, source, pool=None):
        self.fn = fn
        self.source = source
        self.pool = pool

    def __call__(self, *args):
        return self.fn(*args)


def _takes_out(fn):
    """Whether ``fn`` (a ufunc or a function bound for an equation) takes ``out=``."""
    return isinstance(fn, np.ufunc) or getattr(fn, "takes_out", False)


def emit_eqns(ir: IR, glb, names, fresh, *, in_loop=False, out_into=None, pool=None):
    """The lines computing ``ir``'s equations, given ``names`` for its inputs (and
    constants): ``(lines, quiet, ref, written)``; ``ref(v)`` names a value (or literal)
    after them; ``written``: the vars computed into their ``out_into`` buffer.

    ``in_loop``: the lines are a loop body run many times (no ``del``s: every input stays
    alive for the next step). ``out_into``: ``{var: expression}`` of preallocated
    buffers; an equation computing such a var with a plain ufunc writes it there
    (``out=``) instead of allocating (the var then names that buffer).

    Besides one call per equation, the lowering (see ``numpy_passes`` for the passes)

    * hands a ufunc (or ``select_n``, whose impl broadcasts alike) a ``broadcast_in_dim``
      operand unbroadcast (NumPy broadcasts it the same way, through the same stride-0
      loop) when another operand has the full shape, and drops the broadcast when
      nothing else reads it;
    * passes the scalar of a mid-sized ``maximum``/``minimum`` as a shared full-size
      constant (NumPy's SIMD loop needs two arrays);
    * computes an equation of literals only (``iota``, index arithmetic, a small
      broadcast of a literal) once, at compile time, with the same function;
    * lets a ufunc write its result into an operand whose buffer dies there (``out=``):
      the operand must be a fresh buffer (a ufunc's, a ``dot_general``'s or a dtype
      conversion's result), not an input, constant or output, read only by ops that
      never return a view of it, with the result's shape and dtype. Jit inputs are
      never written (donated ones are, through ``pool``);
    * runs a tree of elementwise ops over an array of 4 MB or more as one loop over
      cache-sized blocks of rows (``elementwise_groups``), an elementwise result only
      reduced over trailing axes likewise (``_fused_reduce``), and the max/min
      derivative weights as one helper (scaling the cotangent when that is their use).

    ``pool``: a ``PoolPlan`` to fill (top level only): a large result of a function
    taking ``out=`` that is not written into a dying operand goes into a scratch slot
    (``_ms[slot]``) when it never escapes, or into its output ring (``_mo[ring]``)
    when it is an output (see ``fnx.backends.buffers``)."""
    p = plan(ir, in_loop=in_loop, out_into=out_into, pool=pool)
    em = _Emitter(p, glb, names, fresh)
    skip, emit = p.skip, em.emit
    for i, e in enumerate(ir.eqns):
        if i not in skip:
            emit(i, e)
    return em.body, em.quiet, em.ref, em.written


class _Emitter:
    """Writes the lines of a planned IR (a ``numpy_passes.Plan``), one equation at a
    time: its operands, the function computing it (``rule``), the buffer it writes into
    (``target``), the ``del`` of the values that die there. Globals are bound in
    ``glb`` as lines are written, so their names follow the equations' order."""

    def __init__(self, p, glb, names, fresh):
        self.plan, self.glb, self.names, self.fresh = p, glb, names, fresh
        self.bind_global = binder(glb)
        self.body, self.quiet, self.written = [], False, set()
        self.folded = set()
        self.full_operands = {}  # (shape, dtype, value bytes) -> the bound constant array

    def ref(self, v):
        if type(v) is Literal:  # a 0-d array: NumPy's scalar kernels can round differently
            return self.bind_global("lit", np.asarray(v.value))
        return self.names[v]

    def operands(self, i, e, ins_vars):
        """The expressions of eqn ``i``'s operands: an unbroadcast operand reshaped where
        NumPy's broadcasting needs it, a literal passed full-size where planned."""
        p, ref = self.plan, self.ref
        unbroadcast = p.unbroadcast
        ins_list = []
        for k, v in enumerate(ins_vars):
            r = ref(v)
            if (i, k) in unbroadcast and unbroadcast[(i, k)][1] is not None:
                r = f"{r}.reshape({unbroadcast[(i, k)][1]!r})"
            ins_list.append(r)
        k = p.full_operand.get(i)
        if k is not None:
            lit, o = e.inputs[k], e.outputs[0].aval
            key = (o.shape, o.dtype, np.asarray(lit.value, o.dtype).tobytes())
            if key not in self.full_operands:
                full = np.full(o.shape, lit.value, o.dtype)
                full.flags.writeable = False
                self.full_operands[key] = self.bind_global("full", full)
            ins_list[k] = self.full_operands[key]
        return ", ".join(ins_list)

    def rule(self, i, e):
        """How eqn ``i`` is computed: ``(fn, fn_obj, expr, outputs, ufunc)``. ``fn``: the
        global bound for the function called (None: ``expr`` is the whole expression);
        ``fn_obj``: that function when it may take ``out=``; ``outputs``: the vars it
        computes (a fused transpose's); ``ufunc``: the plain ufunc called, if so. In
        order: a helper planned in its place, the equation's ufunc, the ``specialize``
        and then the ``expression`` (None falls through) of the primitive's ``"numpy"``
        rule, its impl with its params bound."""
        p, bind_global, prim = self.plan, self.bind_global, e.prim
        s = p.special.get(i)
        if s is not None:
            self.quiet = True
            return bind_global(s.name, s.fn), s.fn, None, e.outputs, None
        ufunc = p.ufuncs[i]
        if ufunc is not None:
            fn = bind_global(ufunc.__name__, ufunc)
            # a stand-in ufunc (``div``'s ``true_divide``) runs quiet, as the impl does
            self.quiet |= hasattr(prim.impl, "raw") or ufunc is not numpy_rule(prim).ufunc
            return fn, ufunc, None, e.outputs, ufunc
        rule = numpy_rule(prim)
        specialize = rule.specialize
        if specialize is not None:
            # A function for these avals (e.g. dot_general's plan), the same one eager
            # calls pick, so jit stays bitwise equal to eager.
            consumer = p.fused_into.get(i)
            perm = None if consumer is None else tuple(consumer.params["permutation"])
            outputs = e.outputs if consumer is None else consumer.outputs
            fn_obj = specialize([v.aval for v in e.inputs], e.params, perm)
            fn = bind_global(prim.name, fn_obj)
            self.quiet |= hasattr(prim.impl, "raw")
            return fn, fn_obj, None, outputs, None
        if rule.expression is not None:
            expr = rule.expression([self.ref(v) for v in e.inputs], e.params, bind_global,
                           [v.aval for v in e.inputs], [v.aval for v in e.outputs])
            if expr is not None:
                self.quiet |= hasattr(prim.impl, "raw")
                return None, None, expr, e.outputs, None
        impl = prim.impl
        if hasattr(impl, "raw"):  # the whole function runs in the quiet state
            impl, self.quiet = impl.raw, True
        impl = functools.partial(impl, **e.params) if e.params else impl
        return bind_global(prim.name, impl), None, None, e.outputs, None

    def target(self, i, outputs, fn_obj, ufunc):
        """The buffer expression eqn ``i`` writes its result into (``out=``), or None: its
        ``out_into`` buffer (a plain ufunc), the donated buffer or dying operand planned
        for it, else for a large result of a function taking ``out=`` a ring (an output,
        after any in-place chain) or a scratch slot (read only by ops that never return a
        view of it)."""
        p = self.plan
        pool = p.pool
        target = p.out_into.get(outputs[0]) if (ufunc is not None
                                                and len(outputs) == 1) else None
        if target is not None:
            self.written.add(outputs[0])
        elif i in p.into_donor:
            target = f"_mo[{pool.ring(outputs[0], donor=p.into_donor[i])}]"
        elif i in p.in_place:
            v = p.in_place[i]
            target = self.names[v]
            if pool is not None and v in pool.slot_of:
                pool.slot_of[outputs[0]] = pool.slot_of.pop(v)
        elif (pool is not None and len(outputs) == 1 and fn_obj is not None
                and _takes_out(fn_obj) and outputs[0] not in p.out_into
                and nbytes(outputs[0]) >= buffers.MIN_BYTES):
            end = p.chain_end(outputs[0])
            if end in p.keep:  # the buffer (after the ops writing it in place) is returned
                target = f"_mo[{pool.ring(end, pool.dead_donor(end, i, p.free_after))}]"
            elif all(p.never_aliases(r, end) for r in p.readers.get(end, ())):
                slot = pool.scratch_slot(outputs[0])
                target = None if slot is None else f"_ms[{slot}]"
        return target

    def emit(self, i, e):
        """The lines of eqn ``i``: a folded constant, or its call and the ``del`` of the
        values that die there."""
        p, names, body = self.plan, self.names, self.body
        ins_vars = p.inputs_of(i, e)
        ins = self.operands(i, e, ins_vars)
        fn, fn_obj, expr, outputs, ufunc = self.rule(i, e)
        call = f"{fn}({ins})" if fn is not None else expr
        if p.foldable(i, e, self.folded):
            value = _fold(call, self.glb)
            if value is not None:
                names[outputs[0]] = self.bind_global("k", value)
                self.folded.add(outputs[0])
                return
        fresh = self.fresh
        for v in outputs:
            names[v] = next(fresh)
        outs = ", ".join(names[v] for v in outputs)
        if e.prim.multiple_results:
            outs = outs + ("," if len(outputs) == 1 else "")
        target = self.target(i, outputs, fn_obj, ufunc)
        if target is not None:
            body.append(f"{outs} = {fn}({ins}, out={target})")
        elif not outputs:  # an effect only (a debug callback)
            body.append(call)
        else:
            body.append(f"{outs} = {call}")
        if p.in_loop:
            return
        last_use, keep, folded = p.last_use, p.keep, self.folded
        dead_vars = [v for v in dict.fromkeys(ins_vars)
                     if type(v) is not Literal and v not in folded and last_use.get(v) == i
                     and v not in keep]
        dead_vars += [v for v in outputs if v not in last_use and v not in keep]
        if p.pool is not None:
            for v in dead_vars:
                p.pool.release(v)
        if dead_vars:
            body.append(f"del {', '.join(names[v] for v in dead_vars)}")


def _fold(call, glb):
    """The value of ``call`` (an expression over globals), computed now; None if it
    fails (it is then emitted as usual and fails, if it does, when called)."""
    try:
        with np.errstate(all="ignore"):
            value = eval(call, glb)
    except Exception:
        return None
    return value if isinstance(value, (np.ndarray, np.generic)) else None


def quiet_lines(body, glb):
    """``body`` run in the floating-point "ignore" state: one state for the whole call,
    not one per op."""
    if ERROR_STATE is not None:
        glb["_fp_state"], glb["_fp_ignore"] = ERROR_STATE, IGNORE_ALL
        return (["_fp_token = _fp_state.set(_fp_ignore)", "try:"]
                + ["    " + line for line in body]
                + ["finally:", "    _fp_state.reset(_fp_token)"])
    glb["_errstate"] = np.errstate  # pragma: no cover - NumPy without the context variable
    return ["with _errstate(all='ignore'):"] + ["    " + line for line in body]


def compile_ir(ir: IR, name="f", donated=()) -> Compiled:
    """Generate and compile the NumPy function for ``ir`` (constants bound as globals).

    ``donated``: positions of inputs whose buffers the caller gives up. The function
    then takes ``_dn=[buffer or None per donated input]`` (None: still referenced
    elsewhere, keep it), and an output may be written into a donated buffer once
    nothing reads that input (or a view of it) any more."""
    glb = {"np": np}
    names = {}
    fresh = (f"v{i}" for i in itertools.count())
    for v, c in zip(ir.constvars, ir.consts):
        names[v] = binder(glb)("const", c._value if hasattr(c, "_value") else c)
    args = []
    for v in ir.invars:
        names[v] = next(fresh)
        args.append(names[v])
    pool = PoolPlan({ir.invars[k]: j for j, k in enumerate(donated)})
    body, quiet, ref, _ = emit_eqns(ir, glb, names, fresh, pool=pool)
    outs = ", ".join(ref(v) for v in ir.outvars)
    body.append(f"return ({outs}{',' if len(ir.outvars) == 1 else ''})")
    fname = f"_fnx_{''.join(c if c.isalnum() else '_' for c in name)}_{next(_counter)}"
    body = quiet_lines(body, glb) if quiet else body
    if pool.scratch or pool.outs:
        glb["_pool"] = buffers.BufferPool(pool.scratch, pool.outs, pool.donor_of_ring)
        enter = "_ms, _mo = _pool.enter(_dn)" if donated else "_ms, _mo = _pool.enter()"
        body = ([enter, "try:"] + ["    " + line for line in body]
                + ["finally:", "    _pool.exit(_ms)"])
    if donated:
        args.append("_dn=None")
    source = f"def {fname}({', '.join(args)}):\n" + "\n".join("    " + ln for ln in body) + "\n"
    exec(compile(source, f"<fnx jit {name}>", "exec"), glb)
    # no glb -> fn -> glb cycle (the function never calls itself by name)
    return Compiled(glb.pop(fname), source, glb.get("_pool"))
