"""Joining the MPI world, and ending every process when one fails."""
from __future__ import annotations

import os
import sys
import traceback

from ..core import world

__all__ = ["initialize", "shutdown", "is_initialized", "launched_by_mpi"]

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


# jax.distributed.initialize's other options: about its own coordination service
_JAX_OPTIONS = {"initialization_timeout", "heartbeat_timeout_seconds",
                "shutdown_timeout_seconds", "coordinator_bind_address", "slice_index",
                "partition_index"}


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, cluster_detection_method=None, *, comm=None,
               use_mpi=None, **jax_options):
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
    leaving the others waiting forever in a collective.

    On a node with several GPUs, each process takes its own (NCCL, which pmap's
    collectives over GPU buffers use, needs one per process): its rank among the node's
    processes modulo the node's GPUs, or the first of ``local_device_ids``.

    JAX's arguments are accepted, so ``jax.distributed.initialize(...)`` ports as it is:
    MPI has already joined the processes, so ``coordinator_address`` (and JAX's timeouts
    and other options) go unused, with a warning; ``num_processes`` and ``process_id``,
    when given, must be what MPI says (else ValueError); ``cluster_detection_method=
    "mpi4py"`` is ``use_mpi=True``. An mpi4py communicator as the first argument is
    ``comm``. Without an MPI launcher, ``num_processes`` above 1 raises: fnx joins
    processes only through MPI."""
    global _initialized
    unknown = sorted(set(jax_options) - _JAX_OPTIONS)
    if unknown:
        raise TypeError(f"fnx.distributed.initialize() got unexpected keyword argument(s) "
                        f"{unknown}")
    if coordinator_address is not None and hasattr(coordinator_address, "Get_rank"):
        comm, coordinator_address = coordinator_address, None   # initialize(comm)
    if cluster_detection_method == "mpi4py" and use_mpi is None:
        use_mpi = True
    elif cluster_detection_method not in (None, "mpi4py"):
        raise ValueError(f"fnx.distributed.initialize: cluster_detection_method="
                         f"{cluster_detection_method!r}; fnx finds the processes through "
                         "MPI only: start them with mpiexec (or pass 'mpi4py')")
    unused = [k for k, v in dict(coordinator_address=coordinator_address,
                                 **jax_options).items() if v is not None]
    if unused:
        import warnings
        warnings.warn(f"fnx.distributed.initialize: {', '.join(unused)} not used: MPI's "
                      "launcher (mpiexec) joins the processes", stacklevel=2)
    if comm is None and _initialized:
        _check_expected(num_processes, process_id)
        return
    if comm is None and use_mpi is not False:
        launcher = launched_by_mpi()
        if launcher is not None:
            comm = _import_mpi(f"this process was started by an MPI launcher ({launcher}="
                               f"{os.environ[launcher]})").COMM_WORLD
        elif use_mpi or "mpi4py.MPI" in sys.modules:
            comm = _import_mpi("use_mpi=True asks for MPI" if use_mpi else
                               "mpi4py.MPI is imported").COMM_WORLD
    if comm is None and (num_processes or 1) > 1:
        raise RuntimeError(f"fnx.distributed.initialize: num_processes={num_processes}, but "
                           "no MPI launcher started this process: fnx joins processes "
                           f"through MPI, so start them with mpiexec -n {num_processes} "
                           "python script.py (pip install fnx[distributed])")
    if not _use_own_gpu(comm, local_device_ids) and local_device_ids is not None:
        import warnings
        warnings.warn("fnx.distributed.initialize: local_device_ids not used: no GPU here",
                      stacklevel=2)
    world.set_world(comm)
    _initialized = True
    _check_expected(num_processes, process_id)
    if world.process_count() > 1:
        _install_abort_hook()


def _use_own_gpu(comm, local_device_ids):
    """On a node with several GPUs, each process computes on its own (NCCL needs one GPU
    per process): the GPU ``local_device_ids`` names (JAX's argument; its first id), else
    the process's rank among those on its node modulo the node's GPUs. Where CuPy sees
    one GPU or none (or is not installed), nothing changes. Every buffer made after it is
    on that GPU, so a program calls ``initialize()`` before putting anything on a GPU.
    Whether a GPU is here."""
    from ..core.backend import get_backend
    try:
        cuda = get_backend("cuda")
    except ValueError:       # no CUDA backend registered: no GPU here
        return False
    if cuda.emulated:
        return False
    cupy = cuda.xp
    count = cupy.cuda.runtime.getDeviceCount()
    if local_device_ids is not None:
        ids = [local_device_ids] if isinstance(local_device_ids, int) else list(local_device_ids)
        if not ids or not all(0 <= int(i) < count for i in ids):
            raise ValueError(f"fnx.distributed.initialize: local_device_ids={local_device_ids} "
                             f"must name GPUs of this node, 0..{count - 1}")
        cupy.cuda.Device(int(ids[0])).use()
    elif count > 1 and comm is not None and comm.Get_size() > 1:
        from mpi4py import MPI
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            cupy.cuda.Device(node.Get_rank() % count).use()
        finally:
            node.Free()
    return True


def _check_expected(num_processes, process_id):
    """JAX's ``num_processes``/``process_id``, when given, against the world MPI made."""
    for what, given, actual in (("num_processes", num_processes, world.process_count()),
                                ("process_id", process_id, world.process_index())):
        if given is not None and int(given) != actual:
            raise ValueError(f"fnx.distributed.initialize: {what}={given}, but the MPI "
                             f"world says {actual} (rank {world.process_index()} of "
                             f"{world.process_count()}); leave it out, or start as many "
                             "processes with mpiexec -n")


def shutdown():
    """Leave the world of processes (JAX's ``jax.distributed.shutdown``): afterwards this
    process computes alone (``process_count() == 1``) until ``initialize`` is called
    again; MPI itself stays up until the interpreter exits."""
    global _initialized
    world.set_world(None)
    _initialized = False


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
