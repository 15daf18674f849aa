"""Float predicates and fills across every float dtype, bfloat16 included (NumPy calls its
kind 'V', so a test of ``dtype.kind == "f"`` misses it), and NumPy conversion of values
being differentiated."""
import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import ConcretizationError

VALUES = np.array([1.5, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("name", ["isinf", "isnan", "isfinite", "isposinf", "isneginf",
                                  "signbit"])
def test_predicates_agree_with_numpy_on_float32_values(dtype, name):
    x = fnp.asarray(VALUES).astype(dtype)
    want = getattr(np, name)(VALUES)
    np.testing.assert_array_equal(np.asarray(getattr(fnp, name)(x)), want)
    np.testing.assert_array_equal(np.asarray(fnx.jit(getattr(fnp, name))(x)), want)


def test_take_fills_out_of_range_bfloat16_with_nan():
    x = fnp.arange(4, dtype="bfloat16")
    got = np.asarray(fnp.take(x, fnp.asarray([1, 9]), mode="fill").astype("float32"))
    assert got[0] == 1 and np.isnan(got[1])


def test_numpy_conversion_of_a_differentiated_value_is_refused_clearly():
    with pytest.raises(ConcretizationError, match="would drop its derivative"):
        fnx.grad(lambda x: np.asarray(x).sum())(fnp.ones(3))
    # reading a float of it stays allowed (Python control flow on concrete values)
    assert float(fnx.grad(lambda x: x * 2 if float(x) > 0 else x)(1.0)) == 2.0
