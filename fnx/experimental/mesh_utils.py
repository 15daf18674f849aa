"""``fnx.experimental.mesh_utils``, JAX's ``jax.experimental.mesh_utils``: device arrays
shaped for a ``fnx.sharding.Mesh``.

``create_device_mesh(mesh_shape, devices=None)`` lays ``devices`` (default: this process's
devices) out in ``mesh_shape``, whose sizes must multiply to their number, as a NumPy
array of devices; ``create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None)``
does the same for a mesh within granules times a mesh across them (its shape is the two
multiplied axis by axis). fnx places arrays on one device per process, so on a CPU both
meshes hold that one device; the topology options JAX uses for TPU slices change nothing."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


def _devices(devices):
    from .._api import devices as all_devices
    return list(all_devices()) if devices is None else list(devices)


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes=False,
                       allow_split_physical_axes=False):
    """``devices`` as an array of shape ``mesh_shape`` (a ValueError when the sizes do
    not multiply to the number of devices)."""
    shape = tuple(int(s) for s in mesh_shape)
    devs = _devices(devices)
    if math.prod(shape) != len(devs):
        raise ValueError(f"create_device_mesh: the mesh shape {shape} holds "
                         f"{math.prod(shape)} devices, but there are {len(devs)}: {devs}; "
                         "give a shape whose sizes multiply to the number of devices")
    return np.array(devs, dtype=object).reshape(shape)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule=False, should_sort_granules_by_key=True,
                              allow_split_physical_axes=False):
    """A mesh of ``mesh_shape`` within each granule times ``dcn_mesh_shape`` across them:
    ``devices`` in the shape of the two multiplied axis by axis."""
    inner, outer = tuple(mesh_shape), tuple(dcn_mesh_shape)
    if len(inner) != len(outer):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {inner} and dcn_mesh_shape "
                         f"{outer} must have the same number of axes")
    return create_device_mesh([int(a) * int(b) for a, b in zip(inner, outer)], devices)
