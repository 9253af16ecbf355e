"""Table formatting of the reports: cells, Markdown and CSV, mean ± std.

One place for how a number becomes text: :func:`fmt` formats the cells that go
to a CSV file and to the Markdown next to it (so both hold the same strings),
:func:`pm` the 'mean ± std' cells of the reproduced tables, :func:`mean_std`
the raw numbers behind them. :class:`Table` and :func:`write_tables` write the
``reproduce`` tables; :func:`markdown_table` and :func:`read_markdown_tables`
render and parse pipe tables.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "Table",
    "fmt",
    "human_duration",
    "leaders",
    "markdown_table",
    "mean_std",
    "mean_std_columns",
    "paper_fractions",
    "pm",
    "read_markdown_tables",
    "write_tables",
]


def fmt(value) -> str:
    """Format one table cell; the same string goes to the CSV and to report.md.

    Examples
    --------
    >>> [fmt(v) for v in (0.5, 3, None, True, 1e-6, "a|b")]
    ['0.5000', '3', '', 'yes', '1.000e-06', 'a/b']
    """
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


def markdown_table(columns, rows) -> str:
    """A Markdown pipe table of formatted cells.

    Examples
    --------
    >>> print(markdown_table(["a", "b"], [["1", "2"]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """
    head = "| " + " | ".join(str(c) for c in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def read_markdown_tables(text: str) -> list[list[list[str]]]:
    """Parse the pipe tables of a Markdown text (used by the tests).

    Examples
    --------
    >>> read_markdown_tables("x\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n")
    [[['a', 'b'], ['1', '2']]]
    """
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


def pm(values, scale=100.0, digits=2) -> str:
    """'mean' or 'mean ± std' (percent by default); '' for no values.

    Examples
    --------
    >>> pm([0.5, 0.7]), pm([0.5]), pm([2e-5, 4e-5], scale=1, digits=3)
    ('60.00 ± 14.14', '50.00', '3.00e-05 ± 1.41e-05')
    """
    v = np.asarray(values, dtype=float) * scale
    if v.size == 0:
        return ""
    if v.size == 1:
        return _number(v[0], digits)
    return f"{_number(v.mean(), digits)} ± {_number(v.std(ddof=1), digits)}"


def _number(x, digits) -> str:
    """One number of :func:`pm`: fixed point, or scientific when tiny or huge."""
    if np.isfinite(x) and x != 0 and (abs(x) >= 1e4 or abs(x) < 10.0**-digits):
        return f"{x:.2e}"
    return f"{x:.{digits}f}" if np.isfinite(x) else fmt(float(x))


def mean_std(values) -> list:
    """[mean, std] as :func:`pm` shows them (ddof=1; NaN std for one value).

    Examples
    --------
    >>> mean_std([1.0, 3.0]), mean_std([2.0])
    ([2.0, 1.4142135623730951], [2.0, nan])
    """
    v = np.asarray(values, dtype=float)
    return [float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")]


def mean_std_columns(names) -> list:
    """CSV column names of :func:`mean_std` pairs: each name and ``<name>_std``.

    Examples
    --------
    >>> mean_std_columns(["acc", "gap"])
    ['acc', 'acc_std', 'gap', 'gap_std']
    """
    return [c for n in names for c in (n, f"{n}_std")]


def paper_fractions(values, head) -> list:
    """The paper's percentages as fractions (the unit of our columns), on the
    rows of the headline width only; None elsewhere.

    Examples
    --------
    >>> paper_fractions((57.5, None), True), paper_fractions((57.5, 50.0), False)
    ([0.575, None], [None, None])
    """
    return [v / 100 if head and v is not None else None for v in values]


def leaders(names, means) -> list:
    """The names with the best mean; several when they tie (equal means, e.g.
    the same number of correct test samples), never the first by accident.

    Examples
    --------
    >>> leaders(["htaf", "ste", "ss"], [0.958, 0.958, 0.95])
    ['htaf', 'ste']
    """
    top = max(means)
    return [n for n, m in zip(names, means) if np.isclose(m, top, rtol=0, atol=1e-12)]


def human_duration(seconds) -> str:
    """A duration in s, min or h, rounded for reading.

    Examples
    --------
    >>> human_duration(42.3), human_duration(600), human_duration(9000)
    ('42 s', '10 min', '2.5 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Table(NamedTuple):
    """One table: Markdown columns/cells, and the CSV with the raw numbers."""

    title: str
    caption: str
    cols: list
    rows: list
    csv_cols: list
    csv_rows: list
    note: str = ""


def write_tables(tables, out, name, header, stream, footer=""):
    """Write ``<name>_table.md`` and one CSV per table to `out`; echo the md.

    The first table's CSV is ``<name>_table.csv``, the next ones
    ``<name>_table_2.csv``, ``<name>_table_3.csv``, ...
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    md = [f"# {header}", ""]
    for i, t in enumerate(tables):
        md += [f"## {t.title}", "", t.caption, "", markdown_table(t.cols, t.rows), ""]
        if t.note:
            md += [t.note, ""]
        suffix = "" if i == 0 else f"_{i + 1}"
        with open(
            out / f"{name}_table{suffix}.csv", "w", newline="", encoding="utf-8"
        ) as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(t.csv_cols)
            w.writerows([[fmt(v) for v in r] for r in t.csv_rows])
    if footer:
        md += [footer, ""]
    path = out / f"{name}_table.md"
    path.write_text("\n".join(md), encoding="utf-8")
    print("\n".join(md), file=stream)
    print(f"Written: {path.resolve()}", file=stream)
    return path
