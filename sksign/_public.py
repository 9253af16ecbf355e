"""The public surface of sksign, declared once.

Each public module maps its public names to the module that defines them. The
top-level names and lazy loading of :mod:`sksign`, the ``__all__`` of the
subpackages, ``docs/api.rst`` (written by ``docs/conf.py``) and the tests'
lists of public names are all made from this table; a name that is not here
is internal, even when a package imports it for sksign's own modules.

A name is documented under the first module that lists it (``pack_bits`` is
public in :mod:`sksign.kernels` and re-exported by :mod:`sksign.metrics`).
The nn subpackages (:mod:`sksign.nn.activations`, :mod:`sksign.nn.layers`,
:mod:`sksign.nn.architectures`, :mod:`sksign.nn.hooks`) list the names that
:mod:`sksign.nn` re-exports from them; the public modules inside them list
only the names that :mod:`sksign.nn` does not re-export (their own
``__all__`` lists everything they define).

Standard library only: ``import sksign`` reads this table.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

#: (title in the API reference, public module, {public name: defining module})
_SECTIONS = (
    (
        "Estimators",
        "sksign.estimators",
        {
            "AlphaAnnealing": "sksign.estimators._callbacks",
            "ConceptRecord": "sksign.estimators._concepts",
            "CosineSchedule": "sksign.estimators._step_recipe",
            "HTAFNetClassifier": "sksign.estimators._htaf_net",
            "HTAFNetRegressor": "sksign.estimators._regressor",
            "ICBMClassifier": "sksign.estimators._icbm",
            "RelaxationGap": "sksign.estimators._callbacks",
            "SignKNNClassifier": "sksign.estimators._sign_knn",
            "SignKNNRegressor": "sksign.estimators._sign_knn_regressor",
            "StepForwardPhase": "sksign.estimators._step_recipe",
        },
    ),
    (
        "Transformers",
        "sksign.transformers",
        {
            "BERT_FFN_LAYERS": "sksign.transformers._huggingface",
            "FFNLayer": "sksign.transformers._ffn",
            "HFForwardKwargs": "sksign.transformers._huggingface",
            "SignCodeTransformer": "sksign.transformers._sign_codes",
            "distill_ffn": "sksign.transformers._ffn_distill",
            "find_ffn_activations": "sksign.transformers._ffn",
            "hf_forward_kwargs": "sksign.transformers._huggingface",
            "hf_sign_code_transformer": "sksign.transformers._huggingface",
            "swap_ffn_activations": "sksign.transformers._ffn_swap",
            "tokenize_to_array": "sksign.transformers._huggingface",
        },
    ),
    (
        "Scorers",
        "sksign.metrics",
        {
            "GateDominanceReport": "sksign.metrics._gate_dominance",
            "gate_dominance": "sksign.metrics._gate_dominance",
            "gate_dominance_from_activations": "sksign.metrics._gate_dominance",
            "gate_dominance_report": "sksign.metrics._gate_dominance",
            "intervention_score": "sksign.metrics._interventions",
            "loo_purity": "sksign.inspection._sign_geometry",
            "make_gate_dominance_scorer": "sksign.metrics._gate_dominance",
            "make_intervention_scorer": "sksign.metrics._interventions",
            "pack_bits": "sksign.kernels._packing",
            "packed_hamming_distances": "sksign.kernels._pairwise",
            "packed_kneighbors": "sksign.kernels._pairwise",
            "sign_gap": "sksign.inspection._sign_geometry",
            "unpack_bits": "sksign.kernels._packing",
        },
    ),
    (
        "Sign geometry",
        "sksign.inspection",
        {
            "loo_purity": "sksign.inspection._sign_geometry",
            "sign_gap": "sksign.inspection._sign_geometry",
        },
    ),
    (
        "Packed-bit kernels",
        "sksign.kernels",
        {
            "pack_bits": "sksign.kernels._packing",
            "packed_hamming_distances": "sksign.kernels._pairwise",
            "packed_kneighbors": "sksign.kernels._pairwise",
            "packed_to_words": "sksign.kernels._packing",
            "popcount_instructions": "sksign.kernels._popcount",
            "unpack_bits": "sksign.kernels._packing",
            "words_hamming_distances": "sksign.kernels._words",
            "words_kneighbors": "sksign.kernels._words",
        },
    ),
    (
        "Data sets",
        "sksign.datasets",
        {
            "AUTOMPG_FEATURES": "sksign.datasets._bundled",
            "docstring_sentences": "sksign.datasets._bundled",
            "load_autompg": "sksign.datasets._bundled",
            "load_breast_cancer": "sksign.datasets._bundled",
            "load_cifar10": "sksign.datasets._cifar_svhn",
            "load_cifar100": "sksign.datasets._cifar_svhn",
            "load_diabetes": "sksign.datasets._bundled",
            "load_digits": "sksign.datasets._bundled",
            "load_mnist": "sksign.datasets._files",
            "load_mnist5k": "sksign.datasets._bundled",
            "load_svhn": "sksign.datasets._cifar_svhn",
        },
    ),
    (
        "Torch building blocks",
        "sksign.nn",
        {
            "ACTIVATIONS": "sksign.nn.activations._registry",
            "ARCHITECTURES": "sksign.nn.architectures.factory",
            "BACKBONES": "sksign.nn.architectures.icbm",
            "HTAF": "sksign.nn.activations._htaf",
            "IMAGE_ARCHITECTURES": "sksign.nn.architectures.factory",
            "MLP": "sksign.nn.architectures.modules",
            "STEP_ACTIVATIONS": "sksign.nn.activations._registry",
            "ActivationCapture": "sksign.nn.hooks._capture",
            "BiRealResNet18": "sksign.nn.architectures.bireal",
            "BinaryConv2d": "sksign.nn.layers.binary",
            "BinaryLinear": "sksign.nn.layers.binary",
            "BinaryMLP": "sksign.nn.layers.binary",
            "ICBMNet": "sksign.nn.architectures.icbm",
            "IFNeuron": "sksign.nn.layers.spiking",
            "LIFNeuron": "sksign.nn.layers.spiking",
            "ResNet18": "sksign.nn.architectures.resnet",
            "SEWResNet": "sksign.nn.architectures.sew_resnet",
            "STEHeaviside": "sksign.nn.activations._baselines",
            "ScaledSigmoid": "sksign.nn.activations._baselines",
            "SignRecorder": "sksign.nn.hooks._recording",
            "SmallCNN": "sksign.nn.architectures.modules",
            "SpikingMLP": "sksign.nn.layers.spiking",
            "StepActivation": "sksign.nn.activations._step",
            "VisionTransformer": "sksign.nn.architectures.vit",
            "WideResNet": "sksign.nn.architectures.resnet",
            "activation_kind": "sksign.nn.hooks._kinds",
            "architecture_arguments": "sksign.nn.architectures.factory",
            "batchnorm_layers": "sksign.nn.layers.batchnorm",
            "binary_sign": "sksign.nn.layers.binary",
            "binary_summary": "sksign.nn.summary",
            "build_network": "sksign.nn.architectures.factory",
            "capture_activations": "sksign.nn.hooks._capture",
            "find_activations": "sksign.nn.hooks._kinds",
            "force_step_mode": "sksign.nn.activations._step",
            "forward_hooks": "sksign.nn.hooks._capture",
            "heaviside": "sksign.nn.activations._step",
            "htaf": "sksign.nn.activations._htaf",
            "htaf_alpha0_min": "sksign.nn.activations._htaf",
            "htaf_grid": "sksign.nn.activations._htaf",
            "htaf_product_limit": "sksign.nn.activations._htaf",
            "infer_input_shape": "sksign.nn.architectures.factory",
            "magnitude_randomization": "sksign.nn.interventions",
            "make_activation": "sksign.nn.activations._registry",
            "pool_signs": "sksign.nn.hooks._pooling",
            "quadrant_bounds": "sksign.nn.hooks._pooling",
            "recalibrate_batchnorm": "sksign.nn.layers.batchnorm",
            "record_signs": "sksign.nn.hooks._recording",
            "reference_magnitudes": "sksign.nn.interventions",
            "resolve_layers": "sksign.nn.hooks._layers",
            "sign_flip": "sksign.nn.interventions",
            "temporarily_eval": "sksign.nn.hooks._capture",
            "temporary_mode": "sksign.nn.hooks._capture",
        },
    ),
    (
        "Hooks, capture and sign recording",
        "sksign.nn.hooks",
        {
            "ActivationCapture": "sksign.nn.hooks._capture",
            "SignRecorder": "sksign.nn.hooks._recording",
            "activation_kind": "sksign.nn.hooks._kinds",
            "capture_activations": "sksign.nn.hooks._capture",
            "find_activations": "sksign.nn.hooks._kinds",
            "forward_hooks": "sksign.nn.hooks._capture",
            "pool_signs": "sksign.nn.hooks._pooling",
            "quadrant_bounds": "sksign.nn.hooks._pooling",
            "record_signs": "sksign.nn.hooks._recording",
            "resolve_layers": "sksign.nn.hooks._layers",
            "temporarily_eval": "sksign.nn.hooks._capture",
            "temporary_mode": "sksign.nn.hooks._capture",
        },
    ),
    (
        "Step activations",
        "sksign.nn.activations",
        {
            "ACTIVATIONS": "sksign.nn.activations._registry",
            "HTAF": "sksign.nn.activations._htaf",
            "STEHeaviside": "sksign.nn.activations._baselines",
            "STEP_ACTIVATIONS": "sksign.nn.activations._registry",
            "ScaledSigmoid": "sksign.nn.activations._baselines",
            "StepActivation": "sksign.nn.activations._step",
            "force_step_mode": "sksign.nn.activations._step",
            "heaviside": "sksign.nn.activations._step",
            "htaf": "sksign.nn.activations._htaf",
            "htaf_alpha0_min": "sksign.nn.activations._htaf",
            "htaf_grid": "sksign.nn.activations._htaf",
            "htaf_product_limit": "sksign.nn.activations._htaf",
            "make_activation": "sksign.nn.activations._registry",
        },
    ),
    (
        "Layers",
        "sksign.nn.layers",
        {
            "BinaryConv2d": "sksign.nn.layers.binary",
            "BinaryLinear": "sksign.nn.layers.binary",
            "BinaryMLP": "sksign.nn.layers.binary",
            "IFNeuron": "sksign.nn.layers.spiking",
            "LIFNeuron": "sksign.nn.layers.spiking",
            "SpikingMLP": "sksign.nn.layers.spiking",
            "batchnorm_layers": "sksign.nn.layers.batchnorm",
            "binary_sign": "sksign.nn.layers.binary",
            "recalibrate_batchnorm": "sksign.nn.layers.batchnorm",
        },
    ),
    (
        "Architectures",
        "sksign.nn.architectures",
        {
            "ARCHITECTURES": "sksign.nn.architectures.factory",
            "BACKBONES": "sksign.nn.architectures.icbm",
            "BiRealResNet18": "sksign.nn.architectures.bireal",
            "ICBMNet": "sksign.nn.architectures.icbm",
            "IMAGE_ARCHITECTURES": "sksign.nn.architectures.factory",
            "MLP": "sksign.nn.architectures.modules",
            "ResNet18": "sksign.nn.architectures.resnet",
            "SEWResNet": "sksign.nn.architectures.sew_resnet",
            "SmallCNN": "sksign.nn.architectures.modules",
            "VisionTransformer": "sksign.nn.architectures.vit",
            "WideResNet": "sksign.nn.architectures.resnet",
            "architecture_arguments": "sksign.nn.architectures.factory",
            "build_network": "sksign.nn.architectures.factory",
            "infer_input_shape": "sksign.nn.architectures.factory",
        },
    ),
    (
        "ICBM network",
        "sksign.nn.architectures.icbm",
        {
            "ImageBackbone": "sksign.nn.architectures.icbm",
            "backbone_output_width": "sksign.nn.architectures.icbm",
            "build_backbone": "sksign.nn.architectures.icbm",
        },
    ),
    (
        "Batch-independent readout",
        "sksign.nn.layers.readout",
        {"Readout": "sksign.nn.layers.readout"},
    ),
    (
        "Image augmentation",
        "sksign.nn.layers.augment",
        {"random_crop_flip": "sksign.nn.layers.augment"},
    ),
    (
        "Interventions on modules",
        "sksign.nn.interventions",
        {"FLIPS": "sksign.nn.interventions", "NOISES": "sksign.nn.interventions"},
    ),
    (
        "Losses",
        "sksign.nn.layers.losses",
        {
            "repulsion_lambda": "sksign.nn.layers.losses",
            "sign_repulsion_loss": "sksign.nn.layers.losses",
        },
    ),
    (
        "Residual blocks of the papers' nets",
        "sksign.nn.architectures.resnet",
        {
            "BasicBlock": "sksign.nn.architectures.resnet",
            "WideBlock": "sksign.nn.architectures.resnet",
        },
    ),
    (
        "Vision transformer blocks",
        "sksign.nn.architectures.vit",
        {"ViTBlock": "sksign.nn.architectures.vit"},
    ),
    (
        "Bi-Real blocks",
        "sksign.nn.architectures.bireal",
        {"BiRealUnit": "sksign.nn.architectures.bireal"},
    ),
    (
        "SEW-ResNet blocks",
        "sksign.nn.architectures.sew_resnet",
        {"SEWBlock": "sksign.nn.architectures.sew_resnet"},
    ),
    (
        "Dask arrays",
        "sksign.distributed",
        {"is_dask_array": "sksign.distributed._arrays"},
    ),
    (
        "Packed bit inference",
        "sksign.deploy",
        {
            "PackedClassifier": "sksign.deploy._estimators",
            "PackedNet": "sksign.deploy._runtime",
            "PackedRegressor": "sksign.deploy._estimators",
            "load": "sksign.deploy._persist",
            "pack": "sksign.deploy._convert",
            "pack_ffn": "sksign.deploy._convert_ffn",
            "packed_summary": "sksign.deploy._summary",
            "save": "sksign.deploy._persist",
        },
    ),
)

#: the public packages' and modules' names, in the API reference's order
PUBLIC = {module: names for _, module, names in _SECTIONS}

#: the subpackages that ``sksign`` loads on first access (``sksign.nn``)
SUBPACKAGES = ("datasets", "estimators", "metrics", "nn", "transformers")

#: the names importable from ``sksign`` itself -> the subpackage they come from
TOP_LEVEL = {
    "HTAFNetClassifier": "sksign.estimators",
    "HTAFNetRegressor": "sksign.estimators",
    "ICBMClassifier": "sksign.estimators",
    "SignKNNClassifier": "sksign.estimators",
    "SignKNNRegressor": "sksign.estimators",
    "SignCodeTransformer": "sksign.transformers",
    "intervention_score": "sksign.metrics",
    "gate_dominance": "sksign.metrics",
}


def public_names(module):
    """The sorted public names of ``module`` (its ``__all__``).

    Parameters
    ----------
    module : str
        A module of :data:`PUBLIC`, such as ``"sksign.nn"``.

    Returns
    -------
    names : list of str
    """
    return sorted(PUBLIC[module])


def sections():
    """The API reference's sections.

    Returns
    -------
    sections : list of (str, str, dict)
        ``(title, public module, {public name: defining module})``.
    """
    return list(_SECTIONS)
