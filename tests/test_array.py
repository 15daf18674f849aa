"""``fnx.Array``: immutability, attributes, operators, methods, conversions and protocols."""
from __future__ import annotations

import copy
import operator
import pickle
import typing

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx.errors import ConcretizationError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

F4, F8, I4, I8, B = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.bool_))


def same(a, b):
    """fnx result ``a`` equals NumPy's ``b`` in shape and values (NaN == NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=0, equal_nan=True)


def identical(a, b):
    assert (a.dtype, a.weak_type, a.shape) == (b.dtype, b.weak_type, b.shape)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --- immutability -----------------------------------------------------------------------

def test_setitem_message_spells_out_the_fix():
    x = fnp.asarray([1.0, 2.0])
    with pytest.raises(TypeError) as e:
        x[0] = 1
    assert "x.at[0].set(1)" in str(e.value)


def test_setitem_raises_type_error():
    x = fnp.asarray([1.0, 2.0])
    for idx, v in ((0, 1), (slice(None), 0.0), ((Ellipsis,), 2)):
        with pytest.raises(TypeError) as e:
            x[idx] = v
        assert ".at[" in str(e.value) and ".set(" in str(e.value)
    np.testing.assert_array_equal(x, [1.0, 2.0])
    with pytest.raises(TypeError):
        fnx.jit(lambda a: a.__setitem__(0, 1.0))(x)


def test_numpy_views_are_read_only():
    x = fnp.asarray([1.0, 2.0])
    v = np.asarray(x)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0] = 5.0
    with pytest.raises(ValueError):
        np.add(v, 1, out=v)
    assert float(x[0]) == 1.0
    c = np.array(x)                       # an explicit copy is the user's to write
    c[0] = 5.0
    assert float(x[0]) == 1.0
    w = np.asarray(x, dtype=np.float64)
    assert w.dtype == np.float64
    w2 = x.__array__(copy=True)
    w2[0] = 7.0
    assert float(x[0]) == 1.0


@pytest.mark.parametrize("make", [fnx.Array, fnp.asarray, fnp.array, fnx.device_put],
                         ids=["Array", "asarray", "array", "device_put"])
def test_construction_copies_numpy_input(make):
    n = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = make(n)
    n[0, 0] = 100.0
    n[:] = -1
    np.testing.assert_array_equal(x, [[1.0, 2.0], [3.0, 4.0]])
    assert x.dtype == F4  # narrowed from float64: jax_enable_x64 is off (as in JAX)


def test_operations_do_not_alias_inputs():
    n = np.arange(4.0)
    x = fnp.asarray(n)
    for y in (x + 0, x.reshape(2, 2), x.T, x[1:], fnp.transpose(x), x.at[0].add(0.0)):
        assert not np.shares_memory(np.asarray(y), n)
    y = x.at[0].set(9.0)
    assert float(x[0]) == 0.0 and float(y[0]) == 9.0


# --- attributes -------------------------------------------------------------------------

def test_attributes():
    x = fnp.asarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4))
    assert x.shape == (2, 3, 4) and x.dtype == np.int16 and x.ndim == 3
    assert x.size == 24 and x.itemsize == 2 and x.nbytes == 48
    assert x.T.shape == (4, 3, 2)
    np.testing.assert_array_equal(x.T, np.asarray(x).T)
    assert x.mT.shape == (2, 4, 3)
    np.testing.assert_array_equal(x.mT, np.swapaxes(np.asarray(x), -1, -2))
    assert str(x.device) == "cpu:0" and repr(x.device) == "CpuDevice(id=0)"   # as JAX's
    assert x.device.platform == "cpu" and x.device.id == 0
    assert x.device in fnx.devices()
    assert x.to_device(x.device) is x
    s = fnp.asarray(3.0)
    assert s.shape == () and s.ndim == 0 and s.size == 1 and s.nbytes == 4
    assert s.T.shape == ()
    with pytest.raises((ValueError, TypeError)):
        fnp.ones(3).mT
    z = fnp.asarray(np.array([1 + 2j, 3 - 4j], np.complex64))
    np.testing.assert_array_equal(z.real, [1, 3])
    np.testing.assert_array_equal(z.imag, [2, -4])
    assert z.real.dtype == F4
    assert fnp.zeros((0, 3)).size == 0
    assert isinstance(x, fnp.ndarray)


# --- operators ------------------------------------------------------------------------------

BINARY_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
              operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge,
              operator.eq, operator.ne]
INT_OPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


def _np_ref(op, a, b):
    with np.errstate(all="ignore"):
        return op(a, b)


@pytest.mark.parametrize("op", BINARY_OPS + INT_OPS, ids=lambda f: f.__name__)
def test_binary_operators_and_reflected_forms(op):
    ints = op in INT_OPS
    a = np.array([[3, -7, 6], [1, 4, -2]], np.int32)
    b = np.array([2, 3, 5], np.int32)
    if not ints:
        a, b = a.astype(np.float32) + 0.5, b.astype(np.float32)
    if op is operator.pow:
        a = np.abs(a)
    if op in (operator.lshift, operator.rshift):
        b = np.array([0, 1, 3], np.int32)
    A, Bb = fnp.asarray(a), fnp.asarray(b)
    r = op(A, Bb)
    assert isinstance(r, fnx.Array)
    same(r, _np_ref(op, a, b))
    same(op(Bb, A), _np_ref(op, b, a))
    same(fnx.jit(op)(A, Bb), r)
    scalar = 2 if ints or op is operator.pow else 2.5
    same(op(A, scalar), _np_ref(op, a, a.dtype.type(scalar)))    # __op__
    same(op(scalar, A), _np_ref(op, a.dtype.type(scalar), a))    # __rop__
    same(fnx.jit(lambda x: op(scalar, x))(A), op(scalar, A))
    same(op(a, Bb), _np_ref(op, a, b))                            # NumPy array on the left
    expected_dtype = B if op in (operator.lt, operator.le, operator.gt, operator.ge,
                                 operator.eq, operator.ne) else a.dtype
    assert op(A, scalar).dtype == expected_dtype
    assert op(scalar, A).dtype == expected_dtype


class _Wrapped(typing.NamedTuple):
    """A NamedTuple of arrays with its own operators (JAX's testDeferToNamedTuple)."""
    arr: object

    def __mul__(self, other):
        return _Wrapped(self.arr * other)

    def __rmul__(self, other):
        return _Wrapped(other * self.arr)


class _Everything:
    pass


class _Nothing:
    pass


for _op in BINARY_OPS + INT_OPS + [operator.matmul, divmod]:
    _n = _op.__name__.strip("_")
    _n = {"and": "and_", "or": "or_", "truediv": "truediv"}.get(_n, _n)
    for _name in (f"__{_n.rstrip('_')}__", f"__r{_n.rstrip('_')}__"):
        setattr(_Everything, _name, lambda self, other: self)
        setattr(_Nothing, _name, lambda self, other: NotImplemented)


@pytest.mark.parametrize("op", BINARY_OPS + INT_OPS + [operator.matmul, divmod],
                         ids=lambda f: f.__name__)
def test_binary_operators_defer_to_unknown_types(op):
    # JAX's _defer_to_unrecognized_arg: an operand type it does not know gets its own
    # (reflected) operator; with none, Python's TypeError names both types
    x = fnp.ones((2,), np.int32)
    other = _Everything()
    assert op(x, other) is other and op(other, x) is other
    other = _Nothing()
    if op is operator.eq or op is operator.ne:
        assert op(x, other) is (op is operator.ne) and op(other, x) is (op is operator.ne)
        return
    with pytest.raises(TypeError, match="'Array' and '_Nothing'|'Array'"):
        op(x, other)
    with pytest.raises(TypeError, match="'_Nothing' and 'Array'|'_Nothing'"):
        op(other, x)


class _HasJaxArray:
    """A wrapper that names its array through JAX's ``__jax_array__`` protocol."""

    def __init__(self, v):
        self.v = v

    def __jax_array__(self):
        return fnp.asarray(self.v)


def test_the_jax_array_protocol_converts_wrappers():
    w = _HasJaxArray(np.arange(3, dtype=np.float32))
    want = np.arange(3, dtype=np.float32)
    same(fnp.asarray(w), want)
    same(fnp.array(w), want)
    same(fnp.stack([w, w]), np.stack([want, want]))
    same(w + fnp.ones(3), want + 1)      # the Array's reflected operator takes it
    same(fnp.ones(3) * w, want)
    same(fnp.sin(w), np.sin(want))       # JAX 0.10 refuses this one; fnx converts
    same(fnx.grad(lambda x: fnp.sum(x * x))(w), 2 * want)


def test_a_tuple_subclass_with_operators_gets_its_turn():
    a, b = _Wrapped(fnp.ones(4)), fnp.ones(4)
    assert isinstance(a * b, _Wrapped) and isinstance(b * a, _Wrapped)
    assert isinstance(fnx.jit(operator.mul)(b, a), _Wrapped)
    assert isinstance(fnx.jit(operator.mul)(a, b), _Wrapped)
    # plain lists and tuples are still taken as arrays (JAX raises TypeError)
    same(b * [2, 2, 2, 2], np.full(4, 2, np.float32))
    same((1, 2, 3, 4) + b, np.array([2, 3, 4, 5], np.float32))
    with pytest.raises(TypeError, match="unsupported operand"):
        b + {1: 2}


def test_divmod_matmul_pow():
    a = np.array([-7.5, 7.0, 3.25], np.float32)
    A = fnp.asarray(a)
    q, r = divmod(A, 2.0)
    nq, nr = divmod(a, np.float32(2))
    same(q, nq)
    same(r, nr)
    q, r = divmod(7, fnp.asarray([2, -3]))              # __rdivmod__
    np.testing.assert_array_equal(q, [3, -3])
    np.testing.assert_array_equal(r, [1, -2])
    q, r = divmod(fnp.asarray([7, -7]), fnp.asarray([2, 2]))
    np.testing.assert_array_equal(q, [3, -4])
    np.testing.assert_array_equal(r, [1, 1])
    m = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    M = fnp.asarray(m)
    same(M @ fnp.asarray(m.T), m @ m.T)
    same(M @ np.ones(3, np.float32), m @ np.ones(3))      # __matmul__ with NumPy operand
    same(np.ones(2, np.float32) @ M, np.ones(2) @ m)       # __rmatmul__
    same(fnx.jit(operator.matmul)(M, fnp.asarray(m.T)), m @ m.T)
    same(A ** 2, a ** 2)
    same(2 ** fnp.asarray([1, 2, 3]), [2, 4, 8])
    assert (2 ** fnp.asarray([1, 2, 3])).dtype == I4
    same(fnp.asarray([2, 3]) ** -1, [0, 0])
    same(fnp.asarray([1.0, 4.0]) ** 0.5, [1.0, 2.0])
    same(pow(fnp.asarray([2, 3]), 2), [4, 9])


def test_unary_operators():
    a = np.array([1.5, -2.0, 0.0], np.float32)
    A = fnp.asarray(a)
    same(-A, -a)
    same(+A, a)
    same(abs(A), np.abs(a))
    i = fnp.asarray(np.array([0, 5, -3], np.int8))
    same(~i, ~np.array([0, 5, -3], np.int8))
    assert (~i).dtype == np.int8
    same(~fnp.asarray([True, False]), [False, True])
    for f in (operator.neg, operator.pos, abs, operator.invert):
        x = i if f is operator.invert else A
        identical(fnx.jit(f)(x), f(x))
    assert abs(fnp.asarray(-2.0)).weak_type


def test_comparison_results_are_arrays():
    x = fnp.asarray([1.0, 2.0, 3.0])
    for r in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, 2 < x, 2 == x):
        assert isinstance(r, fnx.Array) and r.dtype == B and r.shape == (3,)
    np.testing.assert_array_equal(x == fnp.asarray([1.0, 0.0, 3.0]), [True, False, True])
    with pytest.raises(ValueError):
        bool(x == x)           # ambiguous truth value of a multi-element array


def test_in_place_operators_rebind():
    x = fnp.asarray([1, 2])
    y = x
    x += 1
    x *= 3
    x //= 2
    x <<= 1
    assert y is not x
    np.testing.assert_array_equal(y, [1, 2])
    np.testing.assert_array_equal(x, [6, 8])


# --- methods --------------------------------------------------------------------------------

def test_reduction_methods():
    a = np.array([[1.0, -2.0, 3.5], [0.0, 4.0, -1.0]], np.float32)
    A = fnp.asarray(a)
    for name in ("sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin", "var",
                 "std", "cumsum", "cumprod"):
        same(getattr(A, name)(), getattr(a, name)())
        same(getattr(A, name)(axis=1), getattr(a, name)(axis=1))
        same(getattr(A, name)(0), getattr(a, name)(0))
    for name in ("sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin"):
        same(getattr(A, name)(axis=-1, keepdims=True), getattr(a, name)(axis=-1, keepdims=True))
    assert A.argmax().dtype == I4
    assert fnp.asarray(np.array([1, 2], np.int8)).sum().dtype == I4
    same(A.sum(axis=(0, 1)), a.sum())
    same(A.max(where=fnp.asarray(a > 0), initial=0.0), a.max(where=a > 0, initial=0.0))


def test_shape_methods():
    x = fnp.arange(24)
    n = np.arange(24)
    for shape in ((4, 6), (2, 3, 4), (-1, 8)):
        same(x.reshape(shape), n.reshape(shape))
        same(x.reshape(*shape), n.reshape(*shape))
    same(x.reshape(-1), n)
    y = x.reshape(2, 3, 4)
    ny = n.reshape(2, 3, 4)
    same(y.transpose(), ny.transpose())
    same(y.transpose(2, 0, 1), ny.transpose(2, 0, 1))
    same(y.transpose((1, 2, 0)), ny.transpose((1, 2, 0)))
    same(y.flatten(), ny.flatten())
    same(y.ravel(), ny.ravel())
    same(y.swapaxes(0, 2), ny.swapaxes(0, 2))
    z = fnp.ones((1, 3, 1))
    assert z.squeeze().shape == (3,)
    assert z.squeeze(0).shape == (3, 1)
    assert z.squeeze(axis=(0, 2)).shape == (3,)
    r = x.astype(np.float16)
    assert r.dtype == np.float16
    assert x.astype(float).dtype == F4 and x.astype("int64").dtype == I4  # x64 off
    with fnx.enable_x64():
        assert x.astype(float).dtype == F8 and x.astype("int64").dtype == I8
    assert x.astype(bool).dtype == B
    assert fnp.asarray(1.0).astype(np.float32).weak_type is False
    same(fnp.asarray([-1.0, 0.5, 3.0]).clip(0.0, 1.0), [0.0, 0.5, 1.0])
    same(fnp.asarray([-1.0, 0.5, 3.0]).clip(max=1.0), [-1.0, 0.5, 1.0])
    same(fnp.asarray([-1.0, 0.5, 3.0]).clip(min=0.0), [0.0, 0.5, 3.0])
    same(fnp.asarray([1.25, 2.5, -0.5]).round(), [1.0, 2.0, -0.0])
    same(fnp.asarray([1.25, 2.55]).round(1), np.round(np.array([1.25, 2.55], np.float32), 1))
    same(fnp.asarray([1.0, 3.0, 2.0]).sort(), [1.0, 2.0, 3.0])
    same(fnp.asarray([1.0, 3.0, 2.0]).argsort(), [0, 2, 1])
    same(fnp.asarray([[1, 2], [3, 4]]).diagonal(), [1, 4])
    same(fnp.asarray([[1, 2], [3, 4]]).trace(), 5)
    same(fnp.asarray([1 + 1j]).conj(), [1 - 1j])
    same(fnp.asarray([1.0, 2.0]).dot(fnp.asarray([3.0, 4.0])), 11.0)
    same(fnp.asarray([1, 2]).repeat(2), [1, 1, 2, 2])
    same(fnp.asarray([5, 6, 7]).take(fnp.asarray([2, 0])), [7, 5])
    nz = fnp.asarray([0, 3, 0, 4]).nonzero()
    same(nz[0], [1, 3])


def test_tolist_item_and_python_conversions():
    x = fnp.asarray([[1.5, 2.0], [3.0, 4.0]])
    assert x.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert isinstance(x.tolist()[0][0], float)
    assert fnp.asarray(3).tolist() == 3
    assert x.item(1) == 2.0 and x.item((1, 0)) == 3.0 and x.item(1, 1) == 4.0
    assert fnp.asarray(7).item() == 7 and type(fnp.asarray(7).item()) is int
    assert type(fnp.asarray(2.5).item()) is float
    with pytest.raises(ValueError):
        x.item()
    assert bool(fnp.asarray(1.0)) is True and bool(fnp.asarray(0)) is False
    assert bool(fnp.asarray([True])) is True
    assert int(fnp.asarray(3.7)) == 3 and int(fnp.asarray(-3.7)) == -3
    assert float(fnp.asarray(2)) == 2.0 and type(float(fnp.asarray(2))) is float
    assert complex(fnp.asarray(1 + 2j)) == 1 + 2j
    assert [10, 20, 30][fnp.asarray(1)] == 20
    assert operator.index(fnp.asarray(np.uint8(2))) == 2
    assert list(range(5))[fnp.asarray(1):fnp.asarray(3)] == [1, 2]
    with pytest.raises(TypeError):
        operator.index(fnp.asarray(1.0))
    with pytest.raises(TypeError):
        [1, 2][fnp.asarray(1.0)]
    with pytest.raises((TypeError, ValueError)):
        operator.index(fnp.asarray([1, 2]))
    with pytest.raises((TypeError, ValueError)):
        int(fnp.asarray([1, 2]))
    assert f"{fnp.asarray(1.5):.2f}" == "1.50"
    assert str(fnp.asarray([1.0, 2.0])) == str(np.array([1.0, 2.0], np.float32))


@pytest.mark.parametrize("conv", [bool, int, float, complex, operator.index, lambda x: x.item(),
                                  lambda x: x.tolist(), np.asarray, lambda x: [0, 1][x]],
                         ids=["bool", "int", "float", "complex", "index", "item", "tolist",
                              "asarray", "list_index"])
def test_conversions_of_tracers_raise_concretization_error(conv):
    @fnx.jit
    def f(x):
        return conv(x)

    with pytest.raises(ConcretizationError) as e:
        f(fnp.asarray(1))
    msg = str(e.value)
    assert "lax.cond" in msg and "static_argnums" in msg


def test_python_control_flow_on_tracer_raises():
    @fnx.jit
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(ConcretizationError) as e:
        f(fnp.asarray(1.0))
    assert "lax.cond" in str(e.value) and "static_argnums" in str(e.value)
    g = fnx.jit(lambda x, n: x * n if n > 0 else x, static_argnums=1)
    assert float(g(fnp.asarray(2.0), 3)) == 6.0


# --- protocols ------------------------------------------------------------------------------

def test_array_protocol():
    x = fnp.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    n = np.asarray(x)
    assert n.dtype == np.int32 and n.shape == (2, 3)
    np.testing.assert_array_equal(n, np.arange(6).reshape(2, 3))
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.sum(x) == 15
    assert np.array(x, copy=True).flags.writeable
    np.testing.assert_array_equal(np.concatenate([x, x]), np.concatenate([n, n]))


def test_array_namespace():
    x = fnp.ones(3)
    assert x.__array_namespace__() is fnp
    xp = x.__array_namespace__()
    assert isinstance(xp.sum(x), fnx.Array)
    assert fnp.__array_api_version__


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.bool_,
                                   np.complex64])
def test_dlpack_round_trip(dtype):
    n = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    with fnx.enable_x64():  # float64 stays float64
        x = fnp.asarray(n)
    assert x.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(x)
    assert back.dtype == n.dtype and back.shape == n.shape
    np.testing.assert_array_equal(back, n)
    y = fnp.from_dlpack(x)
    np.testing.assert_array_equal(y, n)
    assert y.dtype == n.dtype
    if back.flags.writeable:           # a writable export must not alias the Array
        back[...] = 0
        np.testing.assert_array_equal(x, n)
    z = fnp.from_dlpack(np.asarray(n))
    np.testing.assert_array_equal(z, n)


def test_repr():
    assert repr(fnp.asarray([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(fnp.asarray(1.0)) == "Array(1., dtype=float32, weak_type=True)"
    assert repr(fnp.asarray(3)) == "Array(3, dtype=int32, weak_type=True)"
    assert repr(fnp.asarray([1, 2])) == "Array([1, 2], dtype=int32)"
    assert repr(fnp.asarray(True)) == "Array(True, dtype=bool)"
    assert repr(fnp.asarray([[1, 2], [3, 4]])) == ("Array([[1, 2],\n"
                                                   "       [3, 4]], dtype=int32)")
    with fnx.enable_x64():
        assert repr(fnp.asarray(np.array([1.5], np.float64))) == "Array([1.5], dtype=float64)"
    r = repr(fnp.arange(2000))
    assert r.startswith("Array([   0,    1,") and r.endswith("1999], dtype=int32)")
    seen = []
    fnx.jit(lambda x: seen.append(repr(x)) or x)(fnp.ones(3))
    assert "f32[3]" in seen[0]


def test_repr_of_empty_array_shows_its_shape():
    assert repr(fnp.zeros((0, 2))) == "Array([], shape=(0, 2), dtype=float32)"
    assert repr(fnp.zeros((0,), np.int32)) == "Array([], dtype=int32)"


def test_len_and_iter():
    x = fnp.asarray([[1, 2], [3, 4], [5, 6]])
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(isinstance(r, fnx.Array) for r in rows)
    np.testing.assert_array_equal(rows[1], [3, 4])
    assert [int(v) for v in fnp.asarray([7, 8])] == [7, 8]
    a, b = fnp.asarray([1.0, 2.0])
    assert float(a) == 1.0 and float(b) == 2.0
    with pytest.raises(TypeError):
        len(fnp.asarray(1.0))
    with pytest.raises(TypeError):
        iter(fnp.asarray(1.0))
    assert len(fnp.zeros((0, 3))) == 0 and list(fnp.zeros((0, 3))) == []
    traced = fnx.jit(lambda x: [r * 2 for r in x])(x)
    np.testing.assert_array_equal(traced[2], [10, 12])


def test_hash_raises():
    with pytest.raises(TypeError):
        hash(fnp.asarray([1.0]))
    with pytest.raises(TypeError):
        hash(fnp.asarray(1.0))
    with pytest.raises(TypeError):
        {fnp.asarray(1.0): 1}


@pytest.mark.parametrize("x", [fnp.asarray([1.0, 2.0]), fnp.asarray(1.0), fnp.asarray(3),
                               fnp.asarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
                               fnp.asarray(np.array([1 + 2j], np.complex64)),
                               fnp.asarray([True, False]), fnp.zeros((0, 2))],
                         ids=["f32", "weak_f32", "weak_i32", "i64", "c64", "bool", "empty"])
def test_pickle_and_copy_round_trip(x):
    for proto in range(2, pickle.HIGHEST_PROTOCOL + 1):
        y = pickle.loads(pickle.dumps(x, protocol=proto))
        assert isinstance(y, fnx.Array)
        identical(y, x)
    identical(copy.copy(x), x)
    identical(copy.deepcopy(x), x)
    y = pickle.loads(pickle.dumps(x))
    assert not np.asarray(y).flags.writeable or np.asarray(y).size == 0


def test_pickle_of_tracer_raises():
    with pytest.raises(ConcretizationError):
        fnx.jit(lambda x: pickle.dumps(x))(fnp.ones(2))


def test_block_until_ready_and_copy():
    x = fnp.ones(2)
    assert x.block_until_ready() is x
    assert fnx.block_until_ready(x) is x
    identical(x.copy(), x)
    identical(fnp.copy(x), x)


def test_comparison_with_non_arrays_falls_back_like_python():
    x = fnp.asarray([1.0, 2.0])
    assert (x == None) is False and (x != None) is True  # noqa: E711
    assert (x == "a") is False
