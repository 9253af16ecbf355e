"""The papers' image nets through the estimators (architecture, backbone)."""

import numpy as np
import pytest
import torch

from sksign.estimators import HTAFNetClassifier, ICBMClassifier
from sksign.transformers import SignCodeTransformer

TINY = {
    "resnet18": ({"width": 4}, "relu"),
    "wrn": ({"depth": 10, "widen_factor": 1}, "htaf"),
    "vit": ({"dim": 16, "depth": 1, "heads": 2, "patch": 4}, "gelu"),
    "sew_resnet": ({"width": 4}, "htaf"),
    "bireal": ({"width": 4}, "htaf"),
}


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    X = rng.random((48, 1, 16, 16)).astype(np.float32)
    return X, (X[:, 0, :8].mean(axis=(1, 2)) > X[:, 0, 8:].mean(axis=(1, 2))).astype(
        int
    )


@pytest.mark.parametrize("arch", sorted(TINY))
def test_each_architecture_fits_images_and_flat_rows_alike(images, arch):
    """Check 4-D images and their flat rows give the same seeded net."""
    X, y = images
    params, act = TINY[arch]
    kw = {"architecture": arch, "architecture_params": params, "activation": act}
    kw |= {"max_epochs": 1, "batch_size": 16, "random_state": 0}
    a = HTAFNetClassifier(**kw).fit(X, y)
    b = HTAFNetClassifier(**kw).fit(X.reshape(len(X), -1), y)
    assert a.input_shape_ == b.input_shape_ == (1, 16, 16)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.predict(X).shape == (48,)


def test_images_too_small_fail_before_training_with_the_expected_shape(images):
    """Check a too-small image names the shape it needs; the net is unchanged."""
    X, y = images
    net = HTAFNetClassifier(
        architecture="resnet18",
        architecture_params={"width": 4},
        activation="relu",
        max_epochs=1,
        random_state=0,
    ).fit(X, y)
    before = net.predict_proba(X)
    small = np.zeros((8, 1, 4, 4), np.float32)
    with pytest.raises(ValueError, match=r"H, W >= 8"):
        net.fit(small, [0, 1] * 4)
    np.testing.assert_array_equal(net.predict_proba(X), before)
    assert len(net.history_) == 1


def test_unknown_argument_lists_the_valid_ones(images):
    """Check a wrong argument name lists the architecture's arguments."""
    X, y = images
    net = HTAFNetClassifier(architecture="wrn", architecture_params={"widen": 2})
    with pytest.raises(TypeError, match="widen_factor"):
        net.fit(X, y)


def test_augmentation_reads_the_image_shape_of_flat_rows(images):
    """Check crop_flip runs on flat rows of a square image net."""
    X, y = images
    net = HTAFNetClassifier(
        architecture="resnet18",
        architecture_params={"width": 4},
        activation="relu",
        augment="crop_flip",
        max_epochs=1,
        random_state=0,
    ).fit(X.reshape(len(X), -1), y)
    assert net.input_shape_ == (1, 16, 16)


def test_icbm_on_an_image_backbone_gives_binary_concepts(images):
    """Check ICBM on ResNet-18 with backbone_params: bits in transform."""
    X, y = images
    icbm = ICBMClassifier(
        backbone="resnet18",
        backbone_params={"width": 4},
        n_concepts=6,
        max_epochs=1,
        random_state=0,
    ).fit(X, y)
    concepts = icbm.transform(X)
    assert concepts.shape == (48, 6)
    assert set(np.unique(concepts)) <= {0, 1}


def test_last_layer_code_of_resnet18_is_the_last_block_s_out(images):
    """Check the transformer's "last" code of ResNet-18 on images is the sign
    of the input of layer4.1.act2 (S_out of the last block, its one call),
    as a hand-written hook reads it."""
    X, y = images
    net = HTAFNetClassifier(
        architecture="resnet18",
        architecture_params={"width": 4},
        activation="relu",
        max_epochs=1,
        random_state=0,
    ).fit(X, y)
    codes = SignCodeTransformer(net, prefit=True, conv_pool="flatten").fit(X)
    seen = []
    module = net.module_.eval()
    handle = module.layer4[1].act2.register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].detach() > 0)
    )
    with torch.no_grad():
        module(torch.as_tensor(X))
    handle.remove()
    (bits,) = seen
    np.testing.assert_array_equal(codes.transform(X), bits.reshape(len(X), -1))
