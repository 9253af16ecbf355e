"""The docs say what the code does: the CLI, the HTAF guide, the tables' footer."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import re
from pathlib import Path

import pytest

from sksign.__main__ import build_parser
from sksign._report.reproduce import ROUNDING_NOTE
from sksign.estimators import HTAFNetRegressor

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _subcommands():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("command", ["demo", "reproduce"])
def test_getting_started_names_every_option(command):
    """Check every option and every choice of the CLI is in the guide."""
    text = (DOCS / "getting_started.rst").read_text(encoding="utf-8")
    sub = _subcommands()[command]
    for action in sub._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            long = [o for o in action.option_strings if o.startswith("--")]
            assert any(o in text for o in long), (command, long)
        for choice in action.choices or ():
            assert re.search(rf"\b{re.escape(choice)}\b", text), (command, choice)


def _paragraphs(path):
    return re.split(r"\n\s*\n", path.read_text(encoding="utf-8"))


def test_guide_calls_only_a_final_pair_unstable():
    """HTAFNetRegressor starts at alpha0 = 0.05: the guide must not call that
    unstable; the paper's unstable setting is a final alpha0 <= 0.05 with
    alpha1 >= 500."""
    start = HTAFNetRegressor().alpha0_start
    assert start == pytest.approx(0.05)
    found = 0
    for path in sorted((DOCS / "user_guide").glob("*.rst")):
        for par in _paragraphs(path):
            flat = " ".join(par.split())
            if "unstable" in flat:
                found += 1
                assert "alpha1 >= 500" in flat, (path.name, flat)
                assert "final" in flat, (path.name, flat)
    assert found
    htaf = " ".join((DOCS / "user_guide" / "htaf.rst").read_text().split())
    assert f"alpha0_start={start:g}" in htaf


def test_tables_footer_says_what_was_measured():
    """The footer names the measured move (1.5 points), not 'the last digits'."""
    assert "1.5 points" in ROUNDING_NOTE
    assert "last digits" not in ROUNDING_NOTE
    tables = sorted((DOCS / "_static").rglob("*_table.md"))
    assert len(tables) >= 4
    for path in tables:
        text = path.read_text(encoding="utf-8")
        assert ROUNDING_NOTE in text, path
    for path in [DOCS / "tables.rst", *tables]:
        assert "last digits" not in path.read_text(encoding="utf-8"), path
