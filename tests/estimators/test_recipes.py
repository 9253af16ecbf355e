"""Training recipes of the skorch nets: augmentation, mixed precision,
per-epoch seeding, checkpoints that resume, the progress bar."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from skorch.callbacks import Callback

from sksign._compat import InvalidParameterError
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor, ICBMClassifier
from sksign.nn.layers.augment import random_crop_flip


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    X = rng.random((60, 1, 8, 8)).astype(np.float32)
    y = (X[:, 0, :4].mean(axis=(1, 2)) > X[:, 0, 4:].mean(axis=(1, 2))).astype(int)
    return X, y


def _reference_crop_flip(images, padding, flip, seed):
    """One image at a time in numpy, with the draws of random_crop_flip."""
    gen = torch.Generator().manual_seed(seed)
    n = len(images)
    top = torch.randint(0, 2 * padding + 1, (n,), generator=gen).numpy()
    left = torch.randint(0, 2 * padding + 1, (n,), generator=gen).numpy()
    mirror = torch.randint(0, 2, (n,), generator=gen).numpy() if flip else np.zeros(n)
    h, w = images.shape[2:]
    out = []
    for img, t, le, m in zip(images, top, left, mirror, strict=True):
        pad = np.pad(img, ((0, 0), (padding, padding), (padding, padding)))
        crop = pad[:, t : t + h, le : le + w]
        out.append(crop[:, :, ::-1] if m else crop)
    return np.stack(out)


@given(
    n=st.integers(1, 5),
    c=st.integers(1, 3),
    h=st.integers(1, 7),
    w=st.integers(1, 7),
    padding=st.integers(0, 4),
    flip=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_random_crop_flip_equals_per_image_reference(n, c, h, w, padding, flip, seed):
    """Check the batched crop-and-flip equals pad/crop/mirror image by image."""
    x = torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(seed + 1))
    got = random_crop_flip(
        x, padding, flip, generator=torch.Generator().manual_seed(seed)
    )
    expected = _reference_crop_flip(x.numpy(), padding, flip, seed)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_random_crop_flip_refuses_non_images():
    """Check a flat batch and a negative padding are named."""
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        random_crop_flip(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="padding"):
        random_crop_flip(torch.zeros(1, 1, 2, 2), padding=-1)


class _Recorder:
    def __init__(self):
        self.shapes = []

    def __call__(self, images):
        self.shapes.append(tuple(images.shape))
        return images


def test_augment_callable_sees_image_batches_and_identity_changes_nothing(images):
    """Check the callable gets (N, C, H, W) batches every step and an identity
    augmentation trains the same weights as none."""
    X, y = images
    kw = {"max_epochs": 2, "batch_size": 16, "architecture": "cnn", "random_state": 0}
    record = _Recorder()
    aug = HTAFNetClassifier((8,), augment=record, **kw).fit(X, y)
    plain = HTAFNetClassifier((8,), **kw).fit(X, y)
    assert len(record.shapes) == 2 * 4
    assert {s[1:] for s in record.shapes} == {(1, 8, 8)}
    for p, q in zip(aug.module_.parameters(), plain.module_.parameters(), strict=True):
        assert torch.equal(p, q)


def test_crop_flip_is_seeded_and_changes_training(images):
    """Check crop_flip training repeats with the seed and differs from none."""
    X, y = images
    kw = {"max_epochs": 2, "architecture": "cnn", "random_state": 0}
    a = HTAFNetClassifier((8,), augment="crop_flip", **kw).fit(X, y)
    b = HTAFNetClassifier((8,), augment="crop_flip", **kw).fit(X, y)
    c = HTAFNetClassifier((8,), **kw).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))


@pytest.mark.parametrize(
    ("augment", "X_flat", "error", "match"),
    [
        ("flip", False, InvalidParameterError, "'augment'"),
        ("crop_flip", True, ValueError, "needs images"),
        (lambda im: im[:, :, :4], False, ValueError, "keep the batch's shape"),
    ],
)
def test_bad_augment_is_named_and_leaves_the_fitted_net(
    images, augment, X_flat, error, match
):
    """Check bad augmentations fail with a clear error, estimator unchanged."""
    X, y = images
    net = HTAFNetClassifier((8,), max_epochs=1, architecture="cnn", random_state=0)
    net.fit(X, y)
    before = net.predict_proba(X)
    data = X.reshape(len(X), -1) if X_flat else X
    if X_flat:
        net.set_params(architecture="mlp")
    with pytest.raises(error, match=match):
        net.set_params(augment=augment).fit(data, y)
    net.set_params(augment=None, architecture="cnn")
    np.testing.assert_array_equal(net.predict_proba(X), before)


class _LinearDtypes(Callback):
    def __init__(self):
        self.dtypes = set()

    def on_batch_begin(self, net, batch=None, training=False, **kwargs):
        if training and not hasattr(self, "_hook"):
            self._hook = net.module_.fc0.register_forward_hook(
                lambda _m, _i, out: self.dtypes.add(out.dtype)
            )

    def on_train_end(self, net, **kwargs):
        self._hook.remove()


def test_mixed_precision_trains_in_bfloat16_with_float32_weights(images):
    """Check the training forward runs in bfloat16 and the weights stay float32."""
    X, y = images
    X = X.reshape(len(X), -1)
    record = _LinearDtypes()
    net = HTAFNetClassifier(
        (16,),
        max_epochs=3,
        mixed_precision=True,
        random_state=0,
        callbacks=[("dtypes", record)],
    ).fit(X, y)
    assert record.dtypes == {torch.bfloat16}
    assert {p.dtype for p in net.module_.parameters()} == {torch.float32}
    assert net.predict_proba(X).dtype == np.float32


class _FailAt(Callback):
    def __init__(self, epoch):
        self.epoch = epoch

    def on_epoch_begin(self, net, **kwargs):
        if len(net.history) == self.epoch:
            raise RuntimeError("stopped")


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: HTAFNetClassifier((16,), **kw),
        lambda **kw: HTAFNetRegressor((16,), **kw),
        lambda **kw: ICBMClassifier(n_concepts=4, hidden_layer_sizes=(16,), **kw),
    ],
    ids=["classifier", "regressor", "icbm"],
)
def test_resumed_fit_equals_an_uninterrupted_one(images, tmp_path, make):
    """Check a fit stopped after 3 of 7 epochs and fitted again with the same
    checkpoint_dir ends with the weights of one uninterrupted fit."""
    X, y = images
    X = X.reshape(len(X), -1)
    kw = {"max_epochs": 7, "batch_size": 16, "random_state": 0}
    whole = make(**kw).fit(X, y)
    stopped = make(checkpoint_dir=tmp_path, callbacks=[("fail", _FailAt(4))], **kw)
    with pytest.raises(RuntimeError, match="stopped"):
        stopped.fit(X, y)
    assert json.loads((tmp_path / "sksign_checkpoint.json").read_text())["epochs"] == 3
    resumed = make(checkpoint_dir=tmp_path, **kw).fit(X, y)
    assert len(resumed.history_) == 7
    assert resumed.history_[:, "epoch"] == list(range(1, 8))
    for p, q in zip(
        resumed.module_.parameters(), whole.module_.parameters(), strict=True
    ):
        assert torch.equal(p, q)
    again = make(checkpoint_dir=tmp_path, **kw).fit(X, y)  # all 7 done: no epoch
    assert len(again.history_) == 7
    np.testing.assert_array_equal(again.predict(X), whole.predict(X))


def test_resumed_fit_keeps_its_place_in_a_cosine_schedule(images, tmp_path):
    """Check SGD with a cosine schedule (skorch's LRScheduler) resumed after 3
    of 6 epochs takes the schedule's remaining steps: the weights and the
    final learning rate equal an uninterrupted fit's."""
    from skorch.callbacks import LRScheduler
    from torch.optim.lr_scheduler import CosineAnnealingLR

    X, y = images
    X = X.reshape(len(X), -1)

    def make(**kw):
        return HTAFNetClassifier(
            (16,),
            optimizer=torch.optim.SGD,
            lr=0.1,
            optimizer__momentum=0.9,
            max_epochs=6,
            batch_size=16,
            random_state=0,
            callbacks=[("cosine", LRScheduler(CosineAnnealingLR, T_max=6))],
            **kw,
        )

    whole = make().fit(X, y)
    stopped = make(checkpoint_dir=tmp_path)
    stopped.callbacks = [*stopped.callbacks, ("fail", _FailAt(4))]
    with pytest.raises(RuntimeError, match="stopped"):
        stopped.fit(X, y)
    resumed = make(checkpoint_dir=tmp_path).fit(X, y)
    for p, q in zip(
        resumed.module_.parameters(), whole.module_.parameters(), strict=True
    ):
        assert torch.equal(p, q)
    lr = [g["lr"] for g in resumed.optimizer_.param_groups]
    assert lr == [g["lr"] for g in whole.optimizer_.param_groups]


_KILLED_FIT = """
import sys, time
import numpy as np
from skorch.callbacks import Callback
from sksign.estimators import HTAFNetClassifier

class Slow(Callback):
    def on_epoch_end(self, net, **kwargs):
        time.sleep(0.3)

rng = np.random.default_rng(0)
X = rng.random((60, 64)).astype(np.float32)
y = (X[:, :32].mean(1) > X[:, 32:].mean(1)).astype(int)
HTAFNetClassifier((16,), max_epochs=50, batch_size=16, random_state=0,
                  checkpoint_dir=sys.argv[1], callbacks=[("slow", Slow())]).fit(X, y)
"""


def test_a_killed_run_resumes_from_its_checkpoint(tmp_path):
    """Check a process killed (SIGKILL) mid-training leaves a checkpoint from
    which a new fit ends where an uninterrupted one does."""
    folder = tmp_path / "ckpt"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_FIT, str(folder)])
    marker = folder / "sksign_checkpoint.json"
    deadline = time.time() + 120
    while time.time() < deadline:
        if marker.exists() and json.loads(marker.read_text())["epochs"] >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = json.loads(marker.read_text())["epochs"]
    assert 3 <= done < 50

    rng = np.random.default_rng(0)
    X = rng.random((60, 64)).astype(np.float32)
    y = (X[:, :32].mean(1) > X[:, 32:].mean(1)).astype(int)
    kw = {"max_epochs": 50, "batch_size": 16, "random_state": 0}
    resumed = HTAFNetClassifier((16,), checkpoint_dir=folder, **kw).fit(X, y)
    whole = HTAFNetClassifier((16,), **kw).fit(X, y)
    assert len(resumed.history_) == 50
    np.testing.assert_array_equal(resumed.predict_proba(X), whole.predict_proba(X))


def test_checkpoint_of_another_estimator_is_refused(images, tmp_path):
    """Check a folder holding another estimator's checkpoint is named."""
    X, y = images
    X = X.reshape(len(X), -1)
    HTAFNetRegressor((8,), max_epochs=1, checkpoint_dir=tmp_path).fit(X, y)
    with pytest.raises(ValueError, match="HTAFNetRegressor"):
        HTAFNetClassifier((8,), max_epochs=1, checkpoint_dir=tmp_path).fit(X, y)


def test_verbose_two_adds_a_progress_bar():
    """Check verbose >= 2 adds skorch's ProgressBar and verbose=1 does not."""
    net = HTAFNetClassifier((8,), max_epochs=1, verbose=2, random_state=0)
    assert "progress_bar" in dict(net.initialize_for(64, classes=[0, 1]).callbacks_)
    net.set_params(verbose=1).initialize_for(64, classes=[0, 1])
    assert "progress_bar" not in dict(net.callbacks_)


_CONV_NETS = [
    lambda **kw: HTAFNetClassifier(architecture="cnn", activation="relu", **kw),
    lambda **kw: HTAFNetClassifier(
        architecture="resnet18", architecture_params={"width": 2}, **kw
    ),
    lambda **kw: ICBMClassifier(n_concepts=4, backbone="cnn", **kw),
]


@pytest.mark.parametrize("make", _CONV_NETS, ids=["cnn", "resnet18", "icbm-cnn"])
def test_channels_last_is_the_default_layout_on_the_cpu(images, make):
    """Check channels_last leaves a CPU net in NCHW with the same numbers
    (torch's CPU channels_last conv backward corrupts memory, see
    TrainingRecipeMixin)."""
    X, y = images
    base = make(max_epochs=2, random_state=0).fit(X, y)
    other = make(max_epochs=2, random_state=0, channels_last=True).fit(X, y)
    for m in other.module_.modules():
        if isinstance(m, torch.nn.Conv2d):
            assert m.weight.is_contiguous()
    np.testing.assert_array_equal(other.predict_proba(X), base.predict_proba(X))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("make", _CONV_NETS, ids=["cnn", "resnet18", "icbm-cnn"])
def test_channels_last_keeps_conv_weights_nhwc_on_cuda(images, make):
    """Check channels_last puts every conv weight (and so the maps) in NHWC
    on CUDA, keeps them the optimizer's parameters, and predicts like the
    default layout up to float rounding."""
    X, y = images
    kw = {"max_epochs": 2, "random_state": 0, "device": "cuda"}
    base = make(**kw).fit(X, y)
    nhwc = make(channels_last=True, **kw).fit(X, y)
    convs = [m for m in nhwc.module_.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs
    for m in convs:
        assert m.weight.is_contiguous(memory_format=torch.channels_last)
    optimized = {id(p) for g in nhwc.optimizer_.param_groups for p in g["params"]}
    assert {id(p) for p in nhwc.module_.parameters()} <= optimized
    np.testing.assert_allclose(
        nhwc.predict_proba(X), base.predict_proba(X), rtol=1e-3, atol=1e-3
    )


def test_channels_last_is_a_no_op_without_convolutions(images):
    X, y = images
    X = X.reshape(len(X), -1)
    a = HTAFNetClassifier((16,), max_epochs=2, random_state=0).fit(X, y)
    b = HTAFNetClassifier((16,), max_epochs=2, random_state=0, channels_last=True)
    b.fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
