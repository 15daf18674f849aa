"""``python -m fnx``: a short tour of tracing and ``jit``, then a small CNN trained on
the 8x8 digits with a jitted train step, checked (>= 97% test accuracy), saved to a
checkpoint, reloaded into a fresh model and checked again.

    python -m fnx [--epochs N] [--seed S] [--checkpoint PATH] [--quick] [--no-tour]
"""
import argparse
import os
import tempfile
import time
import timeit

import numpy as np
from tqdm import tqdm

import fnx
import fnx.datasets
import fnx.numpy as fnp
import fnx.optim as optim
from fnx import nn
from fnx.serialization import load_states, save_states


def tour():
    """Trace a dense layer to IR, run it eagerly and under jit, compare timings."""
    def layer(w, b, x):
        return fnp.tanh(x @ w + b)
    rng = np.random.default_rng(0)
    w, b, x = (fnp.asarray(rng.standard_normal(s), dtype="float32")
               for s in [(64, 64), (64,), (32, 64)])
    print("fnx", fnx.__version__, "- the IR of a dense layer:")
    print(fnx.make_ir(layer)(w, b, x))
    fast = fnx.jit(layer)
    print("jit and eager agree:", bool(fnp.allclose(layer(w, b, x), fast(w, b, x), rtol=1e-5)))
    t_eager = min(timeit.repeat(lambda: layer(w, b, x), number=500, repeat=3)) / 500
    t_jit = min(timeit.repeat(lambda: fast(w, b, x), number=500, repeat=3)) / 500
    print(f"eager: {t_eager * 1e6:8.1f} us per call")
    print(f"jit:   {t_jit * 1e6:8.1f} us per call  ({t_eager / t_jit:.1f}x faster)\n")


def make_model():
    return nn.Sequential(
        nn.Conv2d(16, 3, padding=1), nn.BatchNorm2d(), nn.ReLU(),
        nn.Conv2d(32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(10))


def make_train_step(opt):
    def train_step(model, opt_state, batch, key):
        x, y = batch
        params, rest = nn.partition(model)

        def loss_fn(p):
            logits, new_model = nn.apply(nn.combine(p, rest), x, key=key)
            return nn.cross_entropy(logits, y), (new_model, logits)
        (loss, (new_model, logits)), grads = fnx.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optim.apply_updates(params, updates)
        _, rest = nn.partition(new_model)          # the updated BatchNorm statistics
        return (nn.combine(params, rest), opt_state,
                {"loss": loss, "accuracy": nn.accuracy(logits, y)})
    return fnx.jit(train_step, donate_argnums=(0, 1))


_forward = fnx.jit(lambda model, x: model(x))


def predict(model, x, batch=512):
    """Eval-mode logits, in batches."""
    model = model.eval()
    return np.concatenate([np.asarray(_forward(model, fnp.asarray(x[i:i + batch])))
                           for i in range(0, len(x), batch)])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m fnx", description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", help="where to save (default: a temporary directory)")
    p.add_argument("--quick", action="store_true", help="1 epoch, no accuracy bar")
    p.add_argument("--no-tour", action="store_true", help="skip the tracing/jit tour")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error(f"--epochs must be at least 1, got {args.epochs}")
    epochs = 1 if args.quick else args.epochs
    if not args.no_tour:
        tour()

    (x_train, y_train), (x_test, y_test) = fnx.datasets.digits_split()
    key = fnx.random.PRNGKey(args.seed)
    init_key, key = fnx.random.split(key)
    model = nn.init(make_model(), init_key, fnx.ShapeDtypeStruct((1, 1, 8, 8), "float32"))
    print(nn.summary(model))

    steps_per_epoch = len(x_train) // args.batch_size          # full batches only: one trace
    schedule = optim.cosine_decay_schedule(args.lr, epochs * steps_per_epoch)
    opt = optim.adam(schedule)
    opt_state = opt.init(nn.partition(model)[0])
    train_step = make_train_step(opt)

    rng = np.random.default_rng(args.seed)
    epoch_times = []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        order = rng.permutation(len(x_train))
        bar = tqdm(range(steps_per_epoch), desc=f"epoch {epoch + 1}/{epochs}", leave=False)
        for i in bar:
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            batch = (fnp.asarray(x_train[idx]), fnp.asarray(y_train[idx]))
            key, sub = fnx.random.split(key)
            model, opt_state, metrics = train_step(model, opt_state, batch, sub)
            if i % 5 == 0:
                bar.set_postfix(loss=f"{float(metrics['loss']):.3f}")
        epoch_times.append(time.perf_counter() - t0)
        logits = predict(model, x_test)
        acc = float(np.mean(logits.argmax(1) == y_test))
        tqdm.write(f"epoch {epoch + 1}: loss {float(metrics['loss']):.4f}, "
                   f"test accuracy {acc:.2%}, {epoch_times[-1]:.2f} s")
    test_acc = acc

    # checkpoint round trip: save, load into a freshly initialized model, compare
    with tempfile.TemporaryDirectory() as tmp:
        path = args.checkpoint or os.path.join(tmp, "digits_cnn.fnx")
        save_states(path, model, aux_states={"epoch": epochs, "opt_state": opt_state})
        fresh = nn.init(make_model(), fnx.random.PRNGKey(args.seed + 1),
                        fnx.ShapeDtypeStruct((1, 1, 8, 8), "float32"))
        restored, aux = load_states(path, fresh)
        reloaded_logits = predict(restored, x_test)
    identical = bool(np.array_equal(logits, reloaded_logits))
    assert identical, "the reloaded model predicts differently"
    assert int(aux["epoch"]) == epochs

    # the first epoch includes tracing and compiling the step
    per_epoch = float(np.mean(epoch_times[1:] if len(epoch_times) > 1 else epoch_times))
    print(f"digits CNN: {epochs} epochs, {per_epoch:.2f} s/epoch "
          f"(first {epoch_times[0]:.2f} s, with tracing), test accuracy {test_acc:.2%}, "
          f"checkpoint reload identical: {identical}")
    if not args.quick:
        assert test_acc >= 0.97, f"test accuracy {test_acc:.2%} is below 97%"
    return {"test_accuracy": test_acc, "epoch_times": epoch_times, "epochs": epochs,
            "reload_identical": identical, "checkpoint": args.checkpoint,
            "loss": float(metrics["loss"])}


if __name__ == "__main__":
    main()
