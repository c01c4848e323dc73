"""The Makefile as a newcomer meets it: `make help` from the Makefile's own
`##` comments, exit codes that survive GNU make, and a missing tool named instead of a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from offline.plan.runner import REPO_ROOT
from tests.wrapped_text import unwrapped
from tools import requires

MAKEFILE = (REPO_ROOT / "Makefile").read_text()


def make(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_make_help_lists_every_target_from_its_comments():
    run = make("help")
    assert run.returncode == 0
    phony = set(re.search(r"^\.PHONY: (.+)$", MAKEFILE, re.M).group(1).split())
    documented = re.findall(r"^## ([a-z]+): (.+)$", MAKEFILE, re.M)
    assert {name for name, _ in documented} == phony  # every target has its comment
    for name, text in documented:
        assert f"{name}: {text}" in run.stdout.splitlines()
    # Plain `make` is `make help`, not a line about .venv being up to date.
    assert make().stdout == run.stdout


def test_make_lint_passes():
    # `make test` runs lint here, beside the other tests, rather than alone before them: the Python's
    # formatting, lint and types, hadolint over the Dockerfiles, the workflows against GitHub's schema,
    # and zizmor's two personas (Makefile).
    run = make("lint", timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    recipe = re.search(r"^lint: .*\n((?:\t.*\n)+)", MAKEFILE, re.M).group(1)
    commands = [line.split() for line in recipe.splitlines()]
    assert [command[:2] for command in commands] == [
        ["$(VENV)/bin/ruff", "format"],
        ["$(VENV)/bin/ruff", "check"],
        ["$(VENV)/bin/mypy", "__main__.py"],
        ["$(VENV)/bin/hadolint", "docker/*/Dockerfile"],
        ["$(VENV)/bin/check-jsonschema", "--builtin-schema"],
        ["$(VENV)/bin/zizmor", "--offline"],
        ["$(VENV)/bin/zizmor", "--offline"],
    ]
    assert commands[0][2:] == ["--check"]  # a check: lint never rewrites the tree
    # mypy checks the program and every package beside it but the tests: a new package is checked too.
    packages = {path.parent.name for path in REPO_ROOT.glob("*/__init__.py")} - {"tests"}
    assert set(commands[2][1:]) == packages | {"__main__.py"}


def test_make_keeps_the_plans_exit_code_in_sight(tmp_path):
    # GNU make's exit status is 0, 1 (-q only) or 2 whatever a recipe returns (GNU make manual,
    # "How to Run make": "The exit status of make is always one of three values"), so a mandatory
    # policy violation (offline.plan.command's 3) reaches the shell as 2: the recipe prints the plan's own
    # code, make's own "Error 3" line carries it, and bin/plan (which the recipe runs) exits with it.
    policy = tmp_path / "all-mandatory.json"
    policy.write_text(json.dumps({"all": "mandatory"}))
    run = make("plan", f"ARGS=--out {tmp_path / 'out'} --policy-config {policy}")
    assert run.returncode == 2
    assert (
        "make plan: the plan exited with code 3 (2 bad configuration, 3 mandatory policy violation);\n"
        "  GNU make reports any failure as 2: run bin/plan for the code itself\n"
    ) in run.stderr
    assert re.search(r"make(\[\d+\])?: \*\*\* \[Makefile:\d+: plan\] Error 3", run.stderr)  # [1] under make test
    assert (tmp_path / "out" / "trainium-eks" / "dev" / "resources.json").exists()  # written before exit 3
    # bin/plan is the same command without make in between: bad configuration is its 2.
    bad = subprocess.run(
        [str(REPO_ROOT / "bin" / "plan"), "--stack", "nosuch"], capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 2 and "error: no stack file Pulumi.nosuch.yaml" in unwrapped(bad.stderr)
    # ... and names the stacks there are.
    assert "; the stacks here: dev, prod (make plan STACK=<stack>)" in unwrapped(bad.stderr)


def test_make_images_names_the_missing_tools(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # nothing on PATH
    run = subprocess.run(
        [sys.executable, "-m", "tools.push_images", "--stack", "dev"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == requires.MISSING_TOOL_EXIT == 4
    assert "Traceback" not in run.stderr
    version = (REPO_ROOT / ".pulumi-version").read_text().strip()
    assert "make images needs pulumi, docker, aws; missing:" in run.stderr
    assert (
        f"  - pulumi: not found on PATH; install the Pulumi CLI {version} (.pulumi-version): "
        f"curl -fsSL https://get.pulumi.com | sh -s -- --version {version}"
    ) in run.stderr
    assert "  - docker: not found on PATH; install Docker Engine or Docker Desktop:" in run.stderr
    assert "  - aws: not found on PATH; install the AWS CLI v2:" in run.stderr
    dry = subprocess.run(
        [sys.executable, "-m", "tools.push_images", "--dry-run"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dry.returncode == 4 and "make images --dry-run needs pulumi; missing:" in dry.stderr


def test_every_tool_a_target_checks_says_where_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    lines = requires.missing(["pulumi", "docker", "aws", "kubectl"])
    assert [line.split(":")[0] for line in lines] == ["pulumi", "docker", "aws", "kubectl"]
    assert all("https://" in line for line in lines)
    tool = tmp_path / "kubectl"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert requires.missing(["kubectl"]) == []


def test_the_license_is_apache_2():
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 170  # the full text
    assert Path(REPO_ROOT / "README.md").read_text().count("[LICENSE](LICENSE)") == 1


def test_no_page_says_make_plan_exits_3():
    # GNU make exits 2 whatever the recipe returned (GNU make manual, "How to Run make": "The exit
    # status of make is always one of three values"): 3 is bin/plan's code, never `make plan`'s.
    # Every paragraph that gives the code 3 says whose it is (bin/plan) or links the exit codes.
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    unqualified = [
        (page.name, paragraph[:80])
        for page in pages
        for paragraph in page.read_text().split("\n\n")
        if re.search(r"exit(s| code)?( with)?( code)?( is)? \**3\b", " ".join(paragraph.split()))
        and "bin/plan" not in paragraph
        and "#exit-codes" not in paragraph
    ]
    assert unqualified == []
    assert "`bin/plan`\nexits 3, `make plan` exits 2" in (REPO_ROOT / "docs" / "guardrails.md").read_text()


def test_every_make_command_the_docs_give_is_a_target_make_help_lists():
    # README step 3 once ran `make .venv/.installed`, a file target `make help` never showed.
    listed = set(re.findall(r"^([a-z]+): ", make("help").stdout, re.M))
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    used = {
        (page.name, target)
        for page in pages
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)
        for target in re.findall(r"^make ([^\s=]+)(?:\s|$)", block, re.M)
    }
    assert ("README.md", "venv") in used and "venv" in listed
    # docs/pipeline.md mirrors the workflows' own `make .venv/.installed` (the file `make venv` makes).
    assert {(page, t) for page, t in used if t not in listed} <= {("pipeline.md", ".venv/.installed")}
