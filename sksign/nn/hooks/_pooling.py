"""Pooling of sign maps into bit codes: conv quadrants, tokens, units.

Conv maps on the CPU go through the one-pass numba kernel
(:mod:`sksign.nn.hooks._quadrant`); everything else is ``z > 0``, then
:func:`pool_signs`. Both give the same bits.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from dataclasses import dataclass

import torch

from sksign.nn.hooks import _quadrant

__all__ = [
    "CONV_POOLS",
    "TOKEN_POOLS",
    "CodeLayout",
    "layer_code",
    "pool_signs",
    "positive_bits",
    "quadrant_bounds",
]

#: Ways to pool a conv map (N, C, H, W) into bits.
CONV_POOLS = ("quadrant", "flatten")
#: Ways to pool token activations (N, T, U) into bits.
TOKEN_POOLS = ("first", "majority")


def quadrant_bounds(size: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Row (or column) ranges of the two halves of a map of `size` pixels.

    The split follows PyTorch's adaptive pooling to 2 bins: half ``i`` covers
    ``[floor(i * size / 2), ceil((i + 1) * size / 2))``. An even size splits
    into two disjoint halves; for an odd size the middle row belongs to both
    halves (so a 1-pixel map gives two equal halves and no quadrant is empty).

    Examples
    --------
    >>> quadrant_bounds(4), quadrant_bounds(5), quadrant_bounds(1)
    (((0, 2), (2, 4)), ((0, 3), (2, 5)), ((0, 1), (0, 1)))
    """
    return ((0, -(-size // 2)), (size // 2, size))


def _halves_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sums of `x` over the two halves of `dim`, stacked in a new last axis.

    Counts of at most 255 are summed in uint8 (no widening copy of `x`).
    """
    size = x.shape[dim]
    acc = torch.uint8 if x.dtype == torch.uint8 and size <= 510 else torch.int32
    if size % 2 == 0:
        shape = (*x.shape[:dim], 2, size // 2, *x.shape[dim + 1 :])
        return x.reshape(shape).sum(dim + 1, dtype=acc).movedim(dim, -1)
    (a0, a1), (b0, b1) = quadrant_bounds(size)
    return torch.stack(
        [
            x.narrow(dim, a0, a1 - a0).sum(dim, dtype=acc),
            x.narrow(dim, b0, b1 - b0).sum(dim, dtype=acc),
        ],
        dim=-1,
    )


def _quadrant_pool(pos: torch.Tensor) -> torch.Tensor:
    """(N, C, H, W) bool -> (N, 4C) bool: per channel and quadrant majority."""
    n, c, h, w = pos.shape
    # column halves over the (contiguous) last axis first, then row halves over
    # the small (N, C, H, 2) result
    cols = _halves_sum(pos.view(torch.uint8), 3).to(torch.int32)  # (N, C, H, 2)
    quads = _halves_sum(cols, 2)  # (N, C, 2[col half], 2[row half])
    n_pix = -(-h // 2) * -(-w // 2)  # every quadrant has ceil(H/2) * ceil(W/2)
    # majority sign, ties to +1: 2 * (#positive) >= #pixels
    return (2 * quads.transpose(2, 3) >= n_pix).reshape(n, 4 * c)


@dataclass(frozen=True)
class CodeLayout:
    """How one layer's bits are laid out, for naming them.

    Parameters
    ----------
    kind : {"unit", "quadrant", "flat"}
        One bit per unit, four per channel (conv quadrants), or one per
        element of a flattened map.
    shape : tuple of int
        ``(units,)``, ``(channels,)`` or the flattened map's shape.

    Examples
    --------
    >>> layout = CodeLayout("quadrant", (2,))
    >>> layout.n_bits, layout.names("conv0")[:3]
    (8, ['conv0_c0q0', 'conv0_c0q1', 'conv0_c0q2'])
    """

    kind: str  # "unit" | "quadrant" | "flat"
    shape: tuple[int, ...]

    @property
    def n_bits(self) -> int:
        """Number of bits per sample."""
        if self.kind == "quadrant":
            return 4 * self.shape[0]
        total = 1
        for s in self.shape:
            total *= s
        return total

    def names(self, key: str) -> list[str]:
        """One name per bit: ``<key>_<unit>`` (``<key>_c{c}q{q}`` for conv)."""
        if self.kind == "quadrant":
            return [f"{key}_c{c}q{q}" for c in range(self.shape[0]) for q in range(4)]
        return [f"{key}_{j}" for j in range(self.n_bits)]


def pool_signs(
    pos: torch.Tensor,
    *,
    name: str = "layer",
    conv_pool: str = "quadrant",
    token_pool: str | None = None,
    attention_mask: torch.Tensor | None = None,
    keep_tokens: bool = False,
) -> tuple[torch.Tensor, CodeLayout]:
    """Pool a boolean map ``z > 0`` of one layer into a (N, n_bits) bool matrix.

    Parameters
    ----------
    pos : torch.Tensor of bool
        ``z > 0`` for a batch: (N,), (N, U), (N, T, U), (N, C, H, W), or
        (N, T, C, H, W) for a spiking conv map over T time steps, which is
        first reduced to the majority sign over the steps (ties to +1) and
        then pooled as (N, C, H, W).
    name : str, default="layer"
        Layer name, for error messages.
    conv_pool : {"quadrant", "flatten"}, default="quadrant"
        For (N, C, H, W): "quadrant" gives the majority sign per channel and
        quadrant (ties to +1; 4C bits, channel-major, quadrants 0..3 =
        top-left, top-right, bottom-left, bottom-right, halves as in
        :func:`quadrant_bounds`); "flatten" keeps all C*H*W bits.
    token_pool : {"first", "majority"} or None, default=None
        For (N, T, U): "first" keeps token 0 (a CLS token); "majority" takes
        the majority sign over the tokens (ties to +1), over the non-padding
        tokens when `attention_mask` is given. Required for 3-D activations
        (unless `keep_tokens`) and an error for 2-D ones.
    attention_mask : torch.Tensor of shape (N, T), default=None
        Nonzero for real tokens, 0 for padding.
    keep_tokens : bool, default=False
        For (N, T, U) without a `token_pool`: keep the bits of every token,
        (N, T, U), instead of raising (token-level codes; padding is left to
        the caller, who holds the mask).

    Returns
    -------
    bits : torch.Tensor of bool, shape (N, n_bits), or (N, T, U) for kept tokens
    layout : CodeLayout
        How the bits are laid out (see :class:`CodeLayout`).

    Examples
    --------
    >>> import torch
    >>> pos = torch.zeros(2, 3, 4, 4, dtype=torch.bool)
    >>> pos[:, :, :2, :2] = True  # the top-left quadrant of every channel
    >>> bits, layout = pool_signs(pos)
    >>> bits.shape, bits[0, :4].tolist(), layout.n_bits
    (torch.Size([2, 12]), [True, False, False, False], 12)
    """
    if pos.dim() == 1:
        pos = pos[:, None]
    if pos.dim() == 2:
        if token_pool is not None:
            raise ValueError(
                f"token_pool={token_pool!r} was given, but layer {name!r} gives a "
                f"2-D activation of shape {tuple(pos.shape)}; token pooling needs "
                "(batch, tokens, units). Use token_pool=None for this layer or "
                "select only token layers."
            )
        return pos, CodeLayout("unit", (pos.shape[1],))
    if pos.dim() == 3:
        if token_pool is None and keep_tokens:
            return pos, CodeLayout("unit", (pos.shape[2],))
        if token_pool is None:
            raise ValueError(
                f"layer {name!r} gives a 3-D activation of shape "
                f"{tuple(pos.shape)}, read as (batch, tokens, units); pass "
                "token_pool='first' or token_pool='majority'."
            )
        if token_pool == "first":
            # a copy, not a view: the stored bits must not pin the (N, T, U) map
            return pos[:, 0, :].contiguous(), CodeLayout("unit", (pos.shape[2],))
        if token_pool != "majority":
            raise ValueError(
                f"token_pool must be one of {TOKEN_POOLS} or None. Got "
                f"{token_pool!r} instead."
            )
        if attention_mask is None:
            count = pos.sum(1, dtype=torch.int32)
            bits = 2 * count >= pos.shape[1]
        else:
            mask = attention_mask.to(device=pos.device) != 0
            if mask.shape != pos.shape[:2]:
                raise ValueError(
                    f"attention_mask has shape {tuple(mask.shape)}, but layer "
                    f"{name!r} has (batch, tokens) = {tuple(pos.shape[:2])}."
                )
            count = (pos & mask[:, :, None]).sum(1, dtype=torch.int32)
            n_valid = mask.sum(1, keepdim=True, dtype=torch.int32)
            bits = 2 * count >= n_valid
        return bits, CodeLayout("unit", (pos.shape[2],))
    if pos.dim() == 5:  # (N, T, C, H, W): majority over the time steps
        pos = 2 * pos.sum(dim=1) >= pos.shape[1]
    if pos.dim() == 4:
        if conv_pool == "quadrant":
            return _quadrant_pool(pos), CodeLayout("quadrant", (pos.shape[1],))
        if conv_pool == "flatten":
            return pos.flatten(1), CodeLayout("flat", tuple(pos.shape[1:]))
        raise ValueError(
            f"conv_pool must be one of {CONV_POOLS}. Got {conv_pool!r} instead."
        )
    raise ValueError(
        f"layer {name!r} gives an activation of shape {tuple(pos.shape)}; sign "
        "codes support (batch, units), (batch, tokens, units), "
        "(batch, channels, height, width) and (batch, steps, channels, height, "
        "width)."
    )


def check_no_nan(z: torch.Tensor, name: str) -> None:
    """Refuse NaN pre-activations (which ``z > 0`` would silently read as 0)."""
    # One vectorised sum (NaN propagates) is 20x cheaper than isnan().any();
    # the exact test runs only when the sum is not finite (NaN, or infs).
    if z.is_floating_point() and not torch.isfinite(z.sum()) and torch.isnan(z).any():
        raise ValueError(
            f"layer {name!r} produced NaN pre-activations, so its sign bits are "
            "undefined; check the input and the weights of the net (a diverged "
            "training run gives NaN weights)."
        )


def positive_bits(z: torch.Tensor, name: str) -> torch.Tensor:
    """``z > 0``, refusing NaN."""
    z = z.detach()
    check_no_nan(z, name)
    return z > 0


def layer_code(
    z: torch.Tensor,
    name: str,
    *,
    conv_pool: str,
    token_pool: str | None,
    attention_mask: torch.Tensor | None,
    keep_tokens: bool = False,
) -> tuple[torch.Tensor, CodeLayout]:
    """Code of one layer call from its pre-activation `z` (or ``z > 0``).

    Conv maps on the CPU go through the one-pass numba kernel
    (:mod:`sksign.nn.hooks._quadrant`, looked up at call time so that tests can
    watch it); everything else is ``z > 0``, then :func:`pool_signs`. Both
    give the same bits.
    """
    if z.dtype != torch.bool:
        z = z.detach()
        check_no_nan(z, name)
        if z.dim() == 4 and conv_pool == "quadrant" and z.device.type == "cpu":
            if _quadrant.supports_quadrant_majority(z):
                bits = _quadrant.quadrant_majority(z)
                return bits, CodeLayout("quadrant", (z.shape[1],))
        z = z > 0
    return pool_signs(
        z,
        name=name,
        conv_pool=conv_pool,
        token_pool=token_pool,
        attention_mask=attention_mask,
        keep_tokens=keep_tokens,
    )
