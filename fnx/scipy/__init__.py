"""``fnx.scipy``: SciPy's names over fnx arrays, as ``jax.scipy`` has them: ``special``,
``stats``, ``linalg``, ``signal``, ``optimize``, ``fft`` (DCT), ``integrate``,
``interpolate``, ``ndimage``, ``cluster``, ``sparse.linalg`` and
``spatial.transform``."""
from . import (cluster, fft, integrate, interpolate, linalg, ndimage, optimize,  # noqa: F401
               signal, sparse, spatial, special, stats)
