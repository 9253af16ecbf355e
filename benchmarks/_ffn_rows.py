"""What the FFN benchmarks share: the rows of their table for k swapped blocks.

``bench_ffn_step.py`` (MiniLM) and ``bench_ffn_step_smollm2.py`` (SmolLM2)
compare the same students at the same budget; each measures them its own way.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import time

import torch

from sksign.nn import htaf
from sksign.transformers import distill_ffn, swap_ffn_activations

#: The swaps measured with no training: (label, activation).
UNTRAINED = (("step (HTAF/STE)", "htaf"), ("ReLU", "relu"))
#: The swaps distilled at the same budget: (label, activation, alpha0_start).
DISTILLED = (
    ("HTAF (2, 11), distilled", "htaf", 0.5),
    ("STE, distilled", "ste", None),
    ("ReLU, distilled", "relu", None),
)


def warm_htaf():
    """Compile HTAF's CPU kernels, so that no timing includes it."""
    x = torch.randn(64, 64, requires_grad=True)
    htaf(x, 2.0, 11.0).sum().backward()


def swapped_rows(teacher, train, k, args, measure):
    """``(label, activation, metrics, seconds, history)`` for the last `k`
    FFN blocks of `teacher` swapped: each of :data:`UNTRAINED` (seconds and
    history None), then each of :data:`DISTILLED` after
    :func:`~sksign.transformers.distill_ffn` on `train` for ``args.steps``
    steps of ``args.batch_size`` at ``args.lr`` (seed 0). ``measure(student)``
    gives the metrics; each student is dropped once measured."""
    for label, act in UNTRAINED:
        student = swap_ffn_activations(teacher, act, layers=k)
        yield f"{label}, no training", act, measure(student), None, None
        del student
    for label, act, start in DISTILLED:
        student = swap_ffn_activations(teacher, act, layers=k)
        tic = time.perf_counter()
        _, history = distill_ffn(
            student,
            teacher,
            train,
            max_steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            alpha0_start=start,
            random_state=0,
        )
        seconds = time.perf_counter() - tic
        yield label, act, measure(student), seconds, history
        del student
