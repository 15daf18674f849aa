"""Joining the MPI world, and ending every process when one fails."""
from __future__ import annotations

import os
import sys
import traceback

from ..core import world

__all__ = ["initialize", "is_initialized", "launched_by_mpi"]

# Variables MPI launchers set in each process they start: MPICH's and Intel MPI's hydra
# (PMI_*), PMIx-based launchers, Open MPI's mpirun.
_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
                  "MPI_LOCALNRANKS")

_initialized = False
_previous_hook = None


def launched_by_mpi() -> str | None:
    """The name of an MPI launcher's variable in the environment (``mpiexec`` started this
    process), or None."""
    return next((v for v in _LAUNCHER_VARS if v in os.environ), None)


def is_initialized() -> bool:
    """Whether ``initialize()`` has run in this process."""
    return _initialized


def _import_mpi(reason):
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError(f"fnx.distributed.initialize: {reason}, but mpi4py cannot be "
                          f"imported ({e}). Install it with: pip install fnx[distributed] "
                          "(mpi4py and the mpich wheel, which brings mpiexec)") from None
    return MPI


def initialize(comm=None, *, use_mpi=None):
    """Join the world of processes that ``mpiexec -n N python script.py`` started: afterwards
    ``fnx.process_index()``/``fnx.process_count()`` are this process's MPI rank and the
    number of ranks, ``fnx.device_count()`` counts every process's devices, and the
    collectives of ``fnx.distributed`` (and the named-axis ones bound across processes)
    exchange values over MPI.

    Which world: ``comm`` when given (an mpi4py communicator, e.g. a sub-communicator);
    else mpi4py's ``COMM_WORLD`` when an MPI launcher started this process, when mpi4py's
    MPI is already imported, or when ``use_mpi=True``; else the single-process world (no
    MPI needed, nothing imported; ``use_mpi=False`` forces it). Under a launcher without
    mpi4py it raises ImportError saying what to install.

    Idempotent: a second call without ``comm`` keeps the world of the first. With more
    than one process, an uncaught exception in any process prints
    ``rank r: <traceback>`` to stderr and aborts every process (``MPI_Abort``), instead of
    leaving the others waiting forever in a collective."""
    global _initialized
    if comm is None and _initialized:
        return
    if comm is None and use_mpi is not False:
        launcher = launched_by_mpi()
        if launcher is not None:
            comm = _import_mpi(f"this process was started by an MPI launcher ({launcher}="
                               f"{os.environ[launcher]})").COMM_WORLD
        elif use_mpi or "mpi4py.MPI" in sys.modules:
            comm = _import_mpi("use_mpi=True asks for MPI" if use_mpi else
                               "mpi4py.MPI is imported").COMM_WORLD
    world.set_world(comm)
    _initialized = True
    if world.process_count() > 1:
        _install_abort_hook()


def _install_abort_hook():
    global _previous_hook
    if sys.excepthook is _abort_on_exception:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = _abort_on_exception


def _abort_on_exception(exc_type, exc, tb):
    """sys.excepthook while several processes run: the traceback, each line prefixed with
    this process's rank, then MPI_Abort so that no process waits for this one forever."""
    comm = world.communicator()
    if comm is None or world.process_count() < 2:  # the world went back to one process
        (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
        return
    prefix = f"rank {world.process_index()}: "
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    try:
        sys.stderr.write("".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n")))
        sys.stderr.write(f"{prefix}aborting all {world.process_count()} processes\n")
        sys.stderr.flush()
    finally:
        comm.Abort(1)
