"""How HTAFNetRegressor trains and infers: sample weights, alpha0 annealing,
the inference mode, early stopping and the dtype."""

import inspect
import re

import numpy as np
import pytest
import torch
from sklearn.utils import shuffle
from skorch.callbacks import Callback

from sksign._compat import InvalidParameterError
from sksign.estimators import AlphaAnnealing, HTAFNetClassifier, HTAFNetRegressor
from sksign.nn import HTAF, force_step_mode


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 5))
    y = np.column_stack([X @ [1.0, -2.0, 0.5, 0.0, 1.0], np.sin(X[:, 0])]) * 10 + 3
    return X, y


def _one_sgd_step(**kw):
    """A full-batch, single-step SGD regressor in float64 (no annealing)."""
    return HTAFNetRegressor(
        (6,),
        optimizer=torch.optim.SGD,
        lr=0.1,
        max_epochs=1,
        batch_size=-1,
        alpha0_start=None,
        dtype="float64",
        random_state=0,
        **kw,
    )


def test_sample_weight_equals_hand_computed_sgd_step(data):
    """Check one weighted SGD step equals the step on the hand-written loss
    sum_i w_i mean_j (f_ij - t_ij)^2 / sum_i w_i, with weighted target scaling."""
    X, y = data
    w = np.random.default_rng(1).uniform(0, 3, len(X))
    reg = _one_sgd_step().fit(X, y, sample_weight=w)

    mean = np.average(y, axis=0, weights=w)
    scale = np.sqrt(np.average((y - mean) ** 2, axis=0, weights=w))
    np.testing.assert_allclose(reg.target_mean_, mean, rtol=1e-12)
    np.testing.assert_allclose(reg.target_scale_, scale, rtol=1e-12)

    start = _one_sgd_step().initialize_for(X.shape[1], n_outputs=2).module_
    params = dict(start.named_parameters())
    with force_step_mode(start, "smooth"):
        start.train()
        out = start(torch.as_tensor(X))
    t = torch.as_tensor((y - mean) / scale)
    wt = torch.as_tensor(w)
    loss = (wt * ((out - t) ** 2).mean(1)).sum() / wt.sum()
    grads = torch.autograd.grad(loss, list(params.values()))
    for (name, p), g in zip(params.items(), grads, strict=True):
        expected = (p - 0.1 * g).detach().numpy()
        got = dict(reg.module_.named_parameters())[name].detach().numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=name)


def test_zero_weights_equal_dropping_the_rows(data):
    """Check zero-weight rows change nothing (full batch, float64)."""
    X, y = data
    w = np.ones(len(X))
    w[::3] = 0.0
    kw = {"max_epochs": 5, "optimizer": torch.optim.Adam, "lr": 1e-2}
    weighted = _one_sgd_step().set_params(**kw).fit(X, y, sample_weight=w)
    dropped = _one_sgd_step().set_params(**kw).fit(X[w > 0], y[w > 0])
    np.testing.assert_allclose(weighted.predict(X), dropped.predict(X), rtol=1e-9)


def test_integer_weights_match_repeated_rows_in_float32(data):
    """Check weights equal repeated rows up to float32 rounding (float64 to
    1e-7 is scikit-learn's common check)."""
    X, y = data
    w = np.random.default_rng(2).integers(0, 4, len(X))
    kw = {"max_epochs": 10, "batch_size": -1, "random_state": 0, "lr": 1e-2}
    Xs, ys, ws = shuffle(X, y, w, random_state=0)
    weighted = HTAFNetRegressor((16,), **kw).fit(Xs, ys, sample_weight=ws)
    repeated = HTAFNetRegressor((16,), **kw).fit(X.repeat(w, 0), y.repeat(w, 0))
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-4)


@pytest.mark.parametrize(
    ("weight", "match"),
    [
        (-np.ones(90), "Negative"),
        (np.ones(89), "shape"),
        (np.zeros(90), "non-zero"),
        (np.full(90, np.nan), "NaN"),
        (np.ones((90, 2)), "1D"),
    ],
)
def test_bad_sample_weight_is_refused_and_leaves_the_fitted_net(data, weight, match):
    """Check bad weights raise a clear ValueError before anything changes."""
    X, y = data
    reg = HTAFNetRegressor((8,), max_epochs=2, random_state=0).fit(X, y)
    before = reg.predict(X)
    with pytest.raises(ValueError, match=match):
        reg.fit(X[:, ::-1] * 5, y, sample_weight=weight)
    np.testing.assert_array_equal(reg.predict(X), before)
    assert len(reg.history_) == 2


def test_sample_weight_needs_a_criterion_with_reduction(data):
    """Check a criterion without ``reduction`` is named in a TypeError."""

    class Plain(torch.nn.Module):
        def forward(self, pred, target):
            return ((pred - target) ** 2).mean()

    X, y = data
    reg = HTAFNetRegressor((8,), max_epochs=1, criterion=Plain, random_state=0)
    with pytest.raises(TypeError, match="reduction"):
        reg.fit(X, y, sample_weight=np.ones(len(X)))
    assert reg.fit(X, y).n_outputs_ == 2  # unweighted, the criterion serves


class _RecordAlpha0(Callback):
    def __init__(self):
        self.seen = []

    def on_epoch_begin(self, net, **kwargs):
        self.seen.append(net.module_.act0.alpha0)


def test_alpha0_follows_the_geometric_schedule_and_ends_at_alpha0(data):
    """Check each epoch's alpha0 is start * (alpha0/start)^(e/(n-1)) and
    epochs after the schedule train at alpha0."""
    X, y = data
    record = _RecordAlpha0()
    reg = HTAFNetRegressor(
        (8,),
        max_epochs=7,
        alpha0=3.0,
        alpha0_start=0.1,
        anneal_epochs=5,
        random_state=0,
        callbacks=[("record", record)],
    ).fit(X, y)
    expected = [0.1 * 30.0 ** (e / 4) for e in range(5)] + [3.0, 3.0]
    np.testing.assert_allclose(record.seen, expected, rtol=1e-12)
    assert {m.alpha0 for m in reg.module_.modules() if isinstance(m, HTAF)} == {3.0}


def test_short_fits_compress_the_schedule():
    """Check a fit shorter than anneal_epochs still ends at alpha0."""
    cb = AlphaAnnealing(0.5, epochs=16)
    assert cb.alpha0_at(0, 2.0, max_epochs=3) == 0.5
    assert cb.alpha0_at(2, 2.0, max_epochs=3) == pytest.approx(2.0)
    assert cb.alpha0_at(0, 2.0, max_epochs=1) == 2.0


def test_annealing_defaults_differ_by_task():
    """Check the regressor anneals by default (from 0.05 over 16 epochs) and
    the classifier's MLP does not ("auto" anneals the deep image nets only)."""
    reg = HTAFNetRegressor((4,), max_epochs=30).initialize_for(3)
    clf = HTAFNetClassifier((4,), max_epochs=30).initialize_for(3, classes=[0, 1])
    reg_cb = dict(reg.callbacks_)["alpha_annealing"]
    assert (reg_cb.start, reg_cb.epochs) == (0.05, 16)
    assert "alpha_annealing" not in dict(clf.callbacks_)
    assert "alpha_annealing" not in dict(
        reg.set_params(alpha0_start=None).initialize().callbacks_
    )


def test_inference_modes_are_the_step_and_the_smooth_function(data):
    """Check "step" predicts through bits and "smooth" through HTAF itself,
    switchable after fit without refitting."""
    X, y = data
    reg = HTAFNetRegressor((8,), max_epochs=3, random_state=0).fit(X, y)
    module = reg.module_.eval()
    x = torch.as_tensor(X, dtype=torch.float32)
    with torch.no_grad():
        hidden = module.act0(module.fc0(x))
        step = module(x).double().numpy()
        with force_step_mode(module, "smooth"):
            smooth = module(x).double().numpy()
    assert set(np.unique(hidden.numpy())) <= {0.0, 1.0}
    scale, mean = reg.target_scale_, reg.target_mean_
    np.testing.assert_allclose(reg.predict(X), step * scale + mean, rtol=1e-12)
    reg.set_params(inference="smooth")
    np.testing.assert_allclose(reg.predict(X), smooth * scale + mean, rtol=1e-12)
    assert not np.allclose(smooth, step)
    assert reg.set_params(inference="step").predict(X) == pytest.approx(
        step * scale + mean
    )
    with pytest.raises(InvalidParameterError, match="inference"):
        reg.set_params(inference="soft").fit(X, y)


def test_early_stopping_restores_the_best_epoch(data):
    """Check early stopping holds out a seeded split, stops, and leaves the
    weights of the epoch with the lowest validation loss."""
    X, _ = data
    noise = np.random.default_rng(3).normal(size=len(X))
    kw = {"max_epochs": 200, "early_stopping": True, "n_iter_no_change": 3}
    reg = HTAFNetRegressor((64,), random_state=0, lr=3e-2, **kw).fit(X, noise)
    valid = reg.history_[:, "valid_loss"]
    assert len(valid) < 200
    _, ds_valid = reg.get_split_datasets(
        X.astype(np.float32),
        ((noise - reg.target_mean_) / reg.target_scale_)[:, None].astype(np.float32),
    )
    Xv, yv = (np.stack(a) for a in zip(*(ds_valid[i] for i in range(len(ds_valid)))))
    assert len(Xv) == round(0.1 * len(X))
    pred = (reg.predict(Xv) - reg.target_mean_) / reg.target_scale_
    assert np.mean((pred - yv.ravel()) ** 2) == pytest.approx(min(valid), rel=1e-5)
    again = HTAFNetRegressor((64,), random_state=0, lr=3e-2, **kw).fit(X, noise)
    assert again.history_[:, "valid_loss"] == valid


def test_early_stopping_refuses_a_second_split(data):
    """Check early_stopping with train_split set is named in the error."""
    from skorch.dataset import ValidSplit

    X, y = data
    reg = HTAFNetRegressor((4,), early_stopping=True, train_split=ValidSplit(5))
    with pytest.raises(InvalidParameterError, match="train_split"):
        reg.fit(X, y)


def test_float64_nets_train_and_predict_in_float64(data):
    """Check dtype="float64" gives float64 weights and rows, and equals the
    float32 net up to float32 rounding at the start of training."""
    X, y = data
    reg = HTAFNetRegressor((8,), max_epochs=1, dtype="float64", random_state=0)
    reg.fit(X, y)
    assert {p.dtype for p in reg.module_.parameters()} == {torch.float64}
    f32 = HTAFNetRegressor((8,), max_epochs=1, random_state=0).fit(X, y)
    np.testing.assert_allclose(reg.predict(X), f32.predict(X), rtol=1e-3)


def test_docstring_states_the_new_defaults():
    """Check each parameter's documented default equals the signature's."""
    for cls in (HTAFNetClassifier, HTAFNetRegressor):
        params = inspect.signature(cls).parameters
        doc = cls.__doc__
        for name in ("lr", "lr_schedule", "alpha0_start", "anneal_epochs"):
            default = params[name].default
            shown = f'"{default}"' if isinstance(default, str) else f"{default:g}"
            shown = shown.replace("0.001", "1e-3")
            assert re.search(rf"\n\s*{name} : [^\n]*, default={shown}\n", doc), name
        assert 'inference : {"step", "smooth"}, default="step"' in doc
    assert "early_stopping : bool, default=False" in HTAFNetRegressor.__doc__
