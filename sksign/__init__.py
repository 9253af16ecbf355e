"""sksign: binary structure in deep nets, the scikit-learn way.

HTAF nets whose hidden units are exact Heaviside steps at inference, sign codes
read out of any fitted net, a popcount Hamming k-NN on those codes, and the
Sign Code paper's interventions and gate-dominance diagnostics as scorers.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._version import __version__

__all__ = ["__version__"]
