"""Devices, JAX's way: ``fnx.devices()``, ``Array.device``, ``fnx.device_put``.

A device is where a buffer lives and which backend computes on it: the host CPU (the
NumPy backend, always there) or a GPU (the CUDA backend: a real one through CuPy, or the
CPU emulation of one that ``FNX_GPU_EMULATE=1`` enables). A backend lists its devices
(``Backend.devices()``) and says which one holds a buffer (``Backend.device_of``).

**Placement** follows JAX. A computation runs on the device of its *committed* operands:
an Array is committed when ``device_put`` put it on a device or when it was computed
from committed operands. Operands that are not committed (Python scalars, NumPy arrays,
Arrays made by creation functions or computed from uncommitted operands) follow the
committed ones, moved by an explicit transfer; with no committed operand the computation
runs on the default device (``fnx.default_device``, else the CPU). Operands committed to
two different devices are an error (``DeviceMismatchError``) that names both devices and
says to ``device_put`` one of them. Host Arrays are committed only by ``device_put``;
Arrays on a GPU always are (they got there through ``device_put``, ``default_device`` or
a computation that ran there).
"""
from __future__ import annotations

import weakref

from . import world

__all__ = ["Device", "CpuDevice", "GpuDevice", "CPU_DEVICE", "DeviceMismatchError",
           "commit", "is_committed"]


class DeviceMismatchError(ValueError):
    """Operands committed to different devices were combined in one computation."""


class Device:
    """A device (JAX's ``Device`` fields): ``platform`` ("cpu", "gpu"), ``id``,
    ``device_kind``, ``process_index``; ``backend``: the name of the fnx backend that
    computes on it ("numpy", "cuda")."""

    platform = ""
    backend = ""

    @property
    def process_index(self):
        """The process this device belongs to: this one's (``fnx.core.world``); a
        process's devices are the only ones it sees."""
        return world.process_index()

    host_id = task_id = process_index

    def __init__(self, id=0, device_kind=""):
        self.id = id
        self.local_hardware_id = id
        self.device_kind = device_kind or self.platform

    def __reduce__(self):
        return (_device_by_name, (str(self),))

    def __repr__(self):
        return f"{type(self).__name__}(id={self.id})"

    def __str__(self):
        return f"{self.platform}:{self.id}"


class CpuDevice(Device):
    """The host CPU: ``fnx.devices("cpu")[0]``, where NumPy buffers live."""
    platform = "cpu"
    backend = "numpy"


class GpuDevice(Device):
    """A CUDA GPU (or its CPU emulation, ``emulated=True``: same program, kernels run by
    the host)."""
    platform = "gpu"
    backend = "cuda"

    def __init__(self, id=0, device_kind="", emulated=False):
        super().__init__(id, device_kind or ("emulated GPU" if emulated else "gpu"))
        self.emulated = emulated

    def __repr__(self):
        return f"CudaDevice(id={self.id}{', emulated' if self.emulated else ''})"


CPU_DEVICE = CpuDevice(0, "cpu")

# Host Arrays that ``device_put`` committed to the CPU, by id, each with a weak reference
# whose callback forgets it (Arrays are unhashable, so no WeakSet). Device Arrays are always
# committed, so only host ones need remembering.
_COMMITTED_HOST: dict = {}


def commit(array):
    """Mark a host ``array`` as committed to the CPU (``device_put(x, cpu)``)."""
    key = id(array)
    _COMMITTED_HOST[key] = weakref.ref(array, lambda _, key=key: _COMMITTED_HOST.pop(key, None))
    return array


def is_committed(array) -> bool:
    """Whether a host Array was committed to the CPU by ``device_put``."""
    ref = _COMMITTED_HOST.get(id(array))
    return ref is not None and ref() is array


def _device_by_name(name):
    """The device named ``"cpu:0"``/``"gpu:0"`` in this process (unpickling a Device)."""
    from .backend import all_devices
    for d in all_devices():
        if str(d) == name:
            return d
    raise ValueError(f"no device {name!r} in this process; the devices are "
                     f"{[str(d) for d in all_devices()]}")
