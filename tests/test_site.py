"""The README is a guide, the reference a strict MkDocs site, and the two never say a thing twice.
`make test` builds the site itself; these tests keep the build strict."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from offline.docs import generate
from offline.plan.runner import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
MKDOCS = [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict"]
PAGES = (
    "architecture",
    "configuration",
    "workloads",
    "pipeline",
    "guardrails",
    "security",
    "cost",
    "operations",
    "design",
)


def _site_copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path


def _small_site(tmp_path: Path, config: str | None = None) -> Path:
    """Two pages under the repository's mkdocs.yml (theme, extensions, validation, strict), its nav
    cut to them: how mkdocs treats the settings, without rendering all of docs/ again."""
    config = (REPO_ROOT / "mkdocs.yml").read_text() if config is None else config
    tmp_path.mkdir(parents=True, exist_ok=True)
    nav = "nav:\n  - Home: index.md\n  - Architecture: architecture.md\n"
    config, replaced = re.subn(
        r"^nav:\n(?:[ \t].*\n|\n)*", nav, config if config.endswith("\n") else config + "\n", flags=re.M
    )
    assert replaced == 1, "mkdocs.yml has no nav block"
    (tmp_path / "mkdocs.yml").write_text(config)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the architecture](architecture.md).\n")
    (tmp_path / "docs" / "architecture.md").write_text("# Architecture\n")
    return tmp_path


def _build(site: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MKDOCS, *extra, "--site-dir", str(site / "out")],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_site_has_every_page_in_its_navigation():
    config = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(), Loader=yaml.Loader)  # !!python/name tags
    assert config["theme"]["name"] == "material" and config["strict"] is True
    nav = {Path(next(iter(entry.values()))).stem for entry in config["nav"]}
    assert set(PAGES) <= nav
    assert nav == {p.stem for p in (REPO_ROOT / "docs").glob("*.md")}


def test_the_strict_build_fails_on_a_broken_link_and_a_page_left_out(tmp_path):
    # mkdocs 1.6.1: strict mode aborts when its CountHandler saw a warning (commands/build.py);
    # a link to a missing page and a page outside `nav` are warnings (mkdocs.yml `validation`).
    # Exactly two warnings: the two edits below.
    site = _small_site(tmp_path)
    with (site / "docs" / "architecture.md").open("a") as page:
        page.write("\nSee [the old page](gone.md).\n")
    (site / "docs" / "stray.md").write_text("# Stray\n")
    run = _build(site)
    assert run.returncode == 1 and "Aborted with 2 warnings in strict mode!" in run.stdout
    assert "contains a link 'gone.md', but the target is not found" in run.stderr and "stray.md" in run.stderr
    # --quiet sets the log level to ERROR (mkdocs/__main__.py quiet_option), so no warning reaches
    # the counter and the same broken site "builds": the Makefile must never pass it.
    assert _build(site, "--quiet").returncode == 0
    recipe = re.search(r"^MKDOCS := (.+)$", (REPO_ROOT / "Makefile").read_text(), re.M).group(1)
    assert "--strict" in recipe and "--quiet" not in recipe
    assert "--strict" in MKDOCS and "--quiet" not in MKDOCS  # `make test`'s build of the site is this file's


def test_the_readme_is_a_guide_of_at_most_180_written_lines():
    # The generated blocks (the picture, the cost box, the plan summary...) grow with a team's stacks;
    # what is written by hand stays short.
    written = re.sub(r"<!-- BEGIN generated.*?<!-- END generated[^>]*-->", "", README, flags=re.S)
    assert len(written.splitlines()) <= 180
    lines = README.splitlines()
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == [
        "## What it costs",
        "## The two commands",
        "## Deploy dev for real",
        "## Documentation",
        "## License",
    ]
    assert README.index("```mermaid") < README.index("## What it costs")  # the picture first
    commands = README.split("## The two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split()[:2] for line in commands.splitlines()] == [["make", "plan"], ["make", "test"]]
    steps = re.findall(r"^\*\*(\d+)\. ([^*]+)\*\*", README, re.M)
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1))
    titles = " / ".join(title for _, title in steps)
    for step in (
        "Prerequisites",
        "Edit",
        "Preview",
        "Deploy",
        "Verify",
        "cluster check",
        "First training job",
        "Tear down",
    ):
        assert step in titles, step
    walkthrough = README.split("## Deploy dev for real", 1)[1].split("## Documentation", 1)[0]
    for needed in (
        "AWS CLI v2",
        "kubectl",
        "Docker",
        "jq",
        "Python 3.11",
        generate.tool_versions().strip(),
        "kubectl get nodes",
        "job/cluster-check-verdict",
        "RESULT PASS",
        "pulumi destroy",
        "minutes",
    ):
        assert needed in walkthrough, needed


def test_the_readmes_figures_are_generated_not_typed():
    # Every dollar amount and resource count comes from a generated block (make docs), never typed.
    typed = re.sub(
        r"<!-- BEGIN generated: (.+?) \(make docs; do not edit\) -->.*?<!-- END generated: \1 -->",
        "",
        README,
        flags=re.S,
    )
    assert re.findall(r"\$\d", typed) == []
    assert "cost box" in README and "plan summary" in README and typed.count("<!-- BEGIN generated") == 0


def _sentences(text: str) -> set[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"<!-- BEGIN generated.*?END generated[^>]*-->", " ", text, flags=re.S)
    words = " ".join(text.split())
    return {s.strip() for s in re.split(r"(?<=[.;:])\s+", words) if len(s.split()) >= 10}


def test_nothing_is_said_twice_between_the_readme_and_the_site():
    site = " ".join(
        " ".join((REPO_ROOT / "docs" / f"{page}.md").read_text().split()) for page in (*PAGES, "index", "offline-plan")
    )
    repeated = [s for s in _sentences(README) if s in site]
    assert repeated == []


def _broken_file_links(site: Path) -> list[str]:
    """Relative links of every built page that a browser reading the files (file://) cannot open as a
    file: it resolves a link against the page's directory and shows a directory as a listing."""
    from urllib.parse import unquote, urlsplit

    broken = []
    # 404.html is only ever served by a web server for a missing path, so its links are site-absolute.
    for page in sorted(p for p in site.rglob("*.html") if p.name != "404.html"):
        for href in re.findall(r'(?:href|src)="([^"]*)"', page.read_text()):
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or not parts.path:  # other sites, mailto:, #anchors
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {href}")
    return broken


def test_the_built_site_works_opened_from_the_file_system(tmp_path):
    # README: `make docs`, then open build/site/index.html. mkdocs 1.6.1 structure/files.py
    # File._get_dest_path/_get_url: with use_directory_urls (its default) architecture.md becomes
    # architecture/index.html linked as "architecture/", which file:// shows as a directory listing;
    # with it false, architecture.html linked as "architecture.html".
    project = _site_copy(tmp_path / "repo")
    shutil.copy(REPO_ROOT / "README.md", project / "README.md")
    site = project / "build" / "site"
    # The repository's site, built strict: `make test`'s documentation build (Makefile).
    built = subprocess.run(
        [*MKDOCS, "--site-dir", str(site)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    index = (site / "index.html").read_text()
    assert 'href="architecture.html"' in index and 'href="../../README.md"' in index  # the README, from build/site
    assert _broken_file_links(site) == []
    # The other side: directory URLs, as mkdocs defaults, leave every nav link a directory.
    config = (REPO_ROOT / "mkdocs.yml").read_text()
    assert "\nuse_directory_urls: false\n" in config
    other = _small_site(tmp_path / "directory-urls", config.replace("\nuse_directory_urls: false\n", "\n"))
    assert _build(other).returncode == 0
    assert "index.html: architecture/" in _broken_file_links(other / "out")


def test_the_docs_say_the_diagrams_need_a_network():
    # mkdocs-material 9.8.2 loads Mermaid from unpkg.com when a page has a diagram (its JavaScript
    # bundle names https://unpkg.com/mermaid@11/dist/mermaid.min.js), so a site read offline shows
    # the diagrams' source text: the README and the Home page say so.
    import material

    bundle = " ".join(
        p.read_text()
        for p in (Path(material.__file__).parent / "templates" / "assets" / "javascripts").glob("bundle.*.min.js")
    )
    assert "unpkg.com/mermaid@11/dist/mermaid.min.js" in bundle
    assert "the diagrams need a network connection" in README
    assert "loads Mermaid from unpkg.com" in (REPO_ROOT / "docs" / "index.md").read_text()


def _shell_commands(text: str) -> list[tuple[str, str]]:
    """(directory, command) of every `pulumi ...` line in the page's bash blocks, the directory
    followed through `cd` (relative to the repository root; `(cd x && ...)` counts for its line)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        cwd = Path(".")
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            inline = re.match(r"^(\(?)cd (\S+) && (.*?)\)?$", line)
            here = cwd / inline.group(2) if inline else cwd
            command = inline.group(3) if inline else line
            if re.match(r"^cd (\S+)$", line) or (inline and not inline.group(1)):  # `(cd x && ...)` is scoped
                cwd = cwd / line.split()[1]
            for part in command.split(" && "):
                if part.startswith("pulumi "):
                    found.append((str(Path(*[p for p in here.parts if p != "."]) if here.parts else "."), part))
    return found


def test_every_preview_and_up_of_the_cluster_and_workload_stacks_runs_the_guardrails():
    # The pipeline runs the policy pack on every preview and update of the cluster and workload stacks
    # (deploy.yml: `policyPacks: ../policy` for the workload stack); the guide and the pages must too.
    # Flag names as the Pulumi CLI defines them for preview and up (pulumi/pulumi pkg/cmd/pulumi
    # operations up.go/preview.go: StringSliceVar "policy-pack", "policy-pack-config", "Path to JSON file
    # containing the config for the policy pack of the corresponding --policy-pack flag"; CLI reference
    # pulumi_up). The bootstrap stack has no guardrails (offline/plan/command.py), so its commands are exempt.
    assert "policyPacks: ../policy" in (REPO_ROOT / ".github" / "workflows" / "deploy.yml").read_text()
    checked = []
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for cwd, command in _shell_commands(page.read_text()):
            if not re.match(r"pulumi (up|preview)\b", command) or cwd.startswith("bootstrap"):
                continue
            pack = "policy" if cwd == "." else "../policy"
            assert cwd in (".", "workloads"), (page.name, cwd, command)
            stack = re.search(r"config\.(\w+)\.json", command)
            assert f"--policy-pack {pack} --policy-pack-config {pack}/config." in " ".join(command.split()), (
                page.name,
                command,
            )
            assert stack and (REPO_ROOT / "policy" / f"config.{stack.group(1)}.json").exists()
            checked.append((page.name, cwd))
    # README's preview, deploy and both workload updates, and the pages' own.
    assert ("README.md", ".") in checked and ("README.md", "workloads") in checked
    assert ("workloads.md", "workloads") in checked and ("operations.md", ".") in checked
    # The other side: a plain `pulumi up` in workloads/ is caught.
    assert _shell_commands("```bash\ncd workloads\npulumi up\n```") == [("workloads", "pulumi up")]


def test_the_tear_down_removes_the_workload_stack_and_the_cluster_stack():
    tear_down = README.split("**10. Tear down**", 1)[1].split("## Documentation", 1)[0]
    commands = _shell_commands(tear_down)
    for cwd in ("workloads", "."):
        # pulumi/pulumi pkg/cmd/pulumi/stack/stack_remove.go (v3.259.0): without --preserve-config
        # `stack rm` deletes the committed Pulumi.<stack>.yaml.
        assert (cwd, "pulumi destroy") in commands and (cwd, "pulumi stack rm --preserve-config dev") in commands, cwd
    # The workloads go first, so no pod holds the file system the cluster stack deletes.
    assert commands.index(("workloads", "pulumi destroy")) < commands.index((".", "pulumi destroy"))
