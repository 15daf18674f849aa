"""jax_enable_x64 as in JAX: with the flag off (the default) defaults are 32-bit and 64-bit
inputs and dtype requests narrow to 32 bits (warning once per process, naming the flag);
with it on defaults are 64-bit. The same programs run under both settings and every result
has the dtype (and weak type) JAX 0.10.2 gives, recorded below as literals from running the
programs under JAX with and without x64. Also: strict dtype promotion, Python ints beyond
int32, finfo's Python floats, eye/tri with a huge k, linspace's values, devices(), legacy
DLPack without a copy."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
import fnx.random as fr
from fnx.core import dtypes


@pytest.fixture(autouse=True)
def restore_flags():
    """Every test starts with x64 off, standard promotion and the one-time warning armed,
    and leaves the flags as it found them."""
    saved = {n: fnx.config.values[n] for n in ("jax_enable_x64", "jax_numpy_dtype_promotion")}
    fnx.config.update("jax_enable_x64", False)
    fnx.config.update("jax_numpy_dtype_promotion", "standard")
    dtypes.reset_narrowing_warning()
    try:
        yield
    finally:
        for name, value in saved.items():
            fnx.config.update(name, value)
        dtypes.reset_narrowing_warning()


PROGRAMS_SOURCE = """
def programs(jnp, jr, lax, jit, grad, np):
    # name -> thunk; each returns an array (or a tuple of arrays)
    x = jnp.array([3.0, 1.0, 2.0, 1.0])
    i = jnp.array([1, 0, 2, 1], dtype=jnp.int32)
    b = x > 1.5
    k = jr.PRNGKey(0)
    f64 = np.linspace(0.0, 1.0, 4)  # NumPy float64
    p = {
        # creation
        "array_ints": lambda: jnp.array([1, 2]),
        "array_floats": lambda: jnp.array([1.0, 2.0]),
        "array_complex": lambda: jnp.array([1j]),
        "array_empty": lambda: jnp.array([]),
        "array_np_float64": lambda: jnp.array(f64),
        "array_np_int64": lambda: jnp.array(np.arange(3)),
        "array_np_uint64": lambda: jnp.array(np.arange(3, dtype=np.uint64)),
        "array_np_complex128": lambda: jnp.array(np.ones(2, np.complex128)),
        "array_mixed_np_scalar": lambda: jnp.array([np.float64(1.0), 2.0]),
        "asarray_np_float64": lambda: jnp.asarray(f64),
        "asarray_np_scalar": lambda: jnp.asarray(np.float64(2.5)),
        "asarray_int": lambda: jnp.asarray(1),
        "asarray_float": lambda: jnp.asarray(1.0),
        "asarray_complex": lambda: jnp.asarray(1j),
        "asarray_bool": lambda: jnp.asarray(True),
        "zeros": lambda: jnp.zeros(3),
        "ones": lambda: jnp.ones((2, 2)),
        "empty": lambda: jnp.empty(2),
        "zeros_dtype_float": lambda: jnp.zeros(2, float),
        "zeros_dtype_int": lambda: jnp.zeros(2, int),
        "zeros_dtype_complex": lambda: jnp.zeros(2, complex),
        "full_int": lambda: jnp.full(2, 1),
        "full_float": lambda: jnp.full(2, 1.0),
        "full_bool": lambda: jnp.full(2, True),
        "ones_like_int32": lambda: jnp.ones_like(i),
        "arange_int": lambda: jnp.arange(3),
        "arange_float": lambda: jnp.arange(0.0, 1.0, 0.25),
        "arange_int_float_step": lambda: jnp.arange(0, 1, 0.5),
        "linspace": lambda: jnp.linspace(0, 1, 5),
        "linspace_int": lambda: jnp.linspace(0, 10, 3, dtype=int),
        "logspace": lambda: jnp.logspace(0, 1, 3),
        "geomspace": lambda: jnp.geomspace(1, 2, 3),
        "eye": lambda: jnp.eye(2),
        "identity": lambda: jnp.identity(2),
        "tri": lambda: jnp.tri(2),
        # arithmetic with weak scalars
        "int32_plus_int": lambda: i + 1,
        "int32_times_float": lambda: i * 2.0,
        "float32_plus_int": lambda: x + 1,
        "float32_times_float": lambda: x * 0.5,
        "int32_div_int": lambda: i / 2,
        "sqrt_int32": lambda: jnp.sqrt(i),
        "sqrt_python_int": lambda: jnp.sqrt(2),
        "weak_int_plus_int": lambda: jnp.asarray(1) + 1,
        "weak_float_times_float": lambda: jnp.asarray(1.0) * 2,
        "true_divide_ints": lambda: jnp.true_divide(1, 2),
        "power_int32_half": lambda: jnp.power(i, 0.5),
        "abs_complex": lambda: jnp.abs(jnp.asarray(1j)),
        "int32_plus_uint32": lambda: i + i.astype(jnp.uint32),
        "int8_plus_uint32": lambda: i.astype(jnp.int8) + i.astype(jnp.uint32),
        "float32_plus_np_float64": lambda: x + f64,
        "np_float64_scalar_times_float32": lambda: x * np.float64(2.0),
        "astype_float": lambda: i.astype(float),
        "astype_int": lambda: x.astype(int),
        "matmul": lambda: x @ x,
        # reductions
        "sum_int32": lambda: jnp.sum(i),
        "sum_bool": lambda: jnp.sum(b),
        "sum_int8": lambda: jnp.sum(i.astype(jnp.int8)),
        "sum_uint8": lambda: jnp.sum(i.astype(jnp.uint8)),
        "prod_int32": lambda: jnp.prod(i),
        "cumsum_int32": lambda: jnp.cumsum(i),
        "cumsum_bool": lambda: jnp.cumsum(b),
        "mean_int32": lambda: jnp.mean(i),
        "mean_bool": lambda: jnp.mean(b),
        "var_int32": lambda: jnp.var(i),
        "max_int32": lambda: jnp.max(i),
        "count_nonzero": lambda: jnp.count_nonzero(x),
        # index dtypes
        "argmax": lambda: jnp.argmax(x),
        "argmin": lambda: jnp.argmin(x),
        "argsort": lambda: jnp.argsort(x),
        "nonzero": lambda: jnp.nonzero(x)[0],
        "flatnonzero": lambda: jnp.flatnonzero(x),
        "argwhere": lambda: jnp.argwhere(x),
        "searchsorted": lambda: jnp.searchsorted(x, 1.5),
        "lexsort": lambda: jnp.lexsort((x,)),
        "argpartition": lambda: jnp.argpartition(x, 1),
        "unique_inverse_counts": lambda: jnp.unique(x, return_index=True, return_inverse=True,
                                                    return_counts=True),
        "bincount": lambda: jnp.bincount(i),
        # random
        "PRNGKey": lambda: k,
        "split": lambda: jr.split(k),
        "uniform": lambda: jr.uniform(k, (2,)),
        "normal": lambda: jr.normal(k, (2,)),
        "randint": lambda: jr.randint(k, (2,), 0, 5),
        "randint_int8": lambda: jr.randint(k, (2,), 0, 5, dtype=jnp.int8),
        "bits": lambda: jr.bits(k, (2,)),
        "bernoulli": lambda: jr.bernoulli(k, 0.5, (2,)),
        "categorical": lambda: jr.categorical(k, x),
        "permutation": lambda: jr.permutation(k, 5),
        "choice": lambda: jr.choice(k, 5, (2,)),
        "exponential": lambda: jr.exponential(k, (2,)),
        "gamma": lambda: jr.gamma(k, 1.0, (2,)),
        "beta": lambda: jr.beta(k, 1.0, 2.0, (2,)),
        "gumbel": lambda: jr.gumbel(k, (2,)),
        "laplace": lambda: jr.laplace(k, (2,)),
        "truncated_normal": lambda: jr.truncated_normal(k, -1.0, 1.0, (2,)),
        "multivariate_normal": lambda: jr.multivariate_normal(k, jnp.zeros(2), jnp.eye(2)),
        # transformations of NumPy float64 inputs
        "grad_np_float64": lambda: grad(lambda v: (v ** 2).sum())(f64),
        "jit_np_float64": lambda: jit(lambda v: v * 2)(f64),
        "jit_np_int64": lambda: jit(lambda v: v * 2)(np.arange(3)),
        "jit_python_float": lambda: jit(lambda v: v * 2)(2.0),
        "jit_arange": lambda: jit(lambda v: v + jnp.arange(4))(f64),
    }
    return p
"""
exec(PROGRAMS_SOURCE)  # defines programs(); the text is what ran under JAX  # noqa: S102

# (dtype, weak_type) of each program's result(s) under JAX, x64 off
JAX_X32 = {
    'array_ints': ('int32', False),
    'array_floats': ('float32', False),
    'array_complex': ('complex64', False),
    'array_empty': ('float32', False),
    'array_np_float64': ('float32', False),
    'array_np_int64': ('int32', False),
    'array_np_uint64': ('uint32', False),
    'array_np_complex128': ('complex64', False),
    'array_mixed_np_scalar': ('float32', False),
    'asarray_np_float64': ('float32', False),
    'asarray_np_scalar': ('float32', False),
    'asarray_int': ('int32', True),
    'asarray_float': ('float32', True),
    'asarray_complex': ('complex64', True),
    'asarray_bool': ('bool', False),
    'zeros': ('float32', False),
    'ones': ('float32', False),
    'empty': ('float32', False),
    'zeros_dtype_float': ('float32', False),
    'zeros_dtype_int': ('int32', False),
    'zeros_dtype_complex': ('complex64', False),
    'full_int': ('int32', True),
    'full_float': ('float32', True),
    'full_bool': ('bool', False),
    'ones_like_int32': ('int32', False),
    'arange_int': ('int32', False),
    'arange_float': ('float32', False),
    'arange_int_float_step': ('float32', False),
    'linspace': ('float32', False),
    'linspace_int': ('int32', False),
    'logspace': ('float32', False),
    'geomspace': ('float32', False),
    'eye': ('float32', False),
    'identity': ('float32', False),
    'tri': ('float32', False),
    'int32_plus_int': ('int32', False),
    'int32_times_float': ('float32', True),
    'float32_plus_int': ('float32', False),
    'float32_times_float': ('float32', False),
    'int32_div_int': ('float32', False),
    'sqrt_int32': ('float32', False),
    'sqrt_python_int': ('float32', True),
    'weak_int_plus_int': ('int32', True),
    'weak_float_times_float': ('float32', True),
    'true_divide_ints': ('float32', True),
    'power_int32_half': ('float32', True),
    'abs_complex': ('float32', True),
    'int32_plus_uint32': ('int32', False),
    'int8_plus_uint32': ('int32', False),
    'float32_plus_np_float64': ('float32', False),
    'np_float64_scalar_times_float32': ('float32', False),
    'astype_float': ('float32', False),
    'astype_int': ('int32', False),
    'matmul': ('float32', False),
    'sum_int32': ('int32', False),
    'sum_bool': ('int32', False),
    'sum_int8': ('int32', False),
    'sum_uint8': ('uint32', False),
    'prod_int32': ('int32', False),
    'cumsum_int32': ('int32', False),
    'cumsum_bool': ('int32', False),
    'mean_int32': ('float32', False),
    'mean_bool': ('float32', False),
    'var_int32': ('float32', False),
    'max_int32': ('int32', False),
    'count_nonzero': ('int32', False),
    'argmax': ('int32', False),
    'argmin': ('int32', False),
    'argsort': ('int32', False),
    'nonzero': ('int32', False),
    'flatnonzero': ('int32', False),
    'argwhere': ('int32', False),
    'searchsorted': ('int32', False),
    'lexsort': ('int32', False),
    'argpartition': ('int32', False),
    'unique_inverse_counts': (('float32', False), ('int32', False), ('int32', False),
                              ('int32', False)),
    'bincount': ('int32', False),
    'PRNGKey': ('uint32', False),
    'split': ('uint32', False),
    'uniform': ('float32', False),
    'normal': ('float32', False),
    'randint': ('int32', False),
    'randint_int8': ('int8', False),
    'bits': ('uint32', False),
    'bernoulli': ('bool', False),
    'categorical': ('int32', False),
    'permutation': ('int32', False),
    'choice': ('int32', False),
    'exponential': ('float32', False),
    'gamma': ('float32', False),
    'beta': ('float32', False),
    'gumbel': ('float32', False),
    'laplace': ('float32', False),
    'truncated_normal': ('float32', False),
    'multivariate_normal': ('float32', False),
    'grad_np_float64': ('float32', False),
    'jit_np_float64': ('float32', False),
    'jit_np_int64': ('int32', False),
    'jit_python_float': ('float32', True),
    'jit_arange': ('float32', False),
}

# the same under JAX_ENABLE_X64=1
JAX_X64 = {
    'array_ints': ('int64', False),
    'array_floats': ('float64', False),
    'array_complex': ('complex128', False),
    'array_empty': ('float64', False),
    'array_np_float64': ('float64', False),
    'array_np_int64': ('int64', False),
    'array_np_uint64': ('uint64', False),
    'array_np_complex128': ('complex128', False),
    'array_mixed_np_scalar': ('float64', False),
    'asarray_np_float64': ('float64', False),
    'asarray_np_scalar': ('float64', False),
    'asarray_int': ('int64', True),
    'asarray_float': ('float64', True),
    'asarray_complex': ('complex128', True),
    'asarray_bool': ('bool', False),
    'zeros': ('float64', False),
    'ones': ('float64', False),
    'empty': ('float64', False),
    'zeros_dtype_float': ('float64', False),
    'zeros_dtype_int': ('int64', False),
    'zeros_dtype_complex': ('complex128', False),
    'full_int': ('int64', True),
    'full_float': ('float64', True),
    'full_bool': ('bool', False),
    'ones_like_int32': ('int32', False),
    'arange_int': ('int64', False),
    'arange_float': ('float64', False),
    'arange_int_float_step': ('float64', False),
    'linspace': ('float64', False),
    'linspace_int': ('int64', False),
    'logspace': ('float64', False),
    'geomspace': ('float64', False),
    'eye': ('float64', False),
    'identity': ('float64', False),
    'tri': ('float32', False),
    'int32_plus_int': ('int32', False),
    'int32_times_float': ('float64', True),
    'float32_plus_int': ('float64', False),
    'float32_times_float': ('float64', False),
    'int32_div_int': ('float32', False),
    'sqrt_int32': ('float32', False),
    'sqrt_python_int': ('float64', True),
    'weak_int_plus_int': ('int64', True),
    'weak_float_times_float': ('float64', True),
    'true_divide_ints': ('float64', True),
    'power_int32_half': ('float64', True),
    'abs_complex': ('float64', True),
    'int32_plus_uint32': ('int64', False),
    'int8_plus_uint32': ('int64', False),
    'float32_plus_np_float64': ('float64', False),
    'np_float64_scalar_times_float32': ('float64', False),
    'astype_float': ('float64', False),
    'astype_int': ('int64', False),
    'matmul': ('float64', False),
    'sum_int32': ('int64', False),
    'sum_bool': ('int64', False),
    'sum_int8': ('int64', False),
    'sum_uint8': ('uint64', False),
    'prod_int32': ('int64', False),
    'cumsum_int32': ('int32', False),
    'cumsum_bool': ('int64', False),
    'mean_int32': ('float32', False),
    'mean_bool': ('float32', False),
    'var_int32': ('float32', False),
    'max_int32': ('int32', False),
    'count_nonzero': ('int64', False),
    'argmax': ('int64', False),
    'argmin': ('int64', False),
    'argsort': ('int64', False),
    'nonzero': ('int64', False),
    'flatnonzero': ('int64', False),
    'argwhere': ('int64', False),
    'searchsorted': ('int32', False),
    'lexsort': ('int64', False),
    'argpartition': ('int32', False),
    'unique_inverse_counts': (('float64', False), ('int64', False), ('int64', False),
                              ('int64', False)),
    'bincount': ('int64', False),
    'PRNGKey': ('uint32', False),
    'split': ('uint32', False),
    'uniform': ('float64', False),
    'normal': ('float64', False),
    'randint': ('int64', False),
    'randint_int8': ('int8', False),
    'bits': ('uint64', False),
    'bernoulli': ('bool', False),
    'categorical': ('int64', False),
    'permutation': ('int64', False),
    'choice': ('int64', False),
    'exponential': ('float64', False),
    'gamma': ('float64', False),
    'beta': ('float64', False),
    'gumbel': ('float64', False),
    'laplace': ('float64', False),
    'truncated_normal': ('float64', False),
    'multivariate_normal': ('float64', False),
    'grad_np_float64': ('float64', False),
    'jit_np_float64': ('float64', False),
    'jit_np_int64': ('int64', False),
    'jit_python_float': ('float64', True),
    'jit_arange': ('float64', False),
}

# Where fnx deliberately or knowingly differs from JAX's weak type (dtype equal)
WEAK_DIFFERS = {"abs_complex"}  # abs of a weak complex: fnx gives a strong float


def _record(r):
    rs = r if isinstance(r, tuple) else (r,)
    got = tuple((str(a.dtype), bool(a.weak_type)) for a in rs)
    return got[0] if len(got) == 1 else got


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
@pytest.mark.parametrize("name", list(JAX_X32))
def test_every_result_has_jax_dtype(name, x64):
    fnx.config.update("jax_enable_x64", x64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the narrowing warning: tested below
        got = _record(programs(fnp, fr, fnx.lax, fnx.jit, fnx.grad, np)[name]())  # noqa: F821
    want = (JAX_X64 if x64 else JAX_X32)[name]
    if name in WEAK_DIFFERS:
        got, want = got[0], want[0]
    assert got == want


def test_jax_tables_cover_the_brief():
    assert set(JAX_X32) == set(JAX_X64)
    assert JAX_X32["zeros"] == ("float32", False) and JAX_X64["zeros"] == ("float64", False)
    assert JAX_X64["searchsorted"] == ("int32", False)  # JAX's index dtype for a short axis


# --- the flag and its default ---------------------------------------------------------------

def test_flag_off_by_default_and_switchable_at_run_time():
    assert fnx.config.jax_enable_x64 is False
    assert fnp.arange(3).dtype == np.int32 and fnp.asarray(1.0).dtype == np.float32
    with fnx.enable_x64():
        assert fnp.arange(3).dtype == np.int64 and fnp.asarray(1.0).dtype == np.float64
        assert dtypes.default_float() == np.float64 and dtypes.default_int() == np.int64
        assert dtypes.default_complex() == np.complex128
        kept = fnp.asarray(np.float64(1.0) + 1e-12)
    assert fnx.config.jax_enable_x64 is False
    assert kept.dtype == np.float64 and float(kept) == 1.0 + 1e-12  # arrays keep their dtype
    assert fnp.arange(3).dtype == np.int32


def test_env_var_turns_x64_on():
    code = ("import fnx, fnx.numpy as fnp; "
            "print(fnx.config.jax_enable_x64, fnp.arange(3).dtype, fnp.zeros(2).dtype)")
    env = dict(os.environ, JAX_ENABLE_X64="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "int64", "float64"]


def test_jit_retraces_when_the_flag_changes():
    f = fnx.jit(lambda v: (v + 1.0, fnp.arange(3)))
    x = np.ones(3, dtype=np.float32)  # the same argument signature under both settings
    assert [a.dtype for a in f(x)] == [np.float32, np.int32]
    with fnx.enable_x64():
        assert [a.dtype for a in f(x)] == [np.float32, np.int64]
        assert f(1.0)[0].dtype == np.float64
    assert [a.dtype for a in f(x)] == [np.float32, np.int32]



def test_default_scalar_types_are_64_bit_and_follow_the_flag():
    # jnp.float_/int_/complex_ are NumPy's 64-bit types, narrowed when used, as in JAX
    assert fnp.int_ == fnp.int64 and fnp.float_ == fnp.float64 and fnp.complex_ == fnp.complex128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fnp.zeros(2, fnp.int_).dtype == np.int32
        assert fnp.arange(3.0).astype(fnp.float_).dtype == np.float32
    with fnx.enable_x64():
        assert fnp.zeros(2, fnp.int_).dtype == np.int64
        assert fnp.zeros(2, fnp.float_).dtype == np.float64
        assert fnp.zeros(2, fnp.complex_).dtype == np.complex128


def test_lax_dtype_canonicalizes_all_but_fnx_arrays():
    from fnx import lax
    assert lax.dtype(1) == np.int32 and lax.dtype(1.0) == np.float32
    assert lax.dtype(True) == np.bool_ and lax.dtype(1j) == np.complex64
    assert lax.dtype(np.float64) == np.float32 and lax.dtype("float64") == np.float32
    assert lax.dtype(np.ones(2)) == np.float32 and lax.dtype(fnp.float16) == np.float16
    assert lax.dtype(int) == np.int32 and lax.dtype(fnp.ones(2, "bfloat16")) == fnp.bfloat16
    with pytest.raises(TypeError):
        lax.dtype([1, 2])
    with fnx.enable_x64():
        assert lax.dtype(1) == np.int64 and lax.dtype(float) == np.float64
        kept = fnp.ones(2)
    assert lax.dtype(kept) == np.float64  # an array keeps the dtype it was made with

# --- narrowing and its warning ----------------------------------------------------------------

def test_narrowing_warns_exactly_once_naming_the_flag():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = fnp.asarray(np.ones(3))                     # a NumPy float64 input
        b = fnp.zeros(3, dtype="float64")               # an explicit request
        c = fnp.ones(2).astype(np.int64)
        fnp.asarray(np.array([2**40]))                  # an int64 that does not fit
        d = fnx.jit(lambda v: v * 2)(np.arange(3.0))    # through jit
    assert (a.dtype, b.dtype, c.dtype, d.dtype) == (np.float32, np.float32, np.int32,
                                                    np.float32)
    assert len(caught) == 1
    w = caught[0]
    assert issubclass(w.category, UserWarning)
    assert 'fnx.config.update("jax_enable_x64", True)' in str(w.message)
    assert w.filename == __file__  # points at the user's line, not inside fnx


def test_no_warning_for_defaults_or_under_x64():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # NumPy's default int64 with values that fit: narrowed without a loss, quietly
        assert fnp.asarray(np.arange(3)).dtype == np.int32
        assert fnx.jit(lambda i: i + 1)(np.arange(3)).dtype == np.int32
        fnp.asarray([1.0, 2.0]), fnp.zeros(3, dtype=float), fnp.array([1, 2]), fnp.asarray(0.5)
        fnp.ones(3) * np.float32(2)
        with fnx.enable_x64():
            assert fnp.asarray(np.ones(3)).dtype == np.float64
            assert fnp.zeros(3, dtype="int64").dtype == np.int64


def test_an_int64_that_does_not_fit_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fnp.asarray(np.arange(5))                # fits: quiet
        assert not caught
        fnp.asarray(np.array([2**40, 1]))        # does not fit: its values change
    assert len(caught) == 1 and "int64 narrowed to int32" in str(caught[0].message)


def test_namespace_info_default_dtypes_follow_the_flag():
    info = fnp.__array_namespace_info__()
    assert info.default_dtypes() == {"real floating": fnp.float32, "complex floating":
                                     fnp.complex64, "integral": fnp.int32,
                                     "indexing": fnp.int32}
    with fnx.enable_x64():
        assert info.default_dtypes() == {"real floating": fnp.float64, "complex floating":
                                         fnp.complex128, "integral": fnp.int64,
                                         "indexing": fnp.int64}


def test_narrowed_values():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(fnp.asarray(np.array([1.5, -2.25])), [1.5, -2.25])
        np.testing.assert_array_equal(fnp.asarray(np.arange(4, dtype=np.uint64)), [0, 1, 2, 3])
        assert fnp.asarray(np.array([1 + 2j])).dtype == np.complex64
        assert fnx.Array(np.ones(2)).dtype == np.float32
        assert fnx.device_put(np.ones(2)).dtype == np.float32


def test_python_ints_beyond_int32():
    with pytest.raises(OverflowError, match="jax_enable_x64"):
        fnp.asarray(2**40)
    with pytest.raises(OverflowError, match="int32"):
        fnp.array([1, 2**40])
    with pytest.raises(OverflowError, match="int32"):
        fnx.Array([1, -2**40])
    with pytest.raises(OverflowError):
        fnp.ones(3, dtype=np.int32) + 2**40
    with pytest.raises(OverflowError):
        fnp.add(2**40, 1)
    # fnx does better than JAX (which raises): a big int meets a float array as a float
    assert (fnp.ones(2) + 2**40).dtype == np.float32
    with fnx.enable_x64():
        big = fnp.asarray(2**40)
        assert big.dtype == np.int64 and int(big) == 2**40
        assert fnp.array([1, 2**40]).dtype == np.int64


def test_conv_with_numpy_float64_input_and_float32_weights():
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5))          # float64
    w = fnp.asarray(np.random.default_rng(1).standard_normal((3, 2, 2, 2)), dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = fnx.lax.conv_general_dilated(x, w, (1, 1), "VALID")
    assert y.dtype == np.float32 and y.shape == (1, 3, 4, 4)
    ref = np.zeros((1, 3, 4, 4))
    wv = np.asarray(w, np.float64)
    for i in range(4):
        for j in range(4):
            ref[0, :, i, j] = np.einsum("chw,ochw->o", x[0, :, i:i + 2, j:j + 2], wv)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_grad_of_float64_input():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = fnx.grad(lambda v: (v ** 2).sum())(np.array([1.0, 2.0]))
    assert g.dtype == np.float32 and g.tolist() == [2.0, 4.0]
    with fnx.enable_x64():
        g = fnx.grad(lambda v: (v ** 3).sum())(np.array([1.0 + 1e-12]))
        assert g.dtype == np.float64 and float(g[0]) == pytest.approx(3 * (1 + 1e-12) ** 2,
                                                                      rel=1e-15)


def test_result_type_and_promote_types():
    assert fnp.result_type(np.float64) == np.float32  # as JAX: canonical while x64 is off
    assert fnp.promote_types(np.float32, np.float64) == np.float64  # JAX does not narrow here
    assert fnp.result_type(np.uint32, np.int32) == np.int32  # JAX's x32 lattice
    with fnx.enable_x64():
        assert fnp.result_type(np.float64) == np.float64
        assert fnp.result_type(np.uint32, np.int32) == np.int64
        assert fnp.result_type(1, 2.0) == np.float64


# --- strict promotion -----------------------------------------------------------------------

def test_strict_dtype_promotion():
    x, h, i = fnp.ones(3), fnp.ones(3, dtype="float16"), fnp.ones(3, dtype="int32")
    fnx.config.update("jax_numpy_dtype_promotion", "strict")
    for bad in (lambda: x + h, lambda: x + i, lambda: i + 1.0, lambda: x + True,
                lambda: fnp.concatenate([x, h]), lambda: fnp.promote_types("float32", "int8")):
        with pytest.raises(dtypes.TypePromotionError, match="cast the inputs explicitly"):
            bad()
    with pytest.raises(dtypes.TypePromotionError,  # JAX's words, which its tests match
                       match="Input dtypes .* have no available implicit dtype promotion path"):
        x + i
    with pytest.raises(TypeError, match="float16.*float32|float32.*float16"):
        x + h  # also a TypeError (and a ValueError, as JAX's)
    assert issubclass(dtypes.TypePromotionError, ValueError)
    # weak Python scalars still join an array of their kind or a higher one
    assert (x + 1).dtype == np.float32 and (x * 2.0).dtype == np.float32
    assert (i + 1).dtype == np.int32 and (x + x).dtype == np.float32
    assert (fnp.asarray(1) + 1.0).dtype == np.float32
    fnx.config.update("jax_numpy_dtype_promotion", "standard")
    assert (x + h).dtype == np.float32


# --- Array API items --------------------------------------------------------------------------

def test_finfo_fields_are_python_floats():
    for dt in ("float32", "float64", "float16", fnp.float32):
        info, ref = fnp.finfo(dt), np.finfo(np.dtype(getattr(dt, "dtype", dt)))
        for name in ("eps", "max", "min", "smallest_normal", "tiny", "resolution"):
            v = getattr(info, name)
            assert type(v) is float and v == float(getattr(ref, name)), name
        assert type(info.bits) is int and info.bits == ref.bits
        assert info.dtype == ref.dtype and info.nmant == ref.nmant
    assert fnp.finfo(fnp.ones(2)).dtype == np.float32
    assert (fnp.ones(2, dtype="float16") * fnp.finfo("float16").eps).dtype == np.float16
    with pytest.raises(ValueError, match="iinfo"):
        fnp.finfo("int32")


def test_eye_and_tri_with_huge_k():
    for k in (2**62, -2**62, 2**63 - 1, 3, -3):
        np.testing.assert_array_equal(fnp.eye(3, k=k), np.eye(3, k=max(min(k, 5), -5)))
        np.testing.assert_array_equal(fnp.tri(2, 3, k=k), np.tri(2, 3, k=max(min(k, 5), -5)))
    np.testing.assert_array_equal(fnp.tril(fnp.ones((2, 2)), k=-2**62), np.zeros((2, 2)))
    np.testing.assert_array_equal(fnp.triu(fnp.ones((2, 2)), k=-2**62), np.ones((2, 2)))
    np.testing.assert_array_equal(fnx.jit(lambda: fnp.eye(2, 3, k=2**62))(), np.zeros((2, 3)))


@pytest.mark.parametrize("x64", [False, True])
def test_linspace_matches_numpy(x64):
    fnx.config.update("jax_enable_x64", x64)
    dt = np.float64 if x64 else np.float32
    cases = [(0, 1, 7), (0.1, 0.7, 7), (-3, 1e5, 1000), (1e-40, 3e-40, 5), (5, -2.5, 50),
             (0, 1, 1), (0, 1, 0), (2, 2, 4)]
    for start, stop, num in cases:
        for endpoint in (True, False):
            got = np.asarray(fnp.linspace(start, stop, num, endpoint=endpoint))
            want = np.linspace(start, stop, num, endpoint=endpoint).astype(dt)
            assert got.dtype == dt
            # NumPy's values to the last bit (within 1 ulp is what the standard allows)
            np.testing.assert_array_max_ulp(got, want, maxulp=1)
            np.testing.assert_array_equal(got, want)
            if endpoint and num > 1:
                assert got[-1] == dt(stop)
            jitted = fnx.jit(lambda: fnp.linspace(start, stop, num, endpoint=endpoint))()
            np.testing.assert_array_equal(jitted, want)
    x = fnp.asarray([0.1, 0.2], dtype="float32")
    got = fnp.linspace(x, 0.7, 4, axis=1)
    want = np.linspace(np.asarray(x), np.float32(0.7), 4, axis=1)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32


def test_array_devices_is_a_set_with_the_cpu():
    x = fnp.ones(2)
    assert x.devices() == {x.device}
    assert isinstance(x.devices(), set)


def test_legacy_dlpack_copy_false_shares_the_buffer():
    x = fnp.arange(6.0)

    class Legacy:  # a consumer of the legacy protocol: no max_version
        def __dlpack__(self, **kw):
            return x.__dlpack__(copy=False)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    y = np.from_dlpack(Legacy())
    assert np.shares_memory(y, np.asarray(x))
    np.testing.assert_array_equal(y, np.arange(6.0))
    del x
    np.testing.assert_array_equal(y, np.arange(6.0))  # the capsule keeps the buffer alive
    z = fnp.arange(3.0)
    copied = np.from_dlpack(type("L", (), {"__dlpack__": lambda s, **k: z.__dlpack__(),
                                           "__dlpack_device__": lambda s: (1, 0)})())
    assert not np.shares_memory(copied, np.asarray(z))  # the legacy default still copies
