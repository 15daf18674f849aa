"""Transform compositions on realistic functions, against float64 finite differences.

Each model below is written once, generic over the array namespace ``xp``: fnx
differentiates the ``xp=fnx.numpy`` version, and the references are central
finite differences of the ``xp=numpy`` version (plain float64 NumPy), so the
reference shares no code with fnx. Per-example gradients are also compared with
a Python loop of ``grad``.

Models (one example at a time; params are a dict of arrays):

* ``mlp``: tanh then relu hidden layers, scalar regression output, squared error;
* ``xent_index`` / ``xent_onehot``: tanh layer + linear classifier, softmax
  cross-entropy through a stable logsumexp, the integer label picked by
  indexing (a traced gather) or by a one-hot mask;
* ``layernorm``: a linear map, layer norm (mean / var over the last axis, eps,
  scale and bias), a tanh-weighted readout;
* ``attention``: a pre-layer-norm causal two-head self-attention block
  (q/k/v projections, softmax over keys, output projection, residual).

Compositions: grad, grad(grad) (Hessian-vector products, also as jvp(grad),
and a second derivative along a line), jacfwd(jacrev), hessian (also jitted, vmapped, and on
the dict of params), vmap(grad) (per-example gradients), grad(vmap),
jacrev/jacfwd(vmap), jit(grad), grad(jit), vmap(jit), jit(vmap(grad)), MAML
(grad through an inner SGD step; vmapped over tasks), gradients of functions
whose inner grad closes over the outer variable (no perturbation confusion),
and value_and_grad with has_aux and argnums tuples.

Tolerances sit a few orders of magnitude above the differences' own error
(~1e-10 first order, ~1e-7 second order), far below the gradients' size.
"""
import functools

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp

# The references are float64 finite differences: run with x64 on, as JAX's suite does;
# test_default_mode_is_float32_in_every_composition covers the default (x64 off) mode.
pytestmark = pytest.mark.x64

B = 4             # examples per batch
ALPHA = 0.1       # inner SGD step size for MAML
H1 = 1e-6         # first-order central differences
H2 = 1e-4         # second-order differences (and outer steps of nested differences)
GRAD_TOL = dict(rtol=1e-6, atol=1e-8)
HESS_TOL = dict(rtol=1e-4, atol=1e-6)
NESTED_TOL = dict(rtol=1e-4, atol=1e-6)
EXACT = dict(rtol=1e-10, atol=1e-12)   # fnx against fnx (same math, other transform order)


# --- building blocks, generic over xp (fnx.numpy or numpy) -------------------------------

def _layer_norm(z, scale, bias, xp, eps=1e-5):
    mu = z.mean(axis=-1, keepdims=True)
    var = xp.var(z, axis=-1, keepdims=True)
    return (z - mu) / xp.sqrt(var + eps) * scale + bias


def _softmax(s, xp):
    e = xp.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _logsumexp(z, xp):
    m = z.max()
    return m + xp.log(xp.exp(z - m).sum())


def _mlp_apply(p, x, xp):
    h = xp.tanh(x @ p["w1"] + p["b1"])
    h = xp.maximum(h @ p["w2"] + p["b2"], 0.0)
    return (h @ p["w3"] + p["b3"])[0]


def _mlp_loss(out, y, xp):
    return (out - y) ** 2


def _clf_apply(p, x, xp):
    return xp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def _xent_index(logits, y, xp):
    return _logsumexp(logits, xp) - logits[y]


def _xent_onehot(logits, y, xp):
    onehot = (xp.arange(logits.shape[-1]) == y).astype(logits.dtype)
    return _logsumexp(logits, xp) - (onehot * logits).sum()


def _ln_apply(p, x, xp):
    return _layer_norm(x @ p["w"], p["scale"], p["bias"], xp)


def _ln_loss(out, y, xp):
    return (xp.tanh(out) * y).sum()


T, D, NH = 3, 4, 2
CAUSAL = np.tril(np.ones((T, T), dtype=bool))


def _attn_apply(p, x, xp):
    t, d = x.shape
    dh = d // NH
    h = _layer_norm(x, p["ln_scale"], p["ln_bias"], xp)
    q = (h @ p["wq"]).reshape(t, NH, dh)
    k = (h @ p["wk"]).reshape(t, NH, dh)
    v = (h @ p["wv"]).reshape(t, NH, dh)
    s = xp.einsum("thd,shd->hts", q, k) / np.sqrt(dh)
    a = _softmax(xp.where(CAUSAL, s, -1e9), xp)
    o = xp.einsum("hts,shd->thd", a, v).reshape(t, d)
    return x + o @ p["wo"]


def _attn_loss(out, y, xp):
    return ((out - y) ** 2).mean()


# --- cases: model, data, parameters -------------------------------------------------------

class Case:
    def __init__(self, name, apply, loss, params, x, y):
        self.name, self._apply, self._loss = name, apply, loss
        self.keys = sorted(params)
        self.shapes = {k: params[k].shape for k in self.keys}
        self.p_np, self.x_np, self.y_np = params, x, y
        self.theta = np.concatenate([params[k].ravel() for k in self.keys])

    # fnx arrays made at use, so they are float64 under x64 and float32 without it
    @property
    def p(self):
        return {k: fnp.asarray(v) for k, v in self.p_np.items()}

    @property
    def x(self):
        return fnp.asarray(self.x_np)

    @property
    def y(self):
        return fnp.asarray(self.y_np)

    # fnx side
    def f(self, p, x, y):
        return self._loss(self._apply(p, x, fnp), y, fnp)

    def f_aux(self, p, x, y):
        out = self._apply(p, x, fnp)
        return self._loss(out, y, fnp), {"out": out, "x_sq": (x * x).sum()}

    def f_flat(self, theta, x, y):
        return self.f(self.unravel(theta), x, y)

    # NumPy side (the references)
    def f_np(self, theta, x, y):
        return float(self._loss(self._apply(self.unravel(theta), x, np), y, np))

    def apply_np(self, theta, x):
        return self._apply(self.unravel(theta), x, np)

    # flat parameter vectors (works on fnx arrays and tracers too)
    def unravel(self, theta):
        out, i = {}, 0
        for k in self.keys:
            n = int(np.prod(self.shapes[k]))
            out[k] = theta[i:i + n].reshape(self.shapes[k])
            i += n
        return out

    def ravel(self, tree):
        return np.concatenate([np.asarray(tree[k]).ravel() for k in self.keys])


def _make_cases():
    rng = np.random.default_rng(20240611)
    n = rng.standard_normal
    cases = {}

    p = {"w1": n((3, 5)) / 2, "b1": n(5) / 4, "w2": n((5, 4)) / 2, "b2": n(4) / 4,
         "w3": n((4, 1)), "b3": n(1)}
    x, y = n((B, 3)), n(B)
    pre = np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    # the relu kink must be far from every example, or differences straddle it
    assert np.abs(pre).min() > 1e-2, np.abs(pre).min()
    cases["mlp"] = Case("mlp", _mlp_apply, _mlp_loss, p, x, y)

    p = {"w1": n((4, 4)) / 2, "b1": n(4) / 4, "w2": n((4, 3)), "b2": n(3) / 4}
    x, y = n((B, 4)), np.array([2, 0, 1, 2])
    cases["xent_index"] = Case("xent_index", _clf_apply, _xent_index, p, x, y)
    cases["xent_onehot"] = Case("xent_onehot", _clf_apply, _xent_onehot, p, x, y)

    p = {"w": n((5, 5)) / 2, "scale": 1 + n(5) / 4, "bias": n(5) / 4}
    cases["layernorm"] = Case("layernorm", _ln_apply, _ln_loss, p, n((B, 5)), n((B, 5)))

    p = {k: n((D, D)) / 2 for k in ("wq", "wk", "wv", "wo")}
    p["ln_scale"], p["ln_bias"] = 1 + n(D) / 4, n(D) / 4
    cases["attention"] = Case("attention", _attn_apply, _attn_loss, p, n((B, T, D)),
                              n((B, T, D)))
    return cases


CASES = _make_cases()
NAMES = list(CASES)


# --- finite differences (float64 NumPy) ---------------------------------------------------

def fd_grad(fun, theta, h=H1):
    """Central differences, one entry of ``theta`` at a time."""
    theta = np.asarray(theta, dtype=np.float64)
    g = np.empty(theta.shape)
    for i in np.ndindex(*theta.shape):
        e = np.zeros(theta.shape)
        e[i] = h
        g[i] = (fun(theta + e) - fun(theta - e)) / (2 * h)
    return g


def fd_dir(fun, theta, v, h=H2):
    """Central difference along a direction ``v``."""
    return (fun(theta + h * v) - fun(theta - h * v)) / (2 * h)


def fd_hessian(fun, theta, h=H2):
    """Four-point second differences, entry by entry (symmetric by construction)."""
    n = theta.size
    eye = np.eye(n) * h
    hess = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            a, b = eye[i], eye[j]
            hess[i, j] = hess[j, i] = (fun(theta + a + b) - fun(theta + a - b)
                                       - fun(theta - a + b) + fun(theta - a - b)) / (4 * h * h)
    return hess


@functools.lru_cache(maxsize=None)
def ref_grads(name):
    """FD gradient w.r.t. the flat params, one row per example."""
    c = CASES[name]
    return np.stack([fd_grad(lambda t: c.f_np(t, c.x_np[i], c.y_np[i]), c.theta)
                     for i in range(B)])


@functools.lru_cache(maxsize=None)
def ref_hessian(name):
    """FD Hessian w.r.t. the flat params, example 0."""
    c = CASES[name]
    return fd_hessian(lambda t: c.f_np(t, c.x_np[0], c.y_np[0]), c.theta)


def _directions(c, k=3, seed=0):
    v = np.random.default_rng(seed).standard_normal((k, c.theta.size))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _ex(c, i):
    return c.p, c.x[i], c.y[i]


# --- first order --------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_forward_values_agree_with_numpy(name):
    c = CASES[name]
    for i in range(B):
        assert np.isclose(float(c.f(*_ex(c, i))), c.f_np(c.theta, c.x_np[i], c.y_np[i]),
                          rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_grad(name):
    c = CASES[name]
    g = fnx.grad(c.f)(*_ex(c, 0))
    assert set(g) == set(c.keys) and all(g[k].shape == c.shapes[k] for k in c.keys)
    assert all(g[k].dtype == np.float64 for k in c.keys)
    np.testing.assert_allclose(c.ravel(g), ref_grads(name)[0], **GRAD_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_jit_grad(name):
    c = CASES[name]
    step = fnx.jit(fnx.grad(c.f))
    for i in (0, 1):  # second call hits the jit cache
        np.testing.assert_allclose(c.ravel(step(*_ex(c, i))), ref_grads(name)[i], **GRAD_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_grad_jit(name):
    c = CASES[name]
    g = fnx.grad(fnx.jit(c.f))(*_ex(c, 0))
    np.testing.assert_allclose(c.ravel(g), ref_grads(name)[0], **GRAD_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_value_and_grad_has_aux_argnums_tuple(name):
    c = CASES[name]
    p, x, y = _ex(c, 0)
    x_np, y_np = c.x_np[0], c.y_np[0]
    gx_ref = fd_grad(lambda xx: c.f_np(c.theta, xx, y_np), x_np)
    for vg in (fnx.value_and_grad(c.f_aux, argnums=(0, 1), has_aux=True),
               fnx.jit(fnx.value_and_grad(c.f_aux, argnums=(0, 1), has_aux=True))):
        (value, aux), (gp, gx) = vg(p, x, y)
        assert np.isclose(float(value), c.f_np(c.theta, x_np, y_np), rtol=1e-12)
        np.testing.assert_allclose(aux["out"], c.apply_np(c.theta, x_np), rtol=1e-12)
        np.testing.assert_allclose(aux["x_sq"], (x_np ** 2).sum(), rtol=1e-12)
        np.testing.assert_allclose(c.ravel(gp), ref_grads(name)[0], **GRAD_TOL)
        assert gx.shape == x.shape
        np.testing.assert_allclose(gx, gx_ref, **GRAD_TOL)
    # argnums order is the order of the returned gradients
    gx2, gp2 = fnx.grad(c.f, argnums=(1, 0))(p, x, y)
    np.testing.assert_allclose(gx2, gx, **EXACT)
    np.testing.assert_allclose(c.ravel(gp2), c.ravel(gp), **EXACT)


# --- batching -----------------------------------------------------------------------------

@pytest.mark.parametrize("jit", [False, True], ids=["vmap_grad", "jit_vmap_grad"])
@pytest.mark.parametrize("name", NAMES)
def test_per_example_gradients(name, jit):
    c = CASES[name]
    pe = fnx.vmap(fnx.grad(c.f), in_axes=(None, 0, 0))
    if jit:
        pe = fnx.jit(pe)
    g = pe(c.p, c.x, c.y)
    assert all(g[k].shape == (B,) + c.shapes[k] for k in c.keys)
    flat = np.stack([np.concatenate([np.asarray(g[k][i]).ravel() for k in c.keys])
                     for i in range(B)])
    loop = np.stack([c.ravel(fnx.grad(c.f)(*_ex(c, i))) for i in range(B)])
    np.testing.assert_allclose(flat, loop, **EXACT)
    np.testing.assert_allclose(flat, ref_grads(name), **GRAD_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_grad_of_vmap(name):
    c = CASES[name]

    def batch_loss(p):
        return fnx.vmap(c.f, in_axes=(None, 0, 0))(p, c.x, c.y).mean()

    ref = ref_grads(name).mean(axis=0)
    np.testing.assert_allclose(c.ravel(fnx.grad(batch_loss)(c.p)), ref, **GRAD_TOL)
    np.testing.assert_allclose(c.ravel(fnx.jit(fnx.grad(batch_loss))(c.p)), ref, **GRAD_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_of_jit(name):
    c = CASES[name]
    values = fnx.vmap(fnx.jit(c.f), in_axes=(None, 0, 0))(c.p, c.x, c.y)
    assert values.shape == (B,)
    ref = [c.f_np(c.theta, c.x_np[i], c.y_np[i]) for i in range(B)]
    np.testing.assert_allclose(values, ref, rtol=1e-12)
    g = fnx.vmap(fnx.jit(fnx.grad(c.f)), in_axes=(None, 0, 0))(c.p, c.x, c.y)
    flat = np.stack([np.concatenate([np.asarray(g[k][i]).ravel() for k in c.keys])
                     for i in range(B)])
    np.testing.assert_allclose(flat, ref_grads(name), **GRAD_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_jacobians_of_vmapped_losses_are_per_example_gradients(name):
    c = CASES[name]
    theta = fnp.asarray(c.theta)

    def losses(t):
        return fnx.vmap(c.f_flat, in_axes=(None, 0, 0))(t, c.x, c.y)

    for jac in (fnx.jacrev, fnx.jacfwd):
        j = jac(losses)(theta)
        assert j.shape == (B, c.theta.size)
        np.testing.assert_allclose(j, ref_grads(name), **GRAD_TOL)


def test_float32_stays_float32():
    c = CASES["attention"]
    p32 = {k: v.astype("float32") for k, v in c.p.items()}
    x32, y32 = c.x.astype("float32"), c.y.astype("float32")
    g = fnx.jit(fnx.vmap(fnx.grad(c.f), in_axes=(None, 0, 0)))(p32, x32, y32)
    assert all(g[k].dtype == np.float32 for k in c.keys)
    flat = np.stack([np.concatenate([np.asarray(g[k][i]).ravel() for k in c.keys])
                     for i in range(B)])
    np.testing.assert_allclose(flat, ref_grads("attention"), rtol=1e-3, atol=1e-5)


def test_default_mode_is_float32_in_every_composition():
    """With x64 off (JAX's default) the float64 NumPy data narrows to float32, and every
    composition gives float32 results that agree with the float64 references to float32
    precision; eval_shape agrees with what is computed."""
    c = CASES["attention"]
    with fnx.enable_x64(False):
        p, x, y = c.p, c.x, c.y
        assert all(v.dtype == np.float32 for v in p.values()) and x.dtype == np.float32
        per_example = fnx.vmap(fnx.grad(c.f), in_axes=(None, 0, 0))
        for fn in (per_example, fnx.jit(per_example)):
            g = fn(c.p_np, c.x_np, c.y_np)       # NumPy float64 in: narrowed as in JAX
            assert all(g[k].dtype == np.float32 for k in c.keys)
            flat = np.stack([np.concatenate([np.asarray(g[k][i]).ravel() for k in c.keys])
                             for i in range(B)])
            np.testing.assert_allclose(flat, ref_grads("attention"), rtol=1e-3, atol=1e-5)
        shapes = fnx.eval_shape(per_example, c.p_np, c.x_np, c.y_np)
        assert all(shapes[k].dtype == np.float32 for k in c.keys)
        theta = fnp.asarray(c.theta)
        hess = fnx.jit(fnx.hessian(c.f_flat))(theta, x[0], y[0])
        assert hess.dtype == np.float32
        assert fnx.eval_shape(fnx.hessian(c.f_flat), c.theta, c.x_np[0], c.y_np[0]).dtype \
            == np.float32


def test_batched_cross_entropy_with_fancy_indexed_labels():
    """The batch-level form: logits[arange(B), labels], under grad and jit(grad)."""
    c = CASES["xent_index"]

    def loss(p, x, labels, xp):
        logits = _clf_apply(p, x, xp)
        m = logits.max(axis=1, keepdims=True)
        lse = (m + xp.log(xp.exp(logits - m).sum(axis=1, keepdims=True)))[:, 0]
        return (lse - logits[xp.arange(x.shape[0]), labels]).mean()

    ref = fd_grad(lambda t: float(loss(c.unravel(t), c.x_np, c.y_np, np)), c.theta)
    np.testing.assert_allclose(ref, ref_grads("xent_index").mean(axis=0), **GRAD_TOL)
    f = functools.partial(loss, xp=fnp)
    np.testing.assert_allclose(c.ravel(fnx.grad(f)(c.p, c.x, c.y)), ref, **GRAD_TOL)
    np.testing.assert_allclose(c.ravel(fnx.jit(fnx.grad(f))(c.p, c.x, c.y)), ref, **GRAD_TOL)


# --- second order -------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_grad_of_grad(name):
    c = CASES[name]
    p, x, y = _ex(c, 0)
    hess = ref_hessian(name)
    for v in _directions(c, k=2):
        vt = c.unravel(fnp.asarray(v))

        def gv(p):  # <grad f(p), v>: its gradient is the Hessian-vector product
            g = fnx.grad(c.f)(p, x, y)
            return sum((g[k] * vt[k]).sum() for k in c.keys)

        np.testing.assert_allclose(c.ravel(fnx.grad(gv)(p)), hess @ v, **HESS_TOL)
        # forward over reverse: the same product as jvp(grad)
        _, hv = fnx.jvp(lambda p: fnx.grad(c.f)(p, x, y), (p,), (vt,))
        np.testing.assert_allclose(c.ravel(hv), hess @ v, **HESS_TOL)

        # a scalar second derivative along the line p + t v
        def line(t):
            return c.f({k: p[k] + t * vt[k] for k in c.keys}, x, y)

        d2 = fnx.grad(fnx.grad(line))(fnp.asarray(0.0, dtype=fnp.float64))
        assert d2.dtype == np.float64
        np.testing.assert_allclose(float(d2), v @ hess @ v, **HESS_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_jacfwd_of_jacrev_and_hessian(name):
    c = CASES[name]
    _, x, y = _ex(c, 0)
    theta = fnp.asarray(c.theta)
    ref = ref_hessian(name)
    h1 = np.asarray(fnx.jacfwd(fnx.jacrev(c.f_flat))(theta, x, y))
    assert h1.shape == ref.shape
    np.testing.assert_allclose(h1, ref, **HESS_TOL)
    h2 = np.asarray(fnx.hessian(c.f_flat)(theta, x, y))
    np.testing.assert_allclose(h2, h1, **EXACT)
    h3 = fnx.jit(fnx.hessian(c.f_flat))(theta, x, y)
    np.testing.assert_allclose(h3, h1, **EXACT)
    per_example = fnx.vmap(fnx.hessian(c.f_flat), in_axes=(None, 0, 0))(theta, c.x, c.y)
    assert per_example.shape == (B,) + ref.shape
    np.testing.assert_allclose(per_example[0], h1, **EXACT)
    # hessian on the dict of params: blocks shaped shape_i + shape_j
    hd = fnx.hessian(c.f)(c.p, x, y)
    offs = np.cumsum([0] + [int(np.prod(c.shapes[k])) for k in c.keys])
    for i, ki in enumerate(c.keys):
        for j, kj in enumerate(c.keys):
            blk = np.asarray(hd[ki][kj])
            assert blk.shape == c.shapes[ki] + c.shapes[kj]
            np.testing.assert_allclose(
                blk.reshape(offs[i + 1] - offs[i], offs[j + 1] - offs[j]),
                h1[offs[i]:offs[i + 1], offs[j]:offs[j + 1]], **EXACT)


# --- grad through grad: MAML and closures over outer traced values ------------------------

@pytest.mark.parametrize("name", NAMES)
def test_maml_grad_through_inner_sgd_step(name):
    c = CASES[name]
    (xs, ys), (xq, yq) = (c.x[0], c.y[0]), (c.x[1], c.y[1])

    def meta(p):
        g = fnx.grad(c.f)(p, xs, ys)
        return c.f({k: p[k] - ALPHA * g[k] for k in c.keys}, xq, yq)

    def meta_np(theta):
        g = fd_grad(lambda t: c.f_np(t, c.x_np[0], c.y_np[0]), theta, h=1e-5)
        return c.f_np(theta - ALPHA * g, c.x_np[1], c.y_np[1])

    g = c.ravel(fnx.grad(meta)(c.p))
    np.testing.assert_allclose(c.ravel(fnx.jit(fnx.grad(meta))(c.p)), g, **EXACT)
    for v in _directions(c):
        np.testing.assert_allclose(g @ v, fd_dir(meta_np, c.theta, v), **NESTED_TOL)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_of_maml_meta_gradients_over_tasks(name):
    c = CASES[name]

    def meta(p, xs, ys, xq, yq):
        g = fnx.grad(c.f)(p, xs, ys)
        return c.f({k: p[k] - ALPHA * g[k] for k in c.keys}, xq, yq)

    # two tasks: support examples 0 and 1, query examples 2 and 3
    batched = fnx.jit(fnx.vmap(fnx.grad(meta), in_axes=(None, 0, 0, 0, 0)))(
        c.p, c.x[:2], c.y[:2], c.x[2:], c.y[2:])
    for t in range(2):
        loop = fnx.grad(meta)(c.p, c.x[t], c.y[t], c.x[t + 2], c.y[t + 2])
        np.testing.assert_allclose(c.ravel({k: batched[k][t] for k in c.keys}),
                                   c.ravel(loop), **EXACT)


@pytest.mark.parametrize("name", NAMES)
def test_grad_wrt_input_of_a_param_gradient_norm(name):
    """The inner grad (w.r.t. params) closes over x, which the outer grad traces."""
    c = CASES[name]
    y, y_np = c.y[0], c.y_np[0]

    def penalty(x):
        g = fnx.grad(lambda p: c.f(p, x, y))(c.p)
        return sum((g[k] ** 2).sum() for k in c.keys)

    def penalty_np(x):
        return (fd_grad(lambda t: c.f_np(t, x, y_np), c.theta, h=1e-5) ** 2).sum()

    gx = np.asarray(fnx.grad(penalty)(c.x[0]))
    assert gx.shape == c.x_np[0].shape
    rng = np.random.default_rng(1)
    for _ in range(2):
        v = rng.standard_normal(gx.shape)
        v /= np.linalg.norm(v)
        np.testing.assert_allclose((gx * v).sum(), fd_dir(penalty_np, c.x_np[0], v),
                                   **NESTED_TOL)


def test_no_perturbation_confusion():
    grad, jvp = fnx.grad, fnx.jvp
    assert float(grad(lambda x: grad(lambda y: x * y)(1.0))(2.0)) == 1.0
    # Siskind & Pearlmutter: d/dx [x * d/dy (x + y)] = 1 (2 with confused perturbations)
    assert float(grad(lambda x: x * grad(lambda y: x + y)(1.0))(1.0)) == 1.0
    assert float(jvp(lambda x: x * jvp(lambda y: x + y, (1.0,), (1.0,))[1],
                     (1.0,), (1.0,))[1]) == 1.0
    assert float(grad(lambda x: jvp(lambda y: x * y, (1.0,), (1.0,))[1])(2.0)) == 1.0
    assert float(jvp(lambda x: grad(lambda y: x * y ** 2)(3.0), (2.0,), (1.0,))[1]) == 6.0
    assert float(fnx.jit(grad(lambda x: grad(lambda y: x * y)(1.0)))(2.0)) == 1.0
    assert float(grad(fnx.jit(lambda x: grad(lambda y: x * y)(1.0)))(2.0)) == 1.0
    xs = fnp.asarray([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(fnx.vmap(lambda x: grad(lambda y: x * y ** 2)(1.0))(xs),
                                  [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(
        fnx.vmap(grad(lambda x: grad(lambda y: x * y ** 2)(x)))(xs), [4.0, 8.0, 12.0])
    assert float(grad(lambda x: fnx.vmap(lambda y: x * y)(xs).sum())(2.0)) == 6.0
    assert float(grad(grad(grad(lambda x: x ** 4)))(1.5)) == 36.0
