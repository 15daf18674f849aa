"""fnx.nn.Module: pytree structure, names, partition/combine, apply, init, summary, jit."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import nn
from fnx.tree_util import tree_leaves, tree_map


KEY = fnx.random.PRNGKey(0)


class Block(nn.Module):
    def __init__(self, c):
        self.conv1 = nn.Conv2d(c, 3, padding="same")
        self.bn1 = nn.BatchNorm2d()

    def __call__(self, x):
        return nn.relu(self.bn1(self.conv1(x)))


class Net(nn.Module):
    def __init__(self):
        self.blk1 = Block(4)
        self.layers = [nn.Flatten(), nn.Linear(5)]
        self.scale = 2.0

    def __call__(self, x):
        x = self.blk1(x)
        for layer in self.layers:
            x = layer(x)
        return x * self.scale


def make_net():
    return nn.init(Net(), KEY, fnx.ShapeDtypeStruct((2, 3, 4, 4), "float32"))


def test_init_from_placeholders_shapes_and_names():
    net = make_net()
    shapes = {k: v.shape for k, v in net.params().items()}
    assert shapes == {"blk1.conv1.weight": (4, 3, 3, 3), "blk1.conv1.bias": (4,),
                      "blk1.bn1.weight": (4,), "blk1.bn1.bias": (4,),
                      "layers.1.weight": (5, 64), "layers.1.bias": (5,)}
    assert set(net.states()) == {"blk1.bn1.running_mean", "blk1.bn1.running_var",
                                 "blk1.bn1.num_batches_tracked"}
    # static config is aux data, not leaves
    assert len(tree_leaves(net)) == 9
    # the definition is unchanged
    assert Net().params() == {}


def test_init_with_array_placeholder_and_distinct_keys():
    a = nn.init(nn.Sequential(nn.Linear(8), nn.Linear(8)), KEY, fnp.ones((1, 8)))
    w0, w1 = a.params()["layers.0.weight"], a.params()["layers.1.weight"]
    assert not np.allclose(w0, w1)
    b = nn.init(nn.Sequential(nn.Linear(8), nn.Linear(8)), KEY, fnp.ones((1, 8)))
    np.testing.assert_array_equal(w0, b.params()["layers.0.weight"])


def test_uninitialized_call_raises():
    with pytest.raises(ValueError, match="fnx.nn.init"):
        nn.Linear(3)(fnp.ones((2, 4)))


def test_eager_construction():
    lin = nn.Linear(4, 3, key=KEY)
    assert lin.weight.shape == (3, 4) and lin.bias.shape == (3,)
    assert lin(fnp.ones((2, 4))).shape == (2, 3)
    conv = nn.Conv2d(3, 8, 3, key=KEY)
    assert conv.weight.shape == (8, 3, 3, 3)


def test_immutable_and_replace():
    lin = nn.Linear(4, 3, key=KEY)
    with pytest.raises(AttributeError, match="replace"):
        lin.weight = fnp.zeros((3, 4))
    lin2 = lin.replace(weight=fnp.zeros((3, 4)))
    np.testing.assert_array_equal(lin2(fnp.ones((1, 4))), lin.bias[None])
    assert not np.allclose(lin.weight, 0)


def test_pytree_roundtrip_and_static_aux():
    net = make_net()
    leaves, tdef = fnx.tree_util.tree_flatten(net)
    net2 = fnx.tree_util.tree_unflatten(tdef, leaves)
    assert isinstance(net2, Net) and net2.scale == 2.0
    x = fnx.random.normal(KEY, (2, 3, 4, 4))
    np.testing.assert_allclose(net(x), net2(x))
    assert fnx.tree_util.tree_structure(net) != fnx.tree_util.tree_structure(net.eval())


def test_train_eval_flags():
    net = make_net()
    assert net.training and net.blk1.bn1.training and net.layers[1].training
    ev = net.eval()
    assert not ev.training and not ev.blk1.bn1.training and not ev.layers[0].training
    assert net.blk1.bn1.training          # original unchanged
    assert ev.train().blk1.bn1.training


def test_partition_combine_and_grad_only_params():
    net = make_net()
    params, rest = nn.partition(net)
    assert set(params.params()) == set(net.params()) and params.states() == {}
    assert rest.params() == {} and set(rest.states()) == set(net.states())
    back = nn.combine(params, rest)
    for a, b in zip(tree_leaves(back), tree_leaves(net)):
        assert a is b
    x = fnx.random.normal(KEY, (2, 3, 4, 4))

    def loss(p, r):
        return fnp.sum(nn.combine(p, r)(x) ** 2)
    g = fnx.grad(loss)(params, rest)
    assert set(g.params()) == set(net.params())
    assert g.states() == {}
    assert all(v.shape == net.params()[k].shape for k, v in g.params().items())


def test_apply_updates_states_only_in_train_mode():
    net = make_net()
    x = fnx.random.normal(KEY, (2, 3, 4, 4))
    y, new = nn.apply(net, x)
    np.testing.assert_allclose(y, net(x))
    assert int(new.states()["blk1.bn1.num_batches_tracked"]) == 1
    assert not np.allclose(new.states()["blk1.bn1.running_mean"], 0)
    for k in net.params():
        assert new.params()[k] is net.params()[k]
    y2, same = nn.apply(net.eval(), x)
    assert same.states()["blk1.bn1.running_mean"] is net.states()["blk1.bn1.running_mean"]


def test_summary_and_repr():
    net = make_net()
    s = nn.summary(net)
    assert "blk1.conv1.weight" in s and "(4, 3, 3, 3)" in s and "108" in s
    assert "blk1.bn1.running_var" in s and "state" in s
    total = sum(int(np.prod(v.shape)) for v in net.params().values())
    assert f"Total params: {total:,}" in s
    r = repr(net)
    assert "blk1: Block" in r and "conv1: Conv2d" in r and "float32[4, 3, 3, 3]" in r
    assert f"{total:,} params" in r


def _train_step(model, x, t, key):
    params, rest = nn.partition(model)

    def loss(p, r):
        out, new = nn.apply(nn.combine(p, r), x, key=key)
        return nn.cross_entropy(out, t), new
    (val, new), g = fnx.value_and_grad(loss, has_aux=True)(params, rest)
    params = tree_map(lambda p, gp: p - 0.1 * gp, params, g)
    _, rest = nn.partition(new)
    return nn.combine(params, rest), val


def test_jit_train_step_equals_eager():
    model = nn.Sequential(nn.Conv2d(4, 3, padding=1), nn.BatchNorm2d(), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.3), nn.Linear(3))
    model = nn.init(model, KEY, fnx.ShapeDtypeStruct((4, 2, 4, 4), "float32"))
    x = fnx.random.normal(KEY, (4, 2, 4, 4))
    t = fnp.array([0, 1, 2, 1])
    eager, le = _train_step(model, x, t, KEY)
    step = fnx.jit(_train_step)
    jitted, lj = step(model, x, t, KEY)
    np.testing.assert_allclose(le, lj, rtol=1e-5)
    for (n, a), b in zip(eager.params().items(), jitted.params().values()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=n)
    for (n, a), b in zip(eager.states().items(), jitted.states().values()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=n)
    assert int(jitted.states()["layers.1.num_batches_tracked"]) == 1
    # training decreases the loss
    m = model
    losses = []
    for _ in range(5):
        m, v = step(m, x, t, KEY)
        losses.append(float(v))
    assert losses[-1] < losses[0]
