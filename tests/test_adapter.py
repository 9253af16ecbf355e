"""The adapter names the input a bare convolutional module needs."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch
from torch import nn

from sksign._adapter import check_module_input
from sksign.metrics import intervention_score
from sksign.transformers import SignCodeTransformer

RANDOM_STATE = 0


def _conv_net():
    torch.manual_seed(RANDOM_STATE)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3)
    )


@pytest.fixture
def data():
    rng = np.random.RandomState(RANDOM_STATE)
    return rng.rand(12, 64).astype(np.float32), np.arange(12) % 3


def test_flat_rows_to_a_conv_module_name_the_shape(data):
    X, y = data
    with pytest.raises(ValueError, match=r"X.reshape\(-1, 1, 8, 8\)") as info:
        intervention_score(_conv_net(), X, y, kind="sign_flip", alpha=0.2)
    message = str(info.value)
    assert "(n_samples, C, H, W)" in message
    assert "nn.Unflatten" in message
    assert "(12, 64)" in message


def test_flat_reference_rows_are_named(data):
    X, y = data
    with pytest.raises(ValueError, match="X_ref has shape"):
        intervention_score(
            _conv_net(),
            X.reshape(-1, 1, 8, 8),
            y,
            kind="magnitude",
            noise="matched",
            X_ref=X,
            alpha=0.5,
        )


def test_images_to_a_conv_module_still_run(data):
    X, y = data
    images = X.reshape(-1, 1, 8, 8)
    score = intervention_score(_conv_net(), images, y, kind="sign_flip", alpha=0.2)
    assert 0.0 <= score <= 1.0


@pytest.mark.parametrize(
    ("module", "shape", "ok"),
    [
        (nn.Sequential(nn.Conv2d(3, 2, 3)), (5, 3, 8, 8), True),
        (nn.Sequential(nn.Conv2d(3, 2, 3)), (5, 192), False),
        # the channels do not divide the features: no reshape is suggested
        (nn.Sequential(nn.Conv2d(5, 2, 3)), (5, 192), False),
        (nn.Sequential(nn.Sequential(nn.Conv1d(2, 2, 3))), (5, 2, 10), True),
        (nn.Sequential(nn.Sequential(nn.Conv1d(2, 2, 3))), (5, 20), False),
        (nn.Sequential(nn.Conv3d(1, 2, 3)), (5, 1, 4, 4), False),
        (nn.Sequential(nn.LazyConv2d(2, 3)), (5, 64), False),
        (nn.Conv2d(1, 2, 3), (5, 64), False),
        # a module that is not a Sequential may reshape its input itself
        (nn.Flatten(), (5, 64), True),
        (nn.Sequential(nn.Linear(64, 2)), (5, 64), True),
        (nn.Sequential(), (5, 64), True),
    ],
)
def test_check_module_input(module, shape, ok):
    if ok:
        check_module_input(module, shape)
    else:
        with pytest.raises(ValueError, match=r"takes samples of\s+shape \(C, "):
            check_module_input(module, shape)


def test_suggested_reshape_only_when_it_fits():
    with pytest.raises(ValueError, match=r"with C = 5") as info:
        check_module_input(nn.Sequential(nn.Conv2d(5, 2, 3)), (5, 192))
    assert "for instance" not in str(info.value)
    with pytest.raises(ValueError, match=r"X.reshape\(-1, 3, 8, 8\)"):
        check_module_input(nn.Sequential(nn.Conv2d(3, 2, 3)), (5, 192))


def test_sign_code_transformer_flat_rows_to_a_conv_module(data):
    X, _ = data
    with pytest.raises(ValueError, match=r"X.reshape\(-1, 1, 8, 8\)"):
        SignCodeTransformer(_conv_net(), layers=nn.ReLU).fit(X)
    codes = SignCodeTransformer(_conv_net(), layers=nn.ReLU).fit_transform(
        X.reshape(-1, 1, 8, 8)
    )
    assert codes.shape[0] == len(X)
