"""Converters of the dense and small conv nets: MLP, SmallCNN, BinaryMLP,
SpikingMLP and ICBMNet.

:data:`CONVERTERS` maps each module type to its architecture name and the
function that adds its layers to a :class:`~sksign.deploy._convert_base.Builder`.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import numpy as np
from torch import nn

from sksign.deploy._convert_base import (
    as_f32,
    as_f64,
    bn_affine,
    check_step,
)
from sksign.deploy._format import conv_output_size
from sksign.nn.activations import StepActivation
from sksign.nn.architectures.icbm import ICBMNet
from sksign.nn.architectures.modules import MLP, SmallCNN
from sksign.nn.layers.binary import BinaryLinear, BinaryMLP
from sksign.nn.layers.spiking import IFNeuron, SpikingMLP

__all__ = ["CONVERTERS"]


def _dense_sequence(builder, children, *, backbone_float_ok=False):
    """Linear/activation pairs in forward order (MLP and ICBM stacks)."""
    for k, (name, module) in enumerate(children):
        nxt = children[k + 1][1] if k + 1 < len(children) else None
        if isinstance(module, nn.Linear):
            then_step = isinstance(nxt, StepActivation) and nxt.mode != "smooth"
            builder.linear(name, module, then_step=then_step)
        elif isinstance(module, StepActivation):
            check_step(name, module)
            if builder.kind == "float":
                builder.step(name)
        elif backbone_float_ok and isinstance(module, nn.ReLU):
            builder.add(name, "relu", [builder.value])
        else:
            check_step(name, module)


def _check_conv(name, conv):
    ok = (
        isinstance(conv, nn.Conv2d)
        and conv.kernel_size[0] == conv.kernel_size[1]
        and conv.stride == (1, 1)
        and conv.dilation == (1, 1)
        and conv.groups == 1
        and isinstance(conv.padding, tuple)
        and conv.padding[0] == conv.padding[1]
        and conv.padding_mode == "zeros"
    )
    if not ok:
        raise ValueError(
            f"Cannot pack layer {name!r}: a square stride-1 Conv2d with zero "
            f"padding is expected; got {conv!r}."
        )


def _conv_sequence(builder, children, shape):
    """The conv blocks of a SmallCNN (``conv{i}``, ``conv_act{i}``, ``pool{i}``).

    Returns the children after ``flatten`` (the dense part).
    """
    shape = list(shape)
    for k, (name, module) in enumerate(children):
        if isinstance(module, nn.Unflatten):
            continue
        if isinstance(module, nn.Flatten):
            return children[k + 1 :]
        nxt = children[k + 1] if k + 1 < len(children) else (None, None)
        if isinstance(module, nn.Conv2d):
            _check_conv(name, module)
            check_step(nxt[0], nxt[1])
            ks, pad = module.kernel_size[0], module.padding[0]
            h = conv_output_size(shape[1], ks, 1, pad)
            w = conv_output_size(shape[2], ks, 1, pad)
            oc = module.out_channels
            attrs = {
                "shape": shape,
                "channels": oc,
                "kernel": ks,
                "padding": pad,
                "out": oc * h * w,
            }
            weight = as_f64(module.weight).reshape(oc, -1)
            bias = as_f64(module.bias) if module.bias is not None else np.zeros(oc)
            if builder.kind == "float":
                builder.add(
                    name,
                    "conv",
                    [builder.value],
                    attrs,
                    {"weight": as_f32(weight), "bias": as_f32(bias)},
                    width=oc * h * w,
                )
            else:
                builder.add(
                    name,
                    "bit_conv_step",
                    [builder.value],
                    attrs,
                    {"weight_t": as_f32(weight.T), "threshold": as_f32(-bias)},
                    kind="bits",
                    width=oc * h * w,
                )
            shape = [oc, h, w]
        elif isinstance(module, StepActivation):
            check_step(name, module)
            if builder.kind == "float":
                builder.step(name)
        elif isinstance(module, nn.MaxPool2d):
            if module.kernel_size not in (2, (2, 2)) or module.stride not in (
                2,
                (2, 2),
            ):
                raise ValueError(
                    f"Cannot pack layer {name!r}: only 2x2 max pooling is supported."
                )
            c, h, w = shape
            builder.add(
                name,
                "max_pool",
                [builder.value],
                {"shape": shape, "out": c * (h // 2) * (w // 2)},
                kind="bits",
                width=c * (h // 2) * (w // 2),
            )
            shape = [c, h // 2, w // 2]
        else:
            check_step(name, module)
    return []


def _cnn(builder, module):
    children = list(module.named_children())
    dense = _conv_sequence(builder, children, module.unflatten.unflattened_size)
    dense = [(n, m) for n, m in dense if n != "out"]
    _dense_sequence(builder, dense)
    builder.linear("out", module.out, readout=True)


def _mlp(builder, module):
    children = [(n, m) for n, m in module.named_children() if n != "out"]
    _dense_sequence(builder, children)
    builder.linear("out", module.out, readout=True)


def _icbm(builder, module):
    if hasattr(module, "unflatten"):
        raise ValueError(
            "Cannot pack an ICBM net with a custom backbone module; the 'mlp', "
            "'cnn' and 'identity' backbones are supported."
        )
    backbone = module.backbone
    if isinstance(backbone, SmallCNN):
        shape = list(backbone.unflatten.unflattened_size)
        children = [(f"backbone.{n}", m) for n, m in backbone.named_children()]
        dense = _conv_sequence(builder, children, shape)
        _dense_sequence(builder, dense)
        children = []
    elif isinstance(backbone, nn.Identity):
        children = []
    elif isinstance(backbone, nn.Sequential):
        children = [(f"backbone.{n}", m) for n, m in backbone.named_children()]
        for n, m in children:
            if not isinstance(m, nn.Linear | nn.ReLU | StepActivation):
                raise ValueError(
                    f"Cannot pack backbone layer {n!r} ({type(m).__name__}): a "
                    "packed ICBM backbone has Linear layers with step or ReLU "
                    "activations."
                )
    else:
        raise ValueError(
            f"Cannot pack an ICBM backbone of type {type(backbone).__name__}."
        )
    check_step("concepts", module.concepts, where="concept")
    children = [*children, ("fc", module.fc), ("concepts", module.concepts)]
    _dense_sequence(builder, children, backbone_float_ok=True)
    builder.linear("head", module.head, readout=True)


def _bnn(builder, module):
    builder.linear("stem", module.stem)
    if module.batch_norm:
        builder.batch_norm("stem_bn", module.stem_bn)
    for i in range(module.n_blocks):
        act = getattr(module, f"act{i}")
        fc = getattr(module, f"fc{i}")
        short = getattr(module, f"short{i}")
        check_step(f"act{i}", act)
        stream = builder.value
        n_in = builder.width
        bits = builder.add(f"act{i}", "step", [stream], kind="bits")
        if not isinstance(fc, BinaryLinear):  # pragma: no cover - built by BinaryMLP
            raise ValueError(f"Cannot pack layer 'fc{i}' of type {type(fc).__name__}.")
        w = as_f64(fc.weight)
        bias = as_f64(fc.bias) if fc.bias is not None else np.zeros(len(w))
        bn_scale, bn_shift = np.ones(len(w)), np.zeros(len(w))
        if module.batch_norm:
            bn_scale, bn_shift = bn_affine(f"bn{i}", getattr(module, f"bn{i}"))
        if fc.binary:
            # scale * sign(W), sign(0) = +1; a . sign(W) = n - 2 popcount(a ^ w)
            scale = np.abs(w).mean(axis=1)
            signs = (w >= 0).astype(np.uint8)
            builder.add(
                f"fc{i}",
                "xnor_dense",
                [bits],
                {"out": len(w)},
                {
                    "weight_bits": np.packbits(signs, axis=1),
                    "alpha": as_f32(scale * bn_scale),
                    "beta": as_f32(bias * bn_scale + bn_shift),
                },
                width=len(w),
            )
        else:
            # real weights on 2a - 1: W (2a - 1) = 2 W a - sum(W)
            builder.add(
                f"fc{i}",
                "bit_dense",
                [bits],
                {"out": len(w), "float64": False},
                {"weight_t": as_f32(2.0 * w.T), "bias": as_f32(bias - w.sum(axis=1))},
                width=len(w),
            )
            if module.batch_norm:
                builder.add(
                    f"bn{i}",
                    "batch_norm",
                    [builder.value],
                    tensors={"scale": as_f32(bn_scale), "shift": as_f32(bn_shift)},
                )
        z = builder.value
        if isinstance(short, nn.Identity):
            skip = stream
        else:
            builder.value, builder.kind, builder.width = stream, "float", n_in
            skip = builder.linear(f"short{i}", short)
        builder.add(f"block{i}", "add", [z, skip], width=len(w))
    builder.linear("out", module.out, readout=True)


def _snn(builder, module):
    t = module.time_steps
    trains, width = [], None
    for i in range(module.n_layers):
        fc = getattr(module, f"fc{i}")
        neuron = getattr(module, f"spike{i}")
        if not isinstance(neuron, IFNeuron) or neuron.mode == "smooth":
            check_step(f"spike{i}", neuron if isinstance(neuron, IFNeuron) else fc)
        w = as_f64(fc.weight)
        b = as_f64(fc.bias) if fc.bias is not None else np.zeros(len(w))
        if i == 0:
            builder.linear("fc0", fc)
        else:
            builder.add(
                f"fc{i}",
                "bit_dense",
                trains,
                {"out": len(w), "float64": False},
                {"weight_t": as_f32(w.T), "bias": as_f32(b)},
                width=len(w),
            )
        if module.batch_norm:
            builder.batch_norm(f"bn{i}", getattr(module, f"bn{i}"))
        spikes = builder.add(
            f"spike{i}",
            "if_neuron",
            [builder.value],
            {
                "time_steps": t,
                "threshold": float(np.float32(neuron.threshold)),
                "reset": neuron.reset,
                "constant": i == 0,
            },
            kind="bits",
        )
        if i > 0 and module.connect == "add" and len(w) == width:
            trains = [spikes, *trains]
        else:
            trains = [spikes]
        builder.width = width = len(w)
    w = as_f64(module.out.weight)
    builder.add(
        "out",
        "bit_dense",
        trains,
        {"out": len(w), "float64": True},
        {"weight_t": as_f32(w.T), "bias": as_f32(as_f64(module.out.bias))},
        width=len(w),
    )
    builder.add("mean", "time_mean", ["out"], {"time_steps": t})


#: Module type -> (architecture name, ``convert(builder, module)``).
CONVERTERS = {
    BinaryMLP: ("bnn", _bnn),
    SpikingMLP: ("snn", _snn),
    ICBMNet: ("icbm", _icbm),
    MLP: ("mlp", _mlp),
    SmallCNN: ("cnn", _cnn),
}
