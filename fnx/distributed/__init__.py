"""Several processes running one program, over MPI (``pip install fnx[distributed]``).

Start ``N`` processes with the MPI launcher and join them in the script::

    mpiexec -n 2 python train.py

    import fnx, fnx.distributed as dist
    dist.initialize()                      # the MPI world; one process without mpiexec
    fnx.process_index(), fnx.process_count()   # 0..N-1, N
    params = dist.broadcast_params(params)     # process 0's initial values everywhere
    x, y = dist.shard(x_train, y_train, seed=0, epoch=e)   # this process's samples
    g = dist.allreduce(g, "sum") / fnx.process_count()    # on NumPy buffers
    dist.save("ckpt.fnx", params)          # written by process 0; the others wait

The collectives (``allreduce``, ``allgather``, ``reduce_scatter``, ``alltoall``,
``ppermute``, ``broadcast``, ``barrier``) act on NumPy arrays over the *process axis* with
the shapes of JAX's ``psum``, ``all_gather``, ``psum_scatter``, ``all_to_all`` and
``ppermute``; they are what the named-axis collectives of ``fnx.lax`` call when their axis
spans processes. Each uses MPI's buffer interface (no pickling) and copies at most once.

Without ``mpiexec`` (and without mpi4py) everything here works in the single-process
world: the collectives return what they would over one process, ``save`` writes, and
nothing waits. With several processes, an uncaught exception in one of them prints
``rank r: <traceback>`` and aborts them all (no process hangs waiting for it).
"""
from __future__ import annotations

from ..core import world as _world
from ..core.world import communicator, process_count, process_index  # noqa: F401
from . import _collectives
from ._collectives import (REDUCTIONS, allgather, allreduce, alltoall, barrier,  # noqa: F401
                           broadcast, ppermute, reduce_scatter)
from ._process import initialize, is_initialized, launched_by_mpi, shutdown  # noqa: F401
from ._trees import (broadcast_params, load, load_states, process_allgather,  # noqa: F401
                     save, save_states, shard, shard_indices)

# the collective primitives' impls reach these through the core layer under pmap
_world.set_collectives(_collectives)

__all__ = ["initialize", "shutdown", "is_initialized", "launched_by_mpi", "process_index",
           "process_count", "communicator", "allreduce", "allgather", "reduce_scatter",
           "alltoall", "ppermute", "broadcast", "barrier", "REDUCTIONS", "broadcast_params",
           "process_allgather", "shard", "shard_indices", "save", "save_states", "load",
           "load_states"]
