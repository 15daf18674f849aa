"""Imported ONNX models under ``fnx.jit`` against onnxruntime's CPU session on the same
model: a ResNet basic block and a transformer encoder layer as ``torch.onnx.export``
writes them (``tests/onnx_models.py``), float32.

    python -m benchmarks.onnx_import [--quick] [--json out.json] [--repeats N] [--raw]
                                     [--threads N]

Rows: ``fnx`` is ``fnx.jit(lambda m, x: m(x))`` of ``fnx.onnx.load(model)``;
``onnxruntime`` is ``InferenceSession.run`` with the CPU provider, its intra-op threads
set to the benchmark's thread count. Both outputs are compared before timing. Goal
(issue 21): fnx within 1.5x of onnxruntime on each model. Importing this module runs
nothing; ``main(["--quick"])`` is a smoke run.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))

if __package__:
    from . import _harness as H
else:  # run as a script, or loaded by file path
    if _HERE not in sys.path:
        sys.path.insert(0, _HERE)
    import _harness as H

_TESTS = os.path.join(os.path.dirname(_HERE), "tests")
MODELS = {"resnet block b8 64x28x28 f32": ("resnet_block", dict(batch=8, channels=64, size=28)),
          "transformer layer b8 s128 d256 f32": ("transformer_layer",
                                                 dict(batch=8, seq=128, d_model=256, heads=8,
                                                      d_ff=1024))}
LIMIT = 1.5


def _builders():
    if _TESTS not in sys.path:
        sys.path.insert(0, _TESTS)
    import onnx_models
    return onnx_models.MODELS


def build(threads):
    import numpy as np
    fnx, _fnp = H.import_fnx()
    import fnx.onnx
    builders = _builders()
    ort = H.optional_import("onnxruntime", "onnxruntime rows")
    workloads, refs = {}, {}
    for wname, (key, kw) in MODELS.items():
        model, inputs = builders[key](np.float32, **kw)
        m = fnx.onnx.load(model)
        run = fnx.jit(lambda m, *xs: m(*xs))
        libs = {"fnx": lambda run=run, m=m, inputs=inputs: run(m, *inputs).block_until_ready()}
        if ort is not None:
            so = ort.SessionOptions()
            if threads:
                so.intra_op_num_threads = threads
                so.inter_op_num_threads = 1
            sess = ort.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
            feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
            libs["onnxruntime"] = lambda sess=sess, feed=feed: sess.run(None, feed)[0]
        workloads[wname] = libs
        refs[wname] = np.asarray(run(m, *inputs))
    return workloads, refs


def check(workloads, references):
    H.check_results(workloads, references, rtol=2e-4, atol=2e-5, against="fnx's output")


def goals(results):
    rows = []
    for wname in MODELS:
        f = H.median_of(results, wname, "fnx")
        o = H.median_of(results, wname, "onnxruntime")
        goal = f"{wname.split(' b')[0]}: fnx jit within {LIMIT}x of onnxruntime"
        if o is None:
            rows.append({"goal": goal, "measured": "onnxruntime not installed",
                         "passed": None})
            continue
        rows.append({"goal": goal, "measured": f"fnx {f / 1e6:.2f} ms vs {o / 1e6:.2f} ms; "
                                               f"ratio {f / o:.2f}x", "passed": f <= LIMIT * o})
    return rows


def main(argv=None):
    threads = [1]

    def build_args(args):
        threads[0] = getattr(args, "threads", 1)
        return build(threads[0])
    return H.run_main(argv, __doc__, "onnx_import", "ONNX import", build_args, check, goals,
                      target_ms=30.0, fail="MISS")


if __name__ == "__main__":
    main()
