"""A short tour of fnx: ``python -m fnx``.

Traces a small function to IR, runs it eagerly and under ``jit``, and prints
both timings.
"""
import timeit

import numpy as np

import fnx
import fnx.numpy as fnp


def layer(w, b, x):
    """One dense layer with a tanh-approximated GELU."""
    h = x @ w + b
    return 0.5 * h * (1 + fnp.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))


def main():
    rng = np.random.default_rng(0)
    w = fnp.asarray(rng.standard_normal((64, 64)), dtype="float32")
    b = fnp.zeros(64)
    x = fnp.asarray(rng.standard_normal((32, 64)), dtype="float32")

    print("fnx", fnx.__version__, "- a tour\n")
    print("The IR of `layer` for w:f32[64,64], b:f32[64], x:f32[32,64]:")
    print(fnx.make_ir(layer)(w, b, x))

    print("\nShapes from placeholders, no data:",
          fnx.eval_shape(layer, fnx.ShapeDtypeStruct((64, 64), "float32"),
                         fnx.ShapeDtypeStruct((64,), "float32"),
                         fnx.ShapeDtypeStruct((1000, 64), "float32")))

    fast = fnx.jit(layer)
    eager_out, jit_out = layer(w, b, x), fast(w, b, x)
    print("\njit and eager agree:", bool(fnp.allclose(eager_out, jit_out, rtol=1e-5, atol=1e-6)))
    print("\nThe NumPy code jit generated:")
    print(fast.lower(w, b, x).source)

    n = 2000
    t_eager = min(timeit.repeat(lambda: layer(w, b, x), number=n, repeat=3)) / n
    t_jit = min(timeit.repeat(lambda: fast(w, b, x), number=n, repeat=3)) / n
    print(f"eager: {t_eager * 1e6:8.1f} us per call")
    print(f"jit:   {t_jit * 1e6:8.1f} us per call  ({t_eager / t_jit:.1f}x faster)")


if __name__ == "__main__":
    main()
