"""How the host's C allocator hands out fnx's large NumPy buffers.

glibc's ``malloc`` serves a request above its mmap threshold (128 KiB at first, raised
as such blocks are freed) with a fresh ``mmap`` and gives it back with ``munmap`` when it
is freed, and it returns the free top of its heap to the system past its trim
threshold. A jitted step that makes and drops a few multi-megabyte arrays a call
(convolution workspaces, a loop's temporaries) then takes a page fault per 4 KiB of them
on every call: a convolution + batch-norm gradient over a (32, 16, 32, 32) activation
made 1966 faults a call and ran in 5.9 ms, 2.7 ms with the thresholds below. So on
glibc, importing fnx raises the mmap threshold to its 32 MiB maximum and the trim
threshold to 256 MiB: freed buffers up to 32 MiB are reused from the heap, as a caching
allocator would. The process keeps up to that much freed memory rather than returning
it at once.

Left alone where the user tunes malloc already (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_`` or ``GLIBC_TUNABLES`` in the
environment), and with ``FNX_MALLOC=system``; a no-op on other C libraries.
"""
from __future__ import annotations

import ctypes
import os

__all__ = ["tune", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

MMAP_THRESHOLD = 32 << 20     # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # mallopt's parameter numbers
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "GLIBC_TUNABLES")
tuned = False                 # whether tune() changed malloc's settings


def tune() -> bool:
    """Raise glibc's thresholds (see the module docstring); whether it did."""
    global tuned
    if tuned or os.environ.get("FNX_MALLOC", "").lower() == "system":
        return tuned
    if any(v in os.environ for v in _USER_SETTINGS):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return tuned
