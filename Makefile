# Every target installs what it needs into .venv first, so a fresh clone needs only python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-thorough test-real lint demo bench clean lesson lesson-diff mutate

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# A worker per core (pytest-xdist); `pytest tests/test_x.py` alone still runs in one process.
test: $(STAMP)
	$(BIN)/python -m pytest -n auto

# The same suite with the thorough Hypothesis profile (five times the examples).
test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest -n auto

# Six real tasks against a real model on a real server (opt-in; never part of `make test` or
# CI): each test skips when no server answers at REAL_BASE_URL (default
# http://127.0.0.1:18080/v1, what ../shared/real-model/serve.sh starts). Slow: a task can take
# minutes on two cores. `make test-real CHAPTER=8 TOOL_CALLS=text RESULTS=dir`; the other
# knobs are in tests_real/conftest.py.
CHAPTER ?= 2
TOOL_CALLS ?= auto
test-real: $(STAMP)
	REAL_CHAPTER=$(CHAPTER) REAL_TOOL_CALLS=$(TOOL_CALLS) REAL_RESULTS=$(RESULTS) \
		$(BIN)/python -m pytest tests_real -p no:cacheprovider --timeout=0 -rs

# Mutation testing of the decision modules (not part of `make test`; about 22 minutes on two
# cores for 5,178 mutants of 28 modules). What is mutated and which tests run:
# [tool.mutmut] in pyproject.toml; the score, per module, and the equivalent mutants left out
# of it: tests/mutation/. Starts afresh each time, so the score is today's; fails on any
# surviving mutant not listed as equivalent, or when an equivalence entry went stale.
MUTATION_STAMP := $(VENV)/.installed-mutation

$(MUTATION_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,mutation]'
	touch $(MUTATION_STAMP)

mutate: $(MUTATION_STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/python tests/mutation/score.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/agent-tutorial run --chapter 8 --model demo --permission-mode auto \
		--prompt "Give me a tour of this repository."

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_prepare.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_long_session.py
	$(BIN)/python benchmarks/bench_toolbar.py
	$(BIN)/python benchmarks/bench_file_tools.py
	$(BIN)/python benchmarks/bench_sandbox.py
	$(BIN)/python benchmarks/bench_runaway_stream.py
	$(BIN)/python benchmarks/bench_checkpoints.py
	$(BIN)/agent-tutorial bench --turns 300 --seed 591 --context-window 128000

# A lesson run offline: `make lesson N=3 [PROMPT="…"] [ARGS="--trace"]` runs chapters/ch03.py in
# a fresh temporary folder against a scripted local server (a script, not a model: no key, no
# network). PROMPT and ARGS reach the shell unexpanded, so quotes and $ in them survive.
N ?= 1
export LESSON_PROMPT := $(value PROMPT)
export LESSON_ARGS := $(value ARGS)
lesson: $(STAMP)
	@$(BIN)/python chapters/offline/lesson_server.py $(N) \
		$${LESSON_PROMPT:+--prompt "$$LESSON_PROMPT"} $$LESSON_ARGS

# What a chapter adds, as code: `make lesson-diff A=3 B=4` (B defaults to A + 1). diff exits 1
# when the files differ, which is the point here; only a real failure (2) fails the target.
A ?= 1
B ?= $(shell expr $(A) + 1)
lesson-diff:
	@diff -u chapters/ch$$(printf %02d $(A)).py chapters/ch$$(printf %02d $(B)).py; test $$? -le 1

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache mutants
