"""The ONNX backend node tests against fnx (``fnx.onnx.backend``): every case the installed
``onnx`` package generates in memory (``onnx.backend.test.case.node``), and the model tests
it ships as files (PyTorch's converted layers and operators, small hand-made models),
compared as ONNX's own runner compares (shape, dtype, values to each case's tolerances).

The cases fnx passes are recorded in ``tests/data/onnx_node_passing.txt`` as a ratchet: a
recorded case that fails is a regression and fails this test; cases passing beyond the
record are printed, to be added with

    python tests/test_onnx_node_suite.py --write

The onnxruntime numbers on the same cases are in the README (``python -m
fnx.onnx.node_tests`` prints both)."""
import pathlib
import sys

import pytest

RECORD = pathlib.Path(__file__).parent / "data" / "onnx_node_passing.txt"


def _run():
    from fnx.onnx import backend
    from fnx.onnx.node_tests import cases, model_cases, run_cases
    return run_cases(backend, cases() + model_cases())


def _recorded():
    if not RECORD.exists():
        return set()
    return {ln.strip() for ln in RECORD.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}


def test_node_suite_passes_every_recorded_case():
    pytest.importorskip("onnx")
    results = _run()
    passing = {name for name, (_op, ok, _e) in results.items() if ok}
    recorded = _recorded()
    lost = sorted(recorded - passing)
    detail = "\n".join(f"  {n}: {results[n][2]}" if n in results else f"  {n}: not generated"
                       for n in lost[:40])
    assert not lost, (f"{len(lost)} ONNX node cases fnx passed before now fail:\n{detail}")
    new = sorted(passing - recorded)
    if new:
        print(f"\n{len(new)} ONNX node cases pass beyond the record (python "
              f"tests/test_onnx_node_suite.py --write adds them): {new[:20]}")
    assert len(passing) >= len(recorded)


if __name__ == "__main__":
    if "--write" in sys.argv:
        res = _run()
        names = sorted(n for n, (_o, ok, _e) in res.items() if ok)
        RECORD.write_text("# ONNX node cases fnx passes (tests/test_onnx_node_suite.py)\n"
                          + "\n".join(names) + "\n")
        print(f"recorded {len(names)} of {len(res)} cases")
