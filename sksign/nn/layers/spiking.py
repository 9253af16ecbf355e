"""Spiking neurons whose spike function is an HTAF, and the spiking MLP.

:class:`IFNeuron` (integrate and fire) and :class:`LIFNeuron` (with a leak)
are the neurons of :class:`SpikingMLP` and of SEW-ResNet
(:mod:`sksign.nn.architectures.sew_resnet`). An integrate-and-fire (IF)
neuron integrates its input current into a membrane potential and fires when
the potential reaches a threshold::

    v[t] = v[t-1] + I[t]
    s[t] = step(v[t] - threshold)        # HTAF in train(), exact 1[. >= 0] in eval()
    v[t] = v[t] - threshold * s[t]       # reset="subtract" (default)
    v[t] = v[t] * (1 - s[t])             # reset="zero"

In training the spike function is the smooth HTAF in the forward AND backward
pass (no surrogate gradient, the HTAF paper); "ste" (forward step, backward
a surrogate) and "scaled_sigmoid" are the baselines. At inference every spike
is exactly 0 or 1.

Tensors are laid out ``(batch, time, features)``. The membrane starts at 0
in every forward call: no state is carried across calls (or batches). The
input is presented at every time step (direct encoding) and the readout
averages the output layer over the steps.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sksign.nn._validation import (
    check_option,
    check_positive,
    check_sizes,
    check_step_activation,
    check_time_steps,
)
from sksign.nn.activations import (
    HTAF,
    STEP_ACTIVATIONS,
    StepActivation,
    heaviside,
    make_activation,
)
from sksign.nn.layers.readout import Readout

# check_time_steps stays importable from here (its old path), not public
__all__ = ["IFNeuron", "LIFNeuron", "SpikingMLP"]

_RESETS = ("subtract", "zero")
_CONNECTS = ("add", "none")


class IFNeuron(StepActivation):
    """Integrate-and-fire neurons over a sequence of input currents.

    A :class:`~sksign.nn.activations.StepActivation`, so
    :func:`~sksign.nn.activations.force_step_mode`, the relaxation-gap
    callback and sign hooks treat it like any step-like activation: in
    ``train()`` (mode "auto") the spike function is the smooth one of
    `activation`, in ``eval()`` the exact step, and the output (the spike
    train) is then exactly 0/1. The input of the module is the input current
    (its sign is not the spike: the spike is the sign of the membrane
    potential minus the threshold).

    Parameters
    ----------
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        Spike function applied to ``v - threshold``.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters (see :func:`~sksign.nn.activations.make_activation`).
    threshold : float, default=1.0
        Firing threshold.
    reset : {"subtract", "zero"}, default="subtract"
        "subtract" lowers the potential by ``threshold * spike`` (reset by
        subtraction keeps the excess charge, which loses less information at
        few time steps); "zero" sets it to 0 where the neuron fired.
    detach_reset : bool, default=False
        Stop the gradient through the reset.
    mode : {"auto", "smooth", "hard"}, default="auto"
        See :class:`~sksign.nn.activations.StepActivation`.

    Notes
    -----
    Input shape ``(batch, time, *features)``; the output (spikes) has the
    same shape.

    Examples
    --------
    >>> import torch
    >>> neuron = IFNeuron(threshold=1.0).eval()
    >>> neuron(torch.full((1, 4, 1), 0.6)).flatten()
    tensor([0., 1., 0., 1.])
    """

    def __init__(
        self,
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        threshold: float = 1.0,
        reset: str = "subtract",
        detach_reset: bool = False,
        mode: str = "auto",
    ) -> None:
        super().__init__(mode)
        check_step_activation(activation, "snn", STEP_ACTIVATIONS)
        reset = check_option("reset", reset, _RESETS, "IFNeuron")
        threshold = check_positive("threshold", threshold, "IFNeuron")
        self.activation = activation
        self.threshold = threshold
        self.reset = reset
        self.detach_reset = bool(detach_reset)
        # The spike function: kept out of the module tree (it has no
        # parameters), so that tools counting StepActivation modules see one
        # activation per spiking layer, this one.
        self.__dict__["_fn"] = make_activation(activation, alpha0, alpha1)
        self.__dict__["_alphas"] = [float(alpha0), float(alpha1)]

    @property
    def spike_function(self) -> nn.Module:
        """The step activation applied to ``v - threshold`` (outside the
        module tree: HTAF, STE or the scaled sigmoid)."""
        return self._fn

    # alpha0 and alpha1 are the spike function's own when it is an HTAF, so
    # that setting them (alpha0 annealing) reaches the function that fires
    @property
    def alpha0(self) -> float:
        """HTAF's inner scale (the spike function's, for "htaf")."""
        return self._fn.alpha0 if isinstance(self._fn, HTAF) else self._alphas[0]

    @alpha0.setter
    def alpha0(self, value: float) -> None:
        self._alphas[0] = float(value)
        if isinstance(self._fn, HTAF):
            self._fn.alpha0 = float(value)

    @property
    def alpha1(self) -> float:
        """HTAF's outer scale (the spike function's, for "htaf")."""
        return self._fn.alpha1 if isinstance(self._fn, HTAF) else self._alphas[1]

    def smooth(self, x: torch.Tensor) -> torch.Tensor:
        return self._fn.smooth(x)

    def fire(self, u: torch.Tensor) -> torch.Tensor:
        """The spike function of ``u = v - threshold`` in the current mode."""
        return heaviside(u) if self.is_hard else self.smooth(u)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:
            raise ValueError(
                "IFNeuron expects input of shape (batch, time, *features); got "
                f"shape {tuple(x.shape)}."
            )
        v = torch.zeros_like(x[:, 0])
        spikes = []
        for t in range(x.shape[1]):
            v = v + x[:, t]
            s = self.fire(v - self.threshold)
            spikes.append(s)
            r = s.detach() if self.detach_reset else s
            if self.reset == "subtract":
                v = v - self.threshold * r
            else:
                v = v * (1.0 - r)
        return torch.stack(spikes, dim=1)

    def extra_repr(self) -> str:
        alphas = (
            f"alpha0={self.alpha0:g}, alpha1={self.alpha1:g}, "
            if self.activation == "htaf"
            else ""
        )
        return (
            f"activation={self.activation!r}, {alphas}threshold={self.threshold:g}, "
            f"reset={self.reset!r}, mode={self.mode!r}"
        )


class LIFNeuron(IFNeuron):
    """Leaky integrate-and-fire neurons: ``v += (I - v) / tau`` each step.

    As :class:`IFNeuron` (spike function, threshold, resets, modes) with a
    leak towards 0 of time constant `tau` (the "decay input" form of
    spikingjelly's ``LIFNode`` with ``v_reset=0``).

    Parameters
    ----------
    tau : float, default=2.0
        Membrane time constant (> 1 leaks; 1 forgets at once).
    **kwargs
        Passed to :class:`IFNeuron`.

    Examples
    --------
    >>> import torch
    >>> LIFNeuron(tau=2.0).eval()(torch.full((1, 3, 1), 1.5)).flatten()
    tensor([0., 1., 0.])
    """

    def __init__(self, tau: float = 2.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tau = check_positive("tau", tau, "LIFNeuron")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:
            raise ValueError(
                "LIFNeuron expects input of shape (batch, time, *features); got "
                f"shape {tuple(x.shape)}."
            )
        v = torch.zeros_like(x[:, 0])
        spikes = []
        for t in range(x.shape[1]):
            v = v + (x[:, t] - v) / self.tau
            s = self.fire(v - self.threshold)
            spikes.append(s)
            r = s.detach() if self.detach_reset else s
            if self.reset == "subtract":
                v = v - self.threshold * r
            else:
                v = v * (1.0 - r)
        return torch.stack(spikes, dim=1)

    def extra_repr(self) -> str:
        return f"tau={self.tau:g}, {super().extra_repr()}"


class SpikingMLP(nn.Module):
    """SEW-style residual spiking MLP with IF neurons, over `time_steps` steps.

    Children, in forward order: for each layer ``i``: ``fc{i}`` (Linear),
    ``bn{i}`` (BatchNorm1d over batch and time, if ``batch_norm``) and
    ``spike{i}`` (:class:`IFNeuron`); then ``out`` (Linear). The input row
    ``x`` is presented at every step (direct encoding: ``fc0(x)`` is the
    constant input current of ``spike0``). Layer ``i > 0`` is a SEW block:
    its spikes are added to its input spikes (``connect="add"``) when the
    widths agree, so the stream between layers may hold counts > 1 while
    every ``spike{i}`` output is 0/1 at inference. The readout ``out`` is
    applied at every step and averaged over the steps.

    Parameters
    ----------
    n_features : int
        Input width.
    n_outputs : int
        Output width.
    hidden_layer_sizes : sequence of int, default=(256, 256)
        Width of each spiking layer.
    activation : {"htaf", "ste", "scaled_sigmoid"}, default="htaf"
        Spike function (see :class:`IFNeuron`).
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    time_steps : int, default=4
        Simulation steps T (the paper: T = 4 suffice).
    threshold : float, default=1.0
        Firing threshold of every neuron.
    reset : {"subtract", "zero"}, default="subtract"
        See :class:`IFNeuron`.
    connect : {"add", "none"}, default="add"
        SEW residual connection of layers of equal width, or none.
    batch_norm : bool, default=False
        BatchNorm1d before each spiking layer.

    Examples
    --------
    >>> import torch
    >>> net = SpikingMLP(6, 3, hidden_layer_sizes=(8,), time_steps=2)
    >>> net.eval()(torch.randn(4, 6)).shape
    torch.Size([4, 3])
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        hidden_layer_sizes: Sequence[int] = (256, 256),
        activation: str = "htaf",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        time_steps: int = 4,
        threshold: float = 1.0,
        reset: str = "subtract",
        connect: str = "add",
        batch_norm: bool = False,
    ) -> None:
        super().__init__()
        check_step_activation(activation, "snn", STEP_ACTIVATIONS)
        self.time_steps = check_time_steps(time_steps)
        sizes = check_sizes("hidden_layer_sizes", hidden_layer_sizes)
        if not sizes:
            raise ValueError(
                "architecture='snn' needs at least one hidden layer; got "
                f"hidden_layer_sizes={hidden_layer_sizes!r}."
            )
        self.connect = check_option("connect", connect, _CONNECTS, "SpikingMLP")
        self.batch_norm = bool(batch_norm)
        self.n_layers = len(sizes)
        n_in = n_features
        for i, width in enumerate(sizes):
            self.add_module(f"fc{i}", nn.Linear(n_in, width))
            if self.batch_norm:
                self.add_module(f"bn{i}", nn.BatchNorm1d(width))
            self.add_module(
                f"spike{i}",
                IFNeuron(activation, alpha0, alpha1, threshold=threshold, reset=reset),
            )
            n_in = width
        self.out = Readout(n_in, n_outputs)

    def _bn(self, i: int, z: torch.Tensor) -> torch.Tensor:
        if not self.batch_norm:
            return z
        b, t, f = z.shape
        return getattr(self, f"bn{i}")(z.reshape(b * t, f)).reshape(b, t, f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], -1)
        # Direct encoding: the same input at every step, so fc0 runs once.
        z = self.fc0(x).unsqueeze(1).expand(-1, self.time_steps, -1)
        h = self.spike0(self._bn(0, z))
        for i in range(1, self.n_layers):
            s = getattr(self, f"spike{i}")(self._bn(i, getattr(self, f"fc{i}")(h)))
            h = s + h if self.connect == "add" and s.shape == h.shape else s
        return self.out(h).mean(dim=1)

    def extra_repr(self) -> str:
        return f"time_steps={self.time_steps}, connect={self.connect!r}"
