"""Public images a node pulls on every launch, served from the cluster's own registry.

An ECR pull-through cache rule maps ``<account>.dkr.ecr.<region>.amazonaws.com/<prefix>/<repository>:<tag>``
to ``public.ecr.aws/<repository>:<tag>``: the first pull of a tag copies the image from ECR Public into
the private repository ``<prefix>/<repository>``, later pulls are served from it (Amazon ECR user guide,
"Sync an upstream registry with an Amazon ECR private registry", pull-through-cache.html: ECR Public
needs no credential; create-pull-through-cache-rule: the prefix is 2-30 characters, a trailing "/" is
implied). Private ECR keeps image layers in Amazon S3, which the VPC's S3 gateway endpoint reaches
without the NAT gateway (infra/components/network.py), once a tag is cached; ECR Public is no VPC endpoint's service (ECR user
guide, vpc-endpoints.html, "Considerations": "VPC endpoints don't support Amazon ECR Public repositories.
Consider using a pull through cache rule"), so without the rule every node launch pulls the multi-GB
image from the internet through the NAT gateway, at its per-GB charge.

The node's kubelet pulls with the node role (the ECR credential provider), which needs beside read
access ``ecr:BatchImportUpstreamImage`` to import the upstream image, and ``ecr:CreateRepository`` only
where the repository does not exist yet (ECR user guide, pull-through-cache-iam.html, "IAM permissions
required to sync an upstream registry with an Amazon ECR private registry"): every repository is declared
here, so only the import is granted, on this cluster's prefix only (``node_policy``).

Only a cached image comes from S3: on the first pull of a tag ECR imports it from the upstream while the
node's layers come from ECR Public's own content delivery, through the NAT gateway (aws/containers-roadmap
#939). The first nodes of a region, and those launched while that import runs, pull the upstream way.

Pure values and functions: the registries component declares the rule and the repositories, the IAM
helpers the node policy; the burn-in takes its image reference from ``through_cache``, the FSx CSI chart
its repositories from ``chart_repositories``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from infra.facts.neuron import BURN_IN_IMAGE
from infra.facts.versions import NEURON_MONITOR_IMAGE, PYTHON_SLIM_IMAGE

UPSTREAM_REGISTRY = "public.ecr.aws"
# The repository prefix: 2-30 characters (create-pull-through-cache-rule --ecr-repository-prefix
# constraints), in ECR's repository-name pattern.
PREFIX_MAX_LENGTH = 30
_ECR_NAME = r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*"
PREFIX_SUFFIX = "ecr-public"
# The actions beside the managed read-only policy's (AmazonEC2ContainerRegistryReadOnly lists neither).
# ecr:CreateRepository is left out: every cached repository is declared (infra/components/registries.py), so a
# node pulling an image nobody declared fails loudly instead of creating an untracked repository.
NODE_ACTIONS = ("ecr:BatchImportUpstreamImage",)

# The FSx CSI driver's node DaemonSet runs on every node, Trainium ones included (infra/components/storage.py:
# node.tolerateAllTaints), so every launch pulls its images too: the chart's own, by values key, as
# kubernetes-sigs/aws-fsx-csi-driver tag helm-chart-aws-fsx-csi-driver-1.17.0 charts/aws-fsx-csi-driver/
# values.yaml sets them (templates/node-daemonset.yaml renders `<repository>:<tag>`; the controller's
# livenessprobe sidecar reads the same key). Only the repositories are overridden: the tags stay the chart's.
# A chart bump re-reads them (tests/test_image_delivery.py ties FSX_CSI_CHART to the pin).
FSX_CSI_CHART = "1.17.0"
FSX_CSI_NODE_IMAGES: dict[tuple[str, ...], str] = {
    ("image",): "public.ecr.aws/fsx-csi-driver/aws-fsx-csi-driver:v1.9.0",
    ("sidecars", "livenessProbe", "image"): "public.ecr.aws/csi-components/livenessprobe:v2.18.0-eksbuild.3",
    ("sidecars", "nodeDriverRegistrar", "image"): (
        "public.ecr.aws/csi-components/csi-node-driver-registrar:v2.16.0-eksbuild.3"
    ),
}

# storage.kind efs: the EFS CSI driver's node DaemonSet runs on every node (its chart's default toleration,
# `operator: Exists`), so every launch pulls its images: by values key, as kubernetes-sigs/aws-efs-csi-driver
# tag helm-chart-aws-efs-csi-driver-4.4.1 charts/aws-efs-csi-driver/values.yaml sets them (templates/
# node-daemonset.yaml renders `<repository>:<tag>`, the plugin's tag defaulting to the chart's appVersion but set
# in values). The controller, and its csi-provisioner sidecar, is not installed (infra/components/efs_storage.py).
# Its sidecars live in the same repositories as the FSx driver's, at other tags.
EFS_CSI_CHART = "4.4.1"
EFS_CSI_NODE_IMAGES: dict[tuple[str, ...], str] = {
    ("image",): "public.ecr.aws/efs-csi-driver/amazon/aws-efs-csi-driver:v3.4.1",
    ("sidecars", "livenessProbe", "image"): "public.ecr.aws/csi-components/livenessprobe:v2.19.0-eksbuild.3",
    ("sidecars", "nodeDriverRegistrar", "image"): (
        "public.ecr.aws/csi-components/csi-node-driver-registrar:v2.17.0-eksbuild.3"
    ),
}

# The Neuron chart's node DaemonSets (the device plugin, the DRA driver, the node problem detector's recovery
# agent) run on every Trainium node, so every launch pulls their images too: by values key, as
# aws-neuron/neuron-helm-charts charts/neuron-helm-chart values.yaml sets them at chart 1.9.0 (b77a6f90).
# The problem detector itself comes from registry.k8s.io, which this rule does not serve. A chart bump
# re-reads them (tests/test_image_delivery.py ties NEURON_CHART to the pin).
NEURON_CHART = "1.9.0"
NEURON_CHART_IMAGES: dict[tuple[str, ...], str] = {
    ("devicePlugin", "image"): "public.ecr.aws/neuron/neuron-device-plugin:2.31.0.0",
    ("draDriver", "image"): "public.ecr.aws/neuron/neuron-dra-driver:1.1.0",
    ("npd", "nodeRecovery", "image"): "public.ecr.aws/neuron/neuron-node-recovery:1.11.0",
}

# The public images nodes pull at every launch, through the cache. The burn-in's DLC is the multi-GB one:
# every health-gated Trainium node pulls it before it takes a job (infra/specs/burn_in_objects.py). Its
# tag stays exactly the pin (infra/facts/versions.py NEURON_DLC_PYTORCH_2_9); only the host and the
# prefix in front of the repository change. neuron-monitor and the EFA exporter (on the Python image) run on
# every Trainium or EFA node while a Prometheus scrapes them (infra/specs/node_metrics.py); their repositories
# are declared either way, as an empty one costs nothing.
# The shared file system's node images are those of the stack's storage.kind.
STORAGE_NODE_IMAGES = {"fsx": FSX_CSI_NODE_IMAGES, "efs": EFS_CSI_NODE_IMAGES}


def cached_images(storage_kind: str = "fsx") -> tuple[str, ...]:
    return (
        BURN_IN_IMAGE.base,
        *STORAGE_NODE_IMAGES[storage_kind].values(),
        *NEURON_CHART_IMAGES.values(),
        NEURON_MONITOR_IMAGE,
        PYTHON_SLIM_IMAGE,
    )


CACHED_IMAGES = cached_images("fsx")


def cache_prefix(cluster_name: str) -> str:
    """This cluster's repository prefix: ``<cluster>/ecr-public``, so two clusters in one account and region
    each have their own rule (a registry holds one rule per prefix); a name too long for the 30 characters
    gets a fixed short form from its hash instead."""
    readable = f"{cluster_name}/{PREFIX_SUFFIX}"
    if len(readable) <= PREFIX_MAX_LENGTH and re.fullmatch(_ECR_NAME, readable):
        return readable
    return f"c{hashlib.sha256(cluster_name.encode()).hexdigest()[:12]}/{PREFIX_SUFFIX}"


def registry_host(partition: str, region: str, account_id: str) -> str:
    """The account's private registry: <account>.dkr.ecr.<region>.amazonaws.com[.cn] (Amazon ECR user guide,
    "Private repository concepts"; workloads/load_balancer_rules.py ECR_URL reads the same form)."""
    suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"{account_id}.dkr.ecr.{region}.{suffix}"


def upstream_repository(image: str) -> tuple[str, str]:
    """``public.ecr.aws/<repository>:<tag>`` -> (repository, tag); anything else is refused."""
    found = re.fullmatch(rf"{re.escape(UPSTREAM_REGISTRY)}/([a-z0-9][a-z0-9._/-]*):([\w][\w.-]*)", image)
    if not found:
        raise ValueError(f"{image}: not a tagged {UPSTREAM_REGISTRY}/<repository>:<tag> reference")
    return found.group(1), found.group(2)


def cached_repository(cluster_name: str, image: str) -> str:
    """The private repository the cache keeps ``image`` in."""
    return f"{cache_prefix(cluster_name)}/{upstream_repository(image)[0]}"


def through_cache(image: str, partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """``image`` (public.ecr.aws) as the node pulls it: from the cluster's registry, same repository path and tag."""
    repository, tag = upstream_repository(image)
    return f"{registry_host(partition, region, account_id)}/{cache_prefix(cluster_name)}/{repository}:{tag}"


def chart_repositories(
    images: dict[tuple[str, ...], str], partition: str, region: str, account_id: str, cluster_name: str
) -> dict[str, Any]:
    """Helm values that point each values key's ``repository`` through the cache (the chart keeps its tags)."""
    values: dict[str, Any] = {}
    for path, image in images.items():
        node = values
        for key in path:
            node = node.setdefault(key, {})
        node["repository"] = through_cache(image, partition, region, account_id, cluster_name).rsplit(":", 1)[0]
    return values


def with_repositories(values: dict[str, Any], repositories: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the nested keys of ``repositories`` (``chart_repositories``) set, everything else kept."""
    merged = dict(values)
    for key, value in repositories.items():
        merged[key] = with_repositories(merged.get(key) or {}, value) if isinstance(value, dict) else value
    return merged


def node_policy(partition: str, region: str, account_id: str, cluster_name: str) -> str:
    """The node role's inline policy: import from upstream and create repositories under this cluster's
    prefix, nowhere else."""
    arn = f"arn:{partition}:ecr:{region}:{account_id}:repository/{cache_prefix(cluster_name)}/*"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "PullThroughCache", "Effect": "Allow", "Action": list(NODE_ACTIONS), "Resource": arn}
            ],
        }
    )
