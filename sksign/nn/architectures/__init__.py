"""The named nets, and the factory that builds any of them by name.

- :mod:`sksign.nn.architectures.modules`: the dense net (:class:`MLP`) and the
  small CNN (:class:`SmallCNN`);
- the papers' image nets: :mod:`sksign.nn.architectures.resnet` (the CIFAR
  :class:`ResNet18`, :class:`WideResNet`), :mod:`sksign.nn.architectures.vit`
  (:class:`VisionTransformer`), :mod:`sksign.nn.architectures.sew_resnet`
  (:class:`SEWResNet`) and :mod:`sksign.nn.architectures.bireal`
  (:class:`BiRealResNet18`);
- :mod:`sksign.nn.architectures.icbm`: the implicit concept bottleneck net
  (:class:`ICBMNet`) over any of those backbones;
- :mod:`sksign.nn.architectures.factory`: :func:`build_network` and the
  tables of names (:data:`ARCHITECTURES`, :data:`IMAGE_ARCHITECTURES`).

The binary and spiking MLPs are built from their layers, in
:mod:`sksign.nn.layers`. This package is torch only (no scikit-learn). It
re-exports the names that :mod:`sksign.nn` re-exports; the blocks of the nets
(``BasicBlock``, ``ViTBlock``, ...) stay in their public modules.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.nn.architectures.bireal import BiRealResNet18
from sksign.nn.architectures.factory import (
    ARCHITECTURES,
    IMAGE_ARCHITECTURES,
    architecture_arguments,
    build_network,
    check_input_shape,
    infer_input_shape,
)
from sksign.nn.architectures.icbm import BACKBONES, ICBMNet
from sksign.nn.architectures.modules import MLP, SmallCNN
from sksign.nn.architectures.resnet import ResNet18, WideResNet
from sksign.nn.architectures.sew_resnet import SEWResNet
from sksign.nn.architectures.vit import VisionTransformer

# The public names are declared in sksign/_public.py. check_input_shape is
# an internal checker: importable for sksign's own modules, not public.
__all__ = public_names(__name__)
