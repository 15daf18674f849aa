"""Issue 17 (hardening): vmap's in_axes/out_axes are checked (type, range, structure),
axes of 0-d arrays, negative sizes and arrays larger than memory raise at once with a
message that names the function, the argument and the shape."""
import time

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax
from fnx.errors import AxesSpecError, OutOfMemoryError, ShapeError

X23 = fnp.ones((2, 3))


# --- vmap: in_axes / out_axes ------------------------------------------------------------------

@pytest.mark.parametrize("spec", [0.5, "0", True, (0.5,), [0, "x"], {"a": 0}, (0, [None, 1.0])])
def test_vmap_in_axes_of_a_wrong_type_raise_at_once(spec):
    with pytest.raises(AxesSpecError, match=r"^vmap: in_axes must be an int, None") as info:
        fnx.vmap(lambda *a: a[0], in_axes=spec)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("spec,bad", [(0.5, "0.5 (a float)"), ("0", "'0' (a str)"),
                                      ((0, 1.5), "1.5 (a float)"), ({"a": "x"}, "'x' (a str)")])
def test_vmap_out_axes_of_a_wrong_type_raise_at_once(spec, bad):
    with pytest.raises(AxesSpecError, match=r"^vmap: out_axes must be an int, None") as info:
        fnx.vmap(lambda x: x, out_axes=spec)
    assert bad in str(info.value)


def test_vmap_in_axes_out_of_range_names_the_argument_path_and_rank():
    f = fnx.vmap(lambda x, p: x * p["w"].sum(), in_axes=(0, {"w": 3}))
    with pytest.raises(ValueError, match="in_axes 3 is out of range") as info:
        f(X23, {"w": fnp.ones(2)})
    msg = str(info.value)
    assert msg.startswith("vmap:") and "args[1]['w']" in msg and "rank 1" in msg
    assert "shape (2,)" in msg and "[-1, 0]" in msg
    with pytest.raises(ValueError, match=r"args\[0\] has rank 2"):
        fnx.vmap(lambda x: x, in_axes=-3)(X23)
    with pytest.raises(ValueError, match=r"args\[1\] is a scalar \(rank 0"):
        fnx.vmap(lambda x, y: x * y, in_axes=(0, 0))(X23, 1.0)


def test_vmap_negative_axes_are_normalized_as_in_jax():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(fnx.vmap(lambda v: v, in_axes=-1)(x), x.T)
    np.testing.assert_array_equal(fnx.vmap(lambda v: v, out_axes=-1)(x), x.T)
    np.testing.assert_array_equal(fnx.vmap(lambda v: v, out_axes=-2)(x), x)
    np.testing.assert_array_equal(fnx.vmap(lambda v: v, in_axes=np.int64(1))(x), x.T)


@pytest.mark.parametrize("oa", [2, 3, -3])
def test_vmap_out_axes_out_of_range_raise_instead_of_wrapping(oa):
    # out_axes=3 on a rank-2 result used to wrap around silently (3 % 2)
    with pytest.raises(ValueError, match=f"out_axes={oa} for output is out of range") as info:
        fnx.vmap(lambda x: x, out_axes=oa)(X23)
    assert "rank 1 (shape (3,)) per example and rank 2 with the batch axis" in str(info.value)
    assert "[-2, 1]" in str(info.value)


def test_vmap_scalar_outputs_take_out_axes_0_and_minus_1_only():
    assert fnx.vmap(lambda x: x.sum(), out_axes=0)(X23).shape == (2,)      # as JAX
    assert fnx.vmap(lambda x: x.sum(), out_axes=-1)(X23).shape == (2,)
    for f in (lambda x: x.sum(), lambda x: 1.0):                          # batched, or not
        with pytest.raises(ValueError, match=r"out_axes=1 for output is out of range") as info:
            fnx.vmap(f, out_axes=1)(X23)
        assert "rank 0" in str(info.value) and "[-1, 0]" in str(info.value)
    with pytest.raises(ValueError, match=r"out_axes=1 for output\[1\]\['s'\]"):
        fnx.vmap(lambda x: (x, {"s": x.sum()}), out_axes=(0, {"s": 1}))(X23)


def test_vmap_structure_mismatches_name_vmap_the_axes_and_the_path():
    with pytest.raises(ValueError, match=r"^vmap: out_axes does not match the output's "
                       r"structure: out_axes is a tuple of length 3, but output is a tuple "
                       r"of length 2"):
        fnx.vmap(lambda x: (x, x), out_axes=(0, 0, 0))(X23)
    with pytest.raises(ValueError, match=r"out_axes\['a'\] is a dict with keys \['b'\], but "
                       r"output\['a'\] is a dict with keys \['c'\]"):
        fnx.vmap(lambda x: {"a": {"c": x}}, out_axes={"a": {"b": 0}})(X23)
    with pytest.raises(ValueError, match=r"^vmap: in_axes does not match the arguments' "
                       r"structure: in_axes has 1 entry but the function was called with 2 "
                       r"positional arguments"):
        fnx.vmap(lambda x, y: x, in_axes=(0,))(X23, X23)
    with pytest.raises(ValueError, match=r"in_axes\[1\] is a dict with keys \['v'\], but "
                       r"args\[1\] is a dict with keys \['w'\]"):
        fnx.vmap(lambda x, p: x, in_axes=(0, {"v": 0}))(X23, {"w": X23})
    with pytest.raises(ValueError, match=r"out_axes is None for output\[1\], but that output "
                       r"varies over the batch"):
        fnx.vmap(lambda x: (x, x), out_axes=(0, None))(X23)


def test_vmap_accepts_what_jax_accepts():
    assert fnx.vmap(lambda x, y: x, in_axes=[0, None])(X23, 1.0).shape == (2, 3)
    assert fnx.vmap(lambda x, y: x, in_axes=(0, 0))(X23, None).shape == (2, 3)  # None: no leaves
    out = fnx.vmap(lambda x, p: {"a": x * p["w"], "b": x.sum()},
                   in_axes=(0, {"w": None}), out_axes={"a": 1, "b": 0})(X23, {"w": fnp.ones(3)})
    assert out["a"].shape == (3, 2) and out["b"].shape == (2,)
    # unbatched output, out_axes=None: returned as it is
    assert fnx.vmap(lambda x: fnp.ones(4), out_axes=None)(X23).shape == (4,)
    # the same vmapped function called with two argument structures (the per-structure cache)
    f = fnx.vmap(lambda p: p["w"] * 2, in_axes=({"w": 0},))
    assert f({"w": X23}).shape == (2, 3)
    with pytest.raises(ValueError, match="in_axes does not match"):
        f({"w": X23, "b": X23})
    assert f({"w": fnp.ones((4,))}).shape == (4,)


# --- axes of 0-d arrays ----------------------------------------------------------------------

REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any",
              "all", "ptp", "count_nonzero", "average", "median", "cumsum", "cumprod",
              "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd",
              "nanargmax", "nanargmin", "nancumsum", "quantile"]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, -1])
def test_reductions_over_an_axis_of_a_0d_array_raise_as_in_jax(name, axis):
    f = getattr(fnp, name)
    call = (lambda a: f(a, 0.5, axis=axis)) if name == "quantile" else (
        lambda a: f(a, axis=axis))
    with pytest.raises(ValueError, match=rf"^{name}: axis {axis} is out of bounds for an array "
                       r"of rank 0") as info:
        call(fnp.zeros(()))
    assert isinstance(info.value, IndexError)  # NumPy's AxisError is both
    with pytest.raises(ValueError, match=rf"^{name}: axis {axis} is out of bounds"):
        fnx.jit(call)(fnp.zeros(()))
    call(fnp.zeros(3))  # a 1-d array has axis 0 and -1


def test_reduction_methods_on_0d_arrays():
    z = fnp.zeros(())
    for method in ("sum", "max", "mean", "argmax"):
        with pytest.raises(ValueError, match=rf"{method}: axis 0 is out of bounds .* rank 0"):
            getattr(z, method)(axis=0)
        assert getattr(z, method)().shape == ()       # axis=None reduces everything
    assert z.sum(axis=()).shape == ()
    assert fnp.repeat(fnp.float32(2), 3, axis=0).shape == (3,)  # JAX's and NumPy's


# --- sizes must be non-negative ---------------------------------------------------------------

@pytest.mark.parametrize("name,make", [
    ("zeros", lambda: fnp.zeros((-1, 3))),
    ("ones", lambda: fnp.ones((-1, 3))),
    ("empty", lambda: fnp.empty((-1, 3))),
    ("full", lambda: fnp.full((-1, 3), 2.0)),
    ("zeros_like", lambda: fnp.zeros_like(X23, shape=(-1, 3))),
    ("ones_like", lambda: fnp.ones_like(X23, shape=(-1, 3))),
    ("full_like", lambda: fnp.full_like(X23, 1, shape=(-1, 3))),
    ("broadcast_to", lambda: fnp.broadcast_to(fnp.ones(3), (-1, 3))),
])
def test_negative_sizes_are_named(name, make):
    with pytest.raises(ValueError, match=rf"^{name}: sizes must be non-negative, got shape "
                       r"\(-1, 3\)"):
        make()
    with pytest.raises(ValueError, match=rf"^{name}: sizes must be non-negative"):
        fnx.jit(make)()


def test_reshape_negative_sizes():
    with pytest.raises(ShapeError, match=r"^reshape: sizes must be non-negative \(one may be "
                       r"-1, the size that fits\), got \(-2, -3\) for an array of shape "
                       r"\(6,\)"):
        fnp.ones(6).reshape(-2, -3)
    with pytest.raises(ValueError, match=r"reshape: can only infer one dimension \(-1\)"):
        fnp.ones(6).reshape(-1, -1)
    assert fnp.ones(6).reshape(-1, 3).shape == (2, 3)
    with pytest.raises(ValueError, match=r"^reshape: sizes must be non-negative, got "
                       r"new_sizes \(-2, -3\) for f32\[6\]"):
        lax.reshape(fnp.ones(6), (-2, -3))


# --- arrays larger than memory: an OutOfMemoryError at once ------------------------------------

HUGE = (10**9, 10**9)  # 4 EB of float32: more than any machine


@pytest.mark.parametrize("name,make", [
    ("zeros", lambda: fnp.zeros(HUGE)),
    ("ones", lambda: fnp.ones(HUGE, dtype="int8")),
    ("empty", lambda: fnp.empty(HUGE)),
    ("full", lambda: fnp.full(HUGE, 2.0)),
    ("zeros_like", lambda: fnp.zeros_like(X23, shape=HUGE)),
    ("ones_like", lambda: fnp.ones_like(X23, shape=HUGE)),
    ("full_like", lambda: fnp.full_like(X23, 3.0, shape=HUGE)),
    ("broadcast_to", lambda: fnp.broadcast_to(fnp.ones(()), HUGE)),
    ("eye", lambda: fnp.eye(10**10)),
    ("broadcast_in_dim", lambda: lax.broadcast_in_dim(fnp.ones(()), HUGE, ())),
    ("broadcast_in_dim", lambda: lax.full(HUGE, 0.0)),
    ("iota", lambda: lax.broadcasted_iota("int32", HUGE, 1)),
])
def test_arrays_larger_than_memory_raise_at_once(name, make):
    start = time.perf_counter()
    with pytest.raises(MemoryError, match=rf"^{name}: an array of shape \(1000000000, "
                       r"1000000000\)|^eye: an array of shape \(10000000000, 10000000000\)") \
            as info:
        make()
    assert isinstance(info.value, OutOfMemoryError)
    msg = str(info.value)
    assert "dtype" in msg and "bytes" in msg and "memory" in msg
    # the jitted sum used to run for hours; under jit the primitive computing it is named
    with pytest.raises(OutOfMemoryError, match=rf"^({name}|broadcast_in_dim|iota):"):
        fnx.jit(lambda: make().sum())()
    assert time.perf_counter() - start < 5
    # shapes alone are fine: eval_shape of a model larger than memory works, as in JAX
    assert fnx.eval_shape(make).shape in (HUGE, (10**10, 10**10))


def test_the_issue_example_raises_and_names_the_byte_count():
    from fnx.lax.shape import MAX_BYTES
    if MAX_BYTES >= 4 * 10**12:
        pytest.skip("this machine has 4 TB of memory")
    with pytest.raises(OutOfMemoryError, match=r"^zeros: an array of shape \(1000000, 1000000\)"
                       r" and dtype float32 needs 4000000000000 bytes"):
        fnp.zeros((10**6, 10**6))
    with pytest.raises(OutOfMemoryError, match="broadcast_in_dim: .* needs 4000000000000 bytes"):
        fnx.jit(lambda: fnp.zeros((10**6, 10**6)).sum())()


def test_normal_sizes_still_create_views_and_empty_arrays():
    assert fnp.zeros((0, 5)).shape == (0, 5)
    assert fnp.broadcast_to(fnp.ones(3), (1000, 1000, 3)).shape == (1000, 1000, 3)
    big = fnp.zeros((10**4, 10**4))  # 400 MB, a broadcast of one element: no buffer yet
    assert big.shape == (10**4, 10**4) and float(big[3, 4]) == 0.0


def test_vmap_maps_keyword_arguments_over_their_leading_axis_as_jax():
    def f(a, b=None):
        """doc"""
        return a * b

    g = fnx.vmap(f, in_axes=(None,))
    assert g.__name__ == "f" and g.__doc__ == "doc"
    out = g(2.0, b=fnp.ones((3, 2)))
    assert out.shape == (3, 2)
    assert fnx.vmap(f)(fnp.ones((4, 2)), b=fnp.full((4, 2), 3.0)).tolist() == [[3.0] * 2] * 4
    with pytest.raises(ValueError, match=r"different sizes.*\n.*size 3\n.*size 4"):
        fnx.vmap(f, in_axes=(1,))(fnp.ones((2, 3)), b=fnp.ones((4,)))
