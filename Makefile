# Each target sets up what it needs: a virtual environment in .venv with the
# project and its test tools (CPU torch pinned in constraints.txt).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup train test test-all evaluate bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt torch
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

train: $(STAMP)  ## the main job: the default recipe (ppo-finetune) on mixed, compared with the heuristics
	$(PY) train.py $(ARGS)

test: $(STAMP)  ## the suite on every core, less the tests marked slow (whole training runs, Ray, signals)
	$(PY) -m pytest -q -n auto --dist worksteal -m "not slow" $(ARGS)

test-all: $(STAMP)  ## every test, the slow ones too: what CI runs
	$(PY) -m pytest -q -n auto --dist worksteal $(ARGS)

evaluate: $(STAMP)
	$(PY) evaluate.py $(ARGS)

bench: $(STAMP)
	$(PY) benchmarks/env_speed.py $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && $(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info
