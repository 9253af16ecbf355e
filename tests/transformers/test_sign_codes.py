"""Tests for SignCodeTransformer."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)
from skorch import NeuralNetClassifier
from torch import nn

from sksign.estimators import HTAFNetClassifier
from sksign.transformers import SignCodeTransformer


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _data(n=60, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return X, y


def _tiny_net(**kw):
    params = {
        "activation": "relu",
        "max_epochs": 2,
        "random_state": 0,
        "batch_size": -1,
    }
    params.update(kw)
    return HTAFNetClassifier((8,), **params)


def _assert_clean(module):
    for m in module.modules():
        assert len(m._forward_pre_hooks) == 0
        assert len(m._forward_hooks) == 0


def _mlp_signs(mlp, X):
    """Hidden pre-activation signs of a scikit-learn MLP, in float64 numpy."""
    a = np.asarray(X, dtype=np.float64)
    act = {"relu": lambda z: np.maximum(z, 0), "tanh": np.tanh}[mlp.activation]
    out = []
    for W, b in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
        z = a @ W.astype(np.float64) + b
        out.append(z > 0)
        a = act(z)
    return out


# -- common checks -----------------------------------------------------------
@parametrize_with_checks(
    [
        SignCodeTransformer(_tiny_net()),
        SignCodeTransformer(_tiny_net(), layers="all", output="packed"),
        SignCodeTransformer(random_state=0),
    ],
    expected_failed_checks={},
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    """Check scikit-learn compatibility (common estimator checks)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


def test_param_validation():
    """Check that invalid parameters raise InvalidParameterError."""
    check_param_validation("SignCodeTransformer", SignCodeTransformer(_tiny_net()))


# -- correctness ---------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("prefit", [True, False])
def test_mlp_codes_equal_numpy_signs(activation, prefit):
    """Check that codes of a scikit-learn MLP equal signs computed from coefs_."""
    X, y = _data()
    mlp = MLPClassifier((7, 6), activation=activation, max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if prefit:
            mlp.fit(X, y)
        tr = SignCodeTransformer(mlp, layers="all", prefit=prefit).fit(X, y)
    fitted = tr.estimator_
    z0, z1 = _mlp_signs(fitted, X)
    codes = tr.transform(X)
    np.testing.assert_array_equal(codes, np.hstack([z0, z1]).astype(np.uint8))
    assert tr.layers_ == ["hidden0", "hidden1"]
    assert tr.get_feature_names_out()[7] == "hidden1_0"
    last = SignCodeTransformer(fitted, prefit=True).fit(X)
    np.testing.assert_array_equal(last.transform(X), z1)
    named = SignCodeTransformer(fitted, layers=["hidden0"], prefit=True).fit(X)
    np.testing.assert_array_equal(named.transform(X), z0)


def test_mlp_regressor_and_identity():
    """Check MLPRegressor and the identity activation (sign-preserving)."""
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = MLPRegressor(
            hidden_layer_sizes=(4,), activation="identity", max_iter=20, random_state=0
        )
        reg.fit(X, y.astype(float))
    codes = SignCodeTransformer(reg, prefit=True).fit_transform(X)
    z = X.astype(np.float64) @ reg.coefs_[0] + reg.intercepts_[0]
    np.testing.assert_array_equal(codes, z > 0)


def test_torch_sequential_codes_equal_numpy():
    """Check that a bare nn.Sequential's codes equal signs from its weights."""
    net = nn.Sequential(
        nn.Linear(5, 9), nn.ReLU(), nn.Linear(9, 6), nn.SiLU(), nn.Linear(6, 2)
    )
    X, _ = _data()
    W0, b0 = (p.detach().numpy().astype(np.float64) for p in net[0].parameters())
    W1, b1 = (p.detach().numpy().astype(np.float64) for p in net[2].parameters())
    z0 = X.astype(np.float64) @ W0.T + b0
    h0 = np.maximum(z0, 0)
    z1 = h0 @ W1.T + b1
    tr = SignCodeTransformer(net, layers="all").fit(X)
    np.testing.assert_array_equal(tr.transform(X), np.hstack([z0 > 0, z1 > 0]))
    assert tr.layers_ == ["1", "3"]
    assert tr.estimator_ is not net  # a deep copy
    _assert_clean(net)


def test_htaf_net_bits_come_from_activation_input():
    """Check that an HTAF net's bits are its pre-activation signs."""
    X, y = _data()
    net = _tiny_net(activation="htaf").fit(X, y)
    tr = SignCodeTransformer(net, prefit=True).fit(X)
    fc = net.module_.fc0
    with torch.no_grad():
        z = fc(torch.from_numpy(X)).numpy()
    np.testing.assert_array_equal(tr.transform(X), z > 0)
    assert tr.layers_ == ["act0"]


def test_layer_specs_on_sksign_net():
    """Check layers 'last', 'all', names, type and wildcards on an sksign net."""
    X, y = _data()
    net = HTAFNetClassifier(
        (6, 4), activation="gelu", max_epochs=1, random_state=0
    ).fit(X, y)
    full = SignCodeTransformer(net, layers="all", prefit=True).fit(X)
    assert full.layers_ == ["act0", "act1"]
    assert full.n_bits_ == 10
    codes = full.transform(X)
    cases = {
        "last": codes[:, 6:],
        "act0": codes[:, :6],
        "act*": codes,
        nn.GELU: codes,
    }
    for spec, expected in cases.items():
        tr = SignCodeTransformer(net, layers=spec, prefit=True).fit(X)
        np.testing.assert_array_equal(tr.transform(X), expected)
    fc = SignCodeTransformer(net, layers=["fc1"], prefit=True).fit(X)
    np.testing.assert_array_equal(fc.transform(X), codes[:, 6:])


def test_cnn_quadrant_codes_and_names():
    """Check quadrant pooled conv codes and their names on an sksign CNN."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 36)).astype(np.float32)
    y = rng.integers(0, 2, 20)
    net = HTAFNetClassifier(
        (4,), architecture="cnn", conv_channels=(3,), max_epochs=1, random_state=0
    ).fit(X, y)
    tr = SignCodeTransformer(net, layers="conv_act0", prefit=True).fit(X)
    assert tr.n_bits_ == 12
    names = tr.get_feature_names_out()
    assert list(names[:5]) == [
        "conv_act0_c0q0",
        "conv_act0_c0q1",
        "conv_act0_c0q2",
        "conv_act0_c0q3",
        "conv_act0_c1q0",
    ]
    with torch.no_grad():
        cnn = net.module_
        z = cnn.conv0(cnn.unflatten(torch.from_numpy(X))).numpy()  # (20, 3, 6, 6)
    quads = [z[:, :, :3, :3], z[:, :, :3, 3:], z[:, :, 3:, :3], z[:, :, 3:, 3:]]
    expected = np.stack([2 * (q > 0).sum((2, 3)) >= 9 for q in quads], -1)
    np.testing.assert_array_equal(tr.transform(X), expected.reshape(20, 12))


@pytest.mark.parametrize("output", ["bits", "signs", "packed"])
def test_outputs_consistent(output):
    """Check that bits, signs and packed outputs carry the same code."""
    X, y = _data()
    net = _tiny_net().fit(X, y)
    bits = SignCodeTransformer(net, layers="all", prefit=True).fit_transform(X)
    tr = SignCodeTransformer(net, layers="all", prefit=True, output=output).fit(X)
    out = tr.transform(X)
    assert tr.n_bits_ == bits.shape[1] == 8
    if output == "bits":
        assert out.dtype == np.uint8
        assert set(np.unique(out)) <= {0, 1}
        np.testing.assert_array_equal(out, bits)
    elif output == "signs":
        assert out.dtype == np.int8
        np.testing.assert_array_equal(out, 2 * bits.astype(np.int8) - 1)
    else:
        assert out.dtype == np.uint8
        assert out.shape == (len(X), 1)
        unpacked = np.unpackbits(out, axis=1, count=tr.n_bits_)
        np.testing.assert_array_equal(unpacked, bits)
        assert list(tr.get_feature_names_out()) == ["signcodetransformer0"]


def test_packed_with_odd_bit_count():
    """Check packing pads the last byte when n_bits_ is not a multiple of 8."""
    X, y = _data()
    net = HTAFNetClassifier((11,), activation="relu", max_epochs=1, random_state=0)
    tr = SignCodeTransformer(net, output="packed").fit(X, y)
    out = tr.transform(X)
    assert tr.n_bits_ == 11
    assert out.shape == (len(X), 2)
    bits = SignCodeTransformer(tr.estimator_, prefit=True).fit_transform(X)
    np.testing.assert_array_equal(np.unpackbits(out, axis=1, count=11), bits)
    assert not (np.unpackbits(out, axis=1)[:, 11:]).any()


def test_feature_names_and_pandas_output():
    """Check feature names in and out, and set_output(transform='pandas')."""
    pd = pytest.importorskip("pandas")
    X, y = _data()
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    tr = SignCodeTransformer(_tiny_net(), layers="all").set_output(transform="pandas")
    out = tr.fit_transform(df, y)
    assert list(tr.feature_names_in_) == list(df.columns)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == [f"act0_{j}" for j in range(8)]
    assert list(out.index) == list(df.index)
    with pytest.raises(ValueError, match="input_features"):
        tr.get_feature_names_out(["a", "b", "c", "d", "e"])
    pipe = make_pipeline(
        SignCodeTransformer(_tiny_net()), MLPClassifier((3,), max_iter=5)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe.fit(df, y)
    assert pipe.predict(df).shape == (len(df),)


def test_batch_size_invariance_and_memmap(tmp_path):
    """Check that codes do not depend on batch_size and that memmaps work."""
    X, y = _data(n=103)
    net = _tiny_net().fit(X, y)
    ref = SignCodeTransformer(net, layers="all", prefit=True, batch_size=1000)
    ref = ref.fit(X).transform(X)
    for bs in (1, 7, 64):
        tr = SignCodeTransformer(net, layers="all", prefit=True, batch_size=bs)
        np.testing.assert_array_equal(tr.fit(X).transform(X), ref)
    mm = np.lib.format.open_memmap(
        tmp_path / "X.npy", mode="w+", dtype=np.float64, shape=X.shape
    )
    mm[:] = X
    mm.flush()
    ro = np.load(tmp_path / "X.npy", mmap_mode="r")
    tr = SignCodeTransformer(net, layers="all", prefit=True, batch_size=16).fit(X)
    np.testing.assert_array_equal(tr.transform(ro), ref)
    np.save(tmp_path / "X32.npy", X)
    ro32 = np.load(tmp_path / "X32.npy", mmap_mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "non-writable array" warning
        np.testing.assert_array_equal(tr.fit(ro32).transform(ro32), ref)


def test_float64_module():
    """Check that a float64 module gets float64 batches."""
    net = nn.Sequential(nn.Linear(5, 6), nn.ReLU()).double()
    X, _ = _data()
    with torch.no_grad():
        z = net[0](torch.from_numpy(X.astype(np.float64))).numpy()
    np.testing.assert_array_equal(SignCodeTransformer(net).fit_transform(X), z > 0)


def test_plain_skorch_net_and_device():
    """Check a plain skorch NeuralNetClassifier (read via module_) on a device."""
    X, y = _data()
    module = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 2))
    net = NeuralNetClassifier(
        module, criterion=nn.CrossEntropyLoss, max_epochs=1, train_split=None
    ).fit(X, y)
    tr = SignCodeTransformer(net, prefit=True, device="cpu").fit(X)
    with torch.no_grad():
        z = net.module_[0](torch.from_numpy(X)).numpy()
    np.testing.assert_array_equal(tr.transform(X), z > 0)
    unfitted = NeuralNetClassifier(module, criterion=nn.CrossEntropyLoss)
    tr = SignCodeTransformer(unfitted, layers="all").fit(X, y)
    assert tr.n_bits_ == 6


class TokenModel(nn.Module):
    """Embedding -> Linear -> GELU -> mean pool -> Linear, with a padding mask."""

    def __init__(self, vocab=10, dim=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.fc = nn.Linear(dim, 5)
        self.act = nn.GELU()
        self.head = nn.Linear(5, 2)

    def forward(self, input_ids, attention_mask):
        assert input_ids.dtype == torch.int64
        h = self.act(self.fc(self.emb(input_ids)))
        m = attention_mask[..., None].float()
        return self.head((h * m).sum(1) / m.sum(1))


def test_forward_kwargs_token_ids_and_majority():
    """Check forward_kwargs with int token ids and padding-aware majority."""
    model = TokenModel()
    ids = np.array([[1, 2, 3, 4], [5, 6, 0, 0], [7, 0, 0, 0], [8, 9, 1, 0]])

    def to_kwargs(batch):
        return {"input_ids": batch, "attention_mask": (batch != 0).long()}

    with torch.no_grad():
        pos = (model.fc(model.emb(torch.from_numpy(ids))) > 0).numpy()
    mask = (ids != 0)[:, :, None]
    expected = {
        "majority": 2 * (pos & mask).sum(1) >= mask.sum(1),
        "first": pos[:, 0],
    }
    for pool, exp in expected.items():
        tr = SignCodeTransformer(
            model, token_pool=pool, forward_kwargs=to_kwargs, batch_size=3
        )
        np.testing.assert_array_equal(tr.fit(ids).transform(ids), exp)
    # token_pool=None: one row per real token, in order, with its index
    tr = SignCodeTransformer(model, forward_kwargs=to_kwargs, batch_size=3).fit(ids)
    codes, index = tr.transform_tokens(ids)
    np.testing.assert_array_equal(index, np.argwhere(ids != 0))
    np.testing.assert_array_equal(codes, pos[ids != 0])
    np.testing.assert_array_equal(tr.transform(ids), codes)
    _assert_clean(model)


def test_token_codes_without_mask_keep_every_token():
    """Check token_pool=None on (N, T, D) samples and no mask: every token."""
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    X = np.random.RandomState(0).randn(6, 5, 3).astype(np.float32)
    tr = SignCodeTransformer(net, batch_size=4).fit(X)
    codes, index = tr.transform_tokens(X)
    assert tr.per_token_
    assert tr.sample_shape_ == (5, 3)
    assert index.tolist() == [[i, t] for i in range(6) for t in range(5)]
    with torch.no_grad():
        pos = (net[0](torch.from_numpy(X)) > 0).numpy()
    np.testing.assert_array_equal(codes, pos.reshape(30, 4))
    # a net without token axis has no token codes
    flat = SignCodeTransformer(net).fit(X[:, 0])
    with pytest.raises(ValueError, match="on layers without a token axis"):
        flat.transform_tokens(X[:, 0])
    _assert_clean(net)
    # a Dask array's blocks would have rows that depend on their padding
    da = pytest.importorskip("dask.array")
    for method in (tr.transform, tr.transform_tokens):
        with pytest.raises(ValueError, match="Dask array are not supported"):
            method(da.from_array(X.reshape(6, 15), chunks=3))


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Linear(d, d)

    def forward(self, x):
        out = self.relu(self.fc1(x))
        return self.relu(self.fc2(out) + x)


@pytest.mark.parametrize(
    ("residual", "layers"),
    [
        ("int", ["1.relu", "2.relu"]),
        ("out", ["1", "2"]),
        ("both", ["1.relu", "1", "2.relu", "2"]),
    ],
)
def test_residual_blocks(residual, layers):
    """Check residual='int'|'out'|'both' on blocks given by type."""
    net = nn.Sequential(nn.Linear(5, 4), Block(4), Block(4), nn.Linear(4, 2))
    X, _ = _data()
    tr = SignCodeTransformer(net, layers=Block, residual=residual).fit(X)
    assert tr.layers_ == layers
    assert tr.transform(X).shape == (len(X), 4 * len(layers))


# -- errors ----------------------------------------------------------------------
class Sig(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 4)
        self.sig = nn.Sigmoid()
        self.fc2 = nn.Linear(4, 4)
        self.soft = nn.Softplus()
        self.relu = nn.ReLU()
        self.boom = False

    def forward(self, x):
        if self.boom:
            self.relu(x[:, :4])
            raise RuntimeError("boom")
        return self.relu(self.soft(self.fc2(self.sig(self.fc(x)))))


def test_bad_inputs_raise_and_leave_the_net_clean():
    """Check clear errors, and that a fitted transformer is unaffected after."""
    X, _y = _data()
    net = Sig()
    good = SignCodeTransformer(net, layers="all", batch_size=16).fit(X)
    ref = good.transform(X)
    module = good.estimator_
    bad = [
        ({"layers": ["nope"]}, ValueError, r"'nope' was not found.*available:.*relu"),
        ({"layers": ["sig"]}, ValueError, "Sigmoid, which is not sign-preserving"),
        ({"layers": nn.Softplus}, ValueError, "Softplus, which is not sign"),
        ({"layers": "fc*x"}, ValueError, "matched no module"),
        ({"token_pool": "first"}, ValueError, "token_pool='first' was given"),
    ]
    for params, exc, match in bad:
        with pytest.raises(exc, match=match):
            SignCodeTransformer(module, **params).fit(X)
        _assert_clean(module)
        np.testing.assert_array_equal(good.transform(X), ref)
    allowed = SignCodeTransformer(
        module, layers=["sig"], allow_non_sign_preserving=True
    ).fit(X)
    assert allowed.n_bits_ == 4

    X_nan = X.copy()
    X_nan[40, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        good.transform(X_nan)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        good.transform(X_nan.tolist())
    with pytest.raises(ValueError, match="X has 4 features"):
        good.transform(X[:, :4])
    np.testing.assert_array_equal(good.transform(X), ref)

    # an exception inside the forward pass: hooks removed, mode restored
    module.train()
    module.boom = True
    with pytest.raises(RuntimeError, match="boom"):
        good.transform(X)
    _assert_clean(module)
    assert all(m.training for m in module.modules())
    module.boom = False
    np.testing.assert_array_equal(good.transform(X), ref)


def test_unfitted_and_unreadable_estimators():
    """Check prefit=True on unfitted nets, logistic MLPs and unknown estimators."""
    X, y = _data()
    for est in (_tiny_net(), MLPClassifier()):
        with pytest.raises(NotFittedError, match=type(est).__name__):
            SignCodeTransformer(est, prefit=True).fit(X)
    with pytest.raises(ValueError, match="needs a fitted estimator"):
        SignCodeTransformer(prefit=True).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logistic = MLPClassifier((3,), activation="logistic", max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match=r"'logistic'.*not sign-preserving"):
        SignCodeTransformer(logistic, prefit=True).fit(X)
    codes = SignCodeTransformer(
        logistic, prefit=True, allow_non_sign_preserving=True
    ).fit_transform(X)
    z = X.astype(np.float64) @ logistic.coefs_[0] + logistic.intercepts_[0]
    np.testing.assert_array_equal(codes, z > 0)
    relu_mlp = clone(logistic).set_params(activation="relu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        relu_mlp.fit(X, y)
    with pytest.raises(ValueError, match=r"'nope' was not found.*hidden0"):
        SignCodeTransformer(relu_mlp, layers="nope", prefit=True).fit(X)
    with pytest.raises(ValueError, match="token_pool"):
        SignCodeTransformer(relu_mlp, token_pool="majority", prefit=True).fit(X)
    with pytest.raises(ValueError, match="not by type"):
        SignCodeTransformer(relu_mlp, layers=nn.ReLU, prefit=True).fit(X)
    with pytest.raises(ValueError, match="X has 4 features"):
        SignCodeTransformer(relu_mlp, prefit=True).fit(X[:, :4])
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(TypeError, match="reads sksign or skorch nets"):
        SignCodeTransformer(LogisticRegression()).fit(X, y)


@pytest.mark.slow  # importing transformers takes seconds
def test_hugging_face_bert_token_codes():
    """Check codes of a tiny random BERT: wildcards, GELUActivation, padding."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(
        vocab_size=30,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
    )
    bert = transformers.BertModel(cfg).eval()
    ids = np.array([[2, 5, 7, 9, 3], [2, 6, 3, 0, 0], [2, 8, 4, 1, 3]])

    def to_kwargs(batch):
        return {"input_ids": batch, "attention_mask": (batch != 0).long()}

    tr = SignCodeTransformer(
        bert,
        layers="encoder.layer.*.intermediate.*",
        token_pool="majority",
        forward_kwargs=to_kwargs,
        batch_size=2,
    ).fit(ids)
    assert tr.layers_ == [
        f"encoder.layer.{i}.intermediate.intermediate_act_fn" for i in range(2)
    ]
    zs = []
    handles = [
        bert.encoder.layer[i].intermediate.dense.register_forward_hook(
            lambda m, a, out: zs.append(out.detach().numpy())
        )
        for i in range(2)
    ]
    with torch.no_grad():
        bert(**to_kwargs(torch.from_numpy(ids)))
    for handle in handles:
        handle.remove()
    mask = (ids != 0)[:, :, None]
    expected = np.hstack([2 * ((z > 0) & mask).sum(1) >= mask.sum(1) for z in zs])
    np.testing.assert_array_equal(tr.transform(ids), expected)


def test_forward_errors_keep_their_type_and_message():
    """Check a model's own exception passes through forward_kwargs unchanged."""

    class TwoArgError(ValueError):
        def __init__(self, message, detail):
            super().__init__(message)
            self.detail = detail

    class Flaky(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.act, self.calls = nn.Linear(3, 3), nn.ReLU(), 0

        def forward(self, x):
            self.calls += 1
            if self.calls > 1:
                raise TwoArgError("the model's own error", "detail")
            return self.act(self.fc(x))

    X = np.zeros((2, 3), dtype=np.float32)
    tr = SignCodeTransformer(Flaky(), forward_kwargs=lambda b: {"x": b}).fit(X)
    with pytest.raises(TwoArgError, match="the model's own error") as err:
        tr.transform(X)
    assert err.value.detail == "detail"


class _BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock: one ReLU module called twice."""

    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Linear(width, width)
        self.bn1 = nn.BatchNorm1d(width)
        self.conv2 = nn.Linear(width, width)
        self.bn2 = nn.BatchNorm1d(width)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)


class _TinyResNet(nn.Module):
    """A stem, two stages of one BasicBlock each, a linear head."""

    def __init__(self, d=5, width=8):
        super().__init__()
        self.stem = nn.Linear(d, width)
        self.layer1 = nn.Sequential(_BasicBlock(width))
        self.layer2 = nn.Sequential(_BasicBlock(width))
        self.fc = nn.Linear(width, 2)

    def forward(self, x):
        return self.fc(self.layer2(self.layer1(self.stem(x))))


def test_a_module_called_twice_has_one_name_per_call_in_every_mode():
    """Check the calls of a reused ReLU module are named ``name``, ``name#1``
    whatever `layers` selects, and that ``layers_`` round-trips: fitted again
    with ``layers=tr.layers_``, the codes and feature names are the same."""
    torch.manual_seed(0)
    X, _ = _data(d=5)
    net = _TinyResNet().eval()
    last = SignCodeTransformer(net, prefit=True).fit(X)
    full = SignCodeTransformer(net, layers="all", prefit=True).fit(X)
    named = SignCodeTransformer(net, layers=["layer2.0.relu"], prefit=True).fit(X)
    assert last.layers_ == ["layer2.0.relu#1"]
    assert full.layers_ == [
        "layer1.0.relu",
        "layer1.0.relu#1",
        "layer2.0.relu",
        "layer2.0.relu#1",
    ]
    assert named.layers_ == full.layers_[2:]
    names_full = list(full.get_feature_names_out())
    codes_full = full.transform(X)
    # the last call's bits carry the same names and values in every mode
    assert list(last.get_feature_names_out()) == names_full[-8:]
    assert names_full[-8] == "layer2.0.relu#1_0"
    np.testing.assert_array_equal(last.transform(X), codes_full[:, -8:])
    np.testing.assert_array_equal(named.transform(X), codes_full[:, 16:])
    for tr in (last, full, named):
        again = SignCodeTransformer(net, layers=tr.layers_, prefit=True).fit(X)
        assert again.layers_ == tr.layers_
        assert again.n_bits_ == tr.n_bits_
        assert list(again.get_feature_names_out()) == list(tr.get_feature_names_out())
        np.testing.assert_array_equal(again.transform(X), tr.transform(X))
    # one call by its key, and a call that does not happen
    one = SignCodeTransformer(net, layers="layer1.0.relu#1", prefit=True).fit(X)
    np.testing.assert_array_equal(one.transform(X), codes_full[:, 8:16])
    with pytest.raises(ValueError, match=r"'layer1.0.relu#2'.*called 2 time"):
        SignCodeTransformer(net, layers=["layer1.0.relu#2"], prefit=True).fit(X)
    _assert_clean(net)
