"""The building blocks of the nets and of their training.

- :mod:`sksign.nn.layers.binary`: binary weights (:func:`binary_sign`,
  :class:`BinaryLinear`, :class:`BinaryConv2d`) and the Bi-Real-style binary
  MLP (:class:`BinaryMLP`);
- :mod:`sksign.nn.layers.spiking`: integrate-and-fire neurons
  (:class:`IFNeuron`, :class:`LIFNeuron`) and the spiking MLP
  (:class:`SpikingMLP`);
- :mod:`sksign.nn.layers.readout`: the float readout of the built-in nets,
  batch-independent at inference (``Readout``);
- :mod:`sksign.nn.layers.batchnorm`: BatchNorm statistics re-estimated with
  the activations of inference (:func:`recalibrate_batchnorm`);
- :mod:`sksign.nn.layers.losses`: the intra-class sign repulsion loss;
- :mod:`sksign.nn.layers.augment`: random crops and flips of image batches.

This package is torch only (no scikit-learn). It re-exports the names that
:mod:`sksign.nn` re-exports; the others stay in their public modules.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.nn.layers.batchnorm import batchnorm_layers, recalibrate_batchnorm
from sksign.nn.layers.binary import BinaryConv2d, BinaryLinear, BinaryMLP, binary_sign
from sksign.nn.layers.spiking import IFNeuron, LIFNeuron, SpikingMLP

# The public names are declared in sksign/_public.py.
__all__ = public_names(__name__)
