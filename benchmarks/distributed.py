"""Data-parallel throughput over processes (issue 22): the MLP training step of
``mlp_step.py`` (784-512-512-10, float32) under ``fnx.pmap`` with the gradients averaged by
``lax.pmean``, in 2 processes of 1 thread each against 1 process of 1 thread on the same
global batch (128, 256, 512 and 1024 samples); and ``lax.psum`` of a 16 MB float32 buffer under
``pmap`` against a raw mpi4py ``Allreduce`` of the same buffer into a reused one.

Each batch also times the 2-process step without the ``pmean`` (each process applying its
own gradients): the most 2 processes can gain on that batch with free communication. At
a global batch of 128, half a batch costs more than half the time (the weight gradients'
products get shorter, the update of the 2.7 MB of parameters stays whole), which bounds
the speedup below the goal before any byte is exchanged; the table shows by how much.

With JAX importable (in this interpreter, or the one ``--jax-python`` names), the same
run also times JAX's own multi-process ``pmap`` of the same step (``jax.distributed`` with
its gloo CPU collectives, 1 thread per process) against its single-process one.

    python benchmarks/distributed.py [--steps N] [--repeats R] [--rounds K] [--jax-python PATH]

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
GLOBAL_BATCHES = (128, 256, 512, 1024)
SIZES = (784, 512, 512, 10)


def _mlp(jnp, grad, logsumexp, pmean):
    """The benchmark's program, written once against JAX's API (``jnp`` is ``fnx.numpy`` or
    ``jax.numpy``): ``(rng, params, loss, step)``, the parameters drawn from seed 0."""
    import numpy as np
    rng = np.random.default_rng(0)
    params = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:]), 1):
        params[f"w{i}"] = (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        params[f"b{i}"] = np.full(b, 0.01, np.float32)

    def loss(p, x, y):
        h = jnp.maximum(x @ p["w1"] + p["b1"], 0)
        h = jnp.maximum(h @ p["w2"] + p["b2"], 0)
        logits = h @ p["w3"] + p["b3"]
        lp = logits - logsumexp(logits, axis=1, keepdims=True)
        return -jnp.mean(jnp.take_along_axis(lp, y[:, None], axis=1))

    def step(p, x, y):
        g = pmean(grad(loss)(p, x, y), "batch")
        return {k: p[k] - 0.1 * g[k] for k in p}
    return rng, params, loss, step


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
    rng, params, loss, step = _mlp(fnp, fnx.grad, fnx.nn.logsumexp, lax.pmean)

    def own_step(p, x, y):               # no exchange: what compute alone allows
        g = fnx.grad(loss)(p, x, y)
        return {k: p[k] - 0.1 * g[k] for k in p}

    def timed(fn, n):
        ts = []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            ts.append((time.perf_counter() - t0) / n)
        return float(np.median(ts))

    def steps_per_call(fn, xs, ys):
        state = {"p": {k: v[None] for k, v in params.items()}}

        def one_step():
            state["p"] = fn(state["p"], xs, ys)
        for _ in range(3):
            one_step()
        return timed(one_step, steps)

    pstep = fnx.pmap(step, axis_name="batch")
    pown = fnx.pmap(own_step, axis_name="batch")
    result = {"processes": P, "step_s": {}, "own_step_s": {}}
    for batch in GLOBAL_BATCHES:
        x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
        y = rng.integers(0, 10, batch).astype(np.int32)
        local = batch // P
        xs, ys = x[me * local:(me + 1) * local][None], y[me * local:(me + 1) * local][None]
        result["step_s"][batch] = steps_per_call(pstep, xs, ys)
        if P > 1:
            result["own_step_s"][batch] = steps_per_call(pown, xs, ys)
    if P > 1:
        buf = np.random.default_rng(me).standard_normal(4 << 20).astype(np.float32)  # 16 MB
        psum = fnx.pmap(lambda v: lax.psum(v, "batch"), axis_name="batch")
        held = fnp.asarray(buf[None])     # an fnx array, as gradients in a step are
        psum(held)
        from mpi4py import MPI
        comm, recv = MPI.COMM_WORLD, np.empty_like(buf)
        fns = {"psum_s": lambda: psum(held),
               "allreduce_s": lambda: comm.Allreduce(buf, recv, MPI.SUM)}
        ts = {k: [] for k in fns}
        for _ in range(repeats):          # interleaved, so both see the same machine
            for k, fn in fns.items():
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(5):
                    fn()
                ts[k].append((time.perf_counter() - t0) / 5)
        result.update({k: float(np.median(v)) for k, v in ts.items()})
    if me == 0:
        with open(out, "w") as f:
            json.dump(result, f)


def jax_worker(steps, repeats, out, port):
    """The same step in JAX: ``jax.pmap`` with ``lax.pmean`` over the processes that
    ``mpiexec`` started (rank and size from its environment), joined by
    ``jax.distributed.initialize`` with gloo collectives; one XLA thread each."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen"
                               "=false intra_op_parallelism_threads=1").strip()
    import time

    import numpy as np

    import jax
    import jax.numpy as jnp
    me = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0)))
    P = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1)))
    os.sched_setaffinity(0, {me % os.cpu_count()})
    if P > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=P,
                                   process_id=me)
    rng, params, _, step = _mlp(jnp, jax.grad, jax.nn.logsumexp, jax.lax.pmean)
    pstep = jax.pmap(step, axis_name="batch")
    result = {"processes": P, "step_s": {}, "version": jax.__version__}
    for batch in GLOBAL_BATCHES:
        x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
        y = rng.integers(0, 10, batch).astype(np.int32)
        local = batch // P
        xs, ys = x[me * local:(me + 1) * local][None], y[me * local:(me + 1) * local][None]
        state = {"p": {k: v[None] for k, v in params.items()}}
        for _ in range(3):
            state["p"] = pstep(state["p"], xs, ys)
        jax.block_until_ready(state["p"])
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                state["p"] = pstep(state["p"], xs, ys)
            jax.block_until_ready(state["p"])
            ts.append((time.perf_counter() - t0) / steps)
        result["step_s"][batch] = float(np.median(ts))
    if me == 0:
        with open(out, "w") as f:
            json.dump(result, f)


def _median_of_rounds(rounds):
    """One result from several launches' results: the median of every timing."""
    import statistics
    first = rounds[0]
    out = {}
    for k, v in first.items():
        if isinstance(v, dict):
            out[k] = {b: statistics.median(r[k][b] for r in rounds) for b in v}
        elif k.endswith("_s"):
            out[k] = statistics.median(r[k] for r in rounds)
        else:
            out[k] = v
    return out


def _has_jax(python):
    try:
        return subprocess.run([python, "-c", "import jax"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    p.add_argument("--rounds", type=int, default=3,
                   help="launches of each kind, alternating (default 3)")
    p.add_argument("--jax-python", default=sys.executable,
                   help="a Python with JAX to time jax.pmap in (default: this one)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--jax-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.steps, args.repeats, args.worker)
    if args.jax_worker:
        return jax_worker(args.steps, args.repeats, args.jax_worker, args.port)
    mpiexec = _mpiexec()
    if mpiexec is None:
        raise SystemExit("needs mpiexec and mpi4py: pip install fnx[distributed]")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")

    def run(n, python, role, *extra):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        try:
            done = subprocess.run([mpiexec, "-n", str(n), python, os.path.abspath(__file__),
                                   role, out, "--steps", str(args.steps), "--repeats",
                                   str(args.repeats), *extra], env=env, timeout=1200,
                                  capture_output=True, text=True)   # (gloo's chatter)
            if done.returncode:
                raise SystemExit(f"{role[2:]} with {n} process(es) failed:\n"
                                 f"{done.stdout}{done.stderr}")
            with open(out) as f:
                return json.load(f)
        finally:
            os.remove(out)
    with_jax = _has_jax(args.jax_python)
    rounds = {"fnx": {1: [], 2: []}, "jax": {1: [], 2: []}}
    for _ in range(args.rounds):         # launches alternate, so a noisy stretch of the
        for n in (1, 2):                 # machine falls on every kind of run alike
            rounds["fnx"][n].append(run(n, sys.executable, "--worker"))
            if with_jax:
                rounds["jax"][n].append(run(n, args.jax_python, "--jax-worker", "--port",
                                            str(_free_port())))
    results = {n: _median_of_rounds(r) for n, r in rounds["fnx"].items()}
    jax_results = {n: _median_of_rounds(r) for n, r in rounds["jax"].items()} if with_jax \
        else {}
    one, two = results[1], results[2]
    print(f"medians over {args.rounds} rounds of alternating launches")
    print(f"fnx data-parallel benchmark: {os.cpu_count()} CPUs, 1 thread per process")
    print(f"{'MLP step (784-512-512-10)':34s} {'1 process':>10s} {'2 (pmean)':>10s} "
          f"{'speedup':>8s} {'2, no exchange':>15s} {'bound':>6s}")
    speedups = {}
    for batch in GLOBAL_BATCHES:
        b = str(batch)
        t1, t2, t0 = one["step_s"][b], two["step_s"][b], two["own_step_s"][b]
        speedups[batch] = t1 / t2
        print(f"{'global batch ' + b + ', median ms':34s} {t1 * 1e3:10.3f} {t2 * 1e3:10.3f} "
              f"{t1 / t2:7.2f}x {t0 * 1e3:15.3f} {t1 / t0:5.2f}x")
    if with_jax:
        j1, j2 = jax_results[1]["step_s"], jax_results[2]["step_s"]
        print(f"JAX {jax_results[1]['version']} jax.pmap over processes (gloo), same step:")
        for batch in GLOBAL_BATCHES:
            b = str(batch)
            print(f"{'global batch ' + b + ', median ms':34s} {j1[b] * 1e3:10.3f} "
                  f"{j2[b] * 1e3:10.3f} {j1[b] / j2[b]:7.2f}x   fnx 2 processes: "
                  f"{j2[b] / two['step_s'][b]:.1f}x faster than JAX's")
    ratio = two["psum_s"] / two["allreduce_s"]
    print(f"{'psum of 16 MB float32 under pmap, 2 processes':58s} {two['psum_s'] * 1e3:10.3f}")
    print(f"{'raw mpi4py Allreduce of the same buffer, 2 processes':58s} "
          f"{two['allreduce_s'] * 1e3:10.3f}")
    print("goals:")
    for batch, s in speedups.items():
        print(f"  [{'PASS' if s >= 1.7 else 'MISS'}] 2 processes at least 1.7x one, global "
              f"batch {batch}: {s:.2f}x")
    print(f"  [{'PASS' if ratio <= 1.1 else 'MISS'}] psum within 1.1x of raw Allreduce: "
          f"{ratio:.2f}x")
    return {"speedups": speedups, "psum_ratio": ratio, "jax": jax_results,
            **{f"n{k}": v for k, v in results.items()}}


if __name__ == "__main__":
    main()
