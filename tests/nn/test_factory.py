"""Tests for sksign.nn.architectures.factory and the old paths of its names."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib

import pytest
import torch

import sksign.nn
from sksign.nn import activations, hooks
from sksign.nn.architectures import factory, modules


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("build_network", factory),
        ("ARCHITECTURES", factory),
        ("infer_input_shape", factory),
        ("ACTIVATIONS", activations),
        ("STEP_ACTIVATIONS", activations),
        ("make_activation", activations),
    ],
)
def test_old_modules_paths_still_work(name, home):
    """Check sksign.nn.modules.<name> is the object of its new home (the old
    module path is the architectures' module, see tests/nn/test_moved_modules.py).
    """
    assert getattr(modules, name) is getattr(home, name)
    assert getattr(sksign.nn, name) is getattr(home, name)
    for path in ("sksign.nn.modules", "sksign.nn.architectures.modules"):
        namespace = {}
        exec(f"from {path} import {name}", namespace)
        assert namespace[name] is getattr(home, name)


def test_modules_getattr_refuses_unknown_names():
    """Check the lazy forwarding of the factory's old paths hides no typo."""
    with pytest.raises(AttributeError, match="no attribute 'build_net'"):
        modules.build_net  # noqa: B018


def test_hooks_package_keeps_its_names():
    """Check sksign.nn.hooks keeps what the single module did, and capture.

    Which of them are public is declared in sksign/_public.py (checked by
    tests/test_package.py); the option tuples stay importable here.
    """
    for name in (
        "CONV_POOLS",
        "RESIDUAL_MODES",
        "TOKEN_POOLS",
        "SignRecorder",
        "activation_kind",
        "find_activations",
        "pool_signs",
        "quadrant_bounds",
        "record_signs",
        "resolve_layers",
        "temporarily_eval",
        "forward_hooks",
        "capture_activations",
        "ActivationCapture",
    ):
        assert getattr(hooks, name) is not None


def test_every_public_name_of_nn_is_importable():
    """Check sksign.nn.__all__ names only real objects."""
    for name in sksign.nn.__all__:
        assert getattr(sksign.nn, name) is not None, name


def test_nn_imports_no_scikit_learn():
    """Check no module of sksign.nn needs scikit-learn or skorch at import."""
    for name in (
        "sksign.nn.architectures.factory",
        "sksign.nn.hooks",
        "sksign.nn.summary",
    ):
        module = importlib.import_module(name)
        source = open(module.__file__).read()
        assert "sklearn" not in source
        assert "skorch" not in source


@pytest.mark.parametrize("architecture", ["mlp", "cnn", "bnn", "snn"])
def test_build_network_builds_every_architecture(architecture):
    """Check build_network builds each architecture and the net runs."""
    kwargs = {"activation": "htaf"}
    net = factory.build_network(
        architecture, 16, 3, hidden_layer_sizes=(8,), conv_channels=(2,), **kwargs
    )
    assert net.eval()(torch.randn(2, 16)).shape == (2, 3)


def test_build_network_rejects_unknown_names():
    """Check unknown architecture and activation names raise ValueErrors."""
    with pytest.raises(ValueError, match="'architecture' parameter"):
        factory.build_network("rnn", 4, 2)
    with pytest.raises(ValueError, match="'activation' parameter"):
        factory.build_network("mlp", 4, 2, activation="nope")
