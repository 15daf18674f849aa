"""``fnx.lax``: primitives as functions (JAX's ``jax.lax`` names and call forms)."""
from .ops import *  # noqa: F401,F403
from .ops import RoundingMethod  # noqa: F401
from .control_flow import *  # noqa: F401,F403
from .convolution import *  # noqa: F401,F403
from . import linalg  # noqa: F401
from .fft import FftType, fft  # noqa: F401
