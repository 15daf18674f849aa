"""fnx.distributed: the process world, MPI collectives on NumPy buffers, parameters,
data sharding and checkpoints across processes (issue 22).

The single-process tests always run. With mpi4py and an ``mpiexec`` (``pip install
fnx[distributed]``), the same functions run in 2 and 4 processes started by ``mpiexec`` as
subprocesses (4 oversubscribes a 2-core machine), each process checking every collective
against NumPy on all processes' inputs; a raising process must end the job with its
message, not hang it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fnx
import fnx.distributed as dist
from fnx.core import world

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeComm:
    """Enough of a communicator for the world's bookkeeping (no collectives)."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size


@pytest.fixture
def fake_world():
    before = world.communicator()
    yield lambda rank, size: world.set_world(FakeComm(rank, size))
    world.set_world(before)


# --- the world ------------------------------------------------------------------------------
def test_single_process_world():
    dist.initialize()
    dist.initialize()  # idempotent
    assert dist.is_initialized()
    assert (fnx.process_index(), fnx.process_count(), fnx.process_indices()) == (0, 1, [0])
    assert fnx.device_count() == fnx.local_device_count() == 1
    assert fnx.local_devices(process_index=0) == fnx.local_devices()
    with pytest.raises(ValueError, match="no process 1"):
        fnx.local_devices(process_index=1)


def test_initialize_takes_jax_arguments():
    """``jax.distributed.initialize(...)`` ports as it is: what MPI decides is checked,
    what it makes unnecessary is named in a warning, an unknown keyword is a TypeError."""
    with pytest.warns(UserWarning, match="coordinator_address, initialization_timeout not "
                                         "used: MPI's launcher"):
        dist.initialize("127.0.0.1:1234", num_processes=1, process_id=0,
                        initialization_timeout=300)
    with pytest.raises(ValueError, match="process_id=3, but the MPI world says 0"):
        dist.initialize(process_id=3)
    with pytest.raises(TypeError, match="initialisation_timeout"):
        dist.initialize(initialisation_timeout=3)
    with pytest.raises(ValueError, match="MPI only"):
        dist.initialize(cluster_detection_method="slurm")
    dist.shutdown()
    assert not dist.is_initialized() and fnx.process_count() == 1
    with pytest.raises(RuntimeError, match="start them with mpiexec -n 2"):
        dist.initialize(num_processes=2)
    dist.initialize()
    assert dist.is_initialized()


def test_local_device_ids_pick_a_gpu_or_are_named_unused():
    """JAX's ``local_device_ids`` choose this process's GPU; without a real GPU there is
    none to choose, and the warning says so."""
    from fnx.kernels import cuda as K
    dist.shutdown()
    try:
        if K.device_available():
            import cupy
            with pytest.raises(ValueError, match="must name GPUs of this node"):
                dist.initialize(local_device_ids=[cupy.cuda.runtime.getDeviceCount()])
            dist.initialize(local_device_ids=[0])
            assert cupy.cuda.Device().id == 0
        else:
            with pytest.warns(UserWarning, match="local_device_ids not used: no GPU here"):
                dist.initialize(local_device_ids=[0])
    finally:
        dist.shutdown()
        dist.initialize()


def test_multihost_utils_in_one_process():
    from fnx.experimental import multihost_utils as mu
    tree = {"w": fnx.numpy.ones((2, 3)), "n": np.arange(4)}
    out = mu.broadcast_one_to_all(tree)
    assert np.array_equal(out["n"], tree["n"]) and isinstance(out["w"], fnx.Array)
    assert mu.broadcast_one_to_all(tree, is_source=True)["n"].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="exactly one process must pass is_source=True"):
        mu.broadcast_one_to_all(tree, is_source=False)
    assert mu.process_allgather(tree)["n"].shape == (1, 4)
    mu.sync_global_devices("step")
    mu.assert_equal(tree)


def test_devices_and_the_environment_report_read_the_world(fake_world):
    fake_world(2, 3)
    assert fnx.devices()[0].process_index == fnx.devices()[0].host_id == 2
    text = fnx.print_environment_info(return_string=True)
    assert "process_count: 3" in text and "cpu-3, 1 local devices" in text


def test_api_reads_the_world(fake_world):
    fake_world(2, 3)
    assert (fnx.process_index(), fnx.process_count(), fnx.process_indices()) == (2, 3, [0, 1, 2])
    assert (fnx.host_id(), fnx.host_count()) == (2, 3)
    assert (fnx.device_count(), fnx.local_device_count()) == (3, 1)
    assert fnx.local_devices(process_index=2) == fnx.local_devices()
    with pytest.raises(ValueError, match="listed only in that process"):
        fnx.local_devices(process_index=0)
    with pytest.raises(ValueError, match="no process 3"):
        fnx.local_devices(host_id=3)


def test_set_world_rejects_non_communicators():
    with pytest.raises(TypeError, match="mpi4py communicator"):
        world.set_world(object())
    with pytest.raises(ValueError, match="rank 3 of 2"):
        world.set_world(FakeComm(3, 2))
    assert world.communicator() is None and world.process_count() == 1


def test_core_world_imports_nothing_of_fnx():
    import ast
    tree = ast.parse(open(os.path.join(ROOT, "fnx", "core", "world.py")).read())
    imported = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [getattr(n, "module", None) for n in imported] == ["__future__"]


# --- collectives in one process: JAX's shapes over an axis of size 1 -------------------------
def test_single_process_collectives():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for op in dist.REDUCTIONS:
        r = dist.allreduce(x, op)
        assert r is not x and np.array_equal(r, x)
    assert dist.allreduce(x, inplace=True) is x
    out = np.empty_like(x)
    assert dist.allreduce(x, "max", out=out) is out and np.array_equal(out, x)
    assert dist.allgather(x, 1).shape == (2, 1, 3, 4)
    assert dist.allgather(x, -1).shape == (2, 3, 4, 1)
    assert dist.allgather(x, 1, tiled=True).shape == (2, 3, 4)
    assert dist.allgather(np.float32(3)).shape == (1,)
    assert np.array_equal(dist.reduce_scatter(x[:, :1], 1), x[:, 0])
    assert np.array_equal(dist.reduce_scatter(x, 2, tiled=True), x)
    assert np.array_equal(dist.alltoall(x[:1], 0, 2), np.moveaxis(x[:1], 0, 2))
    assert np.array_equal(dist.alltoall(x, 1, 0, tiled=True), x)
    assert np.array_equal(dist.ppermute(x, [(0, 0)]), x)
    assert not dist.ppermute(x, []).any()
    assert np.array_equal(dist.broadcast(x), x)
    dist.barrier()


def test_collective_errors_say_what_to_do():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"op must be one of \('sum', 'max', 'min'\)"):
        dist.allreduce(x, "prod")
    with pytest.raises(ValueError, match="writable C-contiguous"):
        dist.allreduce(x.T, inplace=True)
    with pytest.raises(ValueError, match=r"out must be .* shape \(3, 4\) and dtype float32"):
        dist.allreduce(x, out=np.empty((3, 4)))
    with pytest.raises(ValueError, match=r"x.shape\[0\] = 3 .*equal to the 1 process.*tiled=True"):
        dist.reduce_scatter(x, 0)
    with pytest.raises(ValueError, match=r"split_axis=1\] = 4"):
        dist.alltoall(x, 1, 0)
    with pytest.raises(ValueError, match="axis=3 is out of range"):
        dist.allgather(x, 3)
    with pytest.raises(ValueError, match="0-d"):
        dist.allgather(np.float32(1), tiled=True)
    with pytest.raises(ValueError, match="outside 0..0"):
        dist.ppermute(x, [(0, 1)])
    with pytest.raises(TypeError, match="pairs"):
        dist.ppermute(x, [0, 1])


# --- around the step, in one process ---------------------------------------------------------
def test_trees_in_one_process(tmp_path):
    tree = {"w": fnx.numpy.ones((2, 3)), "b": np.arange(3.0), "n": 4}
    assert dist.broadcast_params(tree) is tree
    got = dist.process_allgather(tree)
    assert got["w"].shape == (1, 2, 3) and isinstance(got["w"], np.ndarray)
    assert got["n"].shape == (1,)
    assert dist.process_allgather(tree, tiled=True)["b"].shape == (3,)
    with pytest.raises(TypeError, match="leaf 0 .* is a str"):
        dist.process_allgather({"a": "text"})
    path = tmp_path / "ckpt.fnx"
    dist.save(path, tree)
    back = dist.load(path, tree)
    assert np.array_equal(back["w"], tree["w"]) and back["n"] == 4


def test_shard_indices_partition_each_epoch():
    n = 23
    for count in (1, 2, 3, 4):
        for seed in (None, 7):
            parts = [dist.shard_indices(n, seed=seed, epoch=1, process_index=p,
                                        process_count=count) for p in range(count)]
            together = np.concatenate(parts)
            assert sorted(together) == list(range(n))          # disjoint, all used
            order = dist.shard_indices(n, seed=seed, epoch=1, process_index=0,
                                       process_count=1)
            # batch t of every process together is batch t of the whole order
            b = 2
            for t in range(n // (b * count)):
                step = np.concatenate([p[t * b:(t + 1) * b] for p in parts])
                assert sorted(step) == sorted(order[t * b * count:(t + 1) * b * count])
            even = [dist.shard_indices(n, seed=seed, even=True, process_index=p,
                                       process_count=count) for p in range(count)]
            assert {len(e) for e in even} == {n // count}
    a = dist.shard_indices(n, seed=3, epoch=0, process_index=0, process_count=1)
    assert np.array_equal(a, dist.shard_indices(n, seed=3, epoch=0, process_index=0,
                                                process_count=1))
    assert not np.array_equal(a, dist.shard_indices(n, seed=3, epoch=1, process_index=0,
                                                    process_count=1))


def test_shard_slices_every_array_alike(fake_world):
    x, y = np.arange(10) * 10, np.arange(10)
    fake_world(1, 3)
    xs, ys = dist.shard(x, y, seed=0)
    assert np.array_equal(xs, ys * 10) and len(ys) == 3
    assert np.array_equal(ys, dist.shard_indices(10, seed=0))
    with pytest.raises(ValueError, match="different lengths"):
        dist.shard(x, y[:5])


def test_initialize_without_mpi4py_under_a_launcher_says_what_to_install(tmp_path):
    blocker = tmp_path / "mpi4py"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('no mpi4py here')\n")
    code = ("import fnx.distributed as d\n"
            "try:\n    d.initialize()\nexcept ImportError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]), PMI_SIZE="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert "pip install fnx[distributed]" in out.stdout, out.stderr
    assert "PMI_SIZE=2" in out.stdout


# --- several processes under mpiexec ---------------------------------------------------------
from mpi_testing import mpiexec as _mpiexec, needs_mpi  # noqa: E402

WORKER = r'''
import sys
import numpy as np
import fnx
import fnx.distributed as dist

dist.initialize()
me, P = fnx.process_index(), fnx.process_count()
assert P == int(sys.argv[1]), (P, sys.argv)
dist.initialize(num_processes=P, process_id=me)    # JAX's arguments, as MPI has them
assert fnx.device_count() == P and fnx.local_device_count() == 1
assert fnx.process_indices() == list(range(P))


def inputs(shape, dtype, case):
    """Every process's input of a case, computed alike on every process."""
    out = []
    for q in range(P):
        rng = np.random.default_rng([case, q])
        if np.dtype(dtype) == np.bool_:
            out.append(rng.random(shape) < 0.5)
        elif np.dtype(dtype).kind == "c":
            out.append((rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype))
        else:
            out.append((rng.normal(size=shape) * 8).astype(dtype))
    return out


def same(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape,
                                                                  got.dtype, want.dtype)
    if got.dtype.kind == "f" and got.dtype.itemsize <= 2:
        ok = np.allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-1)
    elif got.dtype.kind in "fc":
        ok = np.allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        ok = np.array_equal(got, want)
    assert ok, (what, me, got, want)


case = 0
# allreduce
for dtype in (np.float32, np.float64, np.int32, np.float16, np.complex64, np.bool_):
    for op in ("sum", "max", "min"):
        if (dtype == np.bool_ and op == "sum") or (np.dtype(dtype).kind == "c" and op != "sum"):
            continue
        case += 1
        xs = inputs((3, 5), dtype, case)
        want = {"sum": lambda a: a.sum(0, dtype=a.dtype), "max": lambda a: a.max(0),
                "min": lambda a: a.min(0)}[op](np.stack(xs))
        same(dist.allreduce(xs[me], op), want, f"allreduce {op} {dtype}")
        y = xs[me].copy()
        assert dist.allreduce(y, op, inplace=True) is y
        same(y, want, f"allreduce inplace {op} {dtype}")
        z = np.empty_like(xs[me])
        assert dist.allreduce(xs[me], op, out=z) is z
        same(z, want, f"allreduce out= {op} {dtype}")
        w = xs[me].copy()               # out= the operand itself: reduced in place
        assert dist.allreduce(w, op, out=w) is w
        same(w, want, f"allreduce out=x {op} {dtype}")
# large buffers go through the machine's shared memory in 512 KB chunks (fnx.distributed._shm;
# from 8 KB for two processes):
# several chunks and a ragged last one, every op, every way of passing the output; every
# process must receive the same bits
for shape, dtype in [((300, 1001), np.float32), (((3 << 17) + 5,), np.float64), ((3000,), np.float32),
                     ((70000,), np.int32), ((40000,), np.complex64), ((70000,), np.bool_),
                     ((50000,), np.float16)]:
    for op in ("sum", "max", "min"):
        if (dtype == np.bool_ and op == "sum") or (np.dtype(dtype).kind == "c" and op != "sum"):
            continue
        case += 1
        xs = inputs(shape, dtype, case)
        want = {"sum": lambda a: a.sum(0, dtype=a.dtype), "max": lambda a: a.max(0),
                "min": lambda a: a.min(0)}[op](np.stack(xs))
        got = dist.allreduce(xs[me], op)
        same(got, want, f"large allreduce {op} {shape} {dtype}")
        everyone = dist.allgather(got)
        assert all(np.array_equal(everyone[0], e) for e in everyone), ("bits differ", op, dtype)
        y = xs[me].copy()
        assert dist.allreduce(y, op, inplace=True) is y
        assert np.array_equal(y, got), ("inplace", op, dtype)
        z = np.empty_like(xs[me])
        assert dist.allreduce(xs[me], op, out=z) is z and np.array_equal(z, got)
        w = xs[me].copy()
        assert dist.allreduce(w, op, out=w) is w and np.array_equal(w, got)
from mpi4py import MPI
# a communicator of one process: the sum is the value itself
case += 1
xs = inputs((100000,), np.float32, case)
same(dist.allreduce(xs[me], comm=MPI.COMM_SELF), xs[me], "large allreduce over COMM_SELF")
# a sub-communicator (the even and the odd processes) gets its own window
if P > 2:
    half = MPI.COMM_WORLD.Split(me % 2, me)
    case += 1
    xs = inputs((100000,), np.float32, case)
    mates = [q for q in range(P) if q % 2 == me % 2]
    same(dist.allreduce(xs[me], comm=half), np.stack([xs[q] for q in mates]).sum(0),
         "large allreduce over a sub-communicator")
    half.Free()
    # MPI hands a freed communicator's handle out again: the new one (other members) must
    # not find the old one's window
    other = MPI.COMM_WORLD.Split(int(me < P // 2), me)
    mates = [q for q in range(P) if (q < P // 2) == (me < P // 2)]
    same(dist.allreduce(xs[me], comm=other), np.stack([xs[q] for q in mates]).sum(0),
         "large allreduce over a communicator made after one was freed")
    other.Free()
case += 1
xs = inputs((4, 6), np.float32, case)
same(dist.allreduce(xs[me].T), np.stack(xs).sum(0).T, "allreduce of a transposed view")
same(dist.allreduce(np.float32(me)), np.float32(sum(range(P))), "allreduce 0-d")

# allgather
for shape, axis, tiled in [((3, 4), 0, False), ((3, 4), 1, False), ((3, 4), 2, False),
                           ((3, 4), -1, False), ((2, 3, 4), 1, False), ((3, 4), 0, True),
                           ((3, 4), 1, True), ((2, 3, 4), -2, True), ((), 0, False),
                           ((0, 3), 1, True)]:
    for dtype in (np.float32, np.int64, np.float16, np.bool_):
        case += 1
        xs = inputs(shape, dtype, case)
        want = np.concatenate(xs, axis) if tiled else np.stack(xs, axis)
        same(dist.allgather(xs[me], axis, tiled), want, f"allgather {shape} {axis} {tiled}")

# reduce_scatter (sum, JAX's psum_scatter)
for shape, axis, tiled in [((P, 3), 0, False), ((3, P), 1, False), ((2, P, 3), 1, False),
                           ((2 * P, 3), 0, True), ((2, 3 * P), -1, True),
                           ((2, 2 * P, 3), 1, True)]:
    for dtype in (np.float32, np.int32, np.float16):
        case += 1
        xs = inputs(shape, dtype, case)
        total = np.stack(xs).sum(0, dtype=xs[0].dtype if dtype != np.float16 else np.float32)
        m = shape[axis] // P
        want = np.take(total, np.arange(me * m, (me + 1) * m), axis=axis)
        if not tiled:
            want = want.squeeze(axis)
        same(dist.reduce_scatter(xs[me], axis, tiled), want.astype(dtype),
             f"reduce_scatter {shape} {axis} {tiled} {dtype}")
case += 1
xs = inputs((P, 3), np.float32, case)
same(dist.reduce_scatter(xs[me], 0, op="max"), np.stack(xs).max(0)[me], "reduce_scatter max")

# alltoall (JAX's all_to_all)
for shape, split, concat, tiled in [((P, 3), 0, 0, False), ((P, 3), 0, 1, False),
                                    ((3, P), 1, 0, False), ((2, P, 3), 1, 2, False),
                                    ((2, 3, P), 2, 0, False), ((2, P, 3), 1, 1, False),
                                    ((2 * P, 3), 0, 1, True), ((2, 3 * P), 1, 0, True),
                                    ((2, 2 * P, 3), 1, 2, True), ((2, P, 3), 1, 1, True),
                                    ((2, 3, 2 * P), 2, 0, True)]:
    for dtype in (np.float32, np.int16):
        case += 1
        xs = inputs(shape, dtype, case)
        if tiled:
            want = np.concatenate([np.split(xs[q], P, split)[me] for q in range(P)], concat)
        else:
            want = np.stack([np.take(xs[q], me, split) for q in range(P)], concat)
        same(dist.alltoall(xs[me], split, concat, tiled), want,
             f"alltoall {shape} {split} {concat} {tiled}")

# ppermute: processes no pair sends to get zeros
for perm in ([(q, (q + 1) % P) for q in range(P)], [(0, P - 1)], [(1, 1), (0, 2 % P)], []):
    if len({d for _, d in perm}) < len(perm):
        continue
    case += 1
    xs = inputs((2, 3), np.float32, case)
    src = [s for s, d in perm if d == me]
    want = xs[src[0]] if src else np.zeros_like(xs[me])
    same(dist.ppermute(xs[me].T, perm), want.T.copy(), f"ppermute {perm}")
same(dist.broadcast(np.full(3, me, np.int32), root=P - 1), np.full(3, P - 1, np.int32),
     "broadcast")
dist.barrier()

# parameters, results, data, checkpoints
tree = {"w": fnx.numpy.full((2, 3), float(me)), "b": np.full(4, me, np.int64), "n": me,
        "s": (np.float32(me + 0.5), [])}
got = dist.broadcast_params(tree)
assert isinstance(got["w"], fnx.Array) and np.array_equal(got["w"], np.zeros((2, 3)))
assert isinstance(got["b"], np.ndarray) and not got["b"].any()
assert got["n"] == 0 and type(got["n"]) is int and got["s"][0] == np.float32(0.5)
g = dist.process_allgather(tree)
assert np.array_equal(g["b"], np.repeat(np.arange(P), 4).reshape(P, 4))
assert np.array_equal(g["n"], np.arange(P)) and g["w"].shape == (P, 2, 3)
assert dist.process_allgather(tree, tiled=True)["b"].shape == (4 * P,)
try:
    dist.broadcast_params({"w": np.zeros(me + 1)})
except ValueError as e:
    assert "different trees" in str(e)
else:
    raise AssertionError("broadcast_params of different shapes passed")

n = 4 * P + 3
mine = dist.shard(np.arange(n), seed=5, epoch=2)
assert np.array_equal(mine, dist.shard_indices(n, seed=5, epoch=2))
lengths = dist.process_allgather(np.int64(len(mine)))
assert lengths.sum() == n
evens = dist.process_allgather(dist.shard(np.arange(n), seed=5, epoch=2, even=True))
assert evens.shape == (P, n // P) and len(set(evens.ravel().tolist())) == P * (n // P)

# JAX's multihost_utils
from fnx.experimental import multihost_utils as mu
assert mu.broadcast_one_to_all(np.full(3, me)).tolist() == [0, 0, 0]
assert mu.broadcast_one_to_all(np.full(3, me), is_source=me == P - 1).tolist() == [P - 1] * 3
mu.sync_global_devices("before checkpoints")
try:
    mu.sync_global_devices(f"barrier of process {me}")
except RuntimeError as e:
    assert "differently named barriers" in str(e)
else:
    raise AssertionError("barriers of different names passed")
mu.assert_equal({"a": np.arange(3)})
try:
    mu.assert_equal({"a": np.arange(3) * me}, "params drifted")
except AssertionError as e:
    assert str(e).startswith("params drifted") and "leaves [0] differ" in str(e), e
else:
    raise AssertionError("assert_equal of different values passed")
assert mu.process_allgather(np.float32(me)).tolist() == list(range(P))

path = sys.argv[2]
dist.save(path, got)
back = dist.load(path, got)
assert np.array_equal(back["w"], np.zeros((2, 3))) and back["n"] == 0
try:
    dist.save(path + ".missing/dir/ckpt", got)
except Exception as e:  # noqa: BLE001
    assert me == 0 or "process 0 failed to write" in str(e), e
else:
    raise AssertionError("saving into a missing directory passed")
print(f"rank {me} of {P}: ok", flush=True)
'''


def _run(tmp_path, n, script, *args, timeout=60):
    path = tmp_path / "worker.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    return subprocess.run([_mpiexec(), "-n", str(n), sys.executable, str(path), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives_under_mpiexec(tmp_path, n):
    out = _run(tmp_path, n, WORKER, str(n), str(tmp_path / "ckpt.fnx"))
    assert out.returncode == 0, out.stdout + out.stderr
    for r in range(n):
        assert f"rank {r} of {n}: ok" in out.stdout, out.stdout + out.stderr


@needs_mpi
def test_a_raising_process_ends_the_job_with_its_message(tmp_path):
    script = '''
    import fnx, fnx.distributed as dist
    dist.initialize()
    if fnx.process_index() == 1:
        raise RuntimeError("process one cannot go on")
    dist.barrier()   # process 0 would wait here forever
    '''
    out = _run(tmp_path, 2, script, timeout=60)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "rank 1: RuntimeError: process one cannot go on" in text, text
