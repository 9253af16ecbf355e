"""Resuming ``reproduce`` runs: per-cell results and per-net checkpoints.

A :class:`ResumableRun` keeps, under ``<out>/.sksign-resume/<table>-<key>``
(`key` a hash of the settings, so other settings never mix with these), one
JSON file per finished table cell and, while a cell's net trains, the net's
``checkpoint_dir``. A run stopped anywhere (killed, out of time) and started
again with the same settings reuses the finished cells, resumes the net that
was training from its last epoch and ends with the same tables as a run that
was never stopped (the nets are seeded per epoch, see
:class:`~sksign.estimators._recipes.TrainingRecipeMixin`).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

__all__ = ["ResumableRun"]


class ResumableRun:
    """The finished cells and checkpoints of one ``reproduce`` run.

    Parameters
    ----------
    out : str or path-like
        The report folder.
    table : str
        "signcode" or "htaf".
    settings : object
        The run's settings; its ``repr`` keys the folder.
    enabled : bool, default=True
        False computes every cell and stores nothing (``--restart`` clears
        the folder instead).
    """

    def __init__(self, out, table, settings, *, enabled=True):
        key = hashlib.sha256(repr(settings).encode()).hexdigest()[:12]
        self.root = Path(out) / ".sksign-resume" / f"{table}-{key}"
        self.enabled = enabled
        self.reused = 0

    def clear(self):
        """Forget every finished cell and checkpoint of these settings."""
        shutil.rmtree(self.root, ignore_errors=True)

    def _cell_file(self, cell):
        return self.root / "cells" / f"{cell}.json"

    def checkpoint_dir(self, cell):
        """The checkpoint folder of `cell`'s net (None when disabled)."""
        if not self.enabled:
            return None
        return str(self.root / "checkpoints" / cell)

    def cell(self, cell, compute):
        """`cell`'s stored result, or ``compute()`` stored for next time.

        Parameters
        ----------
        cell : str
            A file-name-safe id of the cell.
        compute : callable
            Computes the result (JSON-serialisable) when none is stored.

        Returns
        -------
        object
            The result.
        """
        path = self._cell_file(cell)
        if self.enabled and path.exists():
            self.reused += 1
            return json.loads(path.read_text())
        value = compute()
        if self.enabled:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(value))
            os.replace(tmp, path)
            shutil.rmtree(self.checkpoint_dir(cell), ignore_errors=True)
        return value
