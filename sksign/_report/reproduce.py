"""``python -m sksign reproduce signcode|htaf``: the papers' tables at this scale.

Each table has the rows and columns of the paper's headline table, with the
paper's numbers (CIFAR-10) next to ours, so a reader can put them
side by side. The scale differs (digits / MNIST-5k on a CPU instead of CIFAR
on GPUs), so compare the orderings and gaps, not the absolute accuracies.

Columns the papers' tables do not have come after the papers' columns, and
quantities the papers report without a table get tables of their own:
training accuracy, leave-one-out purity and its Spearman correlation with
accuracy, both definitions of each intervention, gate dominance (Z1, delta_bar,
eps_1 and its two bounds), DHN depth 4 vs 8, the first-layer gradient norms,
and the ICBM accuracy difference. ``docs/_static/*_table.md`` are the output.

This module holds the entry point, :func:`run_reproduce`; the tables are
computed by :mod:`sksign._report.signcode_paper` and
:mod:`sksign._report.htaf_paper`, the papers' numbers and the settings live in
:mod:`sksign._report.papers`, the formatting in :mod:`sksign._report.tables`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import platform
import sys
import time
from dataclasses import replace

import torch

from sksign._report._common import load_split
from sksign._report._resume import ResumableRun
from sksign._report.htaf_paper import reproduce_htaf
from sksign._report.papers import configs
from sksign._report.signcode_paper import reproduce_signcode
from sksign._report.tables import human_duration, write_tables

__all__ = ["ROUNDING_NOTE", "run_reproduce"]

#: What another CPU does to the tables, as measured (the footer of each table).
ROUNDING_NOTE = (
    "The same seeds give the same numbers on the same kind of CPU. Other vector "
    "kernels (AVX2 vs AVX-512) or devices round differently, and training "
    "carries the difference on: one run on an AVX-512 machine moved the htaf "
    "table's HTAF BNN by 1.5 points. Read a difference of that size as noise."
)

_TITLES = {
    "signcode": "The Sign Code paper's tables at this scale",
    "htaf": "The HTAF paper's tables at this scale",
}


def load_data(table, *, scale="quick", dataset=None, data_dir=None):
    """The settings and the data of a run: ``(cfg, data)``.

    Raises FileNotFoundError or ValueError (naming the files expected) when
    the data set is not where it is looked for; nothing has been trained yet.
    """
    cfg = configs(table, scale)
    if dataset is not None:
        cfg = replace(cfg, dataset=dataset)
    data = load_split(
        cfg.dataset, data_dir, max_train=cfg.max_train, max_test=cfg.max_test
    )
    return cfg, data


def run_reproduce(
    table,
    *,
    scale="quick",
    dataset=None,
    data_dir=None,
    device="cpu",
    out="sksign-report",
    epochs=None,
    seeds=None,
    progress=True,
    stream=None,
    restart=False,
    loaded=None,
):
    """Build one of the papers' tables; return the exit status.

    `table` is "signcode" or "htaf"; `scale` one of
    :data:`~sksign._report.papers.SCALES` ("quick": small nets on digits;
    "full": the papers' FFNN sizes on MNIST-5k; "small": the papers'
    architectures at reduced width on the full MNIST; "paper": the papers'
    architectures and recipes on CIFAR-10 from `data_dir`); `dataset`,
    `epochs` and `seeds` override the settings (`epochs` every net's).
    Writes ``<table>_table.md`` and one CSV per table to `out` and echoes the
    Markdown to `stream` (default: stdout). A run with the same settings and
    `out` as an earlier, stopped one reuses its finished nets and resumes the
    one that was training (:mod:`sksign._report._resume`); `restart` starts
    from scratch. `loaded` is :func:`load_data`'s result when the caller
    loaded the data already.
    """
    stream = stream or sys.stdout
    cfg, data = loaded or load_data(
        table, scale=scale, dataset=dataset, data_dir=data_dir
    )
    changes = {k: v for k, v in (("epochs", epochs), ("seeds", seeds)) if v}
    cfg = replace(cfg, **changes)
    if epochs:  # every net's, the image nets' own epochs included
        cfg = _with_epochs(cfg, epochs)
    print(f"sksign reproduce {table} ({scale}): {cfg}", file=stream, flush=True)
    t0 = time.perf_counter()
    fn = reproduce_signcode if table == "signcode" else reproduce_htaf
    run = ResumableRun(out, table, cfg)
    if restart:
        run.clear()
    tables = fn(
        cfg, device=device, show_progress=progress, stream=stream, run=run, data=data
    )
    if run.reused:
        print(
            f"Resumed: {run.reused} finished net(s) read back from {run.root}.",
            file=stream,
        )
    opts = {"dataset": dataset, **changes}
    opts = " ".join(f"--{k} {v}" for k, v in opts.items() if v is not None)
    mode = f"--{scale}" if scale in ("quick", "full") else f"--scale {scale}"
    took = human_duration(time.perf_counter() - t0)
    footer = (
        f"Made by `python -m sksign reproduce {table} {mode}"
        f"{' ' + opts if opts else ''}` in {took} on {platform.machine()} "
        f"({torch.backends.cpu.get_cpu_capability()} kernels; device {device}, "
        f"{torch.get_num_threads()} torch thread(s)), torch {torch.__version__}. "
        f"{ROUNDING_NOTE}"
    )
    write_tables(
        tables, out, table, f"{_TITLES[table]} ({scale} scale)", stream, footer
    )
    print(f"Took {took}.", file=stream)
    return 0


def _with_epochs(cfg, epochs):
    """`cfg` with every net's epochs set to `epochs`."""

    def spec(s):
        return replace(s, epochs=epochs)

    if hasattr(cfg, "nets"):
        return replace(cfg, nets=tuple(spec(s) for s in cfg.nets))
    return replace(
        cfg,
        models=tuple((m[0], spec(m[1])) if len(m) == 2 else m for m in cfg.models),
        icbm_nets=tuple(spec(s) for s in cfg.icbm_nets),
    )
