"""pack(): read a fitted sksign net (torch) into a packed layer graph.

The only module of :mod:`sksign.deploy` that imports torch (and it does so
only when :func:`pack` is called, or when
:func:`~sksign.deploy.packed_summary` times a torch reference): the runtime,
:func:`~sksign.deploy.load` and the packed estimators run on numpy and numba
alone.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.utils.validation import check_is_fitted
from torch import nn

from sksign.deploy._convert_images import IMAGE_NETS, pack_image_net
from sksign.deploy._estimators import PackedClassifier, PackedRegressor
from sksign.deploy._format import FORMAT, VERSION, conv_output_size
from sksign.deploy._runtime import PackedNet
from sksign.nn.activations import StepActivation, force_step_mode
from sksign.nn.binary import BinaryLinear, BinaryMLP
from sksign.nn.icbm import ICBMNet
from sksign.nn.modules import MLP, SmallCNN
from sksign.nn.spiking import IFNeuron, SpikingMLP

__all__ = ["pack"]

_SUPPORTED = (
    "MLP, SmallCNN, BinaryMLP, SpikingMLP, ICBMNet (with an MLP, CNN or no "
    "backbone), BiRealResNet18, WideResNet and ResNet18 (with step activations) "
    "and SEWResNet (IF/LIF neurons, add/iand/and connections)"
)


def _np(t):
    return t.detach().to(device="cpu", dtype=torch.float64).numpy()


def _f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def _check_step(name, module, where="hidden"):
    """Raise unless `module` is the exact step at inference."""
    if isinstance(module, StepActivation) and module.mode != "smooth":
        return
    if isinstance(module, StepActivation):
        why = "is forced to its smooth function (mode='smooth')"
    else:
        why = f"is {type(module).__name__}, not a step activation"
    raise ValueError(
        f"Cannot pack layer {name!r}: it {why}. Only {where} layers that are the "
        "exact step 1[x >= 0] at inference (activation 'htaf', 'ste' or "
        "'scaled_sigmoid') run on bits."
    )


def _image_step_check(net_type):
    """_check_step whose message names the image net's type as well."""

    def check(name, module):
        try:
            _check_step(name, module)
        except ValueError as exc:
            raise ValueError(f"Cannot pack a net of type {net_type}: {exc}") from None

    return check


class _Builder:
    """Collects layers and tensors; tracks the current value and its kind."""

    def __init__(self, n_features):
        self.layers, self.tensors = [], {}
        self.value, self.kind, self.width = "input", "float", n_features

    def add(self, name, op, inputs, attrs=None, tensors=None, kind="float", width=None):
        names = {}
        for key, arr in (tensors or {}).items():
            names[key] = f"{name}.{key}"
            self.tensors[names[key]] = arr
        out = name
        self.layers.append(
            {
                "name": name,
                "op": op,
                "inputs": list(inputs),
                "output": out,
                "attrs": attrs or {},
                "tensors": names,
            }
        )
        self.value, self.kind = out, kind
        if width is not None:
            self.width = width
        return out

    def linear(self, name, layer, *, readout=False, then_step=False):
        """A Linear layer on the current value (float rows or bits)."""
        w = _np(layer.weight)
        b = _np(layer.bias) if layer.bias is not None else np.zeros(len(w))
        out_width = w.shape[0]
        if self.kind == "float":
            # float32 as in torch; a readout sums in float64 as Readout does
            return self.add(
                name,
                "dense",
                [self.value],
                {"out": out_width, "float64": readout},
                {"weight": _f32(w), "bias": _f32(b)},
                width=out_width,
            )
        if then_step:
            return self.add(
                name,
                "bit_dense_step",
                [self.value],
                {"out": out_width},
                {"weight_t": _f32(w.T), "threshold": _f32(-b)},
                kind="bits",
                width=out_width,
            )
        return self.add(
            name,
            "bit_dense",
            [self.value],
            {"out": out_width, "float64": readout},
            {"weight_t": _f32(w.T), "bias": _f32(b)},
            width=out_width,
        )

    def step(self, name):
        return self.add(name, "step", [self.value], kind="bits")

    def batch_norm(self, name, bn, inputs=None):
        scale, shift = _bn_affine(name, bn)
        return self.add(
            name,
            "batch_norm",
            inputs or [self.value],
            tensors={"scale": _f32(scale), "shift": _f32(shift)},
        )


def _bn_affine(name, bn, kind=nn.BatchNorm1d):
    """``(scale, shift)`` of an eval-mode BatchNorm of type `kind` (float64)."""
    if not isinstance(bn, kind) or bn.running_mean is None:
        raise ValueError(
            f"Cannot pack layer {name!r}: a {kind.__name__} with running "
            f"statistics is expected; got {bn!r}."
        )
    var = _np(bn.running_var)
    scale = 1.0 / np.sqrt(var + bn.eps)
    if bn.weight is not None:
        scale = scale * _np(bn.weight)
    shift = -_np(bn.running_mean) * scale
    if bn.bias is not None:
        shift = shift + _np(bn.bias)
    return scale, shift


def _dense_sequence(builder, children, *, backbone_float_ok=False):
    """Linear/activation pairs in forward order (MLP and ICBM stacks)."""
    for k, (name, module) in enumerate(children):
        nxt = children[k + 1][1] if k + 1 < len(children) else None
        if isinstance(module, nn.Linear):
            then_step = isinstance(nxt, StepActivation) and nxt.mode != "smooth"
            builder.linear(name, module, then_step=then_step)
        elif isinstance(module, StepActivation):
            _check_step(name, module)
            if builder.kind == "float":
                builder.step(name)
        elif backbone_float_ok and isinstance(module, nn.ReLU):
            builder.add(name, "relu", [builder.value])
        else:
            _check_step(name, module)


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
            _check_step(nxt[0], nxt[1])
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
            weight = _np(module.weight).reshape(oc, -1)
            bias = _np(module.bias) if module.bias is not None else np.zeros(oc)
            if builder.kind == "float":
                builder.add(
                    name,
                    "conv",
                    [builder.value],
                    attrs,
                    {"weight": _f32(weight), "bias": _f32(bias)},
                    width=oc * h * w,
                )
            else:
                builder.add(
                    name,
                    "bit_conv_step",
                    [builder.value],
                    attrs,
                    {"weight_t": _f32(weight.T), "threshold": _f32(-bias)},
                    kind="bits",
                    width=oc * h * w,
                )
            shape = [oc, h, w]
        elif isinstance(module, StepActivation):
            _check_step(name, module)
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
            _check_step(name, module)
    return []


def _cnn(builder, module, input_shape):
    children = list(module.named_children())
    dense = _conv_sequence(builder, children, input_shape)
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
    _check_step("concepts", module.concepts, where="concept")
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
        _check_step(f"act{i}", act)
        stream = builder.value
        n_in = builder.width
        bits = builder.add(f"act{i}", "step", [stream], kind="bits")
        if not isinstance(fc, BinaryLinear):  # pragma: no cover - built by BinaryMLP
            raise ValueError(f"Cannot pack layer 'fc{i}' of type {type(fc).__name__}.")
        w = _np(fc.weight)
        bias = _np(fc.bias) if fc.bias is not None else np.zeros(len(w))
        bn_scale, bn_shift = np.ones(len(w)), np.zeros(len(w))
        if module.batch_norm:
            bn_scale, bn_shift = _bn_affine(f"bn{i}", getattr(module, f"bn{i}"))
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
                    "alpha": _f32(scale * bn_scale),
                    "beta": _f32(bias * bn_scale + bn_shift),
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
                {"weight_t": _f32(2.0 * w.T), "bias": _f32(bias - w.sum(axis=1))},
                width=len(w),
            )
            if module.batch_norm:
                builder.add(
                    f"bn{i}",
                    "batch_norm",
                    [builder.value],
                    tensors={"scale": _f32(bn_scale), "shift": _f32(bn_shift)},
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
            _check_step(f"spike{i}", neuron if isinstance(neuron, IFNeuron) else fc)
        w = _np(fc.weight)
        b = _np(fc.bias) if fc.bias is not None else np.zeros(len(w))
        if i == 0:
            builder.linear("fc0", fc)
        else:
            builder.add(
                f"fc{i}",
                "bit_dense",
                trains,
                {"out": len(w), "float64": False},
                {"weight_t": _f32(w.T), "bias": _f32(b)},
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
    w = _np(module.out.weight)
    builder.add(
        "out",
        "bit_dense",
        trains,
        {"out": len(w), "float64": True},
        {"weight_t": _f32(w.T), "bias": _f32(_np(module.out.bias))},
        width=len(w),
    )
    builder.add("mean", "time_mean", ["out"], {"time_steps": t})


def _json_labels(classes):
    classes = np.asarray(classes)
    if classes.dtype.kind in "biuf":
        return classes.tolist(), classes.dtype.str
    if classes.dtype.kind == "U":
        return classes.tolist(), None
    if classes.dtype.kind == "O" and all(isinstance(c, str) for c in classes):
        return [str(c) for c in classes], None
    raise TypeError(
        "The packed model stores class labels as JSON: numbers, bools or "
        f"strings; got labels of dtype {classes.dtype}."
    )


@contextmanager
def _torch_forward(reference, X, n_threads):
    """A no-grad eval forward of `reference`'s torch module on `X`, to time.

    What the packed net computes, in torch: the module in eval mode with every
    step activation forced to the exact step (the packed net computes
    ``1[z >= 0]`` whatever the estimator's ``inference``), under
    :func:`torch.inference_mode`, on `n_threads` torch threads, on a tensor
    of the module's dtype made once (no validation, no data loader, no
    conversion inside the timed call). The module's mode, the activations'
    modes and torch's thread count are restored on exit.

    Parameters
    ----------
    reference : torch.nn.Module or fitted sksign net
        The module, or an estimator whose ``module_`` it is.
    X : ndarray of shape (n_samples, n_features)
        The validated float32 rows the packed net runs on (images flattened:
        the sksign modules take rows).
    n_threads : int
        Threads of the packed run.

    Yields
    ------
    forward : callable
        ``forward()`` runs the module on `X`.
    what : str
        What it runs, for instance ``"the torch module's forward (float32,
        1 thread)"``.
    """
    module = reference if isinstance(reference, nn.Module) else reference.module_
    if not isinstance(module, nn.Module):
        raise TypeError(
            "packed_summary's reference must be a torch module or a fitted "
            f"sksign net with a torch module_; got {type(module).__name__}."
        )
    param = next(module.parameters(), None)
    dtype = torch.float32 if param is None else param.dtype
    device = "cpu" if param is None else param.device
    x = torch.as_tensor(np.asarray(X), dtype=dtype, device=device)
    threads = torch.get_num_threads()
    # per submodule: a net may keep some layers (BatchNorm) in eval on purpose
    training = [(m, m.training) for m in module.modules()]
    what = (
        f"the torch module's forward ({str(dtype).removeprefix('torch.')}, "
        f"{n_threads} thread{'s' if n_threads != 1 else ''})"
    )
    cuda = x.device.type == "cuda"

    def forward():
        with torch.inference_mode():
            out = module(x)
        if cuda:  # pragma: no cover - CPU nets in the tests
            torch.cuda.synchronize(x.device)
        return out

    try:
        torch.set_num_threads(n_threads)
        module.eval()
        with force_step_mode(module, "hard"):
            yield forward, what
    finally:
        for m, mode in training:
            m.training = mode
        torch.set_num_threads(threads)


def pack(estimator, *, n_jobs=None):
    """Turn a fitted step net into an estimator that runs on packed bits.

    Hidden units that are exact steps become bits packed 64 to a word; binary
    weights (``architecture="bnn"``) become one bit each, multiplied by
    XNOR-popcount; real weights on bits are summed over the active bits
    (convolutions over packed patches of bits); the bias of a layer followed
    by a step becomes a per-unit threshold, and a BatchNorm is folded into
    the scale and shift of the layer before it. The
    first layer (real input) and the readout stay float, as in torch (the
    readout sums in float64, as :class:`~sksign.nn.Readout` does). Image
    nets run on channels-last maps whose channel bits are packed per pixel;
    their real parts (stem, shortcuts, residual stream, pooling) stay float.

    Parameters
    ----------
    estimator : HTAFNetClassifier, HTAFNetRegressor or ICBMClassifier
        A fitted net with step-like hidden activations ("htaf", "ste",
        "scaled_sigmoid"): ``architecture`` "mlp" (DHN), "cnn", "bnn" or
        "snn", the image nets "bireal" (Bi-Real ResNet-18: XNOR-popcount
        convolutions, real shortcuts), "wrn" and "resnet18" (step
        activations: real-weight convolutions on bit maps), "sew_resnet"
        (spikes as bits over T steps folded into rows), or an ICBM
        with an "mlp" (step or ReLU activations), "cnn" (step activations)
        or "identity" backbone. Its module must be float32.
    n_jobs : int, default=None
        Threads of the packed estimator's kernels.

    Returns
    -------
    packed : PackedClassifier or PackedRegressor
        A fitted scikit-learn estimator that needs neither torch nor skorch.

    Raises
    ------
    ValueError
        For a layer that is not a step activation (a ReLU net: the message
        names the layer) or an architecture that cannot be packed.
    sklearn.exceptions.NotFittedError
        For an estimator that is not fitted.

    See Also
    --------
    sksign.deploy.save : Write the packed model to one file.
    sksign.deploy.load : Read it back without torch.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.deploy import pack
    >>> X, y = load_digits(return_X_y=True)
    >>> net = HTAFNetClassifier((32, 32), architecture="bnn", max_epochs=2,
    ...                         random_state=0).fit(X / 16, y)
    >>> packed = pack(net)
    >>> bool((packed.predict(X / 16) == net.predict(X / 16)).all())
    True
    """
    if not isinstance(estimator, BaseEstimator):
        kind = None
    elif is_classifier(estimator):
        kind = "classifier"
    elif is_regressor(estimator):
        kind = "regressor"
    else:
        kind = None
    if kind is None:
        raise TypeError(
            "pack takes a fitted HTAFNetClassifier, HTAFNetRegressor or "
            f"ICBMClassifier; got {type(estimator).__name__}."
        )
    check_is_fitted(estimator, "module_")
    module = estimator.module_
    if not isinstance(module, nn.Module):
        raise TypeError(f"module_ must be a torch module; got {type(module)!r}.")
    param = next(module.parameters(), None)
    if param is not None and param.dtype != torch.float32:
        raise ValueError(
            f"pack needs a float32 net; this one is {param.dtype} (dtype="
            f"{getattr(estimator, 'dtype', None)!r})."
        )
    n_features = int(estimator.n_features_in_)
    builder = _Builder(n_features)
    if isinstance(module, BinaryMLP):
        arch = "bnn"
        _bnn(builder, module)
    elif isinstance(module, SpikingMLP):
        arch = "snn"
        _snn(builder, module)
    elif isinstance(module, ICBMNet):
        arch = "icbm"
        _icbm(builder, module)
    elif isinstance(module, MLP):
        arch = "mlp"
        _mlp(builder, module)
    elif isinstance(module, SmallCNN):
        arch = "cnn"
        _cnn(builder, module, module.unflatten.unflattened_size)
    elif isinstance(module, tuple(IMAGE_NETS.values())):
        arch = pack_image_net(
            builder, module, _image_step_check(type(module).__name__), _bn_affine
        )
    else:
        raise ValueError(
            f"Cannot pack a net of type {type(module).__name__}. Packable nets: "
            + _SUPPORTED
            + "."
        )
    graph = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": kind,
        "architecture": arch,
        "n_features_in": n_features,
        "layers": builder.layers,
        "output": builder.value,
    }
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        graph["feature_names_in"] = [str(n) for n in names]
    tensors = dict(builder.tensors)
    if kind == "classifier":
        graph["classes"], graph["classes_dtype"] = _json_labels(estimator.classes_)
        net = PackedNet(graph, tensors)
        return PackedClassifier(net, n_jobs=n_jobs).fit()
    graph["y_ndim"] = int(getattr(estimator, "_y_ndim", 1))
    tensors["target_mean"] = np.asarray(estimator.target_mean_, dtype=np.float64)
    tensors["target_scale"] = np.asarray(estimator.target_scale_, dtype=np.float64)
    net = PackedNet(graph, tensors)
    return PackedRegressor(net, n_jobs=n_jobs).fit()
