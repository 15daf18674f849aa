"""An MLP on the 8x8 digits: ``python examples/mlp.py [--steps N] [--seed S]``."""
import argparse

import numpy as np

import fnx
import fnx.datasets
import fnx.optim as optim
from fnx import nn


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    (x_train, y_train), (x_test, y_test) = fnx.datasets.digits_split()
    x_train, x_test = x_train.reshape(len(x_train), -1), x_test.reshape(len(x_test), -1)
    model = nn.Sequential(nn.Linear(128), nn.ReLU(), nn.Linear(64), nn.ReLU(), nn.Linear(10))
    model = nn.init(model, fnx.random.PRNGKey(args.seed), fnx.ShapeDtypeStruct((1, 64), "float32"))
    opt = optim.sgd(optim.cosine_decay_schedule(0.1, args.steps), momentum=0.9)
    opt_state = opt.init(model)

    @fnx.jit
    def train_step(model, opt_state, x, y):
        loss, grads = fnx.value_and_grad(lambda m: nn.cross_entropy(m(x), y))(model)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    rng = np.random.default_rng(args.seed)
    for step in range(args.steps):
        idx = rng.integers(0, len(x_train), args.batch_size)
        model, opt_state, loss = train_step(model, opt_state, x_train[idx], y_train[idx])
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {float(loss):.4f}")
    acc = float(np.mean(np.asarray(model(x_test)).argmax(1) == y_test))
    print(f"test accuracy {acc:.2%}")
    return {"loss": float(loss), "test_accuracy": acc}


if __name__ == "__main__":
    main()
