"""``python -m sksign demo``: one report that walks through the whole package.

Sections (a figure is skipped with a note when matplotlib is missing; a
section that fails is reported and the others still run):

1. HTAF net: exact-step inference vs the smooth net, binarization rate,
   against STE and scaled-sigmoid nets; the epsilon bound.
2. GridSearchCV over (alpha0, alpha1) on the manifold alpha0 * alpha1 = 22.
3. Sign codes + sign-kNN vs the full net (sign gap), per activation.
4. Both interventions (two definitions each) over a range of alpha.
5. Gate dominance Z1 vs width.
6. ICBM: accuracy before/after and the concept table.

This module holds the entry point, :func:`run_demo`; sections 1, 2 and 6 are
in :mod:`sksign._report.demo_step_nets`, 3 to 5 in
:mod:`sksign._report.demo_sign_codes`, the settings in
:mod:`sksign._report.demo_setup`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

import torch

from sksign import __version__
from sksign._report._common import SEED, Report
from sksign._report.demo_setup import DEFAULT, QUICK, DemoConfig, DemoContext
from sksign._report.demo_sign_codes import (
    section_gate_dominance,
    section_interventions,
    section_sign_codes,
)
from sksign._report.demo_step_nets import section_grid, section_htaf, section_icbm

__all__ = ["DEFAULT", "QUICK", "SECTIONS", "DemoConfig", "run_demo"]

#: (name, function) of each section, in report order.
SECTIONS = (
    ("HTAF net", section_htaf),
    ("GridSearchCV", section_grid),
    ("sign codes", section_sign_codes),
    ("interventions", section_interventions),
    ("gate dominance", section_gate_dominance),
    ("ICBM", section_icbm),
)


def run_demo(
    out="sksign-report",
    *,
    quick=False,
    dataset="digits",
    device="cpu",
    progress=True,
    sections=None,
    config=None,
    stream=None,
):
    """Build the demo report in `out`; return ``(report_path, n_failed)``."""
    stream = stream or sys.stdout
    cfg = config or (QUICK if quick else DEFAULT)
    t0 = time.perf_counter()
    ctx = DemoContext(cfg, dataset, device, progress)
    rep = Report(out, "sksign demo report")
    failed = []
    wanted = SECTIONS if sections is None else [s for s in SECTIONS if s[0] in sections]
    for name, fn in wanted:
        print(f"== {name}", file=stream, flush=True)
        with rep.timed(name):
            try:
                fn(rep, ctx)
            except Exception as exc:  # keep the rest of the report
                failed.append(name)
                traceback.print_exc()
                rep.text(f"> FAILED: {type(exc).__name__}: {exc}")
                rep.summarize(name, "FAILED", type(exc).__name__, str(exc)[:80])
    header = (
        f"sksign {__version__}; data: {dataset} "
        f"({len(ctx.X_train)} train / {len(ctx.X_test)} test samples, "
        f"{ctx.X_train.shape[1]} features, stratified 70/30 split, seed {SEED}); "
        f"mode: {'quick' if quick else 'default'}; device: {device}; "
        f"torch threads: {torch.get_num_threads()}. All accuracies are on the "
        "held-out test split unless stated otherwise."
    )
    path = rep.write(header)
    elapsed = time.perf_counter() - t0
    print("", file=stream)
    print(rep.terminal_summary(), file=stream)
    print(f"Report: {Path(path).resolve()} ({elapsed:.0f} s)", file=stream)
    if failed:
        print(f"Failed sections: {', '.join(failed)}", file=stream)
    return path, len(failed)
