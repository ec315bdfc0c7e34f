# Two commands for a fresh machine:
#   make demo   install, train PPO on CartPole-v1 with the defaults, evaluate, show the plot's path
#   make test   install with the test extras, check the import layers, run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/pip install --quiet -c constraints.txt

.PHONY: demo test test-slow install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(PIP_INSTALL) -e .

install-dev: $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'

demo: install
	$(BIN)/ppo-train --env-id CartPole-v1 --eval-episodes 100

test: install-dev
	$(BIN)/lint-imports --config setup.cfg
	$(BIN)/python -m pytest -q

test-slow: install-dev
	$(BIN)/python -m pytest -q -m slow

clean:
	rm -rf runs lecture_outputs .pytest_cache
