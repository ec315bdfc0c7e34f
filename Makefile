# Two commands for a fresh machine:
#   make demo   install, train PPO on CartPole-v1 with its preset, evaluate, show the plot's path
#   make test   install with the test extras, check the import layers, run the default tier of the tests
# and the rest of the tests, which CI runs too:
#   make test-full   the full tier: lecture and notebook quick runs, README flows, long learning runs
# and, to read the lectures as notebooks:
#   make lab         install with the notebooks extra and open JupyterLab on lectures/
# and, after editing a lecture script:
#   make notebooks   bring the lecture notebooks up to date (execute the stale ones)
# and, to read the course as a website:
#   make book        install with the book extra and build the book into docs/_build/html/
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/pip install --quiet -c constraints.txt
# pip compiles the packages it installs to bytecode, but not an editable install: compile the
# project's own packages too, so a command does not recompile them on every start where
# PYTHONDONTWRITEBYTECODE is set (as in many containers). A source edited since is recompiled
# in memory as Python always does; the next install writes its bytecode again.
COMPILE := $(BIN)/python -m compileall -q ppo envs experiments
# Each tier runs on TEST_WORKERS pytest processes (pytest-xdist); every test uses one torch thread;
# tests of one xdist_group (the torchrun tests) run in one process, one after another.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

.PHONY: demo test test-full lab notebooks book install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/python
	$(PIP_INSTALL) -e .
	$(COMPILE)

install-dev: $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	$(COMPILE)

demo: install
	$(BIN)/ppo-train --env-id CartPole-v1 --eval-episodes 100

test: install-dev
	$(BIN)/lint-imports --config setup.cfg
	@echo "The default tier: every test not marked slow (the full tier is make test-full)"
	$(PYTEST)

test-full: install-dev
	@echo "The full tier: the tests marked slow (make test runs the others)"
	$(PYTEST) -m slow

lab: $(BIN)/python
	$(PIP_INSTALL) -e '.[notebooks]'
	$(COMPILE)
	$(BIN)/jupyter lab --ServerApp.root_dir=lectures $(if $(filter 0,$(shell id -u)),--allow-root)

# Bring lectures/NN_name.ipynb up to date with the scripts (jupytext) and the code (nbclient):
#   make notebooks              execute in full the stale ones, give the others their script's new text
#   make notebooks ALL=1        execute every lecture in full (about 20 min on 2 cores; lectures/README.md times each)
#   make notebooks QUICK=1      each lecture in its quick mode, into lecture_outputs/notebooks/
notebooks: install-dev
	$(BIN)/python lectures/_notebooks.py $(if $(ALL),--all) $(if $(QUICK),--quick)

# The book, built offline with Sphinx and MyST-NB from docs/book/: the shipped lecture notebooks
# as they are (never executed), the learner pages, the guide and the API reference. -W: a warning fails the build.
book: $(BIN)/python
	$(PIP_INSTALL) -e '.[book]'
	$(BIN)/python -m sphinx -b html -W --keep-going -q docs/book docs/_build/html
	@echo "The book: docs/_build/html/index.html"

clean:
	rm -rf runs lecture_outputs .pytest_cache docs/_build docs/book/lectures
	find ppo envs experiments -name __pycache__ -prune -exec rm -rf {} +
