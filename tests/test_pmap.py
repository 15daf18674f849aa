"""``fnx.pmap`` over the processes of the world: in one process (the group has one member)
always; with mpi4py and ``mpiexec``, in 2 and 4 processes, every collective and its
derivative under pmap against ``vmap(axis_name=...)`` over all processes' shards, and the
data-parallel example against one process on the whole batch."""
import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fnx
import fnx.numpy as fnp
from fnx import lax

from mpi_testing import mpiexec, needs_mpi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_process_is_a_group_of_one():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    assert fnx.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(x).tolist() == x.tolist()
    assert fnx.pmap(lambda v: lax.all_gather(v, "i"), axis_name="i")(x).shape == (1, 1, 2, 3)
    assert fnx.pmap(lambda v: lax.axis_index("i") + v * 0, axis_name="i")(
        np.zeros((1, 2), np.int32)).tolist() == [[0, 0]]
    # static arguments, unmapped arguments, a gradient inside
    f = fnx.pmap(lambda w, x, k: fnx.grad(lambda w: lax.pmean(fnp.sum((x @ w) ** k), "i"))(w),
                 axis_name="i", in_axes=(None, 0, None), static_broadcasted_argnums=(2,))
    w, xs = np.ones((3, 2), np.float32), np.ones((1, 4, 3), np.float32)
    np.testing.assert_allclose(np.asarray(f(w, xs, 2)[0]), 2 * xs[0].T @ (xs[0] @ w))


def test_pmap_inside_jit_grad_and_vmap():
    """The compiled per-process program runs after pmap's own call has returned when an
    outer jit holds it: the collectives' impls must not need pmap's frame then."""
    f = fnx.pmap(lambda v: lax.psum(v, "i") * 2, axis_name="i")
    x = np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(fnx.jit(f)(x)), 2 * x)
    np.testing.assert_array_equal(np.asarray(fnx.grad(lambda v: fnp.sum(f(v)))(x)), 2 * x)
    assert fnx.vmap(f)(np.ones((2, 1, 3), np.float32)).shape == (2, 1, 3)


def test_psum_reduces_the_gradient_where_the_backward_pass_wrote_it():
    """A large psum is lowered like a ufunc: where its operand dies, it reduces it in
    place, so the matmul computing the gradient writes straight into the output ring and
    a data-parallel step allocates and copies nothing per call; a group of one leaves the
    operand as it is."""
    def step(w, x):
        g = fnx.grad(lambda w: fnp.sum(fnp.tanh(x @ w)))(w)
        return lax.psum(g, "i")
    f = fnx.pmap(step, axis_name="i")
    w, x = np.ones((1, 256, 256), np.float32) / 256, np.ones((1, 64, 256), np.float32)
    source = f.lower(w, x).source
    psum_line = next(line for line in source.splitlines() if "_psum" in line)
    operand = psum_line.split("(", 1)[1].split(",")[0]
    assert f"out={operand})" in psum_line, source
    assert f"{operand} = " in source and "out=_mo[" in source.split(f"{operand} = ")[1].split(
        "\n")[0], source
    np.testing.assert_allclose(np.asarray(f(w, x)), np.asarray(
        fnx.grad(lambda w: fnp.sum(fnp.tanh(x[0] @ w)))(w[0]))[None], rtol=1e-6)
    first = f(w, x)
    again = np.asarray(f(w, x))
    np.testing.assert_array_equal(np.asarray(first), again)


def test_psum_keeps_an_operand_that_lives_on():
    """Where the operand is read after the collective, the result goes elsewhere."""
    def step(w, x):
        g = fnx.grad(lambda w: fnp.sum(fnp.tanh(x @ w)))(w)
        return lax.psum(g, "i") + g
    f = fnx.pmap(step, axis_name="i")
    w, x = np.ones((1, 256, 256), np.float32) / 256, np.ones((1, 64, 256), np.float32)
    psum_line = next(line for line in f.lower(w, x).source.splitlines() if "_psum" in line)
    operand = psum_line.split("(", 1)[1].split(",")[0]
    assert f"out={operand})" not in psum_line
    g = np.asarray(fnx.grad(lambda w: fnp.sum(fnp.tanh(x[0] @ w)))(w[0]))
    np.testing.assert_allclose(np.asarray(f(w, x))[0], 2 * g, rtol=1e-6)


def test_a_transpose_of_a_psum_is_kept():
    """jit fuses a transpose into the primitive computing its operand where that one's
    lowering can take it: the collective's must apply it."""
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    f = fnx.pmap(lambda v: lax.psum(v * 2, "i").T + 1, axis_name="i")
    np.testing.assert_array_equal(np.asarray(f(x)), (x[0] * 2).T[None] + 1)


def test_a_shard_of_the_wrong_size_is_named():
    with pytest.raises(ValueError, match="size 2 along its mapped axis 0.*1 local device"):
        fnx.pmap(lambda v: v)(np.ones((2, 3)))


WORKER = r'''
import sys
import numpy as np
import fnx
import fnx.distributed as dist
import fnx.numpy as fnp
from fnx import lax

dist.initialize()
me, P = fnx.process_index(), fnx.process_count()
assert P == int(sys.argv[1])
rng = np.random.default_rng(0)
shards = rng.standard_normal((P, 2 * P, 3)).astype(np.float64)  # every process's input
fnx.config.update("jax_enable_x64", True)

CASES = {
    "psum": lambda v: lax.psum(v, "i"),
    "pmean": lambda v: lax.pmean(v, "i"),
    "pmax": lambda v: lax.pmax(v, "i"),
    "all_gather": lambda v: lax.all_gather(v, "i", axis=1),
    "all_gather_tiled": lambda v: lax.all_gather(v, "i", tiled=True),
    "psum_scatter": lambda v: lax.psum_scatter(v, "i", tiled=True),
    "ppermute": lambda v: lax.ppermute(v, "i", [(q, (q + 1) % P) for q in range(P)]),
    "all_to_all": lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True),
    "axis_index": lambda v: v * lax.axis_index("i"),
    "psum_transposed": lambda v: lax.psum(v * 2, "i").T + 1,
}
for name, f in CASES.items():
    got = np.asarray(fnx.pmap(f, axis_name="i")(shards[me][None]))[0]
    want = np.asarray(fnx.vmap(f, axis_name="i")(shards))[me]
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-12), name
    if name in ("pmax", "axis_index"):
        continue
    loss = lambda v: fnp.sum(fnp.sin(f(v)) * (lax.axis_index("i") + 1.0))
    got = np.asarray(fnx.pmap(fnx.grad(loss), axis_name="i")(shards[me][None]))[0]
    want = np.asarray(fnx.vmap(fnx.grad(loss), axis_name="i")(shards))[me]
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), "grad " + name
    got = np.asarray(fnx.jit(fnx.pmap(f, axis_name="i"))(shards[me][None]))[0]
    want = np.asarray(fnx.vmap(f, axis_name="i")(shards))[me]
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12), "jit(pmap) " + name
# a training step: the gradient is reduced in place where the backward pass wrote it (large
# enough for the shared-memory exchange), and the update writes into it; three steps
w = rng.standard_normal((128, 128)) / 128
xs = rng.standard_normal((P, 32, 128))


def step(w, x):
    g = fnx.grad(lambda w: fnp.sum(fnp.tanh(x @ w)))(w)
    return w - 0.1 * lax.pmean(g, "i")


pstep, vstep = fnx.pmap(step, axis_name="i"), fnx.vmap(step, in_axes=(None, 0), axis_name="i")
line = next(ln for ln in pstep.lower(w[None], xs[me][None]).source.splitlines() if "_psum" in ln)
assert "out=" + line.split("(", 1)[1].split(",")[0] + ")" in line, line
got, want = w[None], w
for _ in range(3):
    got, want = pstep(got, xs[me][None]), vstep(want, xs)[me]
    assert np.allclose(np.asarray(got)[0], np.asarray(want), rtol=1e-12, atol=1e-12), "step"
# a donated operand: jit hands its buffer back as the collective's output (through MPI for
# a small one, shared memory for a large one)
for n in (8, 20000):
    donated = fnx.pmap(lambda v: lax.psum(v, "i"), axis_name="i", donate_argnums=0)
    for _ in range(2):
        got = donated(fnp.asarray(np.full((1, n), me + 1.0)))
        assert np.array_equal(np.asarray(got), np.full((1, n), P * (P + 1) / 2)), "donated"
open(f"{sys.argv[2]}/done{me}", "w").close()
'''


def _run(args, timeout=120):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives_and_gradients_across_processes_match_vmap(tmp_path, n):
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    _run([mpiexec(), "-n", str(n), sys.executable, str(script), str(n), str(tmp_path)])
    assert sorted(p.name for p in tmp_path.glob("done*")) == [f"done{q}" for q in range(n)]


@needs_mpi
def test_data_parallel_example_matches_one_process(tmp_path):
    example = os.path.join(ROOT, "examples", "data_parallel.py")
    one, two = tmp_path / "one.msgpack", tmp_path / "two.msgpack"
    _run([sys.executable, example, "--steps", "30", "--out", str(one)])
    _run([mpiexec(), "-n", "2", sys.executable, example, "--steps", "30", "--out", str(two)])
    import fnx.serialization as S
    a, b = (fnx.tree_util.tree_leaves(S.load(str(p))) for p in (one, two))
    assert len(a) == len(b) > 0
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-5, atol=1e-6)


def _cases(P):
    """Every collective, with axes that move data inside the value."""
    return {
        "psum": lambda v: lax.psum(v, "i"),
        "pmean": lambda v: lax.pmean(v, "i"),
        "pmax": lambda v: lax.pmax(v, "i"),
        "pmin": lambda v: lax.pmin(v, "i"),
        "all_gather": lambda v: lax.all_gather(v, "i"),
        "all_gather_1": lambda v: lax.all_gather(v, "i", axis=1),
        "all_gather_tiled": lambda v: lax.all_gather(v, "i", tiled=True),
        "all_gather_tiled_1": lambda v: lax.all_gather(v, "i", axis=1, tiled=True),
        "psum_scatter": lambda v: lax.psum_scatter(v, "i", tiled=True),
        "psum_scatter_1": lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True),
        "ppermute": lambda v: lax.ppermute(v, "i", [(q, (q + 1) % P) for q in range(P)]),
        "ppermute_one_pair": lambda v: lax.ppermute(v, "i", [(0, P - 1)]),
        "all_to_all": lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True),
        "all_to_all_1_0": lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True),
        "all_to_all_untiled": lambda v: lax.all_to_all(v[:P], "i", 0, 1),
    }


# dtypes NCCL moves as they are, and those it carries as others (bool, int16, float16,
# complex)
DEVICE_DTYPES = ("float64", "float32", "int32", "uint8", "int16", "float16", "complex64",
                 "bool")


def _same_on_device_as_on_host(P, me, gpu, shards_of):
    """Every collective of ``_cases`` under pmap of device Arrays: on the device, and equal
    bit for bit to the host path's result, for every dtype of ``DEVICE_DTYPES`` in two
    processes on the emulated GPU, three of them otherwise (four processes compile every
    program four times; a real GPU compiles each through NVRTC); and its gradient
    (float64) equal to the host path's."""
    every = gpu.emulated and P <= 2
    for dt in DEVICE_DTYPES if every else ("float64", "float16", "bool"):
        shards = shards_of(np.dtype(dt))
        for name, f in _cases(P).items():
            if dt == "bool" and ("psum" in name or "pmean" in name):
                continue
            if dt == "complex64" and name in ("pmax", "pmin"):
                continue
            host = np.asarray(fnx.pmap(f, axis_name="i")(shards[me][None]))
            dev = fnx.pmap(f, axis_name="i")(fnx.device_put(shards[me][None], gpu))
            assert dev.device == gpu, (name, dt, dev.device)
            got = np.asarray(dev)
            assert got.dtype == host.dtype and got.shape == host.shape, (name, dt)
            assert np.array_equal(got, host, equal_nan=True), (name, dt, got, host)
            if dt != "float64" or name in ("pmax", "pmin"):
                continue
            # the derivative: the collectives' transposes, on the device too
            grad = fnx.pmap(fnx.grad(lambda v: fnp.sum(fnp.sin(f(v)) * (
                lax.axis_index("i") + 1.0))), axis_name="i")
            host = np.asarray(grad(shards[me][None]))
            dev = grad(fnx.device_put(shards[me][None], gpu))
            assert dev.device == gpu, ("grad", name, dev.device)
            np.testing.assert_allclose(np.asarray(dev), host, rtol=1e-12, atol=1e-12,
                                       err_msg="grad " + name)


@pytest.mark.gpu
def test_one_process_pmap_of_device_arrays_stays_on_the_device(gpu):
    """A group of one: every collective over device Arrays gives the host path's bits,
    on the device, with no round trip through the host."""
    from fnx.core.backend import get_backend
    cuda = get_backend("cuda")
    before = dict(cuda.host_fallbacks)
    rng = np.random.default_rng(0)
    with fnx.enable_x64(True):
        _same_on_device_as_on_host(1, 0, gpu, lambda dt: (
            rng.standard_normal((1, 2, 3)) * 10).astype(dt))
    assert cuda.host_fallbacks == before


@pytest.mark.gpu
def test_a_device_step_with_axis_index_is_one_graph(gpu):
    """``axis_index`` is a host value of the process; on the device it is filled by a
    kernel, not transferred, so a step that reads it is still captured as a CUDA graph."""
    def step(w, x):
        g = fnx.grad(lambda w: fnp.sum(fnp.tanh(x @ w)))(w)
        return w - 0.1 * lax.pmean(g, "i") * (lax.axis_index("i") + 1)
    f = fnx.pmap(step, axis_name="i")
    w0 = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 8, 8)
    x = np.linspace(0, 1, 32, dtype=np.float32).reshape(1, 4, 8)
    host, dev = w0, fnx.device_put(w0, gpu)
    xd = fnx.device_put(x, gpu)
    for _ in range(3):
        host, dev = f(host, x), f(dev, xd)
    np.testing.assert_allclose(np.asarray(dev), np.asarray(host), rtol=1e-5, atol=1e-6)
    graph = f.lower(dev, xd)._entry.compiled.graph
    assert graph.failure is None and graph.replays == 2, graph.failure


@pytest.mark.gpu
def test_every_nccl_call_on_a_real_gpu(gpu):
    """Every NCCL call the device collectives make (pointers, counts, datatypes, the
    stream, grouped sends and receives) on a real GPU, through an NCCL communicator of one
    rank: the lent machines have one GPU, on which NCCL refuses two ranks. Its results
    must be those of ``_Local``, the one-process communicator."""
    if gpu.emulated:
        pytest.skip("needs a real GPU and NCCL (the emulated NCCL runs under mpiexec)")
    from fnx.core.backend import get_backend
    from fnx.distributed import _nccl
    xp = get_backend("cuda").xp
    try:
        comm = _nccl._NcclComm(xp, None)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NCCL cannot start here: {type(e).__name__}: {e}")
    ops, local = _nccl.DeviceCollectives(xp, comm), _nccl.DeviceCollectives(xp, _nccl._Local(xp))
    calls = [("allreduce", ("max",)), ("allreduce", ("min",)), ("allgather", (0, False)),
             ("allgather", (1, True)), ("reduce_scatter", (1, True, "max")),
             ("alltoall", (0, 1, True)), ("ppermute", ([(0, 0)],)), ("ppermute", ([],))]
    for dt in DEVICE_DTYPES:
        x = xp.asarray((np.random.default_rng(0).standard_normal((2, 3)) * 10).astype(dt))
        for name, args in calls + ([] if dt == "bool" else [
                ("allreduce", ("sum",)), ("reduce_scatter", (0, True, "sum"))]):
            if dt == "complex64" and ("max" in args or "min" in args):
                continue
            got, want = getattr(ops, name)(x, *args), getattr(local, name)(x, *args)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, dt)
            assert bool(xp.all(got == want)), (name, dt, got, want)


@needs_mpi
@pytest.mark.gpu
def test_data_parallel_example_on_the_gpu_matches_one_process_on_the_cpu(tmp_path, gpu):
    """``examples/data_parallel.py --device gpu`` in two processes (the gradients averaged
    on the device) reaches the parameters one CPU process reaches on the whole batch."""
    example = os.path.join(ROOT, "examples", "data_parallel.py")
    one, two = tmp_path / "one.msgpack", tmp_path / "two.msgpack"
    _run([sys.executable, example, "--steps", "30", "--out", str(one)])
    env = dict(os.environ, FNX_GPU_EMULATE="1") if gpu.emulated else dict(os.environ)
    r = subprocess.run([mpiexec(), "-n", "2", sys.executable, example, "--steps", "30",
                        "--device", "gpu", "--out", str(two)],
                       capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    import fnx.serialization as S
    a, b = (fnx.tree_util.tree_leaves(S.load(str(p))) for p in (one, two))
    assert len(a) == len(b) > 0
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-5, atol=1e-6)


GPU_WORKER = r"""
import sys, warnings
import numpy as np
import fnx
import fnx.distributed as dist
import fnx.numpy as fnp
from fnx import lax
from fnx.core.backend import get_backend
sys.path.insert(0, sys.argv[2])
from test_pmap import _same_on_device_as_on_host

dist.initialize()
me, P = fnx.process_index(), fnx.process_count()
gpu = fnx.devices("gpu")[0]
cuda = get_backend("cuda")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        dist._collectives.on_device(cuda)
        nccl = True
    except NotImplementedError:
        nccl = False   # (a real GPU that both processes share: NCCL refuses)
        assert any("NCCL" in str(w.message) for w in caught), caught
assert nccl or not gpu.emulated
rng = np.random.default_rng(0)
with fnx.enable_x64(True):
    _same_on_device_as_on_host(P, me, gpu, lambda dt: (
        rng.standard_normal((P, 2 * P, 3 * P)) * 10).astype(dt))
x = fnx.device_put(np.full((1, 3), me + 1.0, np.float32), gpu)
g = fnx.pmap(fnx.grad(lambda v: fnp.sum(lax.pmean(v, "i") ** 2)), axis_name="i")(x)
# every member's loss reads every member's value through the mean: JAX's transpose of
# psum sums their cotangents, 2 * mean / P each
assert g.device == gpu and np.allclose(np.asarray(g), P + 1.0), g
# process 0's parameters, on the device they were put on
got = dist.broadcast_params({"w": fnx.device_put(np.full((2,), me + 1.0, np.float32), gpu),
                             "n": np.int32(me)})
assert got["w"].device == gpu and np.asarray(got["w"]).tolist() == [1.0, 1.0], got
assert int(got["n"]) == 0
# a data-parallel training step: on the CPU and on the GPU the same parameters; with NCCL
# the GPU's step is one CUDA graph from its second call on, its allreduce captured with
# its kernels
w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
xs = rng.standard_normal((P, 16, 64)).astype(np.float32)


def step(w, x):
    g = fnx.grad(lambda w: fnp.sum(fnp.tanh(x @ w)))(w)
    return w - 0.1 * lax.pmean(g, "i")


pstep = fnx.pmap(step, axis_name="i")
host, dev, xd = w[None], fnx.device_put(w[None], gpu), fnx.device_put(xs[me][None], gpu)
for _ in range(3):
    host, dev = pstep(host, xs[me][None]), pstep(dev, xd)
    assert dev.device == gpu
    np.testing.assert_allclose(np.asarray(dev), np.asarray(host), rtol=2e-5, atol=1e-6)
if nccl:
    graph = pstep.lower(dev, xd)._entry.compiled.graph
    assert graph is not None and graph.failure is None and graph.replays == 2, (
        graph and graph.failure)
# the parameters donated, the step inside an outer jit
dstep = fnx.jit(fnx.pmap(step, axis_name="i", donate_argnums=0))
dev = fnx.device_put(w[None], gpu)
for _ in range(3):
    dev = dstep(dev, xd)
np.testing.assert_allclose(np.asarray(dev), np.asarray(host), rtol=2e-5, atol=1e-6)
if nccl:
    assert not cuda.host_fallbacks, cuda.host_fallbacks
open(f"{sys.argv[1]}/done{me}", "w").close()
"""


@needs_mpi
@pytest.mark.gpu
@pytest.mark.parametrize("n", [2, 4])
def test_pmap_of_device_arrays_runs_its_collectives_on_the_device(tmp_path, gpu, n):
    """On a GPU, pmap's collectives are NCCL's, on the device buffers: every collective
    and dtype gives the host path's bits, a gradient through pmean is JAX's, and a
    training step is captured as one CUDA graph with its allreduce. On the emulated GPU
    (CI) NCCL's calls run over MPI; on a real one that both processes share, NCCL refuses,
    and the processes agree to keep the host path (with a warning), which must give the
    same results."""
    if n == 4 and not gpu.emulated:
        pytest.skip("four processes on one real GPU test nothing two do not")
    script = tmp_path / "worker.py"
    script.write_text(GPU_WORKER)
    env = dict(os.environ, FNX_GPU_EMULATE="1") if gpu.emulated else dict(os.environ)
    r = subprocess.run([mpiexec(), "-n", str(n), sys.executable, str(script), str(tmp_path),
                        os.path.dirname(os.path.abspath(__file__))],
                       capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("done*")) == [f"done{q}" for q in range(n)]


def test_psum_into_a_buffer_that_is_its_operand_seen_through_another_array():
    """``out`` may be another array over the operand's own buffer (a donated input jit
    hands back as the output buffer): reduced in place, as when it is the same object; an
    ``out`` that only overlaps the operand gets a copy of it read first."""
    from fnx.lax import parallel
    x = np.arange(12, dtype=np.float32)
    same = x[:]                            # another array object, the same buffer
    assert parallel._reduced(None, x, "sum", out=same) is same
    np.testing.assert_array_equal(same, np.arange(12, dtype=np.float32))
    y = np.arange(12, dtype=np.float32)
    shifted = np.empty(13, np.float32)
    shifted[1:] = y
    got = parallel._reduced(None, shifted[1:], "sum", out=shifted[:12])
    np.testing.assert_array_equal(got, y)


class _HostBuffer(np.ndarray):
    """A NumPy array that shows its address as CuPy's arrays do (``.data.ptr``)."""

    @property
    def data(self):
        return type("Pointer", (), {"ptr": self.ctypes.data})()


class _HostCuPy:
    """NumPy as the array library of ``_nccl.DeviceCollectives``: results are
    ``_HostBuffer``s, the current stream is 0."""

    def __getattr__(self, name):
        fn = getattr(np, name)
        if not callable(fn) or isinstance(fn, type):
            return fn

        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            return out.view(_HostBuffer) if isinstance(out, np.ndarray) else out
        return call

    class cuda:
        @staticmethod
        def get_current_stream():
            return type("Stream", (), {"ptr": 0})()


class _OneRankNccl:
    """CuPy's ``cupy.cuda.nccl`` for one rank, over host memory: each call moves the bytes
    its pointers, count and NCCL datatype say (so a wrong count, datatype or pointer moves
    the wrong bytes), after checking the stream and, for a reduction, the op."""

    SIZES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 7: 4, 8: 8}
    available = True

    def __init__(self):
        self.pending = []

    def get_unique_id(self):
        return b"\x01" * 128

    def groupStart(self):
        self.pending = []

    def groupEnd(self):
        sends = [(p, c, t) for kind, p, c, t, peer in self.pending if kind == "send"]
        recvs = [(p, c, t) for kind, p, c, t, peer in self.pending if kind == "recv"]
        assert len(sends) == len(recvs)
        for (s, c, t), (r, c2, t2) in zip(sends, recvs):
            assert (c, t) == (c2, t2)
            ctypes.memmove(r, s, c * self.SIZES[t])
        self.pending = []

    def NcclCommunicator(self, n, uid, rank):
        assert (n, rank) == (1, 0) and uid == self.get_unique_id()
        lib = self

        class Comm:
            def _move(self, send, recv, count, dtype, stream, op=0):
                assert stream == 0 and op in (0, 2, 3) and dtype in lib.SIZES
                ctypes.memmove(recv, send, count * lib.SIZES[dtype])

            def allReduce(self, send, recv, count, dtype, op, stream):
                self._move(send, recv, count, dtype, stream, op)

            def reduceScatter(self, send, recv, count, dtype, op, stream):
                self._move(send, recv, count, dtype, stream, op)

            def allGather(self, send, recv, count, dtype, stream):
                self._move(send, recv, count, dtype, stream)

            def send(self, buf, count, dtype, peer, stream):
                assert peer == 0 and stream == 0
                lib.pending.append(("send", buf, count, dtype, peer))

            def recv(self, buf, count, dtype, peer, stream):
                assert peer == 0 and stream == 0
                lib.pending.append(("recv", buf, count, dtype, peer))
        return Comm()


def test_the_nccl_calls_move_the_bytes_the_results_need(monkeypatch):
    """``_NcclComm``'s calls (pointers, counts, NCCL datatypes, grouped sends and
    receives) through a one-rank NCCL over host memory: every collective and dtype gives
    ``_Local``'s results, so what a real GPU's NCCL is asked for is what the layouts need.
    (On a GPU, ``test_every_nccl_call_on_a_real_gpu`` runs the same calls through NCCL.)"""
    cupy = pytest.importorskip("cupy")
    from fnx.distributed import _nccl
    monkeypatch.setattr(cupy.cuda, "nccl", _OneRankNccl(), raising=False)
    xp = _HostCuPy()
    ops = _nccl.DeviceCollectives(xp, _nccl._NcclComm(xp, None))
    local = _nccl.DeviceCollectives(xp, _nccl._Local(xp))
    calls = [("allreduce", ("max",)), ("allreduce", ("min",)), ("allgather", (0, False)),
             ("allgather", (1, True)), ("reduce_scatter", (1, True, "max")),
             ("alltoall", (0, 1, True)), ("alltoall", (1, 0, False)),
             ("ppermute", ([(0, 0)],)), ("ppermute", ([],))]
    for dt in DEVICE_DTYPES:
        x = (np.random.default_rng(0).standard_normal((3, 1, 4)) * 10).astype(dt)
        for name, args in calls + ([] if dt == "bool" else [
                ("allreduce", ("sum",)), ("reduce_scatter", (0, True, "sum"))]):
            if dt == "complex64" and ("max" in args or "min" in args):
                continue
            got = getattr(ops, name)(x.view(_HostBuffer), *args)
            want = getattr(local, name)(x.view(_HostBuffer), *args)
            assert got.dtype == want.dtype and got.shape == want.shape, (name, dt)
            assert np.array_equal(np.asarray(got), np.asarray(want)), (name, dt)
