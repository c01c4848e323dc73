# The two commands a newcomer needs: `make plan` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
STACK ?= dev

.PHONY: plan test lint images clean docs

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt -e .
	touch $@

# checkov in a virtualenv of its own: its dependency pins clash with pulumi's (requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $@

## plan: evaluate the cluster, workload and bootstrap stacks offline (STACK=dev|prod) and write build/plan/;
##       with BASE=<git ref>, print what this checkout changes against that revision, every stack (offline/diff.py)
plan: $(VENV)/.installed
ifdef BASE
	$(PY) -m offline.diff --base $(BASE)
else
	$(PY) -m offline.plan --stack $(STACK)
endif

## test: lint the Dockerfiles, then the whole test suite on two workers (a test file each at a time, so the
##       git worktrees of the plan-diff tests never race; the slowest files first, tests/conftest.py),
##       checkov scan included (what CI runs)
test: lint $(CHECKOV_VENV)/.installed
	CHECKOV=$(CHECKOV_VENV)/bin/checkov $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

## lint: hadolint over the training images' Dockerfiles; the GitHub workflows against GitHub's schema and
##       zizmor's security audits (offline: no audit that asks GitHub's API)
lint: $(VENV)/.installed
	$(VENV)/bin/hadolint docker/*/Dockerfile
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --no-progress .github

## images: build the training images and push them to the cluster stack's ECR (needs Docker, Pulumi, AWS)
images: $(VENV)/.installed
	$(PY) -m tools.push_images --stack $(STACK)

clean:
	rm -rf build .pytest_cache

## docs: regenerate docs/ (architecture pictures, configuration reference, stack-file schemas) and README's generated blocks
docs: $(VENV)/.installed
	$(PY) -m offline.docs
