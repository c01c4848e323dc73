"""Security rules: what a stack-file edit must not switch off."""

from __future__ import annotations

import ipaddress
from typing import Any

from pulumi_policy import ResourceValidationArgs, StackValidationArgs
from pulumi_policy.proxy import UnknownValueError

from infra.config.models import PROD_STACK_PATTERN, is_prod_stack
from infra.specs.node_security import IMDS_HOP_LIMIT
from policy.guardrails.declare import Report, resource_rule, stack_rule
from policy.guardrails.props import (
    as_list,
    containers,
    dependencies_of,
    get,
    has,
    is_kubernetes_object,
    kind_of,
    known,
    object_name,
    of_type,
    pod_specs,
    truthy,
)

OPEN_RANGES = ("0.0.0.0/0", "::/0")
# Ranges that are no one's public address: whatever else a list covers is the internet's.
PRIVATE_RANGES = tuple(ipaddress.IPv4Network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "0.0.0.0/8",
    "224.0.0.0/3",
))  # fmt: skip
GLOBAL_IPV6 = ipaddress.IPv6Network("2000::/3")


def world_open(cidrs: list[Any]) -> bool:
    """Whether the ranges together cover every public address of IPv4 or IPv6: 0.0.0.0/0 itself,
    or the world in slices (0.0.0.0/1 + 128.0.0.0/1, or every public block but the private ones;
    for IPv6 all of 2000::/3, the global unicast space)."""
    v4: list[ipaddress.IPv4Network] = []
    v6: list[ipaddress.IPv6Network] = []
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            continue
        if isinstance(network, ipaddress.IPv4Network):
            v4.append(network)
        else:
            v6.append(network)
    # Outside 2000::/3 (global unicast, RFC 4291 2.4 / IANA's IPv6 address space) nothing is routed on
    # the internet, so covering 2000::/3 is covering the world: ::/0, 2000::/3 itself, or its slices.
    if any(GLOBAL_IPV6.subnet_of(n) for n in ipaddress.collapse_addresses(v6)):
        return True
    covered = list(ipaddress.collapse_addresses([*v4, *PRIVATE_RANGES]))
    return any(n.prefixlen == 0 for n in covered) and bool(v4)


# Only the AWS cluster is checked, never pulumi-eks's eks:index:Cluster. That component is remote: the
# engine sees it registered from inside the pulumi-eks provider, whose @pulumi/pulumi (3.173.0,
# pulumi-eks nodejs/eks/yarn.lock v4.3.0) sends a component's props as {} (sdk/nodejs/resource.ts
# ComponentResource, "Explicitly ignore the props passed in"), so rules reading its props would
# flag every real preview. Its child aws:eks/cluster:Cluster carries encryptionConfig,
# enabledClusterLogTypes and vpcConfig (pulumi-eks nodejs/eks/cluster/cluster.ts, v4.3.0 to
# HEAD). Offline the mocks never run the component, so offline/plan/policy_run.py adds that child.
EKS_CLUSTER = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EBS_VOLUME = "aws:ebs/volume:Volume"
LOAD_BALANCERS = (
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:alb/loadBalancer:LoadBalancer",
    "aws:elb/loadBalancer:LoadBalancer",
)
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LEGACY_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
ECR_REPOSITORY = "aws:ecr/repository:Repository"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
KMS_KEY = "aws:kms/key:Key"
SERVICE = "kubernetes:core/v1:Service"
ALL_CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


# --- EKS -----------------------------------------------------------------------------------------


@resource_rule(
    "eks-secrets-encryption",
    "EKS clusters encrypt Kubernetes secrets with a KMS key (envelope encryption).",
    applies_to=(EKS_CLUSTER,),
)
def eks_secrets_encryption(args: ResourceValidationArgs, report: Report) -> None:
    if has(args.props, "encryptionConfig"):
        try:
            configs = as_list(get(args.props, "encryptionConfig"))
        except UnknownValueError:
            # pulumi-eks builds the whole block in an apply over the key's ARN (cluster.ts
            # encryptionConfig), unknown while the key is new. Present is enough: EKS accepts only
            # "secrets" as its resources and requires provider.keyArn.
            return
    else:
        configs = []
    if not any(
        "secrets" in as_list(get(c, "resources")) and has(get(c, "provider", default={}), "keyArn") for c in configs
    ):
        report(
            f"EKS cluster '{args.name}' stores Kubernetes secrets unencrypted: add encryptionConfig for 'secrets' with a KMS key "
            "(pulumi-eks: encryptionConfigKeyArn)."
        )


@resource_rule(
    "eks-control-plane-logs",
    "EKS clusters send their control-plane logs (API, audit, authenticator, ...) to CloudWatch.",
    applies_to=(EKS_CLUSTER,),
    config_schema={
        "requiredLogTypes": {
            "type": "array",
            "items": {"type": "string", "enum": ALL_CONTROL_PLANE_LOGS},
            "default": ALL_CONTROL_PLANE_LOGS,
        }
    },
)
def eks_control_plane_logs(args: ResourceValidationArgs, report: Report) -> None:
    required = list(args.get_config().get("requiredLogTypes", ALL_CONTROL_PLANE_LOGS))
    missing = [t for t in required if t not in as_list(get(args.props, "enabledClusterLogTypes"))]
    if missing:
        report(
            f"EKS cluster '{args.name}' does not send control-plane logs {missing} to CloudWatch: add them to enabledClusterLogTypes."
        )


@resource_rule(
    "eks-endpoint-not-open",
    "A public EKS API endpoint is limited to listed networks, never 0.0.0.0/0 or ::/0.",
    applies_to=(EKS_CLUSTER,),
)
def eks_endpoint_not_open(args: ResourceValidationArgs, report: Report) -> None:
    # pulumi-eks passes endpointPublicAccess/publicAccessCidrs through unset when not given, and the
    # AWS API then defaults to a public endpoint open to 0.0.0.0/0.
    vpc = get(args.props, "vpcConfig", default={})
    public, cidrs = get(vpc, "endpointPublicAccess", default=True), get(vpc, "publicAccessCidrs")
    if not truthy(public):
        return
    cidrs = as_list(cidrs) or ["0.0.0.0/0 (the default)"]
    open_to = cidrs if world_open([c.split(" ")[0] for c in cidrs]) else []
    if open_to:
        report(
            f"EKS cluster '{args.name}' has a public API endpoint open to {open_to}: list your networks in "
            "publicAccessCidrs (stack key endpointAccess.publicCidrs) or turn the public endpoint off."
        )


# --- launch templates ----------------------------------------------------------------------------


@resource_rule(
    "launch-template-hardening",
    "Launch templates require IMDSv2 with one metadata hop (or turn the metadata service off), encrypt every EBS volume they declare (the "
    "root volume included) and give no public IP.",
    applies_to=(LAUNCH_TEMPLATE,),
)
def launch_template_hardening(args: ResourceValidationArgs, report: Report) -> None:
    # pulumi-aws LaunchTemplate metadataOptions.httpEndpoint: "enabled" (the default) or "disabled".
    # With the endpoint off there are no tokens to require and no hops to count.
    if get(args.props, "metadataOptions", "httpEndpoint") != "disabled":
        _metadata_hardening(args.name, args.props, report)
    mappings = as_list(get(args.props, "blockDeviceMappings"))
    for i, mapping in enumerate(mappings):
        if get(mapping, "ebs") is not None and not truthy(get(mapping, "ebs", "encrypted")):
            report(
                f"Launch template '{args.name}' has an unencrypted EBS volume "
                f"({get(mapping, 'deviceName', default=f'blockDeviceMappings[{i}]')}): set ebs.encrypted to true."
            )
    if not any(get(m, "ebs") is not None for m in mappings):
        report(
            f"Launch template '{args.name}' declares no EBS volume: the root volume then takes the AMI snapshot's "
            "encryption; declare it in blockDeviceMappings with ebs.encrypted true."
        )
    for i, nic in enumerate(as_list(get(args.props, "networkInterfaces"))):
        if truthy(get(nic, "associatePublicIpAddress")):
            report(
                f"Launch template '{args.name}' gives network interface {i} a public IP: nodes stay in private subnets."
            )


def _metadata_hardening(name: str, props: Any, report: Report) -> None:
    if get(props, "metadataOptions", "httpTokens") != "required":
        report(f"Launch template '{name}' allows IMDSv1: set metadataOptions.httpTokens to 'required'.")
    hops = get(props, "metadataOptions", "httpPutResponseHopLimit")
    if hops is None or not isinstance(hops, (int, float)) or hops > IMDS_HOP_LIMIT:
        # With two hops every pod on the pod network reaches the metadata service and the node's role.
        report(
            f"Launch template '{name}' sets metadataOptions.httpPutResponseHopLimit to {hops}: set it to "
            f"{IMDS_HOP_LIMIT}, so pods on the pod network cannot take the node's credentials (unset, the AMI's or "
            "the account's default applies)."
        )


def is_node_class(resource_type: str) -> bool:
    return resource_type.startswith("kubernetes:karpenter.k8s.aws/") and resource_type.endswith(":EC2NodeClass")


@resource_rule(
    "node-class-metadata", "Karpenter EC2NodeClasses keep IMDSv2 with one metadata hop.", applies_to=is_node_class
)
def node_class_metadata(args: ResourceValidationArgs, report: Report) -> None:
    # Unset keys take the CRD's defaults: httpTokens required, httpPutResponseHopLimit 1
    # (aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/ec2nodeclass.go, kubebuilder defaults).
    options = get(args.props, "spec", "metadataOptions", default={})
    hops = get(options, "httpPutResponseHopLimit", default=1)
    if isinstance(hops, (int, float)) and hops > IMDS_HOP_LIMIT:
        report(
            f"EC2NodeClass '{object_name(args.props)}' sets metadataOptions.httpPutResponseHopLimit to {hops}: keep it at "
            f"{IMDS_HOP_LIMIT}, so pods on the pod network cannot take the node's credentials."
        )
    if get(options, "httpTokens", default="required") != "required":
        report(f"EC2NodeClass '{object_name(args.props)}' allows IMDSv1: keep metadataOptions.httpTokens 'required'.")


@resource_rule("ebs-volume-encrypted", "Standalone EBS volumes are encrypted.", applies_to=(EBS_VOLUME,))
def ebs_volume_encrypted(args: ResourceValidationArgs, report: Report) -> None:
    # pulumi-aws ebs.Volume `encrypted`: unset, the volume is encrypted only under the account's
    # default encryption, which this program does not manage.
    if not truthy(get(args.props, "encrypted")):
        report(
            f"EBS volume '{args.name}' is not encrypted: set encrypted to true (and a kmsKeyId if a key of your own)."
        )


@resource_rule(
    "node-group-no-open-ssh",
    "EKS node groups take no SSH key unless remoteAccess names the security groups allowed in.",
    applies_to=(NODE_GROUP,),
)
def node_group_no_open_ssh(args: ResourceValidationArgs, report: Report) -> None:
    remote = get(args.props, "remoteAccess")
    if remote is None:
        return
    if not as_list(get(remote, "sourceSecurityGroupIds")):
        # EKS API RemoteAccessConfig: "If you specify ec2SshKey but don't specify a source security group
        # ... port 22 on the worker nodes is opened to the internet (0.0.0.0/0)".
        report(
            f"Node group '{args.name}' sets remoteAccess without sourceSecurityGroupIds: EKS then opens port 22 "
            "to 0.0.0.0/0. Use SSM Session Manager (features.sessionManager), or name the security groups allowed in."
        )


@resource_rule(
    "node-group-launch-template",
    "EKS node groups name a launch template of the stack's, not the one EKS generates with its own metadata options.",
    applies_to=(NODE_GROUP,),
)
def node_group_launch_template(args: ResourceValidationArgs, report: Report) -> None:
    # Without one, "the Amazon EKS API creates one automatically with default values" (EKS user guide,
    # launch-templates.html): not our metadata hop limit, which launch-template-hardening checks only on
    # templates the stack declares. remoteAccess (an SSH key) is accepted only on such groups, so an
    # SSH key and the default metadata options come together. The input is {id, version}, unknown at
    # a first preview while the template is new: its presence is what counts.
    if not has(args.props, "launchTemplate"):
        report(
            f"Node group '{args.name}' has no launch template: EKS then generates one with its default metadata "
            f"options, not IMDSv2 with {IMDS_HOP_LIMIT} hop, so pods on the pod network could take the node's "
            "credentials. Give it a launch template (put an SSH key there, or use SSM Session Manager: "
            "features.sessionManager)."
        )


@resource_rule(
    "load-balancer-internal",
    "Load balancers declared as AWS resources are internal.",
    applies_to=LOAD_BALANCERS,
    config_schema={
        "allowedNames": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "resource names of load balancers meant to face the internet, each with a reason",
        }
    },
)
def load_balancer_internal(args: ResourceValidationArgs, report: Report) -> None:
    if args.name in set(args.get_config().get("allowedNames", [])):
        return
    # pulumi-aws lb.LoadBalancer / elb.LoadBalancer `internal`: unset means internet-facing.
    if not truthy(get(args.props, "internal")):
        report(
            f"Load balancer '{args.name}' is internet-facing: set internal to true, or list it under allowedNames "
            "with a reason."
        )


# --- security groups -----------------------------------------------------------------------------


def _sources(rule: Any, cidr_keys: tuple[str, ...]) -> list[str]:
    return [c for key in cidr_keys for c in as_list(get(rule, key))]


@resource_rule(
    "security-group-no-open-ingress",
    "No security group admits ingress from 0.0.0.0/0 or ::/0 (2000::/3, all global IPv6, counts), whole or in slices (0.0.0.0/1 + 128.0.0.0/1).",
    applies_to=(INGRESS_RULE, LEGACY_RULE, SECURITY_GROUP),
)
def security_group_no_open_ingress(args: ResourceValidationArgs, report: Report) -> None:
    t, p = args.resource_type, args.props
    if t == INGRESS_RULE:
        sources = _sources(p, ("cidrIpv4", "cidrIpv6"))
    elif t == LEGACY_RULE and get(p, "type") == "ingress":
        sources = _sources(p, ("cidrBlocks", "ipv6CidrBlocks"))
    elif t == SECURITY_GROUP:
        sources = [c for rule in as_list(get(p, "ingress")) for c in _sources(rule, ("cidrBlocks", "ipv6CidrBlocks"))]
    else:
        return  # a legacy rule of type egress
    if world_open(sources):
        report(
            f"Security group rule '{args.name}' admits traffic from {sorted(set(sources))}, the whole internet: "
            "allow a security group or a listed network instead."
        )


@stack_rule(
    "security-group-no-sliced-open-ingress",
    "The separate ingress rules of one security group do not add up to the whole internet.",
)
def security_group_no_sliced_open_ingress(args: StackValidationArgs, report: Report) -> None:
    # One aws:vpc/securityGroupIngressRule holds one range: 0.0.0.0/1 and 128.0.0.0/1 in two rules
    # of the same group open it to the world as surely as 0.0.0.0/0 does.
    by_group: dict[str, tuple[Any, list[str]]] = {}
    for rule in of_type(args.resources, INGRESS_RULE, LEGACY_RULE):
        if rule.resource_type == LEGACY_RULE and get(rule.props, "type") != "ingress":
            continue
        sources = known(_sources, rule.props, ("cidrIpv4", "cidrIpv6", "cidrBlocks", "ipv6CidrBlocks"), unknown=[])
        for group in dependencies_of(rule, "securityGroupId"):
            by_group.setdefault(group.urn, (group, []))[1].extend(sources)
    for group, sources in by_group.values():
        if world_open(sources) and not any(c in OPEN_RANGES for c in sources):
            report(
                f"The ingress rules of security group '{group.name}' admit {sorted(set(sources))} together, the whole "
                "internet: allow a security group or listed networks instead.",
                group.urn,
            )


@stack_rule(
    "efa-security-group-self-only", "The security group on EFA interfaces allows traffic to and from itself only."
)
def efa_security_group_self_only(args: StackValidationArgs, report: Report) -> None:
    """The EFA group: every declared security group on an EFA interface of a launch template."""
    efa_groups = {}
    for lt in of_type(args.resources, LAUNCH_TEMPLATE):
        nics = as_list(get(lt.props, "networkInterfaces"))
        if any(get(n, "interfaceType") in ("efa", "efa-only") for n in nics):
            for sg in dependencies_of(lt, "networkInterfaces", SECURITY_GROUP):
                efa_groups[sg.urn] = sg
    for sg in efa_groups.values():
        for block in ("ingress", "egress"):
            # Inline rules are a computed output: unknown on a new group at the first preview,
            # when its separate rule resources (below) are what is declared.
            for rule in as_list(known(get, sg.props, block)):
                if not truthy(get(rule, "self")) or any(
                    as_list(get(rule, k)) for k in ("cidrBlocks", "ipv6CidrBlocks", "prefixListIds", "securityGroups")
                ):
                    report(
                        f"EFA security group '{sg.name}' has an inline {block} rule reaching beyond itself: "
                        "EFA traffic flows between members of the group only.",
                        sg.urn,
                    )
        for rule in of_type(args.resources, INGRESS_RULE, EGRESS_RULE, LEGACY_RULE):
            if sg not in dependencies_of(rule, "securityGroupId"):
                continue
            referenced = dependencies_of(rule, "referencedSecurityGroupId") + dependencies_of(
                rule, "sourceSecurityGroupId"
            )
            is_self = truthy(get(rule.props, "self")) or (referenced == [sg])
            sources = [
                c
                for k in ("cidrIpv4", "cidrIpv6", "prefixListId", "cidrBlocks", "ipv6CidrBlocks", "prefixListIds")
                for c in as_list(get(rule.props, k))
            ]
            if not is_self or sources:
                report(
                    f"Rule '{rule.name}' of EFA security group '{sg.name}' reaches beyond the group: EFA security "
                    "groups allow all traffic to and from themselves and nothing else.",
                    rule.urn,
                )


# --- registries, keys, buckets -------------------------------------------------------------------


@resource_rule(
    "ecr-immutable-scanned",
    "ECR repositories have immutable tags and scan images on push.",
    applies_to=(ECR_REPOSITORY,),
)
def ecr_immutable_scanned(args: ResourceValidationArgs, report: Report) -> None:
    if get(args.props, "imageTagMutability", default="MUTABLE") not in ("IMMUTABLE", "IMMUTABLE_WITH_EXCLUSION"):
        report(f"ECR repository '{args.name}' lets a tag be pushed over: set imageTagMutability to IMMUTABLE.")
    if not truthy(get(args.props, "imageScanningConfiguration", "scanOnPush")):
        report(f"ECR repository '{args.name}' does not scan images on push: set imageScanningConfiguration.scanOnPush.")


@resource_rule("kms-key-rotation", "Symmetric KMS keys rotate automatically.", applies_to=(KMS_KEY,))
def kms_key_rotation(args: ResourceValidationArgs, report: Report) -> None:
    # Only symmetric encryption keys can rotate automatically.
    if get(args.props, "customerMasterKeySpec", default="SYMMETRIC_DEFAULT") != "SYMMETRIC_DEFAULT":
        return
    if not truthy(get(args.props, "enableKeyRotation")):
        report(f"KMS key '{args.name}' does not rotate: set enableKeyRotation to true.")


# FSx CreateFileSystemLustreConfiguration.AutomaticBackupRetentionDays: 0 (the API's default: no
# automatic backups) to 90. SCRATCH deployment types take no backups at all (the stack config refuses
# to retain one), so the rule is about the persistent ones. terraform-provider-aws
# aws_fsx_lustre_file_system defaults deploymentType to SCRATCH_1.
MAX_BACKUP_RETENTION_DAYS = 90


@resource_rule(
    "fsx-retained-backups",
    "A protected (retained) persistent FSx for Lustre file system takes daily automatic backups, kept at least "
    "minimumRetentionDays days: `protect` stops only `pulumi destroy`, not a deletion on the file system.",
    applies_to=(LUSTRE,),
    config_schema={
        "minimumRetentionDays": {"type": "integer", "minimum": 1, "maximum": MAX_BACKUP_RETENTION_DAYS, "default": 1}
    },
)
def fsx_retained_backups(args: ResourceValidationArgs, report: Report) -> None:
    if not args.opts.protect or str(get(args.props, "deploymentType", default="SCRATCH_1")).startswith("SCRATCH_"):
        return
    minimum = int(args.get_config().get("minimumRetentionDays", 1))
    days = known(get, args.props, "automaticBackupRetentionDays", unknown=minimum)
    if not isinstance(days, (int, float)) or days < minimum:
        report(
            f"FSx for Lustre file system '{args.name}' is retained (protected) but keeps "
            f"{'no' if not days else days} day(s) of automatic backups: set automaticBackupRetentionDays to "
            f"{minimum}-{MAX_BACKUP_RETENTION_DAYS} (stack key storage.backupRetentionDays)."
        )


DATA_REPOSITORY_ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"


def stack_of(urn: str) -> str:
    """The stack a resource belongs to: urn:pulumi:<stack>::<project>::<type>::<name>."""
    return urn.split("::", 1)[0].split(":", 2)[-1]


# Prod-ness comes from two places that do not share a line of the stack file: the stack's name (the
# same pattern the program applies, infra/config/models.py) and the pack's configuration for that
# stack (policy/config.prod.json, which the workflows pass to prod's previews and ups). Either one
# makes the rule apply. What it can see is each resource's inputs and options, not the plan's diff:
# pulumi-policy v1.21.0 sdk/python/lib/pulumi_policy/policy.py ResourceValidationArgs carries
# resource_type, props (the inputs), urn, name, opts, provider and stack_tags, nothing of the old
# state, so a replacement is refused elsewhere (the engine's `protect`, the plan diff's gate).
@resource_rule(
    "prod-data-protected",
    "In prod (a stack named prod or prod-<suffix>, or environment prod in this policy's config) the FSx "
    "file system is persistent, protected and keeps a final backup, and its S3 links are protected.",
    applies_to=(LUSTRE, DATA_REPOSITORY_ASSOCIATION),
    config_schema={"environment": {"type": "string", "enum": ["dev", "prod"], "default": "dev"}},
)
def prod_data_protected(args: ResourceValidationArgs, report: Report) -> None:
    stack = stack_of(args.urn)
    if not is_prod_stack(stack) and args.get_config().get("environment") != "prod":
        return
    where = f"prod (stack {stack!r}; prod stacks match {PROD_STACK_PATTERN!r})"
    if not args.opts.protect:
        report(
            f"{args.resource_type.rsplit(':', 1)[-1]} '{args.name}' is not protected in {where}: `pulumi destroy` "
            "or a replacement would delete it (stack key storage.retain must stay true, or unset)."
        )
    if args.resource_type != LUSTRE:
        return
    deployment = str(get(args.props, "deploymentType", default="SCRATCH_1"))
    if deployment.startswith("SCRATCH_"):
        report(
            f"FSx for Lustre file system '{args.name}' is {deployment} in {where}: a SCRATCH file system keeps no "
            "backups; use PERSISTENT_2 (stack key storage.deploymentType)."
        )
    # Kept only where the program says false: the provider's default is to skip it.
    elif (skip := known(get, args.props, "skipFinalBackup", unknown=False)) is None or truthy(skip):
        report(
            f"FSx for Lustre file system '{args.name}' skips its final backup in {where}: set skipFinalBackup to "
            "false (stack key storage.retain must stay true, or unset)."
        )


BUCKET_TYPES = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ENCRYPTION_TYPES = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
VERSIONING_TYPES = ("aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2")
PUBLIC_BLOCK_KEYS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


@stack_rule("s3-bucket-protected", "S3 buckets block public access, are encrypted and versioned.")
def s3_bucket_protected(args: StackValidationArgs, report: Report) -> None:
    def attached(bucket: Any, *types: str) -> list[Any]:
        return [r for r in of_type(args.resources, *types) if bucket in dependencies_of(r, "bucket")]

    for bucket in of_type(args.resources, *BUCKET_TYPES):
        blocks = attached(bucket, PUBLIC_ACCESS_BLOCK)
        if not any(all(truthy(get(b.props, k)) for k in PUBLIC_BLOCK_KEYS) for b in blocks):
            report(
                f"S3 bucket '{bucket.name}' does not block public access: add a BucketPublicAccessBlock with all four settings true.",
                bucket.urn,
            )
        # The bucket's own serverSideEncryptionConfiguration and versioning are computed outputs,
        # unknown at the first preview: read only when no separate resource says it, and an
        # unknown one is no finding (the separate resources are checked).
        if not attached(bucket, *ENCRYPTION_TYPES) and not known(
            get, bucket.props, "serverSideEncryptionConfiguration", unknown=True
        ):
            report(
                f"S3 bucket '{bucket.name}' has no encryption configuration: add a BucketServerSideEncryptionConfiguration (SSE-KMS or SSE-S3).",
                bucket.urn,
            )
        versioned = any(
            get(v.props, "versioningConfiguration", "status") == "Enabled" for v in attached(bucket, *VERSIONING_TYPES)
        )
        if not versioned and not truthy(known(get, bucket.props, "versioning", "enabled", unknown=True)):
            report(
                f"S3 bucket '{bucket.name}' is not versioned: add a BucketVersioning with status Enabled.", bucket.urn
            )


# --- Kubernetes ----------------------------------------------------------------------------------

# The cluster has no AWS Load Balancer Controller: the cloud provider for AWS serves these Services
# (kubernetes/cloud-provider-aws v1.34 pkg/providers/v1/aws.go, as workloads/load_balancer_rules.py
# cites): its internal annotation set to anything but "false" makes the ELB internal.
LB_INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"
LB_TLS_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"


@resource_rule(
    "load-balancer-restricted",
    "Kubernetes Services of type LoadBalancer are internal, or have source ranges and TLS.",
    applies_to=(SERVICE,),
)
def load_balancer_restricted(args: ResourceValidationArgs, report: Report) -> None:
    if get(args.props, "spec", "type") != "LoadBalancer":
        return
    annotations = get(args.props, "metadata", "annotations", default={})
    if annotations.get(LB_INTERNAL) not in (None, "", "false"):
        return
    name = object_name(args.props)
    ranges = as_list(get(args.props, "spec", "loadBalancerSourceRanges"))
    if not ranges or world_open(ranges):
        report(
            f"Service '{name}' is an internet-facing load balancer open to everyone: set spec.loadBalancerSourceRanges "
            "to your networks, or make it internal."
        )
    if not annotations.get(LB_TLS_CERT):
        report(
            f"Service '{name}' is an internet-facing load balancer without TLS: set the {LB_TLS_CERT} annotation "
            "to an ACM certificate, or make it internal."
        )


def image_tag_problem(image: str) -> str | None:
    """Why an image reference is not pinned, or None. A digest pins; no tag means ``latest``."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (Kubernetes pulls ':latest')"
    if last.rsplit(":", 1)[1] == "latest":
        return "uses ':latest'"
    return None


@resource_rule(
    "image-pinned-tag",
    "Every container image names a version tag or digest, never ':latest' or no tag.",
    applies_to=is_kubernetes_object,
)
def image_pinned_tag(args: ResourceValidationArgs, report: Report) -> None:
    for where, spec in pod_specs(args.resource_type, args.props):
        for cwhere, c in containers(spec):
            try:
                image = get(c, "image")
            except UnknownValueError:
                continue  # e.g. a repository URL not assigned yet; its tag is checked once known
            if not isinstance(image, str):
                continue
            if problem := image_tag_problem(image):
                report(
                    f"{kind_of(args.resource_type)} '{object_name(args.props)}' {where}.{cwhere} image '{image}' {problem}: "
                    "pin a version tag or a digest."
                )


# Pod Security "baseline" admits these added capabilities and no other (the container runtime's
# default set; kubernetes/pod-security-admission policy/check_capabilities_baseline.go, v0.34.9).
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})  # fmt: skip
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


@resource_rule(
    "no-privileged-or-host-path",
    "No privileged container, host namespace (network, PID, IPC), host port, hostPath volume or capability "
    "beyond the runtime's default set, outside the objects listed as needing them (device plugins).",
    applies_to=is_kubernetes_object,
    config_schema={
        "allowedObjects": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "'namespace/name' of objects allowed to be privileged, "
            "share host namespaces or ports, mount host paths or add capabilities",
        }
    },
)
def no_privileged_or_host_path(args: ResourceValidationArgs, report: Report) -> None:
    allowed = set(args.get_config().get("allowedObjects", []))
    name = object_name(args.props)
    if name in allowed:
        return
    kind = kind_of(args.resource_type)
    for where, spec in pod_specs(args.resource_type, args.props):
        shared = [k for k in HOST_NAMESPACES if truthy(get(spec, k))]
        if shared:
            report(
                f"{kind} '{name}' {where} shares the node's {', '.join(shared)}: a pod there sees the node's network, "
                "processes or IPC (and, on the host network, the instance metadata service); drop them, or list the "
                "object under allowedObjects with a reason."
            )
        for cwhere, c in containers(spec):
            if truthy(get(c, "securityContext", "privileged")):
                report(
                    f"{kind} '{name}' {where}.{cwhere} runs privileged: request the Neuron/EFA "
                    "devices as resources instead, or list the object under allowedObjects with a reason."
                )
            # Pod Security baseline allows hostPort only unset or 0 (kubernetes/pod-security-admission
            # policy/check_hostPorts.go, v0.34.9): a host port binds the node's address, past NetworkPolicy.
            host_ports = sorted({p for port in as_list(get(c, "ports")) if (p := get(port, "hostPort"))})
            if host_ports:
                report(
                    f"{kind} '{name}' {where}.{cwhere} binds host ports {host_ports}: reach it through a Service "
                    "instead, or list the object under allowedObjects with a reason."
                )
            added = sorted(
                set(map(str, as_list(get(c, "securityContext", "capabilities", "add")))) - BASELINE_CAPABILITIES
            )
            if added:
                report(
                    f"{kind} '{name}' {where}.{cwhere} adds capabilities {added} beyond the runtime's default set: "
                    "drop them, or list the object under allowedObjects with a reason."
                )
        for v in get(spec, "volumes", default=[]):
            if get(v, "hostPath") is not None:
                report(
                    f"{kind} '{name}' {where} mounts hostPath '{get(v, 'hostPath', 'path')}': "
                    "only device plugins need host paths; use a volume, or list the object under allowedObjects with a reason."
                )


POLICIES = [
    eks_secrets_encryption,
    eks_control_plane_logs,
    eks_endpoint_not_open,
    launch_template_hardening,
    node_class_metadata,
    ebs_volume_encrypted,
    node_group_no_open_ssh,
    node_group_launch_template,
    load_balancer_internal,
    security_group_no_open_ingress,
    security_group_no_sliced_open_ingress,
    efa_security_group_self_only,
    ecr_immutable_scanned,
    kms_key_rotation,
    fsx_retained_backups,
    prod_data_protected,
    s3_bucket_protected,
    load_balancer_restricted,
    image_pinned_tag,
    no_privileged_or_host_path,
]
