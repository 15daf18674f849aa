"""``fnx.pmap``: one program over the processes of the world (``mpiexec -n P``), JAX's
multi-process ``pmap``.

Each process calls the pmapped function with its own shard: every mapped argument has a
leading axis of ``fnx.local_device_count()`` (one CPU device per process: size 1). The
function runs on each device's slice, jitted, with ``axis_name`` bound to an axis of
``fnx.device_count()`` members spanning every process, so ``lax.psum(g, axis_name)`` sums
over all processes (``fnx.distributed``'s MPI collectives, called by the primitives'
impls on the program's buffers). Outputs come back with the local leading axis.

Device Arrays stay on their GPU: the collectives are then NCCL's, on the program's device
buffers (``fnx.distributed._nccl``).

In one process (no ``mpiexec``) the group has one member and the collectives return what
they would over one process, so a pmapped program runs unchanged for testing.
"""
from __future__ import annotations

import functools

from .. import tree_util
from ..core.axis_env import axis_frame
from ..core.world import process_count
from .jit import jit
from .vmap import vmap

__all__ = ["pmap"]


def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=(),
         global_arg_shapes=None):
    """Map ``fun`` over the devices of every process (see the module docstring).

    ``in_axes``/``out_axes`` as ``vmap``'s, over the local device axis;
    ``static_broadcasted_argnums`` are static (hashable, the same on every process);
    ``donate_argnums`` as ``jit``'s. ``devices``, ``backend`` and ``global_arg_shapes``
    are accepted for JAX's signature; fnx maps over the one device of each process that
    the arguments are on (its CPU, or its GPU)."""
    from .. import _api
    static = ((static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int)
              else tuple(static_broadcasted_argnums))
    local = _api.local_device_count()
    name = axis_name if axis_name is not None else object()   # an axis nobody can name

    def per_process(*args):
        mapped = [i for i in range(len(args)) if i not in static]
        axes = in_axes if not isinstance(in_axes, (tuple, list)) else tuple(
            in_axes[i] for i in mapped)

        def body(*dyn):
            full = list(args)
            for i, v in zip(mapped, dyn):
                full[i] = v
            return fun(*full)
        return vmap(body, in_axes=axes, out_axes=out_axes)(*[args[i] for i in mapped])

    compiled = jit(per_process, static_argnums=static, donate_argnums=donate_argnums)

    @functools.wraps(fun)
    def mapped_fun(*args):
        for i, leaf in _mapped_leaves(args, in_axes, static):
            n = leaf.shape[i] if leaf.ndim else None
            if n != local:
                raise ValueError(
                    f"pmap: a mapped argument has {'no axis' if n is None else f'size {n}'} "
                    f"along its mapped axis {i}, but this process has {local} local "
                    f"device(s): each process passes its shard with a leading axis of "
                    f"fnx.local_device_count() (= {local})")
        with frame():
            return compiled(*args)

    def frame():
        """The named axis over every process's devices, bound while pmap traces or runs."""
        size = axis_size if axis_size is not None else local * process_count()
        return axis_frame(name, size, "pmap")

    def lower(*args):
        with frame():
            return compiled.lower(*args)
    mapped_fun.lower = lower
    return mapped_fun


def _mapped_leaves(args, in_axes, static):
    """``(axis, leaf)`` for every mapped leaf of the non-static arguments."""
    out = []
    for k, arg in enumerate(args):
        if k in static:
            continue
        ax = in_axes[k] if isinstance(in_axes, (tuple, list)) else in_axes
        if ax is None:
            continue
        for leaf in tree_util.tree_leaves(arg):
            if not hasattr(leaf, "ndim"):
                continue
            if isinstance(ax, int):
                out.append((ax % max(leaf.ndim, 1), leaf))
    return out
