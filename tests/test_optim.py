"""fnx.optim: optimizers against NumPy transcriptions of PyTorch's documented update rules
(and the LAMB / Lion papers), schedules, clipping, chain, jit and dtypes."""
import math

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
import fnx.optim as optim
from fnx import tree_util


@pytest.fixture(autouse=True)
def _x64():
    """These tests check float64 updates against float64 NumPy references, and that a
    float64 parameter keeps float64 state: they need jax_enable_x64 (as in JAX).
    tests/test_optax_names.py covers the default 32-bit mode."""
    with fnx.enable_x64():
        yield

# --- NumPy references (one step; state is a dict of NumPy arrays) ------------------------------


def ref_sgd(p, g, st, t, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    # torch.optim.SGD, dampening=0: d = g + wd p; b = mu b + d (b = d at step 1);
    # d = d + mu b (nesterov) else b; p -= lr d
    d = g + weight_decay * p
    if momentum:
        b = d.copy() if t == 1 else momentum * st["b"] + d
        st["b"] = b
        d = d + momentum * b if nesterov else b
    return p - lr * d


def ref_adam(p, g, st, t, lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False):
    # torch.optim.Adam / AdamW
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    v = st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    step_size = lr / bc1
    denom = np.sqrt(v) / math.sqrt(bc2) + eps
    return p - step_size * m / denom


def ref_rmsprop(p, g, st, t, lr, alpha=0.9, eps=1e-8, centered=False, momentum=0.0,
                weight_decay=0.0):
    # torch.optim.RMSprop
    g = g + weight_decay * p
    v = st["v"] = alpha * st.get("v", 0.0) + (1 - alpha) * g * g
    if centered:
        ga = st["ga"] = alpha * st.get("ga", 0.0) + (1 - alpha) * g
        avg = np.sqrt(v - ga * ga) + eps
    else:
        avg = np.sqrt(v) + eps
    if momentum:
        b = st["b"] = momentum * st.get("b", 0.0) + g / avg
        return p - lr * b
    return p - lr * g / avg


def ref_adagrad(p, g, st, t, lr, initial_accumulator_value=0.0, eps=1e-10, weight_decay=0.0):
    # torch.optim.Adagrad, lr_decay=0
    g = g + weight_decay * p
    s = st["s"] = st.get("s", initial_accumulator_value) + g * g
    return p - lr * g / (np.sqrt(s) + eps)


def ref_lamb(p, g, st, t, lr, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0):
    m = st["m"] = b1 * st.get("m", 0.0) + (1 - b1) * g
    v = st["v"] = b2 * st.get("v", 0.0) + (1 - b2) * g * g
    r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + weight_decay * p
    pn, rn = np.linalg.norm(p), np.linalg.norm(r)
    ratio = pn / rn if pn > 0 and rn > 0 else 1.0
    return p - lr * ratio * r


def ref_lion(p, g, st, t, lr, b1=0.9, b2=0.99, weight_decay=1e-3):
    m = st.get("m", 0.0)
    u = np.sign(b1 * m + (1 - b1) * g) + weight_decay * p
    st["m"] = b2 * m + (1 - b2) * g
    return p - lr * u


def _params(dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    return {"w": rng.normal(size=(3, 2)).astype(dtype), "b": rng.normal(size=(2,)).astype(dtype)}


def _grads(n, dtype="float64", seed=1):
    rng = np.random.default_rng(seed)
    return [{"w": rng.normal(size=(3, 2)).astype(dtype), "b": rng.normal(size=(2,)).astype(dtype)}
            for _ in range(n)]


def _to_fnx(tree):
    return tree_util.tree_map(fnp.asarray, tree)


def _run(opt, params, grads_seq):
    params = _to_fnx(params)
    state = opt.init(params)
    out = []
    for g in grads_seq:
        updates, state = opt.update(_to_fnx(g), state, params)
        params = optim.apply_updates(params, updates)
        out.append(tree_util.tree_map(np.asarray, params))
    return out, state


CASES = [
    ("sgd", lambda: optim.sgd(0.1), ref_sgd, dict(lr=0.1)),
    ("sgd-momentum", lambda: optim.sgd(0.1, momentum=0.9), ref_sgd,
     dict(lr=0.1, momentum=0.9)),
    ("sgd-nesterov", lambda: optim.sgd(0.05, momentum=0.8, nesterov=True), ref_sgd,
     dict(lr=0.05, momentum=0.8, nesterov=True)),
    ("sgd-wd", lambda: optim.sgd(0.1, momentum=0.9, weight_decay=0.01), ref_sgd,
     dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("sgd-nesterov-wd", lambda: optim.sgd(0.1, 0.9, True, 0.05), ref_sgd,
     dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05)),
    ("adam", lambda: optim.adam(1e-2), ref_adam, dict(lr=1e-2)),
    ("adam-betas", lambda: optim.adam(3e-2, b1=0.5, b2=0.9, eps=1e-3), ref_adam,
     dict(lr=3e-2, b1=0.5, b2=0.9, eps=1e-3)),
    ("adamw", lambda: optim.adamw(1e-2, weight_decay=0.1), ref_adam,
     dict(lr=1e-2, weight_decay=0.1, decoupled=True)),
    ("rmsprop", lambda: optim.rmsprop(1e-2, decay=0.99), ref_rmsprop,
     dict(lr=1e-2, alpha=0.99)),
    ("rmsprop-centered-momentum",
     lambda: optim.rmsprop(1e-2, decay=0.9, centered=True, momentum=0.5, weight_decay=0.01),
     ref_rmsprop, dict(lr=1e-2, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.01)),
    ("adagrad", lambda: optim.adagrad(0.1), ref_adagrad, dict(lr=0.1)),
    ("adagrad-init-wd", lambda: optim.adagrad(0.1, 0.1, 1e-6, weight_decay=0.01), ref_adagrad,
     dict(lr=0.1, initial_accumulator_value=0.1, eps=1e-6, weight_decay=0.01)),
    ("lamb", lambda: optim.lamb(1e-2, weight_decay=0.01), ref_lamb,
     dict(lr=1e-2, weight_decay=0.01)),
    ("lion", lambda: optim.lion(1e-2, weight_decay=0.1), ref_lion,
     dict(lr=1e-2, weight_decay=0.1)),
]


def _reference(ref, params, grads_seq, kw, lr_at=None):
    kw = dict(kw)
    lr = kw.pop("lr")
    p = {k: v.copy() for k, v in params.items()}
    states = {k: {} for k in p}
    out = []
    for t, g in enumerate(grads_seq, start=1):
        lr_t = lr if lr_at is None else lr_at(t - 1)
        p = {k: ref(p[k], g[k], states[k], t, lr_t, **kw) for k in p}
        out.append(p)
    return out


@pytest.mark.parametrize("name,make,ref,kw", CASES, ids=[c[0] for c in CASES])
def test_matches_reference_float64(name, make, ref, kw):
    params, grads = _params(), _grads(6)
    got, _ = _run(make(), params, grads)
    want = _reference(ref, params, grads, kw)
    for step, (a, b) in enumerate(zip(got, want)):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-12,
                                       err_msg=f"{name} step {step + 1} leaf {k}")


@pytest.mark.parametrize("name,make,ref,kw", CASES, ids=[c[0] for c in CASES])
def test_float32_stays_float32_and_close(name, make, ref, kw):
    params, grads = _params("float32"), _grads(4, "float32")
    got, state = _run(make(), params, grads)
    for a in got:
        assert all(v.dtype == np.float32 for v in a.values()), name
    for leaf in tree_util.tree_leaves(state):
        assert leaf.dtype in (np.float32, np.int32), (name, leaf.dtype)
    want = _reference(ref, {k: v.astype("float64") for k, v in params.items()},
                      [{k: v.astype("float64") for k, v in g.items()} for g in grads], kw)
    for a, b in zip(got, want):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=2e-5, atol=2e-5, err_msg=name)


def test_mixed_dtypes_keep_each_leaf_dtype():
    params = {"a": fnp.ones(3, dtype="float32"), "b": fnp.ones(2, dtype="float64"),
              "h": fnp.ones(2, dtype="float16")}
    for make in [lambda: optim.sgd(0.1, 0.9), lambda: optim.adamw(1e-2), lambda: optim.lion(1e-3),
                 lambda: optim.adam(optim.exponential_decay(1e-2, 10, 0.5)),
                 lambda: optim.chain(optim.clip_by_global_norm(0.5), optim.rmsprop(1e-2))]:
        opt = make()
        state = opt.init(params)
        p = params
        for _ in range(2):
            grads = tree_util.tree_map(lambda x: x * 0.5, p)
            u, state = opt.update(grads, state, p)
            assert {k: v.dtype for k, v in u.items()} == {k: v.dtype for k, v in p.items()}
            p = optim.apply_updates(p, u)
            assert {k: v.dtype for k, v in p.items()} == {k: v.dtype for k, v in params.items()}


# --- schedules --------------------------------------------------------------------------------

def _vals(s, steps):
    return np.array([float(s(t)) for t in steps])


def test_schedules_values():
    steps = [0, 1, 5, 9, 10, 11, 30]
    np.testing.assert_allclose(_vals(optim.constant_schedule(0.3), steps), 0.3)
    pc = optim.piecewise_constant_schedule(1.0, {5: 0.5, 10: 0.1})
    np.testing.assert_allclose(_vals(pc, steps), [1, 1, .5, .5, .05, .05, .05])
    st = optim.step_schedule(2.0, 10, gamma=0.5)
    np.testing.assert_allclose(_vals(st, steps), [2, 2, 2, 2, 1, 1, .25])
    ed = optim.exponential_decay(1.0, 10, 0.5)
    np.testing.assert_allclose(_vals(ed, steps), [0.5 ** (t / 10) for t in steps])
    eds = optim.exponential_decay(1.0, 10, 0.5, transition_begin=5, staircase=True,
                                  end_value=0.3)
    np.testing.assert_allclose(_vals(eds, steps), [1, 1, 1, 1, 1, 1, 0.3])
    np.testing.assert_allclose(float(eds(15)), 0.5)
    cd = optim.cosine_decay_schedule(1.0, 10, alpha=0.1)
    want = [0.9 * 0.5 * (1 + math.cos(math.pi * min(t, 10) / 10)) + 0.1 for t in steps]
    np.testing.assert_allclose(_vals(cd, steps), want)
    lin = optim.linear_schedule(1.0, 0.0, 10, transition_begin=5)
    np.testing.assert_allclose(_vals(lin, steps), [1, 1, 1, .6, .5, .4, 0])
    j = optim.join_schedules([optim.constant_schedule(1.0), optim.linear_schedule(2.0, 0.0, 4)],
                             [5])
    np.testing.assert_allclose(_vals(j, steps), [1, 1, 2, 0, 0, 0, 0])
    wc = optim.warmup_cosine_decay_schedule(0.0, 1.0, 4, 14, end_value=0.1)
    want = [t / 4 if t < 4 else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(t - 4, 10) / 10))
            for t in steps]
    np.testing.assert_allclose(_vals(wc, steps), want)
    # int32 array counts (what optimizers pass), under jit too
    c = fnp.asarray(7, dtype="int32")
    assert float(wc(c)) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 3 / 10)))
    assert float(fnx.jit(wc)(c)) == pytest.approx(float(wc(7)))


def test_schedule_as_learning_rate():
    params, grads = _params(), _grads(6)
    sched = optim.warmup_cosine_decay_schedule(0.0, 0.1, 2, 6)
    got, state = _run(optim.sgd(sched, momentum=0.9), params, grads)
    want = _reference(ref_sgd, params, grads, dict(lr=None, momentum=0.9),
                      lr_at=lambda t: float(sched(t)))
    for a, b in zip(got, want):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-12)
    got, _ = _run(optim.adam(sched), params, grads)
    want = _reference(ref_adam, params, grads, dict(lr=None), lr_at=lambda t: float(sched(t)))
    for a, b in zip(got, want):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-12)
    counts = [x for x in tree_util.tree_leaves(state) if x.dtype == np.int32]
    assert counts and all(int(c) == 6 for c in counts)


# --- clipping, chain, global norm -------------------------------------------------------------

def test_global_norm_and_clipping():
    tree = {"a": fnp.asarray([3.0, 0.0]), "b": (fnp.asarray([[4.0]]), None)}
    assert float(optim.global_norm(tree)) == pytest.approx(5.0)
    clip = optim.clip_by_global_norm(1.0)
    u, _ = clip.update(tree, clip.init(tree))
    np.testing.assert_allclose(np.asarray(u["a"]), [0.6, 0.0])
    np.testing.assert_allclose(np.asarray(u["b"][0]), [[0.8]])
    assert float(optim.global_norm(u)) == pytest.approx(1.0)
    big = optim.clip_by_global_norm(10.0)
    u, _ = big.update(tree, big.init(tree))
    np.testing.assert_allclose(np.asarray(u["a"]), [3.0, 0.0])
    c = optim.clip(2.0)
    u, _ = c.update(tree, c.init(tree))
    np.testing.assert_allclose(np.asarray(u["a"]), [2.0, 0.0])
    np.testing.assert_allclose(np.asarray(u["b"][0]), [[2.0]])


def test_chain_equals_manual_composition():
    params, grads = _params(), _grads(4)
    opt = optim.chain(optim.clip_by_global_norm(0.5), optim.sgd(0.1, momentum=0.9))
    got, state = _run(opt, params, grads)
    assert isinstance(state, tuple) and len(state) == 2
    clipped = []
    for g in grads:
        n = math.sqrt(sum(float(np.sum(v * v)) for v in g.values()))
        clipped.append({k: v * min(1.0, 0.5 / n) for k, v in g.items()})
    want = _reference(ref_sgd, params, clipped, dict(lr=0.1, momentum=0.9))
    for a, b in zip(got, want):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-10)


def test_adamw_mask():
    params, grads = _params(), _grads(3)
    opt = optim.adamw(1e-2, weight_decay=0.5, mask=lambda p: {"w": True, "b": False})
    got, _ = _run(opt, params, grads)
    w = _reference(ref_adam, params, grads, dict(lr=1e-2, weight_decay=0.5, decoupled=True))
    b = _reference(ref_adam, params, grads, dict(lr=1e-2))
    np.testing.assert_allclose(got[-1]["w"], w[-1]["w"], rtol=1e-10)
    np.testing.assert_allclose(got[-1]["b"], b[-1]["b"], rtol=1e-10)


# --- state: a pytree of arrays, jit, serialization --------------------------------------------

ALL = [
    lambda: optim.sgd(optim.exponential_decay(0.1, 5, 0.5), momentum=0.9, nesterov=True),
    lambda: optim.adam(optim.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10)),
    lambda: optim.adamw(1e-2, mask={"w": True, "b": False}),
    lambda: optim.rmsprop(1e-2, centered=True, momentum=0.9),
    lambda: optim.adagrad(optim.piecewise_constant_schedule(0.1, {3: 0.5})),
    lambda: optim.lamb(1e-2, weight_decay=0.01),
    lambda: optim.lion(1e-3),
    lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-3)),
]


@pytest.mark.parametrize("i", range(len(ALL)))
def test_jit_step_equals_eager_and_compiles_once(i):
    opt = ALL[i]()
    params = _to_fnx(_params("float32"))
    grads = [_to_fnx(g) for g in _grads(5, "float32")]

    def step(p, s, g):
        u, s = opt.update(g, s, p)
        return optim.apply_updates(p, u), s

    jstep = fnx.jit(step)
    pe, se = params, opt.init(params)
    pj, sj = params, opt.init(params)
    for g in grads:
        pe, se = step(pe, se, g)
        pj, sj = jstep(pj, sj, g)
        assert tree_util.tree_structure(se) == tree_util.tree_structure(sj)
        for a, b in zip(tree_util.tree_leaves((pe, se)), tree_util.tree_leaves((pj, sj))):
            assert a.dtype == b.dtype and a.weak_type == b.weak_type
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert jstep._cache_size() == 1
    assert jstep.trace_count == 1


def _pack(tree):
    import msgpack
    leaves, treedef = tree_util.tree_flatten(tree)
    blob = msgpack.packb([[str(np.asarray(x).dtype), list(np.shape(x)),
                           np.ascontiguousarray(np.asarray(x)).tobytes()] for x in leaves])
    return blob, treedef


def _unpack(blob, treedef):
    import msgpack
    leaves = [fnp.asarray(np.frombuffer(b, dtype=d).reshape(s))
              for d, s, b in msgpack.unpackb(blob)]
    return tree_util.tree_unflatten(treedef, leaves)


@pytest.mark.parametrize("i", range(len(ALL)))
def test_state_is_a_pytree_of_arrays_and_round_trips(i):
    pytest.importorskip("msgpack")
    opt = ALL[i]()
    params = _to_fnx(_params())
    g1, g2 = [_to_fnx(g) for g in _grads(2)]
    state = opt.init(params)
    for leaf in tree_util.tree_leaves(state):
        assert type(leaf) is fnx.Array, type(leaf)
        assert leaf.dtype in (np.float64, np.int32)
        if leaf.dtype == np.int32:
            assert leaf.shape == ()
    _, state = opt.update(g1, state, params)
    blob, treedef = _pack(state)
    restored = _unpack(blob, treedef)
    u1, s1 = opt.update(g2, state, params)
    u2, s2 = opt.update(g2, restored, params)
    for a, b in zip(tree_util.tree_leaves((u1, s1)), tree_util.tree_leaves((u2, s2))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --- convergence ------------------------------------------------------------------------------

CONVERGE = [
    ("sgd", lambda: optim.sgd(0.1), 200),
    ("sgd-nesterov", lambda: optim.sgd(0.05, momentum=0.9, nesterov=True), 200),
    ("adam", lambda: optim.adam(0.1), 300),
    ("adamw", lambda: optim.adamw(0.1, weight_decay=0.0), 300),
    ("rmsprop", lambda: optim.rmsprop(0.01, momentum=0.9, centered=True), 300),
    ("adagrad", lambda: optim.adagrad(0.5), 300),
    ("lamb", lambda: optim.lamb(optim.exponential_decay(0.1, 20, 0.7)), 300),
    ("lion", lambda: optim.lion(optim.cosine_decay_schedule(0.05, 300), weight_decay=0.0),
     300),
]


@pytest.mark.parametrize("name,make,n", CONVERGE, ids=[c[0] for c in CONVERGE])
def test_quadratic_converges(name, make, n):
    target = {"w": fnp.asarray([1.0, -2.0, 0.5]), "b": fnp.asarray(3.0)}
    scales = {"w": fnp.asarray([1.0, 2.0, 0.5]), "b": fnp.asarray(1.5)}

    def loss(p):
        return sum(fnp.sum(scales[k] * (p[k] - target[k]) ** 2) for k in p)

    opt = make()
    params = {"w": fnp.zeros(3), "b": fnp.zeros(())}  # strong types: one signature

    @fnx.jit
    def step(p, s):
        g = fnx.grad(loss)(p)
        u, s = opt.update(g, s, p)
        return optim.apply_updates(p, u), s

    state = opt.init(params)
    l0 = float(loss(params))
    for _ in range(n):
        params, state = step(params, state)
    assert float(loss(params)) < 1e-3 * l0, (name, float(loss(params)))
    assert step._cache_size() == 1


# --- errors -----------------------------------------------------------------------------------

def test_structure_mismatch_names_paths():
    opt = optim.adam(1e-3)
    state = opt.init({"layer": {"w": fnp.ones(2), "b": fnp.ones(1)}})
    bad = {"layer": {"w": fnp.ones(2), "bias": fnp.ones(1)}}
    with pytest.raises(ValueError, match=r"\['layer'\]\['bias'\].*\['layer'\]\['b'\]"):
        opt.update(bad, state)
    with pytest.raises(ValueError, match=r"shapes.*\['layer'\]\['w'\]: \(3,\) vs \(2,\)"):
        opt.update({"layer": {"w": fnp.ones(3), "b": fnp.ones(1)}}, state)
    sgd = optim.sgd(0.1, weight_decay=0.1)
    st = sgd.init({"a": fnp.ones(2)})
    with pytest.raises(ValueError, match="params"):
        sgd.update({"a": fnp.ones(2)}, st)            # weight decay needs params
    with pytest.raises(ValueError, match=r"\['c'\]"):
        sgd.update({"a": fnp.ones(2)}, st, {"a": fnp.ones(2), "c": fnp.ones(2)})
    with pytest.raises(ValueError, match="tuple of 2 states"):
        optim.sgd(0.1, momentum=0.9).update({"a": fnp.ones(2)}, ())


def test_bad_hyperparameters():
    with pytest.raises(ValueError, match="learning_rate must be >= 0"):
        optim.sgd(-0.1)
    with pytest.raises(ValueError, match=r"b1 must be in \[0, 1\)"):
        optim.adam(1e-3, b1=1.0)
    with pytest.raises(ValueError, match=r"b2 must be in \[0, 1\)"):
        optim.adamw(1e-3, b2=-0.1)
    with pytest.raises(ValueError, match="nesterov"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(ValueError, match="weight_decay"):
        optim.sgd(0.1, weight_decay=-1.0)
    with pytest.raises(ValueError, match="decay"):
        optim.rmsprop(0.1, decay=1.5)
    with pytest.raises(ValueError, match="max_norm"):
        optim.clip_by_global_norm(0.0)
    with pytest.raises(TypeError, match="learning_rate must be a number"):
        optim.adam("fast")
    with pytest.raises(ValueError, match="decay_steps"):
        optim.warmup_cosine_decay_schedule(0.0, 1.0, 10, 5)
    with pytest.raises(ValueError, match="transition_steps"):
        optim.exponential_decay(1.0, 0, 0.5)
    with pytest.raises(ValueError, match="mask"):
        opt = optim.adamw(1e-3, mask={"w": True})
        p = {"w": fnp.ones(2), "b": fnp.ones(2)}
        opt.update(p, opt.init(p), p)


def test_optax_losses_broadcast_as_optax_but_warn_on_a_cross_broadcast():
    import warnings
    from fnx.optim.losses import LossBroadcastWarning
    with pytest.warns(LossBroadcastWarning, match=r"huber_loss: predictions \(3, 1\) and "
                                                  r"targets \(3,\) broadcast to \(3, 3\)"):
        assert optim.huber_loss(fnp.ones((3, 1)), fnp.ones(3)).shape == (3, 3)
    with pytest.warns(LossBroadcastWarning, match="sigmoid_binary_cross_entropy"):
        optim.sigmoid_binary_cross_entropy(fnp.ones((3, 1)), fnp.ones(3))
    with warnings.catch_warnings():  # broadcasting into the larger operand's shape is quiet
        warnings.simplefilter("error")
        assert optim.sigmoid_binary_cross_entropy(fnp.ones((3, 4)), fnp.ones(4)).shape == (3, 4)
        assert optim.huber_loss(fnp.ones((3, 4)), 0.5).shape == (3, 4)
