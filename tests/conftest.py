"""Shared fixtures: seeds, hypothesis profile, small real data."""

from contextlib import contextmanager

import numpy as np
import pytest
import torch
from hypothesis import settings

settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True)
settings.load_profile("ci")

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeds_fixed():
    torch.manual_seed(0)
    np.random.seed(0)  # noqa: NPY002 (code under test may use the global RNG)


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits scaled to [0, 1], split 75/25 (stratified)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def client():
    """A Dask cluster of two loopback worker processes (one thread each, one
    torch/BLAS thread as here), one per test module, closed after it."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
        silence_logs=50,  # a test kills a worker on purpose
    )
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


class HostTransfers:
    """(dtype, shape) of each tensor moved to the host by ``.cpu()``, ``.numpy()``."""

    def __init__(self):
        self.cpu, self.numpy = [], []

    def dtypes(self):
        return {dtype for dtype, _ in self.cpu + self.numpy}


@pytest.fixture
def host_transfers(monkeypatch):
    """Context manager recording the tensors moved to the host inside it.

    ``with host_transfers() as moved: ...``, then ``moved.cpu``,
    ``moved.numpy`` and ``moved.dtypes()``.
    """
    cpu, to_numpy = torch.Tensor.cpu, torch.Tensor.numpy

    @contextmanager
    def record():
        moved = HostTransfers()

        def _cpu(t, *args, **kwargs):
            moved.cpu.append((t.dtype, tuple(t.shape)))
            return cpu(t, *args, **kwargs)

        def _numpy(t, *args, **kwargs):
            moved.numpy.append((t.dtype, tuple(t.shape)))
            return to_numpy(t, *args, **kwargs)

        with monkeypatch.context() as mp:
            mp.setattr(torch.Tensor, "cpu", _cpu)
            mp.setattr(torch.Tensor, "numpy", _numpy)
            yield moved

    return record
