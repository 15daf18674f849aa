"""``fnx.sharding``: JAX's ``jax.sharding`` names that apply to fnx's single device.

fnx runs on one device, the host CPU, so every array is laid out whole on it:
``x.sharding`` is a ``SingleDeviceSharding`` on ``fnx.devices()[0]``, and code that
reads it (``x.sharding.device_set``, ``.num_devices``, ``.is_fully_replicated``)
ports unchanged. Meshes and partition specs are not here: there is nothing to
partition over.
"""
from .core.array import SingleDeviceSharding

Sharding = SingleDeviceSharding  # the one kind of sharding fnx's arrays have

__all__ = ["SingleDeviceSharding", "Sharding"]
