"""Epilogue fusion: the layers that run in the pass of the layer before them.

A layer's op may declare ``epilogues`` (:class:`~sksign.deploy._format.OpSpec`):
runs of ops whose work it can do on its output before writing it, such as a
convolution that applies the BatchNorm after it and adds the residual in the
same pass, instead of three passes over the maps. At load,
:class:`~sksign.deploy.PackedNet` groups the layers into chains: a layer
takes over the layer after it when its output goes to that layer alone, is
not the net's output, that layer is not taken over already (an ``add`` of
two convolutions goes with the first), and the ops taken over so far
followed by that layer's op begin one of its op's epilogues. The file keeps every layer;
fusion is a way of running them, never a change of what they compute: an op
that takes over a layer rounds each step as that layer's op would, so the
chain's output is the one the layers give one after the other (the tests
compare both ways bit for bit).

A chain runs where its last layer stood: its inputs (the first layer's, and
the other inputs of the layers taken over, such as the residual of an
``add``) are made by then, and nothing in between reads the values it no
longer writes.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

from collections import Counter
from itertools import pairwise

__all__ = ["chain_layer", "chains", "internal_values"]


def _begins_an_epilogue(ops, epilogues):
    return any(tuple(seq[: len(ops)]) == ops for seq in epilogues)


def chains(layers, specs, output):
    """The layers grouped into chains, in the order the chains run.

    Parameters
    ----------
    layers : list of dict
        The graph's layers, in forward order.
    specs : dict of str to OpSpec
        The op specs, by op name.
    output : str
        The name of the net's output value.

    Returns
    -------
    chains : list of list of dict
        Each chain is a layer followed by the layers it takes over (often
        none); every layer is in exactly one chain.
    """
    uses = Counter(name for layer in layers for name in layer["inputs"])
    consumer = {name: layer for layer in layers for name in layer["inputs"]}
    position = {id(layer): i for i, layer in enumerate(layers)}
    taken = set()
    by_end = []
    for layer in layers:
        if id(layer) in taken:
            continue
        chain, ops = [layer], ()
        epilogues = specs[layer["op"]].epilogues
        while True:
            value = chain[-1]["output"]
            if value == output or uses[value] != 1:
                break
            nxt = consumer[value]
            if id(nxt) in taken or not _begins_an_epilogue(
                (*ops, nxt["op"]), epilogues
            ):
                break
            chain.append(nxt)
            ops = (*ops, nxt["op"])
            taken.add(id(nxt))
        # consumers come after their producers: the last layer is the latest
        by_end.append((position[id(chain[-1])], chain))
    return [chain for _, chain in sorted(by_end, key=lambda item: item[0])]


def chain_layer(chain):
    """The layer dict a chain runs as: the first layer's inputs, then the
    other inputs of each layer taken over, and the last layer's output."""
    inputs = list(chain[0]["inputs"])
    for before, layer in pairwise(chain):
        inputs += [name for name in layer["inputs"] if name != before["output"]]
    return {
        "name": "+".join(layer["name"] for layer in chain),
        "op": "+".join(layer["op"] for layer in chain),
        "inputs": inputs,
        "output": chain[-1]["output"],
    }


def internal_values(chains):
    """The values the chains no longer write (all but each chain's last)."""
    return {layer["output"] for chain in chains for layer in chain[:-1]}
