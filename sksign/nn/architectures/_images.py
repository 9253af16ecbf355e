"""Input handling shared by the image nets: shape checks and flat rows.

Every image net of :mod:`sksign.nn` (ResNet-18, WideResNet, ViT, SEW-ResNet,
Bi-Real) is built for one image shape ``(channels, height, width)`` and takes
a batch either as images ``(N, C, H, W)`` or as flat rows ``(N, C * H * W)``
(what a scikit-learn pipeline hands over). A batch of any other shape fails
with the expected shape in the message.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from sksign.nn._validation import check_sizes

__all__ = ["ImageInput", "check_image_shape"]


def check_image_shape(
    architecture: str,
    input_shape: Sequence[int],
    *,
    min_size: int = 1,
    multiple: int = 1,
    channels: int | None = None,
) -> tuple[int, int, int]:
    """Validate the image shape ``(C, H, W)`` a net is built for.

    Parameters
    ----------
    architecture : str
        Name used in the messages.
    input_shape : sequence of int
        ``(channels, height, width)``.
    min_size : int, default=1
        Smallest height and width (the net's total downsampling).
    multiple : int, default=1
        Height and width must be multiples of it (a ViT's patch size).
    channels : int, default=None
        The channel count the net needs, if fixed.

    Returns
    -------
    tuple of int

    Examples
    --------
    >>> check_image_shape("resnet18", (3, 32, 32), min_size=8)
    (3, 32, 32)
    """
    shape = check_sizes("input_shape", input_shape)
    if len(shape) != 3:
        raise ValueError(
            f"architecture={architecture!r} takes images (channels, height, width); "
            f"got input_shape={tuple(input_shape)!r}. Give X as a 4-D array "
            "(n_samples, channels, height, width) or pass input_shape."
        )
    c, h, w = shape
    need = f"(N, {channels if channels else 'C'}, H, W)"
    if channels is not None and c != channels:
        raise ValueError(
            f"architecture={architecture!r} expects images of shape "
            f"(N, {channels}, H, W); got {c} channels (input_shape={shape})."
        )
    if h < min_size or w < min_size:
        raise ValueError(
            f"architecture={architecture!r} downsamples by {min_size}, so it needs "
            f"images of at least {min_size}x{min_size}: expected {need} with "
            f"H, W >= {min_size}; got input_shape={shape}. Pad or resize the images."
        )
    if h % multiple or w % multiple:
        raise ValueError(
            f"architecture={architecture!r} cuts images into {multiple}x{multiple} "
            f"patches: expected {need} with H and W multiples of {multiple}; got "
            f"input_shape={shape}."
        )
    return shape


class ImageInput(nn.Module):
    """Reshape flat rows to images and refuse batches of another shape.

    Parameters
    ----------
    input_shape : tuple of int
        ``(channels, height, width)`` of one image.

    Examples
    --------
    >>> import torch
    >>> ImageInput((1, 2, 2))(torch.zeros(3, 4)).shape
    torch.Size([3, 1, 2, 2])
    """

    def __init__(self, input_shape: Sequence[int]) -> None:
        super().__init__()
        self.input_shape = tuple(int(s) for s in input_shape)
        self.n_features = math.prod(self.input_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2 and x.shape[1] == self.n_features:
            return x.reshape(x.shape[0], *self.input_shape)
        if x.dim() == 4 and tuple(x.shape[1:]) == self.input_shape:
            return x
        c, h, w = self.input_shape
        raise ValueError(
            f"expected input of shape (N, {c}, {h}, {w}) or flat rows "
            f"(N, {self.n_features}); got {tuple(x.shape)}."
        )

    def extra_repr(self) -> str:
        return f"input_shape={self.input_shape}"
