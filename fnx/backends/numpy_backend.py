"""The NumPy backend: an IR lowered to one generated Python function over NumPy arrays
(``numpy_codegen``), its buffers kept between calls (``buffers``), on the CPU; a scan
loop as one generated function too (``numpy_loops``)."""
from __future__ import annotations

import sys

import numpy as np

from ..core.array import Array
from ..core.backend import Backend
from . import buffers
from .buffers import RING_HELD
from .numpy_codegen import compile_ir
from .numpy_loops import scan_runner


class NumPyBackend(Backend):
    name = "numpy"
    platform = "cpu"

    def compile(self, ir, name="jit", donated=()):
        """The generated function of ``ir`` (``numpy_codegen.compile_ir``): ``.fn``,
        ``.source`` and ``.pool`` (its buffers)."""
        return compile_ir(ir, name, tuple(donated))

    def clear_cache(self):
        """Forget the cached executables, and release the buffers every compiled function
        keeps between calls (those of pools still reachable too)."""
        super().clear_cache()
        buffers.release_all()

    def run_scan(self, body, buffers, *, num_consts, num_carry, length, reverse, unroll=1):
        """The scan as one generated function (``numpy_loops.scan_runner``: the body's code
        inlined in a Python ``for``, ys written into preallocated arrays), cached per
        body and loop shape; ``unroll`` changes nothing here."""
        return scan_runner(body, num_consts, num_carry, length, reverse)(*buffers)

    def put(self, value):
        return np.asarray(value)

    def fetch(self, buffer):
        return np.asarray(buffer)

    def wrap(self, buffer, weak_type=False):
        return Array._wrap(buffer, weak_type)

    def owns(self, buffer):
        return isinstance(buffer, (np.ndarray, np.generic))

    def offer_donated(self, raw, positions):
        """For each donated position ``k``, ``raw[k]`` when the call may overwrite it
        (``sole_buffer``), else None."""
        return [raw[k] if sole_buffer(raw, k) else None for k in positions]


def _buffer_refs(raw, k):
    return sys.getrefcount(raw[k])


def sole_buffer(raw, k):
    """Whether ``raw[k]`` is a C-contiguous ndarray owning its memory that nothing
    references but ``raw``, the one Array holding it and (for an earlier output) the
    ring it came from; if so it is made writeable."""
    refs = _buffer_refs(raw, k)
    if refs != _SOLE_REFS and not (refs == _SOLE_REFS + 1
                                   and RING_HELD.get(id(raw[k])) is raw[k]):
        return False
    v = raw[k]
    if type(v) is not np.ndarray or v.base is not None or not v.flags.c_contiguous:
        return False
    v.flags.writeable = True  # read-only only to keep others from writing: none are left
    return True


def _sole_refs():
    """``_buffer_refs`` of a buffer held by a list and one Array only (it depends on the
    interpreter, so it is measured)."""
    a = Array._wrap(np.empty(1))
    raw = [a._value]
    return _buffer_refs(raw, 0)


_SOLE_REFS = _sole_refs()
