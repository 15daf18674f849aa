"""The NumPy backend's planning passes: what the lowering of an IR does besides calling
one rule per equation, decided before any line is written.

``plan(ir, ...)`` runs the passes in order over one ``Plan``, a set of side tables keyed
by equation index (or var) that each pass reads and extends; the emitter
(``numpy_codegen.emit_eqns``) then walks the equations once and reads them:

1. ``count_uses``: producers, readers and use counts of the IR as it is.
2. ``fuse_transposes``: a ``transpose`` that is the only use of a specializable
   primitive's result is computed by that primitive, laid out for the consumer
   (``fused_into``).
3. ``match_tie_weights``: the max/min derivative weights ``convert(a > b) + 0.5 *
   convert(a == b)`` as one helper, scaling the cotangent when that is their only use.
4. ``blend_selects``: a large float ``logistic`` and an int32-selector ``select_n`` as
   bit blends instead of ``np.where``/``np.choose``.
5. ``fuse_reductions``: an elementwise result only reduced over trailing axes, computed
   and reduced a few rows at a time (unless the reduction has a plan of its own,
   ``fnx.core.numpy_rules.reduce_plan``, which eager runs too).
6. ``block_elementwise``: trees of elementwise ops over large arrays as one loop over
   cache-sized blocks of rows (``elementwise_groups``: the cluster analysis, reusable by
   any backend that fuses elementwise ops).
7. ``unbroadcast``: a ufunc (or an op whose impl broadcasts like one) reads a
   ``broadcast_in_dim`` operand's own operand, NumPy broadcasting it the same way, or,
   where NumPy would loop over short runs between interleaved broadcast axes (a max
   pool's window), a contiguous copy of the broadcast; ``full_operands``: the scalar of
   a mid-sized ``maximum``/``minimum`` as a full array.
8. ``liveness``: uses after those rewrites (broadcasts nobody reads any more are
   dropped), last uses and readers.
9. ``plan_buffers``: which donated input's buffer an output may take over
   (``into_donor``) and which dying operand an elementwise result may overwrite
   (``in_place``). Scratch slots and output rings are numbered as the lines are emitted
   (``PoolPlan``), since which equations fold to constants is known only then.

Equations folded into another (members of a group, the transposes) are in ``skip``; an
equation computed by a helper instead of its primitive's rule is in ``special``.

Facts about primitives the passes rely on are declared below, keyed by the primitive
objects (not their names); they belong on the primitives' definitions in ``fnx.lax``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..core.ir import Literal, has_effects, sub_irs
from ..core.numpy_rules import numpy_rule, reduce_plan
from ..lax import add_p, convert_element_type_p, eq_p, gt_p, logistic_p, mul_p, select_n_p
from . import buffers
from .numpy_helpers import (_BLEND_UINT, _broadcast_copy, _fused_reduce, _helper, _logistic,
                            _scale_by_tie_weight, _select_int, _tie_weight)

# --- facts about primitives -------------------------------------------------------------------
# Declared where each primitive is defined: what its impl returns
# (``never_aliases_operands``, ``fresh_result``, ``fresh_result_when_casting``), whether it
# broadcasts (``broadcasts_operand``) or permutes (``permutes``) its operand
# (fnx.core.primitive lists them); and its ``"numpy"`` lowering (``numpy_rule``, a
# ``fnx.core.numpy_rules.NumpyRule``): the ufunc it is or runs on floats, the ufunc it
# reduces with, a specialized function for given avals, whether it broadcasts operands.

# --- per-equation queries ---------------------------------------------------------------------

def eqn_ufunc(e):
    """The ufunc computing ``e`` exactly as its impl does for these avals, else None: a
    plain ufunc primitive's; a float ``div``'s ``true_divide``; a float ``integer_pow``
    by 2's ``square``."""
    rule = numpy_rule(e.prim)
    if rule.ufunc is not None and not e.params:
        return rule.ufunc
    if e.prim.multiple_results or len(e.outputs) != 1 \
            or e.outputs[0].aval.dtype.kind not in "fc" or rule.float_ufunc is None:
        return None
    return rule.float_ufunc(e)


def fresh_result(e, ufunc):
    """Whether ``e``'s (single) result is always a new buffer that aliases nothing (so a
    later op may overwrite it once it is dead): a plain ufunc (``ufunc``: ``e``'s), a
    ``dot_general`` plan, a ``convert_element_type`` that changes the dtype."""
    if e.prim.multiple_results or not e.outputs[0].aval.shape:
        return False  # 0-d results may be NumPy scalars (read-only)
    if ufunc is not None or e.prim.fresh_result:
        return True
    return (e.prim.fresh_result_when_casting and type(e.inputs[0]) is not Literal
            and e.inputs[0].aval.dtype != e.outputs[0].aval.dtype)


def select_blend_uint(e):
    """For a ``select_n`` eqn with a bool selector and two cases of 1, 2, 4 or 8-byte
    elements: the unsigned dtype its blend works in, else None."""
    if (e.prim is not select_n_p or len(e.inputs) != 3 or len(e.outputs) != 1
            or e.inputs[0].aval.dtype != np.bool_ or not e.outputs[0].aval.shape):
        return None
    return _BLEND_UINT.get(e.outputs[0].aval.dtype.itemsize)


def nbytes(v):
    return v.aval.dtype.itemsize * math.prod(v.aval.shape)


def binder(glb):
    """``bind_global(prefix, value) -> name``: ``value`` bound in ``glb`` under a fresh
    name."""
    def bind_global(prefix, value):
        key = f"_{prefix}{len(glb)}"
        glb[key] = value
        return key
    return bind_global


# --- the plan ---------------------------------------------------------------------------------

class Special:
    """An equation computed by a backend helper instead of its primitive's rule: ``fn``
    called on ``inputs``, bound as a global named after ``name``; ``writes_into``: the
    operands the helper may write its result into (``out=``): None, ``"first"`` or
    ``"any"`` of the result's shape and dtype (a blocked loop reads a block of rows before
    it writes it)."""
    __slots__ = ("fn", "inputs", "name", "writes_into")

    def __init__(self, fn, inputs, name, writes_into=None):
        self.fn, self.inputs, self.name, self.writes_into = fn, inputs, name, writes_into


class Plan:
    """The side tables of one lowering, keyed by equation index or var (see the module
    docstring for which pass fills which)."""

    def __init__(self, ir, *, in_loop=False, out_into=None, pool=None):
        self.ir, self.in_loop, self.pool = ir, in_loop, pool
        self.out_into = out_into or {}
        self.ufuncs = [eqn_ufunc(e) for e in ir.eqns]  # per eqn: its ufunc, or None
        # count_uses
        self.producer, self.keep, self.uses0, self.readers0 = {}, set(), {}, {}
        # rewrites
        self.skip = set()         # eqns not emitted (folded into another)
        self.fused_into = {}      # eqn index -> the transpose eqn it computes instead
        self.special = {}         # eqn index -> Special
        self.unbroadcast = {}     # (eqn index, input position) -> (operand, reshape or None)
        self.full_operand = {}    # eqn index -> position of the literal passed full-size
        # liveness (after the rewrites)
        self.last_use, self.readers = {}, {}
        # buffers
        self.free_after, self.sharing = {}, {}
        self.in_place, self.into_donor = {}, {}
        self.passed_to = {}

    def inputs_of(self, i, e):
        """The values eqn ``i`` reads once rewritten: a helper's inputs, or its own with
        the unbroadcast operands in place of the broadcasts."""
        s = self.special.get(i)
        if s is not None:
            return s.inputs
        ub = self.unbroadcast
        return [ub[(i, k)][0] if (i, k) in ub else v for k, v in enumerate(e.inputs)]

    def is_ufunc(self, i):
        return self.ufuncs[i] is not None

    def never_aliases(self, i, v):
        """Eqn ``i`` reading ``v`` never returns (a view of) ``v``'s buffer."""
        e = self.ir.eqns[i]
        if (i in self.special or self.ufuncs[i] is not None or e.prim.never_aliases_operands
                or numpy_rule(e.prim).in_place):   # (a buffer written in place is followed
            return True                            # along its chain: ``passed_to``)
        return e.prim.fresh_result_when_casting and v.aval.dtype != e.outputs[0].aval.dtype

    def foldable(self, i, e, constant):
        """Eqn ``i`` may be computed at compile time (its inputs are literals or
        ``constant``)."""
        if not e.outputs or has_effects(e):  # a callback runs at every call
            return False
        o = e.outputs[0]
        return (not self.in_loop and not e.prim.multiple_results and i not in self.fused_into
                and o not in self.keep and o not in self.out_into
                and all(type(v) is Literal or v in constant for v in self.inputs_of(i, e))
                and not any(sub_irs(e.params)) and nbytes(o) <= FOLD_MAX_BYTES)

    def chain_end(self, v):
        """Where a buffer written in place along a chain of vars ends up."""
        passed_to = self.passed_to
        while v in passed_to:
            v = passed_to[v]
        return v


# Folded at compile time: equations computed from literals only (an ``iota``, the index
# arithmetic on it, a small broadcast of a literal), when the result is at most this big.
FOLD_MAX_BYTES = 1 << 16


def plan(ir, *, in_loop=False, out_into=None, pool=None):
    """Run the passes over ``ir``: its ``Plan``. ``in_loop``: the code is a loop body (no
    blocked loops, no folding, no donation; in-place writes only into values the step
    itself computed); ``out_into``: vars computed into given buffers; ``pool``: the
    ``PoolPlan`` (top level only)."""
    p = Plan(ir, in_loop=in_loop, out_into=out_into, pool=pool)
    count_uses(p)
    fuse_transposes(p)
    match_tie_weights(p)
    blend_selects(p)
    fuse_reductions(p)
    if not in_loop:
        block_elementwise(p)
    unbroadcast(p)
    liveness(p)
    full_operands(p)
    plan_buffers(p)
    return p


# --- 1. uses ----------------------------------------------------------------------------------

def count_uses(p):
    """Producers, and the readers and use counts of the IR as it is."""
    ir = p.ir
    producer, uses0, readers0 = p.producer, p.uses0, p.readers0
    for i, e in enumerate(ir.eqns):
        for v in e.outputs:
            producer[v] = i
    p.keep = set(ir.outvars) | set(ir.constvars)
    for j, e in enumerate(ir.eqns):
        for v in e.inputs:
            if type(v) is not Literal:
                uses0[v] = uses0.get(v, 0) + 1
                readers0.setdefault(v, []).append(j)
    for v in ir.outvars:
        if type(v) is not Literal:
            uses0[v] = uses0.get(v, 0) + 1


# --- 2. transpose fusion ----------------------------------------------------------------------

def fuse_transposes(p):
    """A ``transpose`` that is the only use of the result of a primitive whose rule applies
    one (``transposes=True``) is computed by that primitive (its rule's
    ``specialize(..., permutation)``): same values, laid out for the consumer, no
    intermediate."""
    ir, fused_into, skip = p.ir, p.fused_into, p.skip
    for i, e in enumerate(ir.eqns):
        if e.prim.permutes and len(e.inputs) == 1 and type(e.inputs[0]) is not Literal:
            j = p.producer.get(e.inputs[0])
            if (j is not None and p.uses0[e.inputs[0]] == 1 and j not in fused_into
                    and numpy_rule(ir.eqns[j].prim).transposes
                    and not ir.eqns[j].prim.multiple_results):
                fused_into[j] = e
                skip.add(i)


# --- 3. tie weights ---------------------------------------------------------------------------

def _same_atom(u, v):
    if type(u) is Literal or type(v) is Literal:
        return (type(u) is Literal and type(v) is Literal and u.aval == v.aval
                and bool(np.asarray(u.value) == np.asarray(v.value)))
    return u is v


def _match_tie_weight(p, i):
    """For ``add`` eqn ``i``: the eqns of ``convert(gt(a, b)) + convert(eq(a, b)) * 0.5``
    (each intermediate read only there) and ``(a, b)``, else None."""
    ir, producer, uses, keep = p.ir, p.producer, p.uses0, p.keep
    e = ir.eqns[i]
    if e.prim is not add_p:
        return None
    out = e.outputs[0].aval
    if out.dtype.kind != "f" or not out.shape:
        return None

    def single(v, prim):
        if type(v) is Literal or v in keep or uses.get(v) != 1 or v not in producer:
            return None
        d = ir.eqns[producer[v]]
        return producer[v] if d.prim is prim else None

    for one, half in (e.inputs, e.inputs[::-1]):
        j1, jh = single(one, convert_element_type_p), single(half, mul_p)
        if j1 is None or jh is None:
            continue
        m = ir.eqns[jh]
        lit = [v for v in m.inputs if type(v) is Literal]
        var = [v for v in m.inputs if type(v) is not Literal]
        if len(lit) != 1 or len(var) != 1 or float(np.asarray(lit[0].value)) != 0.5:
            continue
        j2 = single(var[0], convert_element_type_p)
        if j2 is None:
            continue
        jg, je = single(ir.eqns[j1].inputs[0], gt_p), single(ir.eqns[j2].inputs[0], eq_p)
        if jg is None or je is None:
            continue
        (a, b), (c, d) = ir.eqns[jg].inputs, ir.eqns[je].inputs
        if (not (_same_atom(a, c) and _same_atom(b, d) or _same_atom(a, d) and _same_atom(b, c))
                or np.broadcast_shapes(a.aval.shape, b.aval.shape) != out.shape):  # eq: symmetric
            continue
        if any(ir.eqns[j].outputs[0].aval.dtype != out.dtype for j in (j1, j2)):
            continue
        return (j1, jh, j2, jg, je), (a, b)
    return None


def match_tie_weights(p):
    """max/min derivative weights: one helper call instead of six ufunc calls; when the
    weights only scale a cotangent, the helper scales it (no float weights stored)."""
    ir, skip, special = p.ir, p.skip, p.special
    for i, e in enumerate(ir.eqns):
        if i in skip:
            continue
        m = _match_tie_weight(p, i)
        if m is None or skip.intersection(m[0]):
            continue
        skip.update(m[0])
        w, dtype = e.outputs[0], e.outputs[0].aval.dtype
        j = p.readers0[w][0] if p.uses0.get(w) == 1 and w not in p.keep else None
        c = ir.eqns[j] if j is not None else None
        # (not a product another weight already scales: the product of two tie weights,
        # clip's derivative, keeps one as a plain weight)
        if (c is not None and c.prim is mul_p and j not in skip and j not in special
                and c.outputs[0].aval == w.aval
                and all(type(v) is not Literal and v.aval == w.aval for v in c.inputs)):
            ct = c.inputs[1] if c.inputs[0] is w else c.inputs[0]
            skip.add(i)
            special[j] = Special(_helper(_scale_by_tie_weight, dtype), [ct] + list(m[1]),
                                 "scale_by_tie_weight", writes_into="first")
        else:
            special[i] = Special(_helper(_tie_weight, dtype), list(m[1]), "tie_weight")


# --- 4. blends --------------------------------------------------------------------------------

_LOGISTIC_MIN_SIZE = 1 << 13  # below this, np.where/np.choose are about as fast


def blend_selects(p):
    """``logistic`` over many floats: its impl's np.where as a blend of bits; an int32
    ``select_n``'s np.choose likewise."""
    skip, special = p.skip, p.special
    for i, e in enumerate(p.ir.eqns):
        if (i not in skip and i not in special and e.prim is logistic_p
                and type(e.inputs[0]) is not Literal
                and e.outputs[0].aval.dtype.kind == "f"
                and e.outputs[0].aval.dtype.itemsize in _BLEND_UINT
                and math.prod(e.outputs[0].aval.shape) >= _LOGISTIC_MIN_SIZE):
            special[i] = Special(_logistic, list(e.inputs), "logistic")
        elif (i not in skip and i not in special and e.prim is select_n_p
                and len(e.inputs) > 2 and e.inputs[0].aval.dtype == np.int32
                and e.outputs[0].aval.dtype.itemsize in _BLEND_UINT
                and all(type(v) is not Literal and v.aval.shape == e.outputs[0].aval.shape
                        for v in e.inputs)
                and math.prod(e.outputs[0].aval.shape) >= _LOGISTIC_MIN_SIZE):
            special[i] = Special(_select_int, list(e.inputs), "select_int")


# --- 5. fused reductions ----------------------------------------------------------------------

def _match_fused_reduce(p, j):
    """For a float ``reduce_{sum,max,min}`` eqn ``j`` over trailing axes (not axis 0) of
    a ufunc's result read only there, whose operands are not broadcasts, and for which
    ``reduce_plan`` keeps NumPy's ``reduce``: ``(i, fn, inputs)`` for ``_fused_reduce``,
    else None."""
    ir, producer = p.ir, p.producer
    r = ir.eqns[j]
    reducer = numpy_rule(r.prim).reducer
    if reducer is None or type(r.inputs[0]) is Literal:
        return None
    v = r.inputs[0]
    shape, nd = v.aval.shape, len(v.aval.shape)
    axes = tuple(sorted(a % nd for a in r.params["axes"])) if nd else ()
    if (nd < 2 or v in p.keep or p.uses0.get(v) != 1 or v not in producer
            or v.aval.dtype.kind != "f" or not axes or axes[0] == 0
            or axes != tuple(range(axes[0], nd))):
        return None
    if reduce_plan(reducer, tuple(shape), v.aval.dtype, axes) is not None:
        return None  # the reduction's own plan (the one eager runs) is faster
    i = producer[v]
    e = ir.eqns[i]
    u = p.ufuncs[i]
    if u is None or u.nout != 1 or e.outputs[0].aval.dtype != v.aval.dtype:
        return None
    for x in e.inputs:
        if type(x) is not Literal and x in producer \
                and ir.eqns[producer[x]].prim.broadcasts_operand:
            return None
    fn = functools.partial(_fused_reduce, ufunc=u, reducer=reducer,
                           axes=axes, shape=tuple(shape), dtype=v.aval.dtype)
    return i, fn, list(e.inputs)


def fuse_reductions(p):
    """An elementwise result only reduced (over trailing axes): computed and reduced a
    few rows at a time, never materialized in full."""
    skip, special = p.skip, p.special
    for j, e in enumerate(p.ir.eqns):
        if j in skip or j in special:
            continue
        m = _match_fused_reduce(p, j)
        if m is not None and m[0] not in skip and m[0] not in special:
            skip.add(m[0])
            special[j] = Special(m[1], m[2], "fused_" + e.prim.name)


# --- 6. blocked elementwise -------------------------------------------------------------------

# Elementwise chains over arrays this big (bytes of the result) run as one blocked loop,
# a block of about this many elements at a time (1 MB of float32 per temporary: on a
# (4096, 1024) GELU + layer norm, 2^18 ran 11.6 ms, 2^16 12.6 ms, 2^20 11.9 ms).
_FUSE_MIN_BYTES = 1 << 22
_FUSE_BLOCK_ELEMS = 1 << 18
# Smaller chains fuse when two selects share a selector (its mask is then made once; on
# 128x512 float32 jit elu 74 -> 60 us, selu 81 -> 69 us), down to this size.
_FUSE_SELECT_MIN_BYTES = 1 << 16


def _scalar_broadcasts(ir, keep):
    """``{var: literal}`` for the ``broadcast_in_dim`` of a scalar literal (a blocked loop
    reads the literal instead of the full-size array)."""
    out = {}
    for e in ir.eqns:
        if (e.prim.broadcasts_operand and type(e.inputs[0]) is Literal
                and e.outputs[0] not in keep):
            out[e.outputs[0]] = e.inputs[0]
    return out


def elementwise_groups(ir, skip, special, fused_into, uses, keep, producer, readers=None,
                       ufuncs=None):
    """Groups of elementwise equations (ufuncs, and ``select_n`` with a bool selector)
    over one large shape whose inner values are read only inside the group:
    ``[(root, members, scalars)]``, members in order, root last (the only value read
    outside); ``scalars``: the broadcast scalar literals they read (as literals).
    Computed a block of rows at a time, the inner values never leave the cache; each
    element still goes through the same ufuncs in the same order (a select picks the
    same bits), so the values are bitwise those of the unfused code. Trees are grown
    first (inner values read once); then a value read several times, all of them
    inside one group (a ``select_n``'s mask), joins it with its producer's tree.
    ``ufuncs``: per eqn its ``eqn_ufunc`` (computed when not given)."""
    if ufuncs is None:
        ufuncs = [eqn_ufunc(e) for e in ir.eqns]
    scalars = _scalar_broadcasts(ir, keep)
    group_of, groups = {}, {}

    def fusable(i, e):
        if i in skip or i in special or i in fused_into or len(e.outputs) != 1:
            return False
        o = e.outputs[0]
        if not o.aval.shape or o.aval.shape[0] < 2:
            return False
        if select_blend_uint(e) is None:
            u = ufuncs[i]
            if u is None or u.nout != 1:
                return False
        elif e.inputs[0] in scalars or type(e.inputs[0]) is Literal:
            return False  # a scalar selector: one case or the other, nothing to blend
        width = max([o.aval.dtype.itemsize] + [v.aval.dtype.itemsize for v in e.inputs])
        return (width * math.prod(o.aval.shape) >= _FUSE_SELECT_MIN_BYTES
                and all(type(v) is Literal or v in scalars or v.aval.shape == o.aval.shape
                        for v in e.inputs))

    ok = {}
    for i, e in enumerate(ir.eqns):
        if not fusable(i, e):
            continue
        ok[i] = True
        members = [i]
        for v in dict.fromkeys(e.inputs):
            if type(v) is Literal or v in scalars or v in keep or uses.get(v) != 1:
                continue
            g = group_of.get(producer.get(v))
            if g is not None and g in groups:
                members.extend(groups.pop(g))
        for m in members:
            group_of[m] = i
        groups[i] = members
    if readers is not None:  # values read several times, only inside one group
        for root in sorted(groups, reverse=True):
            if root not in groups:
                continue
            grown = True
            while grown:
                grown = False
                inside = set(groups[root])
                for m in list(groups[root]):
                    for v in ir.eqns[m].inputs:
                        if type(v) is Literal or v in scalars or v in keep:
                            continue
                        q = producer.get(v)
                        if (q is None or q in inside or not ok.get(q)
                                or not all(r in inside for r in readers.get(v, ()))):
                            continue
                        g = group_of.get(q)
                        if g is None or g not in groups or ir.eqns[g].outputs[0] is not v:
                            continue  # ``v`` is not a group's root value
                        for x in groups.pop(g):
                            group_of[x] = root
                            groups[root].append(x)
                            inside.add(x)
                        grown = True
    result = []
    for root, ms in groups.items():
        if len(ms) < 2:
            continue
        o = ir.eqns[root].outputs[0]
        width = max(v.aval.dtype.itemsize for m in ms
                    for v in (*ir.eqns[m].inputs, *ir.eqns[m].outputs))
        selectors = [ir.eqns[m].inputs[0] for m in ms
                     if select_blend_uint(ir.eqns[m]) is not None]
        if (width * math.prod(o.aval.shape) >= _FUSE_MIN_BYTES
                or len(selectors) > len(set(selectors))):
            used = {v: scalars[v] for m in ms for v in ir.eqns[m].inputs if v in scalars}
            result.append((root, sorted(ms), used))
    return result


def fused_elementwise(ir, members, glb, scalars=None):
    """A function ``(*inputs, out=None) -> result`` running the ufuncs (and bool selects)
    of ``members`` (root last) a block of rows at a time, and its inputs (vars).
    ``scalars``: vars read as the scalar literal they broadcast."""
    scalars = scalars or {}
    root = ir.eqns[members[-1]].outputs[0].aval
    shape, rest = tuple(root.shape), tuple(root.shape[1:])
    rows = min(shape[0], max(1, _FUSE_BLOCK_ELEMS // max(1, math.prod(rest))))
    bind_global = binder(glb)
    inputs, name_of = [], {}
    last_read = {}
    for k, m in enumerate(members):
        for v in ir.eqns[m].inputs:
            last_read[v] = k
    free, slots, lines = {}, [], []
    masks = {}     # (selector var, uint dtype, "t" or "f") -> mask buffer slot
    literal = {}   # name of a bound literal -> its value (0-d array)

    def take_slot(dtype):
        pool = free.get(dtype)
        slot = pool.pop() if pool else len(slots)
        if slot == len(slots):
            slots.append(dtype)
        return slot

    def operand(v):
        if type(v) is Literal or v in scalars:
            lit = scalars.get(v, v)
            value = np.asarray(lit.value, v.aval.dtype if v in scalars else None)
            name = bind_global("lit", value)
            literal[name] = value
            return name
        if v not in name_of:
            name_of[v] = f"x{len(inputs)}"
            inputs.append(v)
        return name_of[v]

    def as_uint(name, u):
        """``name`` (an operand) viewed as ``u``: a literal's view is bound once."""
        if name in literal:
            return bind_global("lit", literal[name].view(u))
        return f"{name}.view({bind_global('u', u)})"

    def zero_bits(name):
        return name in literal and not literal[name].tobytes().strip(b"\0")

    for k, m in enumerate(members):
        e = ir.eqns[m]
        args = [operand(v) for v in e.inputs]
        u = select_blend_uint(e)
        o = e.outputs[0]
        dying = [v for v in dict.fromkeys(e.inputs)
                 if type(v) is not Literal and v not in scalars and last_read[v] == k
                 and v.aval.shape == shape and name_of[v].startswith("t")]
        # Temporaries read for the last time are reusable: by this op's result if it is
        # a ufunc (elementwise in place), only after it for a select (it reads a case
        # after writing its result).
        for v in dying if u is None else ():
            free.setdefault(v.aval.dtype, []).append(int(name_of[v][1:]))
        if k == len(members) - 1:
            target = "out[s:e]"
        else:
            slot = take_slot(o.aval.dtype)
            name_of[o] = f"t{slot}"
            target = f"b{slot}[:n]"
        for v in dying if u is not None else ():
            free.setdefault(v.aval.dtype, []).append(int(name_of[v][1:]))
        if u is None:
            f = bind_global(eqn_ufunc(e).__name__, eqn_ufunc(e))
            lines.append(f"{name_of.get(o, '_')} = {f}({', '.join(args)}, out={target})")
            continue
        # select_n(which, c0, c1): c1 where ``which`` else c0, as bits: with the mask
        # ``mt`` (all ones where True) ``c0 ^ ((c1 ^ c0) & mt)``, with ``mf`` (all ones
        # where False) ``c1 ^ ((c1 ^ c0) & mf)``; a case of zero bits needs one ``and``.
        # A selector's masks are made once per block and shared by its selects.
        which, c0, c1 = args
        sel = e.inputs[0]

        def mask(kind):
            key = (sel, u, kind)
            if key not in masks:
                masks[key] = len(slots)
                slots.append(u)
                fn = bind_global("negative" if kind == "t" else "subtract",
                                 np.negative if kind == "t" else np.subtract)
                extra = "" if kind == "t" else ", 1"
                lines.append(f"{fn}({which}{extra}, dtype={bind_global('u', u)}, "
                             f"out=b{masks[key]}[:n])")
            return f"b{masks[key]}[:n]"
        dst = f"{target}.view({bind_global('u', u)})"
        band = bind_global("bitwise_and", np.bitwise_and)
        bxor = bind_global("bitwise_xor", np.bitwise_xor)
        if zero_bits(c1):
            lines.append(f"{band}({as_uint(c0, u)}, {mask('f')}, out={dst})")
        elif zero_bits(c0):
            lines.append(f"{band}({as_uint(c1, u)}, {mask('t')}, out={dst})")
        else:
            have_f = (sel, u, "f") in masks and (sel, u, "t") not in masks
            m_name = mask("f" if have_f else "t")
            base = as_uint(c1 if have_f else c0, u)
            lines.append(f"{bxor}({as_uint(c1, u)}, {as_uint(c0, u)}, out={dst})")
            lines.append(f"{band}({dst}, {m_name}, out={dst})")
            lines.append(f"{bxor}({dst}, {base}, out={dst})")
        if k != len(members) - 1:
            lines[-1] = f"{name_of[o]} = {target}; " + lines[-1]
    glb["_empty"] = np.empty
    dtype = bind_global("dtype", root.dtype)
    head = [f"def fused({', '.join(f'i{k}' for k in range(len(inputs)))}, out=None):",
            "    if out is None:", f"        out = _empty({shape!r}, {dtype})"]
    head += [f"    b{j} = _empty({(rows,) + rest!r}, {bind_global('dtype', d)})"
             for j, d in enumerate(slots)]
    head += [f"    for s in range(0, {shape[0]}, {rows}):", f"        e = s + {rows}",
             f"        n = min(e, {shape[0]}) - s"]
    head += [f"        x{k} = i{k}[s:e]" for k in range(len(inputs))]
    source = "\n".join(head + ["        " + line for line in lines] + ["    return out", ""])
    exec(compile(source, "<fnx fused elementwise>", "exec"), glb)
    fn = glb.pop("fused")
    fn.takes_out = True
    fn.source = source
    return fn, inputs


def block_elementwise(p):
    """Chains of elementwise ops over arrays larger than the cache: one blocked loop
    each (a ``Special`` at the root, the other members skipped); the broadcast scalars
    such loops now read as literals are not emitted (unless a helper reads them: the
    tie weights of ``max(x, zeros)``)."""
    ir, skip, special, keep, readers0 = p.ir, p.skip, p.special, p.keep, p.readers0
    for root, members, scalars in elementwise_groups(ir, skip, special, p.fused_into,
                                                     p.uses0, keep, p.producer, readers0,
                                                     p.ufuncs):
        fn, fused_inputs = fused_elementwise(ir, members, {"np": np}, scalars)
        skip.update(members[:-1])
        special[root] = Special(fn, fused_inputs, "fused_elementwise", writes_into="any")
    helper_reads = {v for s in special.values() for v in s.inputs if type(v) is not Literal}
    for i, e in enumerate(ir.eqns):
        if (i not in skip and e.prim.broadcasts_operand
                and type(e.inputs[0]) is Literal and e.outputs[0] not in keep
                and readers0.get(e.outputs[0])
                and all(j in skip for j in readers0[e.outputs[0]])
                and e.outputs[0] not in helper_reads):
            skip.add(i)


# --- 7. unbroadcast operands, full operands ---------------------------------------------------

def _numpy_broadcastable(e):
    """For a ``broadcast_in_dim`` eqn: ``(operand, shape)`` where ``shape`` is the
    operand's shape with the size-1 dims that let NumPy's own broadcasting do the
    same (None: the operand broadcasts as is, its dims being the trailing ones)."""
    x = e.inputs[0]
    out = e.params["shape"]
    expanded = [1] * len(out)
    for i, d in enumerate(e.params["broadcast_dimensions"]):
        expanded[d] = x.aval.shape[i]
    nd = len(x.aval.shape)
    if tuple(expanded[len(out) - nd:]) == tuple(x.aval.shape) \
            and all(s == 1 for s in expanded[:len(out) - nd]):
        return x, None
    return x, tuple(expanded)


# A broadcast whose broadcast axes are interleaved with its operand's, down to the last
# (``(n, c, h, 1, w, 1)`` against ``(n, c, h, 2, w, 2)``: a max pool's derivative) makes
# NumPy's ufunc loop run once per short run of at most this many elements between them:
# 346K float32 multiplied against such a broadcast took 343 us, against the same values
# copied out contiguously first (``_broadcast_copy``, 90 us) 40 us. Only for results of at
# least ``_BROADCAST_COPY_MIN_SIZE`` elements (``(65536, 2)``: 111 -> 75 us; ``(512, 4)``:
# 1.9 -> 2.2 us).
_BROADCAST_COPY_MAX_RUN = 8
_BROADCAST_COPY_MIN_SIZE = 1 << 14


def _short_broadcast_runs(expanded, shape):
    """A broadcast of an operand of shape ``expanded`` (1 on the broadcast axes) to
    ``shape`` leaves NumPy's loop a short innermost run (see ``_BROADCAST_COPY_MAX_RUN``)."""
    if math.prod(shape) < _BROADCAST_COPY_MIN_SIZE:
        return False
    dims = [(expanded[d] == 1, shape[d]) for d in range(len(shape)) if shape[d] != 1]
    if not dims or not any(b for b, _ in dims) or all(b for b, _ in dims):
        return False
    run, last = 1, dims[-1][0]
    for b, n in reversed(dims):
        if b != last:
            break
        run *= n
    return run <= _BROADCAST_COPY_MAX_RUN


def unbroadcast(p):
    """Ufunc operands that are broadcasts (and those of primitives whose impl broadcasts
    like a ufunc, ``NumpyRule.broadcasts``): read the broadcast's operand instead, when
    another operand has the full shape; but a broadcast NumPy would loop over in short
    runs (``_short_broadcast_runs``) is computed as a contiguous copy instead
    (``_broadcast_copy``), once for all its readers."""
    ir, skip, special, producer = p.ir, p.skip, p.special, p.producer
    copied = set()
    for i, e in enumerate(ir.eqns):
        if (i in skip or i in special or len(e.outputs) != 1
                or not (p.ufuncs[i] is not None
                        or numpy_rule(e.prim).broadcasts)):
            continue
        shape = e.outputs[0].aval.shape
        full = [type(v) is not Literal and v.aval.shape == shape for v in e.inputs]
        for k, v in enumerate(e.inputs):
            j = producer.get(v) if type(v) is not Literal else None
            if (j is None or j in skip or not ir.eqns[j].prim.broadcasts_operand
                    or not full[k] or sum(full) < 2 or j in copied):
                continue
            b = ir.eqns[j]
            x, expanded = _numpy_broadcastable(b)
            if (j not in special and type(x) is not Literal and expanded is not None
                    and _short_broadcast_runs(expanded, shape)):
                special[j] = Special(functools.partial(_broadcast_copy, expanded=expanded,
                                                       shape=tuple(shape)),
                                     [x], "broadcast_copy")
                copied.add(j)
                continue
            p.unbroadcast[(i, k)] = (x, expanded)
            full[k] = False


# ``maximum``/``minimum`` of an array and a scalar: NumPy's SIMD loops for these run only
# when both operands are contiguous arrays; with a scalar (stride 0) operand they take a
# scalar loop, about 3x slower for float32 and 1.6x for int32 (the same values, NaNs and
# signed zeros included). The scalar is then passed as a read-only constant array of the
# result's shape, shared by the function's equations, for results of these dtypes and
# sizes (a float64 or float16 loop gains nothing; past a few MB memory traffic dominates).
_FULL_OPERAND_UFUNCS = (np.maximum, np.minimum)
_FULL_OPERAND_DTYPES = frozenset(map(np.dtype, (np.float32, np.int32, np.int64)))
_FULL_OPERAND_MAX_BYTES = 1 << 22


def _full_operand_literal(e, ufunc):
    """The position of ``e``'s scalar literal operand worth passing as a full array
    (see ``_FULL_OPERAND_UFUNCS``), else None."""
    if ufunc not in _FULL_OPERAND_UFUNCS or len(e.inputs) != 2:
        return None
    o = e.outputs[0].aval
    if (o.dtype not in _FULL_OPERAND_DTYPES
            or not buffers.MIN_BYTES <= nbytes(e.outputs[0]) <= _FULL_OPERAND_MAX_BYTES):
        return None
    kinds = [type(v) is Literal for v in e.inputs]
    if (kinds.count(True) != 1 or e.inputs[kinds.index(False)].aval.shape != o.shape
            or np.asarray(e.inputs[kinds.index(True)].value).dtype != o.dtype):
        return None
    return kinds.index(True)


def full_operands(p):
    """Equations passed a full-size constant for their scalar literal operand (see
    ``_FULL_OPERAND_UFUNCS``): ``full_operand[i]``, the literal's position."""
    for i, e in enumerate(p.ir.eqns):
        if i in p.skip or i in p.special:
            continue
        k = _full_operand_literal(e, p.ufuncs[i])
        if k is not None:
            p.full_operand[i] = k


# --- 8. liveness ------------------------------------------------------------------------------

def liveness(p):
    """Uses after the rewrites (broadcasts nobody reads any more are not emitted), then
    each value's last use and readers among the equations emitted."""
    ir, skip = p.ir, p.skip
    uses = {}
    for i, e in enumerate(ir.eqns):
        if i not in skip:
            for v in p.inputs_of(i, e):
                if type(v) is not Literal:
                    uses[v] = uses.get(v, 0) + 1
    for v in ir.outvars:
        if type(v) is not Literal:
            uses[v] = uses.get(v, 0) + 1
    for i in reversed(range(len(ir.eqns))):
        e = ir.eqns[i]
        if (i not in skip and e.prim.broadcasts_operand and uses.get(e.outputs[0], 0) == 0
                and any(ir.eqns[j].inputs[k] is e.outputs[0] for j, k in p.unbroadcast)):
            skip.add(i)
            x = e.inputs[0]
            if type(x) is not Literal:
                uses[x] -= 1
    last_use, readers = p.last_use, p.readers
    for i, e in enumerate(ir.eqns):
        if i in skip:
            continue
        for v in p.inputs_of(i, e):
            if type(v) is not Literal:
                last_use[v] = i
                readers.setdefault(v, []).append(i)


# --- 9. donation and in-place writes ----------------------------------------------------------

def plan_buffers(p):
    """Donated inputs (``pool.donors``): the last eqn reading each one's buffer, through
    the input or any view of it (``free_after``; none when a view of it is an output: it
    escapes). Then ``in_place[i]``: the dying operand eqn ``i`` writes its result into
    (never a value computed at compile time), and ``into_donor[i]``: the donated operand
    whose buffer output ``i`` takes over (its last reader: eqn ``i`` itself)."""
    ir, skip, special, keep, pool = p.ir, p.skip, p.special, p.keep, p.pool
    free_after, sharing = p.free_after, p.sharing
    if pool is not None and pool.donors:
        sharing.update((d, {d}) for d in pool.donors)
        for i, e in enumerate(ir.eqns):
            if (i in skip or fresh_result(e, p.ufuncs[i]) or i in special
                    or e.prim.never_aliases_operands):
                continue
            for vs in sharing.values():
                if any(v in vs for v in p.inputs_of(i, e) if type(v) is not Literal):
                    vs.update(e.outputs)
        for d, vs in sharing.items():
            if not vs & keep:
                free_after[d] = max(p.last_use.get(v, -1) for v in vs)

    in_place, into_donor, owned, maybe_folded = p.in_place, p.into_donor, set(), set()
    last_use, readers, out_into = p.last_use, p.readers, p.out_into
    for i, e in enumerate(ir.eqns):
        if i in skip or not e.outputs:
            continue
        if p.foldable(i, e, maybe_folded):
            maybe_folded.add(e.outputs[0])
            continue
        o = e.outputs[0] if i not in p.fused_into else p.fused_into[i].outputs[0]
        s = special.get(i)
        ufunc_like = p.ufuncs[i] is not None and s is None
        into = (numpy_rule(e.prim).written_into(e.params)
                if s is None and i not in p.fused_into and len(e.outputs) == 1 else ())
        elementwise = ufunc_like or bool(into) or (s is not None and s.writes_into is not None)
        if elementwise and len(e.outputs) == 1 and o not in out_into:
            operands = p.inputs_of(i, e)
            candidates = (operands if ufunc_like or (s is not None and s.writes_into == "any")
                          else [operands[k] for k in into] if into else operands[:1])
            for v in candidates if o in keep else ():
                # (a blocked loop writing into ``v`` must not read it through a view)
                if (type(v) is not Literal and free_after.get(v) == i
                        and v.aval == o.aval and v not in pool.claimed
                        and not any(u is not v and u in sharing[v] for u in operands)):
                    into_donor[i] = v
                    pool.claimed.add(v)
                    break
            for v in candidates if i not in into_donor else ():
                if (type(v) is not Literal and v in owned and last_use.get(v) == i
                        and v not in keep and v.aval.shape == o.aval.shape
                        and v.aval.dtype == o.aval.dtype
                        and all(p.never_aliases(r, v) for r in readers[v])):
                    in_place[i] = v
                    break
        if fresh_result(e, p.ufuncs[i]) or (i in p.fused_into and o.aval.shape) or s is not None:
            owned.add(o)
    # A buffer written in place is passed along a chain of vars; where the chain ends
    # decides whether its first result may go into scratch or must go into a ring.
    p.passed_to = {v: ir.eqns[i].outputs[0] for i, v in in_place.items()}


class PoolPlan:
    """Compile-time plan of a ``BufferPool``: which results get a scratch slot (by
    liveness: a dead slot is reused by the next result of its shape and dtype) and
    which outputs get a ring."""

    def __init__(self, donors=None):
        self.scratch, self.outs = [], []  # [(shape, dtype)] of the slots, rings
        self.donor_of_ring = []  # per ring: the donated input that backs it, or None
        self.free = {}       # (shape, dtype) -> dead scratch slots
        self.slot_of = {}    # var -> its scratch slot (while alive)
        self.ring_of = {}    # output var -> its ring
        self.nbytes = 0
        self.donors = donors or {}  # donated input var -> its position in ``_dn``
        self.claimed = set()        # donated inputs already backing a ring

    def scratch_slot(self, v):
        key = (tuple(v.aval.shape), v.aval.dtype)
        free = self.free.get(key)
        if free:
            slot = free.pop()
        else:
            size = nbytes(v)
            if self.nbytes + size > buffers.ARENA_MAX_BYTES:
                return None
            self.nbytes += size
            slot = len(self.scratch)
            self.scratch.append(key)
        self.slot_of[v] = slot
        return slot

    def ring(self, v, donor=None):
        if v not in self.ring_of:
            self.ring_of[v] = len(self.outs)
            self.outs.append((tuple(v.aval.shape), v.aval.dtype))
            self.donor_of_ring.append(None if donor is None else self.donors[donor])
            if donor is not None:
                self.claimed.add(donor)
        return self.ring_of[v]

    def dead_donor(self, v, before, free_after):
        """An unclaimed donated input with ``v``'s aval whose buffer nothing reads from
        eqn ``before`` on, else None."""
        for d in self.donors:
            if d not in self.claimed and d.aval == v.aval and free_after.get(d, before) < before:
                return d
        return None

    def release(self, v):
        slot = self.slot_of.pop(v, None)
        if slot is not None:
            self.free.setdefault(self.scratch[slot], []).append(slot)
