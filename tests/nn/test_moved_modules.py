"""The old paths of the flat sksign.nn: imports, and pickles that name them."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib
import importlib.util
import pickle
import pickletools
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sksign.nn
from sksign.nn import ICBMNet, build_network

NN = Path(sksign.nn.__file__).parent
#: the input width of the small nets: one 3x8x8 image
N_FEATURES = 3 * 8 * 8

#: The modules of the flat sksign.nn (before its subpackages) and their
#: ``__all__`` then; sew_resnet also held ``_TimeFolded``, the one private
#: module class that a pickled net names.
FLAT = {
    "sksign.nn._htaf_kernel": ["htaf_backward_f32", "htaf_forward_f32"],
    "sksign.nn._images": ["ImageInput", "check_image_shape"],
    "sksign.nn._quadrant": ["quadrant_majority", "supports_quadrant_majority"],
    "sksign.nn._spikingjelly": ["HTAFSurrogate"],
    "sksign.nn._validation": [
        "check_fraction",
        "check_n_concepts",
        "check_option",
        "check_positive",
        "check_sizes",
        "check_step_activation",
        "check_time_steps",
    ],
    "sksign.nn.activations": [
        "ACTIVATIONS",
        "HTAF",
        "STEP_ACTIVATIONS",
        "STEHeaviside",
        "ScaledSigmoid",
        "StepActivation",
        "force_step_mode",
        "heaviside",
        "htaf",
        "htaf_alpha0_min",
        "htaf_grid",
        "htaf_product_limit",
        "make_activation",
    ],
    "sksign.nn.augment": ["random_crop_flip"],
    "sksign.nn.batchnorm": ["batchnorm_layers", "recalibrate_batchnorm"],
    "sksign.nn.binary": ["BinaryLinear", "BinaryMLP", "binary_sign"],
    "sksign.nn.bireal": ["BiRealResNet18", "BiRealUnit", "BinaryConv2d"],
    "sksign.nn.factory": [
        "ARCHITECTURES",
        "IMAGE_ARCHITECTURES",
        "architecture_arguments",
        "build_network",
        "infer_input_shape",
    ],
    "sksign.nn.icbm": [
        "BACKBONES",
        "ICBMNet",
        "ImageBackbone",
        "backbone_output_width",
        "build_backbone",
    ],
    "sksign.nn.interventions": [
        "FLIPS",
        "NOISES",
        "magnitude_randomization",
        "reference_magnitudes",
        "sign_flip",
    ],
    "sksign.nn.losses": ["repulsion_lambda", "sign_repulsion_loss"],
    "sksign.nn.modules": [
        "ACTIVATIONS",
        "MLP",
        "STEP_ACTIVATIONS",
        "SmallCNN",
        "make_activation",
    ],
    "sksign.nn.readout": ["Readout"],
    "sksign.nn.resnet": ["BasicBlock", "ResNet18", "WideBlock", "WideResNet"],
    "sksign.nn.sew_resnet": ["LIFNeuron", "SEWBlock", "SEWResNet", "_TimeFolded"],
    "sksign.nn.spiking": ["IFNeuron", "SpikingMLP"],
    "sksign.nn.summary": ["binary_summary"],
    "sksign.nn.vit": ["ViTBlock", "VisionTransformer"],
}

#: the flat modules still at their path: the activations module became the
#: package of its name, the others stayed
KEPT = ("sksign.nn._validation", "sksign.nn.interventions", "sksign.nn.summary")

HAS_SPIKINGJELLY = importlib.util.find_spec("spikingjelly") is not None


def _needs(old):
    """The pytest marks of an old module (spikingjelly's needs spikingjelly)."""
    if old == "sksign.nn._spikingjelly":
        return [pytest.mark.skipif(not HAS_SPIKINGJELLY, reason="no spikingjelly")]
    return []


def _file(module):
    """The module's own file or package folder under sksign/nn (or None)."""
    path = NN.joinpath(*module.split(".")[2:])
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def test_every_flat_module_is_kept_or_moved():
    """Check each module of the flat sksign.nn is still there, or is an old
    path of the alias table whose new module exists, and no more."""
    moved = sksign.nn._MOVED_MODULES
    assert set(moved).isdisjoint(KEPT)
    assert "sksign.nn.activations" not in moved
    assert set(moved) | {*KEPT, "sksign.nn.activations"} == set(FLAT)
    for old, new in moved.items():
        assert _file(old) is None, f"{old} is still a file: its alias is dead"
        assert _file(new) is not None, f"{old} -> {new}: no such module"
    for module in (*KEPT, "sksign.nn.activations"):
        assert _file(module) is not None, module


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(old, new, marks=_needs(old))
        for old, new in sorted(sksign.nn._MOVED_MODULES.items())
    ],
)
def test_old_path_imports_as_its_new_module(old, new):
    """Check ``import <old path>`` gives the new module itself, which keeps its
    own name and spec."""
    module = importlib.import_module(new)
    assert importlib.import_module(old) is module
    assert sys.modules[old] is module
    namespace = {}
    exec(f"import {old} as alias", namespace)
    assert namespace["alias"] is module
    assert module.__name__ == new
    assert module.__spec__.name == new
    assert module.__spec__.origin == module.__file__


@pytest.mark.parametrize(
    ("old", "name"),
    [
        pytest.param(old, name, marks=_needs(old))
        for old, names in sorted(FLAT.items())
        for name in names
    ],
)
def test_old_path_holds_each_of_its_names(old, name):
    """Check ``from <old path> import <name>`` gives the object of the name's
    new home, and what sksign.nn exports under that name."""
    namespace = {}
    exec(f"from {old} import {name}", namespace)
    obj = namespace[name]
    if isinstance(obj, type) or callable(obj):
        home = importlib.import_module(obj.__module__)
        assert getattr(home, obj.__name__) is obj
        assert obj.__module__ not in sksign.nn._MOVED_MODULES
    if name in sksign.nn.__all__:
        assert getattr(sksign.nn, name) is obj


@pytest.mark.skipif(HAS_SPIKINGJELLY, reason="spikingjelly is installed")
def test_spikingjelly_old_path_fails_as_the_new_one():
    """Check the old path of the optional module raises the new one's error
    (which says what to install) and leaves no half-imported module."""
    with pytest.raises(ImportError, match="spikingjelly"):
        importlib.import_module("sksign.nn._spikingjelly")
    assert "sksign.nn._spikingjelly" not in sys.modules
    with pytest.raises(ImportError, match="spikingjelly"):
        importlib.import_module("sksign.nn.activations._spikingjelly")


def _old_class_paths():
    """``{class: its module in the flat sksign.nn}``."""
    classes = {}
    for old, names in FLAT.items():
        if old == "sksign.nn._spikingjelly":
            continue
        module = importlib.import_module(old)
        for name in names:
            obj = getattr(module, name)
            if isinstance(obj, type):
                classes.setdefault(obj, old)
    return classes


def _dumps_under_old_paths(obj):
    """``pickle.dumps(obj)`` as the flat sksign.nn wrote it: every class of
    sksign.nn recorded under its old module path (protocol 2, whose GLOBAL
    opcodes name the module and the class together)."""
    classes = _old_class_paths()
    saved = {cls: cls.__module__ for cls in classes}
    try:
        for cls, old in classes.items():
            cls.__module__ = old
        return pickle.dumps(obj, protocol=2)
    finally:
        for cls, module in saved.items():
            cls.__module__ = module


def _globals(path):
    """The ``"module name"`` of each class a protocol-2 pickle file names."""
    ops = pickletools.genops(Path(path).read_bytes())
    return {arg for op, arg, _ in ops if op.name == "GLOBAL"}


def _nets():
    """One small net of each architecture, each holding classes that moved."""
    image = {"input_shape": (3, 8, 8)}
    nets = {
        name: build_network(name, N_FEATURES, 3, hidden_layer_sizes=(6,), **kwargs)
        for name, kwargs in [
            ("mlp", {"activation": "htaf"}),
            ("cnn", {"conv_channels": (2,), **image}),
            ("bnn", {}),
            ("snn", {"time_steps": 2}),
            ("resnet18", {"width": 2, **image}),
            ("wrn", {"depth": 10, "widen_factor": 1, **image}),
            ("vit", {"dim": 8, "depth": 1, "heads": 2, "mlp_dim": 8, **image}),
            ("bireal", {"width": 2, **image}),
            (
                "sew_resnet",
                {"width": 2, "blocks": (1, 1, 1, 1), "neuron": "lif", **image},
            ),
        ]
    }
    nets["icbm"] = ICBMNet("mlp", N_FEATURES, 4, 3, hidden_layer_sizes=(6,))
    return nets


def test_pickles_of_the_flat_modules_load(tmp_path):
    """Check nets pickled under the old class paths (``sksign.nn.resnet.
    ResNet18``, ``sksign.nn.bireal.BinaryConv2d``, ...) load in a fresh
    interpreter that imported nothing of sksign, and predict as before."""
    torch.manual_seed(0)
    x = torch.randn(2, N_FEATURES)
    cases = {}
    for name, net in _nets().items():
        net.eval()
        with torch.no_grad():
            expected = net(x)
        data = _dumps_under_old_paths((net, x, expected))
        for new in ("architectures", "layers", "activations._", "hooks"):
            assert f"sksign.nn.{new}".encode() not in data, (name, new)
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(data)
        cases[name] = str(path)
    assert "sksign.nn.bireal BinaryConv2d" in _globals(cases["bireal"])
    assert "sksign.nn.sew_resnet LIFNeuron" in _globals(cases["sew_resnet"])
    assert "sksign.nn.activations HTAF" in _globals(cases["mlp"])

    code = (
        "import pickle, sys, torch\n"
        "assert 'sksign' not in sys.modules\n"
        f"for name, path in {cases!r}.items():\n"
        "    with open(path, 'rb') as f:\n"
        "        net, x, expected = pickle.load(f)\n"
        "    with torch.no_grad():\n"
        "        assert torch.allclose(net(x), expected, atol=1e-5), name\n"
        "    module = type(net).__module__\n"
        "    assert module.startswith('sksign.nn.architectures.')"
        " or module.startswith('sksign.nn.layers.'), module\n"
        "print('ok', len(sys.modules['sksign.nn']._MOVED_MODULES))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok")


def test_a_pickle_round_trip_keeps_the_new_paths():
    """Check a net pickled now names its classes at their new homes."""
    net = build_network("resnet18", N_FEATURES, 3, width=2, input_shape=(3, 8, 8))
    data = pickle.dumps(net)
    assert b"sksign.nn.architectures.resnet" in data
    assert b"sksign.nn.resnet" not in data
    clone = pickle.loads(data)
    assert type(clone) is type(net)
    assert type(clone).__module__ == "sksign.nn.architectures.resnet"
