"""The ONNX backend node tests (the cases the ``onnx`` package generates in memory from
``onnx.backend.test.case.node``, no downloads) run against a backend: fnx's
(``fnx.onnx.backend``), onnxruntime's (``onnxruntime.backend``) or any other with
``prepare(model, device).run(inputs)``. Outputs are compared as the ONNX test runner
does (``Runner.assert_similar_outputs``: shapes, dtypes, and values to each case's
rtol/atol)::

    python -m fnx.onnx.node_tests                 # fnx and onnxruntime, per operator
    python -m fnx.onnx.node_tests --ops Conv Gemm --failures
    python -m fnx.onnx.node_tests --models        # and the model tests onnx ships as files
"""
from __future__ import annotations

import argparse
import collections
import warnings

__all__ = ["cases", "model_cases", "run_cases", "CORE_OPS", "MODEL_KINDS"]

# The core deep-learning operators: what CNNs, MLPs, RNNs and transformers exported from
# PyTorch and Keras are made of.
CORE_OPS = frozenset("""
Abs Add ArgMax ArgMin AveragePool BatchNormalization Cast Ceil Clip Concat Constant
ConstantOfShape Conv ConvTranspose Div Dropout Einsum Elu Equal Erf Exp Expand Flatten
Floor Gather Gelu Gemm GlobalAveragePool GlobalMaxPool Greater HardSigmoid HardSwish
Identity InstanceNormalization LayerNormalization LeakyRelu Less Log LogSoftmax LSTM
GRU MatMul Max MaxPool Mean Min Mul Neg Pad Pow PRelu Reciprocal ReduceMax ReduceMean
ReduceSum Relu Reshape Resize Selu Shape Sigmoid Slice Softmax Softplus Split Sqrt
Squeeze Sub Sum Tanh Transpose Unsqueeze Where
""".split())


_OPS: dict = {}


def cases(ops=None):
    """The node test cases (``onnx.backend.test.case.TestCase``), those of ``ops`` (a
    set of operator names, see ``op_of``) when given."""
    from onnx.backend.test.case import node
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        all_cases = node.collect_testcases(None)
    for c in all_cases:  # a case of one node tests that node's operator
        if len(c.model.graph.node) == 1 and "_expanded" not in c.name:
            _OPS[c.name] = c.model.graph.node[0].op_type
    return [c for c in all_cases if ops is None or op_of(c) in ops]


class _DirCase:
    """A model test the ``onnx`` package ships as files (a model and its test data sets),
    shaped like a node case: ``name``, ``model``, ``data_sets``, ``rtol``, ``atol``."""

    def __init__(self, kind, tc, model, data_sets):
        self.name = f"{kind}/{tc.name}"
        self.model = model
        self.data_sets = data_sets
        self.rtol, self.atol = tc.rtol, tc.atol


MODEL_KINDS = ("pytorch-converted", "pytorch-operator", "simple")


def model_cases(kinds=MODEL_KINDS):
    """The model tests of ``kinds`` that the installed ``onnx`` ships with their data
    (PyTorch's converted layers and operators, and small hand-made models)."""
    import glob
    import os

    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.loader import load_model_tests

    def read(path):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    out = []
    for kind in kinds:
        for tc in load_model_tests(kind=kind):
            d = tc.model_dir
            if d is None or not os.path.exists(os.path.join(d, "model.onnx")):
                continue
            sets = []
            for s in sorted(glob.glob(os.path.join(d, "test_data_set*"))):
                ins = [read(p) for p in sorted(glob.glob(os.path.join(s, "input_*.pb")))]
                outs = [read(p) for p in sorted(glob.glob(os.path.join(s, "output_*.pb")))]
                sets.append((ins, outs))
            if sets:
                out.append(_DirCase(kind, tc, onnx.load(os.path.join(d, "model.onnx")), sets))
    return out


def op_of(case):
    """The operator a case tests: its one node's; an ``..._expanded`` case (the
    operator's function body written out) counts for the operator of the case it
    expands; otherwise the last node's."""
    if isinstance(case, _DirCase):
        return case.name.split("/")[0]
    base = case.name.split("_expanded")[0]
    if base in _OPS:
        return _OPS[base]
    nodes = case.model.graph.node
    return nodes[-1].op_type if nodes else "?"


def run_cases(backend, selected, *, device="CPU"):
    """``{case name: (op, passed, error text)}`` of ``backend`` on ``selected``."""
    from onnx.backend.test.runner import Runner, _normalize_tensor
    out = {}
    for c in selected:
        err = ""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = backend.prepare(c.model, device)
                for inputs, refs in c.data_sets:
                    got = rep.run([_normalize_tensor(i) for i in inputs])
                    _compare([_normalize_tensor(r) for r in refs], got, c.rtol, c.atol)
        except Exception as e:  # noqa: BLE001 - every failure is a failed case
            err = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        out[c.name] = (op_of(c), not err, err)
    return out


def _compare(refs, got, rtol, atol):
    """``Runner.assert_similar_outputs``, except that a sequence output is compared one
    element at a time: the runner passes a sequence's elements to itself as lists of
    outputs, and fails on a 0-d element (its ``len()``) whatever a backend computed."""
    from onnx.backend.test.runner import Runner
    assert len(refs) == len(got), f"{len(got)} outputs, expected {len(refs)}"
    for r, g in zip(refs, got):
        if isinstance(r, (list, tuple)):
            assert isinstance(g, (list, tuple)) and len(g) == len(r), (
                f"a sequence of {len(r)} expected, got {type(g).__name__}")
            for rj, gj in zip(r, g):
                Runner.assert_similar_outputs([rj], [gj], rtol, atol)
        else:
            Runner.assert_similar_outputs([r], [g], rtol, atol)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", nargs="*", help="only these operators")
    p.add_argument("--core", action="store_true", help="only the core deep-learning set")
    p.add_argument("--failures", action="store_true", help="print fnx's failures")
    p.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    p.add_argument("--models", action="store_true",
                   help="also the model tests onnx ships as files (" + ", ".join(MODEL_KINDS)
                   + "), one row per kind")
    args = p.parse_args(argv)
    ops = set(args.ops) if args.ops else (CORE_OPS if args.core else None)
    selected = cases(ops) + (model_cases() if args.models else [])
    from . import backend as fnx_backend
    results = {"fnx": run_cases(fnx_backend, selected)}
    if not args.no_ort:
        try:
            import onnxruntime.backend as ort_backend
            results["onnxruntime"] = run_cases(ort_backend, selected)
        except ImportError:
            pass
    per_op = collections.defaultdict(lambda: collections.Counter())
    for lib, res in results.items():
        for name, (op, ok, _e) in res.items():
            per_op[op][lib] += ok
            per_op[op]["cases"] += lib == "fnx"
    libs = list(results)
    print(f"{'operator':28s} {'cases':>5s} " + " ".join(f"{lib:>11s}" for lib in libs))
    for op in sorted(per_op):
        c = per_op[op]
        print(f"{op:28s} {c['cases']:5d} " + " ".join(f"{c[lib]:11d}" for lib in libs))
    print(f"{'total':28s} {len(selected):5d} " + " ".join(
        f"{sum(ok for _o, ok, _e in results[lib].values()):11d}" for lib in libs))
    if args.failures:
        for name, (op, ok, e) in sorted(results["fnx"].items()):
            if not ok:
                print(f"FAIL {name} [{op}] {e[:300]}")


if __name__ == "__main__":
    main()
