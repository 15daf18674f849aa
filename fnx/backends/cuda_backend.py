"""The CUDA backend (``"cuda"``): device buffers on a GPU and an IR lowered to one
generated Python program over them, through CuPy -- or through its CPU emulation
(``fnx.backends.cuda_emulation``, enabled by ``FNX_GPU_EMULATE=1``), which runs the same
program with every generated kernel compiled for the host.

**The program.** ``compile(ir)`` plans the IR into steps (``fnx.kernels.fusion``):
*kernels*, each computing a cluster of elementwise, broadcast, conversion and reduction
equations in one launch, and *equations* left as they are (``dot_general``, gathers,
sorts, control flow, ...). It then writes one Python function: constants put on the device
once and bound as globals; per kernel step, its outputs allocated from CuPy's memory
pool (``xp.empty``) and one launch; per equation step, the primitive's impl called on the
device buffers (its NumPy calls dispatch to CuPy through NumPy's ``__array_function__`` /
``__array_ufunc__`` protocols: ``np.matmul`` of CuPy arrays is cuBLAS), or, for an impl
that needs host values, run on host copies and its results put back (``on_device``);
and a ``del`` after each buffer's last use, so the pool reuses it at once. Every kernel
of one program is compiled as one NVRTC program (one compile per jitted signature).

``Executable.source`` is the program's text and ``Executable.kernels`` the CUDA source
of its kernels (``jitted.lower(*args)`` shows both).

**Eager.** A primitive applied to device Arrays outside ``jit`` runs as a one-equation
program of its own (cached per primitive, params and operand types), so an eager
elementwise op is one generated kernel.
"""
from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
import weakref

import numpy as np

from ..core import array_library as AL
from ..core.array import Array
from ..core.backend import Backend, Executable, lowering
from ..core.cuda_rules import KernelUnsupported
from ..core.devices import GpuDevice
from ..core.ir import IR, Eqn, Literal, Var, sub_irs
from ..core.numpy_errstate import quiet_call
from ..core.primitive import ShapeDtypeStruct
from ..kernels.cuda import to_device
from ..lax.control_flow.scan_plan import Unplanned, plan_scans, scan_plan_for
from . import cuda_blas
from .cuda_graphs import GraphReplay
from .numpy_backend import _SOLE_REFS  # the same count: a list and one Array hold it

__all__ = ["CudaBackend", "CudaExecutable", "on_device"]

_counter = itertools.count()


class CudaExecutable(Executable):
    """A compiled program: ``fn(*device buffers) -> tuple of device buffers``;
    ``source``: the Python program; ``kernels``: the CUDA source of each kernel;
    ``graph``: its CUDA-graph replay, if it has one."""

    def __init__(self, fn, source, kernels, backend):
        super().__init__(fn, source, backend)
        self.kernels = kernels

    @property
    def graph(self):
        """The program's ``cuda_graphs.GraphReplay`` (its ``replays`` and ``failure``), or
        None for a program that is never captured."""
        return self.fn if isinstance(self.fn, GraphReplay) else None


def on_device(prim, backend, params):
    """``prim``'s impl (params bound) over device buffers: run on them directly (NumPy
    calls dispatch to the device array library), else on host copies with the results put
    back; results that come back as host values are put on the device."""
    impl = prim.impl
    raw = getattr(impl, "raw", impl)
    owns, fetch, full = backend.owns, backend.fetch, backend.xp.full

    def put(o):
        if owns(o):
            return o
        a = np.asarray(o)
        if a.ndim == 0:  # (``axis_index``) a fill kernel, not a transfer: graphs capture it
            return full((), a[()], a.dtype)
        return backend.put(a)

    def settle(out):
        return [put(o) for o in out] if prim.multiple_results else put(out)

    if prim.host_callback:  # user code that expects NumPy values: always on the host
        def run(*vals):
            return settle(quiet_call(raw, *[fetch(v) if owns(v) else v for v in vals],
                                     **params))
        run.__name__ = prim.name
        return run

    def run(*vals):
        try:
            return settle(quiet_call(raw, *vals, **params))
        except (TypeError, NotImplementedError):
            # the impl converts its operands to NumPy, or calls what the device library
            # does not have: compute on the host
            pass
        backend.host_fallbacks[prim.name] = backend.host_fallbacks.get(prim.name, 0) + 1
        host = [fetch(v) if owns(v) else v for v in vals]
        return settle(quiet_call(raw, *host, **params))
    run.__name__ = prim.name
    return run


def _python_name(name):
    return "".join(c if c.isalnum() else "_" for c in name)


class _Writer:
    """Writes one program's body (see the module docstring)."""

    def __init__(self, backend, ir, name, donated=()):
        self.backend = backend
        self.ir = ir
        # donated input var -> its index in ``_dn``; ``ready``: those whose buffers later
        # kernels may write their outputs into (the var read for the last time, not an
        # output of the program)
        self.donors = {ir.invars[k]: j for j, k in enumerate(donated)}
        self.ready = []
        self.glb = {"_empty": backend.xp.empty, "_contig": backend.xp.ascontiguousarray}
        self.kernel_made = set()
        self.literals = {}
        self.names = {}
        self.fresh = (f"v{i}" for i in itertools.count())
        self.lines = []
        self.kernels = []

    def bind(self, prefix, value):
        key = f"_{prefix}{len(self.glb)}"
        self.glb[key] = value
        return key

    def ref(self, v):
        if type(v) is Literal:
            return self.literal(v)
        return self.names[v]

    def literal(self, lit):
        """The global holding ``lit`` on the device: one per distinct value and dtype."""
        value = np.asarray(lit.value, lit.aval.dtype)
        key = (value.dtype, value.tobytes())
        name = self.literals.get(key)
        if name is None:
            name = self.literals[key] = self.bind("lit", self.backend.put(value))
        return name

    def plan(self):
        if not self.backend.fuse:  # every equation its own step (no generated kernels)
            return list(self.ir.eqns)
        from ..kernels import fusion
        return fusion.plan_program(self.ir)

    def last_uses(self, steps):
        last = {}
        for i, s in enumerate(steps):
            for v in s.inputs:
                if type(v) is not Literal:
                    last[v] = i
        for v in self.ir.outvars:
            last[v] = len(steps)
        return last

    def write(self):
        ir, names = self.ir, self.names
        for v, c in zip(ir.constvars, ir.consts):
            c = c._value if isinstance(c, Array) else c
            names[v] = self.bind("const", c if self.backend.owns(c) else self.backend.put(c))
        args = []
        for v in ir.invars:
            names[v] = next(self.fresh)
            args.append(names[v])
        steps = self.plan()
        self.step_count = len(steps)
        last = self.last = self.last_uses(steps)
        self.ready = [v for v in self.donors if v not in last]
        used = []  # the kernels launched (in-place variants included)
        for i, s in enumerate(steps):
            k = self.eqn_kernel(s) if isinstance(s, Eqn) else s
            if k is None:
                self.write_eqn(s)
            else:
                used.append(self.write_kernel(k, i))
            dead = [v for v in dict.fromkeys(s.inputs)
                    if type(v) is not Literal and last.get(v) == i and v in names
                    and v not in ir.invars and v not in ir.constvars]
            if dead:
                self.lines.append("del " + ", ".join(names[v] for v in dead))
            self.ready += [v for v in self.donors if last.get(v) == i]
        outs = ", ".join(self.ref(v) for v in ir.outvars)
        self.lines.append(f"return ({outs}{',' if len(ir.outvars) == 1 else ''})")
        if used:
            self.load_kernels(used)
        return args

    def load_kernels(self, kernels):
        from ..kernels import fusion
        source = fusion.program_source(kernels)
        names = list(dict.fromkeys(k.name for k in kernels))
        functions = self.backend.load_module(source, names)
        for n in names:
            self.glb[f"_k_{n}"] = functions[n]
        self.kernels = [k.source for k in {k.name: k for k in kernels}.values()]
        self.module_source = source

    def donors_in_place(self, k, i):
        """``(donated input var, its position in k.inputs, output position)`` for the
        outputs of kernel ``k`` (step ``i``) that no ready donor takes but a donated
        input read for the last time by ``k`` itself could (same shape and dtype)."""
        pairs, taken = [], set()
        outvars = set(self.ir.outvars)
        for o, v in enumerate(k.outputs):
            if any(d.aval.shape == v.aval.shape and d.aval.dtype == v.aval.dtype
                   for d in self.ready):
                continue
            for pos, x in enumerate(k.inputs):
                if (x in self.donors and x not in taken and x not in outvars
                        and self.last.get(x) == i and x.aval.shape == v.aval.shape
                        and x.aval.dtype == v.aval.dtype and k.inputs.count(x) == 1):
                    pairs.append((x, pos, o))
                    taken.add(x)
                    break
        return pairs

    def write_kernel(self, k, i):
        """The launch of kernel ``k`` (step ``i``); returns the kernel launched: ``k``, or
        its in-place variant where a donated input's buffer takes an output."""
        from ..kernels import fusion
        in_place = {}  # output position -> donated input var
        pairs = self.donors_in_place(k, i) if self.donors else []
        if pairs:
            variant = fusion.in_place(k, [(pos, o) for _, pos, o in pairs])
            if variant is not None:
                k = variant
                in_place = {o: x for x, _, o in pairs}
        outs = []
        for o, v in enumerate(k.outputs):
            name = self.names[v] = next(self.fresh)
            dt = self.bind("dt", v.aval.dtype)
            alloc = f"_empty({tuple(v.aval.shape)!r}, {dt})"
            donor = in_place.get(o) or self.donor_for(v.aval)
            if donor is None:
                self.lines.append(f"{name} = {alloc}")
            else:  # a donated input's buffer, when the call offered it
                j = self.donors[donor]
                self.lines.append(f"{name} = _dn[{j}] if _dn is not None and _dn[{j}] is not "
                                  f"None else {alloc}")
            outs.append(name)
        # kernels index their inputs as C-contiguous arrays: values an impl computed (a
        # transposed or sliced view) and the program's inputs are made so first (free for
        # one that is); a kernel's own outputs are
        ins = [self.ref(v) if type(v) is Literal or v in self.kernel_made
               else f"_contig({self.ref(v)})" for v in k.inputs]
        self.kernel_made.update(k.outputs)
        args = ", ".join(ins + outs) + ("," if len(ins) + len(outs) == 1 else "")
        shared = f", shared_mem={k.shared_bytes}" if k.shared_bytes else ""
        self.lines.append(f"_k_{k.name}({tuple(k.grid)!r}, {tuple(k.block)!r}, ({args}){shared})")
        return k

    def eqn_kernel(self, e):
        """The generated kernel of equation ``e`` where its primitive has a
        ``"cuda_kernel"`` rule that takes these operands, else None (its impl runs)."""
        rule = lowering(e.prim, "cuda_kernel")
        if rule is None or not self.backend.fuse:
            return None
        from ..kernels import fusion
        try:
            k = rule([v.aval for v in e.inputs], [v.aval for v in e.outputs], **e.params)
        except KernelUnsupported:
            return None
        return fusion.Kernel(name=k.name, source=k.source, inputs=list(e.inputs),
                             outputs=list(e.outputs), grid=k.grid, block=k.block,
                             shared_bytes=k.shared_bytes, eqns=[e], kind=e.prim.name,
                             domain=tuple(e.outputs[0].aval.shape))

    def donor_for(self, aval):
        """A ready donated input of ``aval``'s shape and dtype (taken), or None."""
        for d in self.ready:
            if d.aval.shape == aval.shape and d.aval.dtype == aval.dtype:
                self.ready.remove(d)
                return d
        return None

    def write_eqn(self, e):
        fn = self.bind(_python_name(e.prim.name), on_device(e.prim, self.backend, e.params))
        ins = ", ".join(self.ref(v) for v in e.inputs)
        outs = []
        for v in e.outputs:
            self.names[v] = next(self.fresh)
            outs.append(self.names[v])
        if e.prim.multiple_results:
            lhs = ", ".join(outs) + ("," if len(outs) == 1 else "")
            self.lines.append(f"{lhs} = {fn}({ins})" if outs else f"{fn}({ins})")
        else:
            self.lines.append(f"{outs[0]} = {fn}({ins})")


class CudaBackend(Backend):
    """See the module docstring. ``xp``: CuPy, or the emulation's stand-in."""

    name = "cuda"
    platform = "gpu"

    def __init__(self, xp, emulated, device_kind=""):
        super().__init__()
        self.xp = xp
        self.emulated = emulated
        self._devices = [GpuDevice(0, device_kind, emulated=emulated)]
        self._buffer_type = xp.ndarray
        # products of device buffers through fnx's own cuBLAS calls (CUDA graphs capture
        # them; CuPy's refuse to be captured)
        AL.register_matmul(xp.ndarray, functools.partial(cuda_blas.matmul, xp))
        self._modules = {}
        self._lock = threading.Lock()
        self._eager = {}
        # primitive name -> how many times its impl could not run on the device buffers and
        # ran on host copies instead (each a round trip through host memory)
        self.host_fallbacks = {}
        self._scan_programs = weakref.WeakKeyDictionary()  # body -> {(length, reverse): IR}
        # False (FNX_GPU_FUSION=0): no generated kernels, every equation runs its impl on
        # the device arrays (a debugging aid: it isolates the kernel generator)
        self.fuse = os.environ.get("FNX_GPU_FUSION", "1") != "0"
        self.graphs = os.environ.get("FNX_GPU_GRAPHS", "1") != "0"

    def devices(self):
        return list(self._devices)

    def device_of(self, buffer):
        return self._devices[0]

    def owns(self, buffer):
        return type(buffer) is self._buffer_type

    def put(self, value):
        if type(value) is self._buffer_type:
            return value
        return to_device(self.xp, np.asarray(value))

    def fetch(self, buffer):
        if type(buffer) is self._buffer_type:
            return self.xp.asnumpy(buffer)
        return np.asarray(buffer)

    def wrap(self, buffer, weak_type=False):
        return Array._wrap(buffer, weak_type)

    def offer_donated(self, raw, positions):
        """For each donated position ``k``, ``raw[k]`` when the call may overwrite it: a
        C-contiguous device buffer owning its memory that only ``raw`` and the one donated
        Array reference; else None."""
        return [raw[k] if k is not None and self._sole_buffer(raw, k) else None
                for k in positions]

    def _sole_buffer(self, raw, k):
        if sys.getrefcount(raw[k]) != _SOLE_REFS:  # (counted before a local name holds it)
            return False
        v = raw[k]
        return type(v) is self._buffer_type and v.base is None and v.flags.c_contiguous

    # -- kernels ---------------------------------------------------------------------------
    def load_module(self, source, names):
        """The kernels ``names`` of the CUDA ``source``: launchable functions
        ``f(grid, block, args, shared_mem=0)``, compiled once per source."""
        with self._lock:
            module = self._modules.get(source)
            if module is None:
                if self.emulated:
                    module = self.xp.RawModule(code=source)
                    self.nvrtc_check(source)
                else:
                    from ..kernels import cuda as K
                    module = K.device_module(source)
                self._modules[source] = module
        return {n: module.get_function(n) for n in names}

    # The architectures an emulated program is also compiled for by NVRTC (so every kernel
    # the emulation runs is known to compile for real GPUs); FNX_GPU_EMULATE_NVRTC=0: none.
    nvrtc_archs = ("sm_80", "sm_90")

    def nvrtc_check(self, source):
        """Compile ``source`` with NVRTC for each of ``nvrtc_archs`` (where NVRTC is
        installed): a kernel NVRTC refuses raises ``KernelCompileError`` here, without a
        GPU. PTX is cached on disk, so a source is compiled once per machine."""
        from ..kernels import cuda as K
        from ..kernels import emulate
        if os.environ.get("FNX_GPU_EMULATE_NVRTC", "1") == "0" or not K.compiler_available():
            return
        emulate.nvrtc_check(source, self.nvrtc_archs)

    # -- programs --------------------------------------------------------------------------
    # A program of at least this many steps (kernels and equations) is replayed as a CUDA
    # graph after its first call (``cuda_graphs``): below it, the graph's copies in and out
    # cost what they save. FNX_GPU_GRAPHS=0: never.
    graph_min_steps = 3

    def compile(self, ir, name="jit", donated=()):
        # scans restructured (work moved out of their loops); no relayout: cuBLAS takes
        # transposed operands as flags
        ir = plan_scans(ir)
        w = _Writer(self, ir, name, donated)
        args = w.write()
        graphed = self.graphs and w.step_count >= self.graph_min_steps \
            and not _calls_host(ir)
        fname = f"_fnx_gpu_{_python_name(name)}_{next(_counter)}"
        source = (("# replayed as a CUDA graph from its second call (fnx.backends.cuda_graphs)\n"
                   if graphed else "")
                  + f"def {fname}({', '.join(args + (['_dn=None'] if donated else []))}):\n"
                  + "\n".join("    " + ln for ln in w.lines) + "\n")
        exec(compile(source, f"<fnx gpu {name}>", "exec"), w.glb)
        fn = w.glb.pop(fname)
        if graphed:
            fn = GraphReplay(fn, self, ir.in_avals, ir.out_avals, donated)
        return CudaExecutable(fn, source, w.kernels, self)

    def eager(self, prim, vals, params, out_aval):
        """``prim`` on device buffers outside jit: a one-equation program, cached per
        primitive, params and operand types (params that cannot be hashed: not cached)."""
        sig = tuple((v.shape, v.dtype) for v in vals)
        try:
            key = (prim, sig, tuple(params.items()) if params else ())
            exe = self._eager.get(key)
        except TypeError:
            key = exe = None
        if exe is None:
            invars = [Var(ShapeDtypeStruct(*s)) for s in sig]
            outs = out_aval if prim.multiple_results else [out_aval]
            outvars = [Var(ShapeDtypeStruct(o.shape, o.dtype, o.weak_type)) for o in outs]
            ir = IR(invars, outvars, [Eqn(prim, invars, outvars, dict(params))])
            exe = self.compile(ir, prim.name)
            if key is not None:
                if len(self._eager) > 4096:
                    self._eager.clear()
                self._eager[key] = exe
        outs = exe.fn(*vals)
        return list(outs) if prim.multiple_results else outs[0]

    def run_scan(self, body, buffers, *, num_consts, num_carry, length, reverse, unroll=1):
        """An eager scan: its restructured loop as one program; otherwise the body's
        compiled program run once per step from a host loop, carries and ys staying on
        the device (``stack``)."""
        plan = scan_plan_for(body, num_consts=num_consts, num_carry=num_carry)
        if plan is not None:  # an eager scan: the restructured loop as one program
            try:
                per = self._scan_programs.setdefault(body, {})
                ir = per.get((length, reverse))
                if ir is None:
                    ir = per[(length, reverse)] = plan.program(length, reverse, unroll)
                return list(self.executable(ir).fn(*buffers))
            except Unplanned:
                pass
        xs = [self.put(x) for x in buffers[num_consts + num_carry:]]
        return super().run_scan(body, list(buffers[:num_consts + num_carry]) + xs,
                                num_consts=num_consts, num_carry=num_carry, length=length,
                                reverse=reverse, unroll=unroll)

    def stack(self, buffers, aval):
        """Stacked on the device."""
        if not buffers:
            return self.xp.empty((0,) + tuple(aval.shape), aval.dtype)
        return self.xp.stack(buffers)

    def clear_cache(self):
        super().clear_cache()
        self._eager.clear()


def _calls_host(ir):
    """Whether ``ir`` (or an IR inside it) applies a host callback."""
    return any(e.prim.host_callback or any(_calls_host(sub) for sub in sub_irs(e.params))
               for e in ir.eqns)


def _driver_present():
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia") \
        or os.name == "nt"


def make_backend():
    """The CUDA backend this machine supports: CuPy on a real device; else, with
    ``FNX_GPU_EMULATE=1``, the emulation; else None."""
    from ..kernels import cuda as K
    # CuPy is imported (tens of ms) only where an NVIDIA driver is there to find a device
    if _driver_present() and K.device_available():
        import cupy
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return CudaBackend(cupy, emulated=False,
                           device_kind=name.decode() if isinstance(name, bytes) else name)
    if os.environ.get("FNX_GPU_EMULATE", "") not in ("", "0"):
        from .cuda_emulation import EMULATED_CUPY
        return CudaBackend(EMULATED_CUPY, emulated=True)
    return None
