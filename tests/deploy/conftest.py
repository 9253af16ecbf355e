"""Fixtures shared by the tests of sksign.deploy."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture
def predict_without_torch(tmp_path):
    """``predict(path, X)``: labels from a fresh process that never imports torch.

    The process imports :mod:`sksign.deploy`, loads the packed file at
    ``path``, predicts ``X`` and fails if torch or skorch got imported; the
    labels come back as strings.
    """

    def predict(path, X):
        x_path = tmp_path / "X_fresh.npy"
        np.save(x_path, X)
        code = (
            "import sys, numpy as np, sksign.deploy; "
            f"m = sksign.deploy.load({str(path)!r}); "
            f"p = m.predict(np.load({str(x_path)!r})); "
            "assert 'torch' not in sys.modules, 'torch'; "
            "assert 'skorch' not in sys.modules, 'skorch'; "
            "print(' '.join(map(str, p)))"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    return predict


@pytest.fixture
def garbage_buffers(monkeypatch):
    """The ops' pooled arrays (``sksign.deploy._ops._common.empty``) handed
    out full of garbage (every byte 0xA5): a kernel that reads an entry it has
    not written gives wrong bits."""

    def garbage(shape, dtype):
        out = np.empty(shape, dtype)
        out.view(np.uint8)[...] = 0xA5
        return out

    monkeypatch.setattr("sksign.deploy._ops._common.empty", garbage)
