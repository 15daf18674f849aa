"""What the linear-algebra tests share: the dtypes and batch shapes they sweep, and random
operands of a dtype (complex ones with a random imaginary part)."""
import numpy as np

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
BATCHES = [(), (3,), (2, 2)]


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)
