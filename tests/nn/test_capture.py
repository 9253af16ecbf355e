"""Tests for the one hook mechanism: forward_hooks and capture_activations."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import threading

import pytest
import torch
from torch import nn

from sksign.nn import (
    ActivationCapture,
    capture_activations,
    forward_hooks,
    temporarily_eval,
    temporary_mode,
)
from sksign.nn.hooks import call_key


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _net():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Dropout(), nn.Linear(4, 2))


def _n_hooks(module):
    return sum(
        len(m._forward_pre_hooks) + len(m._forward_hooks) for m in module.modules()
    )


def _modes(module):
    return [m.training for m in module.modules()]


def test_forward_hooks_run_in_order_and_go_away():
    """Check pre and post hooks run in the given order and are removed on exit."""
    net = _net()
    calls = []
    pre = [
        (net[1], lambda m, args: calls.append("pre-a")),
        (net[1], lambda m, args: calls.append("pre-b")),
    ]
    post = [(net[1], lambda m, args, out: calls.append("post"))]
    with forward_hooks(pre, post):
        assert _n_hooks(net) == 3
        net(torch.randn(2, 3))
    assert calls == ["pre-a", "pre-b", "post"]
    assert _n_hooks(net) == 0
    net(torch.randn(2, 3))
    assert calls == ["pre-a", "pre-b", "post"]


def test_forward_hooks_can_replace_input_and_output():
    """Check a pre-hook's and a hook's return values replace input and output."""
    net = nn.Sequential(nn.Identity())
    x = torch.ones(2, 2)
    pre = [(net[0], lambda m, args: (2 * args[0],))]
    post = [(net[0], lambda m, args, out: out + 1)]
    with forward_hooks(pre, post):
        torch.testing.assert_close(net(x), 3 * x)
    torch.testing.assert_close(net(x), x)


def test_forward_hooks_removed_and_modes_restored_after_exception():
    """Check hooks go and every submodule's mode comes back when forward raises."""
    net = _net()
    net.train()
    net[2].eval()  # a mixed state must come back as it was
    before = _modes(net)
    inside = {}

    def boom(module, args):
        inside["modes"] = _modes(net)
        inside["hooks"] = _n_hooks(net)
        raise RuntimeError("boom")

    def fail_inside():
        with forward_hooks(pre=[(net[1], boom)], eval_mode=net):
            net(torch.randn(2, 3))

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert inside["hooks"] == 1
    assert not any(inside["modes"])
    assert _n_hooks(net) == 0
    assert _modes(net) == before


def test_forward_hooks_with_kwargs():
    """Check with_kwargs pre-hooks and hooks see the keyword arguments."""

    class Scaled(nn.Module):
        def forward(self, x, *, scale=1.0):
            return x * scale

    net = Scaled()
    seen = {}

    def pre(module, args, kwargs):
        seen["pre"] = dict(kwargs)
        return args, {"scale": 3.0}

    def post(module, args, kwargs, out):
        seen["post"] = dict(kwargs)
        return out + 1

    x = torch.ones(2)
    with forward_hooks(pre_with_kwargs=[(net, pre)], post_with_kwargs=[(net, post)]):
        out = net(x, scale=2.0)
    torch.testing.assert_close(out, 3 * x + 1)
    assert seen == {"pre": {"scale": 2.0}, "post": {"scale": 3.0}}
    assert _n_hooks(net) == 0
    torch.testing.assert_close(net(x, scale=2.0), 2 * x)


def test_forward_hooks_keep_mode_without_eval_mode():
    """Check forward_hooks leaves the train/eval mode alone unless asked."""
    net = _net().train()
    with forward_hooks(post=[(net[0], lambda m, a, o: None)]):
        assert all(_modes(net))
    with forward_hooks(eval_mode=net):
        assert not any(_modes(net))
    assert all(_modes(net))


def test_capture_activations_inputs_and_outputs():
    """Check the captured inputs and outputs per call, detached by default."""
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU())
    x = torch.randn(5, 3)
    with capture_activations({"1": net[1], "3": net[3]}, outputs=True) as cap:
        net(x)
        net(x)
    assert isinstance(cap, ActivationCapture)
    assert [len(cap.inputs[k]) for k in ("1", "3")] == [2, 2]
    torch.testing.assert_close(cap.inputs["1"][0], net[0](x))
    torch.testing.assert_close(cap.outputs["1"][0], torch.relu(net[0](x)))
    assert not cap.inputs["1"][0].requires_grad
    assert not cap.outputs["3"][1].requires_grad
    assert _n_hooks(net) == 0
    cap.clear()
    assert cap.inputs == {"1": [], "3": []}


def test_capture_activations_input_survives_inplace_activation():
    """Check the input of an in-place ReLU is taken before it is overwritten."""
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True))
    x = torch.randn(6, 3)
    with torch.no_grad(), capture_activations({"1": net[1]}) as cap:
        net(x)
        z = net[0](x)
    assert (cap.inputs["1"][0] < 0).any()
    torch.testing.assert_close(cap.inputs["1"][0], z)


def test_capture_activations_detach_false_keeps_the_graph():
    """Check detach=False gives tensors a loss can backpropagate through."""
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    with capture_activations({"1": net[1]}, detach=False) as cap:
        net(torch.randn(5, 3))
    z = cap.inputs["1"][0]
    assert z.requires_grad
    z.pow(2).sum().backward()
    assert net[0].weight.grad is not None
    assert net[0].weight.grad.abs().sum() > 0


def test_capture_activations_eval_mode_and_exception():
    """Check eval_mode applies inside and hooks/modes come back after an error."""
    net = _net().train()
    inside = {}

    def fail_inside():
        with capture_activations({"1": net[1]}, eval_mode=net) as cap:
            inside["modes"] = _modes(net)
            net(torch.randn(2, 3))
            inside["n"] = len(cap.inputs["1"])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert not any(inside["modes"])
    assert inside["n"] == 1
    assert all(_modes(net))
    assert _n_hooks(net) == 0


def test_temporarily_eval_restores_after_exception():
    """Check temporarily_eval restores each submodule's mode after an error."""
    net = _net()
    net[2].eval()
    before = _modes(net)

    def fail_inside():
        with temporarily_eval(net):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    assert _modes(net) == before


def test_call_key():
    """Check the keys of repeated calls of a layer in one forward pass."""
    assert [call_key("act", i) for i in range(3)] == ["act", "act#1", "act#2"]


def _in_thread(fn):
    """Run `fn` on another thread and return its result (or raise its error)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # re-raised on this thread
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_forward_hooks_act_only_on_the_thread_that_attached_them():
    """Check another thread's forward pass is neither seen nor changed."""
    net = _net().eval()
    x = torch.randn(5, 3)
    plain = net(x)
    seen = []
    pre = [(net[1], lambda m, args: seen.append(threading.get_ident()))]
    post = [(net[3], lambda m, args, out: out * 0)]
    with forward_hooks(pre, post):
        other = _in_thread(lambda: net(x))
        here = net(x)
    torch.testing.assert_close(other, plain)
    assert torch.count_nonzero(here) == 0
    assert seen == [threading.get_ident()]


def test_blocks_of_one_mode_on_several_threads_share_it():
    """Check a net in train mode stays in eval until the last block leaves."""
    net = _net()
    entered, left = threading.Event(), threading.Event()

    def other_block():
        with temporarily_eval(net):
            entered.set()
            left.wait(5)
            return _modes(net)

    thread = threading.Thread(target=other_block)
    with temporarily_eval(net):
        thread.start()
        assert entered.wait(5)
    # this thread left first: the other block's pass must still run in eval
    assert _modes(net) == [False] * 5
    left.set()
    thread.join()
    assert _modes(net) == [True] * 5


def test_nested_blocks_of_other_modes_restore_in_turn():
    """Check eval inside train inside eval restores each level's flags."""
    net = _net().eval()
    net[2].train()  # a submodule in its own mode
    before = _modes(net)
    with temporarily_eval(net):
        with temporary_mode(net, training=True):
            assert _modes(net) == [True] * 5
            with temporarily_eval(net):
                assert _modes(net) == [False] * 5
            assert _modes(net) == [True] * 5
        assert _modes(net) == [False] * 5
    assert _modes(net) == before


def test_a_nested_block_of_the_same_mode_restores_what_it_found():
    """Check a block inside one of the same mode gives back the flags it met."""
    net = _net()
    with temporarily_eval(net):
        net[2].train()  # the outer block's code switches a submodule back
        with temporarily_eval(net):
            assert _modes(net) == [False] * 5
        assert net[2].training
    assert _modes(net) == [True] * 5
