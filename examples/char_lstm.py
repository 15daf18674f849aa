"""A character-level LSTM language model on ``examples/data/tiny.txt``: trains on random
windows of the text, then samples a line with ``fnx.random.categorical``:
``python examples/char_lstm.py [--steps N] [--seed S]``."""
import argparse
import os

import numpy as np

import fnx
import fnx.numpy as fnp
import fnx.optim as optim
from fnx import nn

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tiny.txt")


class CharLM(nn.Module):
    def __init__(self, vocab, embed=32, hidden=128):
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(hidden, batch_first=True)
        self.out = nn.Linear(vocab)

    def __call__(self, tokens, state=None):
        h, state = self.lstm(self.embed(tokens), state)
        return self.out(h), state


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=48)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-len", type=int, default=80)
    args = p.parse_args(argv)

    text = open(TEXT, encoding="utf-8").read()
    chars = sorted(set(text))
    data = np.array([chars.index(c) for c in text], np.int32)
    key = fnx.random.PRNGKey(args.seed)
    key, kinit = fnx.random.split(key)
    model = nn.init(CharLM(len(chars)), kinit,
                    fnx.ShapeDtypeStruct((1, args.seq_len), "int32"))
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adam(3e-3))
    opt_state = opt.init(model)

    @fnx.jit
    def train_step(model, opt_state, batch):
        def loss_fn(m):
            logits, _ = m(batch[:, :-1])
            return nn.cross_entropy(logits, batch[:, 1:])
        loss, grads = fnx.value_and_grad(loss_fn)(model)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    rng = np.random.default_rng(args.seed)
    for step in range(args.steps):
        starts = rng.integers(0, len(data) - args.seq_len - 1, args.batch_size)
        batch = np.stack([data[s:s + args.seq_len + 1] for s in starts])
        model, opt_state, loss = train_step(model, opt_state, batch)
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {float(loss):.4f}")

    @fnx.jit
    def sample_step(model, token, state, key, temperature=0.8):
        logits, state = model(token[None, None], state)
        return fnx.random.categorical(key, logits[0, -1] / temperature), state

    token, state, out = fnp.asarray(chars.index("T")), None, ["T"]
    _, state = model(token[None, None])          # the LSTM state's structure
    state = fnx.tree_util.tree_map(fnp.zeros_like, state)
    for _ in range(args.sample_len):
        key, sub = fnx.random.split(key)
        token, state = sample_step(model, token, state, sub)
        out.append(chars[int(token)])
        if out[-1] == "\n":
            break
    line = "".join(out).rstrip("\n")
    print("sample:", line)
    return {"loss": float(loss), "sample": line}


if __name__ == "__main__":
    main()
