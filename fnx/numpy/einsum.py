"""``einsum`` over ``dot_general``.

Each operand is first reduced on its own: repeated labels become a diagonal
(a gather), size-1 dims that broadcast against a larger dim elsewhere are
squeezed, and labels that appear nowhere else (and not in the output) are
summed. The operands are then contracted pairwise, each pair as ONE
``dot_general`` (labels shared and still needed later are batch dims, shared
and no longer needed are contracting dims), and a final transpose puts the
output labels in order. The pair order is greedy by result size (or left to
right with ``optimize=False``).
"""
from __future__ import annotations

import math
import string

from .. import lax
from ..core import dtypes
from .util import promote

__all__ = ["einsum"]

_LETTERS = string.ascii_letters


def _ellipsis_labels(k, total):
    return [("...", i) for i in range(total - k, total)]


def _parse(subscripts, ndims):
    """Per-operand label lists and the output label list (ellipsis dims as tuples)."""
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->", 1)
        if "->" in out:
            raise ValueError("einsum: subscripts may contain only one '->'")
    else:
        lhs, out = s, None
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"einsum: {len(terms)} operand subscripts in {subscripts!r} but "
                         f"{len(ndims)} operands")
    for t in terms + ([out] if out is not None else []):
        bad = set(t.replace("...", "")) - set(_LETTERS)
        if bad or t.count("...") > 1 or "." in t.replace("...", ""):
            raise ValueError(f"einsum: invalid subscript term {t!r} in {subscripts!r} (use "
                             "letters and at most one '...')")
    ell = []
    for t, nd in zip(terms, ndims):
        n_letters = len(t.replace("...", ""))
        if "..." in t:
            if n_letters > nd:
                raise ValueError(f"einsum: term {t!r} has more labels than its operand's "
                                 f"rank {nd}")
            ell.append(nd - n_letters)
        else:
            if n_letters != nd:
                raise ValueError(f"einsum: term {t!r} has {n_letters} labels for an operand "
                                 f"of rank {nd}")
            ell.append(0)
    total = max(ell, default=0)
    inputs = []
    for t, k in zip(terms, ell):
        head, _, tail = t.partition("...")
        inputs.append(list(head) + (_ellipsis_labels(k, total) if "..." in t else [])
                      + list(tail))
    if out is None:
        counts = {}
        for labels in inputs:
            for l in labels:
                if isinstance(l, str):
                    counts[l] = counts.get(l, 0) + 1
        output = _ellipsis_labels(total, total) + sorted(
            (l for l, c in counts.items() if c == 1), key=_LETTERS.index)
    else:
        if "..." not in out and total:
            raise ValueError("einsum: the operands have '...' dimensions, so the output "
                             f"subscripts {out!r} need a '...' too")
        head, _, tail = out.partition("...")
        output = list(head) + (_ellipsis_labels(total, total) if "..." in out else []) \
            + list(tail)
        seen = {l for labels in inputs for l in labels}
        for l in output:
            if output.count(l) > 1:
                raise ValueError(f"einsum: output label {l!r} appears more than once")
            if l not in seen:
                raise ValueError(f"einsum: output label {l!r} appears in no operand")
    return inputs, output


def _interleaved(args):
    """``(op0, sublist0, op1, sublist1, ..., [out])`` to a subscripts string."""
    ops, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(args) % 2:
        out = ops.pop()
    else:
        out = None

    def term(sub):
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append("...")
            else:
                s = int(s)
                if not 0 <= s < len(_LETTERS):
                    raise ValueError(f"einsum: sublist labels must be ints in [0, 52), got {s}")
                parts.append(_LETTERS[s])
        return "".join(parts)
    spec = ",".join(term(s) for s in subs)
    if out is not None:
        spec += "->" + term(out)
    return spec, ops


def einsum(subscripts, *operands, out=None, optimize=None, precision=None,
           preferred_element_type=None):
    """Einstein summation (explicit or implicit output, ``...``, repeated labels)."""
    if out is not None:  # JAX raises NotImplementedError here
        raise NotImplementedError("einsum: fnx arrays are immutable; out= is not supported")
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved((subscripts,) + operands)
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    lax.canonicalize_precision(precision, "einsum")
    ops = promote("einsum", *operands)
    # as JAX: the operands keep their dtype; dot_general gets preferred_element_type (by
    # default the operands' dtype) and sums convert to it first where it is wider
    explicit = preferred_element_type is not None
    pet = dtypes.canonical(preferred_element_type, "einsum") if explicit else ops[0].dtype
    path = None
    if isinstance(optimize, (list, tuple)):  # an explicit contraction path (einsum_path's)
        path = [tuple(p) for p in optimize if not isinstance(p, str)]
    inputs, output = _parse(subscripts, [o.ndim for o in ops])
    sizes = {}
    for o, labels in zip(ops, inputs):
        for l, d in zip(labels, o.shape):
            if sizes.get(l, 1) == 1:
                sizes[l] = d
            elif d not in (1, sizes[l]):
                raise ValueError(f"einsum: label {_show(l)} has sizes {sizes[l]} and {d} in "
                                 f"{subscripts!r}; they must be equal (or 1, to broadcast)")
    items = [_prepare(o, list(labels), sizes, output, inputs, k, pet)
             for k, (o, labels) in enumerate(zip(ops, inputs))]
    greedy = optimize is not False
    while len(items) > 1:
        if path:
            step = path.pop(0)
            if len(step) > 2:
                raise NotImplementedError(
                    "jax.numpy.einsum does not support simultaneous contraction of 3 or "
                    f"more operands (path step {step})")
            if len(step) < 2:
                continue
            i, j = sorted(int(k) for k in step)
        else:
            i, j = _pick(items, output, sizes) if greedy else (0, 1)
        rest = [it for k, it in enumerate(items) if k not in (i, j)]
        needed = set(output).union(*[set(l) for _, l in rest])
        new = _contract(items[i], items[j], needed, precision, pet)
        items = rest + [new] if path is not None else [new] + rest
    x, labels = items[0]
    extra = [d for d, l in enumerate(labels) if l not in output]
    if extra:
        x = _sum(x, extra, pet)
        labels = [l for l in labels if l in output]
    weak = not explicit and all(o.weak_type for o in ops)  # JAX's result_type's flag
    if x.dtype != pet or x.weak_type != weak:
        x = lax.convert_element_type(x, pet, weak_type=weak)
    missing = [l for l in output if l not in labels]
    if missing:  # only size-1 labels can vanish (all of their dims broadcast)
        x = lax.reshape(x, x.shape + (1,) * len(missing))
        labels = labels + missing
    return lax.transpose(x, [labels.index(l) for l in output])


def _show(label):
    return repr(label) if isinstance(label, str) else "'...'"


def _sum(x, axes, pet):
    """A sum over ``axes`` as JAX's einsum takes it: in ``pet`` where that is wider, an
    ``or`` for bools."""
    if x.dtype != pet and dtypes.can_cast(x.dtype, pet):
        x = lax.convert_element_type(x, pet)
    return lax.reduce_or(x, axes) if x.dtype == bool else lax.reduce_sum(x, axes)


def _prepare(x, labels, sizes, output, inputs, k, pet):
    """One operand: diagonals of repeated labels, broadcast size-1 dims squeezed,
    labels found nowhere else summed."""
    from .manipulation import diagonal
    while len(set(labels)) < len(labels):
        for a, l in enumerate(labels):
            if labels.count(l) > 1:
                b = labels.index(l, a + 1)
                if x.shape[a] != x.shape[b]:
                    raise ValueError(f"einsum: repeated label {_show(l)} of operand {k} has "
                                     f"sizes {x.shape[a]} and {x.shape[b]}")
                x = diagonal(x, 0, a, b)
                labels = [m for c, m in enumerate(labels) if c not in (a, b)] + [l]
                break
    squeeze = [d for d, l in enumerate(labels) if x.shape[d] == 1 and sizes[l] != 1]
    if squeeze:
        x = lax.squeeze(x, squeeze)
        labels = [l for d, l in enumerate(labels) if d not in squeeze]
    elsewhere = set(output).union(*[set(l) for c, l in enumerate(inputs) if c != k])
    only = [d for d, l in enumerate(labels) if l not in elsewhere]
    if only:
        x = _sum(x, only, pet)
        labels = [l for d, l in enumerate(labels) if d not in only]
    return x, labels


def _pick(items, output, sizes):
    """The pair whose contraction gives the smallest result (first such pair)."""
    best = None
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            needed = set(output).union(*[set(l) for k, (_, l) in enumerate(items)
                                         if k not in (i, j)])
            la, lb = items[i][1], items[j][1]
            kept = [l for l in dict.fromkeys(la + lb) if l in needed or
                    (l in la) != (l in lb)]
            cost = math.prod(sizes[l] for l in kept)
            if best is None or cost < best[0]:
                best = (cost, i, j)
    return best[1], best[2]


def _contract(left, right, needed, precision, pet):
    """One pairwise contraction as a single ``dot_general``."""
    (a, la), (b, lb) = left, right
    # labels of one side that nothing else needs were summed in _prepare, except ones
    # that became unneeded only now: sum them first
    for side in (0, 1):
        x, lx = (a, la) if side == 0 else (b, lb)
        other = lb if side == 0 else la
        drop = [d for d, l in enumerate(lx) if l not in needed and l not in other]
        if drop:
            x = _sum(x, drop, pet)
            lx = [l for d, l in enumerate(lx) if d not in drop]
        if side == 0:
            a, la = x, lx
        else:
            b, lb = x, lx
    shared = [l for l in la if l in lb]
    batch = [l for l in shared if l in needed]
    contract = [l for l in shared if l not in needed]
    dn = ((tuple(la.index(l) for l in contract), tuple(lb.index(l) for l in contract)),
          (tuple(la.index(l) for l in batch), tuple(lb.index(l) for l in batch)))
    out = lax.dot_general(a, b, dn, precision, preferred_element_type=pet)
    labels = batch + [l for l in la if l not in shared] + [l for l in lb if l not in shared]
    return out, labels
