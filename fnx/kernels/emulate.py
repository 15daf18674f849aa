"""A CPU emulator of CUDA kernels: the same kernel source, compiled for the host by g++,
run with CUDA's thread/block semantics, so GPU code is tested on machines without a GPU.

Use::

    mod = compile_kernels(source)          # one or several kernels and their helpers
    mod.launch("softmax", grid=rows, block=256, args=(x, out, np.int32(n)))
    mod.get_function("softmax")((rows,), (256,), (x, out, np.int32(n)))   # CuPy's style
    nvrtc_check(source)                    # the same text through NVRTC, sm_80 and sm_90

**What is emulated.** A kernel runs as a grid of blocks of threads. ``threadIdx``,
``blockIdx``, ``blockDim``, ``gridDim`` (``uint3``/``dim3`` fields) and ``warpSize`` (32)
are what CUDA gives; warps are consecutive runs of 32 threads in the linear order
``x + y*blockDim.x + z*blockDim.x*blockDim.y``. Each block runs on one CPU thread, start
to end; blocks are claimed from a shared counter by ``workers`` CPU threads (default: the
CPU count for large launches, else 1), so results must not depend on block order -- as
on a GPU. Every thread has its own locals. ``__shared__`` variables are one per block
(thread-local storage of the CPU thread running the block); ``extern __shared__`` arrays
point at a per-block buffer of ``shared_bytes``. Atomics (``atomicAdd/Sub/Exch/Min/Max/
Inc/Dec/CAS/And/Or/Xor`` on int, unsigned, unsigned long long, long long and, where CUDA
has them, float/double, plus their ``_block``/``_system`` forms) are real CPU atomics,
correct across the worker threads. ``__threadfence*``, ``__ldg`` and the cache-hint loads,
``__restrict__``, ``__forceinline__``, ``__noinline__``, ``__launch_bounds__``,
``__align__``, ``__constant__`` globals, vector types (``float4``, ``make_int2``, ...),
bit casts (``__float_as_int``, ...), the integer intrinsics (``__popc``, ``__clz``,
``__brev``, ``__umulhi``, ...), ``min``/``max`` on any arithmetic operands, and the CUDA
math functions <cmath> lacks (``rsqrtf``, ``erfinvf``, ``erfcinvf``, ``normcdff``,
``normcdfinvf``, ``sinpif``, ``erfcxf``, the ``__expf``-style intrinsics computed
exactly, the ``_rn`` arithmetic and conversion intrinsics, ...) are defined by the
runtime header ``emulate_runtime.h``. ``printf`` prints on the host; ``assert`` and
``__trap()`` stop the launch with an error.

**How.** The source is compiled as one C++17 translation unit: the runtime header, the
source (rewritten only where needed, keeping its line numbers), and a generated launcher
per kernel. Floats round as IEEE single/double with no FMA contraction
(``-ffp-contract=off``, no fast-math), as ``fnx.kernels.cuda`` compiles for NVRTC
(``-fmad=false``). Libraries are cached in memory and on disk by a hash of everything
that goes into them (``cache_dir()``: ``$FNX_CACHE_DIR/emulate``, else
``$XDG_CACHE_HOME/fnx/emulate`` or ``~/.cache/fnx/emulate``, else a temporary
directory), written under a temporary name and renamed, so concurrent processes never
read a half-written library and a new process does not recompile (``stats`` counts the
g++ runs).

The source is analysed (comments and strings blanked, the brace structure followed) to
find the ``__global__`` functions and their parameters, and which kernels reach a
*barrier or warp collective* (``__syncthreads*``, ``__syncwarp``, ``__shfl*_sync``,
``__ballot_sync``, ``__any_sync``, ``__all_sync``, ``__reduce_*_sync``, ``__match_*_sync``)
directly or through the functions, macros and struct member functions they name. A kernel
with none takes the **fast path**: the block's threads run one after another as a plain
loop. A kernel with some runs each thread of a block as a **fiber** (a user-level context
with its own stack, ``FNX_EMULATE_STACK_KB`` = 256 by default, above a guard page; a
hand-written register switch on x86-64, ``ucontext`` elsewhere or with
``FNX_EMULATE_UCONTEXT=1``). A fiber runs until it reaches a barrier or collective, then
hands the CPU to the next runnable fiber of its block. A warp collective completes when
the last lane of its mask arrives (the lanes exchange their values and run on); when no
fiber can run, the block barrier is released if every thread waits at the same
``__syncthreads`` call, and anything else is an error (below). So a missing barrier
changes results as it can on a GPU; the ``schedule`` option (``"forward"``,
``"reverse"``, ``"shuffle"`` with a ``seed``; env ``FNX_EMULATE_SCHEDULE``) orders the
threads of a block at its start and at each release (the fast path's loop too), and the
blocks of the grid, so a test can show that a kernel's answer does not depend on the
order. Measured on one core: a 1M-element elementwise kernel takes about 4 ms; a
(4096, 1024) float32 softmax, one block of 256 threads per row with two shared-memory
tree + warp-shuffle reductions (12 barriers a row), about 0.3 s.

**What is an error** (``EmulationError``, naming the kernel, the block and the lines),
for what CUDA leaves undefined: a ``__syncthreads`` reached by only some threads of a
block (the others exited, or wait at a different ``__syncthreads``); a warp collective
whose mask omits the calling lane, names lanes that exited, wait at a barrier, do not exist
in a partial warp, or that disagree (another collective, width or value size with the same
mask); a shuffle reading a lane outside the mask; a shuffle width that is not a power of 2;
static ``__shared__`` memory over 48 KiB or static + dynamic over the block's limit
(48 KiB unless ``max_dynamic_shared_bytes`` is raised, up to 227 KiB); a collective
reached on the fast path (an analysis miss: the message says so). Refused at launch
(``KernelLaunchError``): a block over 1024 threads or over ``__launch_bounds__``, grid or
block dimensions out of CUDA's range, the wrong number of arguments, an argument whose type
differs from the parameter's (as CuPy passes them: a Python ``int`` is a ``long long``, a
``float`` a ``double``, a ``bool`` a ``bool``; NumPy scalars keep their dtype; arrays are
pointers and their dtype must be the pointee's), a read-only array for a non-const
pointer, a misaligned array for a vector pointee, a non-contiguous array (unless
``allow_strided=True``: the kernel then indexes with the array's strides).

Shared memory starts out filled with 0xff bytes (NaN, -1) in every block -- dynamic shared
memory at block start, each function-scope static ``__shared__`` variable when the first
thread of the block reaches its declaration -- so reading it before writing shows.
(File-scope ``__shared__`` variables are neither poisoned nor counted in the 48 KiB.)

Out-of-bounds accesses to the arrays passed (``check_bounds``, on unless
``FNX_EMULATE_CHECK_BOUNDS=0``): the kernel runs on copies of its array arguments, each
between two 4 KiB pads (arrays whose memory overlaps share one copy, so an in-place kernel
still sees what it writes); after the launch the copies are written back and a write into
a pad is an ``EmulationError`` naming the parameter and the offsets. A pad holds signalling
NaNs for a float array (arithmetic on them gives other bits, so even a NaN computed from a
pad and written is seen) and 0xa5-like bytes otherwise, distinct per array: a read from a
pad shows in the results. The copies cost a memcpy per array and launch; pass
``check_bounds=False`` to time the emulator itself.

Not emulated: ``__half`` and other fp16 types, textures/surfaces, cooperative groups,
dynamic parallelism, ``__activemask``, the non-``_sync`` warp intrinsics, directed-rounding
intrinsics other than ``_rn`` (they fail to compile), and spin-waits on other threads of
the same block (threads switch only at barriers and collectives, so such a loop hangs).
Accesses further than 4 KiB outside an array, and out-of-bounds reads, are not reported,
nor is aliasing of ``__restrict__`` pointers. An ``extern "C"`` kernel may not take the
name of a C library function (``div``, ``abs``, ...): g++ sees both. Template kernels are
compiled but cannot be launched by name.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import numpy as np

from . import cuda as _cuda
from .cuda import KernelCompileError, KernelError, KernelUnsupported

__all__ = [
    "compile_kernels", "Module", "Function", "Kernel", "Param", "nvrtc_check",
    "emulator_available", "cache_dir", "stats", "EmulationError", "KernelLaunchError",
    "MAX_THREADS_PER_BLOCK", "DEFAULT_SHARED_LIMIT", "MAX_SHARED_LIMIT", "SCHEDULES",
]


class EmulationError(KernelError):
    """A kernel did what CUDA leaves undefined (a divergent ``__syncthreads``, a shuffle
    with a lane missing from its mask, ...), or trapped or failed an ``assert``, while
    running on the emulator. The message names the kernel, the block and the lines."""


class KernelLaunchError(KernelError, TypeError):
    """A launch the emulator refuses before running: a bad grid or block shape, too much
    shared memory, or arguments that do not match the kernel's parameters."""


MAX_THREADS_PER_BLOCK = 1024
DEFAULT_SHARED_LIMIT = 48 * 1024          # static + dynamic without an opt-in
MAX_SHARED_LIMIT = 227 * 1024             # what sm_90 allows with cudaFuncSetAttribute
SCHEDULES = {"forward": 0, "reverse": 1, "shuffle": 2}

_CXX = "g++"
# -O1: a test suite compiles hundreds of small kernels and runs each a few times; against
# -O2 it compiles them about 15% faster, and the suite's emulated runs took no longer
_CXX_FLAGS = ("-O1", "-std=c++17", "-shared", "-fPIC", "-pthread", "-ffp-contract=off",
              "-fno-fast-math", "-fno-math-errno", "-fno-strict-aliasing", "-fexceptions",
              "-w")
_RUNTIME_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "emulate_runtime.h")
_LOCK = threading.RLock()
_MODULES: dict = {}
_INFO: dict = {}

#: Counters: ``gxx_runs`` (libraries compiled), ``disk_hits`` (loaded from the cache
#: directory), ``memory_hits`` (modules returned from this process's cache).
stats = {"gxx_runs": 0, "disk_hits": 0, "memory_hits": 0}


def emulator_available() -> bool:
    """Whether g++ is on the PATH (the emulator needs it)."""
    return shutil.which(_CXX) is not None


def _runtime_text():
    if "runtime" not in _INFO:
        try:
            with open(_RUNTIME_PATH) as f:
                _INFO["runtime"] = f.read()
        except OSError as e:
            raise KernelUnsupported(
                f"the emulator's runtime header is missing ({e}); the fnx.kernels package "
                "data must include emulate_runtime.h") from None
    return _INFO["runtime"]


def _compiler_id():
    if "cxx" not in _INFO:
        try:
            out = subprocess.run([_CXX, "-dumpfullversion", "-dumpmachine"], capture_output=True,
                                 text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        _INFO["cxx"] = f"{shutil.which(_CXX)} {out.split()}"
    return _INFO["cxx"]


def cache_dir() -> str:
    """Where compiled kernel libraries are kept: ``emulate/`` in fnx's kernel cache
    (``fnx.kernels.cuda.cache_dir``: ``$FNX_CACHE_DIR``, else ``$XDG_CACHE_HOME/fnx``, else
    ``~/.cache/fnx``, else a private temporary directory)."""
    d = os.path.join(_cuda.cache_dir(), "emulate")
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise KernelUnsupported(f"no writable cache directory for the emulator ({d}: {e})")
    return d


# --- reading the source ------------------------------------------------------------------------

_LEX = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DIRECTIVE = re.compile(r'(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*')
_IDENT = re.compile(r'[A-Za-z_]\w*')
_ATTRS = re.compile(r'\b(?:__align__|alignas|__builtin_align__)\s*\([^()]*\)'
                    r'|\b__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)')
_FUNC_TAIL = re.compile(r'\)\s*(?:(?:const|noexcept|override|final|mutable|volatile)\b\s*)*$')

COLLECTIVES = frozenset({
    "__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or",
    "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
    "__ballot_sync", "__any_sync", "__all_sync", "__reduce_add_sync", "__reduce_min_sync",
    "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync",
    "__match_any_sync", "__match_all_sync"})
_TYPE_WORDS = frozenset({
    "const", "volatile", "__restrict__", "restrict", "__restrict", "unsigned", "signed",
    "int", "long", "short", "char", "float", "double", "bool", "void", "struct",
    "__grid_constant__", "__shared__", "static", "thread_local", "extern"})


def _blank(source):
    """The source with comments and the insides of string and character literals turned
    into spaces (newlines kept): every offset still points at the same character."""
    def repl(m):
        s = m.group(0)
        if s[0] in "\"'":
            return s[0] + re.sub(r"[^\n]", " ", s[1:-1]) + s[-1]
        return re.sub(r"[^\n]", " ", s)
    return _LEX.sub(repl, source)


def _split_top(text, sep=","):
    """``text`` split at ``sep`` outside (), [], {} and <>."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _match_back(text, close):
    """The offset of the ``(`` matching the ``)`` at ``close``."""
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _match_forward(text, open_):
    depth = 0
    for i in range(open_, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


class _Func:
    __slots__ = ("name", "header", "header_start", "params", "body_open", "body_close",
                 "containers", "namespaces")


def _scan(code, original):
    """The function definitions of (directive-free, blanked) ``code``: each with its
    name, header (the text from the previous declaration's end), parameter text and body
    span; ``containers`` are the headers of the namespace/extern/struct blocks around it."""
    funcs, stack = [], []     # stack entries: ("code" | "data" | "container", func or header)
    for m in re.finditer(r"[{}]", code):
        pos = m.start()
        if code[pos] == "}":
            if stack:
                kind, obj = stack.pop()
                if kind == "code" and isinstance(obj, _Func):
                    obj.body_close = pos
            continue
        if stack and stack[-1][0] in ("code", "data"):
            stack.append((stack[-1][0], None))
            continue
        start = max(code.rfind(c, 0, pos) for c in ";{}") + 1
        header = code[start:pos]
        stripped = header.rstrip()
        if _FUNC_TAIL.search(stripped):
            close = stripped.rfind(")")
            close_abs = start + close
            open_abs = _match_back(code, close_abs)
            f = _Func()
            before = code[start:open_abs] if open_abs >= start else ""
            name = re.search(r"([A-Za-z_]\w*)\s*$", before)
            f.name = name.group(1) if name else None
            f.header = code[start:open_abs] if open_abs >= start else header
            f.header_start = start
            f.params = code[open_abs + 1:close_abs] if open_abs >= 0 else ""
            f.body_open, f.body_close = pos, len(code) - 1
            spans = [obj for k, obj in stack if k == "container"]
            f.containers = [original[h0:h1] for h0, h1 in spans]
            f.namespaces = [n.group(1) for h0, h1 in spans
                            for n in [re.search(r"\bnamespace\s+(\w+)\s*$", code[h0:h1])] if n]
            funcs.append(f)
            stack.append(("code", f))
        elif "=" in header:
            stack.append(("data", None))
        else:
            stack.append(("container", (start, pos)))
    return funcs


class Param:
    """One kernel parameter: ``name`` and ``type`` as written (``type`` without the
    name), and what the compiled launcher reports: ``pointer``, the C type's ``size``,
    its NumPy ``dtype`` (None for a struct or void), and for a pointer the pointee's
    ``dtype``, ``align`` and ``const``."""

    def __init__(self, name, type_text):
        self.name, self.type = name, type_text
        self.pointer = False
        self.size = 0
        self.dtype = None
        self.pointee_dtype = None
        self.pointee_void = False
        self.align = 1
        self.const = False

    def __repr__(self):
        return f"Param({self.type} {self.name})"


class Kernel:
    """A ``__global__`` function of a module: ``name``, ``params``, whether it runs its
    threads as fibers (it reaches a barrier or warp collective), its
    ``__launch_bounds__`` maximum (None without one) and the line it starts on."""

    def __init__(self, name, params, fibers, bounds_expr, line, qualified):
        self.name, self.params, self.fibers = name, params, fibers
        self.bounds_expr, self.line, self.qualified = bounds_expr, line, qualified
        self.max_threads = None
        self._launch = None

    def __repr__(self):
        ps = ", ".join(f"{p.type} {p.name}" for p in self.params)
        return f"Kernel({self.name}({ps}){', fibers' if self.fibers else ''})"


def _parse_param(text, i):
    text = " ".join(text.split())
    if not text or text == "void":
        return None
    arrays = text.endswith("]")
    if arrays:
        text = re.sub(r"\[[^\]]*\]$", "", text).rstrip()
    m = re.search(r"([A-Za-z_]\w*)$", text)
    if m and m.group(1) not in _TYPE_WORDS and text[:m.start()].strip():
        name, type_text = m.group(1), text[:m.start()].rstrip()
    else:
        name, type_text = f"arg{i}", text
    if arrays:
        type_text += "*"
    return Param(name, type_text)


def _uses_collectives(funcs, macros, code):
    """The names (functions and macros) whose text reaches a barrier or warp collective,
    directly or through other such names."""
    bodies: dict = {}
    for f in funcs:
        ids = _IDENT.findall(code[f.body_open:f.body_close + 1])
        if f.name:
            bodies.setdefault(f.name, set()).update(ids)
        for h in f.containers:      # a member function (operator() too) counts for its type
            t = re.search(r"\b(?:struct|class|union)\s+([A-Za-z_]\w*)", h)
            if t:
                bodies.setdefault(t.group(1), set()).update(ids)
    for name, body in macros.items():
        bodies.setdefault(name, set()).update(_IDENT.findall(body))
    using = {n for n, ids in bodies.items() if ids & COLLECTIVES}
    changed = True
    while changed:
        changed = False
        for n, ids in bodies.items():
            if n not in using and ids & using:
                using.add(n)
                changed = True
    return using | COLLECTIVES


def _line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def _rewrite_shared(source, code, funcs):
    """The source with function-scope ``__shared__`` declarations instrumented (static
    ones report their address and size: poisoning and the 48 KiB check) and
    ``extern __shared__`` arrays pointed at the block's dynamic shared buffer. Line
    numbers are kept."""
    bodies = [(f.body_open, f.body_close) for f in funcs]

    def in_code(p):
        return any(a < p < b for a, b in bodies)

    edits = []      # (start, end, replacement)
    next_id = 0
    for m in re.finditer(r"\b__shared__\b", code):
        p = m.start()
        start = max(code.rfind(c, 0, p) for c in ";{}") + 1
        end = code.find(";", p)
        if end < 0:
            continue
        stmt = _ATTRS.sub(" ", code[start:end])
        if re.search(r"\bextern\b", stmt):
            decl = re.sub(r"\b(?:extern|__shared__)\b", " ", stmt)
            dm = re.fullmatch(r"\s*(.*?)\b([A-Za-z_]\w*)\s*\[\s*\]\s*", decl, re.S)
            if not dm or not dm.group(1).strip():
                continue
            t, name = " ".join(dm.group(1).split()), dm.group(2)
            span = source[start:end + 1]
            if in_code(p):
                repl = (f" {t}* const {name} = ({t}*)fnx_emu::dynamic_shared();"
                        + "\n" * span.count("\n"))
            else:
                repl = (f"\n#define {name} (({t}*)fnx_emu::dynamic_shared())\n"
                        f"#line {_line_of(source, end)}\n")
            edits.append((start, end + 1, repl))
            continue
        if not in_code(p):
            continue
        decl = re.sub(r"\b(?:__shared__|static|thread_local)\b", " ", stmt)
        pieces = _split_top(decl)
        first = re.fullmatch(r"(.*?)([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)(?:=.*)?", pieces[0].strip(),
                             re.S)
        if not first or not first.group(1).strip() or first.group(2) in _TYPE_WORDS:
            continue
        names = [first.group(2)]
        for piece in pieces[1:]:
            nm = re.match(r"[\s*&]*([A-Za-z_]\w*)", piece)
            if nm:
                names.append(nm.group(1))
        calls = "".join(f" fnx_emu::static_shared({next_id + k}, (void*)&{n}, sizeof({n}));"
                        for k, n in enumerate(names))
        next_id += len(names)
        edits.append((end + 1, end + 1, calls))
    out = source
    for start, end, repl in sorted(edits, reverse=True):
        out = out[:start] + repl + out[end:]
    return out


class _Analysis:
    pass


def _analyse(source):
    blank = _blank(source)
    macros = {}
    for m in _DIRECTIVE.finditer(blank):
        d = re.match(r"[ \t]*#\s*define\s+([A-Za-z_]\w*)(.*)", m.group(0), re.S)
        if d:
            macros[d.group(1)] = d.group(2)
    code = _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), blank)
    funcs = _scan(code, source)
    using = _uses_collectives(funcs, macros, code)
    kernels, templates = {}, []
    for f in funcs:
        if not re.search(r"\b__global__\b", f.header) or not f.name:
            continue
        if re.search(r"\btemplate\b", f.header):
            templates.append(f.name)
            continue
        params = [p for i, t in enumerate(_split_top(f.params)) if (p := _parse_param(t, i))]
        bounds = None
        lb = re.search(r"\b__launch_bounds__\s*\(", f.header)
        if lb:
            o = f.header_start + lb.end() - 1
            c = _match_forward(code, o)
            bounds = _split_top(code[o + 1:c])[0].strip() or None
        ids = set(_IDENT.findall(code[f.body_open:f.body_close + 1]))
        qualified = "::".join(f.namespaces + [f.name])
        if f.name in kernels:
            raise KernelCompileError(f"the kernel source defines __global__ {f.name} twice "
                                     "(overloaded kernels cannot be launched by name)")
        kernels[f.name] = Kernel(f.name, params, bool(ids & using), bounds,
                                 _line_of(source, f.body_open), qualified)
    a = _Analysis()
    a.kernels, a.templates = kernels, templates
    a.rewritten = _rewrite_shared(source, code, funcs)
    return a


# --- the translation unit ---------------------------------------------------------------------

_PARAM_INFO = r"""
namespace fnx_emu {
template <class T> static long long kind_of() {
    if constexpr (std::is_same<T, bool>::value) return 1;
    else if constexpr (std::is_integral<T>::value) return std::is_signed<T>::value ? 2 : 3;
    else if constexpr (std::is_floating_point<T>::value) return 4;
    else return 0;
}
// is_pointer, size, kind, pointee const, pointee size, pointee kind, alignment
template <class T> static void param_info(long long* o) {
    typedef typename std::remove_cv<T>::type U;
    o[0] = std::is_pointer<U>::value;
    o[1] = (long long)sizeof(U);
    o[2] = kind_of<U>();
    if constexpr (std::is_pointer<U>::value) {
        typedef typename std::remove_pointer<U>::type Q;
        typedef typename std::remove_cv<Q>::type P;
        o[3] = std::is_const<Q>::value;
        if constexpr (std::is_void<P>::value) { o[4] = 0; o[5] = 0; o[6] = 1; }
        else { o[4] = (long long)sizeof(P); o[5] = kind_of<P>(); o[6] = (long long)alignof(P); }
    } else {
        o[3] = 0; o[4] = 0; o[5] = 0; o[6] = (long long)alignof(U);
    }
}
}  // namespace fnx_emu
"""
_INFO_WIDTH = 7


def _launchers(kernels):
    out = ["\n#line 1 \"fnx_emulate_launchers\"\n", _PARAM_INFO]
    for k in kernels.values():
        n = k.name
        for i, p in enumerate(k.params):
            t = re.sub(r"\b(?:__restrict__|__restrict|restrict|__grid_constant__)\b", " ", p.type)
            out.append(f"typedef {t} fnx_emu_{n}_t{i};\n")
        loads = "".join(f"    fnx_emu_{n}_t{i} p{i} = *(fnx_emu_{n}_t{i}*)a[{i}];\n"
                        for i in range(len(k.params)))
        call_args = ", ".join(f"p{i}" for i in range(len(k.params)))
        out.append(
            f'extern "C" int fnx_emu_launch_{n}(fnx_emu::Launch* L) {{\n'
            f"    void** a = L->args; (void)a;\n{loads}"
            f"    return fnx_emu::launch(L, {'true' if k.fibers else 'false'}, "
            f"[=]() {{ {k.qualified}({call_args}); }});\n}}\n")
        infos = "".join(f"    fnx_emu::param_info<fnx_emu_{n}_t{i}>(o + {_INFO_WIDTH * i});\n"
                        for i in range(len(k.params)))
        out.append(f'extern "C" void fnx_emu_info_{n}(long long* o) {{\n    (void)o;\n{infos}}}\n')
        bound = f"(long long)({k.bounds_expr})" if k.bounds_expr else "-1"
        out.append(f'extern "C" long long fnx_emu_bounds_{n}() {{ return {bound}; }}\n')
    return "".join(out)


def _runtime_header(ucontext):
    """The file name of the runtime header in the cache directory, written there once
    (named by a hash of its text, the compiler and the flags; ``FNX_EMU_UCONTEXT`` defined
    first where asked), with its precompiled form beside it (g++'s ``.gch``, built with the
    kernels' flags). Every translation unit includes it first, so g++ loads the parsed
    runtime instead of parsing its 1300 lines again for each kernel (0.40 -> 0.27 s a
    kernel, most of a cold test suite's compiling). Where the ``.gch`` cannot be built, or
    g++ finds it unusable, g++ reads the header itself: the same program either way."""
    memo = ("header", ucontext)
    if memo in _INFO:
        name = _INFO[memo]
        if os.path.exists(os.path.join(cache_dir(), name)):
            return name
    head = "#define FNX_EMU_UCONTEXT 1\n" if ucontext else ""
    text = f"{head}#line 1 \"emulate_runtime.h\"\n{_runtime_text()}\n"
    key = hashlib.sha256("\0".join([text, _compiler_id(), " ".join(_CXX_FLAGS),
                                    sys.platform]).encode()).hexdigest()[:24]
    name = f"runtime{key}.h"
    d = cache_dir()
    path = os.path.join(d, name)
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=d)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    if not os.path.exists(path + ".gch") and emulator_available():
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".gch", dir=d)
        os.close(fd)
        try:
            proc = subprocess.run([_CXX, *_CXX_FLAGS, "-x", "c++-header", path, "-o", tmp],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                os.replace(tmp, path + ".gch")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    _INFO[memo] = name
    return name


def _translation_unit(analysis, ucontext):
    return (f"#include \"{_runtime_header(ucontext)}\"\n"
            f"#line 1 \"fnx_kernels.cu\"\n{analysis.rewritten}\n{_launchers(analysis.kernels)}")


def _build(text, source):
    """The path of the compiled library of ``text``: from the cache directory, or
    compiled (to a temporary name, then renamed)."""
    key = hashlib.sha256("\0".join([text, _compiler_id(), " ".join(_CXX_FLAGS),
                                    sys.platform]).encode()).hexdigest()[:32]
    d = cache_dir()
    final = os.path.join(d, f"k{key}.so")
    if os.path.exists(final):
        stats["disk_hits"] += 1
        return final
    if not emulator_available():
        raise KernelUnsupported(f"the CUDA emulator needs a C++ compiler ({_CXX} was not found)")
    fd, tmp_cpp = tempfile.mkstemp(prefix=f".k{key}.", suffix=".cpp", dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp_so = tmp_cpp[:-4] + ".so"
    try:
        proc = subprocess.run([_CXX, *_CXX_FLAGS, tmp_cpp, "-o", tmp_so], capture_output=True,
                              text=True)
        stats["gxx_runs"] += 1
        if proc.returncode:
            log = (proc.stdout + proc.stderr).strip()
            raise KernelCompileError(
                f"{_CXX} could not compile the kernel source for the emulator "
                f"(lines of fnx_kernels.cu are the source's own).\n{_CXX} log:\n{log}\n\n"
                f"source:\n{_cuda._numbered(source)}")
        os.replace(tmp_so, final)
        os.replace(tmp_cpp, os.path.join(d, f"k{key}.cpp"))
    finally:
        for p in (tmp_cpp, tmp_so):
            if os.path.exists(p):
                os.unlink(p)
    return final


# --- launching ---------------------------------------------------------------------------------

class _Launch(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_ulonglong), ("shared_limit", ctypes.c_ulonglong),
                ("args", ctypes.POINTER(ctypes.c_void_p)), ("kernel", ctypes.c_char_p),
                ("err", ctypes.c_char_p), ("err_cap", ctypes.c_ulonglong),
                ("seed", ctypes.c_ulonglong), ("schedule", ctypes.c_int),
                ("workers", ctypes.c_int), ("stack_bytes", ctypes.c_ulonglong)]


_KINDS = {1: "b", 2: "i", 3: "u", 4: "f"}
_CTYPES = {np.dtype(t): c for t, c in [
    (np.bool_, ctypes.c_bool), (np.int8, ctypes.c_int8), (np.uint8, ctypes.c_uint8),
    (np.int16, ctypes.c_int16), (np.uint16, ctypes.c_uint16), (np.int32, ctypes.c_int32),
    (np.uint32, ctypes.c_uint32), (np.int64, ctypes.c_int64), (np.uint64, ctypes.c_uint64),
    (np.float32, ctypes.c_float), (np.float64, ctypes.c_double)]}
_ERR_CAP = 4096


def _dtype_of(kind, size):
    k = _KINDS.get(int(kind))
    if k is None:
        return None
    try:
        return np.dtype(f"{k}{int(size)}") if k != "b" else np.dtype(np.bool_)
    except TypeError:
        return None


def _dims(value, what, kernel, limits):
    if isinstance(value, (int, np.integer)):
        dims = (int(value),)
    else:
        try:
            dims = tuple(int(v) for v in value)
        except (TypeError, ValueError):
            raise KernelLaunchError(f"kernel {kernel}: {what} must be an int or a tuple of up to "
                                    f"3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3:
        raise KernelLaunchError(f"kernel {kernel}: {what} must have 1 to 3 dimensions, got "
                                f"{value!r}")
    dims = dims + (1,) * (3 - len(dims))
    for axis, (v, hi) in enumerate(zip(dims, limits)):
        if not 1 <= v <= hi:
            raise KernelLaunchError(
                f"kernel {kernel}: {what} {dims} is out of CUDA's range: dimension "
                f"{'xyz'[axis]} must be in 1..{hi} (an empty launch is not a launch: skip it)")
    return dims


def _env_workers():
    v = os.environ.get("FNX_EMULATE_THREADS")
    if v:
        return max(1, int(v))
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Function:
    """A kernel of a module, called like CuPy's ``RawKernel``:
    ``f(grid, block, args, shared_mem=0, **launch_options)``."""

    def __init__(self, module, name):
        self.module, self.name = module, name
        self.kernel = module.kernels[name]

    def __call__(self, grid, block, args, shared_mem=0, **options):
        self.module.launch(self.name, grid, block, args, shared_bytes=shared_mem, **options)

    def __repr__(self):
        return f"<emulated kernel {self.name}>"


class Module:
    """Kernels compiled for the host by ``compile_kernels``: ``kernels`` maps each
    launchable ``__global__`` function's name to its ``Kernel``; ``launch`` runs one."""

    def __init__(self, source, analysis, path):
        self.source, self.path = source, path
        self.kernels = analysis.kernels
        self.templates = tuple(analysis.templates)
        self.max_dynamic_shared_bytes = {}
        self._lib = ctypes.CDLL(path)
        for k in self.kernels.values():
            fn = getattr(self._lib, f"fnx_emu_launch_{k.name}")
            fn.argtypes, fn.restype = [ctypes.POINTER(_Launch)], ctypes.c_int
            k._launch = fn
            info = (ctypes.c_longlong * (_INFO_WIDTH * max(1, len(k.params))))()
            getattr(self._lib, f"fnx_emu_info_{k.name}")(info)
            for i, p in enumerate(k.params):
                ptr, size, kind, const, psize, pkind, align = info[_INFO_WIDTH * i:
                                                                   _INFO_WIDTH * (i + 1)]
                p.pointer, p.size = bool(ptr), int(size)
                if p.pointer:
                    p.const, p.align = bool(const), int(align)
                    p.pointee_void = psize == 0
                    p.pointee_dtype = _dtype_of(pkind, psize)
                else:
                    p.dtype = _dtype_of(kind, size)
            bound = getattr(self._lib, f"fnx_emu_bounds_{k.name}")
            bound.restype = ctypes.c_longlong
            b = int(bound())
            k.max_threads = b if b >= 0 else None

    def __repr__(self):
        return f"<emulated module: {', '.join(self.kernels)}>"

    def get_function(self, name) -> Function:
        self._kernel(name)
        return Function(self, name)

    def set_max_dynamic_shared_bytes(self, name, nbytes):
        """Raise a kernel's shared memory limit (static + dynamic), as
        ``cudaFuncSetAttribute(..., MaxDynamicSharedMemorySize)`` does, up to 227 KiB."""
        self._kernel(name)
        if not 0 <= int(nbytes) <= MAX_SHARED_LIMIT:
            raise KernelLaunchError(f"kernel {name}: the shared memory limit must be at most "
                                    f"{MAX_SHARED_LIMIT} bytes, got {nbytes}")
        self.max_dynamic_shared_bytes[name] = int(nbytes)

    def _kernel(self, name):
        try:
            return self.kernels[name]
        except KeyError:
            extra = (f"; template kernels ({', '.join(self.templates)}) cannot be launched by "
                     "name") if self.templates else ""
            raise KernelLaunchError(f"no kernel named {name!r} in the module (it has "
                                    f"{', '.join(self.kernels) or 'none'}){extra}") from None

    def launch(self, name, grid, block, args, shared_bytes=0, *, schedule=None, seed=0,
               workers=None, allow_strided=False, check_bounds=None):
        """Run kernel ``name`` on a ``grid`` of blocks of ``block`` threads (ints or
        tuples of up to 3), with ``shared_bytes`` of dynamic shared memory per block.

        ``args`` match the kernel's parameters one for one: NumPy arrays for pointers
        (C-contiguous unless ``allow_strided``; None passes a null pointer), scalars as
        CuPy passes them. ``schedule`` ("forward", "reverse", "shuffle" with ``seed``)
        orders the threads of each block; ``workers`` CPU threads run blocks (default
        ``FNX_EMULATE_THREADS`` or the CPU count, 1 for small launches). With
        ``check_bounds`` (default: on unless ``FNX_EMULATE_CHECK_BOUNDS=0``) the kernel
        sees padded copies of the arrays (see the module docstring).
        Raises ``KernelLaunchError`` before running, ``EmulationError`` from the run."""
        k = self._kernel(name)
        grid3 = _dims(grid, "grid", name, (2**31 - 1, 65535, 65535))
        block3 = _dims(block, "block", name, (1024, 1024, 64))
        threads = block3[0] * block3[1] * block3[2]
        if threads > MAX_THREADS_PER_BLOCK:
            raise KernelLaunchError(f"kernel {name}: a block of {block3} has {threads} threads, "
                                    f"over CUDA's {MAX_THREADS_PER_BLOCK}")
        if k.max_threads is not None and threads > k.max_threads:
            raise KernelLaunchError(f"kernel {name}: a block of {threads} threads is over its "
                                    f"__launch_bounds__ ({k.max_threads}); a GPU refuses the "
                                    "launch")
        limit = self.max_dynamic_shared_bytes.get(name, DEFAULT_SHARED_LIMIT)
        shared_bytes = int(shared_bytes)
        if not 0 <= shared_bytes <= limit:
            raise KernelLaunchError(
                f"kernel {name}: {shared_bytes} bytes of dynamic shared memory per block; the "
                f"limit is {limit} (raise it with set_max_dynamic_shared_bytes, up to "
                f"{MAX_SHARED_LIMIT})")
        args = tuple(args)
        if len(args) != len(k.params):
            sig = ", ".join(f"{p.type} {p.name}" for p in k.params)
            raise KernelLaunchError(f"kernel {name}({sig}) takes {len(k.params)} arguments, "
                                    f"got {len(args)}")
        keep = [_convert(name, p, a, allow_strided) for p, a in zip(k.params, args)]
        if check_bounds is None:
            check_bounds = os.environ.get("FNX_EMULATE_CHECK_BOUNDS", "1") not in ("", "0")
        padded = _Padded(name, k.params, args, keep) if check_bounds else None
        ptrs = (ctypes.c_void_p * max(1, len(keep)))(*[ctypes.addressof(c) for c in keep])
        if schedule is None:
            schedule = os.environ.get("FNX_EMULATE_SCHEDULE", "forward")
        if schedule not in SCHEDULES:
            raise KernelLaunchError(f"kernel {name}: schedule must be one of {list(SCHEDULES)}, "
                                    f"got {schedule!r}")
        nblocks = grid3[0] * grid3[1] * grid3[2]
        if workers is None:
            work = nblocks * threads * (8 if k.fibers else 1)
            workers = _env_workers() if work >= (1 << 16) and nblocks > 1 else 1
        err = ctypes.create_string_buffer(_ERR_CAP)
        launch = _Launch((ctypes.c_uint * 3)(*grid3), (ctypes.c_uint * 3)(*block3),
                         shared_bytes, limit, ptrs, name.encode(),
                         ctypes.cast(err, ctypes.c_char_p), _ERR_CAP,
                         int(seed) & (2**64 - 1), SCHEDULES[schedule],
                         max(1, min(int(workers), 256)),
                         int(os.environ.get("FNX_EMULATE_STACK_KB", "256")) * 1024)
        failed = k._launch(ctypes.byref(launch))
        overrun = padded.finish() if padded is not None else None
        if failed:
            raise EmulationError(err.value.decode(errors="replace"))
        if overrun:
            raise EmulationError(overrun)


_PAD = 4096


def _extent(a):
    """The bytes an array's elements span: (first address, end address)."""
    lo = hi = a.ctypes.data
    if a.size:
        for n, st in zip(a.shape, a.strides):
            if st < 0:
                lo += st * (n - 1)
            else:
                hi += st * (n - 1)
        hi += a.itemsize
    return lo, hi


def _pad_word(dtype, k):
    """The bytes of one pad element of the k-th copied array: a signalling NaN for
    floats (arithmetic on it gives a quiet NaN, other bits: a value computed from a pad
    and written to another is seen), 0xa5-like bytes otherwise; distinct per array."""
    k &= 0xFF
    if dtype == np.float32:
        return np.array([0x7FA5A500 | k], np.uint32).tobytes()
    if dtype == np.float64:
        return np.array([0x7FF4A5A5A5A5A500 | k], np.uint64).tobytes()
    return bytes([0xA5 ^ k if 0xA5 ^ k not in (0, 0xFF) else 0x5A])


class _Padded:
    """The array arguments of one launch moved into copies between two pads: overlapping
    arrays share one copy (an in-place kernel still sees its input change), the pointers
    in ``keep`` are redirected, and ``finish`` copies written bytes back and reports a pad
    the kernel wrote."""

    def __init__(self, kernel, params, args, keep):
        self.kernel = kernel
        spans = []
        for i, (p, a) in enumerate(zip(params, args)):
            if p.pointer and isinstance(a, np.ndarray):
                lo, hi = _extent(a)
                spans.append([lo, hi, [i]])
        spans.sort(key=lambda s: s[0])
        groups = []
        for lo, hi, idx in spans:
            if groups and lo < groups[-1][1]:
                groups[-1][1] = max(groups[-1][1], hi)
                groups[-1][2] += idx
            else:
                groups.append([lo, hi, idx])
        self.groups = []
        for k, (lo, hi, idx) in enumerate(groups):
            size = hi - lo
            word = _pad_word(args[idx[0]].dtype, k)
            pad = np.frombuffer(word * (_PAD // len(word)), np.uint8)
            raw = np.empty(size + 2 * _PAD + 64, np.uint8)
            start = -raw.ctypes.data % 64
            buf = raw[start:start + size + 2 * _PAD]
            buf[:_PAD] = pad
            buf[_PAD + size:] = pad
            original = (np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(lo))
                        if size else np.empty(0, np.uint8))
            buf[_PAD:_PAD + size] = original
            base = buf.ctypes.data + _PAD
            for i in idx:
                keep[i].value = base + (args[i].ctypes.data - lo)
            written = any(not params[i].const for i in idx)
            names = [f"{params[i].name} ({params[i].type}, {args[i].nbytes} bytes)" for i in idx]
            self.groups.append((buf, pad, len(word), original, size, written, names))

    def finish(self):
        """Copy written arrays back; a message if the kernel wrote into a pad."""
        problems = []
        for buf, pad, itemsize, original, size, written, names in self.groups:
            if written and size:
                original[:] = buf[_PAD:_PAD + size]
            before = np.flatnonzero(buf[:_PAD] != pad)
            after = np.flatnonzero(buf[_PAD + size:] != pad)
            w = itemsize        # whole elements: bytes [first, last] rounded out to them
            where = []
            if before.size:
                first, last = before[0] // w * w - _PAD, before[-1] // w * w + w - 1 - _PAD
                where.append(f"bytes {first} to {last} before its start")
            if after.size:
                first, last = after[0] // w * w, after[-1] // w * w + w - 1
                where.append(f"bytes {first} to {last} past its end")
            if where:
                problems.append(f"{' / '.join(names)}: {' and '.join(where)}")
        if problems:
            return (f"kernel {self.kernel} wrote outside its arrays (out-of-bounds writes, "
                    f"caught in {_PAD}-byte pads around each array argument): "
                    + "; ".join(problems))
        return None


def _type_error(kernel, p, what):
    return KernelLaunchError(f"kernel {kernel}: parameter {p.name} ({p.type}) {what}")


def _convert(kernel, p, a, allow_strided):
    """A ctypes object holding argument ``a`` as parameter ``p`` receives it."""
    if p.pointer:
        if a is None:
            return ctypes.c_void_p(0)
        if not isinstance(a, np.ndarray):
            raise _type_error(kernel, p, f"takes a NumPy array (or None), got "
                                         f"{type(a).__name__}")
        want = p.pointee_dtype
        if want is not None and a.dtype != want and not (
                a.dtype.itemsize == 1 and want.itemsize == 1 and {a.dtype.kind, want.kind} <= {"b", "u"}):
            raise _type_error(kernel, p, f"points to {want.name}, got an array of {a.dtype.name}")
        if not p.pointee_void and want is None and a.ctypes.data % p.align:
            raise _type_error(kernel, p, f"needs {p.align}-byte aligned data, got an array at "
                                         f"address {a.ctypes.data:#x}")
        if not p.const and not a.flags.writeable:
            raise _type_error(kernel, p, "is a non-const pointer (the kernel may write), got a "
                                         "read-only array: declare it const or pass a "
                                         "writeable array")
        if not a.flags.c_contiguous and not allow_strided:
            raise _type_error(kernel, p, f"got a non-contiguous array (shape {a.shape}, strides "
                                         f"{a.strides}): pass np.ascontiguousarray(x), or "
                                         "allow_strided=True if the kernel indexes with the "
                                         "array's strides")
        return ctypes.c_void_p(a.ctypes.data)
    if isinstance(a, np.ndarray):
        raise _type_error(kernel, p, f"is a scalar, got an array {a.dtype.name}{list(a.shape)}")
    want = p.dtype
    if want is None:        # a struct (or other non-arithmetic) parameter: raw bytes
        data = bytes(a) if isinstance(a, (bytes, bytearray, memoryview, ctypes.Structure,
                                          np.void)) else None
        if data is None or len(data) != p.size:
            raise _type_error(kernel, p, f"takes {p.size} bytes (bytes, a ctypes.Structure or "
                                         f"a NumPy void scalar), got {a!r:.80}")
        return ctypes.create_string_buffer(data, p.size)
    if isinstance(a, np.generic):
        if a.dtype != want:
            raise _type_error(kernel, p, f"is {want.name}, got a NumPy {a.dtype.name} scalar "
                                         f"(pass np.{want.name}(value))")
        return _CTYPES[want](a.item())
    # Python scalars, typed as CuPy passes them: bool -> bool, int -> long long,
    # float -> double.
    if isinstance(a, bool):
        given = np.dtype(np.bool_)
    elif isinstance(a, int):
        given = np.dtype(np.int64)
    elif isinstance(a, float):
        given = np.dtype(np.float64)
    else:
        raise _type_error(kernel, p, f"is {want.name}, got {type(a).__name__}")
    ok = given == want or (given.kind == "i" and want == np.uint64 and a >= 0)
    if not ok:
        raise _type_error(kernel, p, f"is {want.name}, got a Python {type(a).__name__}, which "
                                     f"CuPy passes as {given.name} (pass np.{want.name}(value))")
    if given.kind == "i" and not (-2**63 <= a < 2**64):
        raise _type_error(kernel, p, f"got {a}, which does not fit in 64 bits")
    return _CTYPES[want](a)


def compile_kernels(source: str) -> Module:
    """Compile CUDA kernel source for the host: a ``Module`` whose ``launch`` runs its
    ``__global__`` functions with CUDA's semantics (see the module docstring). Cached in
    memory and on disk by source; raises ``KernelCompileError`` with g++'s log and the
    numbered source, ``KernelUnsupported`` without g++."""
    if not isinstance(source, str):
        raise TypeError(f"compile_kernels takes the CUDA source as a str, got "
                        f"{type(source).__name__}")
    ucontext = os.environ.get("FNX_EMULATE_UCONTEXT", "") not in ("", "0")
    key = (source, ucontext)
    with _LOCK:
        if key in _MODULES:
            stats["memory_hits"] += 1
            return _MODULES[key]
        analysis = _analyse(source)
        if not analysis.kernels:
            raise KernelCompileError("the source defines no launchable __global__ function"
                                     + (f" (template kernels: {', '.join(analysis.templates)})"
                                        if analysis.templates else ""))
        path = _build(_translation_unit(analysis, ucontext), source)
        try:
            module = Module(source, analysis, path)
        except OSError:                 # a damaged cache file: compile again
            os.unlink(path)
            module = Module(source, analysis, _build(_translation_unit(analysis, ucontext),
                                                     source))
        _MODULES[key] = module
        return module


# --- the same source through NVRTC -------------------------------------------------------------

def nvrtc_check(source: str, archs=("sm_80", "sm_90")) -> dict:
    """Compile ``source`` with NVRTC for each arch (as ``fnx.kernels.cuda`` does: no FMA
    contraction) and check that every extern "C" kernel is in the PTX: ``{arch: ptx}``.
    Raises ``KernelCompileError`` with NVRTC's log and the numbered source, or
    ``KernelUnsupported`` when NVRTC is not installed (tests skip on it)."""
    if not _cuda.compiler_available():
        raise KernelUnsupported("NVRTC is not available (install nvidia-cuda-nvrtc-cu12)")
    analysis = _analyse(source)
    out = {}
    for arch in archs:
        try:
            ptx = _cuda.program_ptx(source, arch)  # (cached in memory and on disk)
        except KernelCompileError as e:
            raise KernelCompileError(f"NVRTC could not compile the kernel source for {arch}.\n"
                                     f"{e}") from None
        text = ptx.decode(errors="replace")
        for name, k in analysis.kernels.items():
            if k.qualified == name and f".entry {name}(" not in text and re.search(
                    rf'extern\s+"C"[^;{{}}]*\b{name}\s*\(', source):
                raise KernelCompileError(f"NVRTC's PTX for {arch} lacks the kernel {name}")
        out[arch] = ptx
    return out
