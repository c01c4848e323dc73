"""Pulumi mocks that answer like AWS would, and a monitor that records every registration.

Every value AWS or Kubernetes would assign (ids, ARNs, endpoints, Auto Scaling group names)
is a placeholder containing the word ``placeholder``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

from infra.facts import versions
from offline.plan import fixtures

SECRET = "[secret]"

# Resource type -> prefix of the id AWS would assign.
_ID_PREFIX = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
}


@dataclass(frozen=True)
class StackOutputs:
    """What a StackReference to another (offline-planned) stack reads."""

    outputs: Mapping[str, Any]
    secret_names: frozenset[str] = field(default_factory=frozenset)


def placeholder_id(type_: str, name: str) -> str:
    return f"{_ID_PREFIX.get(type_, 'id')}-placeholder-{name}"


def _kubeconfig(cluster_name: str, region: str) -> dict[str, Any]:
    endpoint = f"https://placeholder.gr7.{region}.eks.amazonaws.com"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kubernetes", "cluster": {"server": endpoint, "certificate-authority-data": "cGxhY2Vob2xkZXI="}}
        ],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "current-context": "aws",
        "users": [
            {
                "name": "aws",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region],
                    }
                },
            }
        ],
    }


@dataclass(frozen=True)
class ExistingCluster:
    """An EKS cluster that already exists (a later `pulumi up`): principal -> access entry tags,
    and the Kubernetes version its control plane runs."""

    access_entries: Mapping[str, Mapping[str, str]]
    kubernetes_version: str = versions.KUBERNETES_VERSION
    # Managed node group name -> the Kubernetes version it runs.
    node_groups: Mapping[str, str] = field(default_factory=dict)
    # Managed node group name -> its desired size (0 when not given).
    node_group_sizes: Mapping[str, int] = field(default_factory=dict)
    # How many instances Karpenter launched for the cluster are up.
    karpenter_instances: int = 0
    # The zones its control-plane (private) subnets are in, in address-slot order; none: not checked.
    zone_ids: tuple[str, ...] = ()
    # Managed node group name -> (instance type, capacity type, zone id) EKS reports for it; none:
    # EKS reports no instance types, capacity type or subnets.
    node_group_shapes: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)


class CloudMocks(pulumi.runtime.Mocks):
    def __init__(
        self,
        region: str,
        stack_references: Mapping[str, StackOutputs] | None = None,
        existing_cluster: ExistingCluster | None = None,
    ) -> None:
        self.region = region
        self.stack_references = dict(stack_references or {})
        # (what was asked, which table of offline/plan/fixtures.py had no answer): a refusal that
        # mentions one says it came from that table, not from AWS (offline/plan/runner.py).
        self.misses: list[tuple[str, str]] = []
        # (what was asked, which table answered it): a refusal built on such an answer (a zone
        # that does not offer a type, say) is the table's word too, and says so.
        self.answered: list[tuple[str, str]] = []
        # None: a first `pulumi up` into an empty account.
        self.existing_cluster = existing_cluster

    def _arn(self, service: str, resource: str) -> str:
        return f"arn:aws:{service}:{self.region}:{fixtures.ACCOUNT_ID}:{resource}"

    # --- look-ups -------------------------------------------------------------------------

    def call(  # type: ignore[override]  # pulumi's stub omits the bare dict MockMonitor.Invoke also takes
        self, args: pulumi.runtime.MockCallArgs
    ) -> dict[str, Any] | tuple[dict[str, Any], list[tuple[str, str]]]:
        token, a = args.token, args.args
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            zones = fixtures.ZONES.get(self.region, [])
            if not zones:
                self.misses.append((self.region, "ZONES"))
            self.answered += [(zone_id, "ZONES") for _, zone_id in zones]
            return {
                "id": self.region,
                "names": [n for n, _ in zones],
                "zoneIds": [i for _, i in zones],
                "groupNames": [self.region] * len(zones),
                "state": "available",
            }
        if token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            wanted = {v for f in a.get("filters", []) if f["name"] == "instance-type" for v in f["values"]}
            if a.get("locationType") == "region":
                offered = sorted(
                    wanted & (fixtures.GENERAL_PURPOSE_TYPES | set(fixtures.OFFERINGS.get(self.region, {})))
                )
                self.misses += [(t, "GENERAL_PURPOSE_TYPES") for t in sorted(wanted - set(offered))]
                return {
                    "id": self.region,
                    "instanceTypes": offered,
                    "locations": [self.region] * len(offered),
                    "locationTypes": ["region"] * len(offered),
                }
            table = f"OFFERINGS[{self.region!r}]"
            self.misses += [(t, table) for t in sorted(wanted - set(fixtures.OFFERINGS.get(self.region, {})))]
            self.answered += [(t, table) for t in sorted(wanted & set(fixtures.OFFERINGS.get(self.region, {})))]
            pairs = [
                (t, zone)
                for t, zones in fixtures.OFFERINGS.get(self.region, {}).items()
                if t in wanted
                for zone in sorted(zones)
            ]
            return {
                "id": self.region,
                "instanceTypes": [t for t, _ in pairs],
                "locations": [z for _, z in pairs],
                "locationTypes": ["availability-zone-id"] * len(pairs),
            }
        if token == "aws:ec2/getInstanceType:getInstanceType":
            return fixtures.instance_type_answer(a["instanceType"])
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "id": fixtures.ACCOUNT_ID,
                "accountId": fixtures.ACCOUNT_ID,
                "arn": fixtures.DEPLOYER_SESSION_ARN,
                "userId": "AROAPLACEHOLDER:offline-plan",
            }
        if token == "aws:index/getPartition:getPartition":
            return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws"}
        if token == "aws:iam/getSessionContext:getSessionContext":
            return {
                "id": a["arn"],
                "arn": a["arn"],
                "issuerArn": fixtures.DEPLOYER_ROLE_ARN,
                "issuerId": "AROAPLACEHOLDER",
                "issuerName": "PlatformAdmin",
                "sessionName": "offline-plan",
            }
        if token == "aws:eks/getAddonVersion:getAddonVersion":
            build = fixtures.ADDON_DEFAULT_BUILDS.get(a["kubernetesVersion"], {}).get(a["addonName"])
            if build is None:
                self.misses.append((a["kubernetesVersion"], "ADDON_DEFAULT_BUILDS"))
                return {}, [
                    (
                        "kubernetesVersion",
                        f"no EKS add-on versions found for {a['addonName']} on {a['kubernetesVersion']}",
                    )
                ]
            return {
                "id": a["addonName"],
                "addonName": a["addonName"],
                "kubernetesVersion": a["kubernetesVersion"],
                "version": build,
                "mostRecent": bool(a.get("mostRecent")),
            }
        if token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            block = fixtures.CAPACITY_BLOCKS.get(a.get("id", ""))
            if block is None or block[0] != self.region:
                self.misses.append((a.get("id", ""), "CAPACITY_BLOCKS"))
                return {}, [("id", "reading EC2 Capacity Block Reservation: couldn't find resource")]
            _, zone_id, instance_type, start, end, count = block
            return {
                "id": a["id"],
                "availabilityZoneId": zone_id,
                "instanceType": instance_type,
                "instanceCount": count,
                "startDate": start,
                "endDate": end,
                "availabilityZone": next(n for n, z in fixtures.ZONES[self.region] if z == zone_id),
            }
        if token == "aws:eks/getCluster:getCluster":
            if self.existing_cluster is None:
                return {}, [("name", f"reading EKS Cluster ({a['name']}): couldn't find resource")]
            return {
                "id": a["name"],
                "name": a["name"],
                "arn": self._arn("eks", f"cluster/{a['name']}"),
                "version": self.existing_cluster.kubernetes_version,
                "vpcConfig": {"subnetIds": [f"subnet-private-{z}" for z in self.existing_cluster.zone_ids]},
            }
        if token == "aws:ec2/getNetworkInterface:getNetworkInterface":
            # A file system's interfaces ("eni-placeholder-<name>-<i>"): addresses of the documentation range.
            index = int(a["id"].rsplit("-", 1)[-1])
            return {"id": a["id"], "privateIp": f"192.0.2.{10 + index}", "privateIps": [f"192.0.2.{10 + index}"]}
        if token == "aws:ec2/getSubnet:getSubnet":
            # The existing cluster's subnets: "subnet-private-<zone id>" (its control plane's, CIDRs
            # ascending in zone_ids order) and "subnet-node-<zone id>" (its node groups').
            zone_ids = self.existing_cluster.zone_ids if self.existing_cluster else ()
            kind, _, zone_id = a["id"].removeprefix("subnet-").partition("-")
            if zone_id not in [z for _, z in fixtures.ZONES[self.region]] or (
                kind == "private" and zone_id not in zone_ids
            ):
                return {}, [("id", f"reading EC2 Subnet ({a['id']}): couldn't find resource")]
            slot = zone_ids.index(zone_id) if zone_id in zone_ids else 255
            return {"id": a["id"], "availabilityZoneId": zone_id, "cidrBlock": f"10.0.{slot}.0/24"}
        if token == "aws:eks/getNodeGroups:getNodeGroups":
            groups = self.existing_cluster.node_groups if self.existing_cluster else {}
            return {"id": a["clusterName"], "clusterName": a["clusterName"], "names": sorted(groups)}
        if token == "aws:eks/getNodeGroup:getNodeGroup":
            cluster = self.existing_cluster
            if cluster is None or a["nodeGroupName"] not in cluster.node_groups:
                return {}, [
                    ("nodeGroupName", "reading EKS Node Group: ResourceNotFoundException: couldn't find resource")
                ]
            return {
                "id": f"{a['clusterName']}:{a['nodeGroupName']}",
                "clusterName": a["clusterName"],
                "nodeGroupName": a["nodeGroupName"],
                "version": cluster.node_groups[a["nodeGroupName"]],
                **(
                    {"instanceTypes": [shape[0]], "capacityType": shape[1], "subnetIds": [f"subnet-node-{shape[2]}"]}
                    if (shape := cluster.node_group_shapes.get(a["nodeGroupName"]))
                    else {}
                ),
                "scalingConfigs": [
                    {
                        "desiredSize": cluster.node_group_sizes.get(a["nodeGroupName"], 0),
                        "minSize": 0,
                        "maxSize": 1,
                    }
                ],
            }
        if token == "aws:ec2/getInstances:getInstances":
            count = self.existing_cluster.karpenter_instances if self.existing_cluster else 0
            ids = [f"i-{n:017x}" for n in range(count)]
            return {
                "id": self.region,
                "ids": ids,
                "privateIps": [],
                "publicIps": [],
                "ipv6Addresses": [],
                "instanceStateNames": a.get("instanceStateNames", []),
            }
        if token == "aws:eks/getAccessEntry:getAccessEntry":
            entries = self.existing_cluster.access_entries if self.existing_cluster else {}
            if a["principalArn"] not in entries:
                return {}, [
                    ("principalArn", "reading EKS Access Entry: ResourceNotFoundException: couldn't find resource")
                ]
            return {
                "id": a["principalArn"],
                "clusterName": a["clusterName"],
                "principalArn": a["principalArn"],
                "tags": dict(entries[a["principalArn"]]),
                "type": "STANDARD",
            }
        raise NotImplementedError(f"the offline mocks have no stand-in for the look-up {token}")

    # --- resources ------------------------------------------------------------------------

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        type_, name, inputs = args.typ, args.name, dict(args.inputs)
        state: dict[str, Any] = {**inputs}
        state.setdefault("name", f"{name}-placeholder")
        state.setdefault("arn", self._arn(type_.split(":")[1].split("/")[0], f"placeholder/{name}"))
        resource_id = placeholder_id(type_, name)

        if type_.startswith("kubernetes:") and isinstance(inputs.get("metadata"), dict):
            # The API server gives every object a UID; the workloads' job chains read it (workloads/kube.py follow).
            state["metadata"] = {**inputs["metadata"], "uid": f"uid-placeholder-{name}"}
        if type_ == "pulumi:pulumi:StackReference":
            stack = inputs["name"]
            if stack not in self.stack_references and stack.split("/")[1:] == [
                pulumi.get_project(),
                pulumi.get_stack(),
            ]:
                # The program's own stack (workloads/capacity_windows.py reads its last update): an offline
                # plan is of a stack never deployed, so it has no outputs, unless a test gives it some.
                return stack, {"name": stack, "outputs": {}, "secretOutputNames": []}
            if stack not in self.stack_references:
                raise LookupError(f"the offline plan has no outputs for the stack reference {stack!r}")
            ref = self.stack_references[stack]
            return stack, {"name": stack, "outputs": dict(ref.outputs), "secretOutputNames": sorted(ref.secret_names)}
        if type_ == "random:index/randomPassword:RandomPassword":
            state.update(result="offline-placeholder-password")
        elif type_ == "random:index/randomString:RandomString":
            state.update(result="x" * int(inputs.get("length", 8)))
        elif type_ == "eks:index:Cluster":
            cluster_name = inputs.get("name", name)
            issuer = f"oidc.eks.{self.region}.amazonaws.com/id/PLACEHOLDER"
            kubeconfig = _kubeconfig(cluster_name, self.region)
            state.update(
                kubeconfig=kubeconfig,
                kubeconfigJson=json.dumps(kubeconfig),
                oidcIssuer=issuer,
                oidcProviderUrl=issuer,
                oidcProviderArn=f"arn:aws:iam::{fixtures.ACCOUNT_ID}:oidc-provider/{issuer}",
                clusterSecurityGroupId="sg-placeholder-eks-cluster",
            )
        elif type_ == "aws:amp/scraper:Scraper":
            # The collector's service-linked role, named as AWS names it (Amazon Managed Service for Prometheus
            # user guide, AMP-collector-how-to: the roleArn of describe-scraper).
            state.update(
                roleArn=f"arn:aws:iam::{fixtures.ACCOUNT_ID}:role/aws-service-role/scraper.aps.amazonaws.com/"
                "AWSServiceRoleForAmazonPrometheusScraper_placeholder"
            )
        elif type_ == "aws:eks/nodeGroup:NodeGroup":
            group = inputs.get("nodeGroupName", name)
            state.update(
                resources=[
                    {"autoscalingGroups": [{"name": f"eks-{group}-placeholder"}], "remoteAccessSecurityGroupId": ""}
                ],
                status="ACTIVE",
            )
        elif type_ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            file_system = f"fs-placeholder-{name}"
            resource_id = file_system
            state.update(
                dnsName=f"{file_system}.fsx.{self.region}.amazonaws.com",
                mountName="placeholder",
                networkInterfaceIds=[f"eni-placeholder-{name}-{i}" for i in range(2)],
            )
        elif type_ == "aws:efs/fileSystem:FileSystem":
            # EFS ids as the driver parses them (fs-/fsap- and 8-40 hex digits: aws-efs-csi-driver v3.4.1
            # pkg/driver/node.go isValidFileSystemId, isValidAccessPointId), stable per name.
            resource_id = f"fs-{_hex(name)}"
            state.update(dnsName=f"{resource_id}.efs.{self.region}.amazonaws.com")
        elif type_ == "aws:efs/accessPoint:AccessPoint":
            resource_id = f"fsap-{_hex(name)}"
        elif type_ == "aws:efs/mountTarget:MountTarget":
            # An address in the mount target's zone, stable per name (the egress wall names it).
            state.update(ipAddress=f"10.0.{int(_hex(name)[:2], 16) % 64}.{10 + int(_hex(name)[2:4], 16) % 200}")
        elif type_ == "aws:ec2/launchTemplate:LaunchTemplate":
            state.update(latestVersion=1, defaultVersion=1)
        elif type_ == "aws:kms/key:Key":
            state.update(keyId=f"placeholder-{name}", arn=self._arn("kms", f"key/placeholder-{name}"))
        elif type_ == "aws:ecr/repository:Repository":
            repo = inputs.get("name", name)
            state.update(repositoryUrl=f"{fixtures.ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{repo}")
        elif type_ == "aws:iam/openIdConnectProvider:OpenIdConnectProvider":
            issuer = str(inputs.get("url", name)).removeprefix("https://")
            state.update(arn=f"arn:aws:iam::{fixtures.ACCOUNT_ID}:oidc-provider/{issuer}")
        elif type_ == "aws:s3/bucket:Bucket":
            bucket = inputs.get("bucket", name)
            resource_id = bucket
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
        elif type_ == "aws:iam/role:Role":
            state.update(arn=f"arn:aws:iam::{fixtures.ACCOUNT_ID}:role/{state['name']}")
        return resource_id, state


def _hex(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:17]


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    provider: str
    dependencies: list[str]
    protect: bool
    custom: bool
    inputs: dict[str, Any]
    lifecycle: dict[str, Any] = field(default_factory=dict)
    """The lifecycle options set on the resource: ignoreChanges, replaceOnChanges,
    deleteBeforeReplace, retainOnDelete, customTimeouts, replaceWith, replacementTrigger, aliases,
    and how many transforms."""
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    """Input property -> URNs its value came from, as the engine passes them to stack policies
    (and in resources.json, for the plan diff's replacement cascade)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "provider": self.provider,
            "dependencies": self.dependencies,
            "protect": self.protect,
            **self.lifecycle,
            # What the plan diff's replacement cascade reads (offline/diff/replacement.py dependent_replacements).
            **({"propertyDependencies": self.property_dependencies} if self.property_dependencies else {}),
            "inputs": self.inputs,
        }


def lifecycle_options(request: Any) -> dict[str, Any]:
    """The lifecycle choices in a RegisterResourceRequest, only those that are set."""
    options: dict[str, Any] = {}
    if request.ignoreChanges:
        options["ignoreChanges"] = list(request.ignoreChanges)
    if request.replaceOnChanges:
        options["replaceOnChanges"] = list(request.replaceOnChanges)
    if request.deleteBeforeReplace:
        options["deleteBeforeReplace"] = True
    if request.HasField("retainOnDelete") and request.retainOnDelete:
        options["retainOnDelete"] = True
    if len(request.replace_with):
        options["replaceWith"] = sorted(request.replace_with)
    if request.HasField("replacement_trigger"):
        options["replacementTrigger"] = engine_view(json_format.MessageToDict(request.replacement_trigger))
    if len(request.aliases) and not request.custom:
        # A component's earlier identities, which the engine matches against the state (and carries
        # to its children) before it plans a create and a delete. Custom resources' aliases are the
        # provider SDKs' own (earlier API versions of a kind), left out.
        options["aliases"] = [json_format.MessageToDict(alias) for alias in request.aliases]
    if len(request.transforms):
        # Callbacks the engine runs on the component's children (not visible offline).
        options["transforms"] = len(request.transforms)
    timeouts = {k: getattr(request.customTimeouts, k) for k in ("create", "update", "delete")}
    if any(timeouts.values()):
        options["customTimeouts"] = {k: v for k, v in timeouts.items() if v}
    return options


def engine_view(value: Any) -> Any:
    """Deserialized RPC data as JSON: secrets become ``[secret]``, whole numbers print as integers
    (the wire format carries every number as a double)."""
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, dict):
        return {k: engine_view(v) for k, v in value.items()}
    if isinstance(value, list):
        return [engine_view(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class RecordingMonitor(MockMonitor):
    """The mock monitor, keeping what the engine would receive for every resource.

    Each record is decoded from its own request, so it holds that resource's inputs whichever
    thread the runtime sends the call on (pulumi 3.272.0 runtime/resource.py hands every monitor
    call to the event loop's default executor, a thread pool)."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def _register(self, request: Any) -> Any:
        """MockMonitor.RegisterResource, past a race in the runtime as shipped: the first resource with
        transforms creates the program's callback server on the event loop, which lists itself in
        _CallbackServicer._servicers before it sets its transform table (pulumi 3.272.0
        runtime/_callbacks.py __init__, l.79-83), while MockMonitor.RegisterResource, on an executor
        thread, reads every listed server's table (runtime/mocks.py _resolve_callbacks, l.176-181) before
        it records anything: a call that lands in between fails with AttributeError and changed nothing,
        so it is asked again once the server has finished its first lines."""
        for attempt in range(50):
            try:
                return super().RegisterResource(request)
            except AttributeError as error:
                if "_transforms" not in str(error) or attempt == 49:
                    raise
                time.sleep(0.001)
        raise AssertionError("unreachable")

    def RegisterResource(self, request: Any) -> Any:
        response = self._register(request)
        if request.type != "pulumi:pulumi:Stack":
            # The same decoding MockMonitor.RegisterResource gives the mocks (pulumi 3.272.0
            # runtime/mocks.py), on this thread's event loop, which that call made sure exists:
            # decoding a resource reference needs one.
            inputs = rpc.deserialize_properties(request.object)
            self.registrations.append(
                Registration(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    provider=request.provider,
                    dependencies=sorted(set(request.dependencies)),
                    protect=bool(request.protect),
                    custom=bool(request.custom),
                    inputs=engine_view(inputs),
                    lifecycle=lifecycle_options(request),
                    property_dependencies={
                        k: sorted(set(v.urns)) for k, v in request.propertyDependencies.items() if v.urns
                    },
                )
            )
        return response
