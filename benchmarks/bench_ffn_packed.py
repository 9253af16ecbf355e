"""Benchmark: a binary FFN block on packed bits (``pack_ffn``) against torch.

For the FFN shapes of MiniLM (384 -> 1536 -> 384) and GPT-2 small
(768 -> 3072 -> 768), random weights, HTAF in eval (the exact step), rows of
tokens 1, 32 and 256, one thread, best of N (wall time), prints:

- "block": ``PackedNet.forward`` of ``pack_ffn(up, step, down)`` (up
  projection in float32, step packed into bits, down projection as sums of
  the weight rows of the active units, or a float32 product of the 0/1 rows
  from 8 rows on) against torch's ``down(step(up(x)))`` under
  ``torch.no_grad()``;
- "down": the down projection alone: the packed ``bit_dense`` layer on the
  packed bits against torch's ``nn.Linear`` on the 0/1 float32 hidden vector
  (the op a binary hidden vector replaces);
- the largest difference from torch's block output, relative to its scale.

    python benchmarks/bench_ffn_packed.py [--repeats 20] [--rows 1 32 256]
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import argparse

import numpy as np
import torch
from _machine import print_machine  # benchmarks/_machine.py, beside this script
from _timing import best_of
from threadpoolctl import threadpool_limits
from torch import nn

from sksign.deploy import pack_ffn
from sksign.nn import make_activation

SHAPES = {"MiniLM": (384, 1536), "GPT-2 small": (768, 3072)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 32, 256])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print_machine()
    print(f"# torch {torch.__version__}; one thread")
    print(
        "| FFN | rows | part | torch (ms) | packed (ms) | speed-up | "
        "max rel. difference |"
    )
    print("|---" * 7 + "|")
    rng = np.random.default_rng(0)
    for label, (d, h) in SHAPES.items():
        torch.manual_seed(0)
        up, down = nn.Linear(d, h), nn.Linear(h, d)
        step = make_activation("htaf").eval()
        packed = pack_ffn(up, step, down).net_
        for rows in args.rows:
            x = rng.normal(size=(rows, d)).astype(np.float32)
            xt = torch.from_numpy(x)
            with torch.no_grad():
                hidden = step(up(xt))
                expected = down(hidden).numpy()
            bits = packed.forward(x, keep=("step",))["step"]
            env = {"step": bits}
            down_layer = packed.layers[-1]

            def torch_block(xt=xt, up=up, step=step, down=down):
                with torch.no_grad():
                    return down(step(up(xt)))

            def torch_down(hidden=hidden, down=down):
                with torch.no_grad():
                    return down(hidden)

            def packed_block(x=x, packed=packed):
                return packed.forward(x)

            def packed_down(env=env, rows=rows, layer=down_layer, packed=packed):
                return packed._run(layer, env, rows, 1)

            with threadpool_limits(1):
                (tb, _), (pb, _) = best_of([torch_block, packed_block], args.repeats)
                (td, _), (pd, _) = best_of([torch_down, packed_down], args.repeats)
            got = packed.forward(x)
            scale = np.abs(expected).max()
            diff = np.abs(got - expected).max() / scale
            for part, t, p in (("block", tb, pb), ("down", td, pd)):
                print(
                    f"| {label} {d}-{h}-{d} | {rows} | {part} | {t * 1e3:.3f} "
                    f"| {p * 1e3:.3f} | {t / p:.2f}x | {diff:.1e} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
