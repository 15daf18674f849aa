"""Control flow, recurrent and attention ONNX operators: If, Loop and Scan onto
``lax.cond``/``while_loop``/``scan``; RNN, GRU and LSTM; sequences and optionals;
Attention and rotary embeddings.

Subgraphs (``If``'s branches, ``Loop``'s and ``Scan``'s bodies, ``SequenceMap``'s) read
the values of the scopes around them. A branch or loop whose shapes are decided by values
(an ``If`` whose branches return different shapes, a ``Loop`` growing a sequence for a
computed trip count) runs only where those values are known: under ``jit`` it raises a
``ConcretizationError`` (which ``fnx.onnx.backend`` answers by running the model eagerly).
"""
from __future__ import annotations

import numpy as np

from ... import lax
from ... import numpy as fnp
from ...errors import ConcretizationError
from ...nn import functions as nnf
from ..graph import OnnxImportError, UnsupportedOnnxOpError, known, np_dtype, op


class NeedsKnownValuesError(UnsupportedOnnxOpError, ConcretizationError):
    """A control-flow operator whose output shapes depend on values that are traced."""


def _a(x):
    return fnp.asarray(x)


def _run_graph(node, name, values, scope):
    g = node.subgraph(name)
    bound = dict(zip(g.inputs, values))
    return g.run(bound, outer=scope)


def _arrays(vals):
    """Subgraph outputs as fnx arrays (sequences as lists of them; None kept)."""
    out = []
    for v in vals:
        if v is None:
            out.append(None)
        elif isinstance(v, (list, tuple)):
            out.append([_a(x) for x in v])
        else:
            out.append(_a(v))
    return out


def _needs_values(node, what):
    return node.error(what + "; run the model eagerly (not under jit), or make the values "
                      "that decide it constants of the model", NeedsKnownValuesError)


def _scalar_bool(x):
    return fnp.reshape(_a(x), ()).astype(bool)


# --- If ----------------------------------------------------------------------------------------

@op("If", scope=True)
def if_(node, cond, scope=None):
    c = known(cond)
    if c is not None:
        branch = "then_branch" if bool(np.asarray(c).reshape(())) else "else_branch"
        return tuple(_run_graph(node, branch, [], scope))

    def branch(name):
        return lambda: tuple(_arrays(_run_graph(node, name, [], scope)))
    try:
        return tuple(lax.cond(_scalar_bool(cond), branch("then_branch"),
                              branch("else_branch")))
    except ConcretizationError:
        raise
    except TypeError as e:
        if "between branches" in str(e) or "pytree structure" in str(e):
            raise _needs_values(node, "its condition is computed while the branches return "
                                "values of different types or shapes "
                                f"({str(e).split(': ', 1)[-1]})") from None
        raise


# --- Loop --------------------------------------------------------------------------------------

def _passthrough_cond(g):
    """Whether the body's condition output is its condition input (through Identity
    nodes), or a constant true: the loop then stops only at the trip count."""
    proto = g.proto
    cond_in = proto.input[1].name
    name = proto.output[0].name
    producers = {o: n for n in proto.node for o in n.output}
    while True:
        if name == cond_in:
            return True
        n = producers.get(name)
        if n is None:
            return False
        if n.op_type == "Identity":
            name = n.input[0]
            continue
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    from onnx import numpy_helper
                    v = numpy_helper.to_array(a.t)
                    return v.size == 1 and bool(v.reshape(()))
        return False


def _is_tensor(v):
    return v is not None and not isinstance(v, (list, tuple))


@op("Loop", scope=True)
def loop(node, M, cond, *carried, scope=None):
    g = node.subgraph("body")
    n_carry = len(carried)
    n_scan = len(g.outputs) - 1 - n_carry
    m_known = known(M)
    c_known = known(cond)
    trip = None if M is None else (int(np.asarray(m_known).reshape(())) if m_known is not None
                                   else None)
    plain = all(_is_tensor(v) for v in carried)
    fixed_cond = _passthrough_cond(g) and (cond is None or (
        c_known is not None and bool(np.asarray(c_known).reshape(()))))

    def body(i, c, vals):
        outs = g.run(dict(zip(g.inputs, [i, c, *vals])), outer=scope)
        return outs[0], list(outs[1:1 + n_carry]), list(outs[1 + n_carry:])

    if cond is not None and c_known is not None and not bool(np.asarray(c_known).reshape(())):
        # the loop never runs; scan outputs are empty
        if n_scan:
            return _loop_python(node, body, 0, True, carried, n_scan, g, scope)
        return tuple(carried)

    if plain and trip is not None and fixed_cond:
        # a fixed trip count: lax.scan (differentiable in reverse mode)
        if trip == 0 and n_scan:
            return _loop_python(node, body, 0, True, carried, n_scan, g, scope)
        true = fnp.asarray(True)

        def step(vals, i):
            _c, new, ys = body(i, true, vals)
            new = [_a(v).astype(_a(o).dtype) for v, o in zip(new, vals)]
            return new, [_a(y) for y in ys]
        try:
            vals, ys = lax.scan(step, [_a(v) for v in carried],
                                fnp.arange(trip, dtype=np.int64), length=trip)
            return tuple(vals) + tuple(ys)
        except Exception as e:  # noqa: BLE001 - re-raised unless the body needs known values
            if not _needs_known(e):
                raise
        # the body needs its iteration number known (a Slice's start): unrolled
        return _loop_python(node, body, trip, True, carried, n_scan, g, scope)

    if plain and not n_scan:
        # a computed condition or trip count: lax.while_loop
        limit = None if M is None else fnp.reshape(_a(M), ()).astype(np.int64)
        c0 = fnp.asarray(True) if cond is None else _scalar_bool(cond)

        def w_cond(state):
            i, c, _vals = state
            return c if limit is None else fnp.logical_and(c, i < limit)

        def w_body(state):
            i, c, vals = state
            c2, new, _ys = body(i, c, vals)
            new = [_a(v).astype(_a(o).dtype) for v, o in zip(new, vals)]
            return i + 1, _scalar_bool(c2), new
        state = (fnp.asarray(0, np.int64), c0, [_a(v) for v in carried])
        try:
            _i, _c, vals = lax.while_loop(w_cond, w_body, state)
            return tuple(vals)
        except Exception as e:  # noqa: BLE001 - re-raised unless the body needs known values
            if not _needs_known(e):
                raise

    # sequences carried, or scan outputs of a computed length: a Python loop over known
    # trip count and condition values
    if M is not None and trip is None:
        raise _needs_values(node, "its trip count is computed and the loop carries sequences "
                            "or stacks scan outputs, so its output shapes depend on it")
    if cond is not None and c_known is None:
        raise _needs_values(node, "its condition is computed and the loop carries sequences "
                            "or stacks scan outputs, so its output shapes depend on it")
    return _loop_python(node, body, trip, True, carried, n_scan, g, scope)


def _needs_known(e):
    """Whether ``e`` says that a value traced inside a loop body had to be known."""
    return isinstance(e, ConcretizationError) or (
        isinstance(e, OnnxImportError) and "must be known" in str(e))


def _loop_python(node, body, trip, c, carried, n_scan, g, scope):
    vals = list(carried)
    scans = [[] for _ in range(n_scan)]
    i = 0
    while (trip is None or i < trip) and c:
        c_out, vals, ys = body(np.asarray(i, np.int64), np.asarray(True), vals)
        for s, y in zip(scans, ys):
            s.append(_a(y))
        ck = known(c_out)
        if ck is None:
            raise _needs_values(node, "its condition is computed inside the loop while the "
                                "loop carries sequences or stacks scan outputs")
        c = bool(np.asarray(ck).reshape(()))
        i += 1
        if trip is None and i > 10_000_000:
            raise node.error("the loop ran 10,000,000 iterations without its condition "
                             "turning false")
    outs = []
    for k, s in enumerate(scans):
        if s:
            outs.append(fnp.stack(s))
        else:
            outs.append(_empty_scan_output(g, 1 + len(vals) + k))
    return tuple(vals) + tuple(outs)


def _empty_scan_output(g, index):
    """An empty stack of a body output, shaped from its declared type."""
    t = g.proto.output[index].type
    if not t.HasField("tensor_type"):
        raise UnsupportedOnnxOpError("a Loop that runs no iteration has scan outputs of an "
                                     "undeclared type")
    tt = t.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim]
    return fnp.zeros((0, *dims), np_dtype(tt.elem_type))


# --- Scan --------------------------------------------------------------------------------------

@op("Scan", scope=True)
def scan(node, *args, scope=None):
    g = node.subgraph("body")
    n_in = node.attr("num_scan_inputs")
    if node.opset is not None and node.opset < 9:
        lens, args = args[0], args[1:]
        n_state = len(args) - n_in
        dirs = node.attr("directions", None) or [0] * n_in
        states, xs = [_a(a) for a in args[:n_state]], [_a(a) for a in args[n_state:]]
        batch = (states + xs)[0].shape[0]
        seq = xs[0].shape[1] if xs else 0
        lk = known(lens)
        if lens is not None and (lk is None or np.any(np.asarray(lk) != seq)):
            raise node.error("sequence_lens shorter than the scanned axis is not supported")
        per_batch = [_scan9(g, scope, [s[b] for s in states], [x[b] for x in xs], dirs,
                            [0] * n_in, None, None) for b in range(batch)]
        return tuple(fnp.stack([r[k] for r in per_batch]) for k in range(len(per_batch[0])))
    n_state = len(args) - n_in
    n_out = len(g.outputs) - n_state
    return tuple(_scan9(g, scope, [_a(a) for a in args[:n_state]],
                        [_a(a) for a in args[n_state:]],
                        node.attr("scan_input_directions", None) or [0] * n_in,
                        node.attr("scan_input_axes", None) or [0] * n_in,
                        node.attr("scan_output_directions", None) or [0] * n_out,
                        node.attr("scan_output_axes", None) or [0] * n_out))


def _scan9(g, scope, states, xs, in_dirs, in_axes, out_dirs, out_axes):
    n_state = len(states)
    xs = [fnp.moveaxis(x, ax % x.ndim, 0) for x, ax in zip(xs, in_axes)]
    xs = [fnp.flip(x, 0) if d else x for x, d in zip(xs, in_dirs)]

    def step(carry, x):
        outs = g.run(dict(zip(g.inputs, [*carry, *x])), outer=scope)
        new = [_a(v).astype(c.dtype) for v, c in zip(outs[:n_state], carry)]
        return new, [_a(y) for y in outs[n_state:]]
    length = xs[0].shape[0] if xs else 0
    final, ys = lax.scan(step, list(states), list(xs), length=length)
    out_dirs = out_dirs or [0] * len(ys)
    out_axes = out_axes or [0] * len(ys)
    res = []
    for y, d, ax in zip(ys, out_dirs, out_axes):
        if d:
            y = fnp.flip(y, 0)
        res.append(fnp.moveaxis(y, 0, ax % y.ndim))
    return list(final) + res


# --- RNN, GRU, LSTM ----------------------------------------------------------------------------

_ACT_PARAMS = {  # name: (default alpha, default beta), None where unused
    "relu": (None, None), "tanh": (None, None), "sigmoid": (None, None),
    "affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
    "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None),
    "softsign": (None, None), "softplus": (None, None),
}


def _activation(node, name, alpha, beta):
    n = name.lower()
    if n == "relu":
        return lambda x: fnp.maximum(x, 0)
    if n == "tanh":
        return fnp.tanh
    if n == "sigmoid":
        return nnf.sigmoid
    if n == "affine":
        return lambda x: alpha * x + beta
    if n == "leakyrelu":
        return lambda x: fnp.where(x >= 0, x, alpha * x)
    if n == "thresholdedrelu":
        return lambda x: fnp.where(x > alpha, x, 0).astype(x.dtype)
    if n == "scaledtanh":
        return lambda x: alpha * fnp.tanh(beta * x)
    if n == "hardsigmoid":
        return lambda x: fnp.clip(alpha * x + beta, 0, 1)
    if n == "elu":
        return lambda x: fnp.where(x >= 0, x, alpha * (fnp.exp(x) - 1))
    if n == "softsign":
        return lambda x: x / (1 + fnp.abs(x))
    if n == "softplus":
        return lambda x: fnp.logaddexp(x, fnp.zeros((), x.dtype))
    raise node.error(f"the activation {name!r} is not supported (fnx runs "
                     + ", ".join(sorted(_ACT_PARAMS)) + ")")


def _activations(node, n_per_dir, num_dir, defaults):
    names = node.attrs.get("activations")
    if not names:
        names = list(defaults)
    names = [str(s) for s in names]
    if len(names) == n_per_dir and num_dir == 2:
        names = names * 2
    if len(names) != n_per_dir * num_dir:
        raise node.error(f"activations lists {len(names)} functions; {node.op_type} with "
                         f"{num_dir} direction(s) takes {n_per_dir * num_dir}")
    alphas = list(node.attrs.get("activation_alpha") or [])
    betas = list(node.attrs.get("activation_beta") or [])
    fns = []
    for name in names:
        da, db = _ACT_PARAMS.get(name.lower(), (None, None))
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        fns.append(_activation(node, name, a, b))
    return [fns[d * n_per_dir:(d + 1) * n_per_dir] for d in range(num_dir)]


def _seq_gather(x, idx):
    """``x[idx[t, b], b]`` for ``x`` of shape (seq, batch, ...)."""
    idx = fnp.reshape(idx, idx.shape + (1,) * (x.ndim - 2))
    return fnp.take_along_axis(x, fnp.broadcast_to(idx, idx.shape[:2] + x.shape[2:]), axis=0)


def _run_direction(step, carry0, xs, lens, reverse):
    """Scan ``step(carry, x_t) -> (carry, y_t)`` over the time axis of ``xs`` (seq, batch,
    ...), keeping each batch entry's state past its length in ``lens`` (None: all full)."""
    seq = xs.shape[0]
    if lens is None:
        def body(carry, x):
            return step(carry, x)
        final, ys = lax.scan(body, carry0, xs, reverse=reverse)
        return final, ys
    lens = _a(lens).astype(np.int64)
    t = fnp.arange(seq, dtype=np.int64)[:, None]
    valid = t < lens[None, :]  # (seq, batch)
    if reverse:  # each sequence read backwards from its own last element
        idx = fnp.where(valid, lens[None, :] - 1 - t, t)
        xs = _seq_gather(xs, idx)

    def body(carry, inp):
        x, m = inp
        new, y = step(carry, x)
        m = m[:, None]
        new = tuple(fnp.where(m, n, o) for n, o in zip(new, carry))
        return new, fnp.where(m, y, fnp.zeros((), y.dtype))
    final, ys = lax.scan(body, carry0, (xs, valid))
    if reverse:
        ys = _seq_gather(ys, idx)
    return final, ys


def _recurrent(node, kind, X, W, R, B, lens, h0, c0=None, P=None):
    ngates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    direction = node.attr("direction", "forward")
    num_dir = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional"):
        raise node.error(f"direction {direction!r} is not forward, reverse or bidirectional")
    layout = node.attr("layout", 0)
    X, W, R = _a(X), _a(W), _a(R)
    dt = X.dtype
    if layout:
        X = fnp.swapaxes(X, 0, 1)
        h0 = None if h0 is None else fnp.swapaxes(_a(h0), 0, 1)
        c0 = None if c0 is None else fnp.swapaxes(_a(c0), 0, 1)
    hidden = node.attr("hidden_size", None) or R.shape[-1]
    batch = X.shape[1]
    clip = node.attr("clip", None)
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = _activations(node, len(defaults), num_dir, defaults)
    lbr = node.attr("linear_before_reset", 0) if kind == "GRU" else 0
    input_forget = node.attr("input_forget", 0) if kind == "LSTM" else 0

    def cl(v):
        return v if clip is None else fnp.clip(v, -clip, clip)

    ys, hs, cs = [], [], []
    for d in range(num_dir):
        Wd, Rd = W[d], R[d]
        Bd = (_a(B)[d] if B is not None else fnp.zeros((2 * ngates * hidden,), dt))
        wb, rb = Bd[:ngates * hidden], Bd[ngates * hidden:]
        xw = fnp.einsum("tbi,gi->tbg", X, Wd) + wb  # every step's input projection at once
        h = _a(h0)[d] if h0 is not None else fnp.zeros((batch, hidden), dt)
        f = acts[d]
        if kind == "RNN":
            def step(carry, x, Rd=Rd, rb=rb, f=f):
                (h,) = carry
                hn = f[0](cl(x + h @ Rd.T + rb))
                return (hn,), hn
            carry0 = (h,)
        elif kind == "GRU":
            def step(carry, x, Rd=Rd, rb=rb, f=f):
                (h,) = carry
                H = hidden
                xz, xr, xh = x[:, :H], x[:, H:2 * H], x[:, 2 * H:]
                hzr = h @ Rd[:2 * H].T + rb[:2 * H]
                z = f[0](cl(xz + hzr[:, :H]))
                r = f[0](cl(xr + hzr[:, H:]))
                if lbr:
                    hh = f[1](cl(xh + r * (h @ Rd[2 * H:].T + rb[2 * H:])))
                else:
                    hh = f[1](cl(xh + (r * h) @ Rd[2 * H:].T + rb[2 * H:]))
                hn = (1 - z) * hh + z * h
                return (hn,), hn
            carry0 = (h,)
        else:
            c = _a(c0)[d] if c0 is not None else fnp.zeros((batch, hidden), dt)
            if P is not None:
                Pd = _a(P)[d]
                pi, po, pf = Pd[:hidden], Pd[hidden:2 * hidden], Pd[2 * hidden:]
            else:
                pi = po = pf = None

            def step(carry, x, Rd=Rd, rb=rb, f=f, pi=pi, po=po, pf=pf):
                h, c = carry
                H = hidden
                g = x + h @ Rd.T + rb
                gi, go, gf, gc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
                if pi is not None:
                    gi, gf = gi + pi * c, gf + pf * c
                i = f[0](cl(gi))
                fg = (1 - i) if input_forget else f[0](cl(gf))
                cn = fg * c + i * f[1](cl(gc))
                if po is not None:
                    go = go + po * cn
                o = f[0](cl(go))
                hn = o * f[2](cn)
                return (hn, cn), hn
            carry0 = (h, c)
        reverse = direction == "reverse" or d == 1
        final, y = _run_direction(step, carry0, xw, lens, reverse)
        ys.append(y)
        hs.append(final[0])
        if kind == "LSTM":
            cs.append(final[1])
    Y = fnp.stack(ys, axis=1).astype(dt)  # (seq, dirs, batch, hidden)
    Y_h = fnp.stack(hs).astype(dt)
    Y_c = fnp.stack(cs).astype(dt) if cs else None
    if layout:
        Y = fnp.transpose(Y, (2, 0, 1, 3))
        Y_h = fnp.swapaxes(Y_h, 0, 1)
        Y_c = None if Y_c is None else fnp.swapaxes(Y_c, 0, 1)
    return (Y, Y_h) if kind != "LSTM" else (Y, Y_h, Y_c)


@op("RNN")
def rnn(node, X, W, R, B=None, sequence_lens=None, initial_h=None):
    return _recurrent(node, "RNN", X, W, R, B, sequence_lens, initial_h)


@op("GRU")
def gru(node, X, W, R, B=None, sequence_lens=None, initial_h=None):
    return _recurrent(node, "GRU", X, W, R, B, sequence_lens, initial_h)


@op("LSTM")
def lstm(node, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None):
    return _recurrent(node, "LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P)


# --- sequences (Python lists of arrays) and optionals (None when empty) ------------------------

def _index(node, seq, pos, what, extra=0):
    """A position in ``seq`` as a Python int (negative counts from the end); ``extra``
    widens the valid range (SequenceInsert may insert at len)."""
    k = known(pos)
    if k is None:
        raise node.error(f"the {what} position must be known when the model is traced",
                         NeedsKnownValuesError)
    i = int(np.asarray(k).reshape(()))
    n = len(seq)
    if not -n <= i < n + extra:
        raise node.error(f"position {i} is out of range for a sequence of {n} tensors")
    return i + n if i < 0 else i


@op("SequenceConstruct")
def sequence_construct(node, *xs):
    return [_a(x) for x in xs]


@op("SequenceEmpty")
def sequence_empty(node):
    return []


@op("SequenceLength")
def sequence_length(node, seq):
    return np.asarray(len(seq), np.int64)


@op("SequenceAt")
def sequence_at(node, seq, pos):
    k = known(pos)
    if k is None and seq and len({(tuple(_a(x).shape), _a(x).dtype) for x in seq}) == 1:
        # a traced position into tensors of one type: index their stack
        n = len(seq)
        i = fnp.reshape(_a(pos), ()).astype(np.int64)
        return fnp.stack([_a(x) for x in seq])[fnp.where(i < 0, i + n, i)]
    return _a(seq[_index(node, seq, pos, "SequenceAt")])


@op("SequenceInsert")
def sequence_insert(node, seq, tensor, position=None):
    out = list(seq)
    if position is None:
        out.append(_a(tensor))
    else:
        out.insert(_index(node, seq, position, "insert", extra=1), _a(tensor))
    return out


@op("SequenceErase")
def sequence_erase(node, seq, position=None):
    out = list(seq)
    del out[-1 if position is None else _index(node, seq, position, "erase")]
    return out


@op("SplitToSequence")
def split_to_sequence(node, x, split=None):
    x = _a(x)
    if split is not None:  # it sets the shapes of the parts: known, else eagerly
        split = known(split)
        if split is None:
            raise _needs_values(node, "its split sizes are computed from the model's inputs "
                                "and set the shapes of the parts")
    axis = node.attr("axis", 0) % max(x.ndim, 1)
    dim = x.shape[axis]
    if split is None:
        sizes = [1] * dim
    elif np.ndim(split) == 0:
        n = int(split)
        sizes = [n] * (dim // n) + ([dim % n] if dim % n else [])
    else:
        sizes = [int(s) for s in np.asarray(split).reshape(-1)]
    if sum(sizes) != dim:
        raise node.error(f"split sizes {sizes} do not add up to the axis length {dim}")
    bounds = np.cumsum(sizes)[:-1].tolist()
    parts = fnp.split(x, bounds, axis=axis) if sizes else []
    if split is None and not node.attr("keepdims", 1):
        parts = [fnp.squeeze(p, axis) for p in parts]
    return list(parts)


@op("ConcatFromSequence")
def concat_from_sequence(node, seq):
    xs = [_a(x) for x in seq]
    axis = node.attr("axis")
    if node.attr("new_axis", 0):
        return fnp.stack(xs, axis=axis % (xs[0].ndim + 1))
    return fnp.concatenate(xs, axis=axis % xs[0].ndim)


@op("SequenceMap", scope=True)
def sequence_map(node, seq, *extra, scope=None):
    g = node.subgraph("body")
    seqs = [seq] + [e for e in extra]
    n = len(seq)
    for s in seqs:
        if isinstance(s, (list, tuple)) and len(s) != n:
            raise node.error(f"the input sequences have different lengths ({n} and "
                             f"{len(s)})")
    outs = [[] for _ in g.outputs]
    for i in range(n):
        args = [s[i] if isinstance(s, (list, tuple)) else s for s in seqs]
        for o, v in zip(outs, g.run(dict(zip(g.inputs, args)), outer=scope)):
            o.append(_a(v))
    return tuple(outs)


@op("Optional")
def optional(node, x=None):
    return x


@op("OptionalHasElement")
def optional_has_element(node, x=None):
    return np.asarray(x is not None)


@op("OptionalGetElement")
def optional_get_element(node, x):
    if x is None:
        raise node.error("the optional is empty", UnsupportedOnnxOpError)
    return x


# --- attention ---------------------------------------------------------------------------------

def _neg_inf(dt):
    return fnp.asarray(-np.inf, dt)


def _to_heads(x, heads):
    """(batch, seq, heads * size) -> (batch, heads, seq, size)."""
    b, s, hid = x.shape
    return fnp.transpose(fnp.reshape(x, (b, s, heads, hid // heads)), (0, 2, 1, 3))


def _is_neg_inf(x):
    # a comparison, not fnp.isneginf: that is False for every bfloat16 value
    return x == _neg_inf(x.dtype)


def _safe_softmax(x):
    """Softmax over the last axis where a row of -inf gives zeros (not NaN)."""
    m = fnp.max(x, axis=-1, keepdims=True)
    m = fnp.where(_is_neg_inf(m), fnp.zeros((), x.dtype), m)
    e = fnp.exp(x - lax.stop_gradient(m))
    s = fnp.sum(e, axis=-1, keepdims=True)
    return e / fnp.where(s == 0, fnp.ones((), x.dtype), s)


@op("Attention")
def attention(node, Q, K, V, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None):
    Q, K, V = _a(Q), _a(K), _a(V)
    dt = Q.dtype
    rank3 = Q.ndim == 3
    if rank3:
        qh, kvh = node.attr("q_num_heads", None), node.attr("kv_num_heads", None)
        if qh is None or kvh is None:
            raise node.error("3-D Q, K and V need the q_num_heads and kv_num_heads "
                             "attributes", UnsupportedOnnxOpError)
        Q, K, V = _to_heads(Q, qh), _to_heads(K, kvh), _to_heads(V, kvh)
    if (past_key is None) != (past_value is None):
        raise node.error("past_key and past_value must be given together")
    scale = node.attr("scale", None)
    if scale is None:
        scale = 1 / np.sqrt(Q.shape[3])
    s = np.asarray(np.sqrt(scale), dtype=dt)
    if past_key is not None:
        K = fnp.concatenate([_a(past_key), K], axis=2)
        V = fnp.concatenate([_a(past_value), V], axis=2)
    present_k, present_v = K, V
    nq, nkv = Q.shape[2], K.shape[2]
    zero, ninf = fnp.zeros((), dt), _neg_inf(dt)

    mask = None
    if attn_mask is not None:
        mask = _a(attn_mask)
        pad = nkv - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype == np.bool_ else -np.inf
            mask = fnp.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)],
                           constant_values=fill)
        if mask.dtype == np.bool_:
            mask = fnp.where(mask, zero, ninf)
        mask = mask.astype(dt)
    bias = fnp.zeros((nq, nkv), dt) if mask is None else fnp.zeros((nq, nkv), dt) + mask

    # the offset of the query block among the keys: past keys, or an external cache
    if past_key is None and nonpad_kv_seqlen is not None:
        offset = fnp.reshape(_a(nonpad_kv_seqlen).astype(np.int64) - nq, (-1, 1, 1, 1))
    else:
        offset = past_key.shape[2] if past_key is not None else 0
    i_idx = np.arange(nq, dtype=np.int64)[:, None]
    j_idx = np.arange(nkv, dtype=np.int64)[None, :]
    diff = (i_idx + offset) - j_idx  # query position minus key position
    if node.attr("is_causal", 0):
        bias = bias + fnp.where(diff >= 0, zero, ninf)
    left, right = node.attr("left_window_size", -1), node.attr("right_window_size", -1)
    if left >= 0 or right >= 0:
        allowed = fnp.ones(np.shape(diff), bool)
        if left >= 0:
            allowed = allowed & (diff <= left)
        if right >= 0:
            allowed = allowed & (-diff <= right)
        bias = bias + fnp.where(allowed, zero, ninf)
    if nonpad_kv_seqlen is not None:
        lens = fnp.reshape(_a(nonpad_kv_seqlen).astype(np.int64), (-1, 1, 1, 1))
        bias = bias + fnp.where(np.arange(nkv) < lens, zero, ninf)

    hq, hk = Q.shape[1], K.shape[1]
    if hq != hk:
        if hq % hk:
            raise node.error(f"{hq} query heads cannot share {hk} key/value heads (not a "
                             "multiple)")
        K, V = fnp.repeat(K, hq // hk, axis=1), fnp.repeat(V, hq // hk, axis=1)

    qk = fnp.matmul(Q * s, fnp.swapaxes(K * s, -1, -2))
    softcap = node.attr("softcap", 0.0)
    if softcap and softcap > 0:
        c = np.asarray(softcap, dt)
        qk = c * fnp.tanh(qk / c)
    qk_bias = qk + bias
    mode = node.attr("qk_matmul_output_mode", 0)
    qk_out = qk_bias if mode == 2 else qk
    prec = node.attr("softmax_precision", None)
    logits = qk_bias.astype(np_dtype(prec)) if prec else qk_bias
    p = _safe_softmax(logits)
    masked_row = _is_neg_inf(fnp.max(bias, axis=-1, keepdims=True))
    p = fnp.where(masked_row, fnp.zeros((), p.dtype), p)
    if mode == 3:
        qk_out = p
    qk_out = qk_out.astype(dt)
    y = fnp.matmul(p.astype(dt), V)
    if rank3:
        b, h, sq, dv = y.shape
        y = fnp.reshape(fnp.transpose(y, (0, 2, 1, 3)), (b, sq, h * dv))
    return y, present_k, present_v, qk_out


@op("RotaryEmbedding")
def rotary_embedding(node, X, cos_cache, sin_cache, position_ids=None):
    x = _a(X)
    cos, sin = _a(cos_cache), _a(sin_cache)
    rank4 = x.ndim == 4
    if rank4:  # (batch, heads, seq, size) -> (batch, seq, heads, size)
        x = fnp.transpose(x, (0, 2, 1, 3))
    else:
        heads = node.attr("num_heads", None)
        if not heads:
            raise node.error("a 3-D input needs the num_heads attribute",
                             UnsupportedOnnxOpError)
        b, s, hid = x.shape
        x = fnp.reshape(x, (b, s, heads, hid // heads))
    size = x.shape[3]
    dim = node.attr("rotary_embedding_dim", 0) or size
    if position_ids is not None:
        pos = _a(position_ids)
        cos, sin = fnp.take(cos, pos, axis=0), fnp.take(sin, pos, axis=0)
    if cos.shape[-1] != dim // 2 or sin.shape[-1] != dim // 2:
        raise node.error(f"the cos/sin caches' last axis ({cos.shape[-1]}) is not half the "
                         f"rotated size {dim}", UnsupportedOnnxOpError)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    rot, keep = x[..., :dim], x[..., dim:]
    if node.attr("interleaved", 0):
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., :dim // 2], rot[..., dim // 2:]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if node.attr("interleaved", 0):
        rot = fnp.reshape(fnp.stack([real, imag], axis=-1), rot.shape)
    else:
        rot = fnp.concatenate([real, imag], axis=-1)
    out = fnp.concatenate([rot, keep], axis=-1).astype(x.dtype)
    if rank4:
        return fnp.transpose(out, (0, 2, 1, 3))
    return fnp.reshape(out, _a(X).shape)


@op("TensorScatter")
def tensor_scatter(node, past_cache, update, write_indices=None):
    past, upd = _a(past_cache), _a(update)
    axis = node.attr("axis", -2) % past.ndim
    mode = node.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise node.error(f"mode {mode!r} is not linear or circular")
    n_max, n_upd, batch = past.shape[axis], upd.shape[axis], past.shape[0]
    if write_indices is None:
        w = fnp.zeros((batch,), np.int64)
    else:
        w = _a(write_indices).astype(np.int64)
    p = fnp.arange(n_max, dtype=np.int64)[None, :]
    u = p - w[:, None]  # (batch, n_max): the update row written at each cache row
    if mode == "circular":
        u = fnp.mod(u, n_max)
    valid = (u >= 0) & (u < n_upd)
    shape = [batch] + [1] * (past.ndim - 1)
    shape[axis] = n_max
    u = fnp.reshape(fnp.clip(u, 0, max(n_upd - 1, 0)), shape)
    valid = fnp.reshape(valid, shape)
    full = list(past.shape)
    got = fnp.take_along_axis(upd, fnp.broadcast_to(u, full[:axis] + [n_max] + full[axis + 1:]),
                              axis=axis)
    return fnp.where(valid, got, past)


@op("CausalConvWithState")
def causal_conv_with_state(node, x, weight, bias=None, past_state=None):
    x, w = _a(x), _a(weight)
    act = node.attr("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise node.error(f"activation {act!r} is not none, silu or swish")
    b, c, n = x.shape
    k = w.shape[2]
    pad = (fnp.zeros((b, c, k - 1), x.dtype) if past_state is None
           else _a(past_state).astype(x.dtype))
    padded = fnp.concatenate([pad, x], axis=2)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    pf, wf = padded.astype(acc), w.astype(acc)
    out = sum(wf[None, :, 0, j:j + 1] * pf[:, :, j:j + n] for j in range(k))
    if bias is not None:
        out = out + _a(bias).astype(acc)[None, :, None]
    out = out.astype(x.dtype)
    if act != "none":
        o = out.astype(acc)
        out = (o * nnf.sigmoid(o)).astype(x.dtype)
    return out, padded[:, :, padded.shape[2] - (k - 1):]


@op("LinearAttention")
def linear_attention(node, query, key, value, past_state=None, decay=None, beta=None):
    rule = node.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise node.error(f"update_rule {rule!r} is not linear, gated, delta or gated_delta")
    hq, hk = node.attr("q_num_heads"), node.attr("kv_num_heads")
    if hq <= 0 or hk <= 0 or hq % hk:
        raise node.error(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads "
                         f"({hk})")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating and decay is None or delta and beta is None:
        raise node.error(f"update_rule {rule!r} needs the "
                         f"{'decay' if gating and decay is None else 'beta'} input")
    q, k, v = _a(query), _a(key), _a(value)
    out_dt = q.dtype
    f32 = np.float32
    b, t, _ = q.shape
    dk, dv = q.shape[-1] // hq, v.shape[-1] // hk
    q4 = _to_heads(q, hq).astype(f32)
    k4 = _to_heads(k, hk).astype(f32)
    v4 = _to_heads(v, hk).astype(f32)
    xs = [fnp.moveaxis(q4, 2, 0), fnp.moveaxis(k4, 2, 0), fnp.moveaxis(v4, 2, 0)]
    if gating:
        d = _a(decay)
        d4 = (fnp.transpose(fnp.reshape(d, (b, t, hk, 1)), (0, 2, 1, 3))
              if d.shape[-1] == hk else _to_heads(d, hk))
        xs.append(fnp.moveaxis(d4.astype(f32), 2, 0))
    if delta:
        be = _a(beta)
        be4 = fnp.transpose(fnp.reshape(be, (b, t, be.shape[-1], 1)), (0, 2, 1, 3))
        xs.append(fnp.moveaxis(be4.astype(f32), 2, 0))
    if past_state is not None:
        state_dt = _a(past_state).dtype
        state0 = _a(past_state).astype(f32)
    else:
        state_dt = out_dt
        state0 = fnp.zeros((b, hk, dk, dv), f32)
    scale = node.attr("scale", 0.0)
    scale = float(scale) if scale else 1.0 / np.sqrt(dk)
    group = hq // hk

    def step(S, inp):
        q_t, k_t, v_t = inp[:3]
        rest = list(inp[3:])
        if gating:
            S = S * fnp.exp(rest.pop(0))[..., None]
        if delta:
            retrieved = fnp.einsum("bhdm,bhd->bhm", S, k_t)
            v_t = rest.pop(0) * (v_t - retrieved)
        S = S + k_t[..., :, None] * v_t[..., None, :]
        S_read = S if group == 1 else fnp.repeat(S, group, axis=1)
        return S, np.float32(scale) * fnp.einsum("bhd,bhdm->bhm", q_t, S_read)
    S, ys = lax.scan(step, state0, tuple(xs))
    out = fnp.reshape(fnp.transpose(ys, (1, 0, 2, 3)), (b, t, hq * dv)).astype(out_dt)
    return out, S.astype(state_dt)
