"""``fnx.sharding``: JAX's meshes, partition specs and named shardings on a process's one
device, so that JAX programs written for many devices run unchanged on one (JAX's own
SPMD MNIST example does, with its imports changed)."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.sharding import AxisType, Mesh, NamedSharding, P, PartitionSpec, reshard


def test_partition_specs():
    assert P is PartitionSpec and P("a", None) == ("a", None) and P() == ()
    assert repr(P("a", None)) == "P('a', None)" and repr(P("a")) == "P('a',)"
    assert P(["a", "b"], None) == (("a", "b"), None)
    assert P(("a", "b"), None, "c").axis_names() == ["a", "b", "c"]
    with pytest.raises(TypeError, match="mesh axis name"):
        P(3)


def test_meshes():
    cpu = fnx.devices("cpu")[0]
    mesh = fnx.make_mesh((1,), ("batch",))
    assert mesh.axis_names == ("batch",) and mesh.shape == {"batch": 1} and mesh.size == 1
    assert mesh.axis_types == (AxisType.Explicit,)          # make_mesh's default, as JAX
    assert mesh.devices.shape == (1,) and mesh.devices[0] is cpu
    assert mesh == Mesh(np.array([cpu], dtype=object), ("batch",), (AxisType.Explicit,))
    assert hash(mesh) == hash(fnx.make_mesh((1,), "batch"))
    assert Mesh([cpu], "x").axis_types == (AxisType.Auto,)
    assert repr(mesh) == "Mesh('batch': 1, axis_types=(Explicit,))"
    assert fnx.make_mesh((1, 1), ("a", "b")).shape == {"a": 1, "b": 1}
    with pytest.raises(ValueError, match="make 2 devices, but there are 1"):
        fnx.make_mesh((2,), ("batch",))
    with pytest.raises(ValueError, match="distinct strings"):
        Mesh(np.array([[cpu]], dtype=object), ("a", "a"))
    with pytest.raises(ValueError, match="need as many axis names"):
        Mesh([cpu], ("a", "b"))
    with pytest.raises(ValueError, match="distinct devices"):
        Mesh([cpu, cpu], ("a",))


def test_named_shardings_place_arrays_whole_on_the_one_device():
    mesh = fnx.make_mesh((1,), ("batch",))
    data, repl = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    assert data.num_devices == 1 and data.is_fully_replicated and data.spec == P("batch")
    assert data.device_set == {fnx.devices("cpu")[0]} and data.shard_shape((8, 3)) == (8, 3)
    assert data == NamedSharding(mesh, P("batch", None)) and data != repl
    assert isinstance(data, fnx.sharding.Sharding)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    placed = fnx.device_put(x, data)
    assert isinstance(placed, fnx.Array) and placed.device is fnx.devices("cpu")[0]
    np.testing.assert_array_equal(np.asarray(placed), x)
    tree = fnx.device_put({"w": x, "b": x[0]}, repl)
    assert sorted(tree) == ["b", "w"] and tree["b"].shape == (3,)
    with pytest.raises(ValueError, match="does not have"):
        NamedSharding(mesh, P("model"))
    with pytest.raises(TypeError, match="PartitionSpec"):
        NamedSharding(mesh, "batch")


def test_set_mesh_is_a_setter_and_a_context_manager():
    mesh = fnx.make_mesh((1,), ("batch",))
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="needs a mesh"):
        reshard(x, P("batch"))
    assert fnx.sharding.get_mesh() is None
    with fnx.set_mesh(mesh):
        assert fnx.sharding.get_mesh() is mesh
        np.testing.assert_array_equal(np.asarray(reshard(x, P("batch"))), x)
        np.testing.assert_array_equal(np.asarray(fnx.device_put(x, P())), x)
    assert fnx.sharding.get_mesh() is None
    fnx.set_mesh(mesh)                     # a global setter too
    try:
        assert fnx.sharding.get_mesh() is mesh
    finally:
        fnx.set_mesh(None)
    with mesh:                             # JAX's older form
        assert fnx.sharding.get_mesh() is mesh
    assert fnx.sharding.get_mesh() is None
    out = reshard({"a": x, "b": x}, {"a": NamedSharding(mesh, P()), "b": NamedSharding(mesh, P())})
    assert sorted(out) == ["a", "b"]


def test_a_mesh_of_several_devices_is_named_where_an_array_would_span_it():
    gpu = fnx.devices("gpu")[0]            # (the suite emulates one)
    mesh = Mesh([fnx.devices("cpu")[0], gpu], ("x",))
    assert mesh.size == 2 and not NamedSharding(mesh, P("x")).is_fully_replicated
    with pytest.raises(NotImplementedError, match="over 2 devices.*fnx.pmap"):
        fnx.device_put(np.ones(4), NamedSharding(mesh, P("x")))
    with pytest.raises(ValueError, match="over 2 devices"):
        fnx.jit(lambda v: v, in_shardings=NamedSharding(mesh, P()))
    with pytest.raises(ValueError, match="runs whole on its arguments. device"):
        fnx.jit(lambda v: v, out_shardings=fnx.sharding.SingleDeviceSharding(gpu))


def test_jit_takes_shardings_of_the_one_device():
    mesh = fnx.make_mesh((1,), ("batch",))
    s = NamedSharding(mesh, P("batch"))
    f = fnx.jit(lambda a, b: a * 2 + b, in_shardings=(s, NamedSharding(mesh, P())),
                out_shardings=s)
    np.testing.assert_array_equal(np.asarray(f(np.ones(3, np.float32), np.ones(3, np.float32))),
                                  np.full(3, 3.0, np.float32))
    assert fnx.jit(lambda a: a, in_shardings=P("batch"))(np.ones(2)).shape == (2,)


def test_jaxs_spmd_mnist_example_step_runs_as_without_shardings():
    """The training step and accuracy of JAX's ``spmd_mnist_classifier_fromscratch.py``
    (explicit mesh, named shardings, ``set_mesh``, ``reshard``, a donating jit): the
    same parameters and accuracy as the program without any sharding."""
    rng = np.random.RandomState(0)
    params = [(0.1 * rng.randn(m, n), 0.1 * rng.randn(n)) for m, n in ((784, 32), (32, 10))]
    params = [(w.astype(np.float32), b.astype(np.float32)) for w, b in params]
    x = rng.rand(64, 784).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.randint(0, 10, 64)]

    def predict(params, inputs):
        (w1, b1), (w2, b2) = params
        logits = fnp.dot(fnp.tanh(fnp.dot(inputs, w1) + b1), w2) + b2
        return logits - fnx.scipy.special.logsumexp(logits, axis=1, keepdims=True)

    def loss(params, batch):
        inputs, targets = batch
        return -fnp.mean(fnp.sum(predict(params, inputs) * targets, axis=1))

    @fnx.jit(donate_argnums=0)
    def train_step(params, batch):
        grads = fnx.grad(loss)(params, batch)
        return [(w - 0.001 * dw, b - 0.001 * db) for (w, b), (dw, db) in zip(params, grads)]

    @fnx.jit
    def accuracy(params, batch):
        inputs, targets = batch
        return fnp.mean(fnp.argmax(predict(params, inputs), axis=1) == fnp.argmax(targets, axis=1))

    mesh = fnx.make_mesh((fnx.device_count(),), ("batch",), axis_types=(AxisType.Explicit,))
    data = NamedSharding(mesh, P("batch"))
    sharded = fnx.device_put(params, NamedSharding(mesh, P()))
    plain = fnx.device_put(params)
    for _ in range(3):
        with fnx.set_mesh(mesh):
            sharded = train_step(sharded, (fnx.device_put(x, data), fnx.device_put(y, data)))
        plain = train_step(plain, (x, y))
    for (a, b), (c, d) in zip(sharded, plain):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
        np.testing.assert_array_equal(np.asarray(b), np.asarray(d))
    assert float(accuracy(sharded, (reshard(x, data), reshard(y, data)))) == \
        float(accuracy(plain, (x, y)))


def test_device_put_and_reshard_take_a_pytree_prefix():
    """A device or sharding per subtree (it used to take only a full tree of them)."""
    cpu = fnx.devices("cpu")[0]
    x = {"a": [np.ones(2, np.float32), np.ones(3, np.float32)], "b": np.ones(1, np.float32)}
    out = fnx.device_put(x, {"a": cpu, "b": None})
    assert out["a"][1].device is cpu and out["b"].shape == (1,)
    mesh = fnx.make_mesh((1,), ("d",))
    got = reshard((x["a"], x["b"]), (NamedSharding(mesh, P()), NamedSharding(mesh, P("d"))))
    assert [v.shape for v in fnx.tree_util.tree_leaves(got)] == [(2,), (3,), (1,)]


# --- shard_map -------------------------------------------------------------------------------

def test_shard_map_on_a_one_device_mesh_is_jaxs():
    """Every mesh axis has size 1: the body runs once on the whole arguments, with the
    axis names bound for its collectives (JAX 0.10's values on a (1, 1) Auto mesh)."""
    from fnx.sharding import AxisType
    mesh = fnx.sharding.make_mesh((1, 1), ("b", "m"), axis_types=(AxisType.Auto,) * 2)
    f = fnx.shard_map(lambda x: lax.psum(x.sum(), "b")[None] + lax.axis_index("b"),
                      mesh=mesh, in_specs=P("b"), out_specs=P("b"))
    x = fnp.arange(4.0)
    assert f(x).tolist() == [6.0] and fnx.jit(f)(x).tolist() == [6.0]
    assert fnx.grad(lambda v: f(v).sum())(x).tolist() == [1, 1, 1, 1]
    g = fnx.shard_map(lambda v: lax.all_gather(v, "b"), mesh=mesh, in_specs=P("b"),
                      out_specs=P())
    assert g(x).shape == (1, 4)
    h = fnx.shard_map(lambda a, b: (a @ b, lax.pmean(a, ("b", "m"))), mesh=mesh,
                      in_specs=(P("b", None), P(None, "m")), out_specs=(P("b", "m"), P("b")))
    prod, mean = h(fnp.ones((4, 3)), fnp.ones((3, 5)))
    assert prod.shape == (4, 5) and float(prod[0, 0]) == 3.0 and mean.shape == (4, 3)
    # the decorator form, and the mesh set_mesh makes current
    with fnx.sharding.use_mesh(mesh):
        @fnx.shard_map(out_specs=P("m"), in_specs=P("m"))
        def double(v):
            return 2 * v + lax.axis_index("m")
        assert double(x).tolist() == [0, 2, 4, 6]
    from fnx.experimental.shard_map import shard_map
    assert shard_map is fnx.shard_map


def test_shard_map_errors_name_the_problem():
    mesh = fnx.sharding.make_mesh((1,), ("b",))
    with pytest.raises(ValueError, match=r"names mesh axes \['x'\]"):
        fnx.shard_map(lambda v: v, mesh=mesh, in_specs=P("x"), out_specs=P())(fnp.ones(2))
    with pytest.raises(ValueError, match="more than the 1 dimensions"):
        fnx.shard_map(lambda v: v, mesh=mesh, in_specs=P("b", None), out_specs=P())(
            fnp.ones(2))
    with pytest.raises(ValueError, match="no mesh"):
        fnx.shard_map(lambda v: v, in_specs=P(), out_specs=P())(fnp.ones(2))


def test_make_array_from_data_on_one_device():
    mesh = fnx.make_mesh((1,), ("batch",))
    s = NamedSharding(mesh, P("batch"))
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    asked = []
    a = fnx.make_array_from_callback((4, 2), s, lambda idx: (asked.append(idx), data[idx])[1])
    assert asked == [(slice(None), slice(None))]        # one shard: the whole array
    np.testing.assert_array_equal(a, data)
    assert a.dtype == np.float32 and a.device == fnx.devices()[0]
    b = fnx.make_array_from_single_device_arrays((4, 2), s, [a], dtype=np.int32)
    assert b.dtype == np.int32 and b.shape == (4, 2)
    c = fnx.make_array_from_process_local_data(s, data, (4, 2))
    np.testing.assert_array_equal(c, data)
    with pytest.raises(ValueError, match=r"the data has shape \(4, 2\), but the array's shape"):
        fnx.make_array_from_callback((5, 2), s, lambda idx: data)
    with pytest.raises(ValueError, match="2 arrays"):
        fnx.make_array_from_single_device_arrays((4, 2), s, [a, a])
