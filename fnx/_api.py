"""JAX's top-level names that are not transformations of their own: ``make_jaxpr``, the
device queries, ``ensure_compile_time_eval``, ``named_call``/``named_scope``, ``typeof``,
``device_get``, ``effects_barrier``, ``print_environment_info``.

fnx runs on one device, the host CPU, in one process, so the device queries answer for
that one device (``CpuDevice(id=0)``, as JAX on a CPU-only machine); asking for another
backend raises. Names have no effect on fnx's IR, so ``named_call`` and ``named_scope``
only check their arguments.
"""
from __future__ import annotations

import contextlib

import numpy as np

from . import tree_util
from .core.array import CPU_DEVICE, Array, Tracer, _Device
from .core.ir import format_ir
from .core.primitive import aval_of
from .core.trace import EVAL, Trace, _current
from .core.tracing import make_ir

Device = _Device


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

def typeof(x):
    """The abstract value (shape, dtype, weak type) of an array, tracer or scalar."""
    if isinstance(x, Array):
        return x.aval
    from .core.array import to_array
    return aval_of(to_array(x, "typeof"))


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
        self._token = _current.set(_CompileTimeEvalTrace(_current.get()))
        return self

    def __exit__(self, *exc):
        _current.reset(self._token)
        return False


# --- devices and processes ---------------------------------------------------------------------

def _check_backend(backend, what):
    if backend is not None and backend != "cpu" and backend is not CPU_DEVICE:
        raise RuntimeError(f"{what}: unknown backend {backend!r}; fnx runs on one backend, "
                           "'cpu'")


def devices(backend=None):
    """The devices: fnx has one, the CPU (``[CpuDevice(id=0)]``)."""
    _check_backend(backend, "devices")
    return [CPU_DEVICE]


def local_devices(process_index=None, backend=None, host_id=None):
    _check_backend(backend, "local_devices")
    if (process_index or 0) != 0 or (host_id or 0) != 0:
        raise ValueError(f"local_devices: there is one process (index 0), got "
                         f"{process_index if process_index is not None else host_id}")
    return [CPU_DEVICE]


def device_count(backend=None):
    _check_backend(backend, "device_count")
    return 1


def local_device_count(backend=None):
    _check_backend(backend, "local_device_count")
    return 1


def default_backend():
    return "cpu"


def process_index(backend=None):
    _check_backend(backend, "process_index")
    return 0


def process_count(backend=None):
    _check_backend(backend, "process_count")
    return 1


def process_indices(backend=None):
    _check_backend(backend, "process_indices")
    return [0]


def device_get(x):
    """``x`` with every fnx array leaf as a NumPy array (read-only, no copy); other leaves
    as they are."""
    def get(leaf):
        if isinstance(leaf, Tracer):
            leaf._concrete("device_get")
        return leaf._value if type(leaf) is Array else leaf
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
    import platform
    import sys

    import numpy as np

    from . import __version__
    text = (f"fnx:    {__version__}\nnumpy:  {np.__version__}\n"
            f"python: {sys.version}\ndevice info: cpu-1, 1 local devices\n"
            f"process_count: 1\nplatform: {platform.uname()}\n")
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
    from .core.array import to_array
    from .core.ir import IR, Literal, Var
    from .core.primitive import ShapeDtypeStruct
    from .core.tracing import trace_flat
    from .transforms.vjp import backward_pass

    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes (pmap's named axes) has "
                                  "no meaning in fnx; leave it out")
    leaves, in_tree = tree_util.tree_flatten(primals)
    avals = [x if isinstance(x, ShapeDtypeStruct) else to_array(x, "linear_transpose").aval
             for x in leaves]
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
