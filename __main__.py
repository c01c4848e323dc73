"""The cluster stack: network, EKS, Trainium node groups. Wiring only; logic lives in infra/."""

import pulumi
import pulumi_kubernetes as k8s

from infra import contract, lookups, validate
from infra.components.accelerators import AcceleratorNodeGroups, AcceleratorNodeGroupsArgs, group_spec
from infra.components.autoscaling import Autoscaling, AutoscalingArgs
from infra.components.burn_in import BurnIn, BurnInArgs
from infra.components.cluster import EksCluster, EksClusterArgs
from infra.components.context import ClusterContext
from infra.components.devices import DevicePlugins, DevicePluginsArgs, NodeRecoveryArgs
from infra.components.efs_storage import EfsStorage, EfsStorageArgs
from infra.components.identities import TRAINING_SERVICE_ACCOUNT, TrainingIdentities, TrainingIdentitiesArgs
from infra.components.karpenter import Karpenter, KarpenterArgs
from infra.components.kube import (
    CORE_NODE_SELECTOR,
    admission_policy,
    job_support_output,
)
from infra.components.network import Network, NetworkArgs
from infra.components.observability import (
    Grafana,
    GrafanaArgs,
    InClusterPrometheus,
    InClusterPrometheusArgs,
    ManagedPrometheus,
    NodeMetrics,
    Observability,
    ObservabilityArgs,
    PrometheusArgs,
)
from infra.components.registries import Registries, RegistriesArgs
from infra.components.schedulers import Schedulers, SchedulersArgs
from infra.components.storage import FsxStorage, FsxStorageArgs, directory_claim_name
from infra.facts import addons
from infra.specs import host_access, namespace_identity, node_security
from infra.specs import nodepools as karpenter_plan
from infra.specs.burn_in_objects import IMAGE as BURN_IN_IMAGE
from infra.specs.burn_in_objects import NAMESPACE as BURN_IN_NAMESPACE
from infra.specs.burn_in_objects import BurnInTarget
from infra.specs.lustre_nids import no_squash_nids
from infra.specs.placement import choose_placement, with_reservation_zones
from infra.specs.system_capacity import controller_replicas, node_allocatable

config = validate.load()
validate.check_against_the_account(config)
lookups.core_instance_types(config.core_node_group.instance_types)
lookups.core_instance_types(config.job_node_group.instance_types, "jobNodeGroup")
cloud = lookups.look_up(config.region, sorted({g.instance_type for g in config.accelerator_node_groups}))
blocks = lookups.capacity_blocks(config.accelerator_node_groups)
groups = with_reservation_zones(config.accelerator_node_groups, blocks)
placement = choose_placement(cloud.zones, cloud.offerings, groups, config.network.az_count, config.region)
placement = validate.check_zones_kept(config, placement)
validate.check_group_replacements(config, groups, placement)
features = config.features
use_karpenter = config.node_provisioner == "karpenter"
# The DaemonSets every node runs besides the always-on ones: a Prometheus's node agents, the EBS CSI driver's,
# and the shared file system's CSI node plugin (EFS's or FSx's).
metrics_agents = config.monitoring.prometheus != "off"
ebs_csi = config.monitoring.ebs_volumes
efs = config.storage.kind == "efs"
# The leader-elected controllers and CoreDNS: one replica on a one-node core group, two otherwise.
replicas = controller_replicas(config.core_node_group.min_size)
specs = [
    group_spec(
        g,
        cloud.instance_facts[g.instance_type],
        placement.group_zones[g.name],
        node_allocatable(
            g.instance_type,
            features,
            accelerator=True,
            dra=g.dra,
            efa=g.efa_enabled,
            metrics_agents=metrics_agents,
            ebs_csi=ebs_csi,
            efs=efs,
        ),
        provisioner=config.node_provisioner,
        capacity_block=blocks[g.name].window() if g.name in blocks else None,
    )
    for g in groups
]
wanted_addons = addons.wanted(
    observability=features.observability, node_monitoring_agent=features.node_monitoring_agent, ebs_csi=ebs_csi
)
addon_builds = lookups.addon_builds(config.kubernetes_version, wanted_addons, config.addon_versions)
# EKS made an access entry for whoever created the cluster; a second one would be refused.
creator_admins = lookups.bootstrap_admins(config.cluster_name, config.cluster_admins, cloud.deployer_arn)
validate.check_end_of_support(config)
# Everything above is validation and look-ups; resources are declared from here on.

tags = {"project": "trainium-eks", "cluster": config.cluster_name, "stack": pulumi.get_stack(), **config.tags}
# The pipeline's deploy role creates and changes roles only with this boundary (bootstrap/permissions.py).
boundary_arn = (
    f"arn:{cloud.partition}:iam::{cloud.account_id}:policy/{config.permissions_boundary}"
    if config.permissions_boundary
    else None
)
ctx = ClusterContext(cloud.partition, config.region, cloud.account_id, config.cluster_name, tags, boundary_arn)

network = Network(
    "network",
    ctx,
    NetworkArgs(
        vpc_cidr=config.network.vpc_cidr,
        secondary_cidr=config.network.secondary_cidr,
        zones=placement.zones,
        nat_gateways=config.network.nat_gateways,
        node_subnet_tags={karpenter_plan.DISCOVERY_TAG: config.cluster_name} if use_karpenter else {},
    ),
)

cluster = EksCluster(
    "cluster",
    ctx,
    EksClusterArgs(
        kubernetes_version=config.kubernetes_version,
        vpc_id=network.vpc_id,
        control_plane_subnet_ids=network.private_subnet_ids,
        node_subnet_ids=network.node_subnet_ids,
        core_subnet_ids=network.private_subnet_ids,
        endpoint_access=config.endpoint_access,
        admin_principal_arns=[a for a in config.cluster_admins if a not in creator_admins],
        viewer_principal_arns=config.cluster_viewers,
        log_types=config.log_types,
        log_retention_days=config.log_retention_days,
        upgrade_policy=config.upgrade_policy,
        core_node_group=config.core_node_group,
        job_node_group=config.job_node_group,
        addon_builds=addon_builds,
        node_monitoring_agent=features.node_monitoring_agent,
        controller_replicas=replicas,
        ebs_csi=ebs_csi,
        session_manager=features.session_manager,
        profile=config.profile,
    ),
)
kubernetes = k8s.Provider(
    "cluster",
    kubeconfig=cluster.deployer_kubeconfig,
    # Nothing goes onto the cluster before there are nodes to run it and DNS to resolve names
    # (pods that look up a Service at start-up crash-loop without CoreDNS), nor before the
    # admins' access entries exist.
    opts=pulumi.ResourceOptions(depends_on=[cluster.core_node_group, cluster.coredns, *cluster.admin_entries]),
)
# From here on, components build on the cluster: its name as an Output waits for the control plane.
ctx = ctx.with_cluster(cluster.name, kubernetes)
# Host access is the node agents' alone (infra/specs/host_access.py). Admission checks pods as they are
# created: one that a chart starts during the first `up`, before the policy exists, is checked on its restart.
on_cluster = pulumi.ResourceOptions(provider=kubernetes)
dra_groups = [s.dra_group for s in specs if s.dra_group]
host_access_exemptions = host_access.exemptions(
    observability=features.observability,
    neuron_chart=features.neuron_device_plugin,
    neuron_scheduler_extension=features.neuron_scheduler_extension,
    neuron_dra=bool(dra_groups),
)
admission_policy(
    host_access.NAME,
    host_access.admission_policy(host_access_exemptions),
    host_access.admission_policy_binding(),
    on_cluster,
)

if not use_karpenter:
    AcceleratorNodeGroups(
        "accelerators",
        ctx,
        AcceleratorNodeGroupsArgs(
            kubernetes_version=cluster.kubernetes_version,
            vpc_id=network.vpc_id,
            cluster_security_group_id=cluster.cluster_security_group_id,
            node_role_arn=cluster.node_role_arn,
            node_subnet_by_zone_id=network.node_subnet_by_zone_id,
            groups=specs,
            node_groups_after=cluster.node_policies,
        ),
    )

# --- cluster software, through the Kubernetes provider ----------------------------------------
namespaces = config.training_namespaces
# Training pods that mount a claim run as their namespace's id (infra/specs/namespace_identity.py): the
# identity the namespace's directory belongs to, with root squash on (infra/components/storage.py).
identity_of = namespace_identity.identities(
    {ns: config.namespace_ids[ns] for ns in namespaces}, config.storage.shared_directories
)
admission_policy(
    namespace_identity.NAME,
    namespace_identity.admission_policy(identity_of),
    namespace_identity.admission_policy_binding(),
    on_cluster,
)
identities = TrainingIdentities(
    "training",
    ctx,
    TrainingIdentitiesArgs({ns: config.data_buckets(ns) for ns in namespaces}),
)
registries = Registries("registries", ctx, RegistriesArgs(config.force_delete_registries, config.storage.kind))
DevicePlugins(
    "devices",
    ctx,
    DevicePluginsArgs(
        neuron=features.neuron_device_plugin,
        efa=features.efa_device_plugin,
        neuron_scheduler_extension=features.neuron_scheduler_extension,
        node_recovery=NodeRecoveryArgs(cluster.oidc_provider_arn, cluster.oidc_provider_url)
        if features.neuron_node_recovery
        else None,
        dra_groups=dra_groups,
        claim_namespaces={ns: identities.depends_for(ns) for ns in namespaces},
        image_cache=registries.pull_through_cache,
    ),
)
karpenter = None
if use_karpenter:
    karpenter = Karpenter(
        "karpenter",
        ctx,
        KarpenterArgs(
            vpc_id=network.vpc_id,
            cluster_security_group_id=cluster.cluster_security_group_id,
            groups=specs,
            lifetimes=karpenter_plan.Lifetimes(
                config.karpenter.expire_after,
                config.karpenter.termination_grace_period,
                config.karpenter.consolidate_after,
            ),
            # The same node posture as the managed groups' (infra/specs/node_security.py).
            hop_limit=node_security.IMDS_HOP_LIMIT,
            node_policies=node_security.node_policies(features.session_manager),
            association_after=[cluster],
            controller_replicas=replicas,
        ),
    )
# Before the burn-in: its DaemonSets pull their image through the registry's pull-through cache.
burn_in_targets = [
    BurnInTarget(
        s.name,
        s.config.instance_type,
        s.facts.neuron_devices,
        s.facts.neuron_cores,
        s.efa_interface_count,
        directory_claim_name(config.storage.claim_name, BURN_IN_NAMESPACE) if features.fsx_csi else None,
        config.node_provisioner,
        s.dra_group,
        image=registries.through_cache(BURN_IN_IMAGE),
        file_system_kind=config.storage.kind,
    )
    for s in specs
    if s.startup_taints
]
burn_in = (
    BurnIn(
        "burn-in",
        ctx,
        BurnInArgs(
            burn_in_targets,
            CORE_NODE_SELECTOR,
            daemon_sets_after=[*([karpenter.controller] if karpenter else []), *registries.pull_through_cache],
        ),
    )
    if burn_in_targets
    else None
)
storage: FsxStorage | EfsStorage | None = None
if features.fsx_csi and efs:
    storage = EfsStorage(
        "efs",
        ctx,
        EfsStorageArgs(
            vpc_id=network.vpc_id,
            node_subnet_by_zone_id=network.node_subnet_by_zone_id,
            node_security_group_ids=[cluster.cluster_security_group_id],
            storage=config.storage,
            identities=identities,
            namespaces=namespaces,
            namespace_ids=config.namespace_ids,
            system_namespaces={BURN_IN_NAMESPACE: burn_in.namespace} if burn_in else {},
            image_cache=registries.pull_through_cache,
        ),
        # A stack that ran FSx keeps its claims' identities: each volume and claim, of the same name under
        # this component, is the FSx one replaced (claim deleted, volume replaced, claim created), not a new
        # object created while the old claim still holds its name, which pulumi-kubernetes refuses ("The
        # resource already exists", pulumi/pulumi-kubernetes v4.32.0 provider/pkg/await/await.go Creation).
        pulumi.ResourceOptions(aliases=[pulumi.Alias(name="fsx", type_="trainium:infra:FsxStorage")]),
    )
elif features.fsx_csi:
    storage = FsxStorage(
        "fsx",
        ctx,
        FsxStorageArgs(
            vpc_id=network.vpc_id,
            subnet_id=network.private_subnet_by_zone_id[placement.accelerator_zone.id],
            node_security_group_ids=[cluster.cluster_security_group_id],
            storage=config.storage,
            retain=config.retain_storage,
            backup_retention_days=config.storage_backup_retention_days,
            identities=identities,
            namespaces=namespaces,
            namespace_ids=config.namespace_ids,
            no_squash_nids=no_squash_nids(network.private_cidrs),
            system_namespaces={BURN_IN_NAMESPACE: burn_in.namespace} if burn_in else {},
            image_cache=registries.pull_through_cache,
            controller_replicas=replicas,
        ),
    )
identities.wall_off(storage.server_addresses if storage else [])
schedulers = Schedulers(
    "schedulers",
    ctx,
    SchedulersArgs(
        volcano=features.volcano,
        queues=config.volcano_queues,
        kuberay=features.kuberay,
        mpi_operator=features.mpi_operator,
        controller_replicas=replicas,
    ),
)
Autoscaling(
    "autoscaling",
    ctx,
    AutoscalingArgs(
        kubernetes_version=config.kubernetes_version,
        cluster_autoscaler=features.cluster_autoscaler,
        metrics_server=features.metrics_server,
        association_after=[cluster],
        controller_replicas=replicas,
    ),
)
observability = None
if features.observability:
    observability = Observability(
        "observability",
        ctx,
        ObservabilityArgs(
            addon_build=addon_builds[addons.CLOUDWATCH_OBSERVABILITY],
            addon_after=[cluster.core_node_group],
            training_namespaces=namespaces,
        ),
    )
if config.monitoring.prometheus != "off":
    NodeMetrics(
        "node-metrics",
        ctx,
        registries.through_cache,
        after=[cluster.core_node_group, *registries.pull_through_cache],
    )
if config.monitoring.prometheus == "managed":
    managed = ManagedPrometheus(
        "prometheus",
        ctx,
        PrometheusArgs(
            config.monitoring,
            network.node_subnet_ids,
            [cluster.cluster_security_group_id],
            after=[cluster.core_node_group],
        ),
    )
    grafana_source = GrafanaArgs(managed.query_url, config.region, after=[cluster.core_node_group])
elif config.monitoring.prometheus == "in-cluster":
    in_cluster = InClusterPrometheus(
        "prometheus",
        ctx,
        InClusterPrometheusArgs(
            config.monitoring, after=[cluster.core_node_group, *([cluster.ebs_csi] if cluster.ebs_csi else [])]
        ),
    )
    grafana_source = GrafanaArgs(in_cluster.query_url, None, after=[cluster.core_node_group])
if config.monitoring.grafana == "in-cluster":
    # The config refuses a Grafana without a Prometheus (infra/config/rules.py), so a source is set here.
    Grafana("grafana", ctx, grafana_source)
# The outputs are the contract with the workload stacks: each field is described, and parsed
# there, by infra/contract.py, and `exported` refuses a field missing or unknown to it.
outputs = contract.exported(
    contract.ClusterOutputs,
    cluster_name=cluster.name,
    addon_builds=addon_builds,
    region=config.region,
    kubeconfig=cluster.kubeconfig,
    vpc_id=network.vpc_id,
    node_subnet_ids=network.node_subnet_ids,
    oidc_provider_arn=cluster.oidc_provider_arn,
    oidc_provider_url=cluster.oidc_provider_url,
    cluster_security_group_id=cluster.cluster_security_group_id,
    node_role_arn=cluster.node_role_arn,
    accelerator_zone=contract.exported(
        contract.Zone, name=placement.accelerator_zone.name, id=placement.accelerator_zone.id
    ),
    accelerator_node_groups=[s.output() for s in specs],
    features=features.model_dump(by_alias=True),
    training_namespaces=namespaces,
    namespace_ids={ns: config.namespace_ids[ns] for ns in namespaces},
    training_service_account=contract.exported(
        contract.TrainingServiceAccount, name=TRAINING_SERVICE_ACCOUNT, role_arns=identities.role_arns
    ),
    storage=storage.output(config.storage, namespaces, placement.accelerator_zone.id)
    if storage
    else FsxStorage.disabled_output(config.storage, placement.accelerator_zone.id),
    queues=schedulers.queues,
    ecr_repositories=registries.urls,
    pod_identity=contract.exported(contract.PodIdentity, agent=True, training_role_arns=identities.role_arns),
    # Always-on system nodes: where workloads put their long-running services (TensorBoard).
    core_node_selector=CORE_NODE_SELECTOR,
    # The CPU group that scales from zero: Ray heads, MPI launchers, staging and check Jobs.
    job_support_placement=job_support_output(config.job_node_group, features, ebs_csi, metrics_agents, efs=efs),
    cloudwatch_dashboard=observability.dashboard_name if observability else None,
)
for name, value in outputs.items():
    pulumi.export(name, value)
