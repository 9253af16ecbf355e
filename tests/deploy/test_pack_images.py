"""pack() of the residual image nets: Bi-Real ResNet-18, WideResNet, ResNet-18."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import torch

from sksign.deploy import PackedClassifier, PackedNet, load, pack, save
from sksign.deploy._maps import pack_pixels
from sksign.estimators import HTAFNetClassifier

SIZE = {"big": 32, "small": 16}

# (architecture, params, activation, image size, perturbed BatchNorm)
NETS = {
    # awkward widths: channels not multiples of 8 or 64
    "bireal": ("bireal", {"width": 5}, "htaf", "big", False),
    # 9 * 8 = 72 channels in the last stage: two words per pixel
    "bireal_ste": ("bireal", {"width": 9}, "ste", "small", True),
    "wrn": ("wrn", {"depth": 10, "widen_factor": 1}, "htaf", "big", False),
    # 80, 160 and 320 channels
    "wrn_wide": ("wrn", {"depth": 10, "widen_factor": 5}, "htaf", "small", True),
    "resnet18_step": ("resnet18", {"width": 5}, "scaled_sigmoid", "small", True),
}


def _images(size):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    pad = (size - 8) // 2
    X = np.pad(X, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    return X[:96], y[:96], X[1500:1560]


def _perturb_batch_norms(module, seed):
    """Seeded BatchNorm statistics and affine parameters, negative scales too."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(torch.rand(c, generator=gen) * 3 - 1)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.3)
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.3)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)


@pytest.fixture(scope="module")
def fitted():
    nets = {}
    for name, (arch, params, act, size, perturb) in NETS.items():
        X, y, X_test = _images(SIZE[size])
        net = HTAFNetClassifier(
            architecture=arch,
            architecture_params=params,
            activation=act,
            max_epochs=1,
            batch_size=48,
            random_state=0,
        ).fit(X, y)
        if perturb:
            _perturb_batch_norms(net.module_, seed=1)
        nets[name] = (net, X_test)
    return nets


@pytest.mark.parametrize("name", sorted(NETS))
def test_packed_predictions_equal_torch_on_every_sample(fitted, name):
    """Check pack(net).predict == net.predict on every sample, logits close."""
    net, X = fitted[name]
    packed = pack(net)
    assert isinstance(packed, PackedClassifier)
    np.testing.assert_array_equal(packed.predict(X), net.predict(X))
    # a unit within float32 rounding of its threshold may fire in one and
    # not in the other, which moves that sample's logits a little
    close = np.isclose(
        packed.decision_function(X), net.decision_function(X), rtol=1e-4, atol=1e-4
    )
    assert close.all(axis=1).mean() >= 0.95
    # flat rows and images alike
    np.testing.assert_array_equal(
        packed.predict(X.reshape(len(X), -1)), packed.predict(X)
    )


def _torch_values(module, X):
    """Every module's output (and the input of each activation), by name."""
    outs, pre = {}, {}

    def hook(name):
        def record(_m, args, out):
            outs[name] = out.detach()
            pre[name] = args[0].detach()

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in module.named_modules() if n]
    try:
        with torch.no_grad():
            module.eval()(torch.as_tensor(X))
    finally:
        for h in handles:
            h.remove()
    return outs, pre


def _torch_name(layer, module):
    """The torch module (and "out" or "pre") whose value a packed layer computes."""
    name, op = layer["name"], layer["op"]
    if name == "nhwc":
        return "input", "out"
    if op == "bit_conv2d_step":  # conv, BatchNorm and step in one
        block = name.rsplit(".", 1)[0]
        wide = hasattr(module.get_submodule(block), "equal")
        return f"{block}.act2" if wide else f"{block}.act1", "out"
    if op == "xnor_conv2d":  # binary conv and BatchNorm in one
        return name.rsplit(".", 1)[0] + ".bn", "out"
    if name.endswith(".sum"):  # the input of the block's last step
        return name[: -len(".sum")] + ".act2", "pre"
    return name, "out"


def _ours(value, kind, channels=None):
    """A torch tensor in the packed layout (channels last, maps of bits packed)."""
    v = value.numpy()
    if v.ndim == 4:
        v = np.ascontiguousarray(v.transpose(0, 2, 3, 1)).reshape(len(v), -1)
    if kind == "pixel_bits":
        # 0/1 values: the step of v - 0.5
        return pack_pixels(v - 0.5, channels, lambda k, r, *a: k(*a, 0, r))
    return np.ascontiguousarray(v, dtype=np.float32)


@pytest.mark.parametrize("name", sorted(NETS))
def test_each_layer_equals_torch_on_torch_inputs(fitted, name):
    """Check every packed layer against torch, fed with torch's own inputs.

    Bits must be equal except where torch's pre-activation lies within float32
    rounding of the threshold; real values agree to float32 rounding.
    """
    from sksign.deploy._runtime import OPS

    net, X = fitted[name]
    module = net.module_
    packed = pack(net).net_
    n = 20
    values = _torch_values(module, X[:n])
    kinds, torch_of = {"input": "float"}, {}
    n_bits = n_near = n_float = 0
    ops = set()
    for layer in packed.layers:
        kind = kinds[layer["output"]] = OPS[layer["op"]][1]
        target = torch_of[layer["output"]] = _torch_name(layer, module)
        sources = [torch_of.get(s) for s in layer["inputs"]]
        if target[0] not in values[0] or not all(
            s == "input" or (t is not None and t[0] in values[0])
            for s, t in zip(layer["inputs"], sources)
        ):
            continue
        shape = layer.get("attrs", {}).get("shape", [None])
        env = {}
        for s, (src, which) in zip(layer["inputs"], [t or ("", "") for t in sources]):
            if s == "input":
                env[s] = X[:n].reshape(n, -1)
            else:
                table = values[0] if which == "out" else values[1]
                env[s] = _ours(table[src], kinds[s], shape[0])
        got = packed._run(layer, env, n, 1)
        ops.add(layer["op"])
        table = values[0] if target[1] == "out" else values[1]
        if kind == "pixel_bits":
            ref = table[target[0]].numpy().reshape(n, -1).astype(np.uint8)
            bad = packed.unpack(layer["output"], got) != ref
            z = values[1][target[0]].numpy().reshape(n, -1)
            # there torch's own bit is a float32 rounding decision
            assert np.abs(z[bad]).max(initial=0) < 1e-4, layer["name"]
            n_near += int(bad.sum())
            n_bits += ref.size
        else:
            ref = _ours(table[target[0]], "float")
            np.testing.assert_allclose(
                got, ref, rtol=1e-4, atol=2e-5, err_msg=layer["name"]
            )
            n_float += 1
    assert ops == {layer["op"] for layer in packed.layers}  # every kind checked
    assert n_bits > 1000
    assert n_float >= 4
    assert n_near <= 1e-4 * n_bits


@pytest.mark.parametrize("name", ["bireal", "wrn_wide", "resnet18_step"])
def test_batch_of_one_and_threads_give_the_same_predictions(fitted, name, monkeypatch):
    """Check rows one at a time and on two threads: the same bits and labels.

    The step layers on bits are exact whatever the batch; the real parts
    (stem, shortcuts, residual stream) are float32 products like torch's,
    whose last digit may depend on the batch.
    """
    net, X = fitted[name]
    packed = pack(net)
    X = X[:70]  # more than one chunk of samples
    full = packed.decision_function(X)
    one = np.concatenate([packed.decision_function(X[i : i + 1]) for i in range(8)])
    np.testing.assert_allclose(one, full[:8], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(one.argmax(1), full[:8].argmax(1))
    monkeypatch.setattr("sksign.deploy._runtime.PARALLEL_MIN_WORK", 0)
    two = packed.set_params(n_jobs=2).decision_function(X)
    np.testing.assert_allclose(two, full, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(packed.predict(X), net.predict(X))


@pytest.mark.parametrize("name", sorted(NETS))
def test_round_trip_through_a_file(fitted, tmp_path, name):
    """Check save -> load keeps the graph and the outputs of every image net."""
    net, X = fitted[name]
    packed = pack(net)
    again = load(save(packed, tmp_path / f"{name}.sksign"))
    assert again.net_.graph == packed.net_.graph
    np.testing.assert_array_equal(
        again.decision_function(X), packed.decision_function(X)
    )


def _rewrite(path, mutate):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = bytearray(data[8 + n :])
    mutate(header, body)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(body))


def test_tampered_image_files_are_refused(fitted, tmp_path):
    """Check a changed weight byte or layer geometry is detected on load."""
    path = save(pack(fitted["bireal"][0]), tmp_path / "m.sksign")
    original = path.read_bytes()

    def flip(header, body):
        start, _ = header["layer2.0.conv.weight_bits"]["data_offsets"]
        body[start] ^= 1

    _rewrite(path, flip)
    with pytest.raises(ValueError, match="checksum"):
        load(path)
    path.write_bytes(original)

    def stride(header, body):
        graph = json.loads(header["__metadata__"]["graph"])
        layer = next(g for g in graph["layers"] if g["name"] == "layer2.0.conv")
        layer["attrs"]["stride"] = 1
        header["__metadata__"]["graph"] = json.dumps(graph)

    _rewrite(path, stride)
    with pytest.raises(ValueError, match="not a valid packed model"):
        load(path)


def test_schema_of_map_layers_is_checked(fitted):
    """Check geometry, shapes and weight padding bits are validated."""
    net = pack(fitted["wrn"][0]).net_
    graph = json.loads(json.dumps(net.graph))
    conv = next(g for g in graph["layers"] if g["op"] == "bit_conv2d_step")
    conv["attrs"]["kernel"] = 5
    with pytest.raises(ValueError, match="outputs do not match its geometry"):
        PackedNet(graph, net.tensors)
    graph = json.loads(json.dumps(net.graph))
    step = next(g for g in graph["layers"] if g["op"] == "pixel_step")
    c, h, w = step["attrs"]["shape"]
    step["attrs"]["shape"] = [h, c, w]  # the same width, read the wrong way
    with pytest.raises(ValueError, match="reads maps of shape"):
        PackedNet(graph, net.tensors)
    bireal = pack(fitted["bireal"][0]).net_
    tensors = dict(bireal.tensors)
    key = "layer1.0.conv.weight_bits"
    bad = tensors[key].copy()
    bad[:, -1] |= 1  # a bit of the channel padding of the last tap
    tensors[key] = bad
    with pytest.raises(ValueError, match="padding bits"):
        PackedNet(bireal.graph, tensors)


def test_relu_resnet18_is_refused_naming_the_layer():
    """Check a ResNet-18 with ReLU raises naming its first activation."""
    net = HTAFNetClassifier(
        architecture="resnet18", architecture_params={"width": 4}, activation="relu"
    ).initialize_for(256, classes=[0, 1], input_shape=(1, 16, 16))
    with pytest.raises(ValueError, match=r"ResNet18.*'act1'.*ReLU, not a step"):
        pack(net)


def test_bireal_smooth_or_real_weights_are_refused():
    """Check a forced-smooth activation or real weights raise naming the layer."""
    net = HTAFNetClassifier(
        architecture="bireal", architecture_params={"width": 4}
    ).initialize_for(256, classes=[0, 1], input_shape=(1, 16, 16))
    net.module_.layer2[1].act.mode = "smooth"
    with pytest.raises(ValueError, match=r"'layer2.1.act'.*smooth"):
        pack(net)
    net = HTAFNetClassifier(
        architecture="bireal",
        architecture_params={"width": 4, "binary_weights": False},
    ).initialize_for(256, classes=[0, 1], input_shape=(1, 16, 16))
    with pytest.raises(ValueError, match=r"'layer1.0.conv'.*binary_weights"):
        pack(net)


@pytest.mark.parametrize(
    ("c_in", "c_out", "size", "stride"),
    [(3, 5, 7, 1), (70, 9, 5, 2), (64, 65, 4, 1), (1, 1, 3, 2)],
)
def test_xnor_conv_equals_a_float64_reference(c_in, c_out, size, stride):
    """Check the XNOR conv (zero padding of 2a - 1 included) on random bits.

    Awkward channel counts (not multiples of 8 or 64), stride 2, odd sizes,
    weights exactly 0 (sign +1) and a negative BatchNorm scale.
    """
    from sksign.deploy._convert_base import Builder as _Builder
    from sksign.deploy._convert_base import bn_affine as _bn_affine
    from sksign.deploy._convert_images import _Maps
    from sksign.nn.layers.binary import BinaryConv2d

    rng = np.random.default_rng(c_in + c_out)
    conv = BinaryConv2d(c_in, c_out, 3, stride, 1)
    with torch.no_grad():
        conv.weight.copy_(torch.as_tensor(rng.normal(size=conv.weight.shape)))
        conv.weight[0, 0] = 0.0
    a = (rng.random((3, c_in, size, size)) < 0.5).astype(np.float32)
    with torch.no_grad():
        ref = conv.double()(torch.as_tensor(2 * a - 1, dtype=torch.float64)).numpy()

    bn = torch.nn.BatchNorm2d(c_out).eval()
    with torch.no_grad():
        bn.weight.copy_(torch.as_tensor(rng.normal(size=c_out)))
    builder = _Builder(c_in * size * size)
    maps = _Maps(builder, [c_in, size, size])
    x = maps.add("nhwc", "to_nhwc", ["input"])
    x = maps.add(
        "shift",
        "channel_affine",
        [x],
        tensors={
            "scale": np.ones(c_in, np.float32),
            "shift": -0.5 * np.ones(c_in, np.float32),
        },
    )
    bits = maps.add("act", "pixel_step", [x], kind="pixel_bits")
    maps.xnor_conv("conv", conv.float(), "bn", bn, bits)
    graph = {
        "format": "sksign-packed", "version": 1, "estimator": "regressor",
        "n_features_in": c_in * size * size, "layers": builder.layers,
        "output": "conv",
    }  # fmt: skip
    out = PackedNet(graph, builder.tensors).forward(a.reshape(3, -1))
    scale, shift = _bn_affine("bn", bn, torch.nn.BatchNorm2d)
    expected = ref * scale[:, None, None] + shift[:, None, None]
    expected = expected.transpose(0, 2, 3, 1).reshape(3, -1)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_load_and_predict_an_image_net_without_torch(
    fitted, tmp_path, predict_without_torch
):
    """Check a fresh process loads a packed Bi-Real net and predicts, no torch."""
    net, X = fitted["bireal_ste"]
    path = save(pack(net), tmp_path / "bireal.sksign")
    labels = predict_without_torch(path, X[:5])
    assert labels == [str(v) for v in net.predict(X[:5])]
