"""fnx on a GPU: the goals of the GPU backend, measured in one run, with the device's name.

    python benchmarks/gpu.py [--quick] [--repeats N]
    FNX_GPU_EMULATE=1 python benchmarks/gpu.py --emulate   # smoke run on the emulated GPU

Rows (each checked against the CPU result before it is timed):

* ``fused gelu*w+layernorm``: ``gelu(x) * w + layernorm(x)`` over (8192, 4096) float32
  under ``fnx.jit``; its bandwidth (bytes in + out / time) against the device's copy
  bandwidth (``y[...] = x`` of the same size in CuPy), measured in the same run. Goal:
  at least 80%;
* ``mlp b128`` / ``mlp b4096``: the jitted training step of ``mlp_step.py``
  (784-512-512-10) at batch 128 and 4096, against JAX's jit on the GPU (when JAX with
  CUDA is installed) and PyTorch eager on the GPU (when installed). Goal: no slower
  than JAX, faster than PyTorch;
* ``cnn``: the jitted training step of ``cnn_step.py``, against the same (both steps
  also without CUDA-graph replay, ``FNX_GPU_GRAPHS=0``'s program, and with float32
  products on TF32 tensor cores -- JAX's default precision on recent GPUs, fnx's under
  ``fnx.default_matmul_precision("tensorfloat32")`` -- in the note);
* with ``--sweep``, the fused row again under other block sizes, with fast math, and
  layernorm alone, and the same function under JAX's jit and PyTorch eager: what would
  close the bandwidth gap;
* ``eager add``: one eager ``fnp.add`` of two (1024,) float32 arrays on the GPU against
  CuPy's own ``cupy.add``. Goal: within 1.5x.

Times are medians of ``--repeats`` timed calls after warm-up, each call synchronized
with the device. ``--emulate`` runs every row at tiny sizes on the emulated GPU
(``FNX_GPU_EMULATE=1``), to check the script and the programs, not to time anything.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import numpy as np  # noqa: E402


def _sync(xp):
    if getattr(xp, "emulated", False):
        return
    xp.cuda.Device().synchronize()


def _median_ns(fn, xp, repeats, warmup=3):
    for _ in range(warmup):
        fn()
    _sync(xp)
    times = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        _sync(xp)
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times)


def _gelu_layernorm(fnp, nn):
    def f(x, w, g, b):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        ln = (x - mu) / fnp.sqrt(var + 1e-5) * g + b
        return nn.gelu(x) * w + ln
    return f


def _layernorm_only(fnp, nn):
    def f(x, w, g, b):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / fnp.sqrt(var + 1e-5) * g + b + w
    return f


def _jax_gpu():
    try:
        import jax
        return jax if jax.devices("gpu") else None
    except Exception:
        return None


def _torch_gpu():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--sweep", action="store_true",
                    help="also the fused row under other block sizes, fast math, and "
                         "layernorm alone (what would close the bandwidth gap)")
    ap.add_argument("--emulate", action="store_true",
                    help="tiny sizes on the emulated GPU (a smoke run, no timing goals)")
    ap.add_argument("--only", choices=("bandwidth", "steps", "eager"), default=None,
                    help="one group of rows (and its goals)")
    args = ap.parse_args(argv)
    if args.emulate:
        os.environ.setdefault("FNX_GPU_EMULATE", "1")
    import fnx
    import fnx.numpy as fnp
    from fnx.backends import get_backend
    try:
        gpu = fnx.devices("gpu")[0]
    except RuntimeError as e:
        print(f"no GPU: {e}")
        return 0
    xp = get_backend("cuda").xp
    repeats = args.repeats or (5 if args.quick or args.emulate else 31)
    goals = []
    print(f"fnx GPU benchmarks on {gpu!r}: {gpu.device_kind}"
          + (" (emulated: times mean nothing)" if gpu.emulated else ""), flush=True)

    def row(name, t, note):
        print(f"  {name:<52} {t / 1e3:>10.1f} us   {note}", flush=True)
    rng = np.random.default_rng(0)
    put = lambda v: fnx.device_put(v, gpu)  # noqa: E731

    # -- fused elementwise + layernorm, against the copy bandwidth
    R, C = (64, 256) if args.emulate else (8192, 4096)
    x = rng.standard_normal((R, C)).astype(np.float32)
    w, g, b = (rng.standard_normal(C).astype(np.float32) for _ in range(3))
    want = np.asarray(fnx.jit(_gelu_layernorm(fnp, fnx.nn))(x, w, g, b))
    args_gpu = [put(v) for v in (x, w, g, b)]
    src = xp.asarray(x)
    dst = xp.empty_like(src)

    def copy():
        dst[...] = src
    t_copy = _median_ns(copy, xp, repeats)
    nbytes = x.nbytes * 2 + 3 * w.nbytes
    copy_bw = 2 * x.nbytes / t_copy

    def fused(label, fn=_gelu_layernorm, tol=1e-4, reference=want):
        f = fnx.jit(fn(fnp, fnx.nn))  # a fresh jit: planned and compiled anew
        got = np.asarray(f(*args_gpu))
        np.testing.assert_allclose(got, reference, rtol=tol, atol=tol)
        t = _median_ns(lambda: f(*args_gpu), xp, repeats)
        bw = nbytes / t
        kernels = len(f.lower(*args_gpu).kernels)
        row(f"fused gelu*w+layernorm {R}x{C}{label}", t,
            f"{bw:.1f} GB/s, copy {copy_bw:.1f} GB/s ({100 * bw / copy_bw:.0f}%), "
            f"{kernels} kernel(s)")
        return bw

    def section(fn, group):
        if args.only not in (None, group):
            return
        try:
            fn()
        except Exception:  # one failing row must not lose the rest of a device run
            import traceback
            traceback.print_exc()
            sys.stdout.flush()

    def gelu_rows():
        bw = fused("")
        goals.append(("fused gelu*w+layernorm >= 80% of copy bandwidth", bw >= 0.8 * copy_bw))
    section(gelu_rows, "bandwidth")
    if args.sweep:
        from fnx.kernels import fusion
        default_threads = fusion._block_threads

        def threads(T):
            def sweep():
                fusion._block_threads = lambda R: T
                try:
                    fused(f", {T} threads/row")
                finally:
                    fusion._block_threads = default_threads
            return sweep
        for T in (256, 1024):
            section(threads(T), "bandwidth")

        def fast_math():
            os.environ["FNX_GPU_FAST_MATH"] = "1"
            try:
                fused(", fast math", tol=2e-3)
            finally:
                del os.environ["FNX_GPU_FAST_MATH"]
        section(fast_math, "bandwidth")
        ln_only = np.asarray(fnx.jit(_layernorm_only(fnp, fnx.nn))(x, w, g, b))
        section(lambda: fused(", layernorm alone", _layernorm_only, reference=ln_only), "bandwidth")

    jax, torch = _jax_gpu(), _torch_gpu()

    def others():
        if jax is not None:
            import jax.numpy as jnp
            jf = jax.jit(_gelu_layernorm(jnp, jax.nn))
            ja = [jax.device_put(v, jax.devices("gpu")[0]) for v in (x, w, g, b)]
            np.testing.assert_allclose(np.asarray(jf(*ja)), want, rtol=1e-4, atol=1e-4)
            t = _median_ns(lambda: jax.block_until_ready(jf(*ja)), xp, repeats)
            row("  the same under JAX jit", t,
                f"{nbytes / t:.1f} GB/s ({100 * nbytes / t / copy_bw:.0f}% of copy)")
        if torch is not None:
            ta = [torch.tensor(v, device="cuda") for v in (x, w, g, b)]

            def tf(x, w, g, b):
                ln = torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, eps=1e-5)
                return torch.nn.functional.gelu(x, approximate="tanh") * w + ln
            np.testing.assert_allclose(tf(*ta).cpu().numpy(), want, rtol=1e-4, atol=1e-4)
            t = _median_ns(lambda: tf(*ta), xp, repeats)
            row("  the same under PyTorch eager", t,
                f"{nbytes / t:.1f} GB/s ({100 * nbytes / t / copy_bw:.0f}% of copy)")
    if not args.emulate:
        section(others, "bandwidth")

    # -- training steps
    import mlp_step
    import cnn_step
    import _harness as H

    def step_row(mod, batch):
        p, xb, yb = mod.make_data()
        if batch is not None:
            xb = rng.standard_normal((batch,) + xb.shape[1:]).astype(np.float32)
            yb = rng.integers(0, 10, batch).astype(np.int32)
        if args.emulate:
            xb, yb = xb[:8], yb[:8]
        name = f"{mod.__name__.replace('_step', '')} b{len(xb)}"
        step = H.jit_train_step(fnx, fnp, mod.LOGITS["jit"], mod.NAMES, mod.LR)
        cpu_p, cpu_loss = step(p, xb, yb)
        gp, gx, gy = put(p), put(xb), put(yb)
        gpu_p, gpu_loss = step(gp, gx, gy)
        np.testing.assert_allclose(float(gpu_loss), float(cpu_loss), rtol=1e-4)
        t_fnx = _median_ns(lambda: step(gp, gx, gy), xp, repeats)
        note = []
        backend = get_backend("cuda")  # the same step without CUDA-graph replay
        graphs, backend.graphs = backend.graphs, False
        try:
            plain = H.jit_train_step(fnx, fnp, mod.LOGITS["jit"], mod.NAMES, mod.LR)
            t_plain = _median_ns(lambda: plain(gp, gx, gy), xp, repeats)
        finally:
            backend.graphs = graphs
        note.append(f"without graphs {t_plain / 1e3:.0f} us")
        # at JAX's own default precision on this GPU: float32 products on TF32 tensor cores
        with fnx.default_matmul_precision("tensorfloat32"):
            tf32 = H.jit_train_step(fnx, fnp, mod.LOGITS["jit"], mod.NAMES, mod.LR)
            tf32_loss = float(tf32(gp, gx, gy)[1])
            t_tf32 = _median_ns(lambda: tf32(gp, gx, gy), xp, repeats)
        np.testing.assert_allclose(tf32_loss, float(cpu_loss), rtol=1e-2)
        note.append(f"tf32 {t_tf32 / 1e3:.0f} us")
        if jax is not None:
            import jax.numpy as jnp
            jstep = H.jit_train_step(jax, jnp, mod.LOGITS["jit"], mod.NAMES, mod.LR)
            jd = jax.devices("gpu")[0]
            jp, jx, jy = (jax.device_put(v, jd) for v in (p, xb, yb))
            t_jax = _median_ns(lambda: jax.block_until_ready(jstep(jp, jx, jy)), xp,
                               repeats)
            # JAX in full float32 products, the precision of fnx's default
            with jax.default_matmul_precision("float32"):
                jstep32 = H.jit_train_step(jax, jnp, mod.LOGITS["jit"], mod.NAMES, mod.LR)
                t_jax32 = _median_ns(lambda: jax.block_until_ready(jstep32(jp, jx, jy)), xp,
                                     repeats)
            note.append(f"jax {t_jax / 1e3:.0f} us (float32 {t_jax32 / 1e3:.0f} us)")
            goals.append((f"{name}: fnx no slower than JAX jit (both float32)",
                          t_fnx <= t_jax32 * 1.05))
            goals.append((f"{name}: fnx no slower than JAX jit (both TF32, JAX's default)",
                          t_tf32 <= t_jax * 1.05))
        if torch is not None:
            tstep = H.torch_train_step(torch, mod.LOGITS["torch"], mod.NAMES, mod.LR)
            tp = {k: torch.tensor(v, device="cuda", requires_grad=True)
                  for k, v in p.items()}
            tx = torch.tensor(xb, device="cuda")
            ty = torch.tensor(yb, device="cuda", dtype=torch.int64)
            t_torch = _median_ns(lambda: tstep(tp, tx, ty), xp, repeats)
            note.append(f"torch {t_torch / 1e3:.0f} us")
            goals.append((f"{name}: fnx faster than PyTorch eager", t_fnx < t_torch))
        row(name, t_fnx, ", ".join(note))

    for mod, batches in ((mlp_step, (128, 4096)), (cnn_step, (None,))):
        for batch in batches:
            section(lambda: step_row(mod, batch), "steps")

    # -- eager dispatch
    def eager():
        a, c = put(np.ones(1024, np.float32)), put(np.ones(1024, np.float32))
        t_eager = _median_ns(lambda: fnp.add(a, c), xp, repeats * 10)
        ca, cc = xp.asarray(np.ones(1024, np.float32)), xp.asarray(np.ones(1024, np.float32))
        t_cupy = _median_ns(lambda: xp.add(ca, cc), xp, repeats * 10)
        row("eager add (1024,)", t_eager, f"cupy {t_cupy / 1e3:.1f} us "
            f"({t_eager / t_cupy:.2f}x)")
        goals.append(("eager dispatch within 1.5x of CuPy", t_eager <= 1.5 * t_cupy))
    section(eager, "eager")

    if not gpu.emulated:
        for what, ok in goals:
            print(f"  goal: {what}: {'PASS' if ok else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
