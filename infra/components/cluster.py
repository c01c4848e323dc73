"""The EKS control plane, its identity plumbing, managed add-ons and the core node group."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from infra.components import launch_template as lt
from infra.components.autoscaling import tag_node_template
from infra.components.context import ClusterContext
from infra.components.iam import bounded_roles, managed_policy, node_role_with_policies, pod_identity_role
from infra.components.kube import CORE_NODE_SELECTOR, ROOT_SQUASH_EXEMPT_LABELS, kubeconfig_for
from infra.config.models import CoreNodeGroupConfig, EndpointAccessConfig, JobNodeGroupConfig
from infra.facts import addons
from infra.facts.versions import CORE_AMI_TYPE
from infra.lookups import MANAGED_ENTRY_TAG
from infra.specs import node_security
from infra.specs.node_template import JOB_SUPPORT_LABELS, JOB_SUPPORT_TAINT, Taint, label_taint_tags

CORE_NODE_LABELS = {**CORE_NODE_SELECTOR, **ROOT_SQUASH_EXEMPT_LABELS}
NETWORK_POLICIES = True


EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"


def pulumi_eks_cni_urn(cluster_urn: str) -> str:
    """The URN of the vpc-cni add-on pulumi-eks 4.4.0 declared inside the eks.Cluster ``cluster_urn``:
    an aws.eks.Addon ``<cluster>-vpc-cni`` in a VpcCniAddon of that name, a child of the cluster
    component (nodejs/eks/cluster/cluster.ts createCore, nodejs/eks/addons/cni-addon.ts)."""
    prefix, _, name = cluster_urn.rpartition("::")
    return f"{prefix}$eks:index:VpcCniAddon$aws:eks/addon:Addon::{name}-vpc-cni"


def admin_policy_arn(partition: str, policy: str = "AmazonEKSClusterAdminPolicy") -> str:
    """EKS access policies live in the ``eks`` service namespace of the cluster's partition."""
    return f"arn:{partition}:eks::aws:cluster-access-policy/{policy}"


# EKS user guide, "Review access policy permissions": list/view every resource, Secrets
# included (Helm keeps its release records in Secrets, which `pulumi preview --refresh` reads).
VIEW_POLICY = "AmazonEKSAdminViewPolicy"


def principal_key(arn: str, role: str = "admin") -> str:
    """A resource name per principal (ARNs contain '::', which URNs reserve): the same admin
    keeps the same entry whatever the order of the list."""
    kind_and_name = arn.split(":", 5)[5]
    slug = re.sub(r"[^A-Za-z0-9-]+", "-", kind_and_name).strip("-")[:48]
    return f"{role}-{slug}-{hashlib.sha256(arn.encode()).hexdigest()[:8]}"


def control_plane_log_group(cluster_name: str) -> str:
    """The group EKS writes control-plane logs to; created first so it has a retention."""
    return f"/aws/eks/{cluster_name}/cluster"


@dataclass
class EksClusterArgs:
    kubernetes_version: str
    vpc_id: pulumi.Input[str]
    control_plane_subnet_ids: Sequence[pulumi.Input[str]]
    node_subnet_ids: Sequence[pulumi.Input[str]]
    """Where the job-support group's nodes (and their pods) get their addresses: the secondary range."""
    core_subnet_ids: Sequence[pulumi.Input[str]]
    """The core group's subnets: the private ones, which the file system's root squash exempts, so root
    on a core node is root on FSx (infra/components/storage.py). What runs there as root is only this
    program's kube-system pods; training namespaces never run as root (infra/specs/namespace_identity.py)."""
    endpoint_access: EndpointAccessConfig
    admin_principal_arns: list[str]
    """Admins that need an access entry (EKS's cluster-creator entry already exists for the creator)."""
    log_types: list[str]
    log_retention_days: int
    upgrade_policy: str
    core_node_group: CoreNodeGroupConfig
    job_node_group: JobNodeGroupConfig
    addon_builds: dict[str, str]
    node_monitoring_agent: bool
    controller_replicas: int
    """CoreDNS's replicas (infra/specs/system_capacity.py controller_replicas)."""
    ebs_csi: bool
    """The EBS CSI add-on, for what makes EBS volumes (MonitoringConfig.ebs_volumes)."""
    session_manager: bool = False
    """AmazonSSMManagedInstanceCore on the node role (features.sessionManager)."""
    profile: str | None = None
    viewer_principal_arns: list[str] = field(default_factory=list)
    """Principals with read access (the pipeline's preview role, which runs pull requests' code)."""


class EksCluster(pulumi.ComponentResource):
    name: pulumi.Output[str]
    kubernetes_version: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_provider_url: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    core_node_group_name: pulumi.Output[str]

    def __init__(
        self, name: str, ctx: ClusterContext, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:EksCluster", name, None, opts)
        self._ctx = ctx
        child = pulumi.ResourceOptions(parent=self)

        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {ctx.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            tags=ctx.tags,
            opts=child,
        )
        aws.kms.Alias(
            f"{name}-secrets-alias", name=f"alias/eks/{ctx.cluster_name}", target_key_id=secrets_key.key_id, opts=child
        )

        log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=control_plane_log_group(ctx.cluster_name),
            retention_in_days=args.log_retention_days,
            tags=ctx.tags,
            opts=child,
        )
        cluster = eks.Cluster(
            f"{name}-eks",
            name=ctx.cluster_name,
            version=args.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.control_plane_subnet_ids,
            endpoint_public_access=args.endpoint_access.public,
            endpoint_private_access=args.endpoint_access.private,
            public_access_cidrs=args.endpoint_access.effective_public_cidrs(),
            # Node groups are ours (below and in AcceleratorNodeGroups), with our launch templates.
            skip_default_node_group=True,
            # Use the security group EKS creates; every node interface gets it explicitly.
            skip_default_security_groups=True,
            # The creator is admin through EKS's cluster-creator bootstrap (pulumi-eks turns it
            # on); further admins get access entries (below).
            authentication_mode=eks.AuthenticationMode.API,
            create_oidc_provider=True,
            enabled_cluster_log_types=args.log_types,
            encryption_config_key_arn=secrets_key.arn,
            # EKS-managed add-ons only, each pinned: no self-managed copies installed at creation.
            bootstrap_self_managed_addons=False,
            # The VPC CNI add-on is ours (below): pulumi-eks's VpcCniAddon takes an IRSA role only
            # (nodejs/eks/addons/cni-addon.ts: serviceAccountRoleArn, no Pod Identity), and an IRSA
            # role would need this cluster's OIDC provider before the cluster exists.
            use_default_vpc_cni=True,
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(version=args.addon_builds[addons.KUBE_PROXY]),
            # CoreDNS needs nodes to become healthy, so it is created after the core node group.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            # pulumi-eks defaults to EXTENDED support ($0.60/h once the version leaves standard
            # support); the stack chooses.
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=args.upgrade_policy),
            # Its own kubeconfig (and internal Kubernetes provider) use the stack's aws:profile.
            provider_credential_opts=eks.KubeconfigOptionsArgs(profile_name=args.profile) if args.profile else None,
            tags=ctx.tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[log_group],
                transforms=[bounded_roles(ctx.permissions_boundary_arn)] if ctx.permissions_boundary_arn else None,
            ),
        )
        # A name that carries the dependency on the cluster, so node groups wait for it.
        self.name = cluster.urn.apply(lambda _: ctx.cluster_name)
        # Every node group's `version`, carrying the same dependency: a raised version reaches the
        # groups only once the control plane runs it (EKS refuses a node group newer than its
        # control plane). eks.Cluster is a remote component, and a dependency on one waits for its
        # construction, children included (pulumi SDK 3.272.0, runtime/rpc.py _add_dependency).
        self.kubernetes_version = cluster.urn.apply(lambda _: args.kubernetes_version)

        node_role, node_policies = node_role_with_policies(
            f"{name}-node",
            f"EKS nodes of {ctx.cluster_name}",
            ctx,
            node_security.node_policies(args.session_manager),
            child,
        )

        self.admin_entries = self._admin_entries(args, cluster)
        pod_identity_agent = self._addon(name, args, addons.POD_IDENTITY_AGENT, [cluster])
        # Nodes become Ready only once aws-node runs with its permissions: the groups wait for it.
        node_policies.append(self._vpc_cni(name, args, cluster.urn, [cluster, pod_identity_agent]))
        # Node auto repair on the core group: its Auto Scaling group replaces only an instance that fails EC2's
        # health check, so a node whose kubelet or OS stops, on a running instance, would stay NotReady, and with
        # one core node nothing else (CoreDNS, the schedulers, cluster-autoscaler all ran there) acts on it. EKS
        # reacts to the kubelet's Ready condition by itself, and to the node monitoring agent's conditions
        # (features.nodeMonitoringAgent, on by default, on every node), after 30 minutes
        # (awsdocs/amazon-eks-user-guide 4d52b4d0 latest/ug/nodes/node-health.adoc, "Node auto repair"). EKS's
        # own defaults: there is nothing Neuron to tune on these nodes.
        core_group = self._cpu_node_group(
            name, args, node_role, node_policies, "core", args.core_node_group, CORE_NODE_LABELS, [],
            args.core_subnet_ids, aws.eks.NodeGroupNodeRepairConfigArgs(enabled=True),
        )  # fmt: skip
        self.job_node_group = self._cpu_node_group(
            name, args, node_role, node_policies, "job-support", args.job_node_group, JOB_SUPPORT_LABELS,
            [JOB_SUPPORT_TAINT], args.node_subnet_ids,
        )  # fmt: skip
        # replicaCount, the add-on's key for its Deployment's replicas (awsdocs/amazon-eks-user-guide 4d52b4d0
        # latest/ug/networking/eks-networking-add-ons.adoc l.3971-3976; its whole schema is what `aws eks
        # describe-addon-configuration` returns for the build, which nothing offline can read), said even at the
        # add-on's default of two, so a stack that goes from one back to two sets it rather than removes it.
        # Its PodDisruptionBudget is maxUnavailable 1 (same page, l.3833-3840), which a drain passes at one.
        self.coredns = self._addon(
            name,
            args,
            addons.COREDNS,
            [core_group],
            configuration_values=json.dumps({"replicaCount": args.controller_replicas}),
        )
        if args.node_monitoring_agent:
            # Needs no AWS permissions (EKS user guide, node monitoring agent add-on).
            self._addon(name, args, addons.NODE_MONITORING_AGENT, [core_group])
        # Only for what makes EBS volumes: the in-cluster Prometheus (monitoring.prometheus: in-cluster), whose
        # volumes exist only while it does, so turning it off leaves no volume of the driver's behind; its
        # controller and node pods cost every stack otherwise (infra/specs/system_capacity.py).
        self.ebs_csi = (
            self._addon_with_role(
                name,
                args,
                addons.EBS_CSI,
                role_name="ebs-csi",
                what="EBS CSI controller",
                service_account=("kube-system", EBS_CSI_SERVICE_ACCOUNT),
                managed_policy_name="service-role/AmazonEBSCSIDriverPolicy",
                depends_on=[core_group, pod_identity_agent],
            )
            if args.ebs_csi
            else None
        )

        # For everyone else (exported): their own credentials. For this program: the stack's profile.
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json.apply(lambda k: kubeconfig_for(k, None)))
        self.deployer_kubeconfig = pulumi.Output.secret(
            cluster.kubeconfig_json.apply(lambda k: kubeconfig_for(k, args.profile))
        )
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_provider_url = cluster.oidc_provider_url
        self.cluster_security_group_id = cluster.cluster_security_group_id
        self.node_role_arn = node_role.arn
        self.node_policies = node_policies
        self.core_node_group = core_group
        self.core_node_group_name = core_group.node_group_name
        self.register_outputs({"name": self.name})

    def _vpc_cni(
        self, name: str, args: EksClusterArgs, cluster_urn: pulumi.Output[str], depends_on: list[pulumi.Resource]
    ) -> aws.eks.Addon:
        """The VPC CNI with its own role: AmazonEKS_CNI_Policy (ENI create/attach/modify/delete on
        "*") belongs to the aws-node service account through EKS Pod Identity, not to the node
        role every pod could once reach. The CNI supports the Pod Identity agent
        (aws/amazon-vpc-cni-k8s#2780; terraform-aws-modules/terraform-aws-eks-pod-identity ships an
        aws_vpc_cni role for it), and aws-node runs on the host network, where the agent
        (169.254.170.23, host network too) answers before the node is Ready.
        """
        return self._addon_with_role(
            name,
            args,
            addons.VPC_CNI,
            role_name="vpc-cni",
            what="VPC CNI (aws-node)",
            service_account=(node_security.CNI_NAMESPACE, node_security.CNI_SERVICE_ACCOUNT),
            managed_policy_name=node_security.CNI_POLICY,
            depends_on=depends_on,
            # NetworkPolicies are enforced only with the CNI's network policy agent on: the
            # aws-vpc-cni chart's key (charts/aws-vpc-cni/values.yaml, v1.20.4; its node agent is on
            # by default), as pulumi-eks wrote it (cni-addon.ts, mergeConfigurationValues). The
            # agent needs kernel 5.10+ (AL2023: 6.1) and Kubernetes 1.25+.
            configuration_values=json.dumps({"enableNetworkPolicy": "true" if NETWORK_POLICIES else "false"}),
            # As pulumi-eks had it: deleting the resource leaves aws-node running on the cluster.
            preserve=True,
            # The add-on pulumi-eks declared until now (eks:index:VpcCniAddon, child of the
            # cluster component): adopted, not created again (EKS refuses a second vpc-cni).
            aliases=[cluster_urn.apply(pulumi_eks_cni_urn)],
        )

    def _admin_entries(self, args: EksClusterArgs, cluster: eks.Cluster) -> list[pulumi.Resource]:
        """An access entry and access policy association per admin and viewer, keyed by principal."""
        entries: list[pulumi.Resource] = []
        partition = self._ctx.partition
        grants = [(arn, "admin", "cluster-admin", admin_policy_arn(partition)) for arn in args.admin_principal_arns]
        grants += [
            (arn, "viewer", "admin-view", admin_policy_arn(partition, VIEW_POLICY))
            for arn in args.viewer_principal_arns
        ]
        for arn, role, suffix, policy_arn in grants:
            key = principal_key(arn, role)
            entry = aws.eks.AccessEntry(
                key,
                cluster_name=self.name,
                principal_arn=arn,
                type="STANDARD",
                # Marks the entry as this program's, unlike EKS's cluster-creator entry.
                tags={**self._ctx.tags, MANAGED_ENTRY_TAG: "true"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
            )
            entries.append(
                aws.eks.AccessPolicyAssociation(
                    f"{key}-{suffix}",
                    cluster_name=self.name,
                    principal_arn=arn,
                    policy_arn=policy_arn,
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
                )
            )
        return entries

    def _addon(
        self,
        name: str,
        args: EksClusterArgs,
        addon: str,
        depends_on: list[pulumi.Resource],
        aliases: list[pulumi.Input[str]] | None = None,
        **extra: object,
    ) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=self.name,
            addon_name=addon,
            addon_version=args.addon_builds[addon],
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=self._ctx.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on, aliases=aliases),
            **extra,  # type: ignore[arg-type]
        )

    def _addon_with_role(
        self,
        name: str,
        args: EksClusterArgs,
        addon: str,
        role_name: str,
        what: str,
        service_account: tuple[str, str],
        managed_policy_name: str,
        depends_on: list[pulumi.Resource],
        aliases: list[pulumi.Input[str]] | None = None,
        **extra: object,
    ) -> aws.eks.Addon:
        """An add-on whose service account has a Pod Identity role of its own (``name-role_name``)
        with one AWS managed policy, bound through the add-on; the add-on waits for the policy."""
        role, permissions = pod_identity_role(
            f"{name}-{role_name}",
            description=f"{what} of {self._ctx.cluster_name}",
            parent=self,
            cluster=self._ctx,
            service_account=service_account,
            managed_policy_arns=(managed_policy(self._ctx.partition, managed_policy_name),),
        )
        return self._addon(
            name,
            args,
            addon,
            [*depends_on, *permissions],
            aliases,
            pod_identity_associations=[
                aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=service_account[1])
            ],
            **extra,
        )

    def _cpu_node_group(
        self,
        name: str,
        args: EksClusterArgs,
        node_role: aws.iam.Role,
        node_policies: list[aws.iam.RolePolicyAttachment],
        group_name: str,
        group: CoreNodeGroupConfig | JobNodeGroupConfig,
        labels: dict[str, str],
        taints: list[Taint],
        subnet_ids: Sequence[pulumi.Input[str]],
        node_repair: aws.eks.NodeGroupNodeRepairConfigArgs | None = None,
    ) -> aws.eks.NodeGroup:
        """A general-purpose group: `core` (system pods, always on) or `job-support` (from zero)."""
        template = aws.ec2.LaunchTemplate(
            f"{name}-{group_name}-lt",
            description=f"{group_name} nodes of {self._ctx.cluster_name}",
            metadata_options=lt.metadata_options(),
            block_device_mappings=[lt.root_volume(group.disk_size_gib)],
            tag_specifications=lt.tag_specifications(
                {**self._ctx.tags, "Name": f"{self._ctx.cluster_name}-{group_name}"}
            ),
            update_default_version=True,
            tags=self._ctx.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        node_group = aws.eks.NodeGroup(
            f"{name}-{group_name}",
            cluster_name=self.name,
            # A prefix, not a fixed name: changing the instance types or the subnets replaces the group,
            # and the new one (a unique name) comes up before the old one goes, so system pods move over.
            node_group_name_prefix=f"{group_name}-",
            node_role_arn=node_role.arn,
            subnet_ids=subnet_ids,
            # Without it the provider never sees the group lag the control plane (pulumi-aws 7.51.1
            # eks/node_group.py: "drift detection only if a configuration value is provided").
            version=self.kubernetes_version,
            ami_type=CORE_AMI_TYPE,
            capacity_type="ON_DEMAND",
            instance_types=group.instance_types,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=group.min_size, desired_size=group.desired_size, max_size=group.max_size
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=template.id, version=template.latest_version.apply(str)
            ),
            labels=labels,
            taints=[aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=t.eks_effect) for t in taints] or None,
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            node_repair_config=node_repair,
            tags=self._ctx.tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=node_policies,
                # cluster-autoscaler owns the desired size once the group exists.
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )
        if group.min_size == 0:
            tag_node_template(f"{name}-{group_name}", node_group, label_taint_tags(labels, taints), self)
        return node_group
