"""Shared helpers of the reports: output folder, tables, optional pieces."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import importlib
import io
import math
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = ["Report", "fmt", "optional", "progress"]


def fmt(value) -> str:
    """Format one table cell; the same string goes to the CSV and to report.md."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        value = float(value)
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.3e}"
        return f"{value:.4f}"
    return str(value).replace("|", "/").replace("\n", " ")


def optional(module, *names: str):
    """Import `names` from `module`; return ``(objects, None)`` or ``(None, why)``.

    `module` may be a tuple of candidates, tried in order (the public
    package first, then the private module that defines the names). The
    report pieces written by other parts of the package are optional: a
    section whose pieces are missing is skipped with a note, so the report
    still runs while the package grows.
    """
    candidates = (module,) if isinstance(module, str) else tuple(module)
    why = None
    for mod_name in candidates:
        try:
            mod = importlib.import_module(mod_name)
            return [getattr(mod, n) for n in names], None
        except (ImportError, AttributeError) as exc:
            why = why or f"{mod_name}: {type(exc).__name__}: {exc}"
    return None, why


def progress(iterable=None, *, total=None, desc=None, enabled=True):
    """A tqdm progress bar on stderr (disabled when stderr is not a terminal)."""
    from tqdm.auto import tqdm

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
        path = self.out / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(fig)
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


def markdown_table(columns, rows) -> str:
    head = "| " + " | ".join(str(c) for c in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def read_markdown_tables(text: str) -> list[list[list[str]]]:
    """Parse the pipe tables of a Markdown text (used by the tests)."""
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if all(set(c) <= {"-", ":"} and c for c in cells):
                continue
            current.append(cells)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def n_threads_note() -> str:
    import torch

    return (
        f"torch threads: {torch.get_num_threads()}, CPU cores: {os.cpu_count()}"
    )
