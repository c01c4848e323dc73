"""The security posture of every pod the stacks render: contexts, tokens, Pod Security levels,
NetworkPolicies that select the right pods and admit the flows the jobs need, and the VPC CNI
setting that makes the policies count. Computed from the real plans (dev and prod)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from infra.components.storage import ROOT_JOB_CAPABILITIES
from offline.plan.runner import PlanResult
from offline.report.plan_output import kubernetes_objects
from tests import crd_fields
from tests.checkov_scan import pod_templates
from tests.project_copy import dev_groups_at, kept_past_support
from workloads import data_staging, ray_llama2, tensorboard_viewer

# --- what Pod Security Admission checks (kubernetes/pod-security-admission v0.34.9, policy/) -----
# check_capabilities_baseline.go: capabilities beyond the container runtime's default set.
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
# check_restrictedVolumes.go: the only volume types "restricted" allows.
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def baseline_violations(spec: Mapping[str, Any]) -> list[str]:
    found = []
    if any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")):
        found.append("host namespaces")  # check_hostNamespaces.go
    if any("hostPath" in v for v in spec.get("volumes", [])):
        found.append("hostPath volumes")  # check_hostPathVolumes.go
    if (spec.get("securityContext", {}).get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append("seccomp Unconfined")  # check_seccompProfile_baseline.go
    for c in containers(spec):
        context = c.get("securityContext", {})
        if context.get("privileged"):
            found.append(f"{c['name']}: privileged")  # check_privileged.go
        if any(p.get("hostPort") for p in c.get("ports", [])):
            found.append(f"{c['name']}: hostPort")  # check_hostPorts.go
        extra = set(context.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        if extra:
            found.append(f"{c['name']}: capabilities {sorted(extra)}")
    return found


def restricted_violations(spec: Mapping[str, Any]) -> list[str]:
    found = baseline_violations(spec)
    pod = spec.get("securityContext", {})
    if any(not RESTRICTED_VOLUMES & v.keys() for v in spec.get("volumes", [])):
        found.append("volume types")
    if pod.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.append("seccomp")  # check_seccompProfile_restricted.go
    for c in containers(spec):
        context = c.get("securityContext", {})
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{c['name']}: allowPrivilegeEscalation")  # check_allowPrivilegeEscalation.go
        non_root = context.get("runAsNonRoot", pod.get("runAsNonRoot"))
        user = context.get("runAsUser", pod.get("runAsUser"))
        if non_root is not True or user == 0:
            found.append(f"{c['name']}: runs as root")  # check_runAsNonRoot.go, check_runAsUser.go
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []) or set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{c['name']}: capabilities")  # check_capabilities_restricted.go
    return found


def strictest_level(specs: list[Mapping[str, Any]]) -> str:
    if not any(restricted_violations(s) for s in specs):
        return "restricted"
    return "baseline" if not any(baseline_violations(s) for s in specs) else "privileged"


# --- the pods a plan makes ---------------------------------------------------------------------


def pods(result: PlanResult) -> Iterator[tuple[str, str, dict[str, str], dict[str, Any]]]:
    """(Kind/object/role, namespace, pod labels, pod spec) of every pod the plan's objects make,
    found by walking each object (tests/checkov_scan.py pod_templates), controller-made pods
    included: a template added anywhere in any object is checked without a change here."""
    for obj in kubernetes_objects(result):
        meta = obj["metadata"]
        namespace = meta.get("namespace", "default")
        for role, template in pod_templates(obj):
            yield (
                f"{obj['kind']}/{meta['name']}/{role}",
                namespace,
                template.get("metadata", {}).get("labels", {}),
                template["spec"],
            )


def crd_template_paths(obj: dict[str, Any]) -> list[str]:
    """The pod-template paths the object's pinned CRD defines (tests/crd_paths, `= @pod-template`)."""
    tree = crd_fields.load(obj["apiVersion"], obj["kind"])
    return [path for path, section in tree.references.items() if section.startswith("pod-template")]


def present(value: Any, path: list[str]) -> int:
    """How many values sit at a CRD path (``[]`` walks a list, ``{}`` every value of a map)."""
    if not path:
        return 1 if value is not None else 0
    head, rest = path[0], path[1:]
    key, _, marker = head.partition("[")
    if head.endswith("{}"):
        key, marker = head[:-2], "{"
    child = value.get(key) if isinstance(value, dict) else None
    if child is None:
        return 0
    if marker.startswith("]"):
        return sum(present(item, rest) for item in child)
    if marker == "{":
        return sum(present(item, rest) for item in child.values())
    return present(child, rest)


def test_the_walk_finds_every_pod_template_the_crds_define(
    workloads_all: PlanResult, workloads_prod: PlanResult
) -> None:
    # Every custom resource with pod templates: as many found by the walk as sit at the template
    # paths of its pinned CRD (RayJob: head, worker groups and the submitter; MPIJob: each replica
    # type; Volcano Job: each task).
    kinds = set()
    for plan in (workloads_all, workloads_prod):
        for obj in kubernetes_objects(plan):
            if (obj["apiVersion"], obj["kind"]) not in crd_fields.FILES:
                continue
            kinds.add(obj["kind"])
            expected = sum(present(obj, p.split(".")) for p in crd_template_paths(obj))
            assert len(list(pod_templates(obj))) == expected > 0, obj["metadata"]["name"]
    assert kinds >= {"RayJob", "MPIJob", "Job"}
    assert "spec.submitterPodTemplate" in crd_template_paths({"apiVersion": "ray.io/v1", "kind": "RayJob"})


@pytest.fixture(scope="module")
def plans(dev: PlanResult, prod: PlanResult, workloads_dev: PlanResult, workloads_prod: PlanResult) -> list[PlanResult]:
    return [dev, workloads_dev, prod, workloads_prod]


@pytest.fixture(scope="module")
def all_pods(plans: list[PlanResult]) -> list[tuple[str, str, dict[str, str], dict[str, Any]]]:
    found = [pod for plan in plans for pod in pods(plan)]
    # Every workload is on in these plans.
    names = {name.split("/")[1] for name, *_ in found}
    assert {
        "bert-train",
        "llama2-pretraining-job",
        "llama2-train",
        "stage-redpajama",
        "cmd-shell",
        "tensorboard",
    } <= names
    # Pods the operators make from our templates are among them: KubeRay's submitter, head and
    # workers, the MPI launcher and workers, Volcano's tasks.
    roles = {name for name, *_ in found}
    assert {
        "RayJob/llama2-pretraining-job/submitter",
        "RayJob/llama2-pretraining-job/head",
        "MPIJob/llama2-train/launcher",
        "Job/bert-train/worker-0",
    } <= roles
    return found


# neuron-monitor runs privileged as its upstream manifest does, with no other security context
# (infra/specs/node_metrics.py, docs/security.md): the one pod exempt from the two checks below, with no token.
PRIVILEGED_AGENTS = {"DaemonSet/neuron-monitor/pod"}


def test_every_pod_runs_with_runtime_default_seccomp_and_no_token(all_pods) -> None:
    with_token = set()
    for name, _, labels, spec in all_pods:
        if name in PRIVILEGED_AGENTS:
            assert spec["automountServiceAccountToken"] is False, name
            continue
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        if spec["automountServiceAccountToken"] is not False:
            pod = name.split("/")[1]
            if pod.endswith("-gate"):
                # A step gate reads its step as its workload's gate account (tests/test_step_gate.py).
                with_token.add("*-gate")
                assert spec["serviceAccountName"] == f"{labels['app.kubernetes.io/part-of']}-gate", name
                continue
            with_token.add("burn-in-*" if pod.startswith("burn-in-") else pod)
            # Each its own account: a namespaced Role for the watchdog; for the burn-in, its sweeper and the
            # gang hold, patch of nodes narrowed by a ValidatingAdmissionPolicy each (tests/test_node_health.py,
            # tests/test_burn_in_sweeper.py, tests/test_gang_hold.py).
            accounts = {
                "neuron-burn-in-sweeper": "neuron-burn-in-sweeper",
                "gang-hold": "gang-hold",
                "gang-watchdog": "gang-watchdog",
            }
            assert spec["serviceAccountName"] == ("neuron-burn-in" if pod.startswith("burn-in-") else accounts[pod]), (
                name
            )
    # Only these call the API: the gang watchdog (workloads/gang_watchdog.py), which ends gangs that never
    # schedule, the step gates (workloads/step_gate.py), which read the step `pulumi up` waits for, the
    # Trainium burn-in (infra/specs/burn_in_objects.py), which untaints its own node, its sweeper, which
    # fails nodes whose burn-in never started, and the gang hold (infra/specs/gang_hold.py), which keeps nodes a
    # gang waits for out of scale-in.
    assert with_token == {"gang-watchdog", "*-gate", "burn-in-*", "neuron-burn-in-sweeper", "gang-hold"}


def test_every_container_drops_all_capabilities_and_cannot_escalate(all_pods) -> None:
    assert PRIVILEGED_AGENTS <= {name for name, *_ in all_pods}
    for name, _, _, spec in all_pods:
        if name in PRIVILEGED_AGENTS:
            assert [c["securityContext"] for c in containers(spec)] == [{"privileged": True}], name
            continue
        for c in containers(spec):
            context = c["securityContext"]
            assert context["allowPrivilegeEscalation"] is False and context["privileged"] is False, (name, c["name"])
            assert context["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            added = set(context["capabilities"].get("add", []))
            # None gets any back but the root Jobs on the file system (CHOWN and DAC_OVERRIDE:
            # tests/test_root_squash.py): Neuron and EFA need none, and the MPI workers' sshd runs as the
            # pod's own user (docker/nxd-llama mpi-sshd), which could not use one anyway.
            expected = set(ROOT_JOB_CAPABILITIES) if name.startswith("Job/fsx-namespace-") else set()
            assert added == expected, (name, c["name"], added)


def test_services_that_can_run_read_only_do(all_pods) -> None:
    # TensorBoard writes its info file in /tmp, nginx its pid and temp files in /tmp: a mounted
    # volume, so the image itself stays read-only.
    for name, _, _, spec in all_pods:
        if name.split("/")[1] != "tensorboard":
            continue
        for c in containers(spec):
            assert c["securityContext"]["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert "/tmp" in {m["mountPath"] for m in c["volumeMounts"]}, (name, c["name"])


def test_long_running_services_have_probes_and_helpers_have_limits(all_pods) -> None:
    for name, _, _, spec in all_pods:
        kind, obj, _ = name.split("/")
        if obj == "tensorboard":
            for c in containers(spec):
                assert "livenessProbe" in c and "readinessProbe" in c, (name, c["name"])
        if obj in ("tensorboard", "stage-wikicorpus", "stage-redpajama", "cmd-shell") or name.endswith("/launcher"):
            for c in containers(spec):
                assert {"cpu", "memory"} <= c["resources"]["limits"].keys(), (name, c["name"])
                assert {"cpu", "memory"} <= c["resources"]["requests"].keys(), (name, c["name"])


def test_training_namespaces_enforce_the_strictest_level_their_pods_pass(plans, all_pods) -> None:
    cluster_namespaces = {}
    for plan in plans:
        for r in plan.registrations:
            if (
                r.type in ("kubernetes:core/v1:Namespace", "kubernetes:core/v1:NamespacePatch")
                and r.inputs["metadata"].get("labels", {}).get("purpose") == "training"
            ):
                cluster_namespaces[r.inputs["metadata"]["name"]] = r.inputs["metadata"]["labels"]
    assert {"default", "research"} <= cluster_namespaces.keys()
    for namespace, labels in cluster_namespaces.items():
        specs = [spec for _, ns, _, spec in all_pods if ns == namespace]
        assert specs
        assert labels["pod-security.kubernetes.io/enforce"] == strictest_level(specs) == "restricted", namespace
        assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
        assert {labels[f"pod-security.kubernetes.io/{m}-version"] for m in ("enforce", "warn", "audit")} == {"v1.34"}


def test_the_built_in_namespace_is_labelled_by_a_patch_not_owned(dev: PlanResult) -> None:
    # `pulumi destroy` of a Namespace resource would delete `default` with everything in it.
    assert not [r for r in dev.of_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == "default"]
    patch = dev.named("ns-default-labels", "kubernetes:core/v1:NamespacePatch")
    assert patch.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_pods_torchx_run_submits_are_refused_by_the_enforced_level() -> None:
    """`torchx run` puts pods in the same namespace: TorchX 0.7.0's Kubernetes scheduler
    (torchx/schedulers/kubernetes_scheduler.py, role_to_pod) writes an empty security context and has
    no field for one, so its pods run as the image's user, root, which "restricted" refuses (and the
    namespace-identity policy too: the component mounts the claim). They still pass "baseline": a pod
    is privileged only for a DeviceMount and uses hostPath only for Bind/DeviceMounts."""
    from kubernetes.client import ApiClient
    from torchx.schedulers.kubernetes_scheduler import app_to_resource

    from workloads.torchx_trn1 import trn1_dist_ddp

    job = ApiClient().sanitize_for_serialization(app_to_resource(trn1_dist_ddp(image="x"), "test", "training"))
    template = job["spec"]["tasks"][0]["template"]
    assert not baseline_violations(template["spec"])
    assert "runs as root" in " ".join(restricted_violations(template["spec"]))


# --- NetworkPolicies ---------------------------------------------------------------------------


def policies(plan: PlanResult) -> list[dict[str, Any]]:
    return [o for o in kubernetes_objects(plan) if o["kind"] == "NetworkPolicy"]


def selects(policy: dict[str, Any], labels: Mapping[str, str]) -> bool:
    return policy["spec"]["podSelector"]["matchLabels"].items() <= dict(labels).items()


def admits(policy: dict[str, Any], labels: Mapping[str, str], port: int, namespace: str | None = None) -> bool:
    """Whether the policy lets a pod with ``labels`` (in ``namespace``, or the policy's own) in on ``port``."""
    namespace = namespace or policy["metadata"]["namespace"]
    for rule in policy["spec"]["ingress"]:
        ports = [p["port"] for p in rule.get("ports", [])]
        if ports and port not in ports:
            continue
        if "from" not in rule:
            return True
        for peer in rule["from"]:
            if "podSelector" in peer and namespace == policy["metadata"]["namespace"]:
                if peer["podSelector"]["matchLabels"].items() <= dict(labels).items():
                    return True
            if "namespaceSelector" in peer and peer["namespaceSelector"]["matchLabels"] == {
                "kubernetes.io/metadata.name": namespace
            }:
                return True
    return False


def test_the_bert_workers_reach_rank_0s_rendezvous_store(workloads_dev: PlanResult) -> None:
    # Rank 0's torchrun hosts the c10d store on RDZV_PORT (workloads/bert_launch.py); its job's
    # other pods get in, pods of other workloads do not.
    from workloads.bert_launch import RDZV_PORT

    by_name = {name: labels for name, _, labels, _ in pods(workloads_dev)}
    rank0 = by_name["Job/bert-train/worker-0"]
    (policy,) = [p for p in policies(workloads_dev) if selects(p, rank0)]
    assert admits(policy, by_name["Job/bert-train/worker-1"], RDZV_PORT)
    assert not admits(policy, by_name["Deployment/tensorboard/pod"], RDZV_PORT)


def test_every_workload_pod_is_isolated_by_a_policy_that_admits_its_peers(
    workloads_dev: PlanResult, workloads_prod: PlanResult
) -> None:
    for plan in (workloads_dev, workloads_prod):
        found = policies(plan)
        for name, _, labels, _ in pods(plan):
            selecting = [p for p in found if selects(p, labels)]
            assert len(selecting) == 1, name
            policy = selecting[0]
            # Training peers (torchrun's store, Neuron collectives' TCP bootstrap, Ray's ports,
            # ssh and Open MPI's channel back to mpirun) use ports picked at run time.
            peers_on_any_port = policy["metadata"]["name"] in (
                "bert-pretraining",
                "ray-llama2",
                "nxd-llama",
                "cluster-check",
            )
            assert admits(policy, labels, 12345) == peers_on_any_port, name


def test_the_mpi_launcher_reaches_its_workers_over_ssh_and_they_reach_it_back(workloads_all: PlanResult) -> None:
    by_name = {name: labels for name, _, labels, _ in pods(workloads_all)}
    policy = next(p for p in policies(workloads_all) if selects(p, by_name["MPIJob/llama2-train/worker"]))
    assert admits(policy, by_name["MPIJob/llama2-train/launcher"], 22)
    assert selects(policy, by_name["MPIJob/llama2-train/launcher"]) and admits(
        policy, by_name["MPIJob/llama2-train/worker"], 40000
    )


def test_ray_dashboard_is_open_to_the_submitter_and_the_operator_only(workloads_dev: PlanResult) -> None:
    policy = ray_llama2.ray_network_policy("default")
    head_ports = {p["name"]: p["containerPort"] for p in ray_llama2.HEAD_PORTS}
    dashboard = head_ports["dashboard"]
    # KubeRay v1.7.0 labels the submitter pods (rayjob_controller.go) and runs in kuberay-system.
    assert admits(
        policy, {"ray.io/originated-from-crd": "RayJob", "app.kubernetes.io/created-by": "kuberay-operator"}, dashboard
    )
    assert admits(policy, {"app.kubernetes.io/name": "kuberay-operator"}, dashboard, namespace="kuberay-system")
    assert not admits(policy, {"ray.io/originated-from-crd": "RayJob"}, head_ports["gcs-server"])
    assert not admits(policy, {"app.kubernetes.io/name": "tensorboard"}, dashboard)


def test_tensorboard_accepts_only_its_serving_port(workloads_dev: PlanResult, workloads_prod: PlanResult) -> None:
    for plan in (workloads_dev, workloads_prod):
        objects = kubernetes_objects(plan)
        policy = next(p for p in policies(plan) if p["metadata"]["name"] == "tensorboard")
        deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "tensorboard")
        service = next(o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "tensorboard")
        ports = {
            p["name"]: p["containerPort"]
            for c in deployment["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        served = ports[service["spec"]["ports"][0]["targetPort"]]
        assert admits(policy, {}, served)
        assert not any(admits(policy, {}, p) for p in ports.values() if p != served)
    assert tensorboard_viewer.PROXY_PORT != tensorboard_viewer.TENSORBOARD_PORT


def test_staging_pods_accept_no_traffic(workloads_dev: PlanResult) -> None:
    policy = next(p for p in policies(workloads_dev) if p["metadata"]["name"] == data_staging.WORKLOAD)
    assert policy["spec"]["ingress"] == [] and policy["spec"]["policyTypes"] == ["Ingress"]


def test_the_vpc_cni_enforces_network_policies(dev: PlanResult, prod: PlanResult) -> None:
    # The aws-vpc-cni chart's `enableNetworkPolicy` (charts/aws-vpc-cni/values.yaml, v1.20.4), the
    # add-on's configuration value; without it the policies above are stored and ignored.
    for plan in (dev, prod):
        cni = plan.named("cluster-vpc-cni", "aws:eks/addon:Addon")
        assert json.loads(cni.inputs["configurationValues"])["enableNetworkPolicy"] == "true"


def test_the_hugging_face_token_is_a_file_not_an_environment_variable(workloads_all: PlanResult) -> None:
    job = next(
        o
        for o in kubernetes_objects(workloads_all)
        if o["kind"] == "Job" and o["metadata"]["name"] == "stage-redpajama"
    )
    spec = job["spec"]["template"]["spec"]
    assert "secretKeyRef" not in str(spec)
    volume = next(v for v in spec["volumes"] if "secret" in v)
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    path = f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"
    assert f'open("{path}")' in spec["containers"][0]["command"][-1] and mount["readOnly"] is True


def test_archives_are_unpacked_without_chown(workloads_dev: PlanResult) -> None:
    # No CAP_CHOWN: GNU tar restores the archive's owners by default when it runs as root, and fails
    # the extraction when it may not; --no-same-owner keeps the files the extracting user's (the
    # namespace's id), whoever runs it.
    job = next(
        o
        for o in kubernetes_objects(workloads_dev)
        if o["kind"] == "Job" and o["metadata"]["name"] == "stage-wikicorpus"
    )
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "CHOWN" not in container["securityContext"]["capabilities"].get("add", [])
    assert "tar --no-same-owner -xf" in container["command"][-1]


def test_pod_security_levels_are_pinned_to_the_policy_version_they_were_checked_at(plan_with) -> None:
    # The levels were checked against one release's policy (pod_security.PSA_POLICY_VERSION); pinned to
    # it, what is refused does not change when the control plane is upgraded.
    from infra.specs.pod_security import PSA_POLICY_VERSION

    for minor in ("1.34", "1.36"):
        result = plan_with(
            kubernetesVersion=minor,
            acceleratorNodeGroups=dev_groups_at(minor),
            endOfSupportAcknowledged=kept_past_support(minor),
        )
        labels = result.named("ns-default-labels", "kubernetes:core/v1:NamespacePatch").inputs["metadata"]["labels"]
        assert {labels[f"pod-security.kubernetes.io/{m}-version"] for m in ("enforce", "warn", "audit")} == {
            PSA_POLICY_VERSION
        }
