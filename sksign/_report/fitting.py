"""The nets of ``reproduce`` and the run-time estimate printed before a run.

:func:`make_classifier` builds the HTAFNetClassifier of one table cell from a
:class:`~sksign._report.papers.SignCodeConfig` or
:class:`~sksign._report.papers.HTAFConfig`; :func:`estimate_run_time` times a
few short fits and extrapolates to the whole run.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import time

from sksign._report.tables import human_duration
from sksign.estimators import HTAFNetClassifier

__all__ = ["estimate_run_time", "make_classifier"]


def make_classifier(cfg, hidden, activation, seed, device, epochs=None, **kw):
    """An unfitted HTAFNetClassifier with the batch size, learning rate and
    (unless `epochs` is given) number of epochs of `cfg`."""
    return HTAFNetClassifier(
        hidden,
        activation=activation,
        max_epochs=epochs or cfg.epochs,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        random_state=seed,
        device=device,
        **kw,
    )


def estimate_run_time(fits, n_train, epochs, batch_size, stream):
    """Time short fits and extrapolate to the whole run; print the estimate.

    `fits` is a list of ``(fit_one, count)``: ``fit_one(n, n_epochs)`` fits
    one net on n samples, and the run fits `count` such nets. A fit of one
    epoch and one of three split the time into a fixed cost and a cost per
    sample and epoch. Returns the estimate in seconds.
    """
    n = 3 * batch_size
    total, n_fits = 0.0, 0
    for fit_one, count in fits:
        times = []
        for n_epochs in (1, 1, 3):
            t0 = time.perf_counter()
            fit_one(n, n_epochs)
            times.append(time.perf_counter() - t0)
        one = min(times[:2])  # the first fit may pay for warming up
        per_epoch = max((times[2] - one) / 2, 0.0)
        fixed = max(one - per_epoch, 0.0)
        total += count * (fixed + per_epoch * epochs * n_train / n) * 1.15
        n_fits += count
    print(
        f"Expected run time: about {human_duration(total)} ({n_fits:g} nets x "
        f"{epochs} epochs x {n_train} samples; estimated from timed short fits).",
        file=stream,
        flush=True,
    )
    return total
