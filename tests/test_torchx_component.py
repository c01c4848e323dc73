"""The TorchX component, loaded the way `torchx run` loads it, produces the stack's pods.

TorchX's own CLI (the `torchx` console script, dry run) loads ``workloads/torchx_trn1.py``
and renders the Volcano Job its Kubernetes scheduler would submit (no cluster needed); its
pods must run what the BERT workload's pods run, apart from what only TorchX adds (labels, its
job id variables, limits) and what only we add (tolerations, group labels, the posture), in a
run directory and compile cache of their own unless told otherwise. The command docs/workloads.md
documents is the one these tests run.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.facts import versions
from offline.plan.runner import REPO_ROOT, PlanResult
from tests.test_resilience import SCRIPT_PATH
from workloads import bert_launch, deadlines, quantities, resilience, resumable
from workloads.settings import BertPretrainingSettings
from workloads.torchx_trn1 import DEFAULT_DEADLINE_MINUTES, trn1_dist_ddp

RDZV_ID = re.compile(r"--rdzv_id \S+")
# The job that holds the run directory's lock: <namespace>/<job> for the stack, TorchX's app id.
LOCK_OWNER = re.compile(r"( lock bert \d+ \S+) \S+ ")
TORCHX = Path(sys.executable).parent / "torchx"
COMPONENT = "workloads/torchx_trn1.py:trn1_dist_ddp"
DOCS = REPO_ROOT / "docs" / "workloads.md"


def documented_command() -> list[str]:
    """The `torchx run` command docs/workloads.md gives, as the shell splits it (its comment says to
    run it again without the last two arguments)."""
    blocks = re.findall(r"```bash\n(.*?)```", DOCS.read_text(), re.S)
    (block,) = [b for b in blocks if "torchx run" in b]
    return shlex.split(block.replace("\\\n", " "), comments=True)


def documented_runs(image: str) -> list[list[str]]:
    """The documented precompile run and training run, without `torchx run` and with ``image`` (the
    stack's repository and the documented tag) for the `$(pulumi stack output ...)` lookup."""
    command = documented_command()
    assert command[:2] == ["torchx", "run"] and command[-4:] == ["--precompile", "True", "--steps_this_run", "10"]
    at = command.index("--image")
    command[at + 1] = f"{image.rsplit(':', 1)[0]}:{command[at + 1].rsplit(':', 1)[1]}"
    return [command[2:], command[2:-4]]


# What docs/workloads.md tells users to run, minus the component's own arguments.
RUN = ["run", "--dryrun", *documented_command()[2:8]]


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
    """The command with the rendezvous id and the lock's owner left out: the intended differences.
    The stack's pods name each attempt from their Volcano annotations (bert.RDZV_ID); TorchX's pods
    cannot read those (TorchX writes only literal env values) and use its app id, the same for every
    retry, which the c10d store allows (bert_launch.torchrun); and the job named as the lock's owner
    is TorchX's app id."""
    assert command[0] == "timeout", command
    return [LOCK_OWNER.sub(r"\1 <job> ", RDZV_ID.sub("--rdzv_id <run>", c)) for c in command]


def cpu_and_memory(requests: dict[str, str]) -> dict[str, Any]:
    """CPU and memory (in whole MB, how TorchX's role_to_pod counts it) of a container's requests."""
    return {"cpu": quantities.parse(requests["cpu"]), "MB": math.ceil(quantities.parse(requests["memory"]) / 10**6)}


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
        "command": unwrapped(container["command"]),
        # Values only: each side fills its run-id variables its own way (TORCHX_*, downward API); rank 0's
        # host is TorchX's variable on both.
        "env": {
            e["name"]: e["value"]
            for e in container["env"]
            if "value" in e and (not e["name"].startswith("TORCHX_") or e["name"] == bert_launch.RANK0_LOCAL_ENV)
        },
        "ports": container.get("ports"),
        # TorchX also limits CPU and memory (test_torchx_pods_have_the_stacks_deadline_and_requests).
        "devices": {k: str(v) for k, v in container["resources"]["limits"].items() if k not in ("cpu", "memory")},
        "requests": cpu_and_memory(container["resources"]["requests"]),
        "mounts": mounts,
        "instance_type": spec["nodeSelector"]["node.kubernetes.io/instance-type"],
        "restart": spec["restartPolicy"],
        "service_account": spec["serviceAccountName"],
    }


# A directory outside the repository, for the runs that name the component by its absolute path.
ELSEWHERE = Path(tempfile.gettempdir())


@functools.cache
def _torchx_pods(
    image: str, precompile: bool, instance_type: str, steps: int, elsewhere: bool, more: tuple[str, ...]
) -> str:
    result = torchx_cli(
        "--image", image, "--nnodes", "2", "--nproc_per_node", "32", "--instance_type", instance_type,
        "--precompile", str(precompile), "--steps_this_run", str(steps),
        *more, **({"cwd": ELSEWHERE, "component": str(REPO_ROOT / COMPONENT)} if elsewhere else {}),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def scheduler_request(output: str) -> dict[str, Any]:
    job = yaml.safe_load(output.split("=== SCHEDULER REQUEST ===")[1])
    assert job["spec"]["schedulerName"] == "volcano" and job["spec"]["queue"] == "test"
    return job


def torchx_pods(
    image: str, precompile: bool, instance_type: str, steps: int, elsewhere: bool = False, more: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The pods `torchx run --dryrun` asks Volcano for (each distinct run once per process), run
    from the repository as docs/workloads.md says, or ``elsewhere``, with ``more`` arguments."""
    job = scheduler_request(_torchx_pods(image, precompile, instance_type, steps, elsewhere, more))
    return [task["template"] for task in job["spec"]["tasks"]]


def as_the_stack(result: PlanResult, name: str) -> tuple[str, ...]:
    """The component's arguments that point a run at the stack job's run directory, compile cache and
    deadline (what a user passing them would get: the lock then keeps the two jobs apart)."""
    command = stack_job(result, name)["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"]
    deadline = int(command[2])
    more = ("--output_dir", "/data/output", "--cacheset", "bert-large", "--deadline_minutes", str(deadline // 60))
    # The stack's training interval, unset in dev's file, is the goodput model's Young/Daly optimum in shards.
    shards = re.search(r"--shards_per_ckpt (\d+)", command[-1])
    return more + (("--checkpoint_every_shards", shards.group(1)) if shards and name == "bert-train" else ())


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
    more = as_the_stack(workloads_dev, name)
    theirs = torchx_pods(stack_image(workloads_dev, name), precompile, "trn1.32xlarge", steps, elsewhere, more)
    assert [essentials(p) for p in theirs] == [essentials(p) for p in ours]


def test_the_cli_finds_the_shared_launch_code_from_any_directory(workloads_dev: PlanResult) -> None:
    # The repository's package is installed into the virtualenv (pyproject.toml), so the
    # exec()ed component imports workloads/ and infra/ whatever the working directory: the
    # precompile run above names it by its absolute path from outside the repository.
    assert not ELSEWHERE.resolve().is_relative_to(REPO_ROOT)
    assert torchx_pods(
        stack_image(workloads_dev, "bert-precompile"),
        True,
        "trn1.32xlarge",
        10,
        True,
        as_the_stack(workloads_dev, "bert-precompile"),
    )


def test_the_component_refuses_instance_types_without_efa() -> None:
    with pytest.raises(
        ValueError,
        match="instance_type 'inf2.xlarge': allowed: trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge",
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


@pytest.mark.parametrize("precompile", [True, False])
def test_every_torchx_replica_meets_rank_0s_rendezvous_store(workloads_dev: PlanResult, precompile: bool) -> None:
    """TorchX 0.7.0 (torchx/schedulers/kubernetes_scheduler.py app_to_resource l.362-377) puts its
    rank0_env macro in place per replica: TORCHX_RANK0_HOST (set to localhost) in replica 0,
    VC_WORKER_0_HOSTS, which Volcano's svc plugin sets to `<job>-worker-0-0.<job>`, in the others;
    its app id is the rendezvous id of every replica. The kubelet then expands the endpoint
    (test_pod_commands.replay_bert runs it)."""
    pods = torchx_pods(stack_image(workloads_dev, "bert-train"), precompile, "trn1.32xlarge", 200)
    ids = set()
    for replica, pod in enumerate(pods):
        container = pod["spec"]["containers"][0]
        text = " ".join(container["command"])
        host = "TORCHX_RANK0_HOST" if replica == 0 else "VC_WORKER_0_HOSTS"
        assert f"--rdzv_backend c10d --rdzv_endpoint '$({host}):29500' --rdzv_conf read_timeout=600" in text
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env.get("TORCHX_RANK0_HOST") == ("localhost" if replica == 0 else None)
        assert container["ports"] == [{"name": "c10d", "containerPort": 29500}]
        ids.update(re.findall(r"--rdzv_id '?([a-z0-9-]+)", text))
    (app_id,) = ids
    assert re.fullmatch(r"bert-[a-z0-9]+", app_id)


def test_the_documented_image_tag_is_the_one_make_images_pushes() -> None:
    image = documented_command()[documented_command().index("--image") + 1]
    assert image.rsplit(":", 1)[1] == versions.TRAINING_IMAGE_TAG


def run_dir_and_caches(pod: dict[str, Any]) -> tuple[str, set[str]]:
    container = pod["spec"]["containers"][0]
    run_dir = re.search(r"--output_dir (\S+)", container["command"][-1])
    assert run_dir, container["command"]
    flags = {e["name"]: e.get("value", "") for e in container["env"]}["NEURON_CC_FLAGS"]
    return run_dir.group(1), {flags}


def test_the_documented_runs_get_their_own_run_directory_and_compile_cache(workloads_dev: PlanResult) -> None:
    """With the documented defaults, `torchx run` once hashed to the dev stack's bert-train run
    directory (run-8cabc7b1f14a) and used its compile caches (bert-large_<i>)."""
    stack = [task["template"] for task in stack_job(workloads_dev, "bert-train")["spec"]["tasks"]]
    stack_dirs = {run_dir_and_caches(p)[0] for p in stack}
    stack_caches = set().union(*(run_dir_and_caches(p)[1] for p in stack))
    runs = []
    for arguments in documented_runs(stack_image(workloads_dev, "bert-train")):
        result = subprocess.run(
            [str(TORCHX), "run", "--dryrun", *arguments],
            cwd=REPO_ROOT,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
        runs.append([task["template"] for task in scheduler_request(result.stdout)["spec"]["tasks"]])
    precompile, training = runs
    dirs = {run_dir_and_caches(p)[0] for p in training}
    caches = [run_dir_and_caches(p)[1] for p in training]
    assert dirs == {"/data/output/torchx-bert/run-" + next(iter(stack_dirs)).rsplit("run-", 1)[1]}
    assert not dirs & stack_dirs and not set().union(*caches) & stack_caches
    assert caches == [
        {"--cache_dir=/data/neuron_cache/torchx-bert_0"},
        {"--cache_dir=/data/neuron_cache/torchx-bert_1"},
    ]
    # The documented precompile fills the cache the documented training reads.
    assert [run_dir_and_caches(p)[1] for p in precompile] == caches


def test_torchx_pods_have_the_stacks_deadline_and_requests_and_lack_what_torchx_cannot_express(
    workloads_dev: PlanResult,
) -> None:
    """torchx 0.7.0 torchx/schedulers/kubernetes_scheduler.py: app_to_resource gives the Job only a
    name and each task RETRY_POLICIES[APPLICATION] (PodEvicted/PodFailed -> RestartJob);
    role_to_pod sets limits at the role's cpu/memMB and requests 100m and 1024 MB below, and no
    probe (Role has no field for one). docs/workloads.md lists these differences."""
    job = scheduler_request(
        _torchx_pods(stack_image(workloads_dev, "bert-train"), False, "trn1.32xlarge", -1, False, ())
    )
    precompile = torchx_pods(stack_image(workloads_dev, "bert-train"), True, "trn1.32xlarge", 10)
    assert set(job["metadata"]) == {"name"}  # no pending-bound annotation
    settings = BertPretrainingSettings.model_fields
    for task in job["spec"]["tasks"]:
        assert task["policies"] == [
            {"event": "PodEvicted", "action": "RestartJob"},
            {"event": "PodFailed", "action": "RestartJob"},
        ]
        container = task["template"]["spec"]["containers"][0]
        assert "livenessProbe" not in container
        minutes = settings["train_deadline_minutes"].default
        assert container["command"][:3] == [
            "timeout",
            f"--kill-after={bert_launch.KILL_AFTER_SECONDS}",
            str(minutes * 60),
        ]
        resources = container["resources"]
        stack = stack_job(workloads_dev, "bert-train")["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
        assert cpu_and_memory(resources["requests"]) == cpu_and_memory(stack["resources"]["requests"])
        assert quantities.parse(resources["requests"]["memory"]) >= quantities.parse(
            stack["resources"]["requests"]["memory"]
        )
        assert (resources["limits"]["cpu"], resources["limits"]["memory"]) == ("100100m", "430521M")
    minutes = settings["precompile_deadline_minutes"].default
    assert precompile[0]["spec"]["containers"][0]["command"][2] == str(minutes * 60)


def test_the_components_defaults_are_the_stacks() -> None:
    settings = BertPretrainingSettings.model_fields
    assert DEFAULT_DEADLINE_MINUTES == {
        "precompile": settings["precompile_deadline_minutes"].default,
        "train": settings["train_deadline_minutes"].default,
    }
    assert bert_launch.KILL_AFTER_SECONDS == deadlines.BERT_KILL_AFTER_MINUTES * 60


def test_the_component_refuses_a_name_that_cannot_name_a_directory() -> None:
    with pytest.raises(ValueError, match=r"name 'my run/1': allowed: lower-case letters, digits and '-'"):
        trn1_dist_ddp(image="x", name="my run/1")


def test_a_torchx_run_pointed_at_the_stacks_run_directory_is_refused_while_bert_train_trains(
    workloads_dev: PlanResult, tmp_path: Path
) -> None:
    """The stack's worker-0 pod command (as the kubelet expands it, /data/ in a temp root, a stand-in
    torchrun that trains until released) and a `torchx run` pod given the stack's output directory:
    the TorchX pod stops before its prune and training, naming the run directory and the holder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(
        '#!/bin/sh\necho "$*" >> "$STARTED"\ni=0; while [ ! -e "$RELEASE" ] && [ $i -lt 600 ]; do sleep 0.1; '
        "i=$((i + 1)); done\n"
    )
    torchrun.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{SCRIPT_PATH}",
        "STARTED": str(tmp_path / "started"),
        "RELEASE": str(tmp_path / "release"),
        **resumable.env(),
    }
    stack_pod = stack_job(workloads_dev, "bert-train")["spec"]["tasks"][0]["template"]
    expand = {"VOLCANO_PODGROUP": "bert-train-5f0c", "VOLCANO_JOB_VERSION": "0", "TORCHX_RANK0_HOST": "localhost"}
    stack_command = [
        re.sub(r"\$\((\w+)\)", lambda m: expand[m.group(1)], c).replace("/data/", f"{tmp_path}/data/")
        for c in stack_pod["spec"]["containers"][0]["command"]
    ]
    stack = subprocess.Popen(stack_command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            if (tmp_path / "started").exists():
                break
            time.sleep(0.05)
        more = as_the_stack(workloads_dev, "bert-train")
        pod = torchx_pods(stack_image(workloads_dev, "bert-train"), False, "trn1.32xlarge", 200, False, more)[0]
        command = [c.replace("/data/", f"{tmp_path}/data/") for c in pod["spec"]["containers"][0]["command"]]
        hand_run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    finally:
        (tmp_path / "release").write_text("")
    assert stack.wait(timeout=60) == 0
    run_dir = next((tmp_path / "data" / "output").glob("run-*"))
    assert hand_run.returncode == 1, hand_run.stderr
    assert f"run directory {run_dir} is in use by job default/bert-train (pod " in hand_run.stderr
    assert len((tmp_path / "started").read_text().splitlines()) == 1  # only the stack's torchrun ran
    assert resilience.holder(str(run_dir))["owner"] == "default/bert-train"
