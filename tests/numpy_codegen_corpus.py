"""The code the NumPy backend generates for a corpus of IRs, to hold its planner to the
same output while it is restructured (issue 18: "the NumPy backend's passes are passes").

Two corpora:

* ``golden_cases()``: small IRs written with ``fnx.lax`` (one equation per call, so they
  do not move when ``fnx.numpy`` or a differentiation rule changes), each aimed at one job
  of the lowering: transpose fusion, the max/min tie weights, the logistic and int-select
  blends, fused reductions, blocked elementwise groups, unbroadcast operands, the full
  operand of ``maximum``, constant folding, in-place writes, donation, scratch and output
  buffers, a scan loop. ``tests/test_numpy_codegen_golden.py`` compares what they compile
  to with ``tests/data/numpy_codegen_golden.txt``. The generated code depends only on
  shapes, dtypes and the NumPy backend's thresholds (no BLAS detection, no timing), so the
  file holds on any machine with NumPy 2 (NumPy 1 wraps the body in ``np.errstate``).
* the broad corpus (``broad_corpus()``): every IR the NumPy backend compiles, and every
  scan loop it generates, while the benchmarks' fnx rows (``benchmarks/run.py``'s
  builders), the compile workload and the examples (MLP, Xception CNN, char LSTM) run
  once, plus the golden cases. It depends on every tracing and differentiation rule, so it
  is compared in one process between two versions of the code generator instead of
  against a file:

      python tests/numpy_codegen_corpus.py --against REV   # numpy_codegen.py at git REV
      python tests/numpy_codegen_corpus.py --write         # rewrite the golden file

  ``--against REV`` loads ``fnx/backends/numpy_codegen.py`` as it was at ``REV`` next to
  the working tree's, compiles every IR of the corpus with both and reports each one
  whose generated code differs. ``NUMPY_CODEGEN_AGAINST=REV python -m pytest -p
  numpy_codegen_corpus tests/...`` (with ``tests`` on ``PYTHONPATH``) does the same for
  every IR a test run compiles, and writes the differences to ``numpy_codegen_ab.txt``.

What is compared (``describe``): the generated source (the function's serial number in
its name dropped), and every global it binds, described by value: arrays by shape, dtype
and a hash of their bytes; ufuncs by name; ``functools.partial`` by function and
keywords (an IR parameter as its text); a fused elementwise loop by its own generated
source and globals; the buffer pool by its scratch, ring and donor plan.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import types
import weakref

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "data", "numpy_codegen_golden.txt")
_SEP = "\n#### "


# --- describing generated code --------------------------------------------------------------

def _normalize(source):
    """``source`` with the serial number of the generated function's name dropped."""
    return re.sub(r"^def (_fnx_\w*?)_\d+\(", r"def \1_N(", source, count=1)


def describe_value(v, depth=0):
    """A text for ``v`` that is equal for equal values and stable across processes."""
    from fnx.core.ir import IR
    from fnx.backends import buffers
    if depth > 6:
        return type(v).__name__
    if isinstance(v, np.ndarray):
        return (f"array{v.shape} {v.dtype} writeable={v.flags.writeable} "
                f"sha1={hashlib.sha1(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]}")
    if isinstance(v, np.generic):
        return f"{type(v).__name__}({v!r})"
    if isinstance(v, np.ufunc):
        return f"ufunc {v.__name__}"
    if isinstance(v, np.dtype):
        return f"dtype {v.str}"
    if isinstance(v, type):
        return f"type {v.__module__}.{v.__qualname__}"
    if isinstance(v, IR):
        return "IR {\n" + str(v) + "\n}"
    if isinstance(v, buffers.BufferPool):
        return (f"BufferPool scratch={[(s, d.str) for s, d in v.scratch_specs]} "
                f"outs={[(s, d.str) for s, d in v.out_specs]} donors={v.donors}")
    if isinstance(v, functools.partial):
        kw = ", ".join(f"{k}={describe_value(x, depth + 1)}" for k, x in sorted(v.keywords.items()))
        args = ", ".join(describe_value(x, depth + 1) for x in v.args)
        return f"partial({describe_value(v.func, depth + 1)}; {args}; {kw})"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(describe_value(x, depth + 1) for x in v)
        return f"{type(v).__name__}({inner})"
    if isinstance(v, dict):
        inner = ", ".join(f"{k!r}: {describe_value(x, depth + 1)}" for k, x in v.items())
        return "{" + inner + "}"
    if isinstance(v, (int, float, complex, str, bool, type(None))):
        return repr(v)
    if isinstance(v, types.FunctionType) and hasattr(v, "source"):  # a generated loop
        return ("generated takes_out={} {{\n{}{}}}".format(
            getattr(v, "takes_out", False), v.source,
            describe_globals(v.__globals__, depth + 1, skip=v)))
    if callable(v):
        name = getattr(v, "__qualname__", None) or type(v).__qualname__
        mod = getattr(v, "__module__", None) or type(v).__module__
        if mod.startswith("fnx.backends."):  # a helper of the backend: wherever it lives
            mod = "fnx.backends.*"
        return f"fn {mod}.{name} takes_out={getattr(v, 'takes_out', False)}"
    return type(v).__name__


def describe_globals(glb, depth=0, skip=None):
    """``glb`` (a generated function's globals) as sorted lines; ``skip``: the function
    itself (a scan loop is bound in its own globals)."""
    lines = []
    for k in sorted(glb):
        if k in ("np", "__builtins__") or glb[k] is skip:
            continue
        lines.append(f"  {k} = {describe_value(glb[k], depth)}\n")
    return "".join(lines)


def describe_compiled(c):
    """The generated function of a ``Compiled`` and its globals, as text."""
    return _normalize(c.source) + "--- globals\n" + describe_globals(c.fn.__globals__)


def describe_runner(run):
    """A generated scan loop (``numpy_loops.scan_runner``) and its globals, as text."""
    return run.source + "--- globals\n" + describe_globals(run.__globals__, skip=run)


# --- code generators: the working tree's and one at a git revision ------------------------

def load_codegen_at(rev):
    """``fnx/backends/numpy_codegen.py`` as it was at git ``rev``, as a module of the
    ``fnx.backends`` package (its relative imports resolve to the working tree's)."""
    import fnx.backends  # noqa: F401
    src = subprocess.run(["git", "show", f"{rev}:fnx/backends/numpy_codegen.py"], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    name = "fnx.backends._numpy_codegen_at_" + re.sub(r"\W", "_", rev)
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "fnx.backends"
    mod.__file__ = f"<numpy_codegen.py at {rev}>"
    sys.modules[name] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


class Generator:
    """``compile(ir, name, donated)`` and ``scan(body, nc, nk, length, reverse)`` of one
    code generator module, uncached."""

    def __init__(self, codegen=None):
        from fnx.backends import numpy_codegen, numpy_loops
        self.codegen = codegen or numpy_codegen
        runner = numpy_loops.scan_runner
        glb = dict(runner.__globals__)
        glb.update(emit_eqns=self.codegen.emit_eqns, quiet_lines=self.codegen.quiet_lines)
        self._glb = glb
        self._runner = types.FunctionType(runner.__code__, glb, runner.__name__,
                                          runner.__defaults__, runner.__closure__)

    def compile(self, ir, name, donated=()):
        return describe_compiled(self.codegen.compile_ir(ir, name, tuple(donated)))

    def scan(self, body, nc, nk, length, reverse):
        self._glb["_RUNNERS"] = weakref.WeakKeyDictionary()  # no cache: generate anew
        return describe_runner(self._runner(body, nc, nk, length, reverse))


# --- recording what the NumPy backend compiles ----------------------------------------------

class Recorder:
    """While active, every ``compile_ir`` and ``scan_runner`` call of the NumPy backend is
    recorded (``self.items``: ``("ir", label, ir, name, donated)`` or ``("scan", label,
    body, nc, nk, length, reverse)``), the IRs held so they stay alive."""

    def __init__(self, on_item=None):
        self.items, self._count, self.on_item = [], {}, on_item

    def _label(self, kind, name):
        n = self._count[(kind, name)] = self._count.get((kind, name), 0) + 1
        return f"{kind}:{name}#{n}"

    def __enter__(self):
        from fnx.backends import numpy_backend
        self._nb = numpy_backend
        self._saved = numpy_backend.compile_ir, numpy_backend.scan_runner
        real_compile, real_scan = self._saved

        def compile_ir(ir, name="f", donated=()):
            self._add(("ir", self._label("ir", name), ir, name, tuple(donated)))
            return real_compile(ir, name, donated)

        def scan_runner(body, nc, nk, length, reverse):
            self._add(("scan", self._label("scan", getattr(body, "name", "body")), body, nc, nk,
                       length, reverse))
            return real_scan(body, nc, nk, length, reverse)

        numpy_backend.compile_ir, numpy_backend.scan_runner = compile_ir, scan_runner
        return self

    def _add(self, item):
        self.items.append(item)
        if self.on_item is not None:
            self.on_item(item)

    def __exit__(self, *exc):
        self._nb.compile_ir, self._nb.scan_runner = self._saved


def run_item(gen, item):
    """The description of one recorded item compiled by ``gen`` (a ``Generator``)."""
    if item[0] == "ir":
        _, _, ir, name, donated = item
        return gen.compile(ir, name, donated)
    _, _, body, nc, nk, length, reverse = item
    return gen.scan(body, nc, nk, length, reverse)


# --- the golden corpus: small fnx.lax IRs, one job of the lowering each ---------------------

def golden_cases():
    """``[(label, kind, payload)]``: ``kind`` "ir" with ``(ir, donated)``, or "scan" with
    ``(body, nc, nk, length, reverse)``."""
    import fnx
    from fnx import lax

    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    S = fnx.ShapeDtypeStruct
    cases = []

    def ir_case(label, f, *avals, donated=()):
        ir = fnx.make_ir(f)(*avals)
        cases.append((label, "ir", (ir, tuple(donated))))
        return ir

    dn = (((1,), (0,)), ((), ()))
    ir_case("transpose_fused_into_dot", lambda a, b: lax.transpose(lax.dot_general(a, b, dn),
                                                                     (1, 0)),
            S((64, 32), f32), S((32, 48), f32))
    ir_case("transpose_of_dot_used_twice",
            lambda a, b: (lambda d: (lax.transpose(d, (1, 0)), d))(lax.dot_general(a, b, dn)),
            S((64, 32), f32), S((32, 48), f32))

    def tie(a, b):
        one = lax.convert_element_type(lax.gt(a, b), f32)
        half = lax.mul(lax.convert_element_type(lax.eq(a, b), f32), np.float32(0.5))
        return lax.add(one, half)
    ir_case("tie_weight", tie, S((64, 128), f32), S((64, 128), f32))
    ir_case("scale_by_tie_weight", lambda ct, a, b: lax.mul(ct, tie(a, b)),
            S((64, 128), f32), S((64, 128), f32), S((64, 128), f32))
    ir_case("tie_weight_scalar_b", lambda a: tie(a, np.float32(0.0)), S((64, 128), f32))
    ir_case("tie_weight_broadcast_b", lambda a: tie(a, lax.full((64, 128), 0.0, f32)),
            S((64, 128), f32))

    ir_case("logistic_large", lambda x: lax.logistic(x), S((128, 128), f32))
    ir_case("logistic_small", lambda x: lax.logistic(x), S((16, 16), f32))
    ir_case("select_int_3", lambda w, a, b, c: lax.select_n(w, a, b, c),
            S((128, 128), i32), S((128, 128), f32), S((128, 128), f32), S((128, 128), f32))

    ir_case("fused_reduce_sum_exp", lambda x: lax.reduce_sum(lax.exp(x), (1,)),
            S((512, 1024), f32))
    ir_case("fused_reduce_max_mul", lambda x, y: lax.reduce_max(lax.mul(x, y), (1, 2)),
            S((64, 32, 256), f32), S((64, 32, 256), f32))
    ir_case("reduce_axis0_not_fused", lambda x: lax.reduce_sum(lax.exp(x), (0,)),
            S((512, 1024), f32))

    def chain(x, w):
        h = lax.tanh(lax.add(lax.mul(x, np.float32(0.5)), np.float32(1.0)))
        return lax.add(lax.mul(h, x), lax.broadcast_in_dim(w, x.shape, (1,)))
    ir_case("blocked_chain", chain, S((1024, 1024), f32), S((1024,), f32))

    def chain_with_scalar_broadcast(x):
        two = lax.broadcast_in_dim(np.float32(2.0), x.shape, ())
        return lax.sqrt(lax.abs(lax.sub(lax.mul(x, two), lax.exp(x))))
    ir_case("blocked_chain_scalar_broadcast", chain_with_scalar_broadcast, S((1024, 1024), f32))

    def elu_pair(x):
        m = lax.gt(x, np.float32(0))
        e = lax.sub(lax.exp(x), np.float32(1))
        a = lax.select_n(m, e, x)
        b = lax.select_n(m, lax.mul(e, np.float32(1.7)), lax.mul(x, np.float32(1.05)))
        return lax.add(a, b)
    ir_case("selects_sharing_a_mask", elu_pair, S((128, 512), f32))

    def select_zero(x):
        m = lax.ge(x, np.float32(0))
        z = lax.full((1024, 1024), 0.0, f32)
        return lax.add(lax.select_n(m, z, x), lax.select_n(m, lax.exp(x), z))
    ir_case("blocked_select_zero_case", select_zero, S((1024, 1024), f32))

    ir_case("unbroadcast_trailing",
            lambda x, b: lax.mul(lax.add(x, lax.broadcast_in_dim(b, (64, 128), (1,))), x),
            S((64, 128), f32), S((128,), f32))
    ir_case("unbroadcast_reshaped",
            lambda x, b: lax.sub(x, lax.broadcast_in_dim(b, (64, 128), (0,))),
            S((64, 128), f32), S((64,), f32))
    ir_case("broadcast_read_twice",
            lambda x, b: (lambda bb: (lax.add(x, bb), bb))(lax.broadcast_in_dim(b, (64, 128), (1,))),
            S((64, 128), f32), S((128,), f32))
    ir_case("select_unbroadcast",
            lambda m, x, b: lax.select_n(m, x, lax.broadcast_in_dim(b, (64, 128), (1,))),
            S((64, 128), np.dtype(np.bool_)), S((64, 128), f32), S((128,), f32))

    ir_case("maximum_full_operand", lambda x: lax.max(x, np.float32(0)), S((64, 128), f32))
    ir_case("maximum_small_no_full_operand", lambda x: lax.max(x, np.float32(0)), S((8, 8), f32))

    ir_case("folded_iota", lambda x: lax.add(x, lax.mul(lax.iota(i32, 16), np.int32(3))),
            S((16,), i32))
    ir_case("div_and_square", lambda x, y: lax.div(lax.integer_pow(x, 2), y),
            S((64, 128), f32), S((64, 128), f32))
    ir_case("int_div", lambda x, y: lax.div(x, y), S((64,), i32), S((64,), i32))

    ir_case("in_place_chain", lambda x: lax.log(lax.add(lax.exp(x), np.float32(1))),
            S((64, 128), f32))
    ir_case("in_place_after_view",
            lambda x: lax.exp(lax.reshape(lax.add(x, np.float32(1)), (128, 64))),
            S((64, 128), f32))
    ir_case("matmul_scratch_and_ring",
            lambda a, b, c: lax.tanh(lax.dot_general(lax.tanh(lax.dot_general(a, b, dn)), c, dn)),
            S((128, 256), f32), S((256, 256), f32), S((256, 128), f32))

    def sgd(p, g, m):
        m2 = lax.add(lax.mul(m, np.float32(0.9)), g)
        return lax.sub(p, lax.mul(m2, np.float32(0.1))), m2
    ir_case("donated_sgd", sgd, S((256, 256), f32), S((256, 256), f32), S((256, 256), f32),
            donated=(0, 2))
    ir_case("donated_view_escapes", lambda p: (lax.reshape(p, (128, 512)), lax.exp(p)),
            S((256, 256), f32), donated=(0,))
    ir_case("donated_large_blocked", lambda p, g: lax.sub(p, lax.mul(lax.tanh(g),
                                                                    np.float32(0.1))),
            S((1024, 1024), f32), S((1024, 1024), f32), donated=(0,))

    def conv_pool(x, k):
        y = lax.conv_general_dilated(x, k, (1, 1), "SAME")
        y = lax.max(y, np.float32(0))
        return lax.reduce_window(y, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    ir_case("conv_relu_pool", conv_pool, S((8, 3, 16, 16), f32), S((4, 3, 3, 3), f32))

    def rnn(w, h0, xs):
        def step(h, x):
            h = lax.tanh(lax.add(lax.dot_general(h, w, dn), x))
            return h, lax.mul(h, np.float32(2))
        return lax.scan(step, h0, xs)
    ir = ir_case("scan_call", rnn, S((32, 32), f32), S((4, 32), f32), S((10, 4, 32), f32))
    for e in ir.eqns:
        if e.prim.name == "scan":
            p = e.params
            cases.append(("scan_body", "scan", (p["body"], p["num_consts"], p["num_carry"],
                                                p["length"], p["reverse"])))
            cases.append(("scan_body_reverse", "scan", (p["body"], p["num_consts"],
                                                        p["num_carry"], p["length"], True)))
    return cases


def describe_golden(gen=None):
    """``{label: description}`` of the golden cases compiled by ``gen``."""
    gen = gen or Generator()
    out = {}
    for label, kind, payload in golden_cases():
        if kind == "ir":
            ir, donated = payload
            out[label] = gen.compile(ir, label, donated)
        else:
            out[label] = gen.scan(*payload)
    return out


def write_golden(descriptions, path=GOLDEN):
    """The golden file: each case as a ``#### label`` line and its description."""
    with open(path, "w") as f:
        f.write("# The NumPy backend's generated code for tests/numpy_codegen_corpus.py's golden\n"
                "# cases; rewrite with: python tests/numpy_codegen_corpus.py --write\n")
        for label in sorted(descriptions):
            f.write(_SEP.lstrip("\n") + label + "\n" + descriptions[label])


def read_golden(path=GOLDEN):
    """``{label: description}`` as ``write_golden`` wrote them."""
    with open(path) as f:
        text = f.read()
    out = {}
    chunks = text.split(_SEP)[1:]
    for k, chunk in enumerate(chunks):
        label, _, body = chunk.partition("\n")
        out[label] = body + ("\n" if k + 1 < len(chunks) else "")  # the separator's
    return out


# --- the broad corpus -----------------------------------------------------------------------

def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def broad_corpus(log=print):
    """Everything the NumPy backend compiles while the benchmarks' fnx rows, the compile
    workload and the examples run once: a list of recorded items (see ``Recorder``)."""
    import contextlib
    import io

    import fnx
    import fnx.numpy as fnp
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    run = _load(os.path.join(ROOT, "benchmarks", "run.py"), "fnx_bench_run")
    fnx.clear_caches()
    with Recorder() as rec:
        names = [n for n in run.NAMES if n in run.BUILDERS]
        mods = {"jax": None, "jnp": None, "torch": None, "ag": None, "agnp": None,
                "grad": run.grad._competitors() if {"rosenbrock", "per_example"} & set(names)
                else None}
        for name in names:
            W, R = {}, {}
            run.BUILDERS[name](W, R, mods)
            for workload, rows in W.items():
                with run.H.x64_for(workload):  # as the harness runs a float64 workload
                    for lib, fn in rows.items():
                        if lib.startswith("fnx"):
                            fn()
                            fn()
            log(f"  benchmark {name}: {len(rec.items)} items so far")
        params, x = run._deep_data()
        pf = [(fnp.asarray(w), fnp.asarray(b)) for w, b in params]
        fnx.jit(fnx.value_and_grad(run.deep_loss(fnp)))(pf, fnp.asarray(x))
        for ex in ("mlp", "xception", "char_lstm"):
            mod = _load(os.path.join(ROOT, "examples", f"{ex}.py"), f"example_{ex}")
            with contextlib.redirect_stdout(io.StringIO()):
                mod.main(["--steps", "3"])
            log(f"  example {ex}: {len(rec.items)} items so far")
    items = rec.items
    for label, kind, payload in golden_cases():
        if kind == "ir":
            items.append(("ir", "golden:" + label, payload[0], label, payload[1]))
        else:
            items.append(("scan", "golden:" + label, *payload))
    return items


def _described(gen, item):
    """``run_item``, or the exception it raised as text."""
    try:
        return run_item(gen, item)
    except Exception as exc:  # noqa: BLE001 - a failing compile is compared, not raised
        return f"raised {type(exc).__name__}: {exc}\n"


def compare(items, old, new, log=print, limit=5):
    """Compile ``items`` with two ``Generator``s; the labels whose descriptions differ."""
    import difflib
    bad = []
    for item in items:
        a, b = _described(old, item), _described(new, item)
        if a != b:
            bad.append(item[1])
            if len(bad) <= limit:
                log(f"DIFFERS: {item[1]}")
                log("".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                                 "at revision", "working tree", n=2)))
    return bad


# --- pytest plugin: compare every compile of a test run -------------------------------------

_AB = {}


def pytest_configure(config):
    rev = os.environ.get("NUMPY_CODEGEN_AGAINST")
    if not rev:
        return
    _AB["old"], _AB["new"] = Generator(load_codegen_at(rev)), Generator()
    _AB["n"], _AB["bad"] = 0, []
    _AB["out"] = os.environ.get("NUMPY_CODEGEN_AB_OUT", "numpy_codegen_ab.txt")

    def check(item):
        _AB["n"] += 1
        a, b = _described(_AB["old"], item), _described(_AB["new"], item)
        if a != b:
            _AB["bad"].append((item[1], a, b))

    rec = _AB["rec"] = Recorder(check)
    rec.items = _NoList()
    rec.__enter__()


class _NoList(list):
    def append(self, item):  # the plugin checks each item at once and keeps none
        pass


def pytest_unconfigure(config):
    if "rec" not in _AB:
        return
    _AB["rec"].__exit__(None, None, None)
    import difflib
    with open(_AB["out"], "w") as f:
        f.write(f"{_AB['n']} compiles checked, {len(_AB['bad'])} differ\n")
        for label, a, b in _AB["bad"][:50]:
            f.write(f"DIFFERS: {label}\n")
            f.write("".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), n=2)))
    print(f"\nnumpy_codegen A/B: {_AB['n']} compiles checked, {len(_AB['bad'])} differ "
          f"(see {_AB['out']})")


# --- command line ---------------------------------------------------------------------------

def main(argv=None):
    import argparse
    import json
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--against", metavar="REV",
                   help="compare the broad corpus with numpy_codegen.py at this git revision")
    p.add_argument("--write", action="store_true", help="rewrite the golden file")
    p.add_argument("--dump", metavar="PATH",
                   help="write the broad corpus' descriptions (working tree) as JSON")
    args = p.parse_args(argv)
    if args.write:
        write_golden(describe_golden())
        print("wrote tests/data/numpy_codegen_golden.txt")
    if args.against or args.dump:
        items = broad_corpus()
        print(f"{len(items)} items ({sum(i[0] == 'scan' for i in items)} scan loops)")
        if args.dump:
            gen = Generator()
            with open(args.dump, "w") as f:
                json.dump({i[1]: run_item(gen, i) for i in items}, f, indent=1)
        if args.against:
            bad = compare(items, Generator(load_codegen_at(args.against)), Generator())
            print(f"{len(items)} compiled with both; {len(bad)} differ")
            return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
