"""Who may start a pod with host access: a ValidatingAdmissionPolicy for every namespace.

A pod that is privileged, mounts a host path, or shares the node's network, PID or IPC namespace
owns the node: its root, the node role's credentials through instance metadata, and the tokens of
every pod there. The node agents need that (the VPC CNI, kube-proxy, the device plugins, the CSI
node plugins, the CloudWatch agents); nothing else this cluster runs does (the training pods, the
burn-in and every operator run without it: docs/security.md). Pod Security Admission cannot say
so for kube-system, which holds both the node agents and Deployments such as CoreDNS, Karpenter
and the FSx CSI controller; nor does a namespace label stop an operator allowed to create pods
anywhere (Volcano's controller, KubeRay, the MPI operator make pods in any namespace they are
told to).

So host access is admitted only when the pod is created by the workload controller of the
control plane for a DaemonSet (or, where a chart needs it, a ReplicaSet) in a namespace this
program lets hold node agents, and only the kinds of host access that namespace's agents use.
The requester is what tells: the API server sets ``request.userInfo`` from the caller's
credentials, and Kubernetes' DaemonSet controller calls as ``daemon-set-controller`` (kubernetes/
kubernetes cmd/kube-controller-manager/app/apps.go, startDaemonSetController:
``ClientBuilder.ClientOrDie("daemon-set-controller")``, which with
--use-service-account-credentials is the kube-system service account of that name, else the
controller manager's own user), the ReplicaSet controller as ``replicaset-controller``. Both
credentials live in the control plane. A pod's ownerReferences alone prove nothing (whoever creates
the pod writes them), so they are read only to confirm the controller's request is for a DaemonSet
(or ReplicaSet) and not some other object it manages. A compromised operator therefore reaches
host access only by writing a DaemonSet or Deployment in one of the namespaces named here, which
none of the pinned operators' roles may do (docs/security.md).

Ephemeral containers (``kubectl debug``) join a running pod's namespaces: on a pod with host access
they are refused to every requester, since none of those controllers adds them.
"""

from __future__ import annotations

import json
from typing import Any

from infra.specs import admission
from infra.specs.dra_objects import DRA_DRIVER_NAMESPACE

NAME = "host-access-only-for-node-agents"
HOST_ACCESS = ("hostIPC", "hostNetwork", "hostPID", "hostPath", "privileged")
# The control plane's identities for the two workload controllers, with and without
# --use-service-account-credentials (the module's docstring).
CONTROLLER_MANAGER = "system:kube-controller-manager"
WORKLOAD_CONTROLLERS = {
    "DaemonSet": ("system:serviceaccount:kube-system:daemon-set-controller", CONTROLLER_MANAGER),
    "ReplicaSet": ("system:serviceaccount:kube-system:replicaset-controller", CONTROLLER_MANAGER),
}


def exemptions(
    *, observability: bool, neuron_chart: bool, neuron_scheduler_extension: bool, neuron_dra: bool = False
) -> dict[str, tuple[str, ...]]:
    """``<namespace>/<owner kind>`` -> the host access its pods may have, for what this cluster installs.

    kube-system's DaemonSets: EKS's add-ons (aws-node and kube-proxy run privileged on the host
    network with host paths; the Pod Identity agent, the EBS CSI node plugin and the node monitoring
    agent), the FSx CSI node plugin (aws-fsx-csi-driver chart 1.17.0 templates/node-daemonset.yaml:
    privileged, host paths) or, with storage.kind efs, the EFS CSI node plugin (aws-efs-csi-driver chart
    4.4.1 templates/node-daemonset.yaml: privileged, the host network, host paths; its TLS proxy reaches
    the mount targets from the node), the EFA device plugin (eks-charts stable/aws-efa-k8s-device-plugin
    v0.5.30 templates/daemonset.yaml: hostNetwork, host paths; values.yaml securityContext
    privileged) and the Neuron device plugin (host paths); while a Prometheus runs, its node agents
    (infra/specs/node_metrics.py): neuron-monitor (privileged, as aws-neuron/aws-neuron-sdk 81ce03a
    src/k8/k8s-neuron-monitor-daemonset.yml runs it), the EFA exporter (the host's /sys, read-only) and
    node-exporter (prometheus-node-exporter chart 4.56.1 values.yaml: hostNetwork, hostPID, the host's
    /, /proc and /sys). Their names are not pinned here: EKS
    add-on builds are resolved at deploy time, and the Neuron chart at 1.9.0 has no readable source
    (infra/facts/versions.py), so a list of names could refuse a node agent the next build renames.
    """
    allowed: dict[str, tuple[str, ...]] = {"kube-system/DaemonSet": HOST_ACCESS}
    if neuron_chart:
        # The Neuron node problem detector: host paths (/var/log, /dev/kmsg, /etc/localtime;
        # aws-neuron/neuron-helm-charts templates/npd-daemonset.yaml, read at 1.0.0, the last release
        # that repository holds) and a privileged container: _helpers.tpl
        # nodeProblemDetector.securityContext renders `privileged: true` while
        # npd.nodeProblemDetector.securityContext is empty, its default in values.yaml, which
        # infra/components/devices.py leaves. No host network or host PID.
        allowed["neuron-healthcheck-system/DaemonSet"] = ("hostPath", "privileged")
    if neuron_dra:
        # The Neuron DRA driver's kubelet plugin, in the namespace the chart creates for it: the host network
        # and host paths (the kubelet's plugin and registry directories, the CDI directory), not privileged
        # (neuron-helm-charts templates/dra-driver/dra-driver-daemonset.yaml, 97e1b7d3: hostNetwork: true;
        # values.yaml at 1.9.0: draDriver.volumes, securityContext {}). aws-dranet runs in kube-system.
        allowed[f"{DRA_DRIVER_NAMESPACE}/DaemonSet"] = ("hostNetwork", "hostPath")
    if neuron_chart and neuron_scheduler_extension:
        # The Neuron scheduler extension is a Deployment on the host network
        # (templates/scheduler-extn.yaml at 1.0.0: hostNetwork: true, no host path, not privileged).
        allowed["kube-system/ReplicaSet"] = ("hostNetwork",)
    if observability:
        # The CloudWatch add-on's agents: the cloudwatch-agent, fluent-bit and neuron-monitor
        # DaemonSets use host paths and the host network (aws-observability/helm-charts
        # charts/amazon-cloudwatch-observability templates/linux/*-daemonset.yaml and
        # cloudwatch-agent-custom-resource.yaml); its cluster scraper is a Deployment that takes the
        # same agent defaults (values.yaml agents: cloudwatch-agent-cluster-scraper, mode: deployment;
        # agent.hostNetwork: true) and the same host-path volumes.
        allowed["amazon-cloudwatch/DaemonSet"] = HOST_ACCESS
        allowed["amazon-cloudwatch/ReplicaSet"] = ("hostNetwork", "hostPath")
    return allowed


def _cel(value: Any) -> str:
    """A CEL literal for strings, lists and maps of them (JSON's syntax is CEL's for these)."""
    return json.dumps(value)


# Containers, init containers and ephemeral containers are three types in the Pod schema: each list
# is tested on its own, never concatenated.
_PRIVILEGED = " || ".join(
    f"object.spec.{field}.exists(c, c.?securityContext.?privileged.orValue(false))"
    for field in ("containers", "?initContainers.orValue([])", "?ephemeralContainers.orValue([])")
)
VARIABLES: tuple[tuple[str, str], ...] = (
    (
        "hostAccess",
        "(object.spec.?hostIPC.orValue(false) ? ['hostIPC'] : [])"
        " + (object.spec.?hostNetwork.orValue(false) ? ['hostNetwork'] : [])"
        " + (object.spec.?hostPID.orValue(false) ? ['hostPID'] : [])"
        " + (object.spec.?volumes.orValue([]).exists(v, has(v.hostPath)) ? ['hostPath'] : [])"
        f" + ({_PRIVILEGED} ? ['privileged'] : [])",
    ),
    (
        # The kind of workload a control-plane controller creates this pod for, '' for anyone else.
        "ownerKind",
        "request.operation != 'CREATE' ? '' : "
        + " : ".join(
            f"request.userInfo.username in {_cel(list(identities))}"
            " && object.metadata.?ownerReferences.orValue([]).exists(r,"
            f" r.?controller.orValue(false) && r.apiVersion == 'apps/v1' && r.kind == '{kind}') ? '{kind}'"
            for kind, identities in WORKLOAD_CONTROLLERS.items()
        )
        + " : ''",
    ),
)


def admission_policy(allowed: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    allowed_map = _cel({key: list(kinds) for key, kinds in sorted(allowed.items())})
    return admission.validating_policy(
        NAME,
        {
            "matchConstraints": {"resourceRules": admission.POD_WRITES},
            "variables": [
                *({"name": name, "expression": expression} for name, expression in VARIABLES),
                {
                    "name": "allowed",
                    "expression": f"{allowed_map}[?(request.namespace + '/' + variables.ownerKind)].orValue([])",
                },
            ],
            "validations": [
                {
                    "expression": "variables.hostAccess.all(a, a in variables.allowed)",
                    "message": "host access (privileged, a host path, the node's network, PID or IPC namespace) is "
                    "admitted only for the node agents' DaemonSets in the namespaces that hold them "
                    f"(ValidatingAdmissionPolicy {NAME})",
                }
            ],
        },
    )


def admission_policy_binding() -> dict[str, Any]:
    # No namespace selector: every namespace, kube-system included.
    return admission.deny_binding(NAME)
