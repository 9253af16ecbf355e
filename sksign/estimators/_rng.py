"""The random streams of a fit, all derived from ``random_state`` here."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import MappingProxyType

import torch
from sklearn.utils import check_random_state

__all__ = [
    "STREAMS",
    "base_seed",
    "generator",
    "reseed",
    "seed_torch",
    "seeded",
    "stream_seed",
]

#: Distance between the seeds of consecutive epochs of a per-epoch stream.
EPOCH_STRIDE = 1_000_003

#: Stream seeds are reduced modulo this (torch takes seeds below 2**64).
_SEED_MODULUS = 2**63 - 1

#: Every stream of a fit, ``name: (offset, stride)``: the seed of the stream's
#: ``index``-th instance is ``base + offset + stride * index`` (modulo
#: ``2**63 - 1``), ``base`` being :func:`base_seed` of ``random_state``.
#: These offsets are the ones sksign has always used, so a ``random_state``
#: gives the nets it gave before; "shuffle" and the first "call" share their
#: seeds with epoch 0's streams, which reseed them before its first batch.
STREAMS = MappingProxyType(
    {
        # torch's CPU generator while the module is built: the initial weights
        "weights": (0, 0),
        # the regressor's early-stopping hold-out (scikit-learn's split)
        "validation_split": (0, 0),
        # the training DataLoader's generator, as initialize() creates it
        "shuffle": (1, 0),
        # torch's generators for one fit/partial_fit call, index = epochs
        # trained before it: what runs before the first epoch's reseeding
        "call": (2, 1),
        # the DataLoader's generator, reseeded at the start of epoch `index`
        "epoch_shuffle": (1, EPOCH_STRIDE),
        # torch's generators from the start of epoch `index`: dropout,
        # augmentation (so a resumed fit repeats an uninterrupted one)
        "epoch": (2, EPOCH_STRIDE),
    }
)


def base_seed(random_state) -> int | None:
    """The fit's base seed: None when unseeded, else one draw from `random_state`.

    Examples
    --------
    >>> from sksign.estimators._rng import base_seed, stream_seed
    >>> base = base_seed(0)
    >>> stream_seed(base, "epoch", 1) - stream_seed(base, "epoch", 0)
    1000003
    >>> base_seed(None) is None
    True
    """
    if random_state is None:
        return None
    return int(check_random_state(random_state).randint(2**31 - 1))


def stream_seed(base: int | None, stream: str, index: int = 0) -> int | None:
    """The seed of the `index`-th instance of `stream` (None when unseeded)."""
    if base is None:
        return None
    offset, stride = STREAMS[stream]
    return (base + offset + stride * index) % _SEED_MODULUS


def generator(seed: int | None = None) -> torch.Generator:
    """A new CPU generator seeded with `seed` (torch's default seed if None)."""
    gen = torch.Generator()
    if seed is not None:
        gen.manual_seed(seed)
    return gen


def reseed(gen: torch.Generator, seed: int) -> torch.Generator:
    """Seed the generator `gen` in place with `seed`; returns it."""
    return gen.manual_seed(seed)


def _cuda_index(device) -> int | None:
    """The CUDA device index of `device`, or None when it is not CUDA."""
    if device is None:
        return None
    device = torch.device(device)
    return (device.index or 0) if device.type == "cuda" else None


def seed_torch(seed: int, device=None) -> None:
    """Seed torch's CPU generator and, when `device` is a CUDA device, its
    generator (no other device's).

    Callers run this inside :func:`seeded` (or torch's ``fork_rng``), so that
    the user's global generators get their state back afterwards.
    """
    torch.random.default_generator.manual_seed(seed)
    index = _cuda_index(device)
    if index is not None:
        with torch.cuda.device(index):
            torch.cuda.manual_seed(seed)


@contextmanager
def seeded(seed: int | None, device=None) -> Iterator[None]:
    """Run the block with torch's generators seeded with `seed`, then restore them.

    The CPU generator is forked and seeded, and so is the CUDA generator of
    `device` when it is a CUDA device. With ``seed=None`` (an unseeded fit)
    the block draws from the global generators as they are.
    """
    if seed is None:
        yield
        return
    index = _cuda_index(device)
    with torch.random.fork_rng(devices=[] if index is None else [index]):
        seed_torch(seed, device)
        yield
