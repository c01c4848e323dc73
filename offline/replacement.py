"""Which input changes make the provider replace a resource rather than update it in place.

Approximate, offline: the properties the provider marks ForceNew for the resource types this
repository declares, plus each resource's own ``replaceOnChanges`` (recorded by the mocks).
pulumi-aws 7.x bridges terraform-provider-aws; the lists come from its resource schemas
(hashicorp/terraform-provider-aws, ``internal/service/<service>/<resource>.go``, ``ForceNew: true``):

- eks/node_group.go: amiType, capacityType, clusterName, diskSize, instanceTypes,
  launchTemplate.id/.name, nodeGroupName(Prefix), nodeRoleArn, remoteAccess, subnetIds.
  In place: scalingConfig, labels, taints, updateConfig, nodeRepairConfig, and
  launchTemplate.version / releaseVersion / version (UpdateNodegroupVersion, a rolling update).
- ec2/ec2_launch_template.go: only name / namePrefix; every other change is a new version of
  the same template (the node groups using it then roll to it, see ``LAUNCH_TEMPLATE``).
- fsx/lustre_file_system.go: deploymentType, storageType, subnetIds, securityGroupIds,
  kmsKeyId, fileSystemTypeVersion, perUnitStorageThroughput, importPath, exportPath,
  importedFileChunkSize, driveCacheType, copyTagsToBackups, and storageCapacity when it
  shrinks (CustomizeDiff).
- The rest below: names and the parent they hang off (cluster, VPC, subnet, zone).
Kubernetes objects are replaced when metadata.name or metadata.namespace changes
(pulumi-kubernetes); other immutable Kubernetes fields this project knows about carry
``replaceOnChanges`` already.
"""

from __future__ import annotations

from typing import Any, Optional

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"

FORCE_NEW: dict[str, tuple[str, ...]] = {
    NODE_GROUP: ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes", "launchTemplate.id",
                 "launchTemplate.name", "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess",
                 "subnetIds"),
    LAUNCH_TEMPLATE: ("name", "namePrefix"),
    LUSTRE: ("deploymentType", "storageType", "subnetIds", "securityGroupIds", "kmsKeyId", "fileSystemTypeVersion",
             "perUnitStorageThroughput", "importPath", "exportPath", "importedFileChunkSize", "driveCacheType",
             "copyTagsToBackups"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("fileSystemId", "fileSystemPath",
                                                                    "dataRepositoryPath", "batchImportMetaDataOnCreate"),
    "aws:ec2/vpc:Vpc": ("cidrBlock", "instanceTenancy"),
    "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation": ("cidrBlock", "vpcId"),
    "aws:ec2/subnet:Subnet": ("cidrBlock", "vpcId", "availabilityZone", "availabilityZoneId"),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "description", "vpcId"),
    "aws:ec2/placementGroup:PlacementGroup": ("name", "strategy", "partitionCount", "spreadLevel"),
    "aws:ec2/natGateway:NatGateway": ("subnetId", "allocationId", "connectivityType"),
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "gatewayId"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("serviceName", "vpcId", "vpcEndpointType"),
    "aws:eks/addon:Addon": ("addonName", "clusterName"),
    "aws:eks/accessEntry:AccessEntry": ("clusterName", "principalArn"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("clusterName", "namespace", "serviceAccount"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("policyArn", "role"),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": ("url",),
    "aws:kms/key:Key": ("customerMasterKeySpec", "keyUsage", "multiRegion"),
    "aws:kms/alias:Alias": ("name", "namePrefix"),
    "aws:s3/bucket:Bucket": ("bucket", "bucketPrefix"),
    "aws:ecr/repository:Repository": ("name",),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "namePrefix"),
    "aws:cloudwatch/dashboard:Dashboard": ("dashboardName",),
    "aws:autoscaling/tag:Tag": ("autoscalingGroupName", "tag.key"),
}
KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def replaces(type_: str, path: str, old: Any, new: Any, replace_on_changes: list[str]) -> Optional[str]:
    """Why changing ``path`` replaces the resource, or None for an in-place update."""
    for prefix in replace_on_changes:
        if prefix == "*" or _under(path, prefix):
            return f"replaceOnChanges {prefix}"
    if type_.startswith("kubernetes:") and any(_under(path, p) for p in KUBERNETES_IDENTITY):
        return "a Kubernetes object's name and namespace are its identity"
    for prefix in FORCE_NEW.get(type_, ()):
        if _under(path, prefix):
            return f"{prefix} is ForceNew"
    if type_ == LUSTRE and path == "storageCapacity" and isinstance(old, (int, float)) and isinstance(new, (int, float)) \
            and new < old:
        return "FSx cannot shrink a file system"
    return None
