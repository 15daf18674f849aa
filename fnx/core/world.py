"""The process world: which process this is and how many run the program together.

A program runs as one process (the default) or as several started together by a launcher
(``mpiexec -n 4 python train.py``), each computing on its own devices and exchanging
values through collectives. This module only *holds* that world, so every layer can read
it (``fnx.process_index()``, the collective primitives' impls, ``fnx.pmap``) without
importing MPI; ``fnx.distributed.initialize()`` reads the launcher's world and calls
``set_world``. It imports nothing of fnx and nothing outside the standard library.

The communicator is an mpi4py ``Comm`` (or anything with ``Get_rank()`` and
``Get_size()``); ``None`` means the single-process world.
"""
from __future__ import annotations

__all__ = ["process_index", "process_count", "communicator", "set_world", "is_multiprocess",
           "collectives", "set_collectives"]

_comm = None
_ops = None
_index = 0
_count = 1


def process_index() -> int:
    """This process's index in the world, ``0 <= process_index() < process_count()``."""
    return _index


def process_count() -> int:
    """How many processes run the program (1 unless ``fnx.distributed.initialize()`` found
    more)."""
    return _count


def communicator():
    """The mpi4py communicator spanning the world's processes, or ``None`` in the
    single-process world that no communicator was set for."""
    return _comm


def is_multiprocess() -> bool:
    """Whether more than one process runs the program."""
    return _count > 1


def set_world(comm) -> None:
    """Make ``comm`` (an mpi4py communicator; ``None``: the single process) the world.
    Its rank becomes ``process_index()``, its size ``process_count()``."""
    global _comm, _index, _count
    if comm is None:
        _comm, _index, _count = None, 0, 1
        return
    try:
        index, count = int(comm.Get_rank()), int(comm.Get_size())
    except AttributeError:
        raise TypeError(f"set_world: expected an mpi4py communicator (with Get_rank() and "
                        f"Get_size()) or None, got {type(comm).__name__}") from None
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"set_world: the communicator says rank {index} of {count} "
                         "processes, which is not a world")
    _comm, _index, _count = comm, index, count


def set_collectives(ops) -> None:
    """Register the collectives over the world's processes (``fnx.distributed`` registers
    its module: ``allreduce``, ``allgather``, ``reduce_scatter``, ``alltoall``,
    ``ppermute`` on NumPy arrays), which the collective primitives' impls call under
    ``pmap``."""
    global _ops
    _ops = ops


def collectives():
    """The registered collectives over processes (see ``set_collectives``), or None."""
    return _ops
