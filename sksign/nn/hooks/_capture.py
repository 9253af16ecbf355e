"""The one place where sksign attaches forward hooks to a module.

Everything in sksign that looks inside a forward pass (sign recording, the
interventions, the repulsion loss, the scorers' gate dominance, the
relaxation-gap callback, :func:`~sksign.nn.binary_summary`) goes through
:func:`forward_hooks` or :func:`capture_activations`: hooks are attached on
entry and removed on exit, also after an exception, and the train/eval mode
of every submodule is restored with :func:`temporarily_eval` where asked.

Several threads may read one fitted net at once (a model server, a thread
pool over ``transform``). A ``with`` block's hooks therefore act only on the
forward passes of the thread that opened it: another thread's pass through
the same module neither feeds this block's recorder nor takes its
interventions. Blocks that set the same mode on one module from several
threads share it: the flags saved by the first are restored when the last
leaves, so no thread's pass runs in the mode another thread restored.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

__all__ = [
    "ActivationCapture",
    "HookSpec",
    "call_key",
    "capture_activations",
    "forward_hooks",
    "temporarily_eval",
]

#: A hook to attach: ``(module, fn)``; ``fn`` has torch's forward (pre-)hook
#: signature.
HookSpec = tuple[nn.Module, Callable[..., Any]]


@dataclass(eq=False)  # removed from its list by identity
class _Mode:
    """A mode that :func:`temporary_mode` blocks have set on a module."""

    module: nn.Module  # held, so that its id is not reused meanwhile
    training: bool | None
    saved: list[tuple[nn.Module, bool]]  # every submodule's flag before
    thread: int  # the thread whose block set it
    blocks: int = 1  # the blocks in it, that thread's and others'


_MODES_LOCK = threading.Lock()
#: id(module) -> the modes blocks have set on it, the last one in force
_MODES: dict[int, list[_Mode]] = {}


def call_key(name: str, i: int) -> str:
    """Key of call `i` of a layer in one forward pass: ``name``, ``name#1``, ...

    The sign code names a module called several times per forward this way;
    the interventions key their per-call magnitudes alike.

    Parameters
    ----------
    name : str
        The layer's name.
    i : int
        The 0-based call number within one forward pass.

    Returns
    -------
    str

    Examples
    --------
    >>> call_key("act0", 0), call_key("act0", 2)
    ('act0', 'act0#2')
    """
    return name if i == 0 else f"{name}#{i}"


@contextmanager
def temporary_mode(
    module: nn.Module, training: bool | None = None
) -> Iterator[nn.Module]:
    """Set `module`'s train/eval mode for a block, then restore every submodule's.

    The one place where sksign saves and restores ``.training`` flags: each
    submodule gets its own flag back on exit, also after an exception (a
    backbone frozen in ``eval()`` inside a training net stays so). A block
    that sets the mode another thread's block has in force on `module`
    (threads reading the same net) shares it: the flags saved by the first
    are restored when the last of them leaves, so no thread's forward runs
    in the mode another restored. Blocks nested on one thread save and
    restore in turn.

    Parameters
    ----------
    module : nn.Module
        The net.
    training : bool or None, default=None
        ``module.train(training)`` on entry; None leaves the modes as they
        are (the block may set them itself).

    Yields
    ------
    nn.Module
        `module` itself.

    Examples
    --------
    >>> from torch import nn
    >>> from sksign.nn import temporary_mode
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).eval()
    >>> with temporary_mode(net, training=True):
    ...     net[1].training
    True
    >>> net.training, net[1].training
    (False, False)
    """
    me = threading.get_ident()
    with _MODES_LOCK:
        held = _MODES.setdefault(id(module), [])
        last = held[-1] if held else None
        if (
            training is not None
            and last is not None
            and last.training == training
            and last.thread != me
        ):
            mode = last  # another thread's block set this mode: share it
            mode.blocks += 1
        else:
            saved = [(m, m.training) for m in module.modules()]
            mode = _Mode(module, training, saved, me)
            held.append(mode)
        if training is not None:
            module.train(training)
    try:
        yield module
    finally:
        with _MODES_LOCK:
            mode.blocks -= 1
            if mode.blocks == 0:  # the last block in this mode: restore
                for m, flag in mode.saved:
                    m.training = flag
                held.remove(mode)
                if not held:
                    del _MODES[id(module)]


@contextmanager
def temporarily_eval(module: nn.Module) -> Iterator[nn.Module]:
    """Put `module` in ``eval()`` mode and restore every submodule's mode after.

    The mode of each submodule is restored on exit, also after an exception
    (a backbone frozen in ``eval()`` inside a training net stays so).

    Parameters
    ----------
    module : nn.Module
        The net.

    Yields
    ------
    nn.Module
        `module` itself, in eval mode.

    Examples
    --------
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    >>> with temporarily_eval(net):
    ...     net.training, net[1].training
    (False, False)
    >>> net.training, net[1].training
    (True, True)
    """
    with temporary_mode(module, training=False):
        yield module


def _this_thread_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, run only on the thread that attaches it (None elsewhere: torch
    then leaves the input or output as it is)."""
    owner = threading.get_ident()

    @functools.wraps(fn)
    def hook(*args):
        if threading.get_ident() != owner:
            return None
        return fn(*args)

    return hook


@contextmanager
def forward_hooks(
    pre: Iterable[HookSpec] = (),
    post: Iterable[HookSpec] = (),
    *,
    pre_with_kwargs: Iterable[HookSpec] = (),
    post_with_kwargs: Iterable[HookSpec] = (),
    eval_mode: nn.Module | None = None,
) -> Iterator[None]:
    """Attach forward hooks for the duration of a ``with`` block.

    Parameters
    ----------
    pre, post : iterable of (nn.Module, callable)
        Forward pre-hooks ``fn(module, args)`` and forward hooks
        ``fn(module, args, output)``, in the order given. A hook may return a
        replacement for the input (pre) or output (post), as in torch.
    pre_with_kwargs, post_with_kwargs : iterable of (nn.Module, callable)
        The same with ``with_kwargs=True``: ``fn(module, args, kwargs)`` and
        ``fn(module, args, kwargs, output)``.
    eval_mode : nn.Module, default=None
        A module to keep in ``eval()`` mode inside the block (see
        :func:`temporarily_eval`).

    Yields
    ------
    None

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    >>> seen = []
    >>> with forward_hooks(pre=[(net[1], lambda m, args: seen.append(args[0]))]):
    ...     _ = net(torch.zeros(2, 3))
    >>> len(seen), net[1]._forward_pre_hooks == {}
    (1, True)
    """
    handles: list[RemovableHandle] = []
    here = _this_thread_only
    with ExitStack() as stack:
        try:
            for module, fn in pre:
                handles.append(module.register_forward_pre_hook(here(fn)))
            for module, fn in pre_with_kwargs:
                handles.append(
                    module.register_forward_pre_hook(here(fn), with_kwargs=True)
                )
            for module, fn in post:
                handles.append(module.register_forward_hook(here(fn)))
            for module, fn in post_with_kwargs:
                handles.append(module.register_forward_hook(here(fn), with_kwargs=True))
            if eval_mode is not None:
                stack.enter_context(temporarily_eval(eval_mode))
            yield
        finally:
            for handle in handles:
                handle.remove()


@dataclass
class ActivationCapture:
    """What :func:`capture_activations` saw, per layer name and call.

    Attributes
    ----------
    inputs : dict of str to list of torch.Tensor
        The first tensor argument of each call of a layer (its
        pre-activation for an activation module), in call order.
    outputs : dict of str to list of torch.Tensor
        The output tensor of each call of a layer, in call order.

    Examples
    --------
    >>> import torch
    >>> cap = ActivationCapture(inputs={"act": [torch.zeros(2, 3)]})
    >>> cap.clear()
    >>> cap.inputs
    {'act': []}
    """

    inputs: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    outputs: dict[str, list[torch.Tensor]] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget every captured tensor (keep capturing)."""
        for store in (self.inputs, self.outputs):
            for calls in store.values():
                calls.clear()


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple | list):
        for item in value:
            if isinstance(item, torch.Tensor):
                return item
    return None


@contextmanager
def capture_activations(
    layers: Mapping[str, nn.Module],
    *,
    inputs: bool = True,
    outputs: bool = False,
    detach: bool = True,
    eval_mode: nn.Module | None = None,
) -> Iterator[ActivationCapture]:
    """Capture the inputs and/or outputs of `layers` during forward passes.

    Parameters
    ----------
    layers : mapping of str to nn.Module
        The modules to watch, by name (as :func:`resolve_layers` returns).
    inputs : bool, default=True
        Keep each call's first tensor argument (a forward pre-hook; taken
        before the call, and copied for a module with ``inplace=True``, so an
        in-place activation cannot overwrite it).
    outputs : bool, default=False
        Keep each call's output tensor (a forward hook).
    detach : bool, default=True
        Detach the tensors from the graph. ``False`` keeps them differentiable
        (a loss on hidden activations during training).
    eval_mode : nn.Module, default=None
        A module to keep in ``eval()`` mode inside the block.

    Yields
    ------
    ActivationCapture

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    >>> with capture_activations({"1": net[1]}, outputs=True) as cap:
    ...     _ = net(torch.randn(5, 3))
    >>> cap.inputs["1"][0].shape, bool((cap.outputs["1"][0] >= 0).all())
    (torch.Size([5, 4]), True)
    """
    cap = ActivationCapture()

    def keep(
        store: dict[str, list[torch.Tensor]],
        name: str,
        value: Any,
        copy: bool = False,
    ) -> None:
        tensor = _first_tensor(value)
        if tensor is not None:
            tensor = tensor.detach() if detach else tensor
            store[name].append(tensor.clone() if copy else tensor)

    pre: list[HookSpec] = []
    post: list[HookSpec] = []
    for name, module in layers.items():
        if inputs:
            cap.inputs[name] = []
            # an in-place activation overwrites its input: keep a copy
            inplace = bool(getattr(module, "inplace", False))
            pre.append(
                (
                    module,
                    lambda _m, args, n=name, c=inplace: keep(cap.inputs, n, args, c),
                )
            )
        if outputs:
            cap.outputs[name] = []
            post.append((module, lambda _m, _a, out, n=name: keep(cap.outputs, n, out)))
    with forward_hooks(pre, post, eval_mode=eval_mode):
        yield cap
