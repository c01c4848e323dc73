"""What every component of the cluster stack shares: the account, region and cluster it builds in, the
tags on all it makes, and (once the cluster is declared) the cluster's name as an Output and the
Kubernetes provider."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class ClusterContext:
    """One cluster's context, passed to each component as ``Component(name, ctx, args)``.

    It is also the scope of the stack's Pod Identity roles: their trust policies admit the pods of
    this one cluster (``cluster_arn``) in this account (infra/components/iam.py).
    """

    partition: str
    region: str
    account_id: str
    cluster_name: str
    """The name as text: known before anything is declared, for names, tags, policies and chart values."""
    tags: dict[str, str]
    permissions_boundary_arn: str | None = None
    """The permissions boundary every IAM role of the stack carries (``permissionsBoundary``), or None."""
    _cluster_name_output: pulumi.Output[str] | None = field(default=None, repr=False)
    _kubernetes: k8s.Provider | None = field(default=None, repr=False)

    @property
    def cluster_arn(self) -> str:
        return f"arn:{self.partition}:eks:{self.region}:{self.account_id}:cluster/{self.cluster_name}"

    def with_cluster(self, name: pulumi.Output[str], kubernetes: k8s.Provider) -> ClusterContext:
        """The same context once the cluster is declared, for the components that build on it."""
        return replace(self, _cluster_name_output=name, _kubernetes=kubernetes)

    @property
    def cluster_name_output(self) -> pulumi.Output[str]:
        """The name as an Output of the EKS cluster (EksCluster.name): a resource given it waits for the
        control plane."""
        if self._cluster_name_output is None:
            raise ValueError(f"{self.cluster_name}: the cluster's name as an Output exists once it is declared")
        return self._cluster_name_output

    @property
    def kubernetes(self) -> k8s.Provider:
        """The provider for objects on the cluster, given to each such child explicitly (``provider=``).

        Not as the component's own ``provider`` option: a component resource's registration waits
        for the URN and ID of every provider in its options (pulumi 3.272.0,
        sdk/python/lib/pulumi/runtime/resource.py prepare_resource, ``provider_refs`` for a
        non-custom resource), and each child's for its parent's URN. The AWS children of a
        component (FSx file system, IAM roles, Karpenter's queue) would then wait until the
        provider exists, that is until the core nodes, CoreDNS and the admins' access entries do.
        """
        if self._kubernetes is None:
            raise ValueError(f"{self.cluster_name}: the Kubernetes provider exists once the cluster is declared")
        return self._kubernetes
