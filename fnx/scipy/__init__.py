"""``fnx.scipy``: SciPy's names over fnx arrays, as ``jax.scipy`` has them: ``special``,
``stats``, ``linalg``, ``signal``, ``optimize``, ``fft`` (DCT), ``integrate``,
``interpolate``, ``ndimage``, ``cluster`` and ``sparse.linalg``."""
from . import (cluster, fft, integrate, interpolate, linalg, ndimage, optimize,  # noqa: F401
               signal, sparse, special, stats)
