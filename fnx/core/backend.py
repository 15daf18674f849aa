"""Backends: what an IR computes on a kind of device, behind one seam (the interface and
the registries; ``fnx.backends`` holds the backends themselves).

A **backend** turns an IR into something that runs (or, for ONNX, into a model) and
owns the buffers of its device. Every backend implements the small ``Backend``
interface below; ``jit``, the eager tape and ``check_op`` reach a backend only through
it, never a backend's modules directly:

* ``compile(ir, name, donated=())``: an ``Executable`` whose ``fn(*buffers)`` returns
  the output buffers (with ``donated``, ``fn(*buffers, _dn=[buffer or None])``: the
  donated inputs' buffers the call may overwrite);
* ``put(value)`` / ``fetch(buffer)``: a host (NumPy) value onto the device, and back;
* ``wrap(buffer, weak_type)``: an output buffer as an ``fnx.Array``;
* ``offer_donated(raw, positions)``: for each donated input position, its buffer if
  nothing but the caller's Array references it (so the call may overwrite it), else
  None;
* ``owns(buffer)``: whether a buffer lives on this backend's device (how ``jit`` picks
  the backend from its arguments);
* ``devices()`` / ``device_of(buffer)``: the devices it computes on (``fnx.devices``) and
  the one holding a buffer (``Array.device``);
* ``eager(prim, buffers, params, out_aval)``: one primitive applied outside ``jit`` to
  buffers of its device (the default runs the impl; a device backend runs its own
  program);
* ``run_scan(body, buffers, ...)``: a whole ``scan`` loop (its impl calls it through
  ``apply_scan``); the default runs ``executable(body)`` once per step and stacks the
  ys on the host, a backend overrides it with something faster (NumPy's generates one
  function for the loop).

A primitive's **lowering rules**, one per backend, are registered beside its other rules
with ``register_lowering(prim, backend_name, rule)`` and looked up with
``lowering(prim, backend_name)``. The backends named so far:

* ``"numpy"``: vectorized NumPy on the CPU (always there). The impl is NumPy code; a
  rule (``fnx.core.numpy_rules.NumpyRule``) says how jit's generated code does better:
  the ufunc the impl is, a plan specialized to the avals, an expression (a plain
  callable ``(input expressions, params, bind_global, in_avals, out_avals) -> expression
  string or None`` is one).
* ``"cuda"``: generated CUDA kernels through CuPy. A rule is ``(xs, in_dtypes,
  out_dtype, **params) -> str``, the CUDA C expression of one output element
  (``fnx.kernels``).
* ``"onnx"``: the exporter, whose ``compile`` builds an ONNX ``ModelProto``. A rule is
  ``(ctx, *input_names, **params) -> output name(s)`` (``fnx.onnx``).

Adding a backend: subclass ``Backend``, implement the methods above, call
``register_backend(MyBackend())``, and register lowerings for the primitives it runs
(``register_lowering(fnx.lax.sin_p, "mine", rule)``); ``available_backends()`` then
lists it wherever its ``available()`` is true.
"""
from __future__ import annotations

import weakref

import numpy as np

from .._config import config
from . import devices as _devices
from .devices import CPU_DEVICE, DeviceMismatchError
from .primitive import Primitive

__all__ = ["Backend", "Executable", "register_backend", "get_backend", "available_backends",
           "register_lowering", "lowering", "backend_for", "apply_ir", "apply_scan",
           "all_devices", "place", "default_device", "is_host_buffer"]


class Executable:
    """A compiled IR: ``fn(*buffers) -> tuple of buffers``; ``source``: the generated
    program's text (for reading and for errors), where the backend has one."""

    def __init__(self, fn, source=None, backend=None):
        self.fn = fn
        self.source = source
        self.backend = backend

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


class Backend:
    """The interface every backend implements (see the module docstring)."""

    name = ""
    platform = ""  # "cpu", "gpu", or "" for a backend that does not run (onnx)

    def available(self) -> bool:
        """Whether this backend can be used on this machine."""
        return True

    def compile(self, ir, name="jit", donated=()):
        raise NotImplementedError(f"backend {self.name!r} cannot compile")

    def put(self, value):
        raise NotImplementedError(f"backend {self.name!r} holds no buffers")

    def fetch(self, buffer):
        raise NotImplementedError(f"backend {self.name!r} holds no buffers")

    def wrap(self, buffer, weak_type=False):
        raise NotImplementedError(f"backend {self.name!r} holds no buffers")

    def offer_donated(self, raw, positions):
        return [None] * len(positions)

    def owns(self, buffer) -> bool:
        return False

    def devices(self) -> list:
        """The devices this backend computes on (the CPU for a CPU backend)."""
        return [CPU_DEVICE] if self.platform == "cpu" else []

    def device_of(self, buffer):
        """The device holding ``buffer`` (one this backend ``owns``)."""
        return self.devices()[0]

    def eager(self, prim, buffers, params, out_aval):
        """``prim`` applied to ``buffers`` outside jit: its impl."""
        return prim.impl(*buffers, **params)

    def __init__(self):
        self.executables = weakref.WeakKeyDictionary()  # IR -> its cached executable

    def executable(self, ir):
        """``compile(ir)``, cached for as long as ``ir`` lives (how a primitive whose impl
        runs an IR, as ``jit``'s call primitive and the loops, runs it)."""
        c = self.executables.get(ir)
        if c is None:
            c = self.executables[ir] = self.compile(ir, getattr(ir, "name", "jit"))
        return c

    def clear_cache(self):
        """Forget the executables ``executable`` cached."""
        self.executables.clear()

    def run_scan(self, body, buffers, *, num_consts, num_carry, length, reverse, unroll=1):
        """The outputs (final carries, then stacked ys) of a ``scan`` over ``buffers``
        (``consts, init, xs``; the ``scan`` primitive's operands and params): the body runs
        once per step as ``executable(body)`` and the ys are stacked (``stack``). A
        backend overrides this with a faster loop."""
        fn = self.executable(body).fn
        nc, nk = num_consts, num_carry
        consts, carry = list(buffers[:nc]), list(buffers[nc:nc + nk])
        xs = buffers[nc + nk:]
        y_avals = body.out_avals[nk:]
        ys = [[None] * length for _ in y_avals]
        for t in (range(length - 1, -1, -1) if reverse else range(length)):
            outs = fn(*consts, *carry, *[x[t] for x in xs])
            carry = list(outs[:nk])
            for col, y in zip(ys, outs[nk:]):
                col[t] = y
        return carry + [self.stack(col, a) for col, a in zip(ys, y_avals)]

    def stack(self, buffers, aval):
        """``buffers`` (of type ``aval``) stacked along a new leading axis: on the host
        here, then put back; a backend overrides it to stack on its device."""
        if not buffers:
            return self.put(np.empty((0,) + tuple(aval.shape), aval.dtype))
        return self.put(np.stack([np.asarray(self.fetch(b)) for b in buffers])
                        .astype(aval.dtype, copy=False))

    def __repr__(self):
        return f"<fnx backend {self.name!r}>"


_BACKENDS: dict[str, Backend] = {}
# The registered backends that hold buffers of their own (not NumPy's, not an exporter's):
# the ones ``backend_for`` asks, kept by ``register_backend`` so a call asks none today.
DEVICE_BACKENDS: list = []


def register_backend(backend: Backend) -> Backend:
    """Make ``backend`` reachable by its name (replacing one of the same name)."""
    if not isinstance(backend, Backend) or not backend.name:
        raise TypeError(f"register_backend: expected a named fnx.backends.Backend, got "
                        f"{backend!r}")
    _BACKENDS[backend.name] = backend
    DEVICE_BACKENDS[:] = [b for n, b in _BACKENDS.items() if n != "numpy" and b.platform]
    return backend


def get_backend(name: str = "numpy") -> Backend:
    """The backend registered under ``name``."""
    b = _BACKENDS.get(name)
    if b is None:
        raise ValueError(f"get_backend: no backend named {name!r}; the backends are "
                         f"{sorted(_BACKENDS)}")
    return b


def available_backends() -> list:
    """The names of the backends usable on this machine."""
    return [n for n, b in _BACKENDS.items() if b.available()]


def register_lowering(prim: Primitive, backend_name: str, rule):
    """Register ``rule`` as ``prim``'s lowering on the backend ``backend_name`` (see the
    module docstring for each backend's rule signature); returns ``rule``, so it can be
    used as a decorator: ``@partial(register_lowering, sin_p, "onnx")``."""
    if not isinstance(prim, Primitive):
        raise TypeError(f"register_lowering: expected a Primitive, got {prim!r}")
    if not isinstance(backend_name, str) or not backend_name:
        raise TypeError(f"register_lowering: the backend name must be a string, got "
                        f"{backend_name!r}")
    if not callable(rule):
        raise TypeError(f"register_lowering({prim.name}, {backend_name!r}): the rule must be "
                        f"callable, got {rule!r}")
    prim.lowerings[backend_name] = rule
    return rule


def lowering(prim: Primitive, backend_name: str):
    """``prim``'s lowering rule on ``backend_name``, or None."""
    return prim.lowerings.get(backend_name)


def backend_for(buffers) -> Backend:
    """The backend whose device holds ``buffers`` (the raw values of a call's
    arguments, any iterable): the first backend that owns one of them, else NumPy (host
    values). With no device backend registered nothing is looked at."""
    if DEVICE_BACKENDS:
        buffers = list(buffers)
        for b in DEVICE_BACKENDS:
            if any(b.owns(x) for x in buffers):
                return b
    return _BACKENDS["numpy"]


def all_devices() -> list:
    """Every device of every available backend, the CPU first."""
    return [d for b in _BACKENDS.values() if b.available() for d in b.devices()]


# The default device (``fnx.default_device``'s context, ``jax_default_device``): None is
# the CPU. A list so the config hook and ``place`` share it without a lookup.
DEFAULT_DEVICE = [None]


def default_device():
    """The device computations on uncommitted values run on (None: the CPU)."""
    return DEFAULT_DEVICE[0]


def _resolve_default_device(value):
    """``jax_default_device``'s value as a device (None for the CPU)."""
    if value is None:
        DEFAULT_DEVICE[0] = None
        return
    if isinstance(value, str):
        platform = "gpu" if value.lower() in ("gpu", "cuda") else "cpu"
        found = [d for d in all_devices() if d.platform == platform]
        if not found:
            raise RuntimeError(f"default_device({value!r}): no {platform!r} device here. A "
                               "GPU needs CuPy and a CUDA device (pip install fnx[cuda]), "
                               "or FNX_GPU_EMULATE=1 for the CPU emulation of one.")
        value = found[0]
    DEFAULT_DEVICE[0] = None if value.platform == "cpu" else value


config.on_change("jax_default_device", _resolve_default_device)


def is_host_buffer(v) -> bool:
    """Whether ``v`` is a NumPy (host) value: an ndarray or a NumPy scalar."""
    return type(v) is np.ndarray or isinstance(v, np.generic)


def place(what, args, buffers):
    """Where a computation on ``args`` (Arrays; ``buffers``: their raw values) runs, and
    its operands there: ``(backend, buffers)``. The device of the committed operands
    (``fnx.core.devices``), else the default device; host operands that are not committed
    are put on it. Operands committed to two devices raise ``DeviceMismatchError``, which
    names both and says to ``device_put``."""
    found = None  # (device, position)
    for i, v in enumerate(buffers):
        if is_host_buffer(v):
            if not _devices._COMMITTED_HOST or not _devices.is_committed(args[i]):
                continue
            d = CPU_DEVICE
        else:
            d = backend_for((v,)).device_of(v)
        if found is None:
            found = (d, i)
        elif d is not found[0]:
            raise DeviceMismatchError(
                f"{what}: its operands are committed to different devices: operand "
                f"{found[1]} ({_describe(args[found[1]])}) to {found[0]} and operand {i} "
                f"({_describe(args[i])}) to {d}. Move one with fnx.device_put(x, device) "
                "first (transfers are explicit).")
    device = found[0] if found is not None else DEFAULT_DEVICE[0]
    if device is None or device.platform == "cpu":
        return _BACKENDS["numpy"], buffers
    backend = _BACKENDS[device.backend]
    return backend, [v if backend.owns(v) else backend.put(v) for v in buffers]


def _describe(x):
    try:
        return f"{x.dtype}{list(x.shape)}"
    except Exception:
        return type(x).__name__


def apply_ir(ir, *buffers):
    """Run ``ir`` on ``buffers`` (raw values) with the backend holding them: how a
    primitive whose impl runs an IR (jit's call, the loops, custom rules) computes,
    without knowing any backend."""
    return backend_for(buffers).executable(ir).fn(*buffers)


def apply_scan(body, *buffers, num_consts, num_carry, length, reverse, unroll=1):
    """Run a ``scan`` loop (``body``: ``consts, carry, x -> carry, y``) on ``buffers``
    (``consts, init, xs``, raw values) with the backend holding them
    (``Backend.run_scan``): the ``scan`` impl, without knowing any backend."""
    return backend_for(buffers).run_scan(body, buffers, num_consts=num_consts,
                                         num_carry=num_carry, length=length, reverse=reverse,
                                         unroll=unroll)
