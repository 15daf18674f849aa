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
