"""SignCodeTransformer on samples in the shape the net takes (images)."""

import numpy as np
import pytest
import torch
from torch import nn

from sksign.estimators import HTAFNetClassifier, SignKNNClassifier
from sksign.inspection import sign_gap
from sksign.transformers import SignCodeTransformer


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(3 * 6 * 6, 7),
        nn.ReLU(),
        nn.Linear(7, 3),
    )


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    return rng.standard_normal((25, 1, 6, 6)).astype(np.float32), np.arange(25) % 3


def test_bare_module_on_images_equals_a_hand_written_hook(images):
    """Check a module taking (N, C, H, W) gets images back and the code is the
    sign of its last activation's input, in batches of any size."""
    X, _ = images
    net = _cnn().eval()
    seen = []
    handle = net[4].register_forward_pre_hook(lambda _m, a: seen.append(a[0] > 0))
    with torch.no_grad():
        net(torch.as_tensor(X))
    handle.remove()
    sct = SignCodeTransformer(net, batch_size=4).fit(X)
    assert sct.sample_shape_ == (1, 6, 6)
    assert sct.n_features_in_ == 36
    np.testing.assert_array_equal(sct.transform(X), seen[0].numpy())


def test_other_sample_shapes_are_refused(images):
    """Check samples of another shape are named in the error."""
    X, _ = images
    sct = SignCodeTransformer(_cnn()).fit(X)
    with pytest.raises(ValueError, match=r"samples of shape \(1, 3, 12\)"):
        sct.transform(X.reshape(25, 1, 3, 12))


def test_sksign_net_reads_images_and_rows_alike(images):
    """Check an sksign CNN fitted on images gives one code for images and rows,
    prefit or fitted by the transformer."""
    X, y = images
    kw = {"architecture": "cnn", "conv_channels": (2,), "max_epochs": 1}
    net = HTAFNetClassifier((5,), activation="relu", random_state=0, **kw).fit(X, y)
    a = SignCodeTransformer(net, prefit=True).fit(X).transform(X)
    b = SignCodeTransformer(net, prefit=True).fit(X.reshape(25, -1))
    np.testing.assert_array_equal(b.transform(X.reshape(25, -1)), a)
    fitted = SignCodeTransformer(
        HTAFNetClassifier((5,), activation="relu", random_state=0, **kw)
    ).fit(X, y)
    assert fitted.estimator_.input_shape_ == (1, 6, 6)
    np.testing.assert_array_equal(fitted.transform(X), a)


def test_sign_gap_takes_images(images):
    """Check sign_gap runs on a module that takes images."""
    X, y = images
    net = _cnn()
    report = sign_gap(net, X[:15], y[:15], X[15:], y[15:], n_neighbors=1)
    codes = SignCodeTransformer(net).fit(X)
    knn = SignKNNClassifier(n_neighbors=1).fit(codes.transform(X[:15]), y[:15])
    assert report["n_bits"] == 7
    assert report["knn_accuracy"] == knn.score(codes.transform(X[15:]), y[15:])
