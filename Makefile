# The two commands a newcomer needs: `make plan` and `make test`. Both create .venv on first use.
# `make help` lists the targets from the `## target: ...` comments below.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
STACK ?= dev
.DEFAULT_GOAL := help
# The documentation site, strict: any warning (a broken link, a page left out of mkdocs.yml's nav) fails.
# Never --quiet: it raises the log level to ERROR, so warnings never reach the counter that strict
# mode checks (mkdocs 1.6.1 __main__.py quiet_option, commands/build.py CountHandler).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

.PHONY: help venv plan test lint images clean docs

## help: list these targets (the default); variables: STACK=dev|prod, BASE=<git ref>, WIDE=1, ARGS=<more options>
help:
	@sed -n 's/^## \{0,1\}//p' $(MAKEFILE_LIST)

## venv: create .venv from the pinned requirements.txt with this repository installed (make plan, test and docs
##       do it on first use); `pulumi preview`/`up` and the policy pack run in it
venv: $(VENV)/.installed

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
##       WIDE=1 prints the full table; with BASE=<git ref> (HEAD: your uncommitted edits), print what this
##       checkout changes against that revision, every stack (offline/diff/compare.py). GNU make exits 2 on any
##       failure; the plan's own code (2 bad config, 3 mandatory policy violation) is in the last line,
##       and `bin/plan` (same options) exits with it
plan: $(VENV)/.installed
	@bin/plan $(if $(BASE),--base $(BASE),--stack $(STACK) $(if $(WIDE),--wide)) $(ARGS) || { code=$$?; \
	  echo "make plan: the plan exited with code $$code (2 bad configuration, 3 mandatory policy violation);" >&2; \
	  echo "  GNU make reports any failure as 2: run bin/plan for the code itself" >&2; exit $$code; }

## test: the whole test suite on two workers: `make lint` (tests/test_make.py), the checkov scan and the
##       documentation site's strict build included (tests/test_site.py); what CI runs
# Whole files to a worker (--dist loadfile): the plan-diff tests add git worktrees to this one
# repository, which two workers must not do at once, and a file's module-scoped fixtures (the
# checkov scan, the dev plan of tests/test_plan_cli.py) then run once, not once a worker.
# Python's own bytecode cache stays on even where the environment turns it off (PYTHONDONTWRITEBYTECODE,
# set in some CI images): the suite starts dozens of Python processes (bin/plan, make, TorchX) that would
# each compile the program again.
test: $(VENV)/.installed $(CHECKOV_VENV)/.installed
	PYTHONDONTWRITEBYTECODE= CHECKOV=$(CHECKOV_VENV)/bin/checkov $(PY) -m pytest -q -n 2 --dist loadfile

## lint: ruff's formatter check and linter over all the Python (tests included), mypy over the program code
##       (pyproject.toml); hadolint over the training images' Dockerfiles; the GitHub workflows against GitHub's
##       schema and zizmor's security audits, the default and the auditor persona (offline: no audit that asks
##       GitHub's API)
lint: $(VENV)/.installed
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/ruff check
	$(VENV)/bin/mypy __main__.py infra offline workloads bootstrap policy tools
	$(VENV)/bin/hadolint docker/*/Dockerfile
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --no-progress .github
	$(VENV)/bin/zizmor --offline --no-progress --persona=auditor .github

## images: build the training images and push them to the cluster stack's ECR (needs Docker, the Pulumi CLI and
##       the AWS CLI with credentials; says which is missing and where to get it); refuses while a
##       docker/*/constraints.txt pins nothing, unless ARGS=--record-constraints (writes them back)
images: $(VENV)/.installed
	$(PY) -m tools.push_images --stack $(STACK) $(ARGS)

## clean: delete build/ (plans, the documentation site) and pytest's, ruff's and mypy's caches
clean:
	rm -rf build .pytest_cache .ruff_cache .mypy_cache

## docs: regenerate docs/ (architecture pictures, configuration reference, cost, stack-file schemas) and
##       README's generated blocks, then build the documentation site into build/site (mkdocs, strict)
docs: $(VENV)/.installed
	$(PY) -m offline.docs
	$(MKDOCS)
