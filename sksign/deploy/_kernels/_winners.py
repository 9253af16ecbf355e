"""The class a row of logits predicts, without its softmax where that is sure.

``PackedClassifier.predict`` is the first argmax of the float32 softmax of the
logits (as torch's and skorch's ``predict``). Rounding can make two
probabilities equal where their logits differ, so the softmax decides ties;
but where a row's largest logit exceeds every other by a clear margin, its
probability is the largest whatever the rounding, and the argmax of the
logits is the answer. :func:`clear_winners` finds those rows in one pass;
the others go through the softmax.

Why the margin suffices: the softmax subtracts the row's maximum m in float32,
``d = fl(z - m)``; a gap ``m - z >= MARGIN`` gives ``d <= -MARGIN`` (rounding
cannot cross ``-MARGIN``, a power of two), so ``exp(d) <= exp(-2**-10) <
0.999``, while the maximum's term is ``exp(0) = 1``. Divided by the same sum
(correctly rounded, so monotone), the two quotients stay about 1e-3 apart,
thousands of float32 steps: no exp within that error can swap or tie them.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["MARGIN", "clear_winners"]

#: The gap between a row's largest logit and the others that settles its class.
MARGIN = 2.0**-10


@njit(cache=True, nogil=True, fastmath=False)
def clear_winners(logits, out):
    """``out[i]`` = the column of row i's largest logit where it wins by
    :data:`MARGIN` (computed as the softmax computes it), else -1.

    `logits` is float32 (or float64) of shape ``(n, k)``, ``k >= 1``; `out`
    int64 of length n. A row with NaN, or whose largest logit is infinite,
    gets -1 (a -inf below a finite maximum wins clearly). Returns the number
    of rows at -1.
    """
    margin = np.float32(MARGIN)
    unsure = 0
    for i in range(logits.shape[0]):
        best = 0
        top = logits[i, 0]
        for j in range(1, logits.shape[1]):
            if logits[i, j] > top:
                top = logits[i, j]
                best = j
        ok = top - top == 0  # finite
        for j in range(logits.shape[1]):
            if j != best and not (logits[i, j] - top <= -margin):
                ok = False
        if ok:
            out[i] = best
        else:
            out[i] = -1
            unsure += 1
    return unsure
