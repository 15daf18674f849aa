"""Data-parallel throughput over processes (issue 22): the MLP training step of
``mlp_step.py`` (784-512-512-10, float32, global batch 128) under ``fnx.pmap`` with the
gradients averaged by ``lax.pmean``, in 2 processes of 1 thread each against 1 process
of 1 thread on the same global batch; and ``lax.psum`` of a 16 MB float32 buffer under
``pmap`` against a raw mpi4py ``Allreduce`` of the same buffer into a reused one.

    python benchmarks/distributed.py [--steps N] [--repeats R]

It starts ``mpiexec -n 1`` and ``-n 2`` itself (mpi4py and an ``mpiexec``: ``pip install
fnx[distributed]``), each process pinned to one CPU with one compute thread; medians over
the repeats. Goals: 2 processes at least 1.7x the steps per second of 1; psum within 1.1x
of the raw Allreduce.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GLOBAL_BATCH = 128
SIZES = (784, 512, 512, 10)


def worker(steps, repeats, out):
    import time

    import numpy as np

    import fnx
    import fnx.distributed as dist
    import fnx.numpy as fnp
    from fnx import lax

    dist.initialize()
    me, P = fnx.process_index(), fnx.process_count()
    os.sched_setaffinity(0, {me % os.cpu_count()})
    rng = np.random.default_rng(0)
    params = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        params[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        params[f"b{i}"] = np.full(b, 0.01, np.float32)
    x = rng.standard_normal((GLOBAL_BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, 10, GLOBAL_BATCH).astype(np.int32)
    local = GLOBAL_BATCH // P
    xs, ys = x[me * local:(me + 1) * local][None], y[me * local:(me + 1) * local][None]

    def loss(p, x, y):
        h = fnp.maximum(x @ p["w1"] + p["b1"], 0)
        h = fnp.maximum(h @ p["w2"] + p["b2"], 0)
        logits = h @ p["w3"] + p["b3"]
        lp = logits - fnx.nn.logsumexp(logits, axis=1, keepdims=True)
        return -fnp.mean(fnp.take_along_axis(lp, y[:, None], axis=1))

    def step(p, x, y):
        g = lax.pmean(fnx.grad(loss)(p, x, y), "batch")
        return {k: p[k] - 0.1 * g[k] for k in p}

    pstep = fnx.pmap(step, axis_name="batch")
    rep = {k: v[None] for k, v in params.items()}
    for _ in range(3):
        rep = pstep(rep, xs, ys)

    def timed(fn, n):
        ts = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            ts.append((time.perf_counter() - t0) / n)
        return float(np.median(ts))

    state = {"p": rep}

    def one_step():
        state["p"] = pstep(state["p"], xs, ys)
    result = {"step_s": timed(one_step, steps), "processes": P}
    if P > 1:
        buf = np.random.default_rng(me).standard_normal(4 << 20).astype(np.float32)  # 16 MB
        psum = fnx.pmap(lambda v: lax.psum(v, "batch"), axis_name="batch")
        held = fnp.asarray(buf[None])     # an fnx array, as gradients in a step are
        psum(held)
        result["psum_s"] = timed(lambda: psum(held), 5)
        from mpi4py import MPI
        comm, recv = MPI.COMM_WORLD, np.empty_like(buf)
        result["allreduce_s"] = timed(lambda: comm.Allreduce(buf, recv, MPI.SUM), 5)
    if me == 0:
        with open(out, "w") as f:
            json.dump(result, f)


def _mpiexec():
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(beside):
        return beside
    import shutil
    return shutil.which("mpiexec")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.steps, args.repeats, args.worker)
    mpiexec = _mpiexec()
    if mpiexec is None:
        raise SystemExit("needs mpiexec and mpi4py: pip install fnx[distributed]")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    results = {}
    for n in (1, 2):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        subprocess.run([mpiexec, "-n", str(n), sys.executable, os.path.abspath(__file__),
                        "--worker", out, "--steps", str(args.steps), "--repeats",
                        str(args.repeats)], check=True, env=env, timeout=1200)
        with open(out) as f:
            results[n] = json.load(f)
        os.remove(out)
    one, two = results[1], results[2]
    speedup = one["step_s"] / two["step_s"]
    ratio = two["psum_s"] / two["allreduce_s"]
    print(f"fnx data-parallel benchmark: {os.cpu_count()} CPUs, 1 thread per process")
    print(f"{'workload':58s} {'median ms':>10s}")
    print(f"{'MLP step, global batch 128, 1 process':58s} {one['step_s'] * 1e3:10.3f}")
    print(f"{'MLP step, global batch 128, 2 processes (pmap + pmean)':58s} "
          f"{two['step_s'] * 1e3:10.3f}")
    print(f"{'psum of 16 MB float32 under pmap, 2 processes':58s} {two['psum_s'] * 1e3:10.3f}")
    print(f"{'raw mpi4py Allreduce of the same buffer, 2 processes':58s} "
          f"{two['allreduce_s'] * 1e3:10.3f}")
    print("goals:")
    print(f"  [{'PASS' if speedup >= 1.7 else 'MISS'}] 2 processes at least 1.7x one: "
          f"{speedup:.2f}x")
    print(f"  [{'PASS' if ratio <= 1.1 else 'MISS'}] psum within 1.1x of raw Allreduce: "
          f"{ratio:.2f}x")
    return {"speedup": speedup, "psum_ratio": ratio, **{f"n{k}": v for k, v in results.items()}}


if __name__ == "__main__":
    main()
