"""Cost of HTAF against ReLU: the activation alone and in a ResNet-18.

Prints a table of ratios measured side by side in one run (runs interleaved,
best of several; wall time, and CPU time as "cpu x", the steadier figure on a
shared machine):

- HTAF forward + backward vs ``torch.relu`` on a conv-sized tensor, for the
  fused float32 kernel, the eager torch path, ``torch.compile`` of the plain
  formula (when a compiler is available) and the previous implementation
  (three saved tensors); target for the fused kernel <= 3x;
- tensors saved for the backward pass per activation call (counted with
  ``torch.autograd.graph.saved_tensors_hooks``), as multiples of the input's
  size; target 1 (ReLU saves one);
- a training step (forward, backward, SGD) of the CIFAR ResNet-18 with HTAF
  vs ReLU at reduced width and batch.

Run: ``python benchmarks/bench_htaf.py [--quick] [--threads N] [--no-compile]``
(the full run uses a (64, 64, 32, 32) tensor and width 32, batch 32; --quick
a (16, 64, 32, 32) tensor and width 8, batch 8).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse
import sys
from pathlib import Path

import llvmlite.binding
import numba
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import best_of

from sksign.nn import build_network
from sksign.nn.activations import htaf


class _ThreeSaved(torch.autograd.Function):
    """The previous implementation: saves x, u and s."""

    @staticmethod
    def forward(ctx, x, a0, a1):
        u = a1 * torch.tanh(a0 * x)
        s = torch.sigmoid(u)
        ctx.save_for_backward(x, u, s)
        ctx.a0, ctx.a1 = a0, a1
        return s

    @staticmethod
    def backward(ctx, g):
        x, u, s = ctx.saved_tensors
        a0, a1 = ctx.a0, ctx.a1
        e = x.abs().mul_(-2.0 * a0).exp_()
        den = e.add(1.0).square_()
        grad = torch.neg(u).sigmoid_().mul_(s).mul_(e).div_(den)
        return grad.mul_(g).mul_(4.0 * a0 * a1), None, None


def _plain(x, a0=2.0, a1=11.0):
    return torch.sigmoid(a1 * torch.tanh(a0 * x))


def activation_table(shape, repeats, use_compile):
    x0 = torch.randn(shape)
    g = torch.randn(shape)
    cands = {
        "relu": torch.relu,
        "htaf fused": lambda t: htaf(t, 2.0, 11.0, kernel="fused"),
        "htaf eager": lambda t: htaf(t, 2.0, 11.0, kernel="eager"),
        "htaf previous (3 saved)": lambda t: _ThreeSaved.apply(t, 2.0, 11.0),
    }
    if use_compile:
        try:
            compiled = torch.compile(_plain)
            x = x0.clone().requires_grad_(True)
            compiled(x).backward(g)
            cands["torch.compile(formula)"] = compiled
        except Exception as exc:  # no compiler, unsupported platform
            print(f"torch.compile skipped: {type(exc).__name__}: {exc}")

    def step(fn):
        def run():
            x = x0.detach().requires_grad_(True)
            fn(x).backward(g)

        return run

    times = best_of([step(f) for f in cands.values()], repeats)
    relu_wall, relu_cpu = times[0]
    rows = []
    for (name, fn), (wall, cpu) in zip(cands.items(), times):
        saved = _saved_multiple(fn, x0)
        rows.append((name, wall * 1e3, wall / relu_wall, cpu / relu_cpu, saved))
    return rows


def _saved_multiple(fn, x0):
    """Bytes saved for backward by one call of `fn`, over the bytes of x."""
    seen = {}

    def pack(t):
        seen[t.data_ptr(), t.dtype, tuple(t.shape)] = t.numel() * t.element_size()
        return t

    x = x0.detach().requires_grad_(True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(x)
    del y
    return sum(seen.values()) / (x.numel() * x.element_size())


def resnet_table(width, batch, repeats):
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    steps = []
    for act in ("relu", "htaf"):
        torch.manual_seed(0)
        net = build_network(
            "resnet18",
            3 * 32 * 32,
            10,
            input_shape=(3, 32, 32),
            activation=act,
            width=width,
        ).train()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

        def step(net=net, opt=opt):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()

        steps.append(step)
    (relu, _), (h, _) = best_of(steps, repeats)
    return relu, h


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--no-compile", action="store_true", help="skip compile")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    shape = (16, 64, 32, 32) if args.quick else (64, 64, 32, 32)
    repeats = 5 if args.quick else 10
    print(f"threads={torch.get_num_threads()}  activation tensor {shape}")
    print(f"{'activation fwd+bwd':<26}{'ms':>9}{'x ReLU':>9}{'cpu x':>9}{'saved/x':>9}")
    rows = activation_table(shape, repeats, not args.no_compile)
    for name, ms, ratio, cpu_ratio, saved in rows:
        print(f"{name:<26}{ms:>9.2f}{ratio:>9.2f}{cpu_ratio:>9.2f}{saved:>9.2f}")
    width, batch = (8, 8) if args.quick else (32, 32)
    relu, h = resnet_table(width, batch, 3 if args.quick else 5)
    print(f"\nResNet-18 train step, width {width}, batch {batch}, 32x32 inputs")
    print(f"{'relu':<26}{relu * 1e3:>9.1f} ms")
    print(f"{'htaf':<26}{h * 1e3:>9.1f} ms{h / relu:>9.2f}x ReLU")
    print("targets: fused HTAF fwd+bwd <= 3x ReLU; saved/x = 1")
    print(f"host CPU {llvmlite.binding.get_host_cpu_name()}, numba {numba.__version__}")


if __name__ == "__main__":
    main()
