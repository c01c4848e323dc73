"""Small helpers for Kubernetes resources declared through the cluster's provider."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra import contract
from infra.facts.versions import ChartPin
from infra.specs.node_template import BURN_IN_TAINT, JOB_SUPPORT_LABELS, JOB_SUPPORT_TAINT, NEURON_TAINT
from infra.specs.system_capacity import node_allocatable

# Tolerating the taint every accelerator node carries.
NEURON_TOLERATION = {"key": NEURON_TAINT.key, "operator": "Exists", "effect": NEURON_TAINT.effect}
# The node agents a new Trainium node needs before its burn-in can pass (the Neuron and EFA device
# plugins advertise the devices it checks; the problem detector watches it meanwhile) tolerate the
# burn-in's taint too. Training pods never do.
BURN_IN_TOLERATION = {"key": BURN_IN_TAINT.key, "operator": "Exists", "effect": BURN_IN_TAINT.effect}
CORE_NODE_SELECTOR = {"role": "core"}
# On the core nodes, which live in the private subnets that the file system's root squash exempts
# (infra/components/storage.py). Only the kube-system Jobs that must act as root on the file system
# select it: during the `pulumi up` that moves the core group into those subnets, the group's old
# nodes (still in the node subnets, so squashed) lack it, and nothing of ours lands there as root.
ROOT_SQUASH_EXEMPT_LABELS = {"storage.trainium-eks/root-squash-exempt": "true"}
ROOT_SQUASH_EXEMPT_SELECTOR = {**CORE_NODE_SELECTOR, **ROOT_SQUASH_EXEMPT_LABELS}
# Where jobs put the pods that need no accelerator; exported for the workload stacks.
JOB_SUPPORT_PLACEMENT = {
    "nodeSelector": {"role": JOB_SUPPORT_LABELS["role"]},
    "tolerations": [
        {
            "key": JOB_SUPPORT_TAINT.key,
            "operator": "Equal",
            "value": JOB_SUPPORT_TAINT.value,
            "effect": JOB_SUPPORT_TAINT.effect,
        }
    ],
}


def job_support_output(
    group: Any, features: Any, ebs_csi: bool = False, metrics_agents: bool = False, efs: bool = False
) -> dict[str, Any]:
    """``jobSupportPlacement`` as the workload stacks read it (infra/contract.py): where a job's CPU
    pods go, and how much the group holds (maxSize nodes, each leaving ``allocatable`` to pods; with
    several instance types, the smallest's, so a check on it never promises more than a node has).
    ``ebs_csi``, ``metrics_agents``, ``efs``: the DaemonSets on every node (node_allocatable)."""
    sizes = [
        a
        for t in group.instance_types
        if (a := node_allocatable(t, features, False, metrics_agents=metrics_agents, ebs_csi=ebs_csi, efs=efs))
        is not None
    ]
    smallest = min(sizes, key=lambda a: (int(a["cpu"].rstrip("m")), int(a["memory"].rstrip("Mi"))), default=None)
    return contract.exported(
        contract.JobSupportPlacement,
        node_selector=JOB_SUPPORT_PLACEMENT["nodeSelector"],
        tolerations=JOB_SUPPORT_PLACEMENT["tolerations"],
        max_size=group.max_size,
        allocatable=smallest,
    )


def helm_release(
    name: str,
    pin: ChartPin,
    namespace: str,
    values: pulumi.Input[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    *,
    create_namespace: bool = False,
    skip_crds: bool = False,
) -> k8s.helm.v3.Release:
    """A pinned Helm release. helm.v3.Release (not helm.v4.Chart) so charts' hooks run: Volcano
    1.15.1's pre-install hook Job (templates/admission-init.yaml) creates the certificate Secret its
    admission Deployment mounts, and pulumi-kubernetes 4.34.2's helm.v4.Chart omits hook objects
    outside render mode (its ``include_hooks`` documentation). Volcano's webhook configurations are
    plain templates (templates/webhooks.yaml), deleted with the release; there is no pre-delete hook."""
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=pin.chart,
        version=pin.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=pin.repository) if pin.repository else None,
        namespace=namespace,
        create_namespace=create_namespace,
        # Only for charts whose CRDs another release owns (Helm installs a chart's crds/ once and
        # never upgrades them).
        skip_crds=True if skip_crds else None,
        values=values,
        # Wait for the workloads to be ready so dependents (CRs, PVCs) find CRDs and webhooks.
        atomic=True,
        cleanup_on_fail=True,
        timeout=900,
        opts=opts,
    )


def kubeconfig_for(kubeconfig: str | dict[str, Any], profile: str | None) -> str:
    """The kubeconfig with its ``aws eks get-token`` bound to ``profile``, or to the caller's
    default credential chain when None.

    pulumi-eks writes the profile as ``--profile`` (not AWS_PROFILE, which ambient credentials
    override: pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts, generateKubeconfig). The
    program's own provider needs the stack's ``aws:profile``; the exported kubeconfig must
    carry none, so every other user authenticates as themselves.
    """
    config = json.loads(kubeconfig) if isinstance(kubeconfig, str) else json.loads(json.dumps(kubeconfig))
    for user in config.get("users", []):
        exec_ = user.get("user", {}).get("exec")
        if not exec_:
            continue
        args, kept = list(exec_.get("args", [])), []
        while args:
            arg = args.pop(0)
            if arg == "--profile":
                args = args[1:]
            elif not arg.startswith("--profile="):
                kept.append(arg)
        exec_["args"] = kept + (["--profile", profile] if profile else [])
        exec_["env"] = [e for e in exec_.get("env") or [] if e.get("name") != "AWS_PROFILE"] or None
        if exec_["env"] is None:
            del exec_["env"]
    return json.dumps(config)


def admission_policy(
    name: str, policy: dict[str, Any], binding: dict[str, Any], opts: pulumi.ResourceOptions
) -> tuple[k8s.admissionregistration.v1.ValidatingAdmissionPolicy, pulumi.Resource]:
    """A ValidatingAdmissionPolicy and its binding, from their specs (infra/specs); the binding waits
    for the policy it names."""
    declared = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        name, metadata=policy["metadata"], spec=policy["spec"], opts=opts
    )
    bound = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        name,
        metadata=binding["metadata"],
        spec=binding["spec"],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[declared])),
    )
    return declared, bound


def spread_across_nodes(pod_labels: dict[str, str]) -> dict[str, Any]:
    """Prefer a node without another replica. Preferred, not required: with two core nodes, a
    required rule would leave the new replica Pending during a node roll, and the disruption budget
    would then hold the drain of the other node."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": dict(pod_labels)},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


def disruption_budget(
    name: str, namespace: str, pod_labels: dict[str, str], opts: pulumi.ResourceOptions
) -> k8s.policy.v1.PodDisruptionBudget:
    """One replica at a time may be evicted (a drain, a node roll); the other keeps the lease. At one replica
    (a one-node core group) the budget still lets that one go, so a drain is never blocked."""
    return k8s.policy.v1.PodDisruptionBudget(
        f"{namespace}-{name}",
        metadata={"name": name, "namespace": namespace},
        spec={"maxUnavailable": 1, "selector": {"matchLabels": dict(pod_labels)}},
        opts=opts,
    )
