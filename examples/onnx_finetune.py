"""An ONNX model fine-tuned with fnx: ``python examples/onnx_finetune.py [--steps N]``.

1. Train a small CNN on the 8x8 digits 0-4 with fnx and export it to ONNX, its weights
   stored in the model (``fnx.onnx.export(..., weights=0)``): the "pretrained" model,
   as a model trained elsewhere would arrive.
2. Import it (``fnx.onnx.load``) up to its features, the input of its last layer.
3. Put a new 10-class head on the imported features and fine-tune everything on all ten
   digits with ``fnx.optim``.
4. Save the fine-tuned model with ``fnx.serialization`` and load it back.
5. Export the fine-tuned model to ONNX again and check that onnxruntime computes what
   fnx computes.
"""
import argparse
import os
import tempfile

import numpy as np

import fnx
import fnx.datasets
import fnx.onnx
import fnx.optim as optim
import fnx.serialization
from fnx import nn


def cnn(classes):
    return nn.Sequential(nn.Conv2d(8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32), nn.ReLU(), nn.Linear(classes))


def train(loss_of, model, steps, x, y, lr, seed):
    opt = optim.adam(lr)
    state = opt.init(model)

    @fnx.jit
    def step(model, state, xb, yb):
        loss, grads = fnx.value_and_grad(loss_of)(model, xb, yb)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    rng = np.random.default_rng(seed)
    for _ in range(steps):
        idx = rng.integers(0, len(x), 64)
        model, state, loss = step(model, state, x[idx], y[idx])
    return model, float(loss)


class FineTuned(nn.Module):
    """The imported feature extractor (an OnnxModule) and a new head."""

    def __init__(self, features, head):
        self.features = features
        self.head = head

    def __call__(self, x):
        return self.head(self.features(x))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    (x_train, y_train), (x_test, y_test) = fnx.datasets.digits_split()
    key = fnx.random.PRNGKey(args.seed)

    # 1. a pretrained model, exported with its weights
    few = y_train < 5
    base = nn.init(cnn(5), key, fnx.ShapeDtypeStruct((1, 1, 8, 8), "float32"))
    base, loss = train(lambda m, x, y: nn.cross_entropy(m(x), y), base, args.steps,
                       x_train[few], y_train[few], 3e-3, args.seed)
    print(f"pretrained on digits 0-4: loss {loss:.3f}")
    batch = fnx.ShapeDtypeStruct((64, 1, 8, 8), "float32")   # the model's input: batches of 64
    pretrained = fnx.onnx.export(lambda m, x: m(x), base, batch, weights=0, name="digits_cnn")

    # 2. its features: the value the last layer's matmul reads
    last = [n for n in pretrained.graph.node if n.op_type in ("Gemm", "MatMul", "Einsum")][-1]
    features = fnx.onnx.load(pretrained, outputs=[last.input[0]])
    print(f"imported {len(features.params())} params, e.g. {sorted(features.params())[:2]}")

    # 3. a new head, everything fine-tuned on all ten digits
    head = nn.init(nn.Linear(10), fnx.random.fold_in(key, 1),
                   fnx.ShapeDtypeStruct((1, 32), "float32"))
    model = FineTuned(features, head)
    model, loss = train(lambda m, x, y: nn.cross_entropy(m(x), y), model, args.steps,
                        x_train, y_train, 3e-3, args.seed + 1)
    logits = np.concatenate([np.asarray(model(x_test[i:i + 64]))
                             for i in range(0, len(x_test) - 63, 64)])
    acc = float(np.mean(logits.argmax(1) == y_test[:len(logits)]))
    print(f"fine-tuned on all digits: loss {loss:.3f}, test accuracy {acc:.2%}")

    # 4. a checkpoint, and the model back from it
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "finetuned.msgpack")
        fnx.serialization.save(path, model)
        restored = fnx.serialization.load(path, model)
    xb = x_test[:64]
    np.testing.assert_array_equal(np.asarray(restored(xb)), np.asarray(model(xb)))

    # 5. ONNX again, checked by onnxruntime
    exported = fnx.onnx.export(lambda m, x: m(x), restored, batch, weights=0,
                               name="digits_cnn_finetuned")
    import onnxruntime
    sess = onnxruntime.InferenceSession(exported.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: xb})
    diff = float(np.max(np.abs(got - np.asarray(model(xb)))))
    print(f"onnxruntime vs fnx on the exported fine-tuned model: max difference {diff:.2e}")
    assert diff < 1e-4, diff
    return {"test_accuracy": acc, "max_difference": diff,
            "params": sorted(model.features.params())}


if __name__ == "__main__":
    main()
