"""The offline plan: what `pulumi up` would create, without an AWS account or the Pulumi CLI.

    python -m offline.plan [--stack dev] [--project-dir .] [--out build/plan]

Evaluates the real programs under Pulumi's mock runtime: the cluster stack, then the
workload stack of the same name (``workloads/``), whose StackReference reads the cluster
plan's outputs, then the bootstrap stack of that name (``bootstrap/``) when it has one. For
each it prints a table of every resource and writes
``<out>/<project>/<stack>/resources.json`` and one YAML file per Kubernetes object under
``manifests/``. Exit code 2 (and nothing more written) on bad configuration.

Then the policy pack (``policy/``) runs over each plan with ``policy/config.<stack>.json``:
its report is printed and written to resources.json under ``policy``; any mandatory violation
makes the exit code 3, after everything is written.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

from infra.config.errors import ConfigError
from offline.plan import policy_run as policy_pack
from offline.plan.runner import REPO_ROOT, PlanResult, encrypted_keys, project_name, run_program, stack_config
from offline.report import core_fit, plan_output, render, report, support

WORKLOADS_DIR = "workloads"
BOOTSTRAP_DIR = "bootstrap"
# Secret config a stack file holds only encrypted; the offline plan uses stand-ins.
OFFLINE_SECRETS = {"trainium-workloads:hfToken": "hf_offline_stand_in"}
SECRET_STAND_IN = "offline-secret-stand-in"


def offline_secrets(project_dir: Path, stack: str, config: dict[str, str]) -> dict[str, str]:
    """Stand-ins for the secrets a stack file holds encrypted (or leaves to `pulumi config set
    --secret`): what the stacks render does not depend on their values."""
    keys = set(OFFLINE_SECRETS) | set(encrypted_keys(project_dir, stack))
    return {key: OFFLINE_SECRETS.get(key, SECRET_STAND_IN) for key in sorted(keys) if key not in config}


def kept_files(out: Path, stack: str) -> str:
    """What a refused plan leaves under ``out``: the last successful plan's files, untouched (every
    stack is planned before anything is written, so they are never half new and half stale)."""
    if not any(out.glob(f"*/{stack}/resources.json")):
        return f"Nothing was written to {_shown(out)}."
    return (
        f"{_shown(out)} was left as it was: its {stack} files are from the last {stack} plan that succeeded, not "
        "from this configuration."
    )


def _shown(path: Path) -> str:
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


CLUSTER_STACK_KEY = "trainium-workloads:clusterStack"


def cluster_reference_problem(reference: str | None, cluster_dir: Path) -> str | None:
    """What is wrong with the workload stack's reference to its cluster stack, naming the key: it must
    be ``<organization>/<the cluster project>/<a stack with a stack file there>``."""
    project = project_name(cluster_dir)
    stacks = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in cluster_dir.glob("Pulumi.*.yaml"))
    allowed = f"<organization>/{project}/<stack>, with a stack of {', '.join(stacks) or 'none'}"
    if not reference:
        return f"{CLUSTER_STACK_KEY}: required but not set; allowed: {allowed}"
    parts = reference.split("/")
    if len(parts) != 3 or not all(parts):
        return f"{CLUSTER_STACK_KEY} = {reference!r}: not <organization>/<project>/<stack>; allowed: {allowed}"
    if parts[1] != project:
        return (
            f"{CLUSTER_STACK_KEY} = {reference!r}: names the project {parts[1]!r}, not the cluster project "
            f"{project!r} the workloads read their cluster from; allowed: {allowed}"
        )
    if parts[2] not in stacks:
        return (
            f"{CLUSTER_STACK_KEY} = {reference!r}: the cluster project has no stack {parts[2]!r} (no stack file "
            f"Pulumi.{parts[2]}.yaml); allowed: {allowed}"
        )
    return None


def plan_workloads(workloads_dir: Path, stack: str, cluster: PlanResult) -> PlanResult:
    """The workload stack, its StackReference answered by the cluster plan of the stack it names."""
    config = stack_config(workloads_dir, stack)
    reference = config.get(CLUSTER_STACK_KEY, "")
    # The cluster project beside the workload project, else this repository's (a workload project copied alone).
    cluster_dir = workloads_dir.parent if (workloads_dir.parent / "Pulumi.yaml").exists() else REPO_ROOT
    problem = cluster_reference_problem(reference, cluster_dir)
    if problem:
        # The workload program would refuse it too, but only after the cluster plan it names.
        raise ConfigError([problem], source=f"stack file {_shown(workloads_dir / f'Pulumi.{stack}.yaml')}")
    cluster_stack = reference.split("/")[2]
    if cluster_stack != cluster.stack:
        cluster = run_program(cluster_dir, cluster_stack)
    secrets = offline_secrets(workloads_dir, stack, config)
    return run_program(workloads_dir, stack, stack_references={reference: cluster.as_stack_outputs()}, secrets=secrets)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bin/plan", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stack", default="dev", help="the stack files to plan: Pulumi.<stack>.yaml in each project (default: dev)"
    )
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=REPO_ROOT,
        help="the cluster project's directory, with workloads/ and bootstrap/ in it (default: this repository)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT / "build" / "plan",
        help="where resources.json and manifests/ go, per project and stack (default: build/plan)",
    )
    parser.add_argument("--policy-config", type=Path, help="default: <project-dir>/policy/config.<stack>.json")
    parser.add_argument(
        "--wide",
        action="store_true",
        help="print the full table, one resource a line with its settings, and outputs whole",
    )
    parser.add_argument(
        "--base",
        metavar="REF",
        help="instead of a plan, what this checkout changes against that git revision (`make plan BASE=REF`); "
        "`bin/plan --base REF --help` lists the diff's options",
    )
    parser.add_argument("--stacks", help="with --base: the stacks to compare, comma-separated (default: dev,prod)")
    args, rest = parser.parse_known_args(argv)
    if args.stacks and not args.base:
        parser.error("--stacks compares stacks against a revision: give --base REF too (or --stack to plan one)")
    if args.base:
        from offline.diff.compare import main as diff_main

        return diff_main(sys.argv[1:] if argv is None else argv)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    width = render.terminal_width()
    render.TerminalLog.install(width)
    project_dir = args.project_dir.resolve()
    workloads_dir, bootstrap_dir = project_dir / WORKLOADS_DIR, project_dir / BOOTSTRAP_DIR
    has_workloads = (workloads_dir / f"Pulumi.{args.stack}.yaml").exists()
    has_bootstrap = (bootstrap_dir / f"Pulumi.{args.stack}.yaml").exists()
    policy_config_file = args.policy_config or project_dir / "policy" / f"config.{args.stack}.json"
    try:
        # A stack without a policy config file gets the pack's defaults, as a preview without
        # --policy-pack-config would.
        policy_config = (
            policy_pack.load_config(policy_config_file)
            if policy_config_file.exists()
            else policy_pack.parse_config({}, "policy defaults")
        )
        # Every stack is planned before anything is printed or written: a refused workload or
        # bootstrap stack file leaves build/plan as it was, not half new and half stale.
        cluster = run_program(project_dir, args.stack)
        region = cluster.outputs["region"]
        reports = [plan_output.check_policies(cluster, policy_config, region, stack_config(project_dir, args.stack))]
        rendered = [
            plan_output.render_plan(
                cluster, args.out, report.cluster_cost(cluster), region, reports[0], args.wide, width
            )
        ]
        if has_workloads:
            workloads = plan_workloads(workloads_dir, args.stack, cluster)
            reports.append(
                plan_output.check_policies(workloads, policy_config, region, stack_config(workloads_dir, args.stack))
            )
            rendered.append(
                plan_output.render_plan(
                    workloads,
                    args.out,
                    report.workloads_cost(workloads_dir, args.stack, cluster),
                    region,
                    reports[-1],
                    args.wide,
                    width,
                )
            )
        if has_bootstrap:
            # The guardrails are written for the cluster and workload stacks; the bootstrap has none.
            rendered.append(
                plan_output.render_plan(
                    run_program(bootstrap_dir, args.stack), args.out, None, region, None, args.wide, width
                )
            )
        stand_ins = (
            sorted(offline_secrets(workloads_dir, args.stack, stack_config(workloads_dir, args.stack)))
            if (has_workloads)
            else []
        )
        shown = [plan_output.emit(stack) for stack in rendered]
    except ConfigError as exc:
        print(render.message(f"{exc}\n\nNothing more was planned. {kept_files(args.out, args.stack)}"), file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        stacks = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in project_dir.glob("Pulumi.*.yaml"))
        print(
            render.message(f"error: {exc}; the stacks here: {', '.join(stacks) or 'none'} (make plan STACK=<stack>)"),
            file=sys.stderr,
        )
        return 2
    footer = (
        "Ids, ARNs, endpoints and Auto Scaling group names containing 'placeholder' stand in for values AWS "
        "assigns at deploy time; zone ids, instance facts and EKS add-on default builds come from "
        "offline/plan/fixtures.py and infra/facts/instances.py, not from AWS."
    )
    print((footer if args.wide else "\n".join(render.wrap(footer, width=width))) + "\n")
    rows, extended = support.deployed(project_dir, args.stack, has_workloads)
    fit = core_fit.deployed(project_dir, args.stack) if any(p.result.project == "trainium-eks" for p in shown) else []
    print(
        render.summary(
            shown, region, stand_ins, support_lines=support.section(rows, extended), core_fit=fit, width=width
        )
    )
    mandatory = [v for report in reports for v in report.mandatory]
    if mandatory:
        print(
            render.message(
                f"\n{len(mandatory)} mandatory policy violation(s) (listed above): `pulumi preview --policy-pack policy` "
                f"would refuse this. Fix them, or change a level in {policy_config_file.name} (docs/guardrails.md)."
            ),
            file=sys.stderr,
        )
        return policy_pack.MANDATORY_EXIT_CODE
    return 0


def exit_without_teardown(code: int) -> NoReturn:
    """End the process the moment the plan is out. A normal interpreter exit joins the runtime's
    idle worker threads and finalises the SDKs' large object graph, which writes nothing. Every
    file the plan writes is already closed (``write_text``); stdout, stderr and logging's handlers
    are the only open streams, so they are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
