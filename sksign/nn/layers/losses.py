"""Intra-class sign repulsion (the Sign Code paper, class-coherent sign geometry)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["repulsion_lambda", "sign_repulsion_loss"]


def sign_repulsion_loss(
    z: torch.Tensor, y: torch.Tensor, *, tau: float = 0.005, gate: str = "sigmoid"
) -> torch.Tensor:
    """Mean over same-class pairs ``i != j`` of ``(g(x_i) @ g(x_j)) ** 2``.

    ``g`` is the l2-normalised smooth gate proxy of the pre-activations `z`:
    ``sigmoid(z / tau)`` (ReLU/SiLU/GELU and step-like units) or
    ``tanh(z / tau)`` (tanh units). Pushing same-class gate vectors apart
    destroys class-coherent sign neighbourhoods.

    Parameters
    ----------
    z : torch.Tensor of shape (batch, ...)
        Pre-activations of one hidden layer (flattened per sample).
    y : torch.Tensor of shape (batch,)
        Integer class labels.
    tau : float, default=0.005
        Temperature of the gate proxy.
    gate : {"sigmoid", "tanh"}, default="sigmoid"
        Gate proxy.

    Returns
    -------
    torch.Tensor
        A scalar; 0 when the batch holds no same-class pair.

    Notes
    -----
    The sigmoid gates are normalised in log space, so a sample whose gates
    all underflow (every unit far below 0) keeps its exact direction instead
    of becoming the zero vector: switching every unit off is no escape from
    the penalty.

    Examples
    --------
    >>> import torch
    >>> z = torch.tensor([[1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    >>> y = torch.tensor([0, 0, 1])
    >>> round(sign_repulsion_loss(z, y).item(), 4)  # the same-class pair agrees
    1.0
    >>> sign_repulsion_loss(z, torch.tensor([0, 1, 2])).item()  # no pair
    0.0
    """
    if gate not in ("sigmoid", "tanh"):
        raise ValueError(f"gate must be 'sigmoid' or 'tanh'; got {gate!r}.")
    z = z.reshape(z.shape[0], -1)
    if gate == "sigmoid":
        # Normalise in log space: with tau = 0.005 a sample whose units are all
        # off has gates that underflow to 0, and F.normalize would map them to
        # the zero vector, a penalty-free escape. The log-space form gives the
        # exact direction of sigmoid(z / tau) whatever its scale.
        log_g = F.logsigmoid(z / tau)
        g = torch.exp(log_g - 0.5 * torch.logsumexp(2.0 * log_g, dim=1, keepdim=True))
    else:
        g = F.normalize(torch.tanh(z / tau), p=2, dim=1)
    gram = g @ g.T
    y = y.reshape(-1)
    same = (y[:, None] == y[None, :]) & ~torch.eye(
        len(y), dtype=torch.bool, device=y.device
    )
    n_pairs = same.sum()
    if n_pairs == 0:
        return gram.new_zeros(())
    return (gram.pow(2) * same).sum() / n_pairs


def repulsion_lambda(
    epoch: int, lam: float, warmup: int = 50, ramp: int = 200
) -> float:
    """Weight of the repulsion loss at 1-based `epoch`.

    0 for the first `warmup` epochs, then a linear ramp over `ramp` epochs up
    to `lam` (the Sign Code paper: 50 epochs, 200 epochs, 500).

    Examples
    --------
    >>> [repulsion_lambda(e, 500.0) for e in (50, 150, 250, 400)]
    [0.0, 250.0, 500.0, 500.0]
    """
    if epoch <= warmup:
        return 0.0
    if ramp <= 0:
        return float(lam)
    return float(lam) * min(1.0, (epoch - warmup) / ramp)
