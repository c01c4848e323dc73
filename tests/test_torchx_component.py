"""The TorchX component, loaded the way `torchx run` loads it, produces the stack's pods.

TorchX's own CLI (the `torchx` console script, dry run) loads ``workloads/torchx_trn1.py``
and renders the Volcano Job its Kubernetes scheduler would submit (no cluster needed); its
pods must match the ones the BERT workload declares, apart from what only TorchX adds
(labels, its job id variables) and what only we add (tolerations, group labels).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline.runner import REPO_ROOT, PlanResult
from workloads.torchx_trn1 import trn1_dist_ddp

RDZV_ID = re.compile(r"--rdzv_id \S+")
TORCHX = Path(sys.executable).parent / "torchx"
COMPONENT = "workloads/torchx_trn1.py:trn1_dist_ddp"
# What the README tells users to run, minus the component's own arguments.
RUN = ["run", "-s", "kubernetes", "--dryrun", "--workspace", "", "-cfg", "queue=test,namespace=default,service_account=training"]


def torchx_cli(*component_args: str, cwd: Path = REPO_ROOT, component: str = COMPONENT) -> subprocess.CompletedProcess[str]:
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
    return subprocess.run([str(TORCHX), *RUN, component, *component_args], cwd=cwd, env=env, capture_output=True, text=True)


def essentials(pod: dict[str, Any]) -> dict[str, Any]:
    """What decides how a pod trains: command, environment, devices, mounts and node."""
    spec = pod["spec"]
    container = spec["containers"][0]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    memory = {v["name"] for v in spec["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"}
    mounts = {}
    for m in container["volumeMounts"]:
        mounts[m["mountPath"]] = claims.get(m["name"]) or ("memory" if m["name"] in memory else m["name"])
    return {
        "image": container["image"],
        "command": [RDZV_ID.sub("--rdzv_id <run>", c) for c in container["command"]],
        # Values only: each side fills its run-id variables its own way (TORCHX_*, downward API).
        "env": {e["name"]: e["value"] for e in container["env"] if "value" in e and not e["name"].startswith("TORCHX_")},
        "devices": {k: str(v) for k, v in container["resources"]["limits"].items()},
        "mounts": mounts,
        "instance_type": spec["nodeSelector"]["node.kubernetes.io/instance-type"],
        "restart": spec["restartPolicy"],
        "service_account": spec["serviceAccountName"],
    }


def torchx_pods(image: str, precompile: bool, instance_type: str, steps: int) -> list[dict[str, Any]]:
    result = torchx_cli(
        "--image", image, "--nnodes", "2", "--nproc_per_node", "32", "--instance_type", instance_type,
        "--precompile", str(precompile), "--steps_this_run", str(steps), "--etcd_endpoint", "etcd-server.default:2379",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    job = yaml.safe_load(result.stdout.split("=== SCHEDULER REQUEST ===")[1])
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["queue"] == "test"
    return [task["template"] for task in job["spec"]["tasks"]]


@pytest.mark.parametrize(("name", "precompile", "steps"), [("bert-precompile", True, 10), ("bert-train", False, -1)])
def test_torchx_component_renders_the_pods_the_stack_declares(
    workloads_dev: PlanResult, name: str, precompile: bool, steps: int
) -> None:
    job = next(r.inputs for r in workloads_dev.registrations if r.inputs.get("metadata", {}).get("name") == name)
    ours = [task["template"] for task in job["spec"]["tasks"]]
    image = ours[0]["spec"]["containers"][0]["image"]
    theirs = torchx_pods(image, precompile, "trn1.32xlarge", steps)
    assert [essentials(p) for p in theirs] == [essentials(p) for p in ours]


def test_the_cli_loads_the_component_from_the_repository_root_only(tmp_path: Path) -> None:
    # Elsewhere the component cannot find the shared launch code, and says where to run it.
    result = torchx_cli("--image", "x", cwd=tmp_path, component=str(REPO_ROOT / COMPONENT))
    assert result.returncode != 0 and "run `torchx run` from the repository root" in result.stderr


def test_the_component_refuses_instance_types_without_efa() -> None:
    with pytest.raises(ValueError, match="instance_type 'inf2.xlarge': allowed: trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"):
        trn1_dist_ddp(image="x", instance_type="inf2.xlarge")


def test_trn1n_gets_sixteen_efa_interfaces() -> None:
    (pod, _) = torchx_pods("repo/bert:tag", False, "trn1n.32xlarge", -1)
    assert essentials(pod)["devices"] == {"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "16"}


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
