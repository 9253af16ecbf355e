"""Benchmark: SignCodeTransformer.transform vs a plain no-grad forward pass.

Prints one table: for each net and layer selection, the best-of-N time of a
plain ``torch.no_grad()`` forward over X in batches (numpy -> tensor ->
module, outputs discarded) and of ``SignCodeTransformer.transform`` on the
same net with the same batch size, and their ratio (target: <= 1.15).

    python benchmarks/bench_sign_codes.py [--n-samples 10000] [--repeats 5]
        [--threads 1] [--device cpu]
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse

import numpy as np
import torch
from _timing import best_of  # benchmarks/_timing.py, beside this script
from sklearn.utils import gen_batches

from sksign.nn.architectures.modules import MLP, SmallCNN
from sksign.transformers import SignCodeTransformer


def plain_forward(module, X, batch_size, device):
    module.eval()
    with torch.no_grad():
        for rows in gen_batches(X.shape[0], batch_size):
            module(torch.from_numpy(X[rows]).to(device))
    if device.type == "cuda":
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=10_000)
    parser.add_argument("--cnn-samples", type=int, default=5_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    cases = []
    X = rng.standard_normal((args.n_samples, 784)).astype(np.float32)
    mlp = MLP(784, 10, (1024, 1024, 1024), activation="relu").to(device)
    cases += [("MLP 784-1024x3 relu", mlp, X, "last"), ("", mlp, X, "all")]
    htaf = MLP(784, 10, (1024, 1024, 1024), activation="htaf").to(device)
    cases += [("MLP 784-1024x3 htaf", htaf, X, "all")]
    Xc = rng.standard_normal((args.cnn_samples, 784)).astype(np.float32)
    cnn = SmallCNN(
        784,
        10,
        (1, 28, 28),
        conv_channels=(16, 32),
        hidden_layer_sizes=(128,),
        activation="relu",
    ).to(device)
    cases += [("SmallCNN 16-32 conv, 128 dense", cnn, Xc, "all")]

    rows = []
    for name, module, data, layers in cases:
        tr = SignCodeTransformer(
            module, layers=layers, batch_size=args.batch_size, device=device
        ).fit(data[:2])
        net = tr.estimator_  # the same weights the transformer reads
        t_plain, t_codes = best_of(
            [
                lambda net=net, data=data: plain_forward(
                    net, data, args.batch_size, device
                ),
                lambda tr=tr, data=data: tr.transform(data),
            ],
            args.repeats,
        )
        rows.append((name, len(data), layers, tr.n_bits_, t_plain, t_codes))

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"device {device}, batch_size {args.batch_size}, best of {args.repeats}"
    )
    print(
        "| net | rows | layers | bits | plain forward wall / CPU (s) "
        "| transform wall / CPU (s) | ratio wall | ratio CPU |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, n, layers, bits, (wp, cp), (wc, cc) in rows:
        print(
            f"| {name} | {n} | {layers} | {bits} | {wp:.3f} / {cp:.3f} "
            f"| {wc:.3f} / {cc:.3f} | {wc / wp:.2f}x | {cc / cp:.2f}x |"
        )


if __name__ == "__main__":
    main()
