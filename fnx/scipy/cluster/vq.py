"""``fnx.scipy.cluster.vq``: vector quantization (``vq``), as JAX's."""
from __future__ import annotations

from ... import numpy as fnp
from ...errors import ShapeError
from ...numpy.util import promote

__all__ = ["vq"]


def vq(obs, code_book, check_finite=True):
    """Assign each observation (rows of ``obs``, (M, N) or (M,)) to its nearest code in
    ``code_book`` ((K, N) or (K,)) by Euclidean distance: ``(codes, distances)``,
    ``codes`` the default int, ties to the lowest index."""
    del check_finite
    obs, code_book = promote("vq", obs, code_book, to_inexact=True)
    if obs.ndim != code_book.ndim or obs.ndim not in (1, 2) or (
            obs.ndim == 2 and obs.shape[1] != code_book.shape[1]):
        raise ShapeError(f"vq: obs (M, N) and code_book (K, N) (or both 1-D) must match in "
                         f"N; got {obs.shape} and {code_book.shape}")
    if obs.ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    diff = obs[:, None, :] - code_book[None, :, :]
    dist = fnp.sqrt(fnp.sum(fnp.real(diff * fnp.conj(diff)) if diff.dtype.kind == "c"
                            else diff * diff, axis=-1))
    codes = fnp.argmin(dist, axis=1)
    return codes, fnp.take_along_axis(dist, codes[:, None], axis=1)[:, 0]
