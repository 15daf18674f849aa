"""Vectorization: ``fnx.vmap``.

A ``BatchTrace`` carries values with a batch dimension (or ``None`` when a
value does not vary over the batch). Each primitive's ``batch`` rule turns a
call on batched operands into one call of a (usually the same) primitive on
whole batches; rules see the batch dimension moved to axis 0. Values of
enclosing traces are unbatched constants, so nested vmaps stay separate.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools

import numpy as np

from .. import tree_util
from ..core import ops
from ..core.array import Array, Tracer, to_array
from ..core.axis_env import axis_frame
from ..core.primitive import ShapeDtypeStruct
from ..core.trace import Trace, get_trace, parent_context, trace_context
from ..errors import AxesSpecError, MissingRuleError


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim")

    def __init__(self, trace, val, bdim):
        shape = tuple(val.shape)
        if bdim is not None:
            shape = shape[:bdim] + shape[bdim + 1:]
        super().__init__(trace, ShapeDtypeStruct(shape, val.dtype, val.weak_type))
        self.val = val
        self.bdim = bdim


def move_to_front(x, bdim):
    if bdim is None or bdim == 0:
        return x
    perm = [bdim] + [d for d in range(x.ndim) if d != bdim]
    return ops.transpose(x, perm)


# The axis name of the batch trace whose batching rule runs now: rules that vmap a body
# again (call primitives, control flow, custom rules) give it to their vmap, so the
# collectives inside still see their named axis.
_BATCHING_AXIS = contextvars.ContextVar("fnx_batching_axis", default=None)


def batching_axis_name():
    """The axis name of the vmap whose batching rule is running (None: unnamed)."""
    return _BATCHING_AXIS.get()


class BatchTrace(Trace):
    name = "vmap"

    def __init__(self, parent, size, axis_name=None):
        self.parent = parent
        self.size = size
        self.axis_name = axis_name

    def lift(self, x, prim_name):
        if isinstance(x, BatchTracer) and x._trace is self:
            return move_to_front(x.val, x.bdim), (None if x.bdim is None else 0)
        if isinstance(x, Tracer):
            self.check_foreign_tracer(x, prim_name)
        return x, None

    def process_primitive(self, prim, args, params):
        with parent_context(self):
            vals, dims = zip(*[self.lift(a, prim.name) for a in args]) if args else ((), ())
            if prim.named_batch is not None:   # a collective: over this axis, or another
                mine = self.axis_name is not None and self.axis_name in params["axes"]
                if mine or any(d is not None for d in dims):
                    out, out_dims = prim.named_batch(list(vals), list(dims), self.size,
                                                     self.axis_name if mine else None,
                                                     **params)
                    if prim.multiple_results:
                        return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]
                    return BatchTracer(self, out, out_dims)
            if all(d is None for d in dims) and not (
                    self.axis_name is not None and prim.batch is not None
                    and _uses_axis(params, self.axis_name)):
                return prim.bind(*vals, **params)
            if prim.batch is None:
                raise MissingRuleError(
                    f"{prim.name} has no batching rule, so it cannot be used under vmap yet.")
            token = _BATCHING_AXIS.set(self.axis_name)
            try:
                out, out_dims = prim.batch(list(vals), list(dims), self.size, **params)
            finally:
                _BATCHING_AXIS.reset(token)
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]
        return BatchTracer(self, out, out_dims)


def _uses_axis(params, name):
    """Whether an IR among ``params`` (jit, cond, while, scan) holds a collective or
    ``axis_index`` over the axis ``name``: as JAX, such a call is batched even when none
    of its operands is (``while_loop(lambda x: x < axis_index('i'), ...)``)."""
    from ..core.ir import sub_irs

    def names(ir):
        got = getattr(ir, "_axis_names", None)
        if got is None:
            got = set()
            for e in ir.eqns:
                if e.prim.named_batch is not None:
                    axes = e.params.get("axes", ())
                    got.update(axes if isinstance(axes, (tuple, list)) else (axes,))
                for sub in sub_irs(e.params):
                    got |= names(sub)
            got = frozenset(got)
            try:
                ir._axis_names = got
            except AttributeError:  # pragma: no cover - an IR-like object without a dict
                pass
        return got
    return any(name in names(ir) for ir in sub_irs(params))


# --- in_axes / out_axes: checked once per spec, expanded once per pytree structure ----------

_CACHE_SIZE = 32  # expanded axes kept per vmapped function and argument/output structure


def _is_axis(a):
    return a is None or (isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)))


def _describe_spec_leaf(v):
    return f"{v!r} (a {type(v).__name__})"


def _axes_spec(what, spec):
    """``(single, prefix)``: ``single`` is the one int/None for every leaf (``prefix`` is
    None), else ``prefix`` is ``(leaves, treedef node)`` of the pytree prefix."""
    if _is_axis(spec):
        return (None if spec is None else int(spec)), None
    hint = ("an int, None, or a tuple/list with one entry per positional argument (each "
            "an int, None, or a pytree of those matching that argument)" if what == "in_axes"
            else "an int, None, or a pytree of those that is a prefix of the function's output")
    if what == "in_axes" and not isinstance(spec, (tuple, list)):
        raise AxesSpecError(f"vmap: in_axes must be {hint}; got {_describe_spec_leaf(spec)}")
    if what == "in_axes" and isinstance(spec, list):
        spec = tuple(spec)
    leaves, tree = tree_util.tree_flatten(spec, is_leaf=lambda v: v is None)
    if tree._node is None:  # a single leaf that is not an axis (0.5, "0", an array)
        raise AxesSpecError(f"vmap: {what} must be {hint}; got {_describe_spec_leaf(spec)}")
    for leaf in leaves:
        if not _is_axis(leaf):
            raise AxesSpecError(
                f"vmap: {what} must be {hint}; got {what}={spec!r}, whose leaf "
                f"{_describe_spec_leaf(leaf)} is neither an int nor None")
    return None, ([None if a is None else int(a) for a in leaves], tree._node)


def _child_key(h, aux, i):
    kind = h.kind
    if kind == "namedtuple":
        return f".{h.type._fields[i]}"
    if kind in ("tuple", "list"):
        return f"[{i}]"
    if kind in ("dict", "OrderedDict"):
        return f"[{aux[i]!r}]"
    if kind == "defaultdict":
        return f"[{aux[1][i]!r}]"
    return f"[{i}]"


def _describe_node(node):
    if node is None:
        return "a leaf (an array or scalar)"
    desc = tree_util.node_description(node[0], node[1], len(node[2]))
    return desc if desc == "None" else "a " + desc


def _expand(what, root, pnode, pleaves, node):
    """Each leaf of ``pleaves`` (the prefix ``pnode``'s) once per leaf of the structure
    ``node`` below it; an AxesSpecError naming the path where the structures differ."""
    out = []
    it = iter(pleaves)

    def rec(p, n, path):
        if p is None:  # a prefix leaf: it stands for every leaf below n
            out.extend([next(it)] * tree_util.count_leaves(n))
            return
        h, aux, children = p
        if n is None or n[0] is not h or len(n[2]) != len(children) or n[1] != aux:
            head = ("vmap: in_axes does not match the arguments' structure" if root == "args"
                    else "vmap: out_axes does not match the output's structure")
            if not path and root == "args" and n is not None and n[0] is h:
                raise AxesSpecError(
                    f"{head}: in_axes has {len(children)} "
                    f"{'entry' if len(children) == 1 else 'entries'} but the function was "
                    f"called with {len(n[2])} positional argument{'' if len(n[2]) == 1 else 's'}"
                    "; give one entry per argument (an int, None, or a pytree of those), "
                    "or one int/None for all")
            raise AxesSpecError(
                f"{head}: {what}{path} is {_describe_node(p)}, but {root}{path} is "
                f"{_describe_node(n)} ({what} must be a pytree prefix of the "
                f"{'positional arguments' if root == 'args' else 'output'})")
        for i, (pc, c) in enumerate(zip(children, n[2])):
            rec(pc, c, path + _child_key(h, aux, i))

    rec(pnode, node, "")
    return out


def _axes_for(what, root, single, prefix, cache, tree):
    """The axis of each leaf of ``tree`` (a PyTreeDef) under the spec."""
    if prefix is None:
        return [single] * tree.num_leaves
    axes = cache.get(tree)
    if axes is None:
        axes = _expand(what, root, prefix[1], prefix[0], tree._node)
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[tree] = axes
    return axes


def _leaf_path(tree_value, index):
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(tree_value)]
    return paths[index] if index < len(paths) else f"[leaf {index}]"


def _in_axis_error(args, index, x, a):
    where = "args" + _leaf_path(args, index)
    head = f"vmap: in_axes {a} is out of range for an argument of shape {tuple(x.shape)}"
    if x.ndim == 0:
        return AxesSpecError(
            f"{head}: {where} is a scalar (rank 0, nothing to map over); give it "
            "in_axes=None (the same value for every example), or pass an array with a "
            "batch axis")
    return AxesSpecError(f"{head}: {where} has rank {x.ndim}, so its axis must be in "
                         f"[{-x.ndim}, {x.ndim - 1}]")


def _out_axis_error(out, index, rank, shape, oa):
    where = "output" + _leaf_path(out, index)
    return AxesSpecError(
        f"vmap: out_axes={oa} for {where} is out of range: it has rank {rank} (shape "
        f"{shape}) per example and rank {rank + 1} with the batch axis, so its out_axes must be in "
        f"[{-(rank + 1)}, {rank}] (or None if it does not vary over the batch)")


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


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """Vectorize ``fun`` over the ``in_axes`` of its arguments (pytrees of ints/None).

    ``in_axes`` is an int or None for every argument, or a tuple/list with one entry
    per positional argument, each a pytree prefix of its argument; ``out_axes`` is a
    pytree prefix of the output. Axes may be negative (from the end). A spec that is
    not an int/None pytree, does not match the structure, or names an axis out of
    range raises :class:`fnx.errors.AxesSpecError` (a ValueError and a TypeError).

    ``axis_name`` names the mapped axis for the collectives inside ``fun``
    (``fnx.lax.psum(x, axis_name)``, ``pmean``, ``all_gather``, ``ppermute``,
    ``axis_index``, ...): each sees the batch as the members of a group, as ``pmap``'s
    processes would be. ``spmd_axis_name`` is accepted for JAX's signature and means
    nothing here (no device mesh)."""
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise AxesSpecError(f"vmap: axis_name must be hashable (a string), got "
                                f"{axis_name!r}") from None
    in_single, in_prefix = _axes_spec("in_axes", in_axes)
    out_single, out_prefix = _axes_spec("out_axes", out_axes)
    in_cache, out_cache = {}, {}

    def batched(*args, **kwargs):
        if kwargs:  # as in JAX, keyword arguments are mapped over their leading axis
            return _with_kwargs(fun, in_prefix is None, in_axes, out_axes, axis_name,
                                axis_size, args, kwargs)
        leaves, tree = tree_util.tree_flatten(args)
        axes = _axes_for("in_axes", "args", in_single, in_prefix, in_cache, tree)
        leaves = [to_array(x) for x in leaves]
        sizes = set()
        norm = []
        for i, (x, a) in enumerate(zip(leaves, axes)):
            if a is None:
                norm.append(None)
                continue
            nd = x.ndim
            if not -nd <= a < nd:
                raise _in_axis_error(args, i, x, a)
            a %= nd
            norm.append(a)
            sizes.add(x.shape[a])
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) != 1:
            raise ValueError(_size_mismatch(args, leaves, norm, axis_size) if sizes
                             else "vmap: no argument is mapped; give axis_size")
        size = sizes.pop()
        trace = BatchTrace(get_trace(), size, axis_name)
        frame = (axis_frame(axis_name, size, "vmap", trace) if axis_name is not None
                 else contextlib.nullcontext())
        with frame, trace_context(trace):
            ins = [BatchTracer(trace, x, a) if a is not None else x for x, a in zip(leaves, norm)]
            out = fun(*tree_util.tree_unflatten(tree, ins))
            out_leaves, out_tree = tree_util.tree_flatten(out)
            lifted = [trace.lift(o if isinstance(o, Array) else to_array(o), "vmap output")
                      for o in out_leaves]
        oaxes = _axes_for("out_axes", "output", out_single, out_prefix, out_cache, out_tree)
        results = []
        for i, ((v, d), oa) in enumerate(zip(lifted, oaxes)):
            if d is None:
                if oa is None:
                    results.append(v)
                    continue
                if not -v.ndim - 1 <= oa <= v.ndim:
                    raise _out_axis_error(out, i, v.ndim, tuple(v.shape), oa)
                v = ops.broadcast_in_dim(v, (size,) + tuple(v.shape),
                                         tuple(range(1, 1 + v.ndim)))
                d = 0
            elif oa is None:
                raise AxesSpecError(
                    f"vmap: out_axes is None for output{_leaf_path(out, i)}, but that output "
                    "varies over the batch (it depends on a mapped argument); give it an "
                    "axis, e.g. 0")
            elif not -v.ndim <= oa < v.ndim:
                raise _out_axis_error(out, i, v.ndim - 1, tuple(v.shape[1:]), oa)
            oa %= v.ndim
            if oa != d:
                perm = [k for k in range(v.ndim) if k != d]
                perm.insert(oa, d)
                v = ops.transpose(v, perm)
            results.append(v)
        return tree_util.tree_unflatten(out_tree, results)

    try:
        functools.update_wrapper(batched, fun)
    except (AttributeError, TypeError):  # a callable without a name or a dict
        pass
    return batched


def _with_kwargs(fun, one_axis, in_axes, out_axes, axis_name, axis_size, args, kwargs):
    """``vmap(fun)(*args, **kwargs)``: the keyword arguments become trailing positional
    ones with axis 0 (an error about one names it ``args[n + j]``, in call order)."""
    n, names = len(args), list(kwargs)
    axes = ((in_axes,) * n if one_axis else tuple(in_axes)) + (0,) * len(names)

    def positional(*xs):
        return fun(*xs[:n], **dict(zip(names, xs[n:])))

    return vmap(positional, axes, out_axes, axis_name, axis_size)(*args, *kwargs.values())


# --- rule constructors ------------------------------------------------------------------------

def materialize_batch_axis(x, d, size, shape):
    """``x`` as an array of shape ``(size,) + shape``, the batch axis made explicit: an
    unbatched ``x`` (``d`` None) gets a leading batch axis of ``size``, a batched one has it
    at 0 (``d == 0``); the other dimensions broadcast NumPy-style (trailing-aligned) to
    ``shape``. Batching rules use it to align their operands."""
    target = (size,) + tuple(shape)
    if d is None:
        return ops.broadcast_in_dim(x, target, tuple(range(1 + len(shape) - x.ndim,
                                                         1 + len(shape))))
    if tuple(x.shape) == target:
        return x
    return ops.broadcast_in_dim(x, target, (0,) + tuple(range(1 + len(shape) - (x.ndim - 1),
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
                args.append(materialize_batch_axis(v, d, size, out_shape))
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
        outs = vmap(body(params), in_axes=tuple(dims), axis_name=batching_axis_name(),
                    axis_size=size)(*vals)
        return list(outs), [0] * len(outs)
    prim.batch = rule
