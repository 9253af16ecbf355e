"""The README's quickstart code runs and does what it says."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def quickstart_namespace():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    # fewer epochs and folds: this checks the code, not the accuracy
    code = "\n".join(blocks).replace("max_epochs=20", "max_epochs=3")
    code = code.replace("cv=3", "cv=2")
    namespace = {"print": lambda *args, **kwargs: None}
    exec(compile(code, str(README), "exec"), namespace)
    return namespace


def test_readme_grid_search_stays_on_the_manifold(quickstart_namespace):
    """Check the README's GridSearchCV searched alpha0 * alpha1 = 22."""
    grid = quickstart_namespace["grid"]
    for params in grid.cv_results_["params"]:
        assert params["alpha0"] * params["alpha1"] == pytest.approx(22.0)
    assert len(grid.cv_results_["params"]) == 3


def test_readme_pipeline_reads_the_nets_codes(quickstart_namespace):
    """Check the README's pipeline holds one bit per last-layer unit and predicts."""
    ns = quickstart_namespace
    pipe, X_test, y_test = ns["pipe"], ns["X_test"], ns["y_test"]
    assert pipe.named_steps["codes"].n_bits_ == 512
    assert pipe.score(X_test, y_test) > 0.5


def test_readme_sign_code_claims_hold(quickstart_namespace):
    """Check what the README says its second block shows: the sign-kNN within
    0.03 of the net, and the net survives redrawn magnitudes better than a
    fifth of its signs flipped (the block runs with its own defaults)."""
    ns = quickstart_namespace
    net, pipe, X_test, y_test = ns["net"], ns["pipe"], ns["X_test"], ns["y_test"]
    assert abs(pipe.score(X_test, y_test) - net.score(X_test, y_test)) < 0.03
    assert ns["flip"] < ns["noise"] - 0.2


def _section(text, title):
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_readme_install_for_users():
    """Check the Install section follows the two opening commands and matches
    the Makefile's torch pin and pyproject's extras."""
    tomllib = pytest.importorskip("tomllib")
    text = README.read_text()
    root = README.parent
    # the two opening commands stay first
    first = re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines()
    assert [line.split()[:2] for line in first] == [["make", "demo"], ["make", "test"]]
    assert text.index("## Two commands") < text.index("## Install")
    assert text.index("## Install") < text.index("## Quickstart")
    install = _section(text, "Install")
    pin = re.search(r"^TORCH_PIN \?= (\S+)$", (root / "Makefile").read_text(), re.M)
    index = "--index-url https://download.pytorch.org/whl/cpu"
    assert f"pip install {pin.group(1)} {index}" in install
    assert "pip install sksign" in install
    assert "pip install ." in install
    with open(root / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for name in extras:
        assert f"`{name}`" in install, name
