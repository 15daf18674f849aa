"""JAX's ``jax.experimental.multihost_utils`` over fnx's processes (``fnx.distributed``).

Every function here is collective: each process of the world calls it, in the same
order, with trees of the same structure and leaf shapes. In the single-process world
they return what they would for one process.

``host_local_array_to_global_array`` and ``global_array_to_host_local_array`` are not
here: fnx has no globally sharded arrays; a multi-process program maps over the local
shard with ``fnx.pmap`` instead.
"""
from __future__ import annotations

import zlib

import numpy as np

from .. import tree_util
from ..core import world
from ..distributed import allgather, broadcast_params, process_allgather

__all__ = ["broadcast_one_to_all", "sync_global_devices", "process_allgather", "assert_equal"]


def broadcast_one_to_all(in_tree, is_source=None):
    """The source process's values of ``in_tree`` on every process: process 0's, or, with
    ``is_source``, those of the one process that passes ``is_source=True`` (every process
    must pass a bool then)."""
    root = 0
    if is_source is not None:
        flags = allgather(np.asarray(bool(is_source)))
        sources = np.flatnonzero(flags).tolist()
        if len(sources) != 1:
            raise ValueError(f"broadcast_one_to_all: exactly one process must pass "
                             f"is_source=True; processes {sources} did")
        root = sources[0]
    return broadcast_params(in_tree, root=root)


def sync_global_devices(name):
    """Wait until every process has reached the barrier called ``name``; processes that
    reach barriers of different names raise (their programs have gone different ways)."""
    tag = np.asarray(zlib.crc32(str(name).encode()), np.uint32)
    tags = allgather(tag)
    if len(set(tags.tolist())) > 1:
        raise RuntimeError(f"sync_global_devices({name!r}): the processes reached "
                           f"differently named barriers (name hashes {tags.tolist()} by "
                           "process); every process must call the same barriers in order")


def assert_equal(in_tree, fail_message=""):
    """Raise ``AssertionError`` (on every process) unless every process holds the same
    values of ``in_tree``."""
    gathered = process_allgather(in_tree)
    leaves = tree_util.tree_leaves(gathered)
    differ = [i for i, g in enumerate(leaves)
              if not all(np.array_equal(g[0], g[p], equal_nan=g.dtype.kind in "fc")
                         for p in range(1, len(g)))]
    if differ:
        raise AssertionError(f"{fail_message} (multihost_utils.assert_equal: leaves "
                             f"{differ} differ between the {world.process_count()} "
                             "processes)".lstrip())
