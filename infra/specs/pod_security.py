"""How every pod this project renders is locked down: security contexts, service account
tokens, Pod Security Admission labels and NetworkPolicies.

One module for the cluster stack (the burn-in) and the workload stacks (``workloads/pods.py``
re-exports it), so a new pod gets the same posture by calling the same functions. Pure
functions returning Kubernetes API dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# --- security contexts -------------------------------------------------------------------------

# No capability is added for the Neuron devices and EFA interfaces, as in the seeds: their device
# plugins hand the container the device nodes (/dev/neuron*, /dev/infiniband/uverbs*) through the
# CRI's device list, which also opens the device cgroup, and containerd gives the container's
# device nodes the pod's runAsUser and runAsGroup (device_ownership_from_security_context,
# infra/specs/user_data.py), so the namespace's id the pods run as may open them. IPC_LOCK is not
# added either (Pod Security refuses it), so
# EFA memory registrations count against the container's locked-memory limit, which is
# containerd's own unless set: AL2023's base runtime spec sets only RLIMIT_NOFILE (amazon-eks-ami
# nodeadm/internal/containerd/base-runtime-spec.json), so EFA nodes' user data adds RLIMIT_MEMLOCK
# (infra/specs/user_data.py) and the burn-in checks it on each new node (infra/specs/burn_in_objects.py).
ACCELERATOR_CAPABILITIES: tuple[str, ...] = ()

# A non-root user for images that allow it: above the node's own range (CKV_K8S_40 asks >= 10000).
UNPRIVILEGED_UID = 10001


def pod_security_context(run_as_user: int | None = None, fs_group: int | None = None) -> dict[str, Any]:
    """The pod-level context: the runtime's default seccomp profile, and a user when given.

    ``run_as_user=None`` leaves the image's user (root for the Neuron images, see the Dockerfiles).
    """
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        context.update(runAsNonRoot=run_as_user != 0, runAsUser=run_as_user, runAsGroup=run_as_user)
    if fs_group is not None:
        context["fsGroup"] = fs_group
    return context


def container_security_context(add: Sequence[str] = (), read_only_root: bool = False) -> dict[str, Any]:
    """No privilege escalation, every capability dropped but ``add``, optionally a read-only root."""
    capabilities: dict[str, list[str]] = {"drop": ["ALL"]}
    if add:
        capabilities["add"] = sorted(add)
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": capabilities,
        "readOnlyRootFilesystem": read_only_root,
    }


def pod_defaults(run_as_user: int | None = None, fs_group: int | None = None) -> dict[str, Any]:
    """Pod spec keys every pod of this project carries.

    No service account token: none of our pods calls the Kubernetes API but the gang watchdog and
    the step gates, which set their own (workloads/gang_watchdog.py, workloads/step_gate.py; the operators - Volcano,
    KubeRay, the MPI operator - do, from their own namespaces; the MPI v2 launcher reaches its
    workers over ssh, KubeRay's submitter pod is the operator's own). EKS Pod Identity does not
    need the token either: its webhook projects its own (audience pods.eks.amazonaws.com).
    """
    return {"automountServiceAccountToken": False, "securityContext": pod_security_context(run_as_user, fs_group)}


# --- Pod Security Admission --------------------------------------------------------------------

# The strictest level every training pod passes: "restricted" (kubernetes/pod-security-admission
# policy/check_*.go, v0.34.9 for Kubernetes 1.34): every pod of the workloads runs as a non-root id
# (the namespace's, or UNPRIVILEGED_UID for the gates and watchdogs), drops every capability and
# adds none back (the MPI workers' sshd runs as that id), uses the RuntimeDefault seccomp profile
# and only claim, emptyDir, configMap, secret and projected volumes. A pod TorchX 0.7.0's
# `torchx run` makes has no security context at all, so it is refused here as well as by the
# namespace-identity policy (docs/workloads.md).
PSA_ENFORCE = "restricted"
PSA_WARN = "restricted"


# The policy version the levels above were checked against: the labels pin it, so a control-plane
# upgrade does not change what is refused (Pod Security Standards, "<mode>-version": a pinned version
# evaluates that release's policy); raise it once the checks are read at a newer release.
PSA_POLICY_VERSION = "v1.34"


def pod_security_labels() -> dict[str, str]:
    """Training namespaces' labels: enforce, warn and audit restricted, each at PSA_POLICY_VERSION."""
    return pod_security_level_labels(PSA_ENFORCE, PSA_WARN)


def pod_security_level_labels(enforce: str, warn: str) -> dict[str, str]:
    """Namespace labels: enforce ``enforce``, warn and audit ``warn``, each at PSA_POLICY_VERSION."""
    labels = {
        "pod-security.kubernetes.io/enforce": enforce,
        "pod-security.kubernetes.io/enforce-version": PSA_POLICY_VERSION,
    }
    for mode in ("warn", "audit"):
        labels[f"pod-security.kubernetes.io/{mode}"] = warn
        labels[f"pod-security.kubernetes.io/{mode}-version"] = PSA_POLICY_VERSION
    return labels


# The operators' and node agents' own namespaces, each at the strictest level its pods pass at the
# pinned release, so a compromised controller image cannot start a pod there that level refuses
# (a privileged or host-path pod, the way to node root). Warn and audit name the next level up,
# or the same one at "restricted". kube-system is EKS's, not ours, and holds the privileged node
# agents (VPC CNI, kube-proxy, the EFA and Neuron device plugins, the FSx CSI node plugin).
CONTROLLER_NAMESPACE_LEVELS: dict[str, tuple[str, str]] = {
    # ray-project/kuberay v1.7.0 helm-chart/kuberay-operator: values.yaml securityContext sets
    # runAsNonRoot, seccompProfile RuntimeDefault, capabilities drop ALL, allowPrivilegeEscalation
    # false on the one container (templates/deployment.yaml), whose volumes are emptyDir and configMap.
    "kuberay-system": ("restricted", "restricted"),
    # volcano-sh/volcano v1.15.1 installer/helm/chart/volcano: values.yaml default_csc adds
    # DAC_OVERRIDE, which "restricted" refuses (it admits NET_BIND_SERVICE only) and "baseline"
    # admits (the runtime's default set); the admission (and its init Job), controller and scheduler
    # templates use no host namespace, host path or privileged container; the colocation agent
    # DaemonSet (hostNetwork, host paths) is off (colocation_enable: false).
    "volcano-system": ("baseline", "restricted"),
    # kubeflow/mpi-operator v0.8.2 deploy/v2beta1/mpi-operator.yaml: the Deployment sets no
    # securityContext (no seccomp profile, no runAsNonRoot, no dropped capabilities), so only
    # "baseline" admits it; nor does it use anything baseline refuses.
    "mpi-operator": ("baseline", "restricted"),
    # The Neuron node problem detector mounts host paths (/var/log, /dev/kmsg, /etc/localtime:
    # aws-neuron/neuron-helm-charts charts/neuron-helm-chart templates/npd-daemonset.yaml, read at
    # 1.0.0, the last release that repository holds), which "baseline" refuses.
    "neuron-healthcheck-system": ("privileged", "baseline"),
}


def controller_namespace_labels(namespace: str) -> dict[str, str]:
    enforce, warn = CONTROLLER_NAMESPACE_LEVELS[namespace]
    return pod_security_level_labels(enforce, warn)


# --- NetworkPolicies ---------------------------------------------------------------------------

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def network_policy(
    name: str, namespace: str, pod_labels: Mapping[str, str], ingress: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    """An ingress-only policy: the selected pods accept only what ``ingress`` lists (nothing if empty).

    Egress is not this policy's business: jobs reach S3, Hugging Face, ECR, DNS and each other, and
    a node-mounted FSx volume is not pod traffic at all; the one egress rule of a training
    namespace is its metadata wall (infra/specs/node_security.py metadata_wall). The VPC CNI's network policy agent always admits the
    pod's own node (aws-network-policy-agent v1.4.1 pkg/fwruleprocessor/fw_rule_processor.go:
    "Traffic from the local node should always be allowed"), so kubelet probes keep working.
    """
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": dict(pod_labels)},
            "policyTypes": ["Ingress"],
            "ingress": list(ingress),
        },
    }


def from_pods(*selectors: Mapping[str, str], ports: Sequence[int] = ()) -> dict[str, Any]:
    """An ingress rule: from pods in the policy's namespace matching any selector, on ``ports`` (all if none)."""
    rule: dict[str, Any] = {"from": [{"podSelector": {"matchLabels": dict(s)}} for s in selectors]}
    if ports:
        rule["ports"] = [{"protocol": "TCP", "port": p} for p in ports]
    return rule


def from_namespace(namespace: str, ports: Sequence[int]) -> dict[str, Any]:
    return {
        "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}}],
        "ports": [{"protocol": "TCP", "port": p} for p in ports],
    }


def from_anywhere(ports: Sequence[int | str]) -> dict[str, Any]:
    return {"ports": [{"protocol": "TCP", "port": p} for p in ports]}
