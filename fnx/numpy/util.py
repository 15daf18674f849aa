"""Shared helpers of ``fnx.numpy``, which ``fnx.nn`` and ``fnx.scipy`` use too: promotion,
broadcasting, axis handling."""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from .. import lax
from .._config import config
from ..core import dtypes
from ..core.array import CPU_DEVICE, Array, Tracer, to_array
from ..core.numpy_errstate import quiet_call, quiet_run
from ..errors import ConcretizationError, ShapeError


def promote(name, *args, to_inexact=False):
    """Arrays of ``args`` converted to their common dtype (JAX's lattice).

    Python scalars become arrays of the result dtype directly (weakly typed),
    so ``x_f32 * 2.0`` records no conversion.
    """
    if len(args) == 1 and isinstance(args[0], Array) and (
            not to_inexact or args[0].dtype.kind in "fc"):
        return [args[0]]  # one array of an acceptable dtype: nothing to do
    pairs = []
    for a in args:
        r = dtypes.python_scalar_dtype(a)
        if r is None:
            a = to_array(a, name)
            r = (a.dtype, a.weak_type)
        pairs.append(r)
    dtype, weak = dtypes.promote_pairs(pairs)
    if to_inexact and not dtypes.is_inexact(dtype):
        # ints and bools become float32 (64-bit ints: float64), whatever the x64 flag, as
        # in JAX; the result is weakly typed only if the inputs were (JAX:
        # ``true_divide(i32, i32)`` is a strong float32, ``sqrt(2)`` a weak one).
        dtype = dtypes.to_inexact(dtype)
    out = []
    for a in args:
        if dtypes.python_scalar_dtype(a) is not None:
            out.append(Array._wrap(_scalar_value(a, dtype), weak))
        else:
            a = to_array(a, name)
            if a.dtype != dtype:
                a = lax.convert_element_type_exact(a, dtype, weak)  # a promotion, not a request
            out.append(a)
    return out


def _scalar_value(a, dtype):
    """The Python scalar ``a`` as a NumPy scalar of ``dtype``; one too large for it is
    inf, without NumPy's cast warning (as the primitives, fnx raises none). A Python int
    that fits the default int (checked where it became weakly typed) but not a narrower
    ``dtype`` wraps, as JAX's conversion does (int8 + 300 is int8 + 44)."""
    if type(a) is int and dtype.kind in "iu":
        dtypes.check_python_int(a, dtypes.default_int(), "fnx")
        info = np.iinfo(dtype)
        if not info.min <= a <= info.max:
            a = (a - info.min) % (1 << (8 * dtype.itemsize)) + info.min
    try:
        return quiet_run(np.array, a, dtype)[()]
    except RuntimeError:  # the quiet context is busy (another thread)
        return quiet_call(np.array, a, dtype)[()]


# [True] while jax_numpy_rank_promotion is not 'allow': the one check on the hot paths
RANK_CHECK = [config.values["jax_numpy_rank_promotion"] != "allow"]
config.on_change("jax_numpy_rank_promotion",
                 lambda v: RANK_CHECK.__setitem__(0, v != "allow"))


def broadcast_shapes(name, *shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{name}: shapes {', '.join(map(str, shapes))} do not broadcast "
                         "together (NumPy rules: trailing dims must be equal or 1)") from None


def broadcast_to_shape(x, shape):
    if x.shape == shape:
        return x
    nd = len(shape)
    return lax.broadcast_in_dim(x, shape, tuple(range(nd - x.ndim, nd)))


def check_rank_promotion(name, *shapes):
    """JAX's ``jax_numpy_rank_promotion`` flag: 'warn' or 'raise' when operands of
    different non-zero ranks broadcast (rank-0 operands never count)."""
    mode = config.values["jax_numpy_rank_promotion"]
    if mode == "allow" or len({len(s) for s in shapes if s}) < 2:
        return
    shown = " ".join(map(str, shapes))
    if mode == "raise":
        raise RankPromotionError(
            f"{name}: operands of shapes {shown} have different ranks and "
            "jax_numpy_rank_promotion='raise' forbids implicit rank promotion. Add the "
            "leading axes explicitly (x[None, ...], fnp.expand_dims, reshape) or set the "
            "flag to 'allow' (fnx.config.update('jax_numpy_rank_promotion', 'allow')).")
    warnings.warn(f"{name}: following NumPy's implicit rank promotion on shapes {shown}. "
                  "Add the leading axes explicitly, or set jax_numpy_rank_promotion to "
                  "'allow' to silence this warning.", UserWarning, stacklevel=_user_level())


_FNX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_level():
    """The ``stacklevel`` of the first frame outside fnx, seen from the caller's caller."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_FNX_DIR):
        frame, level = frame.f_back, level + 1
    return level


class RankPromotionError(ShapeError, ValueError):
    """Implicit rank promotion under jax_numpy_rank_promotion='raise' (a ValueError,
    as JAX's)."""


def promote_broadcast(name, *args, to_inexact=False, keep_scalars=False):
    """Promoted arrays broadcast to one shape (``keep_scalars``: rank-0 ones stay
    rank-0, for binary primitives, which take a scalar operand as it is)."""
    arrays = promote(name, *args, to_inexact=to_inexact)
    if RANK_CHECK[0]:
        check_rank_promotion(name, *[a.shape for a in arrays])
    shape = broadcast_shapes(name, *[a.shape for a in arrays])
    return [a if keep_scalars and a.ndim == 0 else broadcast_to_shape(a, shape)
            for a in arrays]


class AxisError(ShapeError, ValueError, IndexError):
    """An axis out of range: a ShapeError, and a ValueError and IndexError as NumPy's
    AxisError (the Array API asks for IndexError)."""


def normalize_axis(name, axis, ndim):
    """``axis`` in ``[0, ndim)``; out of range raises, as in JAX (a 0-d array has no
    axis: NumPy's reductions accept axis 0 of one, JAX's and fnx's do not)."""
    axis = int(axis)
    if not -ndim <= axis < ndim:
        if ndim == 0:
            raise AxisError(f"{name}: axis {axis} is out of bounds for an array of rank 0 "
                            "(a 0-d array has no axes); use axis=None")
        raise AxisError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def normalize_axes(name, axis, ndim):
    """A tuple of non-negative axes for ``axis`` (None means all)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = tuple(normalize_axis(name, a, ndim) for a in axis)
    if len(set(out)) != len(out):
        raise ShapeError(f"{name}: repeated axis in {axis}")
    return out


def concrete_int(name, x, what):
    """A Python int from ``x``; tracers raise a ConcretizationError that says why."""
    if isinstance(x, Tracer):
        raise ConcretizationError(
            f"{name}: {what} must be known when tracing (it sets an output shape), but it "
            f"is a traced value. Pass it as a Python int or mark it static "
            "(jit(f, static_argnums=...)).")
    return int(x)




def check_device(name, device):
    """``device=`` of the creation functions (JAX's and the Array API's): None, a device
    (one of ``fnx.devices()``, a GPU's included), or a sharding, which places the array
    whole on its one device. Returns the device, or None."""
    if device is None or device is CPU_DEVICE:
        return device
    from ..sharding import device_of
    try:
        return device_of(device, name)
    except TypeError:
        raise ValueError(f"{name}: device= takes a device (one of fnx.devices()) or a "
                         f"sharding, got {device!r}; pass device=None or x.device") from None


def placed(name, like=False):
    """A creation function whose ``device=`` places its result (``check_device``); with
    ``like``, an ``*_like`` function's result goes, by default, where its first argument
    lies (as JAX's do), when that is not the CPU."""
    import functools

    def wrap(fn):
        @functools.wraps(fn)
        def on_device(*args, device=None, **kwargs):
            target = check_device(name, device)
            if target is None and like and args and type(args[0]) is Array:
                target = args[0].device if args[0].device is not CPU_DEVICE else None
            out = fn(*args, **kwargs)
            if target is None or target is CPU_DEVICE and type(out) is Array \
                    and out.device is CPU_DEVICE:
                return out
            from ..core.array import device_put_array
            if isinstance(out, tuple):               # linspace(retstep=True)
                return tuple(device_put_array(o, target) for o in out)
            return device_put_array(out, target)
        return on_device
    return wrap


def compiled_when_eager(fn=None, *, static_argnums=()):
    """``fn`` as a jitted program when it is called on concrete arrays (one compiled
    program per signature, as JAX's ``jnp`` functions are jitted): a composite of several
    primitives then costs one dispatch instead of one per primitive. ``static_argnums``:
    positions of hashable Python values (flags), one compiled program per value. Called
    with traced values (inside ``jit``, ``grad``, ``vmap``), it traces through ``fn`` as
    before."""
    if fn is None:
        return lambda f: compiled_when_eager(f, static_argnums=static_argnums)
    import functools

    from .. import tree_util
    from ..core.array import Tracer
    static = tuple(static_argnums)
    programs = {}

    def traced(values):
        for v in values:
            if isinstance(v, Tracer) or (isinstance(v, (list, tuple, dict)) and any(
                    isinstance(leaf, Tracer) for leaf in tree_util.tree_leaves(v))):
                return True
        return False

    @functools.wraps(fn)
    def wrapper(*args):
        if traced(args):
            return fn(*args)
        key = tuple(args[i] for i in static)
        compiled = programs.get(key)
        if compiled is None:
            from ..transforms.jit import jit

            def program(*dynamic):
                full, it = [], iter(dynamic)
                for i in range(len(args)):
                    full.append(args[i] if i in static else next(it))
                return fn(*full)
            compiled = programs[key] = jit(program)
        return compiled(*[a for i, a in enumerate(args) if i not in static])
    return wrapper
