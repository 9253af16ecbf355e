"""The packed-bit kernels load without torch or skorch."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import subprocess
import sys

import sksign.kernels


def test_kernels_import_no_torch_or_skorch():
    """Check that ``import sksign.kernels`` loads neither torch nor skorch."""
    code = (
        "import sys, sksign.kernels; "
        "assert 'torch' not in sys.modules, 'torch'; "
        "assert 'skorch' not in sys.modules, 'skorch'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_kernels_public_names_are_documented():
    """Check that every name in ``sksign.kernels.__all__`` has an Examples doctest."""
    for name in sksign.kernels.__all__:
        doc = getattr(sksign.kernels, name).__doc__
        assert doc, name
        assert "Examples\n    --------\n    >>>" in doc, name
