# The two commands a newcomer needs: `make plan` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev

.PHONY: plan test clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

## plan: evaluate the cluster stack offline (STACK=dev|prod) and write build/plan/
plan: $(VENV)/.installed
	$(PY) -m offline.plan --stack $(STACK)

## test: the whole test suite (what CI runs)
test: $(VENV)/.installed
	$(PY) -m pytest -q

clean:
	rm -rf build .pytest_cache
