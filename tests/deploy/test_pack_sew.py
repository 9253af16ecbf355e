"""pack() of the spiking SEW-ResNet: spikes as bits, time folded into rows."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from sksign._threads import run_in_threads
from sksign.deploy import PackedNet, load, pack, packed_summary, save
from sksign.deploy._maps import fire_maps, gate_pixels, pack_pixels
from sksign.estimators import HTAFNetClassifier
from sksign.nn.layers.spiking import IFNeuron, LIFNeuron


def _serial(kernel, n_rows, *args):
    kernel(*args, 0, n_rows)


# name: (architecture params, time steps, input shape, inputs)
NETS = {
    # an identity block in layer1 (the "add" stream grows to 0..3 counts)
    "add_if": (
        {"width": 5, "blocks": (2, 1, 1, 1), "connect": "add", "neuron": "if"},
        4,
        (1, 8, 8),
        "digits",
    ),
    "add_lif_t1": (
        {
            "width": 4,
            "blocks": (1, 1, 1, 1),
            "connect": "add",
            "neuron": "lif",
            "tau": 3.0,
            "reset": "zero",
            "threshold": 0.7,
        },
        1,
        (3, 11, 11),
        "random",
    ),
    "iand_if_t1": (
        {"width": 5, "blocks": (1, 2, 1, 1), "connect": "iand", "reset": "zero"},
        1,
        (1, 8, 8),
        "digits",
    ),
    "iand_lif": (
        {
            "width": 4,
            "blocks": (1, 1, 1, 1),
            "connect": "iand",
            "neuron": "lif",
            "tau": 1.5,
        },
        4,
        (3, 9, 9),
        "random",
    ),
    "and_if": (
        {"width": 3, "blocks": (1, 1, 1, 1), "connect": "and", "threshold": 0.5},
        3,
        (1, 8, 8),
        "digits",
    ),
    # 9 * 8 = 72 channels in layer4: two words per pixel
    "add_wide": ({"width": 9, "blocks": (1, 1, 1, 1)}, 2, (3, 8, 8), "random"),
}


def _inputs(kind, shape, n=48):
    if kind == "digits":
        from sklearn.datasets import load_digits

        X, _ = load_digits(return_X_y=True)
        return (X[:n] / 16.0).astype(np.float32).reshape(n, *shape)
    rng = np.random.default_rng(sum(shape))
    return rng.random((n, *shape), dtype=np.float32)


def _calibrate(module, X, seed):
    """Set each BatchNorm, in forward order, so its neurons fire often.

    The running statistics become those of the BatchNorm's eval-mode input on
    `X`; the affine parameters are seeded (one negative scale per layer), the
    shifts put the currents around the threshold.
    """
    gen = torch.Generator().manual_seed(seed)
    xt = torch.as_tensor(X)
    module.eval()
    for bn in [m for m in module.modules() if isinstance(m, torch.nn.BatchNorm2d)]:
        seen = []
        handle = bn.register_forward_hook(
            lambda _m, args, _o, seen=seen: seen.append(args[0])
        )
        with torch.no_grad():
            module(xt)
        handle.remove()
        x, c = seen[0], bn.num_features
        with torch.no_grad():
            bn.running_mean.copy_(x.mean(dim=(0, 2, 3)))
            bn.running_var.copy_(x.var(dim=(0, 2, 3)) + 1e-3)
            bn.weight.copy_(torch.rand(c, generator=gen) * 1.5 + 0.25)
            bn.weight[0] = -bn.weight[0]
            bn.bias.copy_(torch.rand(c, generator=gen) * 1.2)


def _net(params, time_steps, shape, X=None, seed=1):
    net = HTAFNetClassifier(
        architecture="sew_resnet",
        architecture_params=params,
        time_steps=time_steps,
        random_state=0,
    ).initialize_for(int(np.prod(shape)), classes=list(range(10)), input_shape=shape)
    if X is not None:
        _calibrate(net.module_, X, seed)
    return net


@pytest.fixture(scope="module")
def nets():
    out = {}
    for name, (params, t, shape, kind) in NETS.items():
        X = _inputs(kind, shape)
        out[name] = (_net(params, t, shape, X[:32]), X)
    return out


def _spike_layers(net):
    return [g for g in net.layers if g["op"] in ("pixel_neuron", "pixel_gate")]


@pytest.mark.parametrize("name", sorted(NETS))
def test_packed_predictions_equal_torch_on_every_sample(nets, name):
    """Check pack(net).predict == net.predict on every sample, logits close."""
    net, X = nets[name]
    packed = pack(net)
    assert packed.net_.graph["architecture"] == "sew_resnet"
    np.testing.assert_array_equal(packed.predict(X), net.predict(X))
    logits = packed.decision_function(X)
    # the readout sums spike counts: equal bits give equal logits
    close = np.isclose(logits, net.decision_function(X), rtol=1e-5, atol=1e-6)
    assert close.all(axis=1).mean() >= 0.95
    assert np.ptp(logits, axis=0).max() > 1e-3  # the inputs reach the readout
    # the neurons fire, not all of them
    keep = [g["output"] for g in _spike_layers(packed.net_)]
    values = packed.net_.forward(X.reshape(len(X), -1), keep=keep)
    rates = [packed.net_.unpack(k, values[k]).mean() for k in keep]
    assert 0.02 < np.mean(rates) < 0.9


def _channels_last(t):
    """A torch map ``(..., C, H, W)`` as packed rows ``(rows, H * W * C)``."""
    v = t.reshape(-1, *t.shape[-3:]).numpy()
    return np.ascontiguousarray(v.transpose(0, 2, 3, 1)).reshape(len(v), -1)


@pytest.mark.parametrize("name", sorted(NETS))
def test_every_spike_layer_equals_torch(nets, name):
    """Check each layer of neurons on torch's own currents, bit for bit.

    The membrane arithmetic is torch's (float32, same order), so the spikes
    of a layer fed torch's currents are exactly torch's, at every step; the
    spikes of the packed net run end to end agree with torch's too (up to
    a current within float32 rounding of a threshold).
    """
    net, X = nets[name]
    module = net.module_.eval()
    packed = pack(net).net_
    inputs, outputs = {}, {}

    def hook(layer_name):
        def record(_m, args, out):
            inputs[layer_name], outputs[layer_name] = args, out

        return record

    handles = [
        m.register_forward_hook(hook(n))
        for n, m in module.named_modules()
        if isinstance(m, IFNeuron) or (n.count(".") == 1 and n.startswith("layer"))
    ]
    with torch.no_grad():
        module(torch.as_tensor(X))
    for h in handles:
        h.remove()
    keep = [g["output"] for g in _spike_layers(packed)]
    ours = packed.forward(X.reshape(len(X), -1), keep=keep)
    n_layers = n_bits = n_off = 0
    for layer in _spike_layers(packed):
        name_ = layer["name"]
        ref = outputs[name_].reshape(-1, *outputs[name_].shape[-3:]).numpy()
        ref = ref.reshape(len(ref), -1).astype(np.uint8)
        assert set(np.unique(ref)) <= {0, 1}  # every spike map is bits
        n_off += int((packed.unpack(name_, ours[name_]) != ref).sum())
        n_bits += ref.size
        if layer["op"] == "pixel_neuron":
            current = inputs[name_][0]
            if layer["attrs"]["constant"]:
                current = current[:, 0]  # the stem's current, every step
            env = {layer["inputs"][0]: _channels_last(current)}
            got = packed._run(layer, env, len(X), 1)
            np.testing.assert_array_equal(packed.unpack(name_, got), ref, err_msg=name_)
            n_layers += 1
    assert n_layers >= 9
    assert n_off <= 1e-4 * n_bits


@pytest.mark.parametrize("name", ["add_if", "iand_lif"])
def test_batch_of_one_and_chunks_give_the_same_predictions(nets, name, monkeypatch):
    """Check one row at a time, chunks of samples and two threads agree."""
    net, X = nets[name]
    packed = pack(net)
    full = packed.decision_function(X)
    one = np.concatenate([packed.decision_function(X[i : i + 1]) for i in range(6)])
    np.testing.assert_allclose(one, full[:6], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(packed.predict(X[:1]), net.predict(X[:1]))
    monkeypatch.setattr("sksign.deploy._runtime.MAP_CHUNK", 5)
    np.testing.assert_allclose(packed.decision_function(X), full, rtol=1e-6, atol=1e-6)
    monkeypatch.setattr("sksign.deploy._runtime.PARALLEL_MIN_WORK", 0)
    two = packed.set_params(n_jobs=2).decision_function(X)
    np.testing.assert_allclose(two, full, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n_threads", [1, 2, 6])
def test_chunks_run_side_by_side_with_the_outputs_of_one_thread(
    nets, n_threads, monkeypatch
):
    """Check a batch of several chunks runs them side by side, each on its
    share of the threads, the chunks set by the batch alone: the outputs on
    any number of threads are those of one thread, bit for bit."""
    from sksign.deploy import _runtime

    net, X = nets["add_if"]
    packed = pack(net).net_
    monkeypatch.setattr(_runtime, "MAP_CHUNK", 4)
    X = X[:10]
    one = packed.forward(X, 1)
    calls = []

    def spy(func, tasks, n):
        tasks = list(tasks)
        calls.append(([len(t[0]) for t in tasks], [t[1] for t in tasks], n))
        return run_in_threads(func, tasks, n)

    monkeypatch.setattr(_runtime, "run_in_threads", spy)
    np.testing.assert_array_equal(packed.forward(X, n_threads), one)
    # 10 samples in 3 chunks; at most 3 at once, the threads shared out
    together = min(n_threads, 3)
    assert calls == [([3, 3, 4], [max(1, n_threads // together)] * 3, together)]


@pytest.mark.parametrize("name", sorted(NETS))
def test_round_trip_through_a_file(nets, tmp_path, name):
    """Check save -> load keeps the graph and the predictions."""
    net, X = nets[name]
    packed = pack(net)
    again = load(save(packed, tmp_path / f"{name}.sksign"))
    assert again.net_.graph == packed.net_.graph
    np.testing.assert_array_equal(
        again.decision_function(X), packed.decision_function(X)
    )
    np.testing.assert_array_equal(again.predict(X), net.predict(X))


def test_load_and_predict_without_torch(nets, tmp_path, predict_without_torch):
    """Check a fresh process loads a packed SEW-ResNet and predicts, no torch."""
    net, X = nets["add_if"]
    path = save(pack(net), tmp_path / "sew.sksign")
    labels = predict_without_torch(path, X[:5])
    assert labels == [str(v) for v in net.predict(X[:5])]


def _small():
    return _net({"width": 2, "blocks": (1, 1, 1, 1)}, 2, (1, 8, 8))


def test_unsupported_pieces_are_refused_naming_the_layer():
    """Check a foreign connection, neuron or smooth spike function is refused."""
    net = _small()
    net.module_.layer2[0].connect = "or"
    with pytest.raises(ValueError, match=r"'layer2.0'.*connect.*'or'"):
        pack(net)
    net = _small()
    net.module_.layer1[0].sn1 = torch.nn.ReLU()
    with pytest.raises(ValueError, match=r"SEWResNet.*'layer1.0.sn1'.*ReLU"):
        pack(net)

    class Neuron(IFNeuron):
        pass

    net = _small()
    net.module_.layer3[0].sn_down = Neuron()
    with pytest.raises(ValueError, match=r"'layer3.0.sn_down'.*Neuron"):
        pack(net)
    net = _small()
    net.module_.sn_stem.mode = "smooth"
    with pytest.raises(ValueError, match=r"'sn_stem'.*smooth"):
        pack(net)
    net = _small()
    net.module_.layer4[0].conv2[0] = torch.nn.Conv2d(16, 16, 3, padding=1, bias=False)
    net.module_.layer4[0].conv2[1] = torch.nn.Identity()
    with pytest.raises(ValueError, match=r"'layer4.0.conv2'.*BatchNorm2d"):
        pack(net)


def _graph(net):
    return json.loads(json.dumps(net.graph))


def test_spiking_layers_are_validated(nets):
    """Check neuron and gate attributes, and rows per sample, on construction."""
    packed = pack(nets["iand_lif"][0]).net_
    tensors = packed.tensors
    bad_neuron = [
        ("neuron", "izhikevich", "invalid neuron attributes"),
        ("tau", 0.0, "invalid neuron attributes"),
        ("reset", "half", "invalid neuron attributes"),
        ("time_steps", 0, "invalid neuron attributes"),
        ("time_steps", 3, "simulates 3 steps"),
        ("threshold", -1.0, "positive threshold"),
        ("constant", True, "'constant' contradicts"),
        ("tau", "2", "must be float"),
    ]
    for key, value, message in bad_neuron:
        graph = _graph(packed)
        layer = next(g for g in graph["layers"] if g["name"] == "layer1.0.sn1")
        layer["attrs"][key] = value
        with pytest.raises(ValueError, match=message):
            PackedNet(graph, tensors)
    graph = _graph(packed)
    gate = next(g for g in graph["layers"] if g["op"] == "pixel_gate")
    gate["attrs"]["connect"] = "or"
    with pytest.raises(ValueError, match="connect 'or' is not one of"):
        PackedNet(graph, tensors)
    graph = _graph(packed)
    mean = next(g for g in graph["layers"] if g["op"] == "time_mean")
    mean["attrs"]["time_steps"] = 1
    with pytest.raises(ValueError, match="averages the wrong number of steps"):
        PackedNet(graph, tensors)
    graph = _graph(packed)
    graph["output"] = "out"  # T rows per sample, not one
    with pytest.raises(ValueError, match="one row per sample"):
        PackedNet(graph, tensors)


def test_a_gate_of_maps_of_two_shapes_is_refused():
    """Check pixel_gate refuses inputs of equal width but different shapes."""
    a, b = [2, 4, 4], [8, 2, 2]
    specs = [
        ("a", "to_nhwc", ["input"], {"shape": a}),
        ("b", "to_nhwc", ["input"], {"shape": b}),
        ("sa", "pixel_step", ["a"], {"shape": a}),
        ("sb", "pixel_step", ["b"], {"shape": b}),
        ("g", "pixel_gate", ["sa", "sb"], {"shape": a, "connect": "iand"}),
        ("p", "bit_global_avg_pool", ["g"], {"shape": a, "out": 2}),
    ]
    layers = [
        {"name": n, "op": op, "inputs": i, "attrs": at, "output": n, "tensors": {}}
        for n, op, i, at in specs
    ]
    graph = {
        "format": "sksign-packed", "version": 1, "estimator": "regressor",
        "n_features_in": 32, "layers": layers, "output": "p",
    }  # fmt: skip
    with pytest.raises(ValueError, match="reads maps of different shapes"):
        PackedNet(graph, {})
    layers[1]["attrs"]["shape"] = layers[3]["attrs"]["shape"] = a
    out = PackedNet(graph, {}).forward(np.ones((1, 32), np.float32))
    np.testing.assert_array_equal(out, [[0.0, 0.0]])  # s & ~s


def _rewrite(path, mutate):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    mutate(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


def test_a_changed_file_is_refused_on_load(nets, tmp_path):
    """Check a neuron attribute changed in the file fails the checks on load."""
    path = save(pack(nets["add_if"][0]), tmp_path / "m.sksign")

    def reset(header):
        graph = json.loads(header["__metadata__"]["graph"])
        layer = next(g for g in graph["layers"] if g["op"] == "pixel_neuron")
        layer["attrs"]["reset"] = "zero"
        header["__metadata__"]["graph"] = json.dumps(graph)

    _rewrite(path, reset)
    with pytest.raises(ValueError, match=r"checksum|not a valid packed model"):
        load(path)


@given(
    seed=st.integers(0, 2**16),
    n=st.integers(1, 3),
    steps=st.integers(1, 6),
    channels=st.sampled_from([1, 3, 64, 70]),
    size=st.integers(1, 3),
    leaky=st.booleans(),
    reset=st.sampled_from(["subtract", "zero"]),
    constant=st.booleans(),
    threshold=st.sampled_from([1.0, 0.3, 1.1, 2.5]),
    tau=st.sampled_from([2.0, 3.0, 1.7, 1.0]),
)
def test_fire_maps_equals_the_torch_neurons(
    seed, n, steps, channels, size, leaky, reset, constant, threshold, tau
):
    """Check the membrane update, threshold >= and resets against torch, exactly.

    Currents of exactly the threshold, and exactly 0, are drawn too.
    """
    rng = np.random.default_rng(seed)
    shape = (n, 1 if constant else steps, channels, size, size)
    current = rng.normal(0.5, 1.0, size=shape).astype(np.float32)
    current[rng.random(shape) < 0.1] = np.float32(threshold)
    current[rng.random(shape) < 0.1] = 0.0
    if leaky:
        neuron = LIFNeuron(tau=tau, threshold=threshold, reset=reset)
    else:
        neuron = IFNeuron(threshold=threshold, reset=reset)
    x = torch.as_tensor(current).expand(n, steps, channels, size, size)
    with torch.no_grad():
        ref = neuron.eval()(x).numpy().reshape(n * steps, channels, size, size)
    attrs = {
        "time_steps": steps,
        "threshold": float(np.float32(threshold)),
        "reset": reset,
        "constant": constant,
        "neuron": "lif" if leaky else "if",
        "tau": float(np.float32(tau)),
    }
    rows = current.reshape(-1, channels, size, size).transpose(0, 2, 3, 1)
    words = fire_maps(rows.reshape(len(rows), -1), channels, attrs, _serial)
    expected = pack_pixels(
        ref.transpose(0, 2, 3, 1).reshape(n * steps, -1) - 0.5, channels, _serial
    )
    np.testing.assert_array_equal(words, expected)


@pytest.mark.parametrize("channels", [1, 5, 64, 70, 130])
def test_gate_pixels_equals_the_float_formulas(channels):
    """Check (1 - a) * s and a * s on packed words, padding bits zero."""
    rng = np.random.default_rng(channels)
    a = (rng.random((4, 3 * channels)) < 0.5).astype(np.float32)
    s = (rng.random((4, 3 * channels)) < 0.5).astype(np.float32)
    pa, ps = (pack_pixels(v - 0.5, channels, _serial) for v in (a, s))
    for connect, ref in (("iand", (1 - a) * s), ("and", a * s)):
        got = gate_pixels(pa, ps, connect)
        np.testing.assert_array_equal(got, pack_pixels(ref - 0.5, channels, _serial))


def test_packed_summary_lists_the_spiking_layers(nets):
    """Check packed_summary reads a SEW-ResNet (T rows of bits per sample)."""
    packed = pack(nets["add_if"][0])
    rows, table = packed_summary(packed)
    by_name = {r["layer"]: r for r in rows}
    sn1 = by_name["layer1.0.sn1"]
    assert sn1["arithmetic"] == "integrate, fire"
    # 4 steps of 5 x 8 x 8 spikes, one bit each
    assert sn1["act_bytes_packed"] == 4 * 5 * 8 * 8 // 8
    assert by_name["layer1.0"]["op"] == "add"
    assert "layer4.0.sn2" in table


def test_spiking_mlp_with_one_time_step_is_packed(digits):
    """Check a spiking MLP with T = 1 packs (every layer has one row per sample)."""
    X, _, y, _ = digits
    net = HTAFNetClassifier(
        (16, 16), architecture="snn", time_steps=1, max_epochs=1, random_state=0
    ).fit(X[:200], y[:200])
    np.testing.assert_array_equal(pack(net).predict(X), net.predict(X))


@pytest.mark.parametrize(("tau", "threshold"), [(3.0, 0.3), (1.7, 1.0), (1.7, 1.1)])
def test_leak_divides_by_tau_as_torch(tau, threshold):
    """Check currents next to ``threshold * tau``: ``I / tau`` is torch's division.

    Among these currents, one fires after a true float32 division but not
    after a product with ``1 / tau``: the packed neuron fires as torch does.
    """
    base = np.float32(threshold * tau)
    steps = np.arange(-5000, 5000).astype(np.float32) * np.spacing(base)
    current = (base + steps).astype(np.float32).reshape(1, 1, -1, 1, 1)
    with torch.no_grad():
        ref = LIFNeuron(tau=tau, threshold=threshold).eval()(torch.as_tensor(current))
    ref = ref.numpy().reshape(1, -1)
    attrs = {
        "time_steps": 1, "threshold": float(np.float32(threshold)),
        "reset": "subtract", "constant": True, "neuron": "lif",
        "tau": float(np.float32(tau)),
    }  # fmt: skip
    n = ref.shape[1]
    words = fire_maps(current.reshape(n, 1), 1, attrs, _serial)
    got = (words.reshape(-1) >> np.uint64(7)).astype(np.uint8)  # unit 0: bit 7
    np.testing.assert_array_equal(got, ref[0])
    product = current.reshape(-1) * (np.float32(1) / np.float32(tau))
    assert ((product >= np.float32(threshold)) != ref[0]).any()
