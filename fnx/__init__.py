"""fnx: JAX's functional model (pure functions, jit, pytrees) on NumPy.

    import fnx
    import fnx.numpy as fnp

    @fnx.jit
    def f(x):
        return fnp.tanh(x) * 2 + 1

    print(fnx.make_ir(f)(fnp.ones(3)))
"""
from .core import host_memory as _host_memory
from . import errors, tree_util
from ._config import (config, debug_infs, debug_nans, default_matmul_precision,  # noqa: F401
                      disable_jit, enable_checks, enable_x64, log_compiles,
                      numpy_dtype_promotion, numpy_rank_promotion, legacy_prng_key,
                      softmax_custom_jvp, enable_custom_prng, debug_key_reuse,
                      transfer_guard, transfer_guard_host_to_device,
                      transfer_guard_device_to_device, transfer_guard_device_to_host)
from .core.array import Array
from .core.ir import IR, check_ir, eval_ir
from .core.primitive import Primitive, ShapeDtypeStruct
from .core.tracing import eval_shape, make_ir
from . import numpy, lax  # noqa: E402  (after core: they build on it)
from .transforms.jit import clear_caches, jit
from .lax import stop_gradient
from .transforms.jvp import jvp
from .transforms.vmap import vmap
from .transforms.pmap import pmap
from .transforms.jacobian import hessian, jacfwd, jacrev
from .transforms.custom import checkpoint, checkpoint_policies, custom_jvp, custom_vjp, remat
from . import ad_checkpoint, custom_derivatives  # noqa: E402,F401  (JAX's module names)
from .transforms.vjp import grad, linearize, value_and_grad, vjp
from . import testing  # noqa: E402  (after the transforms it checks)
from . import nn, optim, random, scipy  # noqa: E402  (user-level libraries over numpy/lax)
from . import datasets, serialization  # noqa: E402  (digits; flax-format checkpoints)
from . import distributed  # noqa: E402  (processes: MPI collectives, registered for pmap)
from . import extend, kernels, onnx  # noqa: E402  (kernels/onnx attach the primitives' hooks)
from . import debug, example_libraries, test_util, tree  # noqa: E402,F401  (JAX's names)
from . import dtypes  # noqa: E402,F401  (jax.dtypes)
from ._api import (check_tracer_leaks, checking_leaks, closure_convert,  # noqa: E402,F401
                   copy_to_host_async, custom_gradient, default_device, default_prng_impl,
                   explain_cache_misses, fwd_and_bwd, threefry_partitionable)
from .dtypes import float0  # noqa: E402,F401
from . import image  # noqa: E402,F401  (jax.image)
from . import custom_batching  # noqa: E402,F401  (jax.custom_batching)
from . import ops  # noqa: E402,F401  (jax.ops: segment_sum, ...)
from . import flatten_util  # noqa: E402,F401  (jax.flatten_util.ravel_pytree)
from . import typing  # noqa: E402,F401  (jax.typing: ArrayLike, DTypeLike)
from . import dlpack, profiler, stages  # noqa: E402,F401  (jax.dlpack, jax.profiler, jax.stages)
from .sharding import shard_map  # noqa: E402,F401  (jax.shard_map, on one-device meshes)
from . import implicit  # noqa: E402,F401  (lax.custom_linear_solve / custom_root, attached)
from . import sharding  # noqa: E402,F401  (jax.sharding)
from .sharding import NamedSharding, P, make_mesh, reshard, set_mesh  # noqa: E402,F401
from .sharding import (make_array_from_callback,  # noqa: E402,F401
                       make_array_from_process_local_data,
                       make_array_from_single_device_arrays)
from ._api import (ClosedJaxpr, Device, default_backend, device_count,  # noqa: E402,F401
                   device_get, devices, effects_barrier, ensure_compile_time_eval,
                   host_count, host_id, host_ids, linear_transpose, local_device_count,
                   local_devices, make_jaxpr, named_call, named_scope, print_environment_info,
                   process_count, process_index, process_indices, typeof)
from .transforms.jacobian import jacobian  # noqa: E402,F401
from . import experimental  # noqa: E402,F401  (jax.experimental.io_callback)
from .lax.callback import pure_callback  # noqa: E402,F401
from .core import primitive as _primitive  # noqa: E402

_primitive.BUILTIN = frozenset(_primitive.REGISTRY)  # fnx's own primitives (not users')
_host_memory.tune()  # large buffers reused from the heap, not mapped afresh each call

from ._version import __version__  # noqa: E402


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """Every leaf of ``x`` as an Array on ``device`` (a device of ``fnx.devices()``, a
    sharding on one device (``fnx.sharding``: a ``SingleDeviceSharding``, a
    ``NamedSharding`` over a one-device mesh, or a ``PartitionSpec`` under the current
    mesh), or None: where it is; NumPy and Python inputs are copied to the CPU first),
    committed there (see ``fnx.core.devices``); ``device`` may also be a pytree prefix of
    ``x`` giving one device per subtree."""
    return sharding.place(x, device, "device_put", none_stays=True)


def block_until_ready(x):
    return x


# NaN/inf checks asked for by the environment (JAX_DEBUG_NANS=1): applied now that every
# primitive exists (the eager grad part patches them).
from .core.trace import apply_debug_flags as _apply_debug_flags  # noqa: E402

if config.values["jax_debug_nans"] or config.values["jax_debug_infs"]:
    _apply_debug_flags()
