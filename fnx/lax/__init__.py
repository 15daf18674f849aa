"""``fnx.lax``: primitives as functions (JAX's ``jax.lax`` names and call forms)."""
from .ops import *  # noqa: F401,F403
from .ops import RoundingMethod  # noqa: F401
from .control_flow import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from .composites import *  # noqa: F401,F403
from .xla_indexing import *  # noqa: F401,F403
from .bit_ops import *  # noqa: F401,F403
from .rng_bits import *  # noqa: F401,F403
from .ragged import *  # noqa: F401,F403
from . import linalg  # noqa: F401
from .fft import FftType, fft  # noqa: F401
from .parallel import (all_gather, all_to_all, axis_index, axis_size, pmax,  # noqa: F401
                       pmean, pmin, ppermute, psum, psum_scatter)


def dtype(x):
    """The dtype of a value or type, as JAX's ``lax.dtype``: Python scalars and their types
    give the default dtypes (which follow ``jax_enable_x64``); NumPy dtypes, scalar types,
    arrays and lists narrow to 32 bits while x64 is off; an fnx array's dtype is its own."""
    import numpy as np
    from ..core import dtypes as _d
    from ..core.array import Array
    if x is None:
        raise ValueError(f"Invalid argument to dtype: {x}.")
    if isinstance(x, Array):
        return x.dtype
    r = None if isinstance(x, type) else _d.python_scalar_dtype(x)
    if r is not None:
        d = r[0]
    elif isinstance(x, type) and x in (bool, int, float, complex):
        d = _d.canonicalize(x)
    else:
        inner = None if isinstance(x, (str, np.dtype, type)) else getattr(x, "dtype", None)
        if isinstance(inner, np.dtype):
            x = inner
        elif not isinstance(x, (str, np.dtype, type)):
            try:
                x = np.result_type(x)
            except TypeError as err:
                raise TypeError(f"Cannot determine dtype of {x}") from err
        d = _d.canonicalize(x)
    return _d.NARROW.get(d, d)


# JAX's lax exports every primitive as ``<name>_p`` (``lax.exp_p``, ``lax.tanh_p``), which
# interpreters over make_jaxpr's equations compare ``eqn.primitive`` with. fnx's registry holds
# them by name; the few JAX spells differently get JAX's name too.
_JAX_NAMES = {"i0e": "bessel_i0e", "i1e": "bessel_i1e", "gammainc": "igamma",
              "gammaincc": "igammac", "gammainc_grad_a": "igamma_grad_a",
              "betainc": "regularized_incomplete_beta"}


def _primitive_names():
    from ..core.primitive import REGISTRY
    names = {}
    for name, prim in REGISTRY.items():
        for n in (name, _JAX_NAMES.get(name)):
            if n is not None and n.isidentifier():
                names[n + "_p"] = prim
    return names


globals().update({k: v for k, v in _primitive_names().items() if k not in globals()})


def __getattr__(name):
    # primitives registered after fnx.lax was imported (random, scipy, callbacks, user code)
    if name.endswith("_p"):
        prim = _primitive_names().get(name)
        if prim is not None:
            return prim
    raise AttributeError(f"module 'fnx.lax' has no attribute {name!r}")
