"""``fnx.profiler`` (JAX's ``jax.profiler`` on the host): annotations and jit compiles
recorded as Chrome trace events and written where TensorBoard and Perfetto read them."""
import glob
import gzip
import json
import os
import threading

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import profiler


def _events(log_dir, name="*.trace.json.gz"):
    (path,) = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", name))
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def test_a_trace_holds_annotations_steps_functions_threads_and_compiles(tmp_path):
    @profiler.annotate_function
    def load():
        return np.ones(3, np.float32)

    step = fnx.jit(lambda x: fnp.tanh(x) * 2, )
    with profiler.trace(str(tmp_path), create_perfetto_trace=True):
        assert profiler.TraceAnnotation.is_enabled()
        for i in range(2):
            with profiler.StepTraceAnnotation("train", step_num=i):
                with profiler.TraceAnnotation("forward", batch=8) as a:
                    a.set_metadata(layer="dense")
                    step(load())
        t = threading.Thread(target=lambda: profiler.TraceAnnotation("in a thread")
                             .__enter__().__exit__(None, None, None), name="worker")
        t.start()
        t.join()
    assert not profiler.TraceAnnotation.is_enabled()
    events = [e for e in _events(str(tmp_path)) if e["ph"] == "X"]
    names = [e["name"] for e in events]
    assert names.count("train") == 2 and names.count("forward") == 2
    assert names.count("test_a_trace_holds_annotations_steps_functions_threads_and_compiles"
                       ".<locals>.load") == 2
    assert "in a thread" in names
    # one trace and one compile of the jitted function: the second step hits the cache
    assert sum(n.startswith("compile ") for n in names) == 1
    assert sum(n.startswith("trace ") for n in names) == 1
    steps = [e for e in events if e["name"] == "train"]
    assert [e["args"]["step_num"] for e in steps] == [0, 1]
    fwd = [e for e in events if e["name"] == "forward"][0]
    assert fwd["args"] == {"batch": 8, "layer": "dense"}
    # spans nest in time: each forward lies inside its step
    for s, f in zip(steps, [e for e in events if e["name"] == "forward"]):
        assert s["ts"] <= f["ts"] and f["ts"] + f["dur"] <= s["ts"] + s["dur"] + 1e-3
    assert all(e["dur"] >= 0 for e in events)
    thread_names = {e["args"]["name"] for e in _events(str(tmp_path)) if e["ph"] == "M"}
    assert "worker" in thread_names
    assert _events(str(tmp_path), "perfetto_trace.json.gz")


def test_nothing_is_recorded_without_a_trace_and_one_trace_at_a_time(tmp_path):
    with profiler.TraceAnnotation("idle"):
        pass
    profiler.start_trace(str(tmp_path))
    with pytest.raises(RuntimeError, match="already been started"):
        profiler.start_trace(str(tmp_path))
    profiler.stop_trace()
    with pytest.raises(RuntimeError, match="No profile started"):
        profiler.stop_trace()
    assert [e for e in _events(str(tmp_path)) if e["ph"] == "X"] == []
    with pytest.raises(TypeError, match="ProfileOptions"):
        profiler.start_trace(str(tmp_path), profiler_options={"host_tracer_level": 2})
    with pytest.raises(ValueError):        # the trace stops even when the block raises
        with profiler.trace(str(tmp_path / "b"), profiler_options=profiler.ProfileOptions()):
            raise ValueError("boom")
    assert not profiler.TraceAnnotation.is_enabled()
