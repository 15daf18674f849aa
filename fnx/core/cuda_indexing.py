"""``gather``, ``scatter`` and ``pad`` on the GPU as one generated kernel each.

Their impls index device arrays through CuPy, several kernels each (a clamp per index
operand, the fancy-indexing kernel, a copy; CuPy's ``add.at`` behind a copy and an
out-of-range pad for a scatter): an H100 spent 20 us on the gather and 49 us on the
scatter of a 128-row cross-entropy's label lookup and its gradient, and 7 us on each pad
around them. Here each is one kernel over the result, one thread an element:

* **gather** (``x[spec]``, fnx's NumPy-style index spec with index operands): the result
  element's operand offset, from its coordinates through each spec item -- a static int,
  a slice's start and step, or an index operand read at the broadcast position and
  clamped as JAX does (once wrapped if negative, then into range). Elements are moved,
  never computed on, so their bits are kept (NaN payloads too).
* **scatter** (``set`` and ``add``): each result element starts from the operand and
  applies the updates aimed at it, in the updates' order -- the slice and int items fix
  which update coordinates can reach it, and a loop over the index operands' broadcast
  positions finds the matching ones (out-of-range indices dropped, negative ones wrapped
  once, as the impl does). That is the order NumPy's ``ufunc.at`` and assignment apply
  updates in, so the result equals the CPU's bit for bit (CuPy's atomic ``add.at`` sums
  repeated indices in any order). Its work is the result's size times the number of
  broadcast index positions, so it is used up to ``_SCATTER_WORK`` (a label lookup's
  gradient, ``.at[idx].set``); larger scatters (an embedding table's gradient) run the
  impl.
* **pad** (``lax.pad``, negative and interior padding too): a result element is the
  operand's element it lands on, else the padding value.
"""
from __future__ import annotations

import math

import numpy as np

from .cuda_conv import _strides, grid_stride_kernel, index_type, unflatten_lines
from .cuda_rules import KernelUnsupported, cuda_type

__all__ = ["gather_kernel", "scatter_kernel", "pad_kernel"]

_SCATTER_WORK = 1 << 24  # result elements x index positions, at most


def _data_type(dtype, what):
    """The kernel's C type of ``dtype``'s elements (moved, not computed on: bits kept)."""
    try:
        return cuda_type(dtype)
    except Exception:
        raise KernelUnsupported(f"{what}: no kernel for {np.dtype(dtype).name}") from None


class _Layout:
    """How ``x[spec]`` (``x`` of ``shape``, index operands of ``index_shapes``) maps result
    coordinates to operand coordinates (``fnx.lax.indexing.indexed_shape``'s rules):
    ``items[d]`` per operand dim -- ``("int", v)``, ``("slice", start, step, length,
    result position)`` or ``("adv", operand k, size n)`` -- and ``out`` per result dim --
    ``("new",)``, ``("slice", operand dim)`` or ``("b", j)`` (dim ``j`` of the index
    operands' broadcast shape ``bshape``, which starts at result position ``adv_at``)."""

    def __init__(self, shape, spec, index_shapes):
        has_arrays = any(type(it) is tuple and it[0] == "a" for it in spec)
        pieces, adv_pos, adv_shapes, items, dim = [], [], [], [], 0
        for pos, it in enumerate(spec):
            if it is None:
                pieces.append(("new",))
                continue
            n = shape[dim]
            if type(it) is int:
                items.append(["int", it])
                if has_arrays:
                    adv_pos.append(pos)
                    adv_shapes.append(())
                    pieces.append("adv")
            elif it[0] == "s":
                start, stop, step = slice(*it[1:]).indices(n)
                items.append(["slice", start, step, len(range(start, stop, step)), None])
                pieces.append(("slice", dim))
            else:
                items.append(["adv", it[1], n])
                adv_pos.append(pos)
                adv_shapes.append(tuple(index_shapes[it[1]]))
                pieces.append("adv")
            dim += 1
        self.bshape = tuple(np.broadcast_shapes(*adv_shapes)) if adv_pos else ()
        b = [("b", j) for j in range(len(self.bshape))]
        if not adv_pos:
            out = list(pieces)
        elif adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)):
            first = pieces.index("adv")
            out = pieces[:first] + b + [p for p in pieces[first:] if p != "adv"]
        else:
            out = b + [p for p in pieces if p != "adv"]
        self.adv_at = out.index(("b", 0)) if b else None
        for p, o in enumerate(out):
            if o[0] == "slice":
                items[o[1]][4] = p
        self.items, self.out = items, out
        self.index_shapes = [tuple(s) for s in index_shapes]

    def index_offset(self, k, coord):
        """C expression: the offset of index operand ``k``'s element at the broadcast
        position whose dim ``j`` coordinate is ``coord(j)``."""
        sh = self.index_shapes[k]
        st = _strides(sh)
        lead = len(self.bshape) - len(sh)
        terms = [f"{coord(lead + j)} * {st[j]}" for j in range(len(sh)) if sh[j] != 1]
        return " + ".join(terms) or "0"


def _read_index(dtype, ptr, off):
    """C expression: an index operand's element as a signed 64-bit value (unsigned ones
    clamped at 2**63 - 1, which is out of every range)."""
    if np.dtype(dtype).kind == "u" and np.dtype(dtype).itemsize == 8:
        return f"(long long)min({ptr}[{off}], (unsigned long long)9223372036854775807ULL)"
    return f"(long long){ptr}[{off}]"


def _index_params(index_avals):
    return "".join(f", const {cuda_type(a.dtype)}* __restrict__ i{k}"
                   for k, a in enumerate(index_avals))


def gather_kernel(in_avals, out_avals, *, spec):
    """The ``EqnKernel`` of ``gather`` (the ``"cuda_kernel"`` rule)."""
    x, *idx = in_avals
    (out,) = out_avals
    n = math.prod(out.shape)
    if n == 0 or math.prod(x.shape) == 0:
        raise KernelUnsupported("gather: an empty result needs no kernel")
    T = _data_type(x.dtype, "gather")
    lay = _Layout(x.shape, spec, [a.shape for a in idx])
    I = index_type(n, math.prod(x.shape), *(math.prod(a.shape) for a in idx))  # noqa: E741
    xs = _strides(x.shape)
    lines = unflatten_lines(I, "i", out.shape, "o")
    terms = []
    for d, item in enumerate(lay.items):
        if item[0] == "int":
            terms.append(f"{item[1]}LL * {xs[d]}")
        elif item[0] == "slice":
            terms.append(f"({item[1]}LL + (long long)o{item[4]} * {item[2]}) * {xs[d]}")
        else:
            _, k, size = item
            off = lay.index_offset(k, lambda j: f"o{lay.adv_at + j}")
            lines.append(f"long long v{d} = {_read_index(idx[k].dtype, f'i{k}', off)};")
            lines.append(f"v{d} = v{d} < -{size}LL ? -{size}LL : v{d} > {size - 1}LL ? "
                         f"{size - 1}LL : v{d};")
            lines.append(f"if (v{d} < 0) v{d} += {size};")
            terms.append(f"v{d} * {xs[d]}")
    lines.append(f"out[i] = x[{' + '.join(terms) or '0'}];")
    return grid_stride_kernel(
        "gather", f"gather {tuple(x.shape)} -> {tuple(out.shape)}: spec {spec!r}",
        f"const {T}* __restrict__ x{_index_params(idx)}, {T}* __restrict__ out", I, "i", n,
        lines)


_ADD_TYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64")


def scatter_kernel(in_avals, out_avals, *, spec, mode):
    """The ``EqnKernel`` of ``scatter`` in modes ``set`` and ``add`` (the ``"cuda_kernel"``
    rule); ``KernelUnsupported`` for the other modes, ``add`` of other dtypes, and
    scatters of more than ``_SCATTER_WORK`` element-position pairs."""
    x, upd, *idx = in_avals
    (out,) = out_avals
    n = math.prod(x.shape)
    if n == 0 or math.prod(upd.shape) == 0:
        raise KernelUnsupported("scatter: nothing to scatter needs no kernel")
    if mode == "set":
        T = _data_type(x.dtype, "scatter")
        combine = "acc = u;"
    elif mode == "add" and np.dtype(x.dtype).name in _ADD_TYPES:
        T = cuda_type(x.dtype)
        combine = "acc = acc + u;"
    else:
        raise KernelUnsupported(f"scatter: no kernel for mode {mode!r} of "
                                f"{np.dtype(x.dtype).name}")
    lay = _Layout(x.shape, spec, [a.shape for a in idx])
    B = math.prod(lay.bshape)
    if n * B > _SCATTER_WORK:
        raise KernelUnsupported(f"scatter: {n} elements x {B} index positions: the impl's "
                                "atomics do that better")
    I = index_type(n, math.prod(upd.shape), *(math.prod(a.shape) for a in idx))  # noqa: E741
    us = _strides(upd.shape)
    lines = unflatten_lines(I, "e", x.shape, "c")
    lines.append(f"{T} acc = x[e];")
    # the update coordinates a slice or int item allows: none, or exactly one per dim
    cond = []
    for d, item in enumerate(lay.items):
        if item[0] == "int":
            cond.append(f"c{d} == {item[1]}")
        elif item[0] == "slice":
            _, start, step, length, _ = item
            t = f"(c{d} - {start})" if step > 0 else f"({start} - c{d})"
            s = abs(step)
            lines.append(f"const {I} t{d} = {t};")
            cond.append(f"t{d} >= 0 && t{d} % {s} == 0 && t{d} / {s} < {length}")
    uterms = []
    for p, o in enumerate(lay.out):
        if o[0] == "slice":
            uterms.append(f"j{o[1]} * {us[p]}")
        elif o[0] == "b":
            uterms.append(f"bb{o[1]} * {us[p]}")
    update = [f"const {T} u = upd[{' + '.join(uterms) or '0'}];", combine]
    adv = [(d, item) for d, item in enumerate(lay.items) if item[0] == "adv"]
    if adv:  # every broadcast index position, in order, whose indices name this element
        loop = unflatten_lines(I, "b", lay.bshape, "bb")
        match = []
        for d, (_, k, size) in adv:
            off = lay.index_offset(k, lambda j: f"bb{j}")
            loop.append(f"long long v{d} = {_read_index(idx[k].dtype, f'i{k}', off)};")
            loop.append(f"if (v{d} < 0) v{d} += {size};")  # -n..-1 wrap; below -n stays < 0
            match.append(f"v{d} == (long long)c{d}")
        loop += [f"if ({' && '.join(match)}) {{", *("    " + ln for ln in update), "}"]
        update = [f"for ({I} b = 0; b < {B}; ++b) {{", *("    " + ln for ln in loop), "}"]
    slices = [f"const {I} j{d} = t{d} / {abs(item[2])};"
              for d, item in enumerate(lay.items) if item[0] == "slice"]
    lines.append(f"if ({' && '.join(cond) or 'true'}) {{")
    lines += ["    " + ln for ln in slices + update]
    lines.append("}")
    lines.append("out[e] = acc;")
    return grid_stride_kernel(
        "scatter", f"scatter ({mode}) of {tuple(upd.shape)} into {tuple(x.shape)}: spec {spec!r}",
        f"const {T}* __restrict__ x, const {T}* __restrict__ upd{_index_params(idx)}, "
        f"{T}* __restrict__ out", I, "e", n, lines)


def pad_kernel(in_avals, out_avals, *, padding_config):
    """The ``EqnKernel`` of ``pad`` (the ``"cuda_kernel"`` rule)."""
    x, _ = in_avals
    (out,) = out_avals
    n = math.prod(out.shape)
    if n == 0:
        raise KernelUnsupported("pad: an empty result needs no kernel")
    T = _data_type(x.dtype, "pad")
    I = index_type(n, math.prod(x.shape))  # noqa: E741
    xs = _strides(x.shape)
    lines = unflatten_lines(I, "i", out.shape, "c")
    cond, terms = [], []
    for d, (lo, _, interior) in enumerate(padding_config):
        s = interior + 1
        lines.append(f"const {I} t{d} = c{d} - ({lo});")
        cond.append(f"t{d} >= 0 && t{d} % {s} == 0 && t{d} / {s} < {x.shape[d]}")
        terms.append(f"(t{d} / {s}) * {xs[d]}")
    inside = " && ".join(cond) or "true"
    lines.append(f"out[i] = ({inside}) ? x[{' + '.join(terms) or '0'}] : pv[0];")
    return grid_stride_kernel(
        "pad", f"pad {tuple(x.shape)} -> {tuple(out.shape)}: "
        f"{tuple(map(tuple, padding_config))!r}",
        f"const {T}* __restrict__ x, const {T}* __restrict__ pv, {T}* __restrict__ out", I,
        "i", n, lines)
