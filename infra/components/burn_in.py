"""The Trainium burn-in on the cluster: its namespace, identities, admission policies, the sweeper of
burn-ins that never started, the gang hold that keeps a passed node while its gang assembles, and one
DaemonSet per health-gated node group (infra/specs/burn_in_objects.py and gang_hold.py render them; this
declares them)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from infra.components.context import ClusterContext
from infra.specs import burn_in_objects, gang_hold
from infra.specs.dra_objects import whole_node_claim_template

_KINDS = {
    "Namespace": k8s.core.v1.Namespace,
    "ServiceAccount": k8s.core.v1.ServiceAccount,
    "ClusterRole": k8s.rbac.v1.ClusterRole,
    "ClusterRoleBinding": k8s.rbac.v1.ClusterRoleBinding,
    "ValidatingAdmissionPolicy": k8s.admissionregistration.v1.ValidatingAdmissionPolicy,
    "ValidatingAdmissionPolicyBinding": k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding,
    "DaemonSet": k8s.apps.v1.DaemonSet,
    "CronJob": k8s.batch.v1.CronJob,
    "ResourceClaimTemplate": k8s.resource.v1.ResourceClaimTemplate,
    "NetworkPolicy": k8s.networking.v1.NetworkPolicy,
}


@dataclass
class BurnInArgs:
    targets: list[burn_in_objects.BurnInTarget]
    core_node_selector: dict[str, str]
    """Where the sweeper and the gang hold run: the always-on core nodes."""
    daemon_sets_after: list[pulumi.Resource] = field(default_factory=list)
    """What provisions the nodes the DaemonSets select. Under Karpenter their node affinity names
    karpenter.sh/nodepool instead of the managed groups' label: updated before the switch has landed
    (a failed interruption queue stops the controller's release), new nodes of the managed groups
    still running would keep their startup taint and never take a job."""


class BurnIn(pulumi.ComponentResource):
    namespace: k8s.core.v1.Namespace

    def __init__(
        self, name: str, ctx: ClusterContext, args: BurnInArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:BurnIn", name, None, opts)
        declared: list[pulumi.Resource] = []
        # The gang hold with the burn-in, always: a pass holds its node, and only the hold ends that.
        cluster_objects = [
            *burn_in_objects.cluster_objects(args.core_node_selector),
            *gang_hold.cluster_objects(args.core_node_selector),
        ]
        for manifest in cluster_objects:
            declared.append(self._declare(manifest, ctx.kubernetes, list(declared)))
        self.namespace = declared[0]  # type: ignore[assignment]
        # The DaemonSets come last: the policy must be in force before any pod can patch a node.
        for target in args.targets:
            after = [*declared, *args.daemon_sets_after]
            if target.dra is not None:
                # The claim template the DaemonSet's pods name, in the burn-in's own namespace.
                claim = whole_node_claim_template(target.dra, burn_in_objects.NAMESPACE)
                after.append(self._declare(claim, ctx.kubernetes, list(declared)))
            self._declare(burn_in_objects.daemon_set(target), ctx.kubernetes, after)
        self.register_outputs({})

    def _declare(self, manifest: dict, provider: k8s.Provider, after: list[pulumi.Resource]) -> pulumi.Resource:
        # Top-level fields as the SDK's keyword arguments (roleRef -> role_ref); nested dicts keep API names.
        body = {
            re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): v
            for k, v in manifest.items()
            if k not in ("apiVersion", "kind")
        }
        name = manifest["metadata"]["name"]
        kind = manifest["kind"]
        return _KINDS[kind](
            f"burn-in-{kind.lower()}-{name}",
            **body,
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=after),
        )
