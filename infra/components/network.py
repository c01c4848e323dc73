"""The VPC: public, private and node subnets in every chosen zone, NAT, routes and EKS tags.

Each zone's private and node subnets share one route table (the NAT gateway, and the S3 gateway
endpoint's routes), so the core nodes, which live in the private subnets, reach ECR, S3 and the
EKS API exactly as the other nodes do. Only the node subnets carry Karpenter's discovery tag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_aws as aws

from infra.components.context import ClusterContext
from infra.specs.cidrs import plan_subnets
from infra.specs.placement import Zone


@dataclass
class NetworkArgs:
    vpc_cidr: str
    secondary_cidr: str
    zones: list[Zone]
    nat_gateways: Literal["single", "per-az"]
    # Extra tags on the node subnets only: Karpenter's discovery tag (its EC2NodeClasses select
    # subnets by it) when it provisions the Trainium nodes.
    node_subnet_tags: dict[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    public_subnet_ids: list[pulumi.Output[str]]
    private_subnet_ids: list[pulumi.Output[str]]
    node_subnet_ids: list[pulumi.Output[str]]
    node_subnet_by_zone_id: dict[str, pulumi.Output[str]]
    private_subnet_by_zone_id: dict[str, pulumi.Output[str]]
    # The private subnets' address blocks, in zone order: what root squash exempts (the core nodes').
    private_cidrs: list[str]

    def __init__(
        self, name: str, ctx: ClusterContext, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        layout = plan_subnets(args.vpc_cidr, args.secondary_cidr, len(args.zones))
        cluster_tag = {f"kubernetes.io/cluster/{ctx.cluster_name}": "shared"}

        def tags(name_: str, extra: dict[str, str] | None = None) -> dict[str, str]:
            return {**ctx.tags, "Name": f"{ctx.cluster_name}-{name_}", **(extra or {})}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=tags("vpc"),
            opts=child,
        )
        secondary = aws.ec2.VpcIpv4CidrBlockAssociation(
            f"{name}-secondary-cidr", vpc_id=vpc.id, cidr_block=args.secondary_cidr, opts=child
        )
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags("igw"), opts=child)

        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=tags("public"),
            opts=child,
        )

        public_subnets, private_subnets, node_subnets, private_rts = [], [], [], []
        nat_count = 1 if args.nat_gateways == "single" else len(args.zones)
        nat_gateways = []
        for i, zone in enumerate(args.zones):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone.id}",
                vpc_id=vpc.id,
                cidr_block=layout.public[i],
                availability_zone_id=zone.id,
                map_public_ip_on_launch=False,
                tags=tags(f"public-{zone.id}", {**cluster_tag, "kubernetes.io/role/elb": "1"}),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone.id}", subnet_id=public.id, route_table_id=public_rt.id, opts=child
            )
            public_subnets.append(public)
            if i < nat_count:
                eip = aws.ec2.Eip(f"{name}-nat-{zone.id}", domain="vpc", tags=tags(f"nat-{zone.id}"), opts=child)
                nat_gateways.append(
                    aws.ec2.NatGateway(
                        f"{name}-nat-{zone.id}",
                        allocation_id=eip.id,
                        subnet_id=public.id,
                        tags=tags(f"nat-{zone.id}"),
                        opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
                    )
                )

        for i, zone in enumerate(args.zones):
            nat = nat_gateways[min(i, nat_count - 1)]
            route_table = aws.ec2.RouteTable(
                f"{name}-private-rt-{zone.id}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags=tags(f"private-{zone.id}"),
                opts=child,
            )
            private_rts.append(route_table)
            private = aws.ec2.Subnet(
                f"{name}-private-{zone.id}",
                vpc_id=vpc.id,
                cidr_block=layout.private[i],
                availability_zone_id=zone.id,
                tags=tags(f"private-{zone.id}", {**cluster_tag, "kubernetes.io/role/internal-elb": "1"}),
                opts=child,
            )
            node = aws.ec2.Subnet(
                f"{name}-node-{zone.id}",
                vpc_id=secondary.vpc_id,
                cidr_block=layout.node[i],
                availability_zone_id=zone.id,
                tags=tags(f"node-{zone.id}", {**cluster_tag, **args.node_subnet_tags}),
                # The secondary block must be associated before a subnet can use it.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[secondary]),
            )
            for kind, subnet in (("private", private), ("node", node)):
                aws.ec2.RouteTableAssociation(
                    f"{name}-{kind}-{zone.id}", subnet_id=subnet.id, route_table_id=route_table.id, opts=child
                )
            private_subnets.append(private)
            node_subnets.append(node)

        # Datasets and checkpoints move to and from S3 in bulk; a gateway endpoint keeps that
        # traffic off the NAT gateways (and their per-GB charge) at no cost.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{ctx.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in private_rts],
            tags=tags("s3"),
            opts=child,
        )

        self.vpc_id = vpc.id
        self.public_subnet_ids = [s.id for s in public_subnets]
        self.private_subnet_ids = [s.id for s in private_subnets]
        self.node_subnet_ids = [s.id for s in node_subnets]
        self.node_subnet_by_zone_id = {z.id: s.id for z, s in zip(args.zones, node_subnets, strict=True)}
        self.private_subnet_by_zone_id = {z.id: s.id for z, s in zip(args.zones, private_subnets, strict=True)}
        self.private_cidrs = list(layout.private)
        self.register_outputs({"vpcId": self.vpc_id})
