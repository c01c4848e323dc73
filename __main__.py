"""The cluster stack: network, EKS, Trainium node groups. Wiring only; logic lives in infra/."""

import pulumi

from infra import lookups, stack_config
from infra.accelerators import AcceleratorNodeGroups, AcceleratorNodeGroupsArgs, group_spec
from infra.cluster import EksCluster, EksClusterArgs
from infra.network import Network, NetworkArgs
from infra.placement import choose_placement

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
pulumi.export("features", config.features.model_dump(by_alias=True))
