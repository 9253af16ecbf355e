"""Torch building blocks (no scikit-learn inside): activations, layers and nets.

- :mod:`sksign.nn.activations`: the step activations (HTAF, the STE and
  scaled-sigmoid baselines), :func:`make_activation` and
  :func:`force_step_mode`;
- :mod:`sksign.nn.layers`: the building blocks of the nets and of their
  training: binary layers (:mod:`sksign.nn.layers.binary`), spiking neurons
  (:mod:`sksign.nn.layers.spiking`), the batch-independent readout
  (:mod:`sksign.nn.layers.readout`), BatchNorm statistics re-estimated with
  the exact step (:mod:`sksign.nn.layers.batchnorm`), the sign repulsion loss
  (:mod:`sksign.nn.layers.losses`) and batch augmentation
  (:mod:`sksign.nn.layers.augment`);
- :mod:`sksign.nn.architectures`: the named nets: MLP and small CNN
  (:mod:`sksign.nn.architectures.modules`), the papers' image nets
  (:mod:`sksign.nn.architectures.resnet`, :mod:`sksign.nn.architectures.vit`,
  :mod:`sksign.nn.architectures.sew_resnet`,
  :mod:`sksign.nn.architectures.bireal`), the ICBM net
  (:mod:`sksign.nn.architectures.icbm`) and the factory
  (:mod:`sksign.nn.architectures.factory`, :func:`build_network`), which
  builds any of them by name;
- :mod:`sksign.nn.hooks`: activation kinds, layer resolution, pooling, sign
  recording, and the one place where forward hooks are attached
  (:func:`forward_hooks`, :func:`capture_activations`,
  :func:`temporarily_eval`);
- :mod:`sksign.nn.interventions` and :mod:`sksign.nn.summary`: what is
  computed over any module with them.

The modules of the flat ``sksign.nn`` of earlier versions (``sksign.nn.resnet``,
``sksign.nn.binary``, ...) still import, as their new modules: see
``_MOVED_MODULES`` below.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib
import importlib.abc
import importlib.machinery
import sys

from sksign._public import public_names
from sksign.nn._validation import check_n_concepts
from sksign.nn.activations import (
    ACTIVATIONS,
    HTAF,
    STEP_ACTIVATIONS,
    ScaledSigmoid,
    STEHeaviside,
    StepActivation,
    force_step_mode,
    heaviside,
    htaf,
    htaf_alpha0_min,
    htaf_grid,
    htaf_product_limit,
    make_activation,
)
from sksign.nn.architectures import (
    ARCHITECTURES,
    BACKBONES,
    IMAGE_ARCHITECTURES,
    MLP,
    BiRealResNet18,
    ICBMNet,
    ResNet18,
    SEWResNet,
    SmallCNN,
    VisionTransformer,
    WideResNet,
    architecture_arguments,
    build_network,
    check_input_shape,
    infer_input_shape,
)
from sksign.nn.hooks import (
    ActivationCapture,
    SignRecorder,
    activation_kind,
    capture_activations,
    find_activations,
    forward_hooks,
    pool_signs,
    quadrant_bounds,
    record_signs,
    resolve_layers,
    temporarily_eval,
    temporary_mode,
)
from sksign.nn.interventions import (
    magnitude_randomization,
    reference_magnitudes,
    sign_flip,
)
from sksign.nn.layers import (
    BinaryConv2d,
    BinaryLinear,
    BinaryMLP,
    IFNeuron,
    LIFNeuron,
    SpikingMLP,
    batchnorm_layers,
    binary_sign,
    recalibrate_batchnorm,
)
from sksign.nn.summary import binary_summary

# Loaded on first access: it needs the optional spikingjelly.
_LAZY = {"HTAFSurrogate": "sksign.nn.activations._spikingjelly"}


def __getattr__(name: str):
    """Load the optional names (``HTAFSurrogate``) on first access."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The modules of the flat sksign.nn that moved into its subpackages -> their
#: new module. ``sksign.nn.activations`` became the package of that name. An
#: old path imports as its new module, the same object, so that code and
#: pickles that name it keep working: a pickled net records the class path of
#: its modules (``sksign.nn.resnet.ResNet18``). BinaryConv2d (from bireal) and
#: LIFNeuron (from sew_resnet) moved into the layers; the net modules that
#: use them import them, so their old paths hold them too.
_MOVED_MODULES = {
    "sksign.nn._htaf_kernel": "sksign.nn.activations._htaf_kernel",
    "sksign.nn._spikingjelly": "sksign.nn.activations._spikingjelly",
    "sksign.nn._quadrant": "sksign.nn.hooks._quadrant",
    "sksign.nn.augment": "sksign.nn.layers.augment",
    "sksign.nn.batchnorm": "sksign.nn.layers.batchnorm",
    "sksign.nn.binary": "sksign.nn.layers.binary",
    "sksign.nn.losses": "sksign.nn.layers.losses",
    "sksign.nn.readout": "sksign.nn.layers.readout",
    "sksign.nn.spiking": "sksign.nn.layers.spiking",
    "sksign.nn._images": "sksign.nn.architectures._images",
    "sksign.nn.bireal": "sksign.nn.architectures.bireal",
    "sksign.nn.factory": "sksign.nn.architectures.factory",
    "sksign.nn.icbm": "sksign.nn.architectures.icbm",
    "sksign.nn.modules": "sksign.nn.architectures.modules",
    "sksign.nn.resnet": "sksign.nn.architectures.resnet",
    "sksign.nn.sew_resnet": "sksign.nn.architectures.sew_resnet",
    "sksign.nn.vit": "sksign.nn.architectures.vit",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import each old path of :data:`_MOVED_MODULES` as its new module.

    A finder, not ``sys.modules`` entries made here, so that an old path
    loads its module only when it is imported (``sksign.nn._spikingjelly``
    needs the optional spikingjelly).
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(_MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # the import system gave the module the old path's spec: the module
        # keeps its own (its name, file and loader are untouched)
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())

# The public names are declared in sksign/_public.py. The others imported
# here (check_n_concepts, check_input_shape) are internal checkers:
# importable for sksign's own modules, not public.
__all__ = public_names(__name__)
