"""One fitted SignCodeTransformer read by several threads at once.

A model server or a thread pool calls ``transform`` on one fitted
transformer from several threads: each call gets the codes of its own rows,
as alone, and the net's modes are as before once all calls are done.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import threading

import numpy as np
import pytest
import torch
from sklearn.neural_network import MLPClassifier
from torch import nn

from sksign.transformers import SignCodeTransformer

N_THREADS, N_CALLS = 3, 8


def _mlp(X):
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return MLPClassifier((24, 16), max_iter=30, random_state=0).fit(X, y)


def _torch_in_train_mode(X):
    torch.manual_seed(0)
    # left in train mode: a pass in train mode would drop units at random
    return nn.Sequential(
        nn.Linear(X.shape[1], 24),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(24, 16),
        nn.ReLU(),
    ).train()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("make_net", [_mlp, _torch_in_train_mode])
def test_concurrent_transforms_equal_serial_ones(make_net):
    """Check threads calling transform at once each get their own codes."""
    rng = np.random.RandomState(0)
    X = rng.randn(400, 8).astype(np.float32)
    net = make_net(X)
    codes = SignCodeTransformer(
        net, layers="all", prefit=True, output="packed", batch_size=16
    ).fit(X)
    parts = [X[i::N_THREADS] for i in range(N_THREADS)]
    expected = [codes.transform(part) for part in parts]
    start = threading.Barrier(N_THREADS)
    results, errors = {}, []

    def work(i):
        start.wait()
        try:
            results[i] = [codes.transform(parts[i]) for _ in range(N_CALLS)]
        except Exception as exc:  # reported below, on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(N_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for i in range(N_THREADS):
        for got in results[i]:
            np.testing.assert_array_equal(got, expected[i])
    if isinstance(net, nn.Module):
        assert all(m.training for m in net.modules())
