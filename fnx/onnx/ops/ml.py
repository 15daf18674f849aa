"""Operators of the ``ai.onnx.ml`` and ``ai.onnx.preview.training`` domains that fnx's
arrays express (numeric feature transforms, tree ensembles, optimizer steps), and
detection post-processing (NonMaxSuppression), n-gram counting (TfIdfVectorizer).

Tree ensembles run vectorized over samples and trees: the trees' nodes become static
arrays, and each of ``depth`` steps moves every (sample, tree) pair one node down, so a
model is jit-able. NonMaxSuppression's output length depends on the values: it runs on
known values (eagerly); under ``jit`` it raises ``StaticInputError`` and the ONNX backend
reruns the model eagerly. String tensors (string keys of LabelEncoder, string pools of
TfIdfVectorizer) are not fnx arrays: those attribute values raise
``UnsupportedOnnxOpError``."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ..graph import StaticInputError, known, op

ML = "ai.onnx.ml"
TRAINING = "ai.onnx.preview.training"


def _a(x):
    return fnp.asarray(x)


# --- NonMaxSuppression ---------------------------------------------------------------------

def _scalar_or(v, default, cast):
    if v is None or np.size(v) == 0:
        return default
    return cast(np.asarray(v).reshape(-1)[0])


def _corners(boxes, center):
    """(y1, x1, y2, x2) with y1 <= y2 and x1 <= x2 of boxes (..., 4)."""
    b = boxes.astype(np.float64)
    if center:  # [x_center, y_center, width, height]
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return (np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
            np.maximum(x1, x2))


def _iou_matrix(boxes, center):
    """Intersection over union of every pair of boxes (B, 4) -> (B, B); 0 where a box
    or the intersection is empty."""
    y1, x1, y2, x2 = _corners(boxes, center)
    ih = np.minimum(y2[:, None], y2[None, :]) - np.maximum(y1[:, None], y1[None, :])
    iw = np.minimum(x2[:, None], x2[None, :]) - np.maximum(x1[:, None], x1[None, :])
    inter = np.where((ih > 0) & (iw > 0), ih * iw, 0.0)
    area = (y2 - y1) * (x2 - x1)
    union = area[:, None] + area[None, :] - inter
    ok = (inter > 0) & (area[:, None] > 0) & (area[None, :] > 0) & (union > 0)
    return np.where(ok, inter / np.where(ok, union, 1.0), 0.0)


@op("NonMaxSuppression", static=(2, 3, 4))
def non_max_suppression(node, boxes, scores, max_output_boxes_per_class=None,
                        iou_threshold=None, score_threshold=None):
    b, s = known(boxes), known(scores)
    if b is None or s is None:
        raise node.error("the number of boxes selected depends on the boxes' values, "
                         "which are not known while tracing: run the model without jit",
                         StaticInputError)
    center = int(node.attr("center_point_box", 0))
    if center not in (0, 1):
        raise node.error(f"center_point_box must be 0 or 1 (got {center})")
    limit = max(_scalar_or(max_output_boxes_per_class, 0, int), 0)
    iou_t = _scalar_or(iou_threshold, 0.0, float)
    score_t = _scalar_or(score_threshold, None, float)
    if b.ndim != 3 or b.shape[-1] != 4 or s.ndim != 3 or s.shape[0] != b.shape[0] \
            or s.shape[2] != b.shape[1]:
        raise node.error(f"boxes must be (batches, boxes, 4) and scores (batches, "
                         f"classes, boxes) (got {b.shape} and {s.shape})")
    selected = []
    for n in range(b.shape[0]):
        iou = _iou_matrix(b[n], center) if limit else None
        for c in range(s.shape[1]):
            sc = s[n, c]
            cand = np.arange(sc.shape[0])
            if score_t is not None:
                cand = cand[sc[cand] > score_t]
            # highest score first; among equal scores the lower index first
            cand = cand[np.lexsort((cand, -sc[cand]))]
            kept = []
            for i in cand:
                if len(kept) >= limit:
                    break
                if all(iou[i, k] <= iou_t for k in kept):
                    kept.append(int(i))
            selected.extend((n, c, k) for k in kept)
    return np.asarray(selected, np.int64).reshape(-1, 3)


# --- ai.onnx.ml: feature transforms ----------------------------------------------------------

@op("Binarizer", domain=ML)
def binarizer(node, x):
    x = _a(x)
    t = float(node.attr("threshold", 0.0))
    return (x > fnp.asarray(t, x.dtype)).astype(x.dtype)


@op("ArrayFeatureExtractor", domain=ML, static=(1,))
def array_feature_extractor(node, x, indices):
    """``x[..., indices]``: the indices select along the last axis; a vector ``x`` gives
    one row (onnxruntime's shape)."""
    x = _a(x)
    idx = np.asarray(indices, np.int64).reshape(-1)
    last = x.shape[-1]
    if idx.size and (idx.min() < -last or idx.max() >= last):
        raise node.error(f"indices {idx.tolist()} are out of range for a last axis of "
                         f"{last}")
    y = fnp.take(x, idx, axis=-1)
    return y.reshape((1, idx.size)) if x.ndim == 1 else y


def _label_encoder_table(node):
    """(keys, values, default) of a numeric LabelEncoder as NumPy arrays."""
    def first(*names):
        for n in names:
            if node.has_attr(n):
                return n, node.attr(n)
        return None, None
    kname, keys = first("keys_tensor", "keys_int64s", "keys_floats", "keys_strings")
    vname, vals = first("values_tensor", "values_int64s", "values_floats",
                        "values_strings")
    if kname is None or vname is None:
        if node.has_attr("classes_strings"):
            raise node.error("string labels (classes_strings) are not expressible with "
                             "fnx arrays")
        raise node.error("needs keys_* and values_* attributes")
    if "strings" in kname or "strings" in vname or (
            isinstance(keys, np.ndarray) and keys.dtype.kind in "OSU") or (
            isinstance(vals, np.ndarray) and vals.dtype.kind in "OSU"):
        raise node.error("string keys or values are not expressible with fnx arrays "
                         "(only numeric LabelEncoders run)")
    keys = np.asarray(keys, np.int64 if kname == "keys_int64s" else
                      np.float32 if kname == "keys_floats" else None).reshape(-1)
    vals = np.asarray(vals, np.int64 if vname == "values_int64s" else
                      np.float32 if vname == "values_floats" else None).reshape(-1)
    if keys.shape != vals.shape:
        raise node.error(f"{kname} and {vname} differ in length ({keys.size} and "
                         f"{vals.size})")
    if vname == "values_tensor":
        d = node.attr("default_tensor", None)
        default = (np.asarray(d).reshape(-1)[0].astype(vals.dtype) if d is not None
                   else np.zeros((), vals.dtype))  # 0 by the spec ("" or 0 of its type)
        if d is None and vals.dtype.kind == "f":
            default = np.asarray(-0.0, vals.dtype)
        if d is None and vals.dtype.kind in "iu":
            default = np.asarray(-1, vals.dtype)
    elif vname == "values_int64s":
        default = np.asarray(node.attr("default_int64", -1), np.int64)
    else:
        default = np.asarray(node.attr("default_float", -0.0), np.float32)
    return keys, vals, default


@op("LabelEncoder", domain=ML)
def label_encoder(node, x):
    """Numeric key -> value maps, as a comparison against every key (NaN keys match NaN
    inputs); an input matching no key gives the default."""
    keys, vals, default = _label_encoder_table(node)
    keys, vals = keys[::-1], vals[::-1]  # a repeated key: the last one wins
    x = _a(x)
    if np.dtype(x.dtype).kind not in "iuf":
        raise node.error(f"input of type {x.dtype} is not numeric")
    k = fnp.asarray(keys.astype(x.dtype))
    eq = x[..., None] == k
    if keys.dtype.kind == "f" and np.isnan(keys).any():
        eq = eq | (fnp.isnan(x)[..., None] & fnp.asarray(np.isnan(keys)))
    hit = fnp.any(eq, axis=-1)
    which = fnp.argmax(eq, axis=-1) if keys.size else fnp.zeros(x.shape, np.int64)
    v = fnp.asarray(vals if vals.size else np.zeros(1, vals.dtype))
    return fnp.where(hit, fnp.take(v, which), fnp.asarray(default))


# --- ai.onnx.ml: TreeEnsemble (opset 5) --------------------------------------------------------

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)


def _tree_tables(node, nfeat):
    """The ensemble's nodes as static NumPy arrays, the per-tree roots and the depth."""
    def ints(name, default=None):
        v = node.attr(name, default)
        return None if v is None else np.asarray(v, np.int64).reshape(-1)

    feat = ints("nodes_featureids")
    modes = np.asarray(node.attr("nodes_modes"), np.int64).reshape(-1)
    splits = np.asarray(node.attr("nodes_splits")).reshape(-1)
    t_ids, f_ids = ints("nodes_truenodeids"), ints("nodes_falsenodeids")
    t_leaf = ints("nodes_trueleafs").astype(bool)
    f_leaf = ints("nodes_falseleafs").astype(bool)
    n = feat.size
    if not all(a.size == n for a in (modes, splits, t_ids, f_ids, t_leaf, f_leaf)):
        raise node.error("the nodes_* attributes differ in length")
    missing = ints("nodes_missing_value_tracks_true", None)
    missing = (np.zeros(n, bool) if missing is None or missing.size == 0
               else missing.astype(bool))
    if modes.size and (modes.min() < 0 or modes.max() > _MEMBER):
        raise node.error(f"nodes_modes must be in 0..6 (got {sorted(set(modes.tolist()))})")
    if feat.size and (feat.min() < 0 or feat.max() >= nfeat):
        raise node.error(f"nodes_featureids must index the {nfeat} features")
    # set members: one NaN-terminated run of membership_values per MEMBER node, in order
    members = np.full((n, 1), np.nan)
    if (modes == _MEMBER).any():
        mv = node.attr("membership_values", None)
        if mv is None:
            raise node.error("MEMBER nodes need membership_values")
        mv = np.asarray(mv, np.float64).reshape(-1)
        runs, cur = [], []
        for v in mv:
            if np.isnan(v):
                runs.append(cur)
                cur = []
            else:
                cur.append(v)
        if cur:
            runs.append(cur)
        member_nodes = np.flatnonzero(modes == _MEMBER)
        if len(runs) < member_nodes.size:
            raise node.error("membership_values needs one NaN-terminated set per MEMBER "
                             "node")
        width = max([len(r) for r in runs] + [1])
        members = np.full((n, width), np.nan)
        for i, r in zip(member_nodes, runs):
            members[i, :len(r)] = r
    roots = ints("tree_roots")
    root_leaf = np.array([bool(t_leaf[r] and f_leaf[r] and t_ids[r] == f_ids[r])
                          for r in roots], bool)
    # the depth: the longest chain of internal nodes below a root
    depth, memo = 0, {}

    def down(i, seen=()):
        if i in memo:
            return memo[i]
        if i in seen:
            raise node.error("the trees have a cycle")
        d = 1 + max(0 if t_leaf[i] else down(int(t_ids[i]), seen + (i,)),
                    0 if f_leaf[i] else down(int(f_ids[i]), seen + (i,)))
        memo[i] = d
        return d
    for r, leaf in zip(roots, root_leaf):
        if not leaf:
            depth = max(depth, down(int(r)))
    return dict(feat=feat, modes=modes, splits=splits, t_ids=t_ids, f_ids=f_ids,
                t_leaf=t_leaf, f_leaf=f_leaf, missing=missing, members=members,
                roots=roots, root_leaf=root_leaf, depth=depth)


def _branch(tb, cur, xv):
    """Whether each (sample, tree) at internal node ``cur`` with feature value ``xv``
    takes the true branch."""
    dt = xv.dtype
    mode = fnp.take(fnp.asarray(tb["modes"]), cur)
    split = fnp.take(fnp.asarray(tb["splits"].astype(dt)), cur)
    res = fnp.where(mode == _LEQ, xv <= split, False)
    res = fnp.where(mode == _LT, xv < split, res)
    res = fnp.where(mode == _GTE, xv >= split, res)
    res = fnp.where(mode == _GT, xv > split, res)
    res = fnp.where(mode == _EQ, xv == split, res)
    res = fnp.where(mode == _NEQ, xv != split, res)
    if (tb["modes"] == _MEMBER).any():
        mem = fnp.take(fnp.asarray(tb["members"].astype(dt)), cur, axis=0)
        res = fnp.where(mode == _MEMBER, fnp.any(xv[..., None] == mem, axis=-1), res)
    if tb["missing"].any():
        res = res | (fnp.isnan(xv) & fnp.take(fnp.asarray(tb["missing"]), cur))
    return res


@op("TreeEnsemble", domain=ML)
def tree_ensemble(node, x):
    x = _a(x)
    if x.ndim != 2:
        raise node.error(f"X must be (samples, features) (got rank {x.ndim})")
    tb = _tree_tables(node, x.shape[1])
    n_targets = int(node.attr("n_targets"))
    agg = int(node.attr("aggregate_function", 1))
    post = int(node.attr("post_transform", 0))
    weights = np.asarray(node.attr("leaf_weights")).reshape(-1)
    targets = np.asarray(node.attr("leaf_targetids"), np.int64).reshape(-1)
    if targets.size != weights.size:
        raise node.error("leaf_targetids and leaf_weights differ in length")
    if targets.size and (targets.min() < 0 or targets.max() >= n_targets):
        raise node.error(f"leaf_targetids must be in 0..{n_targets - 1}")
    if agg not in (0, 1, 2, 3):
        raise node.error(f"aggregate_function={agg} is not AVERAGE, SUM, MIN or MAX")
    if post not in (0, 1, 2, 3, 4):
        raise node.error(f"post_transform={post} is not an ONNX post transform")
    ns, nt = x.shape[0], tb["roots"].size
    # state per (sample, tree): the node index, and whether it is a leaf index
    cur = fnp.broadcast_to(fnp.asarray(tb["roots"]), (ns, nt))
    leaf = fnp.broadcast_to(fnp.asarray(tb["root_leaf"]), (ns, nt))
    feat, t_ids, f_ids = (fnp.asarray(tb[k]) for k in ("feat", "t_ids", "f_ids"))
    t_leaf, f_leaf = fnp.asarray(tb["t_leaf"]), fnp.asarray(tb["f_leaf"])
    for _ in range(tb["depth"]):
        at = fnp.where(leaf, 0, cur) if tb["feat"].size else cur  # a valid node index
        xv = fnp.take_along_axis(x, fnp.take(feat, at), axis=1)
        go = _branch(tb, at, xv)
        nxt = fnp.where(go, fnp.take(t_ids, at), fnp.take(f_ids, at))
        nleaf = fnp.where(go, fnp.take(t_leaf, at), fnp.take(f_leaf, at))
        cur = fnp.where(leaf, cur, nxt)
        leaf = leaf | nleaf
    w = fnp.take(fnp.asarray(weights.astype(x.dtype)), cur)  # (samples, trees)
    onehot = fnp.asarray(targets[None, :] == np.arange(n_targets)[:, None])  # (T, leaves)
    hot = fnp.take(onehot, cur, axis=1)  # (targets, samples, trees)
    if agg in (0, 1):
        y = fnp.sum(fnp.where(hot, w[None], fnp.zeros((), x.dtype)), axis=-1)
        if agg == 0:
            y = y / fnp.asarray(max(nt, 1), x.dtype)
    else:
        fi = np.finfo(np.dtype(x.dtype))
        init = fnp.asarray(fi.max if agg == 2 else fi.min, x.dtype)
        red = fnp.min if agg == 2 else fnp.max  # a target no leaf names keeps init
        y = (red(fnp.where(hot, w[None], init), axis=-1) if nt
             else fnp.broadcast_to(init, (n_targets, ns)))
    y = fnp.transpose(y)
    return _post_transform(y, post)


def _post_transform(y, post):
    from ...nn import functions as nnf
    if post == 1:  # SOFTMAX
        return nnf.softmax(y, axis=-1)
    if post == 2:  # LOGISTIC
        return nnf.sigmoid(y)
    if post == 3:  # SOFTMAX_ZERO: softmax over the nonzero scores, 0 stays 0
        nz = y != 0
        m = fnp.max(fnp.where(nz, y, -fnp.inf), axis=-1, keepdims=True)
        m = fnp.where(fnp.isfinite(m), m, 0)
        e = fnp.where(nz, fnp.exp(y - m), 0)
        s = fnp.sum(e, axis=-1, keepdims=True)
        return fnp.where(nz, e / fnp.where(s > 0, s, 1), 0).astype(y.dtype)
    if post == 4:  # PROBIT
        from ...scipy.special import ndtri
        return ndtri(y).astype(y.dtype)
    return y


# --- TfIdfVectorizer -----------------------------------------------------------------------------

@op("TfIdfVectorizer")
def tfidf_vectorizer(node, x):
    """Counts of the pool's n-grams (each skip distance 1..max_skip_count+1; 1-grams
    once) as comparisons of strided windows against the static pool: jit-able."""
    if node.has_attr("pool_strings"):
        raise node.error("string pools (pool_strings) are not expressible with fnx arrays")
    pool = np.asarray(node.attr("pool_int64s"), np.int64).reshape(-1)
    counts = [int(c) for c in node.attr("ngram_counts")]
    indexes = np.asarray(node.attr("ngram_indexes"), np.int64).reshape(-1)
    lo, hi = int(node.attr("min_gram_length")), int(node.attr("max_gram_length"))
    skip = int(node.attr("max_skip_count"))
    mode = node.attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("TF", "IDF", "TFIDF"):
        raise node.error(f"mode={mode!r} is not TF, IDF or TFIDF")
    weights = np.asarray(node.attr("weights", None) or [], np.float32).reshape(-1)
    if lo < 1 or hi < lo or skip < 0:
        raise node.error(f"min_gram_length={lo}, max_gram_length={hi} and "
                         f"max_skip_count={skip} are not valid")
    # the pool's n-grams: (n, start in the pool, number of them, id of the first)
    groups, gid = [], 0
    for k, start in enumerate(counts):
        n = k + 1
        end = counts[k + 1] if k + 1 < len(counts) else pool.size
        m = (end - start) // n
        groups.append((n, start, m, gid))
        gid += m
    if gid != indexes.size:
        raise node.error(f"the pool holds {gid} n-grams but ngram_indexes has "
                         f"{indexes.size}")
    x = _a(x)
    if np.dtype(x.dtype).kind not in "iu":
        raise node.error(f"input of type {x.dtype}: the int64 pool needs integer input")
    rows = x if x.ndim == 2 else x.reshape((1, -1) if x.ndim == 1 else (1, 0))
    if x.ndim > 2:
        raise node.error(f"X must be 1-D or 2-D (got rank {x.ndim})")
    rows = rows.astype(np.int64)
    length = rows.shape[1]
    out_size = int(indexes.max()) + 1 if indexes.size else 0
    tf = fnp.zeros((rows.shape[0], max(gid, 1)), np.int64)
    for n, start, m, first in groups:
        if n < lo or n > hi or m == 0:
            continue
        grams = pool[start:start + n * m].reshape(m, n)
        for d in range(1, (skip + 1 if n > 1 else 1) + 1):
            w = length - d * (n - 1)
            if w <= 0:
                continue
            pos = np.arange(w)[:, None] + d * np.arange(n)[None, :]  # (windows, n)
            win = fnp.take(rows, pos, axis=1)  # (rows, windows, n)
            hit = fnp.all(win[:, :, None, :] == fnp.asarray(grams)[None, None], axis=-1)
            c = fnp.sum(hit.astype(np.int64), axis=1)  # (rows, m)
            tf = tf + fnp.pad(c, [(0, 0), (first, max(gid, 1) - first - m)])
    tf = tf[:, :gid]
    if mode == "IDF":
        tf = fnp.minimum(tf, 1)
    place = np.zeros((gid, out_size), np.float32)
    place[np.arange(gid), indexes] = 1.0
    y = (tf.astype(np.float32) @ fnp.asarray(place) if gid
         else fnp.zeros((rows.shape[0], out_size), np.float32))
    if mode != "TF" and weights.size:
        # onnxruntime and the ONNX reference scale output coordinate j by weights[j]
        if out_size > weights.size:
            raise node.error(f"weights has {weights.size} values for {out_size} output "
                             "coordinates")
        y = y * fnp.asarray(weights[:out_size])
    return y if x.ndim == 2 else y.reshape((out_size,))


# --- ai.onnx.preview.training: optimizer steps ------------------------------------------------

def _split_groups(node, inputs, per):
    """R, T and the ``per`` groups of tensors (X..., G..., ...) of an optimizer node."""
    if len(inputs) < 2 + per or (len(inputs) - 2) % per:
        raise node.error(f"expects R, T and {per} tensors per optimized tensor (got "
                         f"{len(inputs)} inputs)")
    k = (len(inputs) - 2) // per
    rest = [_a(v) for v in inputs[2:]]
    return _a(inputs[0]), _a(inputs[1]), [rest[i * k:(i + 1) * k] for i in range(per)]


@op("Adagrad", domain=TRAINING)
def adagrad(node, *inputs):
    r, t, (xs, gs, hs) = _split_groups(node, inputs, 3)
    decay = float(node.attr("decay_factor", 0.0))
    eps = float(node.attr("epsilon", 0.0))
    lam = float(node.attr("norm_coefficient", 0.0))
    out_x, out_h = [], []
    for x, g, h in zip(xs, gs, hs):
        dt = x.dtype
        rate = r.astype(dt) / (1 + t.astype(dt) * fnp.asarray(decay, dt))
        g = lam * x + g.astype(dt)
        h_new = h.astype(dt) + g * g
        out_x.append((x - rate * g / (fnp.sqrt(h_new) + eps)).astype(dt))
        out_h.append(h_new.astype(h.dtype))
    return tuple(out_x + out_h)


@op("Adam", domain=TRAINING)
def adam(node, *inputs):
    r, t, (xs, gs, vs, hs) = _split_groups(node, inputs, 4)
    alpha = float(node.attr("alpha", 0.9))
    beta = float(node.attr("beta", 0.999))
    eps = float(node.attr("epsilon", 0.0))
    lam = float(node.attr("norm_coefficient", 0.0))
    lam_post = float(node.attr("norm_coefficient_post", 0.0))
    out_x, out_v, out_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        dt = x.dtype
        g = lam * x + g.astype(dt)
        v_new = alpha * v.astype(dt) + (1 - alpha) * g
        h_new = beta * h.astype(dt) + (1 - beta) * (g * g)
        tf = t.astype(dt)
        # bias correction from the first step on (T > 0); none at T == 0
        corr = fnp.where(t > 0, fnp.sqrt(1 - fnp.power(fnp.asarray(beta, dt), tf))
                         / fnp.where(t > 0, 1 - fnp.power(fnp.asarray(alpha, dt), tf), 1),
                         fnp.asarray(1, dt))
        x_new = x - r.astype(dt) * corr * (v_new / (fnp.sqrt(h_new) + eps))
        out_x.append(((1 - lam_post) * x_new).astype(dt))
        out_v.append(v_new.astype(v.dtype))
        out_h.append(h_new.astype(h.dtype))
    return tuple(out_x + out_v + out_h)


@op("Momentum", domain=TRAINING)
def momentum(node, *inputs):
    r, t, (xs, gs, vs) = _split_groups(node, inputs, 3)
    alpha, beta = float(node.attr("alpha")), float(node.attr("beta"))
    lam = float(node.attr("norm_coefficient"))
    mode = node.attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("standard", "nesterov"):
        raise node.error(f"mode={mode!r} is not 'standard' or 'nesterov'")
    out_x, out_v = [], []
    for x, g, v in zip(xs, gs, vs):
        dt = x.dtype
        g = lam * x + g.astype(dt)
        b = fnp.where(t > 0, fnp.asarray(beta, dt), fnp.asarray(1, dt))  # 1 at T == 0
        v_new = alpha * v.astype(dt) + b * g
        step = v_new if mode == "standard" else g + alpha * v_new
        out_x.append((x - r.astype(dt) * step).astype(dt))
        out_v.append(v_new.astype(v.dtype))
    return tuple(out_x + out_v)


# --- Gradient (ai.onnx.preview.training): fnx's own derivative of part of the graph ---------

@op("Gradient", domain=TRAINING, scope=True)
def gradient(node, *inputs, scope):
    """The derivatives of the value ``y`` with respect to the values ``xs``, where ``y``
    is what the enclosing graph computes from ``xs`` and ``zs`` (the node's inputs, in
    that order, are the values to differentiate at); a non-scalar ``y`` is summed first.
    The nodes between them run again under ``fnx.vjp``."""
    from ...transforms.vjp import vjp
    xs, zs, y = list(node.attr("xs")), list(node.attr("zs", [])), node.attr("y")
    graph = node.graph
    if graph is None:
        raise node.error("Gradient inside a function body is not supported")
    free = set(xs) | set(zs)
    needed, want = [], {y}
    for n in reversed(graph.nodes[:graph.nodes.index(node)]):
        if any(o in want for o in n.outputs if o):
            needed.append(n)
            want.update(i for i in n.inputs if i and i not in free)
    needed.reverse()
    if y in free:
        raise node.error(f"y={y!r} is one of xs/zs: its derivative is the identity")
    if not any(y in n.outputs for n in needed):
        raise node.error(f"no node before it computes y={y!r}")
    at = dict(zip(xs + zs, inputs))

    def y_of(*x_values):
        local = dict(scope)
        local.update(at)
        local.update(zip(xs, x_values))
        for n in needed:
            local.update(n.run(local))
        return fnp.sum(fnp.asarray(local[y]))

    _, pullback = vjp(y_of, *[fnp.asarray(at[x]) for x in xs])
    one = fnp.ones((), fnp.asarray(at[xs[0]]).dtype) if xs else None
    grads = pullback(one)
    return tuple(grads)
