"""pack() for the residual image nets: Bi-Real ResNet-18, WideResNet, ResNet-18.

Reads the torch modules into channels-last map layers (see
:mod:`sksign.deploy._maps`):

- Bi-Real ResNet-18: the real stem, then per binary unit the step of the
  real stream (``pixel_step``), the binary convolution as XNOR-popcount with
  its weight scale and BatchNorm folded into one scale and shift per channel
  (``xnor_conv2d``), the real shortcut (average pooling, 1x1 convolution,
  BatchNorm) and the residual add; global average pooling and the readout;
- WideResNet (the deep Heaviside net): BatchNorm and step of the stream,
  the first convolution of a block on those bits with the next BatchNorm
  and step folded into per-channel thresholds (``bit_conv2d_step``), the
  second as a sum of the weights of the active bits (``bit_conv2d``), the
  shortcut (identity, or a 1x1 convolution of the bits) and the add;
- ResNet-18 with step activations: in its pre-activation form, the blocks
  of the WideResNet; in its post-activation form, every convolution after
  the stem reads bits and the identity shortcut adds the bits of the
  block's input;
- SEW-ResNet: time folded into the rows (row ``n * T + t``); the stem's
  convolution and BatchNorm run once per sample, its neurons receive that
  current at every step (``pixel_neuron``); in a block, a convolution of
  spikes is a sum of the weights of the active bits (``bit_conv2d``), of
  the integer maps an "add" connection makes a float32 convolution
  (``conv2d``), followed by the BatchNorm (``channel_affine``) and the
  neurons; "add" sums the spikes into a float map of small integers,
  "iand" and "and" are bit operations on the spike words (``pixel_gate``);
  the pooled spikes (counts) go through the readout at every step, and the
  logits are averaged over the steps (``time_mean``).

Imported by :func:`sksign.deploy.pack` only (it imports torch).
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
    image_step_check,
)
from sksign.deploy._format import conv_output_size, words_per_pixel
from sksign.nn.architectures.bireal import BiRealResNet18
from sksign.nn.architectures.resnet import ResNet18, WideResNet
from sksign.nn.architectures.sew_resnet import SEWBlock, SEWResNet
from sksign.nn.layers.binary import BinaryConv2d
from sksign.nn.layers.spiking import IFNeuron, LIFNeuron

__all__ = ["CONVERTERS"]

#: Connections of a SEW block that run on bits ("add" makes integer maps).
SEW_CONNECTS = ("add", "iand", "and")


class _Maps:
    """Adds map layers to a builder and tracks the current ``(C, H, W)``."""

    def __init__(self, builder, shape, net_type=None):
        self.b = builder
        self.shape = list(shape)
        # its errors name the net's type as well
        self.check_step = image_step_check(net_type) if net_type else check_step

    def add(self, name, op, inputs, attrs=None, tensors=None, kind="float", shape=None):
        attrs = {"shape": list(self.shape), **(attrs or {})}
        shape = list(shape or self.shape)
        width = shape[0] * shape[1] * shape[2]
        if "out" in attrs or op in ("global_avg_pool", "bit_global_avg_pool"):
            attrs["out"] = width
        out = self.b.add(name, op, inputs, attrs, tensors, kind=kind, width=width)
        self.shape = shape
        return out

    def step(self, name, module, value):
        self.check_step(name, module)
        return self.add(name, "pixel_step", [value], kind="pixel_bits")

    def bn(self, name, bn, value):
        scale, shift = bn_affine(name, bn, nn.BatchNorm2d)
        tensors = {"scale": as_f32(scale), "shift": as_f32(shift)}
        return self.add(name, "channel_affine", [value], tensors=tensors)

    def _geometry(self, name, conv):
        ok = (
            isinstance(conv, nn.Conv2d)
            and conv.kernel_size[0] == conv.kernel_size[1]
            and conv.stride[0] == conv.stride[1]
            and isinstance(conv.padding, tuple)
            and conv.padding[0] == conv.padding[1]
            and conv.dilation == (1, 1)
            and conv.groups == 1
            and conv.padding_mode == "zeros"
        )
        if not ok:
            raise ValueError(
                f"Cannot pack layer {name!r}: a square Conv2d with equal strides "
                f"and zero padding is expected; got {conv!r}."
            )
        k, s, p = conv.kernel_size[0], conv.stride[0], conv.padding[0]
        _, h, w = self.shape
        out = [conv.out_channels, conv_output_size(h, k, s, p)]
        out.append(conv_output_size(w, k, s, p))
        attrs = {"channels": conv.out_channels, "kernel": k, "stride": s}
        attrs |= {"padding": p, "out": 0}
        return attrs, out

    @staticmethod
    def _weight(conv):
        """``(oc, k * k * C)`` weights in the ``(ky, kx, c)`` order of im2col."""
        w = as_f64(conv.weight)
        return w.transpose(0, 2, 3, 1).reshape(len(w), -1)

    def conv(self, name, conv, value):
        """A real convolution of real maps (float32 im2col product)."""
        attrs, out = self._geometry(name, conv)
        w = self._weight(conv)
        b = as_f64(conv.bias) if conv.bias is not None else np.zeros(len(w))
        tensors = {"weight": as_f32(w), "bias": as_f32(b)}
        return self.add(name, "conv2d", [value], attrs, tensors, shape=out)

    def bit_conv(self, name, conv, value):
        """Real weights on bit maps, real output (sums over the active bits)."""
        attrs, out = self._geometry(name, conv)
        w = self._weight(conv)
        b = as_f64(conv.bias) if conv.bias is not None else np.zeros(len(w))
        tensors = {"weight_t": as_f32(w.T), "bias": as_f32(b)}
        return self.add(name, "bit_conv2d", [value], attrs, tensors, shape=out)

    def bit_conv_step(self, name, conv, bn_name, bn, act_name, act, value):
        """``step(bn(conv(bits)))`` with the BatchNorm folded into thresholds.

        ``s z + t >= 0`` is ``sign(s) z >= -t / |s|``: the weights of a
        channel with a negative BatchNorm scale change sign; a zero scale
        leaves the constant bit ``1[t >= 0]``.
        """
        self.check_step(act_name, act)
        attrs, out = self._geometry(name, conv)
        w = self._weight(conv)
        b = as_f64(conv.bias) if conv.bias is not None else np.zeros(len(w))
        scale, shift = bn_affine(bn_name, bn, nn.BatchNorm2d)
        shift = shift + scale * b
        sign = np.sign(scale)
        safe = np.where(scale == 0, 1.0, np.abs(scale))
        threshold = np.where(scale == 0, np.where(shift >= 0, 0.0, 1.0), -shift / safe)
        tensors = {
            "weight_t": as_f32((w * sign[:, None]).T),
            "threshold": as_f32(threshold),
        }
        return self.add(
            name, "bit_conv2d_step", [value], attrs, tensors, "pixel_bits", out
        )

    def xnor_conv(self, name, conv, bn_name, bn, value):
        """A binary convolution on bits: XNOR-popcount, scale and BatchNorm."""
        if not isinstance(conv, BinaryConv2d) or not conv.binary:
            raise ValueError(
                f"Cannot pack layer {name!r}: a BinaryConv2d with binary weights "
                "is expected (binary_weights=False is not packed)."
            )
        attrs, out = self._geometry(name, conv)
        w = as_f64(conv.weight)  # (oc, C, k, k)
        oc, c, k, _ = w.shape
        scale = np.abs(w).mean(axis=(1, 2, 3))
        signs = (w >= 0).transpose(0, 2, 3, 1)  # sign(0) = +1, (oc, k, k, C)
        group = 64 * words_per_pixel(c)
        padded = np.zeros((oc, k, k, group), dtype=np.uint8)
        padded[..., :c] = signs
        bn_scale, bn_shift = bn_affine(bn_name, bn, nn.BatchNorm2d)
        tensors = {
            "weight_bits": np.packbits(padded.reshape(oc, -1), axis=1),
            "alpha": as_f32(scale * bn_scale),
            "beta": as_f32(bn_shift),
        }
        return self.add(name, "xnor_conv2d", [value], attrs, tensors, shape=out)


def _bireal(maps, module):
    x = maps.add("nhwc", "to_nhwc", ["input"])
    x = maps.conv("conv1", module.conv1, x)
    x = maps.bn("bn1", module.bn1, x)
    for i in range(1, 5):
        for j, unit in enumerate(getattr(module, f"layer{i}")):
            name = f"layer{i}.{j}"
            shape = list(maps.shape)
            bits = maps.step(f"{name}.act", unit.act, x)
            z = maps.xnor_conv(f"{name}.conv", unit.conv, f"{name}.bn", unit.bn, bits)
            out_shape = list(maps.shape)
            skip = x
            if not isinstance(unit.shortcut, nn.Identity):
                pool, conv, bn = unit.shortcut
                maps.shape = shape
                if isinstance(pool, nn.AvgPool2d):
                    k = pool.kernel_size
                    k = k if isinstance(k, int) else k[0]
                    if pool.stride not in (k, (k, k)) or pool.padding not in (
                        0,
                        (0, 0),
                    ):
                        raise ValueError(
                            f"Cannot pack layer '{name}.shortcut.0': an AvgPool2d "
                            "with stride equal to its kernel and no padding is "
                            f"expected; got {pool!r}."
                        )
                    h, w = shape[1] // k, shape[2] // k
                    skip = maps.add(
                        f"{name}.shortcut.0",
                        "avg_pool2d",
                        [skip],
                        {"kernel": k, "out": 0},
                        shape=[shape[0], h, w],
                    )
                elif not isinstance(pool, nn.Identity):
                    raise ValueError(
                        f"Cannot pack layer '{name}.shortcut.0' of type "
                        f"{type(pool).__name__}."
                    )
                skip = maps.conv(f"{name}.shortcut.1", conv, skip)
                skip = maps.bn(f"{name}.shortcut.2", bn, skip)
            if list(maps.shape) != out_shape:  # pragma: no cover - built by the net
                raise ValueError(f"Cannot pack {name!r}: its shortcut changes shape.")
            x = maps.add(name, "add", [z, skip])
    x = maps.add(
        "pool", "global_avg_pool", [x], {"out": 0}, shape=[maps.shape[0], 1, 1]
    )
    return x


def _wide_block(maps, name, block, x):
    """A pre-activation block: ``conv2(step(bn2(conv1(a)))) + skip(x or a)``.

    ``a = step(bn1(x))``; the skip is ``x``, or a 1x1 convolution of ``a``.
    """
    shape = list(maps.shape)
    a = maps.bn(f"{name}.bn1", block.bn1, x)
    a = maps.step(f"{name}.act1", block.act1, a)
    if not isinstance(block.dropout, nn.Identity | nn.Dropout):
        raise ValueError(  # pragma: no cover - built by the net
            f"Cannot pack layer '{name}.dropout' of type "
            f"{type(block.dropout).__name__}."
        )
    h = maps.bit_conv_step(
        f"{name}.conv1",
        block.conv1,
        f"{name}.bn2",
        block.bn2,
        f"{name}.act2",
        block.act2,
        a,
    )
    z = maps.bit_conv(f"{name}.conv2", block.conv2, h)
    out_shape = list(maps.shape)
    if block.equal:
        skip = x
    else:
        maps.shape = shape
        skip = maps.bit_conv(f"{name}.shortcut", block.shortcut, a)
    if list(maps.shape) != out_shape:  # pragma: no cover - built by the net
        raise ValueError(f"Cannot pack {name!r}: its shortcut changes shape.")
    return maps.add(name, "add", [z, skip])


def _basic_block(maps, name, block, x):
    """A post-activation block on bits: ``step(bn2(conv2(h)) + skip)``."""
    shape = list(maps.shape)
    h = maps.bit_conv_step(
        f"{name}.conv1",
        block.conv1,
        f"{name}.bn1",
        block.bn1,
        f"{name}.act1",
        block.act1,
        x,
    )
    z = maps.bit_conv(f"{name}.conv2", block.conv2, h)
    z = maps.bn(f"{name}.bn2", block.bn2, z)
    out_shape = list(maps.shape)
    maps.shape = shape
    if isinstance(block.shortcut, nn.Identity):
        skip = maps.add(f"{name}.shortcut", "pixel_unpack", [x])
    else:
        conv, bn = block.shortcut
        skip = maps.bit_conv(f"{name}.shortcut.0", conv, x)
        skip = maps.bn(f"{name}.shortcut.1", bn, skip)
    if list(maps.shape) != out_shape:  # pragma: no cover - built by the net
        raise ValueError(f"Cannot pack {name!r}: its shortcut changes shape.")
    s = maps.add(f"{name}.sum", "add", [z, skip])
    return maps.step(f"{name}.act2", block.act2, s)


def _pooled_bits(maps, module, x):
    """The final BatchNorm and step of a pre-activation net, pooled."""
    x = maps.bn("bn", module.bn, x)
    x = maps.step("act", module.act, x)
    return maps.add("pool", "bit_global_avg_pool", [x], shape=[maps.shape[0], 1, 1])


def _wrn(maps, module):
    x = maps.add("nhwc", "to_nhwc", ["input"])
    x = maps.conv("conv1", module.conv1, x)
    for i in range(1, 4):
        for j, block in enumerate(getattr(module, f"block{i}")):
            x = _wide_block(maps, f"block{i}.{j}", block, x)
    return _pooled_bits(maps, module, x)


def _resnet18(maps, module):
    # the activations first: a ReLU net is refused before anything else
    for name, m in module.named_modules():
        if name.rsplit(".", 1)[-1].startswith("act"):
            maps.check_step(name, m)
    preactivation = bool(getattr(module, "preactivation", False))
    x = maps.add("nhwc", "to_nhwc", ["input"])
    x = maps.conv("conv1", module.conv1, x)
    if not preactivation:
        x = maps.bn("bn1", module.bn1, x)
        x = maps.step("act1", module.act1, x)
    block_fn = _wide_block if preactivation else _basic_block
    for i in range(1, 5):
        for j, block in enumerate(getattr(module, f"layer{i}")):
            x = block_fn(maps, f"layer{i}.{j}", block, x)
    if preactivation:
        return _pooled_bits(maps, module, x)
    return maps.add("pool", "bit_global_avg_pool", [x], shape=[maps.shape[0], 1, 1])


def _conv_bn(name, module):
    """The Conv2d and BatchNorm2d of a SEW-ResNet's conv stack, checked."""
    children = list(module.children()) if isinstance(module, nn.Sequential) else []
    if (
        len(children) != 2
        or type(children[0]) is not nn.Conv2d
        or type(children[1]) is not nn.BatchNorm2d
    ):
        raise ValueError(
            f"Cannot pack layer {name!r}: a Conv2d followed by a BatchNorm2d is "
            f"expected; got {module!r}."
        )
    return children


def _neuron(maps, name, neuron, value, time_steps, constant=False):
    """The spikes of a layer of IF or LIF neurons (``pixel_neuron``)."""
    if type(neuron) not in (IFNeuron, LIFNeuron):
        maps.check_step(name, neuron)  # not a step: names what it is
        raise ValueError(
            f"Cannot pack layer {name!r}: an IFNeuron or LIFNeuron is expected; "
            f"got {type(neuron).__name__}."
        )
    maps.check_step(name, neuron)  # forced smooth: refused
    leaky = isinstance(neuron, LIFNeuron)
    attrs = {
        "time_steps": int(time_steps),
        # the torch neuron's float32 arithmetic rounds them to float32
        "threshold": float(np.float32(neuron.threshold)),
        "reset": neuron.reset,
        "constant": bool(constant),
        "neuron": "lif" if leaky else "if",
        "tau": float(np.float32(neuron.tau)) if leaky else 1.0,
    }
    return maps.add(name, "pixel_neuron", [value], attrs, kind="pixel_bits")


def _spike_conv(maps, name, module, value, kinds):
    """Conv and BatchNorm of spikes (bits) or of the integer maps of "add"."""
    conv, bn = _conv_bn(name, module)
    if kinds[value] == "pixel_bits":
        z = maps.bit_conv(f"{name}.0", conv, value)
    else:
        z = maps.conv(f"{name}.0", conv, value)
    return maps.bn(f"{name}.1", bn, z)


def _sew_block(maps, name, block, s, kinds, time_steps):
    """``connect(sn2(conv2(sn1(conv1(s)))), identity)`` of spikes `s`."""
    if type(block) is not SEWBlock:
        raise ValueError(
            f"Cannot pack layer {name!r}: a SEWBlock is expected; got "
            f"{type(block).__name__}."
        )
    connect = block.connect
    if connect not in SEW_CONNECTS:
        raise ValueError(
            f"Cannot pack layer {name!r}: its connect function {connect!r} is not "
            f"one of {SEW_CONNECTS}."
        )
    shape = list(maps.shape)
    identity = s
    if hasattr(block, "down"):
        z = _spike_conv(maps, f"{name}.down", block.down, s, kinds)
        identity = _neuron(maps, f"{name}.sn_down", block.sn_down, z, time_steps)
        kinds[identity] = "pixel_bits"
        maps.shape = shape
    z = _spike_conv(maps, f"{name}.conv1", block.conv1, s, kinds)
    h = _neuron(maps, f"{name}.sn1", block.sn1, z, time_steps)
    kinds[h] = "pixel_bits"
    z = _spike_conv(maps, f"{name}.conv2", block.conv2, h, kinds)
    a = _neuron(maps, f"{name}.sn2", block.sn2, z, time_steps)
    kinds[a] = "pixel_bits"
    if connect == "add":
        # A + S: a float map of small integers (counts of spikes)
        a = maps.add(f"{name}.sn2.float", "pixel_unpack", [a])
        if kinds[identity] == "pixel_bits":
            identity = maps.add(f"{name}.identity", "pixel_unpack", [identity])
        out = maps.add(name, "add", [a, identity])
        kinds[out] = "float"
        return out
    if kinds[identity] != "pixel_bits":  # pragma: no cover - built by the net
        raise ValueError(
            f"Cannot pack layer {name!r}: {connect!r} of integer maps (after an "
            "'add' block) is not a bit operation."
        )
    out = maps.add(
        name, "pixel_gate", [a, identity], {"connect": connect}, kind="pixel_bits"
    )
    kinds[out] = "pixel_bits"
    return out


def _sew_resnet(maps, module):
    """SEW-ResNet on maps with T rows per sample; returns the pooled value."""
    t = module.time_steps
    x = maps.add("nhwc", "to_nhwc", ["input"])
    conv, bn = _conv_bn("stem", module.stem)
    x = maps.conv("stem.0", conv, x)
    x = maps.bn("stem.1", bn, x)
    s = _neuron(maps, "sn_stem", module.sn_stem, x, t, constant=True)
    kinds = {s: "pixel_bits"}
    for i in range(1, 5):
        for j, block in enumerate(getattr(module, f"layer{i}")):
            s = _sew_block(maps, f"layer{i}.{j}", block, s, kinds, t)
    pool = list(module.pool.children())
    if len(pool) != 2 or not isinstance(pool[0], nn.AdaptiveAvgPool2d):
        raise ValueError(  # pragma: no cover - built by the net
            "Cannot pack layer 'pool': a global average pooling is expected."
        )
    if pool[0].output_size not in (1, (1, 1)):
        raise ValueError(
            "Cannot pack layer 'pool.0': AdaptiveAvgPool2d(1) is expected; got "
            f"{pool[0]!r}."
        )
    op = "bit_global_avg_pool" if kinds[s] == "pixel_bits" else "global_avg_pool"
    return maps.add("pool", op, [s], {"out": 0}, shape=[maps.shape[0], 1, 1])


def _image_net(body, *, time_mean=False):
    """``convert(builder, module)`` of an image net whose blocks `body` adds.

    The stem and blocks come from ``body(maps, module)``; then the readout
    ``out`` (averaged over the steps with `time_mean`, for spiking nets).
    """

    def convert(builder, module):
        shape = list(module.input.input_shape)
        body(_Maps(builder, shape, type(module).__name__), module)
        if not isinstance(module.out, nn.Linear):  # pragma: no cover - built by the net
            raise ValueError(
                "Cannot pack the readout 'out': a Linear layer is expected."
            )
        builder.linear("out", module.out, readout=True)
        if time_mean:  # the readout at every step, averaged
            builder.add("mean", "time_mean", ["out"], {"time_steps": module.time_steps})

    return convert


#: Module type -> (architecture name, ``convert(builder, module)``).
CONVERTERS = {
    BiRealResNet18: ("bireal", _image_net(_bireal)),
    WideResNet: ("wrn", _image_net(_wrn)),
    ResNet18: ("resnet18", _image_net(_resnet18)),
    SEWResNet: ("sew_resnet", _image_net(_sew_resnet, time_mean=True)),
}
