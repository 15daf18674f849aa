"""Data-parallel training of the digits CNN over processes:

    python examples/data_parallel.py                 # one process
    mpiexec -n 2 python examples/data_parallel.py    # two processes, the same result

Every step takes the same global batch of 64 digits; process ``p`` of ``P`` computes the
gradient on its ``64 / P`` of them, ``lax.pmean`` averages the gradients over the
processes inside ``fnx.pmap``, and every process applies the same update, so the
parameters stay identical everywhere and equal, to float32 rounding, what one process
computes on the whole batch. ``--out PATH`` saves the final parameters (process 0
writes). ``--device gpu`` trains on each process's GPU, the gradients averaged by NCCL
(``FNX_GPU_EMULATE=1`` runs it on the emulated GPU).
"""
import argparse

import numpy as np

import fnx
import fnx.datasets
import fnx.distributed as dist
import fnx.optim as optim
from fnx import lax, nn

GLOBAL_BATCH = 64


def model_def():
    return nn.Sequential(nn.Conv2d(8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32), nn.ReLU(), nn.Linear(10))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    args = p.parse_args(argv)

    dist.initialize()
    P, rank = fnx.process_count(), fnx.process_index()
    if GLOBAL_BATCH % P:
        raise SystemExit(f"the global batch of {GLOBAL_BATCH} does not split over {P} "
                         "processes")
    local = GLOBAL_BATCH // P
    (x_train, y_train), (x_test, y_test) = fnx.datasets.digits_split()

    model = nn.init(model_def(), fnx.random.PRNGKey(args.seed),
                    fnx.ShapeDtypeStruct((1, 1, 8, 8), "float32"))
    model = dist.broadcast_params(model)          # process 0's initial values everywhere
    opt = optim.sgd(0.05, momentum=0.9)
    state = opt.init(model)

    def step(model, state, x, y):
        loss, grads = fnx.value_and_grad(lambda m: nn.cross_entropy(m(x), y))(model)
        grads = lax.pmean(grads, "batch")          # the mean gradient of the global batch
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, lax.pmean(loss, "batch")

    # every argument carries a leading axis of the process's one device
    pstep = fnx.pmap(step, axis_name="batch")
    device = fnx.devices(args.device)[0]
    rep = fnx.device_put(fnx.tree_util.tree_map(lambda v: np.asarray(v)[None],
                                                (model, state)), device)
    rng = np.random.default_rng(args.seed)        # the same batches on every process
    for i in range(args.steps):
        idx = rng.integers(0, len(x_train), GLOBAL_BATCH)[rank * local:(rank + 1) * local]
        batch = fnx.device_put((x_train[idx][None], y_train[idx][None]), device)
        *rep, loss = pstep(*rep, *batch)
        if rank == 0 and (i % 50 == 0 or i == args.steps - 1):
            print(f"step {i:4d}  loss {float(loss[0]):.4f}")
    cpu = fnx.devices("cpu")[0]
    model = fnx.tree_util.tree_map(lambda v: fnx.device_put(v[0], cpu), rep[0])
    acc = float(np.mean(np.asarray(model(x_test)).argmax(1) == y_test))
    if rank == 0:
        print(f"{P} process(es): test accuracy {acc:.2%}")
    if args.out:
        dist.save(args.out, model)
    return {"test_accuracy": acc, "model": model}


if __name__ == "__main__":
    main()
