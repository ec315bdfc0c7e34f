# Two commands for a fresh machine:
#   make demo   install, train PPO on CartPole-v1 with the defaults, evaluate, show the plot's path
#   make test   install with the test extras, check the import layers, run the test suite
# and, to read the lectures as notebooks:
#   make lab         install with the notebooks extra and open JupyterLab on lectures/
# and, after editing a lecture script:
#   make notebooks   regenerate and execute the lecture notebooks
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/pip install --quiet -c constraints.txt

.PHONY: demo test test-slow lab notebooks install install-dev clean

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

lab: $(BIN)/python
	$(PIP_INSTALL) -e '.[notebooks]'
	$(BIN)/jupyter lab --ServerApp.root_dir=lectures

# Regenerate lectures/NN_name.ipynb from the scripts (jupytext) and execute them (nbclient):
#   make notebooks              full runs (about half an hour on a 2-core CPU; lectures/README.md times each)
#   make notebooks QUICK=1      each lecture in its quick mode
notebooks: install-dev
	$(BIN)/python lectures/_notebooks.py $(if $(QUICK),--quick)

clean:
	rm -rf runs lecture_outputs .pytest_cache
