"""Each rendered RayJob replayed through the command chain that runs its entrypoint, at the pinned
versions, with only the training scripts stubbed:

1. KubeRay v1.7.0 builds the submitter's command (ray-project/kuberay v1.7.0
   ray-operator/controllers/ray/common/job.go BuildJobSubmitCommand, l.90-212): ``if ! ray job status --address
   <addr> <id> >/dev/null 2>&1 ; then ray job submit --address <addr> --no-wait --runtime-env-json
   <strconv.Quote(YAMLToJSON(runtimeEnvYAML))> --submission-id <id> -- <entrypoint> ; fi ; ray job
   logs --address <addr> --follow <id>``; the entrypoint goes in raw (``cmd = append(cmd, "--",
   entrypoint, ";")``, l.205). The submitter container runs it as Command ``["/bin/bash", "-ce",
   "--"]``, Args ``[strings.Join(jobCmd, " ")]`` (rayjob_controller.go configureSubmitterContainer
   l.634-662: our submitterPodTemplate sets no command, so KubeRay's replaces it). KubeRay puts a
   wait-for-the-dashboard loop before it (l.132-152, a ``python -c`` health check against the head's
   address) that does not touch the entrypoint: left out here.
2. Ray 2.55.1's ``ray job submit`` re-joins the words after ``--`` with
   ``subprocess.list2cmdline`` (ray/dashboard/modules/job/cli.py l.313, ``entrypoint=
   list2cmdline(entrypoint)``).
3. Ray 2.55.1's job supervisor runs that string with ``subprocess.Popen(entrypoint, shell=True)``,
   i.e. ``/bin/sh -c`` (ray/dashboard/modules/job/job_supervisor.py l.181-187), with the runtime
   env's env_vars, ``PYTHONUNBUFFERED=1`` (l.278) and the uploaded working_dir as its directory.

Here: real ``/bin/bash -ce``, a stub ``ray`` that does 2 and 3 for real, the head's mounts (the
steps' ConfigMap at ray_llama2.STEPS_MOUNT, the shared volume at /shared) as directories of a temp
root, and a temp copy of the working_dir whose get_dataset.py and ray_train_llama2.py record
their argv. The only liberty: the absolute mount paths in the entrypoint and the ConfigMap's files
are rewritten to the temp root's (a path of letters, digits, ``/._-``: no shell sees a difference).
resilience.py runs for real from the ConfigMap.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.facts.instances import NEURON_INSTANCE_TYPES, node_label_value
from offline.plan.runner import PlanResult
from tests.conftest import HF_TOKEN_KEY, STAND_IN_TOKEN, WORKLOADS_DIR, _remembered_run
from tests.test_resilience import RAY_SHARD, ray_save, tear_like_a_lost_node
from workloads import ray_llama2, resumable
from workloads.settings import RayLlama2Settings

ADDRESS = "http://llama2-raycluster-head-svc.default.svc.cluster.local:8265"
PRINCIPAL = {"generate-data": "get_dataset.py", "precompile": "ray_train_llama2.py", "train": "ray_train_llama2.py"}
STEP_OF = {name: step for step, name in ray_llama2.JOB_NAMES.items()}
SAFE_PATH = re.compile(r"[A-Za-z0-9_/.-]+")
SYSTEM_PATH = f"{sysconfig.get_config_var('BINDIR')}:{os.environ['PATH']}"
LAUNCHER_PATH = Path(__file__).resolve().parent.parent / "docker" / "ray-llama2" / "ray_train_llama2.py"


def load_launcher() -> Any:
    """The image's ray_train_llama2.py as a module (it imports Ray only when it runs)."""
    spec = importlib.util.spec_from_file_location("ray_train_llama2", LAUNCHER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAUNCHER = load_launcher()

# A stand-in for `ray` (Ray 2.55.1): `job status` answers "not submitted", `job submit` joins its
# entrypoint words as cli.py does and runs them as the job supervisor does, `job logs` returns.
RAY_STUB = """\
import json, os, subprocess, sys
from subprocess import list2cmdline
args = sys.argv[1:]
if args[:2] == ["job", "status"]:
    sys.exit(1)
if args[:2] == ["job", "logs"]:
    sys.exit(0)
assert args[:2] == ["job", "submit"], args
cut = args.index("--")
options, words = args[2:cut], args[cut + 1:]
runtime_env = json.loads(options[options.index("--runtime-env-json") + 1])
entrypoint = list2cmdline(words)
env = {**os.environ, **runtime_env.get("env_vars", {}), "PYTHONUNBUFFERED": "1"}
rc = subprocess.Popen(entrypoint, shell=True, cwd=os.environ["REPLAY_WORKDIR"], env=env).wait()
with open(os.environ["REPLAY_SUBMITTED"], "a") as f:
    f.write(json.dumps({"entrypoint": entrypoint, "runtime_env": runtime_env, "rc": rc}) + "\\n")
"""

# get_dataset.py / ray_train_llama2.py: record argv and the variables the step sets for them;
# training prints the NxD script's LOG line (tp_zero1_llama_hf_pretrain/logger.py Logger.log,
# resilience.STEP_PATTERNS["ray"]) so the heartbeat filter sees a step.
SCRIPT_STUB = """\
import json, os, sys
with open(os.environ["REPLAY_CALLS"], "a") as f:
    f.write(json.dumps({"script": os.path.basename(sys.argv[0]), "argv": sys.argv[1:],
                        "HOME": os.environ.get("HOME"), "HF_HOME": os.environ.get("HF_HOME")}) + "\\n")
if "--output_dir" in sys.argv:
    print("LOG Fri Nov 27 08:00:00 2026 - (0, 5) step_loss : 2.5000 learning_rate : 3.00e-04", flush=True)
"""


def go_json(value: Any) -> str:
    """sigs.k8s.io/yaml YAMLToJSON: encoding/json's Marshal (sorted keys, compact, HTML-escaped)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for c in "<>&\u2028\u2029":
        text = text.replace(c, f"\\u{ord(c):04x}")
    return text


def go_quote(text: str) -> str:
    """Go's strconv.Quote: double quotes, backslash escapes, printable characters as they are."""
    named = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b"}
    named |= {"\f": "\\f", "\v": "\\v"}
    out = []
    for c in text:
        if c in named:
            out.append(named[c])
        elif c.isprintable():
            out.append(c)
        else:
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}")
    return '"' + "".join(out) + '"'


def submitter_args(entrypoint: str, runtime_env: dict[str, Any], job_id: str) -> list[str]:
    """The submitter container's command and args, as KubeRay v1.7.0 builds them (module docstring)."""
    status = ["ray", "job", "status", "--address", ADDRESS, job_id, ">/dev/null", "2>&1"]
    submit = ["ray", "job", "submit", "--address", ADDRESS, "--no-wait"]
    submit += ["--runtime-env-json", go_quote(go_json(runtime_env)), "--submission-id", job_id]
    follow = ["ray", "job", "logs", "--address", ADDRESS, "--follow", job_id]
    cmd = ["if", "!", *status, ";", "then", *submit, "--", entrypoint.strip(), ";", "fi", ";", *follow]
    return ["/bin/bash", "-ce", "--", " ".join(cmd)]


@dataclass
class Replay:
    rc: int
    stderr: str
    submitted: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    head: Head

    def principal(self, step: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["script"] == PRINCIPAL[step]]


class Head:
    """The head pod's view of the files: the ConfigMap at its mount, the shared volume, the working_dir."""

    def __init__(self, root: Path, files: dict[str, str], env: dict[str, str]) -> None:
        assert SAFE_PATH.fullmatch(str(root)), root
        self.root = root
        # The head container's own variables Ray's processes inherit from `ray start`: HOME (a
        # directory of the container, here one of this root's) and the user's name.
        self.env = env
        for name in ("llama2-steps", "shared", "llama2_pretrain", "bin"):
            (root / name).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (root / "llama2-steps" / name).write_text(self.local(text))
        (root / "llama2_pretrain" / "ray_train_llama2.py").write_text(SCRIPT_STUB)
        # get_dataset.py saves the dataset under its HOME (save_to_disk creates it), as the NxD one does.
        dataset = "~/examples_datasets/wikicorpus_llama2_tokenized_4k"
        (root / "llama2_pretrain" / "get_dataset.py").write_text(
            f"{SCRIPT_STUB}os.makedirs(os.path.expanduser({dataset!r}))\n"
        )
        ray = root / "bin" / "ray"
        ray.write_text(f"#!{sys.executable}\n{RAY_STUB}")
        ray.chmod(0o755)

    def local(self, text: str) -> str:
        """The pod's paths as this root's: each mount point, alone or followed by a path."""
        text = re.sub(f"{re.escape(ray_llama2.STEPS_MOUNT)}(?=[/\\s]|$)", f"{self.root}/llama2-steps", text)
        return re.sub(f"{re.escape(ray_llama2.SHARED_MOUNT)}(?=[/\\s]|$)", f"{self.root}/shared", text)

    def run(self, entrypoint: str, runtime_env: dict[str, Any], job_id: str) -> Replay:
        assert runtime_env["working_dir"] == ray_llama2.CODE_DIR
        home = self.root / "container" / self.env["HOME"].strip("/")
        home.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": f"{self.root / 'bin'}:{SYSTEM_PATH}",
            "HOME": str(home),
            "USER": self.env["USER"],
            "REPLAY_WORKDIR": str(self.root / "llama2_pretrain"),
            "REPLAY_CALLS": str(self.root / "calls.jsonl"),
            "REPLAY_SUBMITTED": str(self.root / "submitted.jsonl"),
        }
        result = subprocess.run(
            submitter_args(self.local(entrypoint), runtime_env, job_id),
            env=env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
        )

        def lines(name: str) -> list[dict[str, Any]]:
            path = self.root / name
            return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

        return Replay(result.returncode, result.stderr, lines("submitted.jsonl"), lines("calls.jsonl"), self)


def ray_jobs(result: PlanResult) -> list[dict[str, Any]]:
    return [r.inputs for r in result.registrations if r.type.endswith(":RayJob")]


def steps_files(result: PlanResult, job: dict[str, Any]) -> dict[str, str]:
    """The ConfigMap the job's head mounts at STEPS_MOUNT, checked against the head's pod template."""
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    (container,) = head["containers"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == ray_llama2.STEPS_MOUNT]
    assert mount.get("readOnly") is True
    assert ray_llama2.SHARED_MOUNT in {m["mountPath"] for m in container["volumeMounts"]}
    (volume,) = [v for v in head["volumes"] if v["name"] == mount["name"]]
    (config,) = [
        r.inputs
        for r in result.registrations
        if r.type.endswith(":ConfigMap")
        and r.inputs["metadata"]["name"] == volume["configMap"]["name"]
        and r.inputs["metadata"]["namespace"] == job["metadata"]["namespace"]
    ]
    return dict(config["data"])


def settings_of(config: dict[str, str], cluster: PlanResult) -> RayLlama2Settings:
    """The Ray settings the program gives the jobs: the stack file's, and what it leaves unset derived from
    the cluster's file system as the program derives it (workloads/goodput.py resolved)."""
    from infra.contract import Storage
    from workloads import goodput
    from workloads.settings import parse_workloads_config

    mbps = goodput.storage_throughput_mbps(Storage.model_validate(cluster.outputs["storage"]))
    resolved = goodput.resolved(parse_workloads_config(config), mbps).ray_llama2
    assert resolved is not None
    return resolved


@dataclass
class RayPlan:
    """A planned workload stack and the Ray settings it was planned with."""

    result: PlanResult
    settings: RayLlama2Settings


def neuron_cores_per_node(result: PlanResult, job: dict[str, Any]) -> int:
    """The NeuronCores of the node type the job's workers are placed on (infra/facts/instances.py)."""
    workers = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    label = workers["nodeSelector"]["instance-type"]
    (facts,) = [f for name, f in NEURON_INSTANCE_TYPES.items() if node_label_value(name) == label]
    return facts.neuron_cores


def expected_train_args(plan: RayPlan) -> list[str]:
    s = plan.settings
    run = plan.result.outputs["workloads"]["runDirectories"]["rayLlama2"]
    cores = neuron_cores_per_node(plan.result, job_of(plan.result, "train"))
    return [
        "--num_nodes",
        str(s.workers),
        "--neuron_cores_per_node",
        str(cores),
        *(["--steps_this_run", str(s.train_steps)] if s.train_steps is not None else []),
        *["--output_dir", run, "--checkpoint_dir", f"{run}/checkpoints"],
        *["--checkpoint_freq", str(s.checkpoint_every_steps), "--num_kept_checkpoint", str(s.checkpoints_to_keep)],
    ]


def plan_prod_with_ray(prod: PlanResult) -> RayPlan:
    """The prod workload stack with Ray Llama-2 switched on (prod ships with it off) on prod's trn1n group."""
    from offline.plan.mocks import StackOutputs
    from offline.plan.runner import stack_config
    from tests.project_copy import shipped_acknowledgements

    config = stack_config(WORKLOADS_DIR, "prod")
    config["trainium-workloads:rayLlama2"] = json.dumps({"nodeGroup": "trn1n-32xl-ng", "workers": 2})
    # The ray-llama2 image's pins past their end, as the dev stack (which runs it) keeps them.
    kept = json.loads(config["trainium-workloads:endOfSupportAcknowledged"]) | shipped_acknowledgements(WORKLOADS_DIR)
    config["trainium-workloads:endOfSupportAcknowledged"] = json.dumps(kept)
    references = {config["trainium-workloads:clusterStack"]: StackOutputs(prod.outputs, frozenset(prod.secret_outputs))}
    secrets = {HF_TOKEN_KEY: STAND_IN_TOKEN}
    return RayPlan(
        _remembered_run(WORKLOADS_DIR, "prod", config, stack_references=references, secrets=secrets),
        settings_of(config, prod),
    )


@pytest.fixture(params=["dev", "prod"])
def ray_plan(request: pytest.FixtureRequest) -> RayPlan:
    if request.param == "dev":
        from offline.plan.runner import stack_config

        dev = request.getfixturevalue("dev")
        return RayPlan(request.getfixturevalue("workloads_dev"), settings_of(stack_config(WORKLOADS_DIR, "dev"), dev))
    return plan_prod_with_ray(request.getfixturevalue("prod"))


def head_env(job: dict[str, Any]) -> dict[str, str]:
    (container,) = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def replay(result: PlanResult, job: dict[str, Any], root: Path, prepare: Any = None) -> Replay:
    head = Head(root, steps_files(result, job), head_env(job))
    if prepare is not None:
        prepare(head)
    runtime_env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    return head.run(job["spec"]["entrypoint"], runtime_env, f"{job['metadata']['name']}-x7k2p")


def test_every_step_runs_its_script_once_with_its_arguments(ray_plan: RayPlan, tmp_path: Path) -> None:
    jobs = {STEP_OF[j["metadata"]["name"]]: j for j in ray_jobs(ray_plan.result)}
    assert set(jobs) == {"generate-data", "precompile", "train"}
    for step, job in jobs.items():
        entrypoint = job["spec"]["entrypoint"]
        # One simple command, and a runtime env, that none of the three shells acts on.
        assert re.fullmatch(r"bash [A-Za-z0-9_/.-]+\.sh", entrypoint), entrypoint
        assert not re.search(r"[$`\"\\]", go_json(yaml.safe_load(job["spec"]["runtimeEnvYAML"])).replace('"', ""))
        run = replay(ray_plan.result, job, tmp_path / step)
        assert run.rc == 0, run.stderr
        (submitted,) = run.submitted
        assert submitted["entrypoint"] == run.head.local(entrypoint) and submitted["rc"] == 0
        (call,) = run.principal(step)
        if step == "generate-data":
            # The NxD get_dataset.py for Llama 2, saving where training reads (the launcher's DATA_DIR)
            # with the Hugging Face cache left in the container's own home: /tmp, which the
            # namespace's id may write (the image's root directory, its HOME otherwise, it may not).
            assert call["argv"] == ["--llama-version", "2"]
            assert call["HOME"] == run.head.local(ray_llama2.DATASET_HOME)
            assert head_env(job)["HOME"] == "/tmp"
            assert call["HF_HOME"] == str(run.head.root / "container" / "tmp" / ".cache" / "huggingface")
            assert Path(run.head.local(ray_llama2.DATASET_MARKER)).is_file()
            assert ray_llama2.DATASET_DIR == LAUNCHER.DATA_DIR
            continue
        cores = ["--neuron_cores_per_node", str(neuron_cores_per_node(ray_plan.result, job))]
        if step == "precompile":
            assert call["argv"] == ["--num_nodes", str(ray_plan.settings.workers), *cores, "--neuron_parallel_compile"]
        else:
            assert call["argv"] == [run.head.local(a) for a in expected_train_args(ray_plan)]
            # The heartbeat filter ran on the script's output, from the ConfigMap's resilience.py.
            heartbeat = ray_plan.result.outputs["workloads"]["runDirectories"]["rayLlama2"] + "/" + resumable.HEARTBEAT
            assert Path(run.head.local(heartbeat)).is_file()


def job_of(result: PlanResult, step: str) -> dict[str, Any]:
    (job,) = [j for j in ray_jobs(result) if j["metadata"]["name"] == ray_llama2.JOB_NAMES[step]]
    return job


def test_the_data_step_skips_a_staged_dataset(ray_plan: RayPlan, tmp_path: Path) -> None:
    def staged(head: Head) -> None:
        marker = Path(head.local(ray_llama2.DATASET_MARKER))
        marker.parent.mkdir(parents=True)
        marker.touch()

    run = replay(ray_plan.result, job_of(ray_plan.result, "generate-data"), tmp_path, staged)
    assert run.rc == 0 and run.submitted[0]["rc"] == 0, run.stderr
    assert run.principal("generate-data") == []


def test_the_train_step_resumes_from_the_newest_complete_checkpoint(ray_plan: RayPlan, tmp_path: Path) -> None:
    job = job_of(ray_plan.result, "train")
    checkpoints = ray_plan.result.outputs["workloads"]["runDirectories"]["rayLlama2"] + "/checkpoints"

    def saved(head: Head) -> None:
        local = Path(head.local(checkpoints))
        ray_save(local, 100), ray_save(local, 200), ray_save(local, 400, done=False)
        tear_like_a_lost_node(ray_save(local, 300) / RAY_SHARD)  # `done`, and holes a lost node left

    run = replay(ray_plan.result, job, tmp_path, saved)
    assert run.rc == 0 and run.submitted[0]["rc"] == 0, run.stderr
    (call,) = run.principal("train")
    expected = [run.head.local(a) for a in expected_train_args(ray_plan)]
    assert call["argv"] == [*expected, "--resume_ckpt", "--loading_step", "200"]
    aside = Path(run.head.local(checkpoints)).parent / "incomplete-checkpoints"
    assert sorted(p.name for p in aside.iterdir()) == ["step_300", "step_400"]


def old_form(step: str, plan: RayPlan) -> tuple[str, dict[str, Any]]:
    """The entrypoint and runtime env the workloads rendered before the steps moved into the
    ConfigMap (workloads/ray_llama2.py at 7718fbb): shell text in the entrypoint, resilience.py's
    text in the runtime env."""
    result = plan.result
    job = job_of(result, step)
    env: dict[str, Any] = {"working_dir": ray_llama2.CODE_DIR, "env_vars": {"PYTHONUNBUFFERED": "0"}}
    if step == "generate-data":
        marker = ray_llama2.DATASET_MARKER
        return f"test -f {marker} || {{ python3 get_dataset.py && touch {marker}; }}", env
    env["env_vars"].update(resumable.env())
    run = result.outputs["workloads"]["runDirectories"]["rayLlama2"]
    devices = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] * 16
    command = f"NEURON_NUM_DEVICES={devices} python3 ray_train_llama2.py " + shlex.join(expected_train_args(plan))
    keep = plan.settings.checkpoints_to_keep
    line = resumable.training_line(command, "ray", f"{run}/checkpoints", f"{run}/heartbeat", keep)
    return "bash -c " + shlex.quote(line), env


@pytest.mark.parametrize("step", ["generate-data", "train"])
def test_the_replay_catches_the_old_shell_entrypoints(
    dev: PlanResult, workloads_dev: PlanResult, tmp_path: Path, step: str
) -> None:
    """The same chain fed the old entrypoints (review 2026-11-27 A1, A2) does not run the script once
    with its arguments: the replay is not vacuous."""
    from offline.plan.runner import stack_config

    plan = RayPlan(workloads_dev, settings_of(stack_config(WORKLOADS_DIR, "dev"), dev))
    entrypoint, runtime_env = old_form(step, plan)
    head = Head(tmp_path, {}, head_env(job_of(workloads_dev, step)))
    run = head.run(entrypoint, runtime_env, "old-x7k2p")
    if step == "generate-data":
        # A1: the submitter's bash splits `||`: only `test -f <marker>` is submitted, and fails.
        assert [s["entrypoint"] for s in run.submitted] == [f"test -f {head.local(ray_llama2.DATASET_MARKER)}"]
        assert run.submitted[0]["rc"] == 1
    else:
        # A2: /bin/sh expands ${RESILIENCE_PY} inside list2cmdline's double quotes.
        assert run.submitted and run.submitted[0]["rc"] != 0
    assert run.principal(step) == []


def test_the_launchers_variables_merge_with_each_jobs_runtime_env(ray_plan: RayPlan) -> None:
    """ray_train_llama2.py calls ray.init(runtime_env={"env_vars": ...}) inside the job; Ray 2.55.1
    merges that with the job's runtime env and refuses the run when both set one variable
    (ray/_private/worker.py l.1762-1786, ray/runtime_env/runtime_env.py _merge_runtime_env l.668-672)."""
    args = LAUNCHER.get_args(["--num_nodes", "2", "--neuron_cores_per_node", "32"])
    for job in ray_jobs(ray_plan.result):
        job_vars = yaml.safe_load(job["spec"]["runtimeEnvYAML"]).get("env_vars", {})
        assert set(job_vars) & set(LAUNCHER.job_env(args)) == set(), job["metadata"]["name"]
