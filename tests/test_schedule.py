"""The schedule as a whole (workloads/schedule.py) and every Trainium step's deadline and pending
timeout (workloads/deadlines.py): pure functions over the settings and the cluster's outputs,
without the Pulumi runtime."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from infra import contract
from offline.plan.runner import REPO_ROOT, PlanResult, stack_config
from tests.conftest import ALL_ON, WORKLOADS_DIR, all_on_cluster
from workloads import checks, gang_watchdog, layouts, schedule
from workloads.settings import parse_workloads_config


def problems(dev: PlanResult, cluster: Callable[[dict[str, Any]], None] | None = None, **overrides: Any) -> list[str]:
    """What the program refuses (workloads/__main__.py wire), without running it."""
    outputs = copy.deepcopy(dev.outputs)
    if cluster is not None:
        cluster(outputs)
    config = stack_config(WORKLOADS_DIR, "dev")
    for key, value in overrides.items():
        config[f"trainium-workloads:{key}"] = json.dumps(value)
    settings = parse_workloads_config({**config, "trainium-workloads:hfToken": "hf_x"})
    parsed = contract.parse_contract(outputs)
    return checks.workload_problems(settings, parsed) or schedule.schedule_problems(
        layouts.job_chains(settings, parsed), parsed
    )


def test_the_shipped_dev_stack_fits_and_all_on_fits_a_larger_group(dev) -> None:
    assert problems(dev) == []
    assert problems(dev, all_on_cluster, **ALL_ON) == []


def test_gangs_sharing_a_group_must_fit_it_together(dev) -> None:
    # BERT (2), NxD Training (4) and the check (2) on trn1-32xl-ng1 (maxSize 4).
    # volcano v1.15.1 pkg/scheduler/plugins/gang/gang.go binds no pod of a job below minMember, so
    # NxD Training's gang would wait behind BERT's run, past its deadline and `pulumi up`'s wait.
    (problem,) = problems(dev, **ALL_ON)
    assert problem.startswith(
        "trainium-workloads:bertPretraining (2), trainium-workloads:nxdLlama (4), trainium-workloads:clusterCheck (2): "
        "at their largest steps these need 8 nodes of node group 'trn1-32xl-ng1' at once, and it holds 4 (maxSize)"
    )
    assert "raise the group's maxSize" in problem
    # Steps of one workload follow each other: BERT's precompile and train (2 each) count 2, not 4.
    assert (
        problems(
            dev,
            clusterCheck={"nodeGroup": "trn1-32xl-ng1", "nodes": 2},
            bertPretraining={"nodeGroup": "trn1-32xl-ng1", "nodes": 2},
        )
        == []
    )
    (problem,) = problems(dev, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "nodes": 3})
    assert (
        "trainium-workloads:bertPretraining (3), trainium-workloads:clusterCheck (2): at their largest steps these need 5 nodes"
        in problem
    )


def test_a_pod_larger_than_its_node_is_refused(dev) -> None:
    # trn1n.32xlarge: 128 vCPU, 512 GiB listed, 7.5% less as MemTotal; the kubelet keeps 0.92 vCPU and
    # 3072 MiB (11 x 247 max pods + 255 + 100 eviction, awslabs/amazon-eks-ami nodeadm kubelet config),
    # the DaemonSets their requests (no EBS CSI node plugin without the in-cluster Prometheus; the CloudWatch
    # add-on's neuron-monitor 256m/128Mi; dev's EFS node plugin asks nothing, where FSx's took 30m/104Mi):
    # 126884m and 481503Mi are left (infra/specs/system_capacity.py).
    problem, train = problems(dev, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workerCpu": "128"})
    assert "workergroup pods of llama2-pretraining-job" in train
    assert problem.startswith(
        "trainium-workloads:rayLlama2: workergroup pods of llama2-precompilation-job ask for more "
        "than a trn1n.32xlarge node of group 'trn1n-32xl-ng' can allocate"
    )
    assert "cpu 128 (it can allocate 126.884)" in problem
    problem, _ = problems(dev, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workerMemory": "510Gi"})
    assert "memory 510Gi (it can allocate 481503Mi)" in problem
    assert problems(dev, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workerCpu": "126", "workerMemory": "470Gi"}) == []


def test_neuron_devices_and_efa_interfaces_count_against_the_node(dev) -> None:
    bigger = {"aws.amazon.com/neuron": Decimal(17), "cpu": Decimal(1)}
    group = contract.parse_contract(dev.outputs).node_groups["trn1-32xl-ng1"]
    room = schedule._room(group)
    assert schedule.too_big(bigger, room) == ["aws.amazon.com/neuron 17 (it can allocate 16)"]
    assert schedule.too_big({"vpc.amazonaws.com/efa": Decimal(8)}, room) == []
    assert schedule.too_big({"vpc.amazonaws.com/efa": Decimal(9)}, room) == [
        "vpc.amazonaws.com/efa 9 (it can allocate 8)"
    ]
    # Whole-node pods take a node each; small ones share.
    whole = {"aws.amazon.com/neuron": Decimal(16), "vpc.amazonaws.com/efa": Decimal(8)}
    assert schedule.nodes_needed([whole] * 3, room) == 3
    assert schedule.nodes_needed([{"cpu": Decimal(60)}] * 4, room) == 2


def test_cpu_pods_of_all_jobs_must_fit_the_job_support_group(dev) -> None:
    # A Ray gang spans the job-support group (head, submitter) and a Trainium group; its
    # workers' nodes idle while the job-support group is full. An m6i.4xlarge leaves 15400m: the
    # RedPajama staging (12 CPU) and the WikiCorpus one (2), the Ray head and submitter (6.5), the
    # NxD Training launcher (1), the check's launcher and verdict (1.1) need two such nodes.
    def support_nodes(count: int) -> Callable[[dict[str, Any]], None]:
        def edit(outputs: dict[str, Any]) -> None:
            all_on_cluster(outputs)
            outputs["jobSupportPlacement"]["maxSize"] = count

        return edit

    (problem,) = problems(dev, support_nodes(1), **ALL_ON)
    assert problem.startswith(
        "trainium-workloads:dataStaging (1), trainium-workloads:rayLlama2 (1), "
        "trainium-workloads:nxdLlama (1), trainium-workloads:clusterCheck (1): their CPU pods"
    )
    assert "need 2 job-support nodes at once, and the group holds 1 (jobNodeGroup.maxSize" in problem
    assert problems(dev, support_nodes(2), **ALL_ON) == []


def test_gangs_sharing_a_capped_queue_must_fit_its_capability_together(dev) -> None:
    # volcano v1.15.1 pkg/scheduler/plugins/proportion/proportion.go: no allocation beyond a queue's
    # capability (dev's llama2-training-queue: 500 CPU, 1500Gi). Ray's gang alone asks for 246.5 CPU
    # and 910.2Gi (2 x 120/440Gi workers, head 6/30Gi, submitter 0.5/200Mi); BERT's two training
    # pods 200 CPU and 800Gi: 1710.2Gi together.
    bert = {
        "nodeGroup": "trn1-32xl-ng1",
        "nodes": 2,
        "queue": "llama2-training-queue",
        "trainSteps": 200,
        "trainDeadlineMinutes": 60,
        "firstStepTimeoutMinutes": 30,
        "maxRetry": 1,
    }
    (problem,) = problems(dev, bertPretraining=bert)
    assert problem.startswith(
        "trainium-workloads:bertPretraining, trainium-workloads:rayLlama2: their gangs in Volcano "
        "queue 'llama2-training-queue' ask together for more than it allows (memory 1710.1953125Gi > 1500Gi)"
    )
    assert problems(dev, bertPretraining={**bert, "queue": "test"}) == []


def test_a_cluster_stack_without_allocatable_figures_is_checked_for_devices_only(dev) -> None:
    def old_cluster(outputs: dict[str, Any]) -> None:
        for group in outputs["acceleratorNodeGroups"]:
            del group["allocatable"]
        for key in ("maxSize", "allocatable"):
            del outputs["jobSupportPlacement"][key]

    assert problems(dev, old_cluster, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "workerCpu": "200"}) == []


def test_phases_split_after_each_awaited_object() -> None:
    def obj(name: str, kind: str = "MPIJob", **annotations: str) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1" if kind == "Job" else "x/v1",
            "kind": kind,
            "metadata": {"name": name, "annotations": annotations},
        }

    chain = [obj("nodes", "Job"), obj("allreduce", **{"pulumi.com/skipAwait": "true"}), obj("verdict", "Job")]
    assert [[o["metadata"]["name"] for o in p] for p in schedule.phases(chain)] == [["nodes"], ["allreduce", "verdict"]]
    chain = [
        obj("compile", **{"pulumi.com/waitFor": "condition=Succeeded"}),
        obj("train", **{"pulumi.com/skipAwait": "true"}),
    ]
    assert [[o["metadata"]["name"] for o in p] for p in schedule.phases(chain)] == [["compile"], ["train"]]


def test_a_pending_timeout_longer_than_a_ray_deadline_is_refused(dev) -> None:
    (problem,) = problems(
        dev, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "pendingTimeoutMinutes": 40, "trainDeadlineSeconds": 2400}
    )
    assert problem == (
        "trainium-workloads:rayLlama2.pendingTimeoutMinutes = 40: not shorter than the train step's "
        "deadline (trainDeadlineSeconds, 2400 s); lower it or raise the deadline"
    )
    (problem,) = problems(dev, rayLlama2={"nodeGroup": "trn1n-32xl-ng", "ttlSecondsAfterFinished": 1800})
    assert problem.startswith("trainium-workloads:rayLlama2.ttlSecondsAfterFinished = 1800: a finished step's cluster")
    assert (
        problems(
            dev,
            rayLlama2={
                "nodeGroup": "trn1n-32xl-ng",
                "pendingTimeoutMinutes": 30,
                "trainDeadlineSeconds": 2400,
                "ttlSecondsAfterFinished": 600,
            },
        )
        == []
    )


# --- every Trainium step ends, and an unschedulable gang gives its nodes back ------------------


def pending_bound(obj: dict[str, Any]) -> int | None:
    """Seconds after which an unscheduled gang of ``obj`` is ended, read from the object."""
    spec = obj["spec"]
    if obj["kind"] in ("Job", "MPIJob") and ("tasks" in spec or obj["kind"] == "MPIJob"):
        # Volcano Jobs and MPIJobs: the gang watchdog's bound (workloads/watchdog_loop.py), the only one
        # that survives a Volcano controller restart and the only one the MPI operator leaves.
        bound = (obj["metadata"].get("annotations") or {}).get(gang_watchdog.ANNOTATION)
        return int(bound) if bound else None
    if obj["kind"] == "RayJob":
        return spec.get("preRunningDeadlineSeconds")
    return spec.get("activeDeadlineSeconds")


def run_deadline(obj: dict[str, Any]) -> int | None:
    spec = obj["spec"]
    if obj["kind"] == "Job" and "tasks" in spec:
        commands = [t["template"]["spec"]["containers"][0]["command"] for t in spec["tasks"]]
        policies = [t["policies"][0] for t in spec["tasks"]]
        ok = all(c[0] == "timeout" for c in commands) and all(
            p == {"exitCode": 124, "action": "TerminateJob"} for p in policies
        )
        return int(commands[0][2]) if ok else None
    if obj["kind"] == "MPIJob":
        return spec["runPolicy"].get("activeDeadlineSeconds")
    return spec.get("activeDeadlineSeconds")


@pytest.mark.parametrize("stack", ["workloads_all", "workloads_prod"])
def test_every_trainium_step_has_a_deadline_and_a_pending_timeout(stack: str, request, dev, prod) -> None:
    result: PlanResult = request.getfixturevalue(stack)
    cluster = copy.deepcopy((dev if stack == "workloads_all" else prod).outputs)
    if stack == "workloads_all":
        all_on_cluster(cluster)
    groups = contract.parse_contract(cluster).node_groups.values()
    objects = [r.inputs for r in result.registrations if "kind" in r.inputs and "spec" in r.inputs]
    trainium = [
        o
        for o in objects
        if any(g.node_selector.items() <= p.node_selector.items() for p in schedule.pods_of(o) for g in groups)
    ]
    names = {o["metadata"]["name"] for o in trainium}
    if stack == "workloads_all":
        assert names == {
            "bert-precompile",
            "bert-train",
            "llama2-precompilation-job",
            "llama2-pretraining-job",
            "llama2-compile",
            "llama2-train",
            "cluster-check-nodes",
            "cluster-check-allreduce",
        }
    assert {o["metadata"]["name"]: (pending_bound(o) is not None, run_deadline(o) is not None) for o in trainium} == {
        n: (True, True) for n in names
    }


def test_awaits_outlast_the_deadlines_they_wait_for(workloads_all) -> None:
    # pulumi-kubernetes waits pulumi.com/timeoutSeconds; the object's own deadline must end first,
    # so a hang is ended by the job (which releases its nodes), not only by `pulumi up` giving up.
    # A step awaited through its gate (workloads/step_gate.py): `up` waits for the gate 5 minutes
    # longer than the step's deadline, and the gate's own deadline ends a minute before that.
    by_name = {r.inputs["metadata"]["name"]: r.inputs for r in workloads_all.registrations if "metadata" in r.inputs}
    wait = {
        n: int(o["metadata"]["annotations"]["pulumi.com/timeoutSeconds"])
        for n, o in by_name.items()
        if "pulumi.com/timeoutSeconds" in (o["metadata"].get("annotations") or {})
    }
    gate_deadline = {
        n: o["spec"]["activeDeadlineSeconds"] for n, o in by_name.items() if n.endswith("-gate") and "spec" in o
    }
    assert set(gate_deadline) == {
        "bert-precompile-gate",
        "llama2-generate-pretraining-test-data-gate",
        "llama2-precompilation-job-gate",
        "llama2-compile-gate",
    }
    assert {n: wait[n] - 60 for n in gate_deadline} == gate_deadline
    # BERT: pending 45 min + precompile deadline 120 min + timeout's 5-minute --kill-after, then 5 minutes' margin.
    assert wait["bert-precompile-gate"] == (45 + 120 + 5 + 5) * 60
    assert (
        wait["llama2-precompilation-job-gate"]
        == by_name["llama2-precompilation-job"]["spec"]["activeDeadlineSeconds"] + 300
    )
    assert wait["llama2-compile-gate"] == by_name["llama2-compile"]["spec"]["runPolicy"]["activeDeadlineSeconds"] + 300
    assert wait["cluster-check-nodes"] == by_name["cluster-check-nodes"]["spec"]["activeDeadlineSeconds"] + 300
    # The gated steps themselves are not awaited.
    assert not {"bert-precompile", "llama2-precompilation-job", "llama2-compile"} & set(wait)


def test_bert_runs_at_most_max_retry_attempts_in_all(dev) -> None:
    # volcano v1.15.1 pkg/controllers/job/state/running.go l.35-39: RestartJob on the first failure sets
    # RetryCount to 1; state/restarting.go l.35: the job is Failed once RetryCount >= maxRetry. So
    # maxRetry N is N attempts in all (1: never retried), and each attempt can outlast its deadline by
    # `timeout --kill-after` (bert.py with_deadline).
    from workloads import bert, deadlines

    config = parse_workloads_config(stack_config(WORKLOADS_DIR, "dev"))
    assert config.bert_pretraining.max_retry == 2  # the dev stack means one retry
    steps = {s.name: s for s in deadlines.trainium_steps(config)}
    # ... and the one restart may first wait 35 minutes for a silent node's repair (deadlines.py).
    assert steps["bert-train"].hold_seconds == (2 * (45 + 60 + 5) + 35) * 60
    assert steps["bert-precompile"].hold_seconds == (2 * (45 + 120 + 5) + 35) * 60
    assert "2 attempts (maxRetry 2)" in steps["bert-train"].why
    assert bert.with_deadline(["x"], 60)[1] == f"--kill-after={deadlines.BERT_KILL_AFTER_MINUTES * 60}"
    one = config.bert_pretraining.model_copy(update={"max_retry": 1})
    assert deadlines.bert_attempts(one) == 1 and deadlines.bert_attempts(config.bert_pretraining) == 2


def test_the_documented_way_to_switch_nxd_on_plans(dev) -> None:
    # docs/workloads.md "The dev stack" and the header of workloads/Pulumi.dev.yaml: NxD Training (4 nodes) takes
    # trn1-32xl-ng1's whole maxSize (4), so BERT and the check both go off. BERT alone off is refused.
    config = stack_config(WORKLOADS_DIR, "dev")
    shipped = {k.split(":", 1)[1]: json.loads(v) for k, v in config.items() if v.startswith("{")}
    nxd_on = {**shipped["nxdLlama"], "enabled": True}
    staging = {**shipped["dataStaging"], "redpajama": True}
    documented = problems(
        dev,
        nxdLlama=nxd_on,
        dataStaging=staging,
        bertPretraining={**shipped["bertPretraining"], "enabled": False},
        clusterCheck={**shipped["clusterCheck"], "enabled": False},
    )
    assert documented == []
    bert_only_off = problems(
        dev, nxdLlama=nxd_on, dataStaging=staging, bertPretraining={**shipped["bertPretraining"], "enabled": False}
    )
    assert len(bert_only_off) == 1 and "trn1-32xl-ng1" in bert_only_off[0] and "nxdLlama" in bert_only_off[0]
    docs = (REPO_ROOT / "docs" / "workloads.md").read_text()
    assert "`enabled: false` on both `bertPretraining` and `clusterCheck`" in docs
    assert "enabled: false on bertPretraining AND clusterCheck" in (WORKLOADS_DIR / "Pulumi.dev.yaml").read_text()


def test_two_groups_that_pods_cannot_tell_apart_are_refused(dev) -> None:
    # Pods select a group by instance type and labels (contract.NodeGroup.node_selector), so
    # a second trn1.32xlarge group with the same labels takes BERT's pods too, and schedule.placement
    # would count both gangs on whichever group it meets first.
    def twin(labels: dict[str, str], first: dict[str, str] | None = None) -> Callable[[dict[str, Any]], None]:
        def add(outputs: dict[str, Any]) -> None:
            groups = outputs["acceleratorNodeGroups"]
            groups.append({**copy.deepcopy(groups[0]), "name": "trn1-32xl-ng2"})
            groups[-1]["labels"].update(labels)
            groups[0]["labels"].update(first or {})

        return add

    refused = problems(dev, twin({}))
    assert refused and all("'trn1-32xl-ng2'" in p and "distinguishing label" in p for p in refused)
    assert {p.split(" = ")[0] for p in refused} == {
        "trainium-workloads:bertPretraining.nodeGroup",
        "trainium-workloads:clusterCheck.nodeGroup",
    }
    # A label only the second group has is not enough: its nodes still match the first group's selector.
    assert len(problems(dev, twin({"team": "b"}))) == 2
    # The other side: one key, a value per group, tells them apart.
    assert problems(dev, twin({"team": "b"}, first={"team": "a"})) == []
