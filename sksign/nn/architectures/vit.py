"""A small Vision Transformer for 32x32 images (the Sign Code paper's ViT).

Patch embedding (a ``patch x patch`` convolution with that stride), a class
token and learned position embeddings, then ``depth`` pre-norm encoder
blocks ``x + attn(norm1(x))``, ``x + mlp(norm2(x))`` and a readout of the
class token. The MLP of each block is ``fc1, act, fc2`` with ``act`` an
activation MODULE (GELU, SiLU, ReLU, tanh, or a step-like one), so its
token activations ``(batch, tokens, units)`` are hookable: the sign
recorder pools them per token (``token_pool``).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sksign.nn._validation import check_sizes
from sksign.nn.activations import make_activation
from sksign.nn.architectures._images import ImageInput, check_image_shape
from sksign.nn.layers.readout import Readout

__all__ = ["ViTBlock", "VisionTransformer"]


class ViTBlock(nn.Module):
    """Pre-norm transformer encoder block with a hookable MLP activation.

    Children: ``norm1``, ``attn`` (:class:`torch.nn.MultiheadAttention`,
    batch first), ``norm2``, ``fc1``, ``act``, ``fc2``.

    Parameters
    ----------
    dim : int
        Token width.
    heads : int
        Attention heads (must divide `dim`).
    mlp_dim : int
        Hidden width of the MLP.
    activation : str, default="gelu"
        One of :data:`~sksign.nn.activations.ACTIVATIONS`.
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    dropout : float, default=0.0
        Dropout in attention and MLP.

    Examples
    --------
    >>> import torch
    >>> ViTBlock(8, 2, 16)(torch.zeros(3, 5, 8)).shape
    torch.Size([3, 5, 8])
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        mlp_dim: int,
        activation: str = "gelu",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_dim)
        self.act = make_activation(activation, alpha0, alpha1)
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(mlp_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        h = self.fc2(self.drop(self.act(self.fc1(self.norm2(x)))))
        return x + self.drop(h)


class VisionTransformer(nn.Module):
    """Small ViT: patch 4, width 256, depth 6, 8 heads by default.

    Children: ``input``, ``patch`` (Conv2d), ``blocks`` (``nn.Sequential``
    of :class:`ViTBlock`), ``norm`` (LayerNorm) and ``out`` (readout of the
    class token); parameters ``cls_token`` and ``pos_embed``.

    Parameters
    ----------
    n_outputs : int, default=10
        Classes.
    input_shape : tuple of int, default=(3, 32, 32)
        ``(channels, height, width)``; height and width multiples of `patch`.
    patch : int, default=4
        Patch size.
    dim : int, default=256
        Token width.
    depth : int, default=6
        Encoder blocks.
    heads : int, default=8
        Attention heads; must divide `dim`.
    mlp_dim : int, default=512
        Hidden width of each block's MLP.
    activation : str, default="gelu"
        Activation of the MLPs (GELU, SiLU, ReLU, tanh, or step-like).
    alpha0, alpha1 : float, default=2.0, 11.0
        HTAF parameters.
    dropout : float, default=0.0
        Dropout in the blocks.

    Examples
    --------
    >>> import torch
    >>> net = VisionTransformer(10, (3, 8, 8), dim=16, depth=2, heads=2, mlp_dim=32)
    >>> net(torch.zeros(2, 3, 8, 8)).shape
    torch.Size([2, 10])
    """

    def __init__(
        self,
        n_outputs: int = 10,
        input_shape: Sequence[int] = (3, 32, 32),
        patch: int = 4,
        dim: int = 256,
        depth: int = 6,
        heads: int = 8,
        mlp_dim: int = 512,
        activation: str = "gelu",
        alpha0: float = 2.0,
        alpha1: float = 11.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        ((patch,), (dim,), (depth,), (heads,), (mlp_dim,)) = (
            check_sizes(name, value)
            for name, value in (
                ("patch", patch),
                ("dim", dim),
                ("depth", depth),
                ("heads", heads),
                ("mlp_dim", mlp_dim),
            )
        )
        if dim % heads:
            raise ValueError(
                f"The 'heads' parameter of VisionTransformer must divide dim={dim}. "
                f"Got {heads!r} instead."
            )
        shape = check_image_shape("vit", input_shape, min_size=patch, multiple=patch)
        n_tokens = (shape[1] // patch) * (shape[2] // patch)
        self.input = ImageInput(shape)
        self.patch = nn.Conv2d(shape[0], dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_tokens + 1, dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.blocks = nn.Sequential(
            *(
                ViTBlock(dim, heads, mlp_dim, activation, alpha0, alpha1, dropout)
                for _ in range(depth)
            )
        )
        self.norm = nn.LayerNorm(dim)
        self.n_features_out = dim
        self.out = Readout(dim, n_outputs)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """The normalised class token ``(N, dim)`` before the readout."""
        x = self.patch(self.input(x)).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        return self.norm(self.blocks(x))[:, 0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.forward_features(x))
