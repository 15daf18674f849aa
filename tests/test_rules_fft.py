"""Rule sweep of the ``fft`` primitive (see ``tests/rules_support.py``): every FftType over
1-3 transformed axes of sizes 1-5 (odd and even, so the Nyquist bin of RFFT/IRFFT is
present or not), with and without leading batch axes.

The line's dtype is the real one: FFT, IFFT and IRFFT get the complex dtype of its width.
Values against NumPy, the transpose rules against hand-built matrices, and fnx.numpy.fft
are checked in ``tests/test_fft.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st

from fnx import lax
from rules_support import FLOAT, Case, Dom, Rule, run_rule, values

NO_GRAD = {}
NO_BATCH = {}

_COMPLEX = {np.dtype("float32"): np.dtype("complex64"), np.dtype("float64"): np.dtype("complex128")}
_PARTS = Dom(-1.0, 1.0, imag=1.0)


def operand_shape(fft_type, batch, lengths):
    if fft_type == lax.FftType.IRFFT:
        return batch + lengths[:-1] + (lengths[-1] // 2 + 1,)
    return batch + lengths


@st.composite
def fft_cases(draw, dtype):
    fft_type = draw(st.sampled_from(list(lax.FftType)))
    batch = draw(st.sampled_from([(), (2,), (1, 2)]))
    lengths = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    shape = operand_shape(fft_type, batch, lengths)
    odt = dtype if fft_type == lax.FftType.RFFT else _COMPLEX[np.dtype(dtype)]
    return Case(lambda x: lax.fft(x, fft_type, lengths),
                lambda rng: (values(rng, shape, odt, _PARTS),),
                f"{fft_type!r} {list(shape)} fft_lengths={lengths}")


RULES = [Rule("fft", fft_cases, bdtypes=FLOAT, gdtypes=FLOAT)]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rules(rule):
    run_rule(rule, NO_GRAD, NO_BATCH)
