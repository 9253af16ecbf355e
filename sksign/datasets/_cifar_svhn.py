"""Readers of CIFAR-10, CIFAR-100 and SVHN kept on disk in their standard formats.

CIFAR-10 and CIFAR-100 as the python pickles of their "python version"
archives (read by an unpickler that builds arrays only), SVHN as the
cropped-digit ``.mat`` files (SciPy). Nothing is downloaded. The public names
are re-exported by :mod:`sksign.datasets`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import pickle

import numpy as np

from sksign.datasets._bundled import _check_dtype
from sksign.datasets._files import (
    _check_dir,
    _check_option,
    _missing_error,
    _scale,
)

__all__ = ["load_cifar10", "load_cifar100", "load_svhn"]

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

_CIFAR_PIXELS = 3 * 32 * 32


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
