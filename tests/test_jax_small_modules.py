"""JAX's small modules under their JAX names: ``fnx.dlpack`` (``jax.dlpack``),
``fnx.stages`` (``jax.stages``) and ``fnx.experimental.mesh_utils``
(``jax.experimental.mesh_utils``)."""
import ml_dtypes
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import dlpack, stages
from fnx.experimental import mesh_utils


def test_dlpack_round_trip_and_supported_dtypes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = dlpack.from_dlpack(a)
    assert isinstance(x, fnx.Array) and x.dtype == np.float32
    np.testing.assert_array_equal(x, a)
    np.testing.assert_array_equal(np.from_dlpack(fnp.asarray(a) + 1), a + 1)
    for t in (np.bool_, np.int8, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32,
              np.complex64, "int32", fnp.float32):
        assert dlpack.is_supported_dtype(t), t
    for t in (object, np.str_, "U3"):
        assert not dlpack.is_supported_dtype(t), t


def test_stage_types():
    f = fnx.jit(lambda x, y: x * y)
    traced = f.trace(1.0, 2.0)
    lowered = f.lower(1.0, 2.0)
    compiled = lowered.compile()
    assert isinstance(f, stages.Wrapped)
    assert isinstance(traced, stages.Traced) and isinstance(traced.lower(), stages.Lowered)
    assert isinstance(lowered, stages.Lowered) and isinstance(compiled, stages.Compiled)
    assert float(compiled(3.0, 4.0)) == 12.0
    assert all(isinstance(a, stages.ArgInfo) for a in fnx.tree_util.tree_leaves(
        lowered.args_info))


def test_device_meshes():
    devs = mesh_utils.create_device_mesh((1, 1))
    assert devs.shape == (1, 1) and devs[0, 0] == fnx.devices()[0]
    mesh = fnx.sharding.Mesh(mesh_utils.create_device_mesh((1,)), ("batch",))
    assert mesh.shape == {"batch": 1}
    assert mesh_utils.create_hybrid_device_mesh((1, 1), (1, 1)).shape == (1, 1)
    with pytest.raises(ValueError, match=r"create_device_mesh: the mesh shape \(2,\)"):
        mesh_utils.create_device_mesh((2,))
    with pytest.raises(ValueError, match="same number of axes"):
        mesh_utils.create_hybrid_device_mesh((1,), (1, 1))
