"""The step nets' default recipe: lr="auto", the cosine schedule, alpha0
annealing by default, and the warning for alpha parameters that shape nothing."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from skorch.callbacks import Callback, LRScheduler
from torch.optim.lr_scheduler import CosineAnnealingLR, StepLR

from sksign._compat import InvalidParameterError
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor
from sksign.estimators._step_recipe import (
    AUTO_ALPHA0_START,
    STEP_RECIPES,
    Recipe,
    auto_recipe,
)
from sksign.nn import HTAF, IFNeuron


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((48, 5)).astype(np.float32)
    return X, (X[:, 0] > X[:, 1]).astype(int)


class _Record(Callback):
    """Each epoch's rate and alpha0, seen after the recipe's callbacks."""

    def initialize(self):
        self.lrs, self.alpha0s = [], []
        return self

    def on_epoch_begin(self, net, **kwargs):
        self.lrs.append(net.optimizer_.param_groups[0]["lr"])
        acts = [m for m in net.module_.modules() if isinstance(m, HTAF)]
        self.alpha0s.append(acts[0].alpha0 if acts else None)


class _StopAt(Callback):
    """Interrupt the fit when epoch `n` (1-based) begins, as a kill would."""

    def __init__(self, n):
        self.n = n

    def on_epoch_begin(self, net, **kwargs):
        if len(net.history) == self.n:
            raise KeyboardInterrupt


class _StepModule(torch.nn.Sequential):
    """A user's module with an HTAF inside."""

    def __init__(self, n_features, n_outputs):
        super().__init__(
            torch.nn.Linear(n_features, 4), HTAF(), torch.nn.Linear(4, n_outputs)
        )


def _torch_cosine(lr, epochs):
    """The rates torch's CosineAnnealingLR(T_max=epochs) gives per epoch."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    sched = CosineAnnealingLR(opt, T_max=epochs)
    out = []
    for _ in range(epochs):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_defaults_are_auto_and_survive_clone(data):
    """Check the classifier's defaults are "auto" and stay so after fit."""
    X, y = data
    net = HTAFNetClassifier((4,), max_epochs=2, random_state=0).fit(X, y)
    params = net.get_params()
    assert (params["lr"], params["lr_schedule"]) == ("auto", "auto")
    assert (params["alpha0_start"], params["anneal_epochs"]) == ("auto", "auto")
    assert clone(net).get_params()["lr"] == "auto"
    assert net.lr_ == 1e-3


@pytest.mark.parametrize("epochs", [1, 5, 7])
def test_cosine_schedule_matches_torch(data, epochs):
    """Check the step net's default schedule is torch's per-epoch cosine."""
    X, y = data
    record = _Record()
    HTAFNetClassifier(
        (4,), max_epochs=epochs, lr=0.02, lr_schedule="cosine", random_state=0,
        callbacks=[("record", record)],
    ).fit(X, y)  # fmt: skip
    np.testing.assert_allclose(record.lrs, _torch_cosine(0.02, epochs), rtol=1e-12)


def _image_net(arch="resnet18", **params):
    """A deep image step net, built (not fitted) for 8x8 one-channel images."""
    net = HTAFNetClassifier(
        architecture=arch, architecture_params={"width": 4}, input_shape=(1, 8, 8),
        max_epochs=12, **params,
    )  # fmt: skip
    return net.initialize_for(64, classes=[0, 1])


_SMALL = {
    "cnn": None,
    "wrn": {"depth": 10, "widen_factor": 1},
    "vit": {"dim": 8, "depth": 1, "heads": 2, "mlp_dim": 8, "patch": 4},
}


@pytest.mark.parametrize(
    "arch", sorted({k if isinstance(k, str) else k[0] for k in STEP_RECIPES})
)
@pytest.mark.parametrize("activation", ["htaf", "ste", "scaled_sigmoid"])
def test_auto_is_the_step_recipe_of_its_table(arch, activation):
    """Check "auto" gives each step net its table's recipe."""
    params = _SMALL.get(arch, {"width": 4})
    net = HTAFNetClassifier(
        architecture=arch, architecture_params=params, input_shape=(1, 8, 8),
        activation=activation, max_epochs=12,
    ).initialize_for(64, classes=[0, 1])  # fmt: skip
    recipe = STEP_RECIPES.get((arch, activation), STEP_RECIPES.get(arch, Recipe()))
    callbacks = dict(net.callbacks_)
    assert net.lr_ == recipe.lr
    assert ("lr_schedule" in callbacks) == (recipe.lr_schedule == "cosine")
    anneal = callbacks.get("alpha_annealing")
    if activation == "htaf" and recipe.anneal:
        assert (anneal.start, anneal.epochs) == (AUTO_ALPHA0_START, 12)
    else:
        assert anneal is None
    step_forward = callbacks.get("step_forward")
    if recipe.step_forward_from is None:
        assert step_forward is None
    else:
        assert step_forward.start == recipe.step_forward_from
    # the measured case: ResNet-18 with HTAF trains its second half on the step
    assert (arch == "resnet18" and activation == "htaf") == (step_forward is not None)


def test_plain_activations_keep_a_constant_rate(data):
    """Check "auto" leaves a ReLU net's rate constant, "cosine" does not."""
    X, y = data
    record = _Record()
    HTAFNetClassifier(
        (4,), activation="relu", max_epochs=4, lr=0.01,
        callbacks=[("record", record)],
    ).fit(X, y)  # fmt: skip
    assert record.lrs == [0.01] * 4
    record = _Record()
    HTAFNetClassifier(
        (4,), activation="relu", max_epochs=4, lr=0.01, lr_schedule="cosine",
        callbacks=[("record", record)],
    ).fit(X, y)  # fmt: skip
    np.testing.assert_allclose(record.lrs, _torch_cosine(0.01, 4), rtol=1e-12)


def test_a_users_module_gets_the_plain_recipe(data):
    """Check "auto" means Adam 1e-3, constant, no annealing for a user's
    module, whatever ``activation`` says."""
    X, y = data
    record = _Record()
    net = HTAFNetClassifier(
        architecture=_StepModule, max_epochs=3, callbacks=[("record", record)]
    ).fit(X, y)
    assert record.lrs == [1e-3] * 3
    assert record.alpha0s == [2.0] * 3
    assert "lr_schedule" not in dict(net.callbacks_)


def test_a_users_lr_scheduler_wins_over_auto(data):
    """Check "auto" adds no schedule beside the user's, "cosine" refuses it."""
    X, y = data
    sched = ("step", LRScheduler(StepLR, step_size=1, gamma=0.5))
    assert "lr_schedule" in dict(_image_net().callbacks_)
    assert "lr_schedule" not in dict(_image_net(callbacks=[sched]).callbacks_)
    record = _Record()
    HTAFNetClassifier(
        (4,), max_epochs=3, lr=0.04, callbacks=[sched, ("record", record)]
    ).fit(X, y)
    np.testing.assert_allclose(record.lrs, [0.04, 0.02, 0.01])
    bad = HTAFNetClassifier((4,), lr_schedule="cosine", callbacks=[sched])
    with pytest.raises(InvalidParameterError, match="two schedules"):
        bad.fit(X, y)


def test_schedule_resumes_from_a_checkpoint(data, tmp_path):
    """Check a fit stopped after 2 of 5 epochs resumes the cosine in place."""
    X, y = data
    kw = {"max_epochs": 5, "lr": 0.02, "lr_schedule": "cosine", "random_state": 0}
    full = HTAFNetClassifier((4,), **kw).fit(X, y)
    HTAFNetClassifier(
        (4,), checkpoint_dir=tmp_path, callbacks=[("stop", _StopAt(3))], **kw
    ).fit(X, y)
    resumed = HTAFNetClassifier((4,), checkpoint_dir=tmp_path, **kw).fit(X, y)
    np.testing.assert_allclose(resumed.history_[:, "lr"], full.history_[:, "lr"])
    np.testing.assert_allclose(resumed.predict_proba(X), full.predict_proba(X))


def test_set_params_lr_restarts_the_schedule_from_the_new_rate(data):
    """Check a rate set after fit is the base of the next warm-start fit."""
    X, y = data
    net = HTAFNetClassifier(
        (4,), max_epochs=2, lr=0.02, lr_schedule="cosine", warm_start=True
    ).fit(X, y)
    net.set_params(lr=0.5, max_epochs=2)
    net.fit(X, y)
    # epochs 2, 3 of a 2-epoch schedule: the last epoch's rate, 0.5 / 2
    assert net.history_[-1, "lr"] == pytest.approx(0.25)


def test_lr_auto_by_architecture():
    """Check "auto" gives Bi-Real step nets 3e-3 and the rest 1e-3."""
    bireal = _image_net("bireal")
    assert bireal.lr_ == auto_recipe("bireal", "htaf").lr == 3e-3
    assert bireal.optimizer_.param_groups[0]["lr"] == 3e-3
    relu = HTAFNetClassifier(activation="relu").initialize_for(4, classes=[0, 1])
    assert relu.lr_ == 1e-3
    relu.set_params(lr=0.05)
    assert relu.optimizer_.param_groups[0]["lr"] == 0.05
    relu.set_params(lr="auto")
    assert (relu.lr, relu.lr_, relu.optimizer_.param_groups[0]["lr"]) == (
        "auto", 1e-3, 1e-3,
    )  # fmt: skip


def test_anneal_epochs_auto_spans_the_fit(data):
    """Check anneal_epochs="auto": 0.1 * (alpha0 / 0.1) ** (e / (n - 1))."""
    X, y = data
    record = _Record()
    net = HTAFNetClassifier(
        (4,), max_epochs=5, alpha0=1.6, alpha0_start=0.1, random_state=0,
        callbacks=[("record", record)],
    ).fit(X, y)  # fmt: skip
    expected = [AUTO_ALPHA0_START * 16.0 ** (e / 4) for e in range(5)]
    np.testing.assert_allclose(record.alpha0s, expected, rtol=1e-12)
    assert net.module_.act0.alpha0 == 1.6
    small = _image_net(alpha0=0.1, alpha1=220.0)
    assert "alpha_annealing" not in dict(small.callbacks_)


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"activation": "relu", "alpha0": 1.0, "alpha1": 22.0}, "alpha0, alpha1"),
        ({"activation": "ste", "alpha1": 5.0}, "alpha1"),
        ({"activation": "scaled_sigmoid", "alpha0_start": 0.2}, "alpha0_start"),
    ],
)
def test_alphas_an_activation_ignores_warn(data, params, names):
    """Check alpha parameters that shape nothing warn, naming them."""
    X, y = data
    with pytest.warns(UserWarning, match=f"^{names} set on .*ignores"):
        HTAFNetClassifier((4,), max_epochs=1, **params).fit(X, y)


@pytest.mark.parametrize(
    "params",
    [
        {"activation": "htaf", "alpha0": 1.0, "alpha1": 22.0},
        {"activation": "scaled_sigmoid", "alpha0": 1.0},
        {"activation": "relu"},
    ],
)
def test_alphas_that_shape_the_net_do_not_warn(data, params):
    """Check no warning where the alphas reach the activation (or are unset:
    the regressor's default alpha0_start is 0.05, not "auto")."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HTAFNetClassifier((4,), max_epochs=1, **params).fit(X, y)
        HTAFNetRegressor((4,), max_epochs=1, **params).fit(X, y * 1.0)


def test_regressor_keeps_its_measured_defaults(data):
    """Check the regressor's recipe did not move: constant 1e-3, 0.05 over 16."""
    X, _ = data
    reg = HTAFNetRegressor((4,), max_epochs=3).fit(X, X[:, 0])
    assert "lr_schedule" not in dict(reg.callbacks_)
    assert reg.lr_ == 1e-3


@pytest.mark.parametrize(
    ("arch", "params"),
    [("snn", {}), ("sew_resnet", {"width": 4, "blocks": (1, 1, 1, 1)})],
)
def test_annealing_reaches_the_spike_functions(arch, params):
    """Check alpha0 annealing sets the HTAF that fires in every IF neuron (it
    sits outside the module tree) and changes the training."""
    rng = np.random.default_rng(0)
    X = rng.random((24, 1, 8, 8)).astype(np.float32)
    y = np.arange(24) % 2
    if arch == "snn":
        X = X.reshape(24, -1)
    kw = {"architecture": arch, "architecture_params": params, "max_epochs": 3}
    record = []

    class Spy(Callback):
        def on_epoch_begin(self, net, **kwargs):
            neurons = [m for m in net.module_.modules() if isinstance(m, IFNeuron)]
            record.append({round(n.spike_function.alpha0, 9) for n in neurons})

    annealed = HTAFNetClassifier(
        alpha0_start=0.1, random_state=0, callbacks=[("spy", Spy())], **kw
    ).fit(X, y)
    assert record == [{0.1}, {round(0.1 * 20**0.5, 9)}, {2.0}]
    fixed = HTAFNetClassifier(alpha0_start=None, random_state=0, **kw).fit(X, y)
    assert annealed.history_[0, "train_loss"] != fixed.history_[0, "train_loss"]


class _StraightThrough(Callback):
    """Each epoch's ``straight_through`` of the step activations."""

    def initialize(self):
        self.flags = []
        return self

    def on_epoch_begin(self, net, **kwargs):
        self.flags.append(
            {m.straight_through for m in net.module_.modules() if isinstance(m, HTAF)}
        )


@pytest.mark.parametrize(
    ("start", "epochs", "first"), [(0.5, 4, 2), (0.0, 3, 0), (1.0, 3, 3), (0.3, 10, 3)]
)
def test_step_forward_phase_switches_at_its_epoch_and_back(data, start, epochs, first):
    """Check the exact-step phase starts at ceil(start * max_epochs), is in
    the history, reaches every step activation, and ends with the fit."""
    record = _StraightThrough()
    net = HTAFNetClassifier(
        (6, 6), max_epochs=epochs, step_forward_from=start, random_state=0,
        callbacks=[("record", record)],
    ).fit(*data)  # fmt: skip
    expected = [e >= first for e in range(epochs)]
    assert list(net.history_[:, "step_forward"]) == expected
    assert record.flags == [{on} for on in expected]
    acts = [m for m in net.module_.modules() if isinstance(m, HTAF)]
    assert len(acts) == 2
    assert not any(m.straight_through for m in acts)


def test_step_forward_phase_changes_training_not_inference(data):
    """Check a fit with the phase differs from one without (same seed), and
    that None adds no callback."""
    plain = HTAFNetClassifier(
        (6,), max_epochs=3, step_forward_from=None, random_state=0
    )
    phase = clone(plain).set_params(step_forward_from=0.0)
    plain.fit(*data)
    phase.fit(*data)
    assert "step_forward" not in dict(plain.callbacks_)
    assert not torch.equal(plain.module_.fc0.weight, phase.module_.fc0.weight)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half", True])
def test_step_forward_from_is_checked(data, bad):
    net = HTAFNetClassifier((4,), max_epochs=1, step_forward_from=bad)
    with pytest.raises(InvalidParameterError, match="step_forward_from"):
        net.fit(*data)
