"""Image augmentation on batches of tensors: random crop with padding, flips.

Plain torch on whole batches (no torchvision): each image gets its own crop
offset and flip, drawn from torch's random generator (or the one given), so
a seeded training run augments the same way every time.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import torch
from torch.nn import functional as F

__all__ = ["random_crop_flip"]


def random_crop_flip(
    images: torch.Tensor,
    padding: int = 4,
    flip: bool = True,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Pad by `padding` zeros, crop back at a random offset, flip at random.

    The CIFAR recipe of the papers' ResNets: every image of the batch is
    zero-padded on all four sides, cropped back to its size at an offset
    drawn uniformly from ``0 .. 2 * padding`` in each direction, and (with
    `flip`) mirrored left-right with probability 1/2.

    Parameters
    ----------
    images : torch.Tensor of shape (N, C, H, W)
        A batch of images.
    padding : int, default=4
        Zeros added on each side before the crop (0: no crop).
    flip : bool, default=True
        Mirror each image left-right with probability 1/2.
    generator : torch.Generator, default=None
        Source of the random draws (torch's global generator when None).

    Returns
    -------
    torch.Tensor of shape (N, C, H, W)
        The augmented batch (a new tensor), same dtype and device.

    Examples
    --------
    >>> import torch
    >>> x = torch.arange(2 * 1 * 3 * 3, dtype=torch.float32).reshape(2, 1, 3, 3)
    >>> out = random_crop_flip(x, padding=1, generator=torch.Generator().manual_seed(0))
    >>> out.shape
    torch.Size([2, 1, 3, 3])
    >>> random_crop_flip(x, padding=0, flip=False).equal(x)
    True
    """
    if images.dim() != 4:
        raise ValueError(
            f"random_crop_flip needs a batch of images (N, C, H, W); got a tensor "
            f"of shape {tuple(images.shape)}."
        )
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be an int >= 0; got {padding!r}.")
    n, _, height, width = images.shape
    device = images.device

    def draw(high):
        values = torch.randint(0, high, (n,), generator=generator)
        return values.to(device)

    rows = torch.arange(height, device=device)
    cols = torch.arange(width, device=device)
    top, left = draw(2 * padding + 1), draw(2 * padding + 1)
    row_idx = top[:, None] + rows[None, :]  # (N, H)
    col_idx = left[:, None] + cols[None, :]  # (N, W)
    if flip:
        mirrored = draw(2).bool()
        col_idx = torch.where(mirrored[:, None], col_idx.flip(1), col_idx)
    padded = F.pad(images, (padding,) * 4) if padding else images
    batch = torch.arange(n, device=device)[:, None, None, None]
    channel = torch.arange(images.shape[1], device=device)[None, :, None, None]
    return padded[batch, channel, row_idx[:, None, :, None], col_idx[:, None, None, :]]
