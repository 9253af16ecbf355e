"""Tests for the shared argument checks of sksign.nn: one error per mistake."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import numpy as np
import pytest
import torch

from sksign.nn import (
    HTAF,
    BinaryLinear,
    BinaryMLP,
    ICBMNet,
    IFNeuron,
    SpikingMLP,
    build_network,
    check_n_concepts,
    magnitude_randomization,
    sign_flip,
)
from sksign.nn._validation import check_sizes, check_time_steps


@pytest.mark.parametrize("check", [check_time_steps, check_n_concepts])
def test_counts_type_and_value_errors(check):
    """Check counts: TypeError for a float or bool, ValueError for 0 or less."""
    assert check(3) == 3
    assert check(np.int64(2)) == 2
    for wrong_type in (2.5, 2.0, True, "3", None):
        with pytest.raises(TypeError, match="int >= 1"):
            check(wrong_type)
    for bad_value in (0, -1):
        with pytest.raises(ValueError, match="int >= 1"):
            check(bad_value)


def test_n_concepts_agrees_with_time_steps():
    """Check n_concepts gives the same error types as time_steps (a float: Type)."""
    with pytest.raises(TypeError, match="n_concepts"):
        ICBMNet("mlp", 4, 2.5, 2)
    with pytest.raises(ValueError, match="n_concepts"):
        ICBMNet("mlp", 4, 0, 2)
    with pytest.raises(TypeError, match="time_steps"):
        SpikingMLP(4, 2, time_steps=2.5)


def test_sizes_type_and_value_errors():
    """Check sizes: TypeError for non-sequences and non-ints, ValueError for < 1."""
    assert check_sizes("hidden_layer_sizes", 5) == (5,)
    assert check_sizes("hidden_layer_sizes", np.array([4, 3])) == (4, 3)
    assert check_sizes("hidden_layer_sizes", ()) == ()
    for wrong_type in (None, 2.5, "64", [4, 2.5], [True], [None]):
        with pytest.raises(TypeError, match="hidden_layer_sizes must be a sequence"):
            check_sizes("hidden_layer_sizes", wrong_type)
    for bad_value in ([0], [4, -1], -3):
        with pytest.raises(ValueError, match="positive ints"):
            check_sizes("hidden_layer_sizes", bad_value)
    with pytest.raises(TypeError, match="hidden_layer_sizes"):
        build_network("mlp", 4, 2, hidden_layer_sizes=[8.5])
    with pytest.raises(ValueError, match="input_shape"):
        build_network("cnn", 16, 2, input_shape=(1, 0, 4))


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda v: HTAF(mode=v), "mode"),
        (lambda v: BinaryLinear(3, 2, weight_grad=v), "weight_grad"),
        (lambda v: IFNeuron(reset=v), "reset"),
        (lambda v: SpikingMLP(4, 2, connect=v), "connect"),
        (lambda v: BinaryMLP(4, 2, activation=v), "step-like activation"),
        (lambda v: IFNeuron(activation=v), "step-like activation"),
    ],
)
def test_options_type_and_value_errors(build, name):
    """Check options: TypeError for a non-str, ValueError for an unknown str."""
    with pytest.raises(TypeError, match=name):
        build(3)
    with pytest.raises(ValueError, match=name):
        build("nope")


def test_positive_reals_type_and_value_errors():
    """Check thresholds and scales: TypeError for a non-number, ValueError <= 0."""
    with pytest.raises(TypeError, match="threshold"):
        IFNeuron(threshold="1.0")
    with pytest.raises(ValueError, match="threshold"):
        IFNeuron(threshold=-1.0)
    with pytest.raises(ValueError, match="threshold"):
        IFNeuron(threshold=float("inf"))
    assert IFNeuron(threshold=2).threshold == 2.0


@pytest.mark.parametrize("ctx", [sign_flip, magnitude_randomization])
def test_intervention_alpha_and_options(ctx):
    """Check alpha: TypeError for a non-number, ValueError outside [0, 1]."""
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    with pytest.raises(TypeError, match="'alpha' parameter"), ctx(net, alpha="0.5"):
        pass  # pragma: no cover
    with pytest.raises(ValueError, match="'alpha' parameter"), ctx(net, alpha=-0.1):
        pass  # pragma: no cover
    option = {"flip": 1} if ctx is sign_flip else {"noise": 1}
    match = f"'{next(iter(option))}' parameter"
    with pytest.raises(TypeError, match=match), ctx(net, **option):
        pass  # pragma: no cover
