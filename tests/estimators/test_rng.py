"""Tests for sksign/estimators/_rng.py: the random streams of a fit.

The same checks on the MLP live with the other tests of their estimator
(``test_same_random_state_same_model`` in test_htaf_net.py,
``test_fit_and_predict_leave_the_global_rng_alone`` and
``test_random_state_fixes_dropout_whatever_the_global_seed`` in
test_fit_state.py); these add the image nets, the streams themselves and
``partial_fit`` rounds.
"""

import numpy as np
import pytest
import torch

from sksign.estimators import HTAFNetClassifier
from sksign.estimators._rng import (
    STREAMS,
    base_seed,
    generator,
    seeded,
    stream_seed,
)

CNN = {
    "architecture": "cnn",
    "hidden_layer_sizes": (8,),
    "conv_channels": (4,),
    "batch_size": 8,
    "max_epochs": 2,
}


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    X = rng.random((32, 1, 8, 8)).astype(np.float32)
    y = (X[:, 0, :4].mean(axis=(1, 2)) > X[:, 0, 4:].mean(axis=(1, 2))).astype(int)
    return X, y


def _state(est):
    return {k: v.clone() for k, v in est.module_.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class _Recorder:
    """An augmentation that records what the epoch's streams give it: a draw
    of torch's generator and the batch's order, per batch."""

    def __init__(self):
        self.draws, self.orders = [], []

    def __call__(self, images):
        self.draws.append(float(torch.rand(())))
        self.orders.append(images.sum(dim=(1, 2, 3)).tolist())
        return images


def test_stream_seeds_differ_by_stream_epoch_and_call():
    """Check each stream, epoch and call of a seeded fit gets its own seed,
    and that an unseeded fit gets none."""
    base = base_seed(0)
    assert base == base_seed(0) != base_seed(1)
    assert base_seed(np.random.RandomState(0)) == base
    epochs = [stream_seed(base, "epoch", e) for e in range(4)]
    shuffles = [stream_seed(base, "epoch_shuffle", e) for e in range(4)]
    calls = [stream_seed(base, "call", n) for n in range(4)]
    assert len(set(epochs + shuffles)) == 8
    assert len(set(calls)) == 4
    assert stream_seed(base, "weights") not in epochs + shuffles + calls
    assert all(stream_seed(None, name, 3) is None for name in STREAMS)
    with pytest.raises(KeyError):
        stream_seed(base, "dropout")


def test_seeded_block_draws_its_seed_and_restores_the_global_rng():
    """Check a seeded block draws the seed's sequence and gives torch's global
    generator its state back; an unseeded block draws from the global one."""
    state = torch.get_rng_state()
    with seeded(5, device="cpu"):
        inside = torch.rand(4)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(inside, torch.rand(4, generator=generator(5)))
    with seeded(None):
        torch.rand(1)
    assert not torch.equal(torch.get_rng_state(), state)


def test_same_random_state_same_image_net(images):
    """Check the same random_state gives a CNN (augmented, shuffled) the same
    weights and predictions, another random_state another net, and that
    neither fit nor predict moves torch's global RNG."""
    X, y = images
    state = torch.get_rng_state()
    a = HTAFNetClassifier(augment="crop_flip", random_state=0, **CNN).fit(X, y)
    b = HTAFNetClassifier(augment="crop_flip", random_state=0, **CNN).fit(X, y)
    c = HTAFNetClassifier(augment="crop_flip", random_state=1, **CNN).fit(X, y)
    proba = [net.predict_proba(X) for net in (a, b, c)]
    assert torch.equal(torch.get_rng_state(), state)
    assert _same(_state(a), _state(b))
    np.testing.assert_array_equal(proba[0], proba[1])
    assert not _same(_state(a), _state(c))
    assert not np.array_equal(proba[0], proba[2])


def test_partial_fit_rounds_differ_but_repeat_with_the_random_state(images):
    """Check each partial_fit round draws its own batch order and torch
    stream, and that two runs with one random_state repeat them round by
    round (weights included), without moving torch's global RNG."""
    X, y = images
    state = torch.get_rng_state()
    runs = []
    for _ in range(2):
        record = _Recorder()
        net = HTAFNetClassifier(augment=record, random_state=0, **CNN)
        weights = []
        for _ in range(3):
            net.partial_fit(X, y, classes=[0, 1])
            weights.append(_state(net))
        runs.append((record, weights))
    assert torch.equal(torch.get_rng_state(), state)
    (first, w_first), (second, w_second) = runs
    per_round = len(first.draws) // 3
    draws = [
        tuple(first.draws[i : i + per_round])
        for i in range(0, 3 * per_round, per_round)
    ]
    orders = [first.orders[i] for i in range(0, 3 * per_round, per_round)]
    assert len(set(draws)) == 3
    assert orders[0] != orders[1] != orders[2]
    assert first.draws == second.draws
    assert first.orders == second.orders
    assert all(_same(p, q) for p, q in zip(w_first, w_second, strict=True))


def test_unseeded_fit_draws_from_the_global_rng(images):
    """Check random_state=None leaves the streams to torch's global generator:
    the same global seed gives the same net."""
    X, y = images
    nets = []
    for _ in range(2):
        torch.manual_seed(3)
        nets.append(_state(HTAFNetClassifier(random_state=None, **CNN).fit(X, y)))
    assert _same(*nets)
