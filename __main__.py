"""The cluster stack: network, EKS, Trainium node groups. Wiring only; logic lives in infra/."""

import pulumi
import pulumi_kubernetes as k8s

from infra import lookups, stack_config
from infra.accelerators import AcceleratorNodeGroups, AcceleratorNodeGroupsArgs, group_spec
from infra.autoscaling import Autoscaling, AutoscalingArgs
from infra.cluster import EksCluster, EksClusterArgs
from infra.devices import DevicePlugins
from infra.identities import TRAINING_SERVICE_ACCOUNT, TrainingIdentities, TrainingIdentitiesArgs
from infra.kube import CORE_NODE_SELECTOR
from infra.network import Network, NetworkArgs
from infra.observability import Observability, ObservabilityArgs
from infra.placement import choose_placement
from infra.registries import Registries, RegistriesArgs
from infra.schedulers import Schedulers, SchedulersArgs
from infra.storage import STORAGE_CLASS, FsxStorage, FsxStorageArgs

config = stack_config.load()
groups = config.accelerator_node_groups
cloud = lookups.look_up(config.region, sorted({g.instance_type for g in groups}))
placement = choose_placement(cloud.zones, cloud.offerings, groups, config.network.az_count, config.region)
specs = [group_spec(g, cloud.instance_facts[g.instance_type], placement.group_zones[g.name]) for g in groups]
# Everything above is validation and look-ups; resources are declared from here on.

tags = {"project": "trainium-eks", "cluster": config.cluster_name, "stack": pulumi.get_stack(), **config.tags}

network = Network(
    "network",
    NetworkArgs(
        cluster_name=config.cluster_name,
        region=config.region,
        vpc_cidr=config.network.vpc_cidr,
        secondary_cidr=config.network.secondary_cidr,
        zones=placement.zones,
        nat_gateways=config.network.nat_gateways,
        tags=tags,
    ),
)

cluster = EksCluster(
    "cluster",
    EksClusterArgs(
        name=config.cluster_name,
        kubernetes_version=config.kubernetes_version,
        partition=cloud.partition,
        vpc_id=network.vpc_id,
        control_plane_subnet_ids=network.private_subnet_ids,
        node_subnet_ids=network.node_subnet_ids,
        endpoint_access=config.endpoint_access,
        # The deployer is already admin (cluster-creator bootstrap); a second entry would clash.
        admin_principal_arns=[a for a in config.cluster_admins if a != cloud.deployer_arn],
        log_types=config.log_types,
        core_node_group=config.core_node_group,
        addon_versions=config.resolved_addon_versions(),
        tags=tags,
    ),
)

accelerators = AcceleratorNodeGroups(
    "accelerators",
    AcceleratorNodeGroupsArgs(
        cluster_name=cluster.name,
        vpc_id=network.vpc_id,
        cluster_security_group_id=cluster.cluster_security_group_id,
        node_role_arn=cluster.node_role_arn,
        node_subnet_by_zone_id=network.node_subnet_by_zone_id,
        groups=specs,
        depends_on=cluster.node_policies,
        tags=tags,
    ),
)

# --- cluster software, through a provider built from the cluster's kubeconfig ---------------
features = config.features
namespaces = config.training_namespaces
kubernetes = k8s.Provider(
    "cluster",
    kubeconfig=cluster.kubeconfig,
    # Charts need somewhere to run: nothing goes onto the cluster before the core nodes.
    opts=pulumi.ResourceOptions(depends_on=[cluster.core_node_group]),
)

identities = TrainingIdentities(
    "training",
    TrainingIdentitiesArgs(cluster.name, cloud.partition, namespaces, config.training_data_buckets, tags),
    kubernetes,
)
DevicePlugins(
    "devices", features.neuron_device_plugin, features.efa_device_plugin, features.neuron_scheduler_extension, kubernetes
)
storage = None
if features.fsx_csi:
    storage = FsxStorage(
        "fsx",
        FsxStorageArgs(
            cluster_name=cluster.name,
            partition=cloud.partition,
            vpc_id=network.vpc_id,
            subnet_id=network.private_subnet_by_zone_id[placement.accelerator_zone.id],
            node_security_group_ids=[cluster.cluster_security_group_id],
            storage=config.storage,
            identities=identities,
            namespaces=namespaces,
            tags=tags,
        ),
        kubernetes,
    )
schedulers = Schedulers(
    "schedulers",
    SchedulersArgs(
        volcano=features.volcano,
        queues=config.volcano_queues,
        kuberay=features.kuberay,
        mpi_operator=features.mpi_operator,
        torchx_etcd=features.torchx_etcd,
        namespaces=namespaces,
        identities=identities,
    ),
    kubernetes,
)
Autoscaling(
    "autoscaling",
    AutoscalingArgs(
        cluster_name=config.cluster_name,
        region=config.region,
        account_id=cloud.account_id,
        partition=cloud.partition,
        cluster_autoscaler=features.cluster_autoscaler,
        metrics_server=features.metrics_server,
        depends_on=[cluster],
        tags=tags,
    ),
    kubernetes,
)
observability = None
if features.observability:
    observability = Observability(
        "observability",
        ObservabilityArgs(
            cluster_name=cluster.name,
            cluster_name_text=config.cluster_name,
            region=config.region,
            partition=cloud.partition,
            depends_on=[cluster.core_node_group],
            tags=tags,
        ),
    )
registries = Registries("registries", RegistriesArgs(config.cluster_name, config.ecr_force_delete, tags))

pulumi.export("clusterName", cluster.name)
pulumi.export("region", config.region)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("vpcId", network.vpc_id)
pulumi.export("nodeSubnetIds", network.node_subnet_ids)
pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
pulumi.export("oidcProviderUrl", cluster.oidc_provider_url)
pulumi.export("clusterSecurityGroupId", cluster.cluster_security_group_id)
pulumi.export("nodeRoleArn", cluster.node_role_arn)
pulumi.export("acceleratorZone", {"name": placement.accelerator_zone.name, "id": placement.accelerator_zone.id})
pulumi.export(
    "acceleratorNodeGroups",
    [
        {
            "name": s.name,
            "instanceType": s.config.instance_type,
            "azId": s.zone.id,
            "azName": s.zone.name,
            "neuronDevices": s.facts.neuron_devices,
            "neuronCores": s.facts.neuron_cores,
            "efaInterfaces": s.efa_interface_count,
            "labels": s.labels,
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in s.taints],
            "minSize": s.config.min_size,
            "maxSize": s.config.max_size,
        }
        for s in specs
    ],
)
pulumi.export("features", features.model_dump(by_alias=True))
pulumi.export("trainingNamespaces", namespaces)
pulumi.export("trainingServiceAccount", {"name": TRAINING_SERVICE_ACCOUNT, "roleArn": identities.role_arn})
pulumi.export(
    "storage",
    {
        "enabled": storage is not None,
        "storageClass": STORAGE_CLASS if storage else None,
        "claimName": config.storage.claim_name if storage else None,
        "namespaces": namespaces if storage else [],
        "capacityGib": config.storage.capacity_gib,
        "deploymentType": config.storage.deployment_type,
        "zone": placement.accelerator_zone.id,
        # Resolves once each claim exists; the first pod to mount it waits for FSx (5-10 min).
        "claims": {ns: c.metadata.name for ns, c in storage.claims.items()} if storage else {},
    },
)
pulumi.export("volcanoQueues", schedulers.queues)
pulumi.export("etcdEndpoints", schedulers.etcd_endpoints)
pulumi.export("ecrRepositories", registries.urls)
pulumi.export("podIdentity", {"agent": True, "trainingRoleArn": identities.role_arn})
# Where workloads put pods that need no accelerator (Ray heads, MPI launchers, staging jobs).
pulumi.export("coreNodeSelector", CORE_NODE_SELECTOR)
pulumi.export("cloudwatchDashboard", observability.dashboard_name if observability else None)
