"""Vectorization: ``fnx.vmap``.

A ``BatchTrace`` carries values with a batch dimension (or ``None`` when a
value does not vary over the batch). Each primitive's ``batch`` rule turns a
call on batched operands into one call of a (usually the same) primitive on
whole batches; rules see the batch dimension moved to axis 0. Values of
enclosing traces are unbatched constants, so nested vmaps stay separate.
"""
from __future__ import annotations

from .. import tree_util
from ..core.array import Array, Tracer, to_array
from ..core.trace import Trace, get_trace, parent_context, trace_context
from ..errors import MissingRuleError


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim):
        from ..core.primitive import ShapeDtypeStruct
        shape = tuple(val.shape)
        if bdim is not None:
            shape = shape[:bdim] + shape[bdim + 1:]
        super().__init__(trace, ShapeDtypeStruct(shape, val.dtype, val.weak_type))
        self.val = val
        self.bdim = bdim


def move_to_front(x, bdim):
    from .. import lax
    if bdim is None or bdim == 0:
        return x
    perm = [bdim] + [d for d in range(x.ndim) if d != bdim]
    return lax.transpose(x, perm)


class BatchTrace(Trace):
    name = "vmap"

    def __init__(self, parent, size):
        self.parent = parent
        self.size = size

    def lift(self, x, prim_name):
        if isinstance(x, BatchTracer) and x._trace is self:
            return move_to_front(x.val, x.bdim), (None if x.bdim is None else 0)
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x, prim_name)
        return x, None

    def process_primitive(self, prim, args, params):
        with parent_context(self):
            vals, dims = zip(*[self.lift(a, prim.name) for a in args]) if args else ((), ())
            if all(d is None for d in dims):
                return prim.bind(*vals, **params)
            if prim.batch is None:
                raise MissingRuleError(
                    f"{prim.name} has no batching rule, so it cannot be used under vmap yet.")
            out, out_dims = prim.batch(list(vals), list(dims), self.size, **params)
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]
        return BatchTracer(self, out, out_dims)


def _broadcast_prefix(prefix, tree):
    """Leaves of ``prefix`` repeated over the subtrees of ``tree`` they stand for."""
    full = tree_util.tree_unflatten(tree, [object()] * tree.num_leaves)
    out = []

    def rec(p, sub):
        if isinstance(p, (int, type(None))):
            out.extend([p] * len(tree_util.tree_leaves(sub)))
            return
        p_leaves, p_tree = tree_util.tree_flatten(p, is_leaf=lambda v: v is None)
        subs = p_tree.flatten_up_to(sub)
        for pl, s in zip(p_leaves, subs):
            rec(pl, s)

    rec(prefix, full)
    return out


def _size_mismatch(args, leaves, axes, axis_size):
    """Which mapped argument has which batch size (the error of mismatched in_axes)."""
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(args)]
    lines = [f"  args{p}: axis {a} of shape {tuple(x.shape)} has size {x.shape[a]}"
             for p, x, a in zip(paths, leaves, axes) if a is not None]
    if axis_size is not None:
        lines.append(f"  axis_size={axis_size}")
    return ("vmap: the mapped axes have different sizes; every mapped argument must have "
            "the same batch size (use in_axes=None for an argument that is not batched):\n"
            + "\n".join(lines))


def vmap(fun, in_axes=0, out_axes=0, axis_size=None):
    """Vectorize ``fun`` over the ``in_axes`` of its arguments (pytrees of ints/None)."""
    def batched(*args):
        leaves, tree = tree_util.tree_flatten(args)
        if isinstance(in_axes, (int, type(None))):
            axes = [in_axes] * tree.num_leaves
        else:
            try:
                axes = _broadcast_prefix(tuple(in_axes) if isinstance(in_axes, list)
                                         else in_axes, tree)
            except ValueError as e:
                raise ValueError(f"vmap: in_axes does not match the arguments' structure: "
                                 f"{e}") from None
        leaves = [to_array(x) for x in leaves]
        sizes = set()
        norm = []
        for x, a in zip(leaves, axes):
            if a is None:
                norm.append(None)
                continue
            if not -x.ndim <= a < x.ndim:
                raise ValueError(f"vmap: in_axes {a} is out of range for an argument of "
                                 f"shape {tuple(x.shape)}")
            a %= x.ndim
            norm.append(a)
            sizes.add(x.shape[a])
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) != 1:
            raise ValueError(_size_mismatch(args, leaves, norm, axis_size) if sizes
                             else "vmap: no argument is mapped; give axis_size")
        size = sizes.pop()
        trace = BatchTrace(get_trace(), size)
        with trace_context(trace):
            ins = [BatchTracer(trace, x, a) if a is not None else x for x, a in zip(leaves, norm)]
            out = fun(*tree_util.tree_unflatten(tree, ins))
            out_leaves, out_tree = tree_util.tree_flatten(out)
            lifted = [trace.lift(o if isinstance(o, Array) else to_array(o), "vmap output")
                      for o in out_leaves]
        oaxes = [out_axes] * len(lifted) if isinstance(out_axes, (int, type(None))) else \
            _broadcast_prefix(out_axes, out_tree)
        results = []
        for (v, d), oa in zip(lifted, oaxes):
            from .. import lax
            if d is None:
                if oa is None:
                    results.append(v)
                    continue
                v = lax.broadcast_in_dim(v, (size,) + tuple(v.shape),
                                         tuple(range(1, 1 + v.ndim)))
                d = 0
            if oa is None:
                raise ValueError("vmap: out_axes=None for an output that varies over the batch")
            oa %= v.ndim
            if oa != d:
                perm = [i for i in range(v.ndim) if i != d]
                perm.insert(oa, d)
                v = lax.transpose(v, perm)
            results.append(v)
        return tree_util.tree_unflatten(out_tree, results)

    return batched


# --- rule constructors ------------------------------------------------------------------------

def _full(x, d, size, shape):
    """``x`` (batched at 0 when d == 0) as an array of shape (size,) + shape."""
    from .. import lax
    target = (size,) + tuple(shape)
    if d is None:
        return lax.broadcast_in_dim(x, target, tuple(range(1 + len(shape) - x.ndim,
                                                         1 + len(shape))))
    if tuple(x.shape) == target:
        return x
    return lax.broadcast_in_dim(x, target, (0,) + tuple(range(1 + len(shape) - (x.ndim - 1),
                                                             1 + len(shape))))


def batch_elementwise(prim):
    """Elementwise primitives (rank-0 operands allowed): align every operand, one call."""
    def rule(vals, dims, size, **params):
        shapes = [tuple(v.shape[1:]) if d == 0 else tuple(v.shape) for v, d in zip(vals, dims)]
        out_shape = max(shapes, key=len)
        args = []
        for v, d, s in zip(vals, dims, shapes):
            if d is None and s == () and prim.name not in ("select_n", "clamp"):
                args.append(v)  # a rank-0 constant operand stays rank-0
            else:
                args.append(_full(v, d, size, out_shape))
        return prim.bind(*args, **params), 0
    prim.batch = rule


def batch_shifted(prim, shift):
    """Single-operand primitives whose params name dimensions: shift them past the batch."""
    def rule(vals, dims, size, **params):
        return prim.bind(vals[0], *vals[1:], **shift(params, size, vals[0])), 0
    prim.batch = rule


def batch_by_inlining(prim, body):
    """Call primitives: vmap the called function itself (``body(params)`` gives it)."""
    def rule(vals, dims, size, **params):
        outs = vmap(body(params), in_axes=tuple(dims), axis_size=size)(*vals)
        return list(outs), [0] * len(outs)
    prim.batch = rule
