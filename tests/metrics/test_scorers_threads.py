"""The scorers on one fitted net, called from several threads at once.

A scorer's hooks act only on its own thread's forward passes (see
:func:`sksign.nn.forward_hooks`): each call gives what it gives alone.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import threading

import numpy as np

from sksign.estimators import HTAFNetClassifier
from sksign.metrics import gate_dominance, intervention_score

N_THREADS, N_CALLS = 3, 4


def test_scorers_on_one_net_from_several_threads():
    """Check concurrent intervention and gate-dominance scores equal serial ones."""
    rng = np.random.RandomState(0)
    X = rng.randn(300, 8).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    net = HTAFNetClassifier(
        (24, 16), activation="relu", max_epochs=3, random_state=0
    ).fit(X, y)

    def scores():
        flips = intervention_score(
            net, X, y, kind="sign_flip", alpha=0.2, layers="all", random_state=0
        )
        return flips, gate_dominance(net, X)

    expected = scores()
    start = threading.Barrier(N_THREADS)
    results, errors = [], []

    def work():
        start.wait()
        try:
            results.extend(scores() for _ in range(N_CALLS))
        except Exception as exc:  # reported below, on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(N_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == N_THREADS * N_CALLS
    for got in results:
        np.testing.assert_allclose(got, expected)
