"""``fnx.experimental``: JAX's ``jax.experimental`` names that fnx has.

``io_callback(callback, result_shape_dtypes, *args, ordered=False, **kwargs)``: call
impure Python at run time (every call of a jitted function; once per batch element under
vmap) and get arrays of the declared shapes back; unlike ``fnx.pure_callback`` it runs
even when its results are unused (see ``fnx.lax.callback``).

``from fnx.experimental import multihost_utils`` (as in JAX, imported by name; it sits
above ``fnx.distributed``): ``broadcast_one_to_all``, ``sync_global_devices``,
``process_allgather`` and ``assert_equal`` over the processes of the world.
"""
from ..lax.callback import io_callback  # noqa: F401
from . import checkify  # noqa: F401  (JAX's checkify; registers the check primitive)

__all__ = ["io_callback"]
