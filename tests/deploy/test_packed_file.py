"""save() and load(): one safetensors-layout file, validated, never executed."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sksign.deploy import PackedRegressor, load, pack, save
from sksign.estimators import HTAFNetClassifier, HTAFNetRegressor


@pytest.fixture(scope="module")
def packed_bnn(digits):
    X_train, _, y_train, _ = digits
    net = HTAFNetClassifier((40, 70), architecture="bnn", max_epochs=1, random_state=0)
    return net.fit(X_train, y_train), pack(net.fit(X_train, y_train))


@pytest.fixture
def saved(packed_bnn, tmp_path):
    return save(packed_bnn[1], tmp_path / "bnn.sksign")


@pytest.fixture(scope="module")
def saved_once(packed_bnn, tmp_path_factory):
    return save(packed_bnn[1], tmp_path_factory.mktemp("io") / "bnn.sksign")


def test_round_trip_predicts_the_same(packed_bnn, saved, digits):
    """Check save -> load gives the same outputs and a small file."""
    _, X_test, _, _ = digits
    net, packed = packed_bnn
    again = load(saved)
    np.testing.assert_array_equal(
        again.decision_function(X_test), packed.decision_function(X_test)
    )
    np.testing.assert_array_equal(again.predict(X_test), net.predict(X_test))
    float_bytes = 4 * sum(p.numel() for p in net.module_.parameters())
    assert saved.stat().st_size < float_bytes


def test_file_is_safetensors_readable(saved):
    """Check that the safetensors package reads the arrays and the metadata."""
    st = pytest.importorskip("safetensors")
    from safetensors.numpy import load_file

    arrays = load_file(str(saved))
    assert arrays["fc0.weight_bits"].dtype == np.uint8
    with st.safe_open(str(saved), framework="numpy") as f:
        meta = f.metadata()
    graph = json.loads(meta["graph"])
    assert graph["format"] == "sksign-packed"
    assert [lay["op"] for lay in graph["layers"]][:4] == [
        "dense",
        "batch_norm",
        "step",
        "xnor_dense",
    ]


def test_regressor_round_trip(digits, tmp_path):
    """Check a packed regressor keeps its target scaling through the file."""
    X_train, X_test, y_train, _ = digits
    reg = HTAFNetRegressor((21,), architecture="snn", max_epochs=1, random_state=0)
    reg.fit(X_train, y_train * 3.0 + 1)
    again = load(save(pack(reg), tmp_path / "r.sksign"))
    assert isinstance(again, PackedRegressor)
    np.testing.assert_allclose(again.predict(X_test), reg.predict(X_test), rtol=1e-6)


def _rewrite(path, mutate):
    data = bytearray(path.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    mutate(header, data, 8 + n)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(data[8 + n :]))


def test_tampered_array_bytes_are_detected(saved):
    """Check that a flipped byte in the arrays fails the checksum."""
    data = bytearray(saved.read_bytes())
    data[-3] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        load(saved)


def test_tampered_graph_is_detected(saved):
    """Check that an edited layer graph fails (checksum, then schema)."""

    def widen(header, data, start):
        graph = json.loads(header["__metadata__"]["graph"])
        graph["layers"][3]["attrs"]["out"] = 999
        header["__metadata__"]["graph"] = json.dumps(graph)

    _rewrite(saved, widen)
    with pytest.raises(ValueError, match="checksum"):
        load(saved)


def test_schema_is_checked_even_with_a_matching_checksum(packed_bnn, tmp_path):
    """Check that an inconsistent graph raises a clear error before any run."""
    from sksign.deploy import PackedNet

    net = packed_bnn[1].net_
    graph = json.loads(json.dumps(net.graph))
    graph["layers"][3]["attrs"]["out"] = 999
    with pytest.raises(ValueError, match="must be uint8 of shape"):
        PackedNet(graph, net.tensors)
    graph = json.loads(json.dumps(net.graph))
    graph["layers"][1]["op"] = "eval"
    with pytest.raises(ValueError, match="unknown op 'eval'"):
        PackedNet(graph, net.tensors)
    graph = json.loads(json.dumps(net.graph))
    graph["version"] = 99
    with pytest.raises(ValueError, match="version"):
        PackedNet(graph, net.tensors)
    graph = json.loads(json.dumps(net.graph))
    graph["layers"][2]["inputs"] = ["nowhere"]
    with pytest.raises(ValueError, match="which no earlier layer writes"):
        PackedNet(graph, net.tensors)
    tensors = dict(net.tensors)
    tensors["fc0.alpha"] = tensors["fc0.alpha"].astype(np.float64)
    with pytest.raises(ValueError, match=r"fc0\.alpha"):
        PackedNet(net.graph, tensors)


@pytest.mark.parametrize(
    "content",
    [b"", b"\x01\x02", b"not a model at all", struct.pack("<Q", 10**12) + b"{}"],
)
def test_files_that_are_not_packed_models_raise(tmp_path, content):
    """Check garbage, truncated and oversized-header files give a clear error."""
    path = tmp_path / "bad.sksign"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a valid packed model"):
        load(path)


def test_other_safetensors_file_raises(tmp_path):
    """Check a safetensors file of another kind is refused by name."""
    pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    path = tmp_path / "weights.safetensors"
    save_file({"w": np.zeros((2, 2), np.float32)}, str(path))
    with pytest.raises(ValueError, match="does not name the format"):
        load(path)


def test_pickle_file_is_not_executed(tmp_path):
    """Check that a pickle (which would run code) is refused as a format error."""
    path = tmp_path / "evil.sksign"
    marker = tmp_path / "ran"
    payload = pickle.dumps(
        type("Evil", (), {"__reduce__": lambda s: (open, (str(marker), "w"))})()
    )
    path.write_bytes(payload)
    with pytest.raises(ValueError, match="not a valid packed model"):
        load(path)
    assert not marker.exists()


def test_pickle_and_skops_round_trips(packed_bnn, digits):
    """Check the packed estimator pickles, and skops loads it trusting sksign types."""
    _, X_test, _, _ = digits
    packed = packed_bnn[1]
    again = pickle.loads(pickle.dumps(packed))
    np.testing.assert_array_equal(again.predict(X_test), packed.predict(X_test))
    sio = pytest.importorskip("skops.io")
    dumped = sio.dumps(packed)
    trusted = sio.get_untrusted_types(data=dumped)
    assert all(t.startswith(("sksign.", "builtins.")) for t in trusted), trusted
    back = sio.loads(dumped, trusted=trusted)
    np.testing.assert_array_equal(back.predict(X_test), packed.predict(X_test))


def test_load_and_predict_without_torch(saved, digits, predict_without_torch):
    """Check a fresh process imports sksign.deploy, loads and predicts without torch."""
    _, X_test, _, _ = digits
    expected = load(saved).predict(X_test[:7])
    assert predict_without_torch(saved, X_test[:7]) == [str(v) for v in expected]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(), children, max_size=3)
    ),
    max_leaves=5,
)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@given(data=st.data())
def test_any_edit_of_the_graph_gives_a_value_error_or_a_valid_net(
    packed_bnn, digits, data
):
    """Check that a changed layer graph is refused, or loads and predicts as before.

    An edit the validation lets through (a layer's name, the float64 flag,
    the class labels) must give a net that predicts, with the scores of the
    original net: a graph that loads but breaks (or computes something else)
    at predict fails this test.
    """
    from sksign.deploy import PackedClassifier, PackedNet

    X = digits[1][:16]
    expected = packed_bnn[1].decision_function(X)
    net = packed_bnn[1].net_
    graph = json.loads(json.dumps(net.graph))
    paths = [p for p in _paths(graph) if p]
    path = data.draw(st.sampled_from(paths))
    value = data.draw(_JSON)
    target = graph
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    try:
        edited = PackedClassifier(PackedNet(graph, net.tensors)).fit()
    except ValueError:
        return  # refused on load
    scores = edited.decision_function(X)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(
        edited.predict(X), edited.classes_[scores.argmax(axis=1)]
    )


def _benign_edits(graph):
    """Edits of a BNN graph that must load and give the same scores."""
    readout = next(i for i, g in enumerate(graph["layers"]) if g["name"] == "out")
    yield "a layer renamed", ("layers", 0, "name"), "renamed"
    yield "the readout in float32", ("layers", readout, "attrs", "float64"), False
    yield "other labels", ("classes",), [c + 10 for c in graph["classes"]]
    yield "an unknown header key", ("comment",), {"note": [1, None]}
    yield "an unknown layer key", ("layers", 1, "comment"), "kept"


def test_edits_that_validate_load_and_predict_the_same(packed_bnn, digits):
    """Check edits the validation lets through give a net with the same scores."""
    from sksign.deploy import PackedClassifier, PackedNet

    X = digits[1][:16]
    net = packed_bnn[1].net_
    expected = packed_bnn[1].decision_function(X)
    for what, path, value in _benign_edits(net.graph):
        graph = json.loads(json.dumps(net.graph))
        target = graph
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        edited = PackedClassifier(PackedNet(graph, net.tensors)).fit()
        scores = edited.decision_function(X)
        np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5, err_msg=what)
        np.testing.assert_array_equal(
            edited.predict(X), edited.classes_[scores.argmax(axis=1)]
        )


@given(data=st.data())
def test_any_edit_of_the_tensor_entries_gives_a_value_error(saved_once, data):
    """Check that edited dtypes, shapes and offsets raise ValueError on load."""
    (n,) = struct.unpack("<Q", saved_once.read_bytes()[:8])
    keys = [
        k for k in json.loads(saved_once.read_bytes()[8 : 8 + n]) if k != "__metadata__"
    ]
    key = data.draw(st.sampled_from(keys))
    field = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", None]))
    value = data.draw(_JSON | st.just([2**62, 2**62]) | st.just("F16"))

    def edit(header, raw, start):
        if field is None:
            header[key] = value
        else:
            header[key][field] = value

    original = saved_once.read_bytes()
    try:
        _rewrite(saved_once, edit)
        with pytest.raises(ValueError, match="not a valid packed model"):
            load(saved_once)
    finally:
        saved_once.write_bytes(original)
