"""check_op over fnx.numpy functions against NumPy itself: values (the impl check),
inferred shapes, jit, vmap and both derivative modes of the functions users call.

(``fnx.nn`` does not exist yet; its functions get lines here when it lands.)
"""
import numpy as np
import pytest
from hypothesis import strategies as st

import fnx.numpy as fnp
from fnx.testing import Example, check_op
from fnx.testing import strategies as fst

FLOATS = fst.dtypes("f")


def one(**kw):
    """(x,) with x a float32/float64 array of rank 0-3."""
    return fst.arrays(FLOATS, fst.shapes(), **kw).map(lambda x: (x,))


def two_broadcasting(**kw):
    """(x, y) of one float dtype and shapes that broadcast together."""
    @st.composite
    def draw(d):
        dtype = d(FLOATS)
        sx, sy = d(fst.broadcast_shapes(2))
        return fst_arr(d, dtype, sx, kw), fst_arr(d, dtype, sy, kw)
    return draw()


def fst_arr(d, dtype, shape, kw):
    return d(fst.arrays(dtype, shape, **kw))


def with_axis(make):
    """(x,) of rank >= 1 and a drawn axis param."""
    @st.composite
    def draw(d):
        x = d(fst.arrays(FLOATS, fst.shapes(min_dims=1)))
        return Example(x, **make(d, x))
    return draw()


@st.composite
def matmul_operands(d):
    dtype = d(FLOATS)
    m, k, n = (d(st.integers(1, 4)) for _ in range(3))
    batch = d(st.sampled_from([(), (2,)]))
    return (d(fst.arrays(dtype, batch + (m, k))), d(fst.arrays(dtype, (k, n))))


LINES = [
    ("sin", fnp.sin, np.sin, one(), {}),
    # |x| <= 5: past ~9, 1 - tanh(x)**2 (the jvp rule, as JAX's) is 0 in float32 where the
    # true derivative is ~1e-8, and the second-order check sees it
    ("tanh", fnp.tanh, np.tanh, one(min_value=-5.0, max_value=5.0), {}),
    ("exp", fnp.exp, np.exp, one(max_value=5.0), {}),
    ("log1p", fnp.log1p, np.log1p, one(min_value=-0.5, max_value=10.0), {}),
    ("sqrt", fnp.sqrt, np.sqrt, one(min_value=0.1, max_value=10.0), {}),
    ("multiply", fnp.multiply, np.multiply, two_broadcasting(), {}),
    ("divide", fnp.divide, np.divide, two_broadcasting(min_magnitude=0.5), {}),
    ("logaddexp", fnp.logaddexp, np.logaddexp, two_broadcasting(), {}),
    ("sum", fnp.sum, np.sum, with_axis(lambda d, x: {"axis": d(fst.axis(x.ndim))}), {}),
    ("mean", fnp.mean, np.mean, with_axis(lambda d, x: {"axis": d(fst.axes(x.ndim))}), {}),
    ("cumsum", fnp.cumsum, np.cumsum, with_axis(lambda d, x: {"axis": d(fst.axis(x.ndim))}),
     {}),
    ("matmul", fnp.matmul, np.matmul, matmul_operands(), {}),
]


@pytest.mark.parametrize("name,fn,ref,args,kw", LINES, ids=[line[0] for line in LINES])
def test_numpy_function(name, fn, ref, args, kw):
    check_op(fn, args, reference=ref, name=f"fnx.numpy.{name}", **kw)


def test_shape_check_covers_the_default_mode(monkeypatch):
    """check_op runs with x64 on, and its shape check also runs each example with x64 off:
    an eval_shape that kept 64-bit placeholders while eager narrows (a bug fnx had) fails."""
    import fnx.core.tracing as tracing
    from fnx.testing import OpCheckError

    x64 = fst.arrays(np.float64, fst.shapes(max_dims=2)).map(lambda x: (x,))
    report = check_op(fnp.sin, x64, reference=np.sin, checks=("impl", "shape"),
                      max_examples=5)
    assert report.ran["shape"] == 5
    monkeypatch.setattr(tracing, "abstractify", lambda x, where="": x if isinstance(
        x, tracing.ShapeDtypeStruct) else tracing.to_array(x).aval)
    with pytest.raises(OpCheckError, match="jax_enable_x64 off, eval_shape gives"):
        check_op(fnp.sin, x64, reference=np.sin, checks=("impl", "shape"), max_examples=5)
