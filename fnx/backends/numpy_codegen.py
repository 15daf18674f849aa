"""Lowering an IR to one generated Python function over NumPy arrays.

The generated function is straight-line code: one line per equation calling
the primitive's ufunc or impl (bound once, with its params, as a global of the
function), literals and constants bound once, and a ``del`` right after each
value's last use so intermediate buffers are freed as early as possible.
Nothing interprets the IR per call.

A primitive may provide ``numpy_codegen(input_exprs, params, bind_global, in_avals,
out_avals)`` (an expression string, e.g. ``x.reshape((3, 1))`` for a view, or None to
call the impl) or ``numpy_specialize(in_avals, params, permutation)`` (a
function of the input arrays for those avals; eager impls must pick the same
computation so jit stays bitwise equal to eager). With ``numpy_specialize``, a
``transpose`` that is the only use of the result is fused in: the function is
asked for the transposed result directly (``dot_general`` then writes an outer
product in the consumer's layout instead of materializing and transposing).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ..core.ir import IR, Literal, has_effects, sub_irs
from ..lax import _rules
from . import buffers

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


def _binder(glb):
    def bind_global(prefix, value):
        key = f"_{prefix}{len(glb)}"
        glb[key] = value
        return key
    return bind_global


# Folded at compile time: equations computed from literals only (an ``iota``, the index
# arithmetic on it, a small broadcast of a literal), when the result is at most this big.
_FOLD_MAX_BYTES = 1 << 16


def _eqn_ufunc(e):
    """The ufunc computing ``e`` exactly as its impl does for these avals, else None: a
    plain ufunc primitive's; a float ``div``'s ``true_divide``; a float ``integer_pow``
    by 2's ``square``."""
    u = getattr(e.prim, "ufunc", None)
    if u is not None and not e.params:
        return u
    if e.prim.multiple_results or len(e.outputs) != 1 \
            or e.outputs[0].aval.dtype.kind not in "fc":
        return None
    if (e.prim.name == "div" and not e.params
            and all(v.aval.dtype.kind in "fc" for v in e.inputs)):
        return np.true_divide
    if (e.prim.name == "integer_pow" and e.params == {"y": 2}
            and e.inputs[0].aval.dtype.kind in "fc"):
        return np.square
    return None


def _is_ufunc_eqn(e):
    return _eqn_ufunc(e) is not None


def _fresh_result(e):
    """Whether ``e``'s (single) result is always a new buffer that aliases nothing (so a
    later op may overwrite it once it is dead): a plain ufunc, a ``dot_general`` plan,
    a ``convert_element_type`` that changes the dtype."""
    if e.prim.multiple_results or not e.outputs[0].aval.shape:
        return False  # 0-d results may be NumPy scalars (read-only)
    if _is_ufunc_eqn(e) or e.prim.name == "dot_general":
        return True
    return (e.prim.name == "convert_element_type" and type(e.inputs[0]) is not Literal
            and e.inputs[0].aval.dtype != e.outputs[0].aval.dtype)


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


def _tie_weight(a, b, *, dtype, out=None):
    """``convert(a > b) + 0.5 * convert(a == b)`` (the derivative of ``max(a, b)`` with
    respect to ``a``: 1, 1/2 at ties, 0) in about two passes instead of six; into
    ``out`` when given."""
    gt = np.greater(a, b)
    if out is None:
        out = gt.astype(dtype)
    else:
        np.copyto(out, gt)
    tie = np.equal(a, b)
    if tie.any():
        np.copyto(out, dtype.type(0.5), where=tie)
    return out


def _scale_by_tie_weight(ct, a, b, *, dtype, out=None):
    """``ct * _tie_weight(a, b)``, bitwise, in about three passes: ``ct`` times the
    boolean ``a > b`` (NumPy multiplies by its 1.0 or 0.0) when there are no ties.
    ``out`` may be ``ct``."""
    tie = np.equal(a, b)
    if tie.any():
        return np.multiply(ct, _tie_weight(a, b, dtype=dtype), out=out)
    return np.multiply(ct, np.greater(a, b), out=out)


def _logistic(x, *, out=None):
    """``logistic(x)`` exactly as its impl computes it (``e = exp(-|x|)``, then
    ``1 / (1 + e)`` where ``x >= 0`` and ``e / (1 + e)`` elsewhere) but picking the
    case by blending bits instead of ``np.where``, whose per-element branch on an
    unsorted mask costs 20x the arithmetic (1M float32: 20 -> 1.3 ms); into ``out``
    when given."""
    u = _BLEND_UINT[x.dtype.itemsize]
    mt = np.negative(np.greater_equal(x, 0), dtype=u)  # all ones where x >= 0
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    d = np.add(1, e)
    r0 = np.true_divide(e, d, out=e)
    r1 = np.true_divide(1, d, out=d)
    if out is None:
        out = np.empty(x.shape, x.dtype)
    ov = out.view(u)
    np.bitwise_xor(r1.view(u), r0.view(u), out=ov)
    np.bitwise_and(ov, mt, out=ov)
    np.bitwise_xor(ov, r0.view(u), out=ov)
    return out


_logistic.takes_out = True


def _select_int(which, *cases, out=None):
    """``select_n`` with an int32 selector: ``cases[clip(which, 0, n - 1)]`` as its impl
    (``np.choose``) picks it, the same bits, by blending case ``k`` in where
    ``which >= k`` (1M float32 of 3 cases: 6 -> 1.2 ms)."""
    u = _BLEND_UINT[cases[0].dtype.itemsize]
    if out is None:
        out = np.empty(which.shape, cases[0].dtype)
    np.copyto(out, cases[0])
    ov = out.view(u)
    m, t = np.empty(which.shape, u), np.empty(which.shape, u)
    for k in range(1, len(cases)):
        np.negative(np.greater_equal(which, k), dtype=u, out=m)
        np.bitwise_xor(cases[k].view(u), ov, out=t)
        np.bitwise_and(t, m, out=t)
        np.bitwise_xor(ov, t, out=ov)
    return out


_select_int.takes_out = True
_LOGISTIC_MIN_SIZE = 1 << 13  # below this, np.where/np.choose are about as fast


def _helper(fn, dtype):
    """``fn`` bound to ``dtype``, marked as taking ``out=`` (its first operand may be
    passed as ``out``)."""
    fn = functools.partial(fn, dtype=dtype)
    fn.takes_out = True
    return fn


# Fused elementwise-then-reduce: the elementwise result is computed this many elements at
# a time (a few rows) into one scratch buffer that stays in the L2 cache (1 MB of
# float32) and reduced from there. (Smaller blocks pay more per-call overhead than they
# save: 64K-element blocks made a (4096, 1024) sum of squares 1.3x slower.)
_FUSED_REDUCE_ELEMS = 1 << 18
_REDUCERS = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum}


def _fused_reduce(*operands, ufunc, reducer, axes, shape, dtype):
    """``reducer.reduce(ufunc(*operands), axis=axes)`` (``axes`` trailing, not axis 0)
    without the full-size intermediate: a block of leading rows at a time. Each output
    element is reduced over the same contiguous row in the same order as unfused (a
    C-contiguous intermediate), so the result is bitwise the same; any other layout
    falls back to the unfused computation."""
    n = shape[0]
    full = [isinstance(o, np.ndarray) and o.ndim == len(shape) and o.shape[0] == n
            and n != 1 for o in operands]
    if (not any(full) or math.prod(shape) == 0
            or not all(o.flags.c_contiguous for o, f in zip(operands, full) if f)):
        return reducer.reduce(ufunc(*operands), axis=axes)
    row = math.prod(shape[1:])
    per = max(1, _FUSED_REDUCE_ELEMS // max(row, 1))
    out = np.empty(tuple(s for k, s in enumerate(shape) if k not in axes), dtype)
    buf = np.empty((min(per, n),) + tuple(shape[1:]), dtype)
    for s in range(0, n, per):
        e = min(n, s + per)
        b = buf[:e - s]
        ufunc(*[o[s:e] if f else o for o, f in zip(operands, full)], out=b)
        reducer.reduce(b, axis=axes, out=out[s:e])
    return out


def _match_fused_reduce(ir, j, producer, uses, keep):
    """For a float ``reduce_{sum,max,min}`` eqn ``j`` over trailing axes (not axis 0) of
    a ufunc's result read only there, whose operands are not broadcasts: ``(i, fn,
    inputs)`` for ``_fused_reduce``, else None."""
    r = ir.eqns[j]
    if r.prim.name not in _REDUCERS or type(r.inputs[0]) is Literal:
        return None
    v = r.inputs[0]
    shape, nd = v.aval.shape, len(v.aval.shape)
    axes = tuple(sorted(a % nd for a in r.params["axes"])) if nd else ()
    if (nd < 2 or v in keep or uses.get(v) != 1 or v not in producer
            or v.aval.dtype.kind != "f" or not axes or axes[0] == 0
            or axes != tuple(range(axes[0], nd))):
        return None
    i = producer[v]
    e = ir.eqns[i]
    u = _eqn_ufunc(e)
    if u is None or u.nout != 1 or e.outputs[0].aval.dtype != v.aval.dtype:
        return None
    for x in e.inputs:
        if type(x) is not Literal and x in producer \
                and ir.eqns[producer[x]].prim.name == "broadcast_in_dim":
            return None
    fn = functools.partial(_fused_reduce, ufunc=u, reducer=_REDUCERS[r.prim.name],
                           axes=axes, shape=tuple(shape), dtype=v.aval.dtype)
    return i, fn, list(e.inputs)


# Elementwise chains over arrays this big (bytes of the result) run as one blocked loop,
# a block of about this many elements at a time (1 MB of float32 per temporary: on a
# (4096, 1024) GELU + layer norm, 2^18 ran 11.6 ms, 2^16 12.6 ms, 2^20 11.9 ms).
_FUSE_MIN_BYTES = 1 << 22
_FUSE_BLOCK_ELEMS = 1 << 18
# Smaller chains fuse when two selects share a selector (its mask is then made once; on
# 128x512 float32 jit elu 74 -> 60 us, selu 81 -> 69 us), down to this size.
_FUSE_SELECT_MIN_BYTES = 1 << 16


def _select_blend_uint(e):
    """For a ``select_n`` eqn with a bool selector and two cases of 1, 2, 4 or 8-byte
    elements: the unsigned dtype its blend works in, else None."""
    if (e.prim.name != "select_n" or len(e.inputs) != 3 or len(e.outputs) != 1
            or e.inputs[0].aval.dtype != np.bool_ or not e.outputs[0].aval.shape):
        return None
    return _BLEND_UINT.get(e.outputs[0].aval.dtype.itemsize)


_BLEND_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
               8: np.dtype(np.uint64)}


def _scalar_broadcasts(ir, keep):
    """``{var: literal}`` for the ``broadcast_in_dim`` of a scalar literal (a blocked loop
    reads the literal instead of the full-size array)."""
    out = {}
    for e in ir.eqns:
        if (e.prim.name == "broadcast_in_dim" and type(e.inputs[0]) is Literal
                and e.outputs[0] not in keep):
            out[e.outputs[0]] = e.inputs[0]
    return out


def _elementwise_groups(ir, skip, special, fused_into, uses, keep, producer, readers=None):
    """Groups of elementwise equations (ufuncs, and ``select_n`` with a bool selector)
    over one large shape whose inner values are read only inside the group:
    ``[(root, members, scalars)]``, members in order, root last (the only value read
    outside); ``scalars``: the broadcast scalar literals they read (as literals).
    Computed a block of rows at a time, the inner values never leave the cache; each
    element still goes through the same ufuncs in the same order (a select picks the
    same bits), so the values are bitwise those of the unfused code. Trees are grown
    first (inner values read once); then a value read several times, all of them
    inside one group (a ``select_n``'s mask), joins it with its producer's tree."""
    scalars = _scalar_broadcasts(ir, keep)
    group_of, groups = {}, {}

    def fusable(i, e):
        if i in skip or i in special or i in fused_into or len(e.outputs) != 1:
            return False
        o = e.outputs[0]
        if not o.aval.shape or o.aval.shape[0] < 2:
            return False
        if _select_blend_uint(e) is None:
            u = _eqn_ufunc(e)
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
                        p = producer.get(v)
                        if (p is None or p in inside or not ok.get(p)
                                or not all(r in inside for r in readers.get(v, ()))):
                            continue
                        g = group_of.get(p)
                        if g is None or g not in groups or ir.eqns[g].outputs[0] is not v:
                            continue  # ``v`` is not a group's root value
                        for q in groups.pop(g):
                            group_of[q] = root
                            groups[root].append(q)
                            inside.add(q)
                        grown = True
    result = []
    for root, ms in groups.items():
        if len(ms) < 2:
            continue
        o = ir.eqns[root].outputs[0]
        width = max(v.aval.dtype.itemsize for m in ms
                    for v in (*ir.eqns[m].inputs, *ir.eqns[m].outputs))
        selectors = [ir.eqns[m].inputs[0] for m in ms
                     if _select_blend_uint(ir.eqns[m]) is not None]
        if (width * math.prod(o.aval.shape) >= _FUSE_MIN_BYTES
                or len(selectors) > len(set(selectors))):
            used = {v: scalars[v] for m in ms for v in ir.eqns[m].inputs if v in scalars}
            result.append((root, sorted(ms), used))
    return result


def _fused_elementwise(ir, members, glb, scalars=None):
    """A function ``(*inputs, out=None) -> result`` running the ufuncs (and bool selects)
    of ``members`` (root last) a block of rows at a time, and its inputs (vars).
    ``scalars``: vars read as the scalar literal they broadcast."""
    scalars = scalars or {}
    root = ir.eqns[members[-1]].outputs[0].aval
    shape, rest = tuple(root.shape), tuple(root.shape[1:])
    rows = min(shape[0], max(1, _FUSE_BLOCK_ELEMS // max(1, math.prod(rest))))
    bind_global = _binder(glb)
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
        u = _select_blend_uint(e)
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
            f = bind_global(_eqn_ufunc(e).__name__, _eqn_ufunc(e))
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


# Helpers (``special`` eqns) that may write their result into their first operand.
_IN_PLACE_HELPERS = frozenset(["scale_by_tie_weight", "fused_elementwise"])
# ... and those that may write into any operand of the result's shape and dtype (a block
# of rows is read before it is written).
_ANY_OPERAND = frozenset(["fused_elementwise"])
# Primitives whose impl always returns a new buffer (a ufunc's reduce returns a copy even
# over no axes).
_NEVER_ALIAS = frozenset(["dot_general", "reduce_sum", "reduce_prod", "reduce_max",
                          "reduce_min"])


def _same_atom(u, v):
    if type(u) is Literal or type(v) is Literal:
        return (type(u) is Literal and type(v) is Literal and u.aval == v.aval
                and bool(np.asarray(u.value) == np.asarray(v.value)))
    return u is v


def _match_tie_weight(ir, i, producer, uses, keep):
    """For ``add`` eqn ``i``: the eqns of ``convert(gt(a, b)) + convert(eq(a, b)) * 0.5``
    (each intermediate read only there) and ``(a, b)``, else None."""
    e = ir.eqns[i]
    if e.prim.name != "add":
        return None
    out = e.outputs[0].aval
    if out.dtype.kind != "f" or not out.shape:
        return None

    def single(v, name):
        if type(v) is Literal or v in keep or uses.get(v) != 1 or v not in producer:
            return None
        d = ir.eqns[producer[v]]
        return producer[v] if d.prim.name == name else None

    for one, half in (e.inputs, e.inputs[::-1]):
        j1, jh = single(one, "convert_element_type"), single(half, "mul")
        if j1 is None or jh is None:
            continue
        m = ir.eqns[jh]
        lit = [v for v in m.inputs if type(v) is Literal]
        var = [v for v in m.inputs if type(v) is not Literal]
        if len(lit) != 1 or len(var) != 1 or float(np.asarray(lit[0].value)) != 0.5:
            continue
        j2 = single(var[0], "convert_element_type")
        if j2 is None:
            continue
        jg, je = single(ir.eqns[j1].inputs[0], "gt"), single(ir.eqns[j2].inputs[0], "eq")
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


class _PoolPlan:
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
            size = _nbytes(v)
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
            or not buffers.MIN_BYTES <= _nbytes(e.outputs[0]) <= _FULL_OPERAND_MAX_BYTES):
        return None
    kinds = [type(v) is Literal for v in e.inputs]
    if (kinds.count(True) != 1 or e.inputs[kinds.index(False)].aval.shape != o.shape
            or np.asarray(e.inputs[kinds.index(True)].value).dtype != o.dtype):
        return None
    return kinds.index(True)


def _nbytes(v):
    return v.aval.dtype.itemsize * math.prod(v.aval.shape)


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

    Besides one call per equation, the lowering

    * hands a ufunc (or ``select_n``, whose impl broadcasts alike) a ``broadcast_in_dim``
      operand unbroadcast (NumPy broadcasts it the same way, through the same stride-0
      loop) when another operand has the full shape, and drops the broadcast when
      nothing else reads it;
    * passes the scalar of a mid-sized ``maximum``/``minimum`` as a shared full-size
      constant (``_FULL_OPERAND_UFUNCS``: NumPy's SIMD loop needs two arrays);
    * computes an equation of literals only (``iota``, index arithmetic, a small
      broadcast of a literal) once, at compile time, with the same function;
    * lets a ufunc write its result into an operand whose buffer dies there (``out=``):
      the operand must be a fresh buffer (a ufunc's, a ``dot_general``'s or a dtype
      conversion's result), not an input, constant or output, read only by ops that
      never return a view of it, with the result's shape and dtype. Jit inputs are
      never written (donated ones are, through ``pool``);
    * runs a tree of elementwise ops over an array of 4 MB or more as one loop over
      cache-sized blocks of rows (``_elementwise_groups``), an elementwise result only
      reduced over trailing axes likewise (``_fused_reduce``), and the max/min
      derivative weights as one helper (scaling the cotangent when that is their use).

    ``pool``: a ``_PoolPlan`` to fill (top level only): a large result of a function
    taking ``out=`` that is not written into a dying operand goes into a scratch slot
    (``_ms[slot]``) when it never escapes, or into its output ring (``_mo[ring]``)
    when it is an output (see ``fnx.backends.buffers``)."""
    bind_global = _binder(glb)

    def ref(v):
        if type(v) is Literal:  # a 0-d array: NumPy's scalar kernels can round differently
            return bind_global("lit", np.asarray(v.value))
        return names[v]

    producer = {}
    for i, e in enumerate(ir.eqns):
        for v in e.outputs:
            producer[v] = i
    keep = set(ir.outvars) | set(ir.constvars)

    # A ``transpose`` that is the only use of a specializable primitive's result is
    # computed by that primitive (``numpy_specialize(..., permutation)``): same values,
    # laid out for the consumer, no intermediate.
    uses0, readers0 = {}, {}
    for j, e in enumerate(ir.eqns):
        for v in e.inputs:
            if type(v) is not Literal:
                uses0[v] = uses0.get(v, 0) + 1
                readers0.setdefault(v, []).append(j)
    for v in ir.outvars:
        if type(v) is not Literal:
            uses0[v] = uses0.get(v, 0) + 1
    fused_into, skip = {}, set()
    for i, e in enumerate(ir.eqns):
        if e.prim.name == "transpose" and len(e.inputs) == 1 and type(e.inputs[0]) is not Literal:
            j = producer.get(e.inputs[0])
            if (j is not None and uses0[e.inputs[0]] == 1 and j not in fused_into
                    and getattr(ir.eqns[j].prim, "numpy_specialize", None) is not None
                    and not ir.eqns[j].prim.multiple_results):
                fused_into[j] = e
                skip.add(i)

    # max/min derivative weights: one helper call instead of six ufunc calls; when the
    # weights only scale a cotangent, the helper scales it (no float weights stored).
    special = {}  # eqn index -> (function, inputs)
    for i, e in enumerate(ir.eqns):
        if i in skip:
            continue
        m = _match_tie_weight(ir, i, producer, uses0, keep)
        if m is None or skip.intersection(m[0]):
            continue
        skip.update(m[0])
        w, dtype = e.outputs[0], e.outputs[0].aval.dtype
        j = readers0[w][0] if uses0.get(w) == 1 and w not in keep else None
        c = ir.eqns[j] if j is not None else None
        if (c is not None and c.prim.name == "mul" and j not in skip
                and c.outputs[0].aval == w.aval
                and all(type(v) is not Literal and v.aval == w.aval for v in c.inputs)):
            ct = c.inputs[1] if c.inputs[0] is w else c.inputs[0]
            skip.add(i)
            special[j] = (_helper(_scale_by_tie_weight, dtype), [ct] + list(m[1]),
                          "scale_by_tie_weight")
        else:
            special[i] = (_helper(_tie_weight, dtype), list(m[1]), "tie_weight")

    # ``logistic`` over many floats: its impl's np.where as a blend of bits; an int32
    # ``select_n``'s np.choose likewise.
    for i, e in enumerate(ir.eqns):
        if (i not in skip and i not in special and e.prim.name == "logistic"
                and type(e.inputs[0]) is not Literal
                and e.outputs[0].aval.dtype.kind == "f"
                and e.outputs[0].aval.dtype.itemsize in _BLEND_UINT
                and math.prod(e.outputs[0].aval.shape) >= _LOGISTIC_MIN_SIZE):
            special[i] = (_logistic, list(e.inputs), "logistic")
        elif (i not in skip and i not in special and e.prim.name == "select_n"
                and len(e.inputs) > 2 and e.inputs[0].aval.dtype == np.int32
                and e.outputs[0].aval.dtype.itemsize in _BLEND_UINT
                and all(type(v) is not Literal and v.aval.shape == e.outputs[0].aval.shape
                        for v in e.inputs)
                and math.prod(e.outputs[0].aval.shape) >= _LOGISTIC_MIN_SIZE):
            special[i] = (_select_int, list(e.inputs), "select_int")

    # An elementwise result only reduced (over trailing axes): computed and reduced a few
    # rows at a time, never materialized in full.
    for j, e in enumerate(ir.eqns):
        if j in skip or j in special:
            continue
        m = _match_fused_reduce(ir, j, producer, uses0, keep)
        if m is not None and m[0] not in skip and m[0] not in special:
            skip.add(m[0])
            special[j] = (m[1], m[2], "fused_" + e.prim.name)

    # Chains of elementwise ops over arrays larger than the cache: one blocked loop.
    if not in_loop:
        for root, members, scalars in _elementwise_groups(ir, skip, special, fused_into,
                                                          uses0, keep, producer, readers0):
            fn, fused_inputs = _fused_elementwise(ir, members, {"np": np}, scalars)
            skip.update(members[:-1])
            special[root] = (fn, fused_inputs, "fused_elementwise")
        # broadcast scalars now read only as literals by blocked loops: not emitted
        for i, e in enumerate(ir.eqns):
            if (i not in skip and e.prim.name == "broadcast_in_dim"
                    and type(e.inputs[0]) is Literal and e.outputs[0] not in keep
                    and readers0.get(e.outputs[0])
                    and all(j in skip for j in readers0[e.outputs[0]])):
                skip.add(i)

    # Ufunc operands that are broadcasts (and those of primitives whose impl broadcasts
    # like a ufunc, ``numpy_broadcasts``): read the broadcast's operand instead.
    unbroadcast = {}  # (eqn index, input position) -> (operand, reshape or None)
    for i, e in enumerate(ir.eqns):
        if (i in skip or i in special or len(e.outputs) != 1
                or not (_is_ufunc_eqn(e) or getattr(e.prim, "numpy_broadcasts", False))):
            continue
        shape = e.outputs[0].aval.shape
        full = [type(v) is not Literal and v.aval.shape == shape for v in e.inputs]
        for k, v in enumerate(e.inputs):
            j = producer.get(v) if type(v) is not Literal else None
            if (j is None or j in skip or ir.eqns[j].prim.name != "broadcast_in_dim"
                    or not full[k] or sum(full) < 2):
                continue
            unbroadcast[(i, k)] = _numpy_broadcastable(ir.eqns[j])
            full[k] = False

    def inputs_of(i, e):
        if i in special:
            return special[i][1]
        return [unbroadcast[(i, k)][0] if (i, k) in unbroadcast else v
                for k, v in enumerate(e.inputs)]

    # Uses after the rewrite: broadcasts nobody reads any more are not emitted.
    uses = {}
    for i, e in enumerate(ir.eqns):
        if i not in skip:
            for v in inputs_of(i, e):
                if type(v) is not Literal:
                    uses[v] = uses.get(v, 0) + 1
    for v in ir.outvars:
        if type(v) is not Literal:
            uses[v] = uses.get(v, 0) + 1
    for i in reversed(range(len(ir.eqns))):
        e = ir.eqns[i]
        if (i not in skip and e.prim.name == "broadcast_in_dim" and uses.get(e.outputs[0], 0) == 0
                and any(ir.eqns[j].inputs[k] is e.outputs[0] for j, k in unbroadcast)):
            skip.add(i)
            x = e.inputs[0]
            if type(x) is not Literal:
                uses[x] -= 1
    last_use, readers = {}, {}
    for i, e in enumerate(ir.eqns):
        if i in skip:
            continue
        for v in inputs_of(i, e):
            if type(v) is not Literal:
                last_use[v] = i
                readers.setdefault(v, []).append(i)

    def never_aliases(i, v):
        """Eqn ``i`` reading ``v`` never returns (a view of) ``v``'s buffer."""
        e = ir.eqns[i]
        if i in special or _is_ufunc_eqn(e) or e.prim.name in _NEVER_ALIAS:
            return True
        return e.prim.name == "convert_element_type" and v.aval.dtype != e.outputs[0].aval.dtype

    out_into = out_into or {}

    def foldable(i, e, constant):
        """Eqn ``i`` may be computed at compile time (its inputs are literals or
        ``constant``)."""
        if not e.outputs or has_effects(e):  # a callback runs at every call
            return False
        o = e.outputs[0]
        return (not in_loop and not e.prim.multiple_results and i not in fused_into
                and o not in keep and o not in out_into
                and all(type(v) is Literal or v in constant for v in inputs_of(i, e))
                and not any(sub_irs(e.params)) and _nbytes(o) <= _FOLD_MAX_BYTES)

    # Donated inputs (``pool.donors``): the last eqn reading each one's buffer, through
    # the input or any view of it; None when a view of it is an output (it escapes).
    free_after, sharing = {}, {}
    if pool is not None and pool.donors:
        sharing = {d: {d} for d in pool.donors}
        for i, e in enumerate(ir.eqns):
            if i in skip or _fresh_result(e) or i in special or e.prim.name in _NEVER_ALIAS:
                continue
            for vs in sharing.values():
                if any(v in vs for v in inputs_of(i, e) if type(v) is not Literal):
                    vs.update(e.outputs)
        for d, vs in sharing.items():
            if not vs & keep:
                free_after[d] = max(last_use.get(v, -1) for v in vs)

    # ``in_place[i]``: the dying operand eqn ``i`` writes its result into (see above;
    # never a value computed at compile time). ``into_donor[i]``: the donated operand
    # whose buffer output ``i`` takes over (its last reader: eqn ``i`` itself).
    in_place, into_donor, owned, maybe_folded = {}, {}, set(), set()
    for i, e in enumerate(ir.eqns):
        if i in skip or not e.outputs:
            continue
        if foldable(i, e, maybe_folded):
            maybe_folded.add(e.outputs[0])
            continue
        o = e.outputs[0] if i not in fused_into else fused_into[i].outputs[0]
        elementwise = (_is_ufunc_eqn(e) and i not in special) \
            or (i in special and special[i][2] in _IN_PLACE_HELPERS)
        if not in_loop and elementwise and len(e.outputs) == 1 and o not in out_into:
            operands = inputs_of(i, e)
            candidates = operands if i not in special or special[i][2] in _ANY_OPERAND \
                else operands[:1]
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
                        and all(never_aliases(r, v) for r in readers[v])):
                    in_place[i] = v
                    break
        if _fresh_result(e) or (i in fused_into and o.aval.shape) or i in special:
            owned.add(o)
    # A buffer written in place is passed along a chain of vars; where the chain ends
    # decides whether its first result may go into scratch or must go into a ring.
    passed_to = {v: ir.eqns[i].outputs[0] for i, v in in_place.items()}

    def chain_end(v):
        while v in passed_to:
            v = passed_to[v]
        return v

    body, quiet = [], False
    written = set()
    folded = set()
    full_operands = {}  # (shape, dtype, value bytes) -> the bound constant array
    for i, e in enumerate(ir.eqns):
        if i in skip:
            continue
        prim = e.prim
        ins_vars = inputs_of(i, e)
        ins_list = []
        for k, v in enumerate(ins_vars):
            r = ref(v)
            if (i, k) in unbroadcast and unbroadcast[(i, k)][1] is not None:
                r = f"{r}.reshape({unbroadcast[(i, k)][1]!r})"
            ins_list.append(r)
        ufunc = _eqn_ufunc(e)
        k = _full_operand_literal(e, ufunc) if i not in special else None
        if k is not None:
            lit, o = e.inputs[k], e.outputs[0].aval
            key = (o.shape, o.dtype, np.asarray(lit.value, o.dtype).tobytes())
            if key not in full_operands:
                full = np.full(o.shape, lit.value, o.dtype)
                full.flags.writeable = False
                full_operands[key] = bind_global("full", full)
            ins_list[k] = full_operands[key]
        ins = ", ".join(ins_list)
        specialize = getattr(prim, "numpy_specialize", None)
        outputs = e.outputs
        fn_obj = None  # the function called, when it may take ``out=``
        if i in special:
            fn_obj, ufunc = special[i][0], None
            fn = bind_global(special[i][2], fn_obj)
            quiet = True
        elif ufunc is not None:
            fn_obj = ufunc
            fn = bind_global(ufunc.__name__, ufunc)
            # a stand-in ufunc (``div``'s ``true_divide``) runs quiet, as the impl does
            quiet |= hasattr(prim.impl, "raw") or ufunc is not getattr(prim, "ufunc", None)
        elif specialize is not None:
            # A function for these avals (e.g. dot_general's plan), the same one eager
            # calls pick, so jit stays bitwise equal to eager.
            consumer = fused_into.get(i)
            perm = None if consumer is None else tuple(consumer.params["permutation"])
            if consumer is not None:
                outputs = consumer.outputs
            fn_obj = specialize([v.aval for v in e.inputs], e.params, perm)
            fn = bind_global(prim.name, fn_obj)
            quiet |= hasattr(prim.impl, "raw")
        elif (prim.numpy_codegen is not None and (expr := prim.numpy_codegen(
                [ref(v) for v in e.inputs], e.params, bind_global,
                [v.aval for v in e.inputs], [v.aval for v in e.outputs])) is not None):
            fn = None
            quiet |= hasattr(prim.impl, "raw")
        else:
            impl = prim.impl
            if hasattr(impl, "raw"):  # the whole function runs in the quiet state
                impl, quiet = impl.raw, True
            impl = functools.partial(impl, **e.params) if e.params else impl
            fn = bind_global(prim.name, impl)
        call = f"{fn}({ins})" if fn is not None else expr
        if foldable(i, e, folded):
            value = _fold(call, glb)
            if value is not None:
                names[outputs[0]] = bind_global("k", value)
                folded.add(outputs[0])
                continue
        for v in outputs:
            names[v] = next(fresh)
        outs = ", ".join(names[v] for v in outputs)
        if prim.multiple_results:
            outs = outs + ("," if len(outputs) == 1 else "")
        target = out_into.get(outputs[0]) if (ufunc is not None
                                               and len(outputs) == 1) else None
        if target is not None:
            written.add(outputs[0])
        elif i in into_donor:
            target = f"_mo[{pool.ring(outputs[0], donor=into_donor[i])}]"
        elif i in in_place:
            v = in_place[i]
            target = names[v]
            if pool is not None and v in pool.slot_of:
                pool.slot_of[outputs[0]] = pool.slot_of.pop(v)
        elif (pool is not None and len(outputs) == 1 and fn_obj is not None
                and _takes_out(fn_obj) and outputs[0] not in out_into
                and _nbytes(outputs[0]) >= buffers.MIN_BYTES):
            end = chain_end(outputs[0])
            if end in keep:  # the buffer (after the ops writing it in place) is returned
                target = f"_mo[{pool.ring(end, pool.dead_donor(end, i, free_after))}]"
            elif all(never_aliases(r, end) for r in readers.get(end, ())):
                slot = pool.scratch_slot(outputs[0])
                target = None if slot is None else f"_ms[{slot}]"
        if target is not None:
            body.append(f"{outs} = {fn}({ins}, out={target})")
        elif not outputs:  # an effect only (a debug callback)
            body.append(call)
        else:
            body.append(f"{outs} = {call}")
        if in_loop:
            continue
        dead_vars = [v for v in dict.fromkeys(ins_vars)
                     if type(v) is not Literal and v not in folded and last_use.get(v) == i
                     and v not in keep]
        dead_vars += [v for v in outputs if v not in last_use and v not in keep]
        if pool is not None:
            for v in dead_vars:
                pool.release(v)
        if dead_vars:
            body.append(f"del {', '.join(names[v] for v in dead_vars)}")
    return body, quiet, ref, written


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
    if _rules._extobj_contextvar is not None:
        glb["_fp_state"], glb["_fp_ignore"] = _rules._extobj_contextvar, _rules._IGNORE_ALL
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
        names[v] = _binder(glb)("const", c._value if hasattr(c, "_value") else c)
    args = []
    for v in ir.invars:
        names[v] = next(fresh)
        args.append(names[v])
    pool = _PoolPlan({ir.invars[k]: j for j, k in enumerate(donated)})
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
