"""fnx raises glibc's malloc thresholds on import (``fnx.core.host_memory``), so a jitted
step's multi-megabyte temporaries are reused from the heap instead of being mapped, and
page-faulted, afresh on every call; never where the user tunes malloc, or opts out."""
import os
import subprocess
import sys

import pytest

GLIBC = hasattr(os, "confstr") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

PROBE = r'''
import resource, sys
import numpy as np
import fnx
from fnx.core import host_memory
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():     # a few buffers of several MB made and dropped, as a convolution's are
    bufs = [np.ones(n << 20, np.float32) for n in (1, 2, 3, 5)]
    del bufs
step()
before = faults()
for _ in range(20):
    step()
print(host_memory.tuned, faults() - before)
'''


def _probe(**env):
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                            "MALLOC_TOP_PAD_", "GLIBC_TUNABLES", "FNX_MALLOC")}
    run_env.update(env)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=run_env, timeout=120)
    assert out.returncode == 0, out.stderr
    tuned, faults = out.stdout.split()
    return tuned == "True", int(faults)


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_large_buffers_are_reused_from_the_heap():
    tuned, faults = _probe()
    assert tuned
    assert faults < 500, faults            # mapped afresh: 2816 a step, 56320 in all


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_left_alone_where_asked_or_tuned_already():
    tuned, faults = _probe(FNX_MALLOC="system")
    assert not tuned and faults > 10000, faults      # glibc maps (or trims) them afresh
    assert _probe(MALLOC_TRIM_THRESHOLD_="1000000")[0] is False
    assert _probe(GLIBC_TUNABLES="glibc.malloc.mmap_threshold=65536")[0] is False
