"""A small Xception-like network (separable convolutions, residual blocks with strided
1x1 convolution shortcuts, BatchNorm) trained for a few steps on random data:
``python examples/xception.py [--steps N] [--batch-size B] [--size S]``."""
import argparse

import fnx
import fnx.numpy as fnp
import fnx.optim as optim
from fnx import nn


class Block(nn.Module):
    """relu-sepconv-bn, relu-sepconv-bn, max pool /2; shortcut: strided 1x1 conv + bn."""

    def __init__(self, channels):
        self.sep1, self.bn1 = nn.SeparableConv2d(channels, 3, padding=1), nn.BatchNorm2d()
        self.sep2, self.bn2 = nn.SeparableConv2d(channels, 3, padding=1), nn.BatchNorm2d()
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.shortcut = nn.Conv2d(channels, 1, stride=2, use_bias=False)
        self.bn_short = nn.BatchNorm2d()

    def __call__(self, x):
        h = self.bn1(self.sep1(nn.relu(x)))
        h = self.pool(self.bn2(self.sep2(nn.relu(h))))
        return h + self.bn_short(self.shortcut(x))


class MiniXception(nn.Module):
    def __init__(self, num_classes=10, widths=(32, 64, 128)):
        self.stem = nn.Sequential(nn.Conv2d(16, 3, stride=2, padding=1, use_bias=False),
                                  nn.BatchNorm2d(), nn.ReLU())
        self.blocks = [Block(w) for w in widths]
        self.head = nn.Sequential(nn.SeparableConv2d(widths[-1] * 2, 3, padding=1),
                                  nn.BatchNorm2d(), nn.ReLU(), nn.GlobalAvgPool(),
                                  nn.Linear(num_classes))

    def __call__(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--size", type=int, default=32, help="input height and width")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    key = fnx.random.PRNGKey(args.seed)
    kx, ky, kinit = fnx.random.split(key, 3)
    shape = (args.batch_size, 3, args.size, args.size)
    x = fnx.random.normal(kx, shape)
    y = fnx.random.randint(ky, (args.batch_size,), 0, 10)
    model = nn.init(MiniXception(), kinit, fnx.ShapeDtypeStruct(shape, "float32"))
    print(nn.summary(model).splitlines()[-1])
    opt = optim.adamw(1e-3, weight_decay=1e-4)
    opt_state = opt.init(nn.partition(model)[0])

    @fnx.jit
    def train_step(model, opt_state, x, y):
        params, rest = nn.partition(model)

        def loss_fn(params):
            logits, new_model = nn.apply(nn.combine(params, rest), x)
            return nn.cross_entropy(logits, y), new_model
        (loss, new_model), grads = fnx.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        params = optim.apply_updates(params, updates)
        return nn.combine(params, nn.partition(new_model)[1]), opt_state, loss

    losses = []
    for step in range(args.steps):
        model, opt_state, loss = train_step(model, opt_state, x, y)
        losses.append(float(loss))
        print(f"step {step:3d}  loss {losses[-1]:.4f}")
    out = model.eval()(x)
    assert out.shape == (args.batch_size, 10) and bool(fnp.all(fnp.isfinite(out)))
    return {"losses": losses}


if __name__ == "__main__":
    main()
