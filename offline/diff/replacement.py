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
- fsx/lustre_file_system.go, the aws-sdk-go-v2 rewrite that pulumi-aws 7.x bridges (the one
  with ``metadata_configuration`` and ``skip_final_backup``): ForceNew on deploymentType,
  storageType, subnetIds, securityGroupIds, kmsKeyId, importPath, exportPath,
  importedFileChunkSize, driveCacheType, copyTagsToBackups, backupId. perUnitStorageThroughput
  is NOT ForceNew there (resourceLustreFileSystemUpdate sends it in UpdateFileSystem); the
  ForceNew on it is the older aws-sdk-go v1 file's. CustomizeDiff replaces when storageCapacity
  shrinks or the deployment type is SCRATCH_1 (resourceLustreFileSystemStorageCapacityCustomizeDiff)
  and when a USER_PROVISIONED metadataConfiguration.iops decreases
  (resourceLustreFileSystemMetadataConfigCustomizeDiff). fileSystemTypeVersion: the pulumi_aws
  7.51.1 SDK's own documentation of the bridged schema (fsx/lustre_file_system.py) says a higher
  version upgrades in place and a lower one replaces. We could not read the exact upstream tag
  7.51.1 pins (its repositories exceed what can be mirrored here), so these follow the newest
  aws-sdk-go-v2 source we could read plus that documentation.
- efs/file_system.go (read at 0389f46): ForceNew on availabilityZoneName, creationToken, encrypted,
  kmsKeyId, performanceMode; lifecyclePolicies and throughputMode change in place
  (PutLifecycleConfiguration, UpdateFileSystem). efs/access_point.go (read at 0160692): fileSystemId,
  posixUser and rootDirectory (creationInfo and path included) are all ForceNew; only tags update.
  efs/mount_target.go: fileSystemId, subnetId, ipAddress (securityGroups change in place,
  ModifyMountTargetSecurityGroups).
- eks/access_entry.go: clusterName, principalArn, type. eks/access_policy_association.go has no
  Update at all: accessScope, clusterName, policyArn, principalArn all replace.
- ecr/repository.go: name and encryptionConfigurations; ecr/lifecycle_policy.go (no Update):
  policy and repository.
- ec2/vpc.go: cidrBlock; instanceTenancy is updated in place (ModifyVpcTenancy).
- ec2/vpc_security_group_{ingress,egress}_rule.go (plugin framework): securityGroupId
  (RequiresReplace), and ModifyPlan replaces when the source type changes (cidrIpv4, cidrIpv6,
  prefixListId, referencedSecurityGroupId); the rest is ModifySecurityGroupRules in place.
- amp/scraper: pulumi_aws 7.51.1's own documentation of the bridged resource (amp/scraper.py,
  Scraper.__init__): "If you change a Scraper's source (EKS cluster or VPC configuration), Terraform
  will delete the current Scraper and create a new one"; its scrape configuration, alias and
  destination are updated in place (the older provider replaced it on any change).
- The rest below: names and the parent they hang off (cluster, VPC, subnet, zone), not checked
  against the provider source one by one.
Kubernetes objects are replaced when metadata.name or metadata.namespace changes
(pulumi-kubernetes); a ConfigMap when its data or binaryData changes and a Secret when its type,
data or stringData does (provider/pkg/provider/diff.go ``forceNewProperties``: this project sets
neither enableConfigMapMutable nor enableSecretMutable), deleted first when its name is fixed; and a
batch/v1 Job when spec.completions, spec.parallelism, spec.selector or spec.template changes
(pulumi/pulumi-kubernetes v4.32.0, the newest tag readable here (the pin is 4.34.2),
provider/pkg/provider/diff.go ``forceNew``: ``job``); other immutable Kubernetes fields
this project knows about carry ``replaceOnChanges`` already.
"""

from __future__ import annotations

from typing import Any

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"

FORCE_NEW: dict[str, tuple[str, ...]] = {
    NODE_GROUP: (
        "amiType",
        "capacityType",
        "clusterName",
        "diskSize",
        "instanceTypes",
        "launchTemplate.id",
        "launchTemplate.name",
        "nodeGroupName",
        "nodeGroupNamePrefix",
        "nodeRoleArn",
        "remoteAccess",
        "subnetIds",
    ),
    LAUNCH_TEMPLATE: ("name", "namePrefix"),
    LUSTRE: (
        "deploymentType",
        "storageType",
        "subnetIds",
        "securityGroupIds",
        "kmsKeyId",
        "importPath",
        "exportPath",
        "importedFileChunkSize",
        "driveCacheType",
        "copyTagsToBackups",
        "backupId",
    ),
    "aws:efs/fileSystem:FileSystem": (
        "availabilityZoneName",
        "creationToken",
        "encrypted",
        "kmsKeyId",
        "performanceMode",
    ),
    "aws:efs/accessPoint:AccessPoint": ("fileSystemId", "posixUser", "rootDirectory"),
    "aws:efs/mountTarget:MountTarget": ("fileSystemId", "subnetId", "ipAddress"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        "fileSystemId",
        "fileSystemPath",
        "dataRepositoryPath",
        "batchImportMetaDataOnCreate",
    ),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/vpcIpv4CidrBlockAssociation:VpcIpv4CidrBlockAssociation": ("cidrBlock", "vpcId"),
    "aws:ec2/subnet:Subnet": ("cidrBlock", "vpcId", "availabilityZone", "availabilityZoneId"),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "description", "vpcId"),
    "aws:ec2/placementGroup:PlacementGroup": ("name", "strategy", "partitionCount", "spreadLevel"),
    "aws:ec2/natGateway:NatGateway": ("subnetId", "allocationId", "connectivityType"),
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "gatewayId"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("serviceName", "vpcId", "vpcEndpointType"),
    "aws:eks/addon:Addon": ("addonName", "clusterName"),
    "aws:eks/accessEntry:AccessEntry": ("clusterName", "principalArn", "type"),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": (
        "accessScope",
        "clusterName",
        "policyArn",
        "principalArn",
    ),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("clusterName", "namespace", "serviceAccount"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("policyArn", "role"),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": ("url",),
    "aws:kms/key:Key": ("customerMasterKeySpec", "keyUsage", "multiRegion"),
    "aws:kms/alias:Alias": ("name", "namePrefix"),
    "aws:s3/bucket:Bucket": ("bucket", "bucketPrefix"),
    "aws:ecr/repository:Repository": ("name", "encryptionConfigurations"),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": ("policy", "repository"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("securityGroupId",),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("securityGroupId",),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "namePrefix"),
    "aws:cloudwatch/dashboard:Dashboard": ("dashboardName",),
    "aws:autoscaling/tag:Tag": ("autoscalingGroupName", "tag.key"),
    "aws:amp/scraper:Scraper": ("source",),
    "kubernetes:core/v1:ConfigMap": ("data", "binaryData"),
    "kubernetes:core/v1:Secret": ("type", "data", "stringData"),
    "kubernetes:batch/v1:Job": ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
}
KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")
SG_RULES = (
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
)
SG_RULE_SOURCES = ("cidrIpv4", "cidrIpv6", "prefixListId", "referencedSecurityGroupId")


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def _version(value: Any) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(value).split("."))
    except ValueError:
        return ()


def _lustre_replaces(path: str, old: Any, new: Any, inputs: dict[str, Any]) -> str | None:
    """The Lustre file system's CustomizeDiff and version rules (see the module docstring)."""
    numbers = isinstance(old, (int, float)) and isinstance(new, (int, float))
    if path == "storageCapacity" and numbers and new < old:
        return "FSx cannot shrink a file system"
    if path == "storageCapacity" and inputs.get("deploymentType") == "SCRATCH_1":
        return "a SCRATCH_1 file system cannot change its capacity"
    if (
        path == "metadataConfiguration.iops"
        and numbers
        and new < old
        and (inputs.get("metadataConfiguration") or {}).get("mode") == "USER_PROVISIONED"
    ):
        return "FSx cannot lower provisioned metadata IOPS"
    if path == "fileSystemTypeVersion" and _version(new) < _version(old):
        return "a Lustre version downgrade recreates the file system"
    return None


def replaces(
    type_: str, path: str, old: Any, new: Any, replace_on_changes: list[str], inputs: dict[str, Any] | None = None
) -> str | None:
    """Why changing ``path`` replaces the resource, or None for an in-place update.
    ``inputs``: the resource's new inputs, for rules that depend on another property."""
    for prefix in replace_on_changes:
        if prefix == "*" or _under(path, prefix):
            return f"replaceOnChanges {prefix}"
    if type_.startswith("kubernetes:") and any(_under(path, p) for p in KUBERNETES_IDENTITY):
        return "a Kubernetes object's name and namespace are its identity"
    for prefix in FORCE_NEW.get(type_, ()):
        if _under(path, prefix):
            return f"{prefix} is ForceNew"
    if type_ == LUSTRE:
        return _lustre_replaces(path, old, new, inputs or {})
    # A source that appears or disappears is a change of source type; a new value of the same one
    # (both strings) is modified in place.
    if type_ in SG_RULES and path in SG_RULE_SOURCES and not (isinstance(old, str) and isinstance(new, str)):
        return "a security group rule cannot change its source type"
    return None


# --- replacements that follow other replacements ------------------------------------------------

UNKNOWN = "<unknown>"


def dependent_replacements(resources: dict[str, dict[str, Any]], replaced: dict[str, str]) -> dict[str, str]:
    """URN -> why, for every resource replaced because a property of it comes from a resource that
    is replaced (or created anew) - the rule the plan diff and the deploy preflight share.

    pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go: a replaced resource with
    deleteBeforeReplace (l.2044-2075) has calculateDependentReplacements (l.3220-3330) walk its
    dependents; each one with an input property whose propertyDependencies name a resource in the
    replace set is diffed with that property unknown, after applyReplaceOnChanges, and joins the set
    when that diff replaces. Without deleteBeforeReplace the same dependent is replaced a step later,
    when the new resource's outputs reach it (its input then changes); so either way it is replaced,
    and this rule does not need to know which. Transitive: a replaced dependent's dependents follow.

    ``resources``: URN -> {"type", "replaceOnChanges", "propertyDependencies" (property -> URNs),
    "inputs"}; ``replaced``: URN -> why, the resources replaced or created by their own changes.
    """
    found: dict[str, str] = {}
    grew = True
    while grew:
        grew = False
        for urn, r in resources.items():
            if urn in replaced or urn in found:
                continue
            for prop, sources in sorted((r.get("propertyDependencies") or {}).items()):
                from_replaced = [u for u in sources if u in replaced or u in found]
                if not from_replaced:
                    continue
                reason = replaces(
                    r["type"],
                    prop,
                    (r.get("inputs") or {}).get(prop),
                    UNKNOWN,
                    list(r.get("replaceOnChanges") or []),
                    r.get("inputs"),
                )
                if reason:
                    found[urn] = (
                        f"{prop} comes from {from_replaced[0].rsplit('::', 1)[-1]}, which is replaced ({reason})"
                    )
                    grew = True
                    break
    return found
