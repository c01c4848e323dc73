"""The TorchX component, loaded the way `torchx run` loads it, produces the stack's pods.

TorchX's own CLI (the `torchx` console script, dry run) loads ``workloads/torchx_trn1.py``
and renders the Volcano Job its Kubernetes scheduler would submit (no cluster needed); its
pods must match the ones the BERT workload declares, apart from what only TorchX adds
(labels, its job id variables) and what only we add (tolerations, group labels).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline.plan.runner import REPO_ROOT, PlanResult
from workloads import bert_launch, resumable
from workloads.torchx_trn1 import trn1_dist_ddp

RDZV_ID = re.compile(r"--rdzv_id \S+")
TORCHX = Path(sys.executable).parent / "torchx"
COMPONENT = "workloads/torchx_trn1.py:trn1_dist_ddp"
# What docs/workloads.md tells users to run, minus the component's own arguments.
RUN = [
    "run",
    "-s",
    "kubernetes",
    "--dryrun",
    "--workspace",
    "",
    "-cfg",
    "queue=test,namespace=default,service_account=training",
]


def torchx_cli(
    *component_args: str, cwd: Path = REPO_ROOT, component: str = COMPONENT
) -> subprocess.CompletedProcess[str]:
    """`torchx run --dryrun` through the console script, with nothing added to sys.path.

    torchx v0.7.0 (pytorch/torchx, tag v0.7.0): torchx/specs/finder.py
    CustomComponentsFinder.find reads the component file and exec()s it in finder's own
    globals (so the file's __file__ is not its own); the console script's sys.path holds its
    bin directory, not the working directory; torchx/specs/builders.py materialize_appdef
    decodes each argument with torchx/util/types.py decode(), which raises ValueError("Unknown")
    for a string annotation (what `from __future__ import annotations` makes of every type);
    torchx/runner/api.py Runner.dryrun docker-builds the workspace (default file://$PWD,
    torchx/cli/cmd_run.py) even in a dry run, unless --workspace is empty.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(TORCHX), *RUN, component, *component_args], cwd=cwd, env=env, capture_output=True, text=True
    )


def unwrapped(command: list[str]) -> list[str]:
    """The command TorchX's pods run once bash has put the picked rendezvous id in. The one
    intended difference: TorchX's pods cannot read Volcano's job version (see
    bert_launch.PICK_RDZV_ID), so they pick the id at run time, under a bash wrapper."""
    wrapper = ["bash", "-c", bert_launch.WITH_FRESH_RDZV_ID, "fresh-rdzv-id", bert_launch.PICK_RDZV_ID]
    if command[:1] == ["timeout"]:
        # The second: the stack's Volcano Jobs run each attempt under its deadline (workloads/bert.py
        # with_deadline, which the Job's exit-code policy acts on); `torchx run` jobs carry no policy.
        return command[3:]
    if command[: len(wrapper)] != wrapper:
        return command
    base_id, endpoint, *rest = command[len(wrapper) :]
    assert re.fullmatch(r"bert-[a-z0-9]+", base_id) and endpoint == "etcd-server.default:2379"
    return [c.replace(bert_launch.RDZV_ID_PLACEHOLDER, base_id) for c in rest]


def essentials(pod: dict[str, Any]) -> dict[str, Any]:
    """What decides how a pod trains: command, environment, devices, mounts and node."""
    spec = pod["spec"]
    container = spec["containers"][0]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v
    }
    memory = {v["name"] for v in spec["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"}
    mounts = {}
    for m in container["volumeMounts"]:
        mounts[m["mountPath"]] = claims.get(m["name"]) or ("memory" if m["name"] in memory else m["name"])
    return {
        "image": container["image"],
        "command": [RDZV_ID.sub("--rdzv_id <run>", c) for c in unwrapped(container["command"])],
        # Values only: each side fills its run-id variables its own way (TORCHX_*, downward API).
        "env": {
            e["name"]: e["value"] for e in container["env"] if "value" in e and not e["name"].startswith("TORCHX_")
        },
        "devices": {k: str(v) for k, v in container["resources"]["limits"].items()},
        "mounts": mounts,
        "instance_type": spec["nodeSelector"]["node.kubernetes.io/instance-type"],
        "restart": spec["restartPolicy"],
        "service_account": spec["serviceAccountName"],
    }


# A directory outside the repository, for the runs that name the component by its absolute path.
ELSEWHERE = Path(tempfile.gettempdir())


@functools.cache
def _torchx_pods(image: str, precompile: bool, instance_type: str, steps: int, elsewhere: bool) -> str:
    result = torchx_cli(
        "--image", image, "--nnodes", "2", "--nproc_per_node", "32", "--instance_type", instance_type,
        "--precompile", str(precompile), "--steps_this_run", str(steps), "--etcd_endpoint", "etcd-server.default:2379",
        **({"cwd": ELSEWHERE, "component": str(REPO_ROOT / COMPONENT)} if elsewhere else {}),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def torchx_pods(
    image: str, precompile: bool, instance_type: str, steps: int, elsewhere: bool = False
) -> list[dict[str, Any]]:
    """The pods `torchx run --dryrun` asks Volcano for (each distinct run once per process), run
    from the repository as docs/workloads.md says, or ``elsewhere``."""
    job = yaml.safe_load(
        _torchx_pods(image, precompile, instance_type, steps, elsewhere).split("=== SCHEDULER REQUEST ===")[1]
    )
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["queue"] == "test"
    return [task["template"] for task in job["spec"]["tasks"]]


def stack_job(result: PlanResult, name: str) -> dict[str, Any]:
    return next(r.inputs for r in result.registrations if r.inputs.get("metadata", {}).get("name") == name)


def stack_image(result: PlanResult, name: str) -> str:
    return stack_job(result, name)["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"]


# The precompile run goes from another directory (test_the_cli_finds_the_shared_launch_code_...).
@pytest.mark.parametrize(
    ("name", "precompile", "steps", "elsewhere"),
    [("bert-precompile", True, 10, True), ("bert-train", False, 200, False)],
)
def test_torchx_component_renders_the_pods_the_stack_declares(
    workloads_dev: PlanResult, name: str, precompile: bool, steps: int, elsewhere: bool
) -> None:
    ours = [task["template"] for task in stack_job(workloads_dev, name)["spec"]["tasks"]]
    theirs = torchx_pods(stack_image(workloads_dev, name), precompile, "trn1.32xlarge", steps, elsewhere)
    assert [essentials(p) for p in theirs] == [essentials(p) for p in ours]


def test_the_cli_finds_the_shared_launch_code_from_any_directory(workloads_dev: PlanResult) -> None:
    # The repository's package is installed into the virtualenv (pyproject.toml), so the
    # exec()ed component imports workloads/ and infra/ whatever the working directory: the
    # precompile run above names it by its absolute path from outside the repository.
    assert not ELSEWHERE.resolve().is_relative_to(REPO_ROOT)
    assert torchx_pods(stack_image(workloads_dev, "bert-precompile"), True, "trn1.32xlarge", 10, elsewhere=True)


def test_the_component_refuses_instance_types_without_efa() -> None:
    with pytest.raises(
        ValueError, match="instance_type 'inf2.xlarge': allowed: trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"
    ):
        trn1_dist_ddp(image="x", instance_type="inf2.xlarge")


def test_trn1n_gets_sixteen_efa_interfaces() -> None:
    # The component's request; how the CLI turns role devices into pod limits is what the two
    # rendering tests above check against the stack's own pods.
    (role,) = trn1_dist_ddp(image="repo/bert:tag", instance_type="trn1n.32xlarge", steps_this_run=-1).roles
    assert role.resource.devices == {"aws.amazon.com/neuron": 16, "vpc.amazonaws.com/efa": 16}
    assert role.resource.capabilities == {"node.kubernetes.io/instance-type": "trn1n.32xlarge"}


def test_loading_the_component_leaves_torchx_own_names_alone(capsys: pytest.CaptureFixture[str]) -> None:
    # CustomComponentsFinder.find exec()s the file in torchx.specs.finder's globals (torchx
    # v0.7.0): a module-level name of ours that is also one of finder's would replace it.
    from torchx.cli.main import main
    from torchx.specs import finder

    before = {k: v for k, v in vars(finder).items() if not k.startswith("__")}
    main([*RUN, COMPONENT, "--image", "repo/bert:tag"])
    assert "=== SCHEDULER REQUEST ===" in capsys.readouterr().out
    assert {k for k, v in before.items() if vars(finder)[k] is not v} == set()


def test_the_component_needs_only_torchx_and_the_standard_library() -> None:
    # The seed installs `torchx[kubernetes]` alone on the workstation; the shared launch code the
    # component imports must not pull in the stacks' own dependencies.
    code = (
        f"exec(open({COMPONENT.split(':')[0]!r}).read(), {{}}); import sys; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pulumi', 'pulumi_kubernetes', 'pydantic', 'yaml'}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr


class FakeEtcd(http.server.BaseHTTPRequestHandler):
    """etcd's v2 keys API for the rendezvous states in ``states`` (run id -> status)."""

    states: dict[str, str] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        match = re.fullmatch(r"/v2/keys/torchelastic/p2p/run_(.+)/rdzv/active_version", self.path)
        status = self.states.get(match.group(1)) if match else None
        body = {"errorCode": 100, "message": "Key not found"} if status is None else {
            "action": "get", "node": {"key": self.path[len("/v2/keys"):], "value": json.dumps({"status": status})},
        }  # fmt: skip
        payload = json.dumps(body).encode()
        self.send_response(404 if status is None else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("states", "picked"),
    [
        ({}, "bert-x-0"),  # first attempt
        ({"bert-x-0": "closed"}, "bert-x-1"),  # a retry after the first run ended
        ({"bert-x-0": "closed", "bert-x-1": "closed"}, "bert-x-2"),
        ({"bert-x-0": "closed", "bert-x-1": "final"}, "bert-x-1"),  # agents killed by a signal
    ],
)
def test_every_volcano_retry_of_a_torchx_job_gets_an_open_rendezvous(tmp_path: Path, states: dict, picked: str) -> None:
    """torch elastic's etcd rendezvous (pytorch/pytorch torch/distributed/elastic/rendezvous/
    etcd_rendezvous.py: get_path, set_closed, init_phase) keeps a run's state at
    /torchelastic/p2p/run_<id>/rdzv/active_version; EtcdRendezvousHandler.shutdown marks it
    {"status": "closed"} when the run ends, and an agent joining a closed run raises
    RendezvousClosedError at once. TorchX 0.7.0 (torchx/schedulers/kubernetes_scheduler.py
    app_to_resource) gives every retry of a Volcano Job the same app id and only literal env
    values; Volcano v1.15.1 (pkg/controllers/job/job_controller_util.go createJobPod) keeps the
    job version in annotations. So the TorchX pods pick `<app id>-<n>`, the first run not closed,
    from etcd's v2 keys API before torchrun starts; a run left open by killed agents is reused
    (torch elastic replaces the dead members)."""
    FakeEtcd.states = states
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeEtcd)
    # shutdown() waits for serve_forever's next poll: 20 ms instead of its default half second.
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    fake_torchrun = tmp_path / "torchrun"
    fake_torchrun.write_text('#!/bin/sh\necho "$@"\n')
    fake_torchrun.chmod(0o755)
    run = bert_launch.BertRun(
        nnodes=2,
        nproc_per_node=32,
        etcd_endpoint=f"127.0.0.1:{server.server_port}",
        output_dir=str(tmp_path / "output"),
    )
    path = f"{tmp_path}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    try:
        result = subprocess.run(
            bert_launch.command_with_fresh_rdzv_id(run, "bert-x"), env={"PATH": path, **resumable.env()},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert f"--rdzv_id {picked} --nnodes 2" in result.stdout


def test_the_torchx_component_picks_its_rendezvous_id_at_run_time(workloads_dev: PlanResult) -> None:
    # The training run's pods, as the rendering test above has TorchX render them.
    for pod in torchx_pods(stack_image(workloads_dev, "bert-train"), False, "trn1.32xlarge", 200):
        command = pod["spec"]["containers"][0]["command"]
        assert command[:5] == ["bash", "-c", bert_launch.WITH_FRESH_RDZV_ID, "fresh-rdzv-id", bert_launch.PICK_RDZV_ID]
        # TorchX substituted its app id for the macro, and left bash's own `$` expressions alone.
        assert re.fullmatch(r"bert-[a-z0-9]+", command[5]) and "--rdzv_id @RDZV_ID@" in command[-1]
