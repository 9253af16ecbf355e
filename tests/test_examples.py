"""Run every gallery example (slow: ``make test-slow`` or ``pytest -m slow``)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))


def test_examples_are_found():
    assert len(EXAMPLES) >= 7
    assert (ROOT / "examples" / "README.txt").is_file()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_layout(path):
    """sphinx-gallery layout: a titled docstring, ``# %%`` cells, a seed."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith('"""\n=')
    title_rule, title, rule = text.splitlines()[1:4]
    assert title_rule == rule
    assert len(rule) >= len(title)
    assert set(rule) == {"="}
    assert "# %%" in text
    assert "RANDOM_STATE = " in text


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
