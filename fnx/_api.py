"""JAX's top-level names that are not transformations of their own: ``make_jaxpr``, the
device queries, ``ensure_compile_time_eval``, ``named_call``/``named_scope``, ``typeof``,
``device_get``, ``effects_barrier``, ``print_environment_info``, ``linear_transpose``,
and the custom-derivative helpers ``closure_convert`` (closed-over traced values hoisted
to trailing arguments) and ``custom_gradient`` (TensorFlow-style ``(value, vjp)`` pairs,
a ``custom_vjp`` whose backward function is traced once in the forward pass).

fnx runs in one process, on the host CPU and, where the CUDA backend is there (a GPU with
CuPy, or its emulation with ``FNX_GPU_EMULATE=1``), a GPU; the device queries answer for
those (``fnx.core.devices`` has the placement rules). Names have no effect on fnx's IR, so ``named_call`` and ``named_scope``
only check their arguments.
"""
from __future__ import annotations

import contextlib
import functools
import platform
import sys

import numpy as np

from . import tree_util
from ._config import config
from .core.array import CPU_DEVICE, Array, Tracer, to_array
from .core.backend import all_devices, default_device as default_device_now
from .core import world as _world
from .core.dtypes import dtype_and_weak
from .core.ir import IR, Literal, Var, eval_ir, format_ir
from .core.primitive import ShapeDtypeStruct, aval_of
from .core.trace import EVAL, Trace, get_trace, trace_context
from .core.tracing import abstractify, make_ir, trace_flat
from .transforms.custom import custom_vjp
from .errors import ArgnumsError
from .transforms.jit import jit
from .transforms.vjp import VJP, backward_pass, vjp

from .core.devices import Device  # noqa: E402  (JAX's jax.Device: every device's class)


# --- make_jaxpr ------------------------------------------------------------------------------

class Jaxpr:
    """The open function of a ``ClosedJaxpr``: ``constvars``, ``invars``, ``outvars``,
    ``eqns`` (each with JAX's ``primitive``, ``invars``, ``outvars``, ``params``);
    ``str()`` is JAX's text layout."""

    def __init__(self, ir):
        self.ir = ir

    constvars = property(lambda self: self.ir.constvars)
    invars = property(lambda self: self.ir.invars)
    outvars = property(lambda self: self.ir.outvars)
    eqns = property(lambda self: self.ir.eqns)
    in_avals = property(lambda self: self.ir.in_avals)
    out_avals = property(lambda self: self.ir.out_avals)

    def pretty_print(self, **kwargs):
        return format_ir(self.ir, jaxpr=True)

    def __str__(self):
        return format_ir(self.ir, jaxpr=True)

    __repr__ = __str__


class ClosedJaxpr:
    """What ``fnx.make_jaxpr(f)(*args)`` returns: the traced function (``.jaxpr``) with its
    constants (``.consts``), its input and output types (``.in_avals``, ``.out_avals``:
    ``ShapeDtypeStruct``s), its equations (``.eqns``) and fnx's own IR (``.ir``, which
    ``fnx.eval_ir`` runs). ``str()`` prints it in JAX's jaxpr layout."""

    def __init__(self, ir):
        self.ir = ir
        self.jaxpr = Jaxpr(ir)

    consts = property(lambda self: list(self.ir.consts))
    literals = consts
    in_avals = property(lambda self: self.ir.in_avals)
    out_avals = property(lambda self: self.ir.out_avals)
    eqns = property(lambda self: self.ir.eqns)

    def pretty_print(self, **kwargs):
        return str(self.jaxpr)

    def __str__(self):
        return str(self.jaxpr)

    __repr__ = __str__


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False,
               abstracted_axes=None):
    """``make_jaxpr(f)(*args, **kwargs)``: ``f`` traced for arguments shaped like
    ``args`` (arrays, scalars or ``ShapeDtypeStruct``s), as a ``ClosedJaxpr``; with
    ``return_shape=True`` also the output shapes as a pytree of ``ShapeDtypeStruct``.
    Nothing is computed. The IR shown is fnx's, after its exact simplifications and
    dead-code removal (what ``jit`` runs); ``fnx.make_ir`` gives it as an ``IR``.
    ``axis_env`` (named axes for ``pmap``) and ``abstracted_axes`` (dynamic shapes)
    have no meaning in fnx and must be None."""
    if axis_env or abstracted_axes is not None:
        raise NotImplementedError(
            "make_jaxpr: axis_env and abstracted_axes are for pmap's named axes and "
            "dynamic shapes, which fnx does not have; leave them out")
    traced = make_ir(fun, static_argnums, return_shape=True)

    def make(*args, **kwargs):
        ir, shapes = traced(*args, **kwargs)
        closed = ClosedJaxpr(ir)
        return (closed, shapes) if return_shape else closed

    return make


# --- names, types ----------------------------------------------------------------------------

class ShapedArray(ShapeDtypeStruct):
    """What ``typeof`` returns: a ``ShapeDtypeStruct`` (shape, dtype, weak type) printed
    as JAX prints its ``ShapedArray``: ``str`` is ``float32[3,3]`` (``~float32[]`` when
    weakly typed), ``repr`` is ``ShapedArray(float32[3,3])``."""
    __slots__ = ()

    # str_short() stays fnx's (f32[3]: the IR printer uses it); str and repr are JAX's.
    def _long(self):
        return f"{np.dtype(self.dtype).name}[{','.join(map(str, self.shape))}]"

    def __str__(self):
        return ("~" if self.weak_type else "") + self._long()

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self._long()}{weak})"

    def update(self, shape=None, dtype=None, weak_type=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def update_weak_type(self, weak_type):
        return self.update(weak_type=weak_type)

    def strip_weak_type(self):
        return self.update(weak_type=False)

    @property
    def itemsize(self):
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize


def typeof(x):
    """The abstract value (shape, dtype, weak type) of an array, tracer or scalar, as a
    ``ShapedArray`` (a ``ShapeDtypeStruct`` that prints as JAX's: ``float32[3,3]``)."""
    if isinstance(x, Array):
        a = x.aval
    else:
        a = aval_of(to_array(x, "typeof"))
    return ShapedArray(a.shape, a.dtype, a.weak_type)


def named_call(fun, *, name=None):
    """``fun`` itself: fnx's IR has no name stack (names are for profilers)."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string, got {type(name).__name__}")
    return fun


@contextlib.contextmanager
def named_scope(name):
    """A context manager naming the operations inside (a no-op in fnx: its IR keeps
    each operation's source line instead)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a string, got {type(name).__name__}")
    yield


# --- ensure_compile_time_eval ------------------------------------------------------------------

class _CompileTimeEvalTrace(Trace):
    """Runs primitive calls whose operands are all concrete eagerly; hands the others to
    the trace that was current."""
    name = "ensure_compile_time_eval"

    def __init__(self, parent):
        self.parent = parent

    def process_primitive(self, prim, args, params):
        if not any(isinstance(a, Tracer) for a in args):
            return EVAL.process_primitive(prim, args, params)
        return self.parent.process_primitive(prim, args, params)


class ensure_compile_time_eval:
    """Inside this context manager, operations on concrete values run at once, even under
    ``jit`` (where they would otherwise be recorded into the IR), so their results are
    concrete: usable in Python control flow, ``float()``, shapes. Operations on traced
    values are traced as usual."""

    def __enter__(self):
        self._context = trace_context(_CompileTimeEvalTrace(get_trace()))
        self._context.__enter__()
        return self

    def __exit__(self, *exc):
        self._context.__exit__(*exc)
        return False


# --- devices and processes ---------------------------------------------------------------------

_PLATFORM_ALIASES = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu"}


def _platform_of(backend, what):
    """The platform ("cpu", "gpu") a ``backend=`` argument names (a name or a device)."""
    if isinstance(backend, Device):
        return backend.platform
    platform_ = _PLATFORM_ALIASES.get(str(backend).lower()) if backend is not None else None
    if platform_ is None:
        raise RuntimeError(f"{what}: unknown backend {backend!r}; the backends are "
                           f"{sorted(set(d.platform for d in all_devices()))} ('cuda' is "
                           "'gpu')")
    return platform_


def devices(backend=None):
    """The devices of ``backend`` ("cpu", "gpu"/"cuda"; None: the default backend's).
    A GPU is there with CuPy and a CUDA device, or emulated (``FNX_GPU_EMULATE=1``);
    asking for one where there is none raises, as JAX."""
    platform_ = default_backend() if backend is None else _platform_of(backend, "devices")
    found = [d for d in all_devices() if d.platform == platform_]
    if not found:
        raise RuntimeError(f"devices: no {platform_!r} backend here (the platforms are "
                           f"{sorted(set(d.platform for d in all_devices()))}). A GPU needs "
                           "CuPy and a CUDA device (pip install fnx[cuda]), or "
                           "FNX_GPU_EMULATE=1 for the CPU emulation of one.")
    return found


def local_devices(process_index=None, backend=None, host_id=None):
    """The devices of ``backend`` that this process computes on. ``process_index`` (or
    JAX's older ``host_id``) may only name this process: another process's devices are
    known to that process alone."""
    asked = process_index if process_index is not None else host_id
    if asked is not None:
        me, count = _world.process_index(), _world.process_count()
        if not 0 <= asked < count:
            raise ValueError(f"local_devices: no process {asked}; the processes are "
                             f"0..{count - 1} (this one is {me})")
        if asked != me:
            raise ValueError(f"local_devices: process {asked}'s devices are listed only in "
                             f"that process; this is process {me}. Call local_devices() "
                             "there, or use device_count() for the total.")
    return devices(backend)


def device_count(backend=None):
    """Devices of ``backend`` across every process: each process has the same local
    devices (one CPU each), so ``local_device_count() * process_count()``."""
    return len(devices(backend)) * _world.process_count()


def local_device_count(backend=None):
    """Devices of ``backend`` in this process."""
    return len(devices(backend))


def default_backend():
    """The platform computations on uncommitted values run on: "cpu", unless
    ``fnx.default_device`` (or ``jax_default_device``) names a GPU. Unlike JAX, a GPU
    is never the default by itself: data goes there with ``device_put`` or
    ``default_device``."""
    d = default_device_now()
    return "cpu" if d is None else d.platform


def _check_backend(backend, what):
    if backend is not None:
        _platform_of(backend, what)


def process_index(backend=None):
    """This process's index (0 unless ``fnx.distributed.initialize()`` joined an MPI world
    of several processes)."""
    _check_backend(backend, "process_index")
    return _world.process_index()


def process_count(backend=None):
    """How many processes run the program (see ``fnx.distributed.initialize``)."""
    _check_backend(backend, "process_count")
    return _world.process_count()


def process_indices(backend=None):
    """Every process's index: ``[0, ..., process_count() - 1]``."""
    _check_backend(backend, "process_indices")
    return list(range(_world.process_count()))


def device_get(x):
    """``x`` with every fnx array leaf as a NumPy array (read-only, no copy); other leaves
    as they are."""
    def get(leaf):
        if isinstance(leaf, Tracer):
            leaf._concrete("device_get")
        return leaf._concrete("device_get") if type(leaf) is Array else leaf
    return tree_util.tree_map(get, x)


def effects_barrier():
    """Wait until every effect issued so far has run: fnx runs callbacks synchronously, so
    they all have."""



def host_count(backend=None):
    """``process_count`` (JAX's older name)."""
    return process_count(backend)


def host_id(backend=None):
    """``process_index`` (JAX's older name)."""
    return process_index(backend)


def host_ids(backend=None):
    """``process_indices`` (JAX's older name)."""
    return process_indices(backend)


def print_environment_info(return_string=False):
    """fnx's, NumPy's and Python's versions, the device and the platform; printed, or
    returned with ``return_string=True``."""


    from ._version import __version__
    text = (f"fnx:    {__version__}\nnumpy:  {np.__version__}\n"
            f"python: {sys.version}\ndevice info: cpu-{device_count()}, "
            f"{local_device_count()} local devices\n"
            f"process_count: {process_count()}\nplatform: {platform.uname()}\n")
    if return_string:
        return text
    print(text, end="")
    return None


# --- linear_transpose ---------------------------------------------------------------------------

_BILINEAR = ("mul", "dot_general", "conv_general_dilated")


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun``: ``linear_transpose(fun, *primals)``
    returns ``f_t(out_cotangent) -> tuple of input cotangents``, structured like
    ``primals`` (arrays or ``ShapeDtypeStruct``s giving the input types; their values are
    not used). ``fun`` is traced once; the work that does not depend on its inputs runs
    then, and each call of ``f_t`` runs the transposed linear part. A ``fun`` that is not
    linear in its inputs (``sin(x)``, ``x * x``) raises TypeError."""

    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes (pmap's named axes) has "
                                  "no meaning in fnx; leave it out")
    leaves, in_tree = tree_util.tree_flatten(primals)
    avals = [abstractify(x, "linear_transpose") if isinstance(x, ShapeDtypeStruct)
             else to_array(x, "linear_transpose").aval for x in leaves]
    out_tree = [None]

    def flat(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, list(xs)))
        out_leaves, out_tree[0] = tree_util.tree_flatten(out)
        return [to_array(o, "linear_transpose output") for o in out_leaves]

    ir = trace_flat(flat, avals, "linear_transpose")
    # Split the IR: equations that do not read the inputs run now (their results become
    # constants); the others must be linear in the input-dependent operands.
    env = dict(zip(ir.constvars, ir.consts))
    dep, lin_eqns = set(ir.invars), []

    def read(v):
        return Array._wrap(v.value, v.aval.weak_type) if type(v) is Literal else env[v]

    for e in ir.eqns:
        dyn = [v for v in e.inputs if type(v) is Var and v in dep]
        if not dyn:
            out = e.prim.bind(*[read(v) for v in e.inputs], **e.params)
            env.update(zip(e.outputs, out if e.prim.multiple_results else [out]))
            continue
        if (e.prim.transpose is None or (e.prim.name in _BILINEAR and len(dyn) > 1)
                or (e.prim.name == "div" and e.inputs[1] in dep)):
            raise TypeError(f"linear_transpose: the function is not linear in its inputs: "
                            f"{e.prim.name} (at {e.source}) is applied to values computed "
                            "from them in a way that is not linear")
        lin_eqns.append(e)
        dep.update(e.outputs)
    used = {v for e in lin_eqns for v in e.inputs if type(v) is Var and v not in dep}
    used |= {v for v in ir.outvars if type(v) is Var and v not in dep}
    constvars = [v for v in env if v in used]
    lin = IR(ir.invars, ir.outvars, lin_eqns, constvars, [env[v] for v in constvars])
    out_avals = ir.out_avals

    def transposed(out_cotangent):
        cts, tree = tree_util.tree_flatten(out_cotangent)
        cts = [to_array(c, "linear_transpose cotangent") for c in cts]
        if tree != out_tree[0] or any((c.shape, c.dtype) != (a.shape, a.dtype)
                                      for c, a in zip(cts, out_avals)):
            got = [f"{c.dtype}{list(c.shape)}" for c in cts]
            want = [f"{a.dtype}{list(a.shape)}" for a in out_avals]
            raise TypeError(f"linear_transpose: the cotangent must match the function's "
                            f"output {out_tree[0]} with types {want}; got {tree} with {got}")
        try:
            in_cts = backward_pass(lin, cts)
        except (TypeError, AttributeError) as err:
            raise TypeError(f"linear_transpose: the function is not linear in its inputs "
                            f"({err})") from None
        in_cts = [Array._wrap(np.zeros(a.shape, a.dtype), a.weak_type) if c is None else c
                  for c, a in zip(in_cts, avals)]
        return tuple(tree_util.tree_unflatten(in_tree, in_cts))

    return transposed


# --- closure_convert, custom_gradient ----------------------------------------------------------

def _is_hoisted(c):
    """A closed-over value AD may see: a traced value of an inexact dtype (as JAX's
    closure_convert, which leaves concrete values and integer tracers closed over)."""
    if not isinstance(c, Tracer):
        return False
    d = np.dtype(c.dtype)
    return d.kind in "fc" or d.name == "bfloat16"


def closure_convert(fun, *example_args):
    """``(converted, hoisted)``: ``converted(*args, *hoisted)`` computes ``fun(*args)`` with
    the traced floating-point values ``fun`` closes over (found by tracing it on
    arguments shaped like ``example_args``) passed as trailing arguments, so a
    ``custom_vjp`` rule can give them cotangents. Concrete closed-over values stay
    closed over; with none traced, ``hoisted`` is empty."""
    ir, out_shapes = make_ir(fun, return_shape=True)(*example_args)
    in_tree = tree_util.tree_structure(tuple(example_args))
    out_tree = tree_util.tree_structure(out_shapes)
    consts = list(ir.consts)
    which = [_is_hoisted(c) for c in consts]
    hoisted = [c for c, h in zip(consts, which) if h]
    closed = [c for c, h in zip(consts, which) if not h]
    n_hoisted = len(hoisted)

    def converted(*args_and_hoisted):
        n = len(args_and_hoisted) - n_hoisted
        if n < 0:
            raise TypeError(f"closure_convert: the converted function takes its arguments "
                            f"followed by the {n_hoisted} hoisted values; got "
                            f"{len(args_and_hoisted)} arguments in all")
        args, extra = args_and_hoisted[:n], iter(args_and_hoisted[n:])
        leaves, tree = tree_util.tree_flatten(tuple(args))
        if tree != in_tree:
            raise TypeError(f"closure_convert: the converted function's arguments must have "
                            f"the structure of the example arguments, {in_tree}; got {tree}")
        closed_it = iter(closed)
        cs = [next(extra) if h else next(closed_it) for h in which]
        outs = eval_ir(ir, *[to_array(x) for x in leaves], consts=cs)
        return tree_util.tree_unflatten(out_tree, outs)

    converted.__name__ = f"closure_converted_{getattr(fun, '__name__', 'fun')}"
    return converted, hoisted


def _dtype_of(a):
    return dtype_and_weak(a)[0]


def _weak_of(a):
    return dtype_and_weak(a)[1]


class _StaticRes:
    """Residual data that is not an array (a traced rule's IR and tree structures): a
    pytree node with no children, so transformations pass it through untouched."""

    def __init__(self, value):
        self.value = value


tree_util.register_pytree_node(_StaticRes, lambda r: ((), r.value),
                               lambda value, _: _StaticRes(value))


def custom_gradient(fun):
    """TensorFlow-style custom gradients (JAX's ``custom_gradient``): ``fun(*args)``
    returns ``(value, vjp)``, where ``vjp(cotangent)`` returns one cotangent per argument
    (a tuple; a lone value for a one-argument ``fun``). The result computes ``value``;
    under ``grad``/``vjp`` its gradient is ``vjp``'s. ``vjp`` may close over values of
    the forward pass (traced once per call, not re-run); it must not branch in Python on
    their values. Forward mode (``jvp``) raises, as for any ``custom_vjp``."""

    def split(out, where):
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and callable(out[1])):
            raise TypeError(f"custom_gradient: {getattr(fun, '__name__', 'fun')} must return "
                            f"a pair (value, vjp_function); got {type(out).__name__} {where}")
        return out

    @functools.wraps(fun)
    def primal(*args):
        return split(fun(*args), "")[0]

    wrapped = custom_vjp(primal)

    def fwd(*args):
        ans, rule = split(fun(*args), "")
        n = len(args)

        def flat_rule(ct):
            cts = rule(ct)
            if n == 1 and not isinstance(cts, (tuple, list)):
                cts = (cts,)
            if not isinstance(cts, (tuple, list)) or len(cts) != n:
                raise TypeError(
                    f"custom_gradient: the vjp function of {getattr(fun, '__name__', 'fun')} "
                    f"must return one cotangent per argument ({n}, as a tuple); got "
                    f"{type(cts).__name__}"
                    + (f" of length {len(cts)}" if isinstance(cts, (tuple, list)) else ""))
            return tuple(cts)

        ct_example = tree_util.tree_map(
            lambda a: ShapeDtypeStruct(np.shape(a), _dtype_of(a), _weak_of(a)), ans)
        ir, ct_shapes = make_ir(flat_rule, return_shape=True)(ct_example)
        return ans, (_StaticRes((ir, tree_util.tree_structure(ct_shapes))), list(ir.consts))

    def bwd(res, ct):
        static, consts = res
        ir, out_tree = static.value
        leaves = [to_array(x) for x in tree_util.tree_leaves(ct)]
        return tree_util.tree_unflatten(out_tree, eval_ir(ir, *leaves, consts=list(consts)))

    wrapped.defvjp(fwd, bwd)
    return wrapped


# --- flag context managers and host copies -----------------------------------------------------

def explain_cache_misses(value=True):
    """``with fnx.explain_cache_misses():`` logs why each jit cache lookup missed."""
    return config._override("jax_explain_cache_misses", value)


def check_tracer_leaks(value=True):
    """JAX's ``jax_check_tracer_leaks`` context manager. fnx detects a leaked tracer
    whenever one is used (``LeakedTracerError``), with or without it."""
    return config._override("jax_check_tracer_leaks", value)


def checking_leaks():
    """``with fnx.checking_leaks():`` is ``check_tracer_leaks(True)``."""
    return check_tracer_leaks(True)


def default_device(device):
    """``with fnx.default_device(d):``: computations on uncommitted values (creation
    functions, ``fnx.random``, Python scalars and NumPy inputs) run on the device ``d``
    (a Device, or "cpu"/"gpu": that platform's first device; None: the CPU)."""
    return config._override("jax_default_device", device)


def default_prng_impl(name):
    """``with fnx.default_prng_impl('rbg'):``: the generator of the keys
    ``fnx.random.PRNGKey`` makes (``'threefry2x32'``, ``'rbg'`` or ``'unsafe_rbg'``)."""
    return config._override("jax_default_prng_impl", name)


def threefry_partitionable(value=True):
    """``with fnx.threefry_partitionable(True):`` (fnx always derives keys the partitionable
    way, JAX's default; False raises)."""
    return config._override("jax_threefry_partitionable", value)


def copy_to_host_async(x):
    """Returns ``x``: fnx arrays live in host memory already, so there is nothing to copy."""
    return x


# --- jax.fwd_and_bwd ---------------------------------------------------------------------

def fwd_and_bwd(fun, argnums, has_aux=False, jitted=True):
    """``(fwd, bwd)``: ``fwd(*args)`` is ``(out, residuals)`` (``(out, residuals, aux)``
    with ``has_aux``), the forward pass of ``fun`` differentiated with respect to
    ``args[argnums]``, and ``bwd(residuals, cotangent)`` the cotangents of those
    arguments (a tuple when ``argnums`` is a sequence). ``residuals`` is a VJP object;
    with ``jitted`` (the default) both are jitted, so each compiles once."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums or not all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
        raise ArgnumsError(f"fwd_and_bwd: argnums must be an int or a non-empty sequence of "
                           f"ints, got {argnums!r}")

    def fwd(*args):
        n_args = len(args)
        for n in nums:
            if not -n_args <= n < n_args:
                raise ArgnumsError(f"fwd_and_bwd: argnums {argnums} out of range for "
                                   f"{n_args} positional arguments")
        idx = [n % n_args for n in nums]

        def of_diff(*diff):
            full = list(args)
            for i, d in zip(idx, diff):
                full[i] = d
            return fun(*full)

        return vjp(of_diff, *[args[i] for i in idx], has_aux=has_aux)

    def bwd(f_vjp, ct):
        if not isinstance(f_vjp, VJP):
            raise TypeError(f"fwd_and_bwd: bwd takes the residuals fwd returned (a VJP "
                            f"object) and a cotangent, got {type(f_vjp).__name__}")
        cts = f_vjp(ct)
        return cts[0] if single else cts

    if jitted:
        return jit(fwd), jit(bwd)
    return fwd, bwd
