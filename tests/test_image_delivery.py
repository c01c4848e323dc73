"""How images reach a Trainium node (docs/operations.md, "How images reach a node"):

- every Trainium image (training, burn-in, cluster check) is built on one Neuron DLC, so a node fetches
  its layers once: containerd skips fetching a layer whose snapshot (by chain id, from the uncompressed
  diff ids) exists already (containerd v2.2.4 core/unpack/unpacker.go unpack: the fetch starts at the
  first layer whose Prepare is not answered "already exists", core/metadata/snapshot.go createSnapshot);
- the public one a node pulls on every launch, the burn-in's DLC, comes through the cluster's own
  registry (an ECR pull-through cache of public.ecr.aws), its layers over the S3 gateway endpoint;
- the training images are pulled while the burn-in runs (workloads/image_prepull.py);
- nodes whose images land on instance store pull and unpack in parallel (tests/test_node_template.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from infra.facts import neuron, versions
from infra.specs import burn_in_objects, image_cache
from infra.specs.node_template import BURN_IN_PENDING_LABEL, BURN_IN_PENDING_LABELS, BURN_IN_TAINT, NEURON_TAINT
from tools.push_images import BUILD_ARGS, DOCKER_DIR

ACCOUNT = "123456789012"  # the offline plan's account (offline/plan/fixtures.py)
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


# --- one base ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("image", [i.name for i in neuron.TRAINING_IMAGES])
def test_every_trainium_image_is_built_on_the_one_dlc(image: str) -> None:
    """One FROM, the NEURON_DLC build argument, whose Dockerfile default, `make images`' value and the
    compatibility table's base are all the one pin the burn-in runs."""
    text = (DOCKER_DIR / image / "Dockerfile").read_text()
    assert re.findall(r"^FROM\s+(\S+)", text, flags=re.M) == ["${NEURON_DLC}"]
    (default,) = re.findall(r"^ARG NEURON_DLC=(\S+)$", text, flags=re.M)
    (table,) = [i.base for i in neuron.TRAINING_IMAGES if i.name == image]
    assert default == BUILD_ARGS[image]["NEURON_DLC"] == table == versions.NEURON_DLC_PYTORCH_2_9
    assert table == neuron.BURN_IN_IMAGE.base == burn_in_objects.IMAGE


def test_the_trainium_images_are_every_image_but_the_shell() -> None:
    """No Trainium image escapes the check above: the only other image is the CPU shell's (Python slim)."""
    assert set(BUILD_ARGS) - {i.name for i in neuron.TRAINING_IMAGES} == {"cmd-shell"}
    assert "NEURON_DLC" not in BUILD_ARGS["cmd-shell"]


def test_what_runs_on_trainium_nodes_is_the_burn_in_or_a_dlc_image(workloads_all, dev) -> None:
    """Every container of every pod the workloads put on a Trainium group (the Neuron taint tolerated) runs
    bert-pretrain, ray-llama2 or nxd-llama (the cluster check included): all FROM the burn-in's DLC."""
    from workloads.kube import pod_templates

    repositories = dev.outputs["ecrRepositories"]
    dlc_built = {repositories[i.name] for i in neuron.TRAINING_IMAGES}
    seen = set()
    for r in workloads_all.registrations:
        spec = r.inputs.get("spec")
        if not isinstance(spec, dict):
            continue
        for template in pod_templates(spec):
            tolerations = template["spec"].get("tolerations") or []
            if not any(t.get("key") == NEURON_TAINT.key for t in tolerations):
                continue
            for c in template["spec"].get("initContainers", []) + template["spec"]["containers"]:
                repository = c["image"].rsplit(":", 1)[0]
                assert repository in dlc_built, (r.name, c["image"])
                seen.add(repository.rsplit("/", 1)[-1])
    assert seen == {"bert-pretrain", "ray-llama2", "nxd-llama"}


# --- the pull-through cache ----------------------------------------------------------------------------
def test_the_cache_prefix_is_the_cluster_s_and_fits_ecr() -> None:
    pattern = r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*"
    assert image_cache.cache_prefix("trn-dev") == "trn-dev/ecr-public"
    long_a, long_b = "a" + "b" * 37 + "c", "a" + "b" * 36 + "cc"  # 39 characters: clusterName's longest
    prefixes = {image_cache.cache_prefix(n) for n in (long_a, long_b, "trn-prod", "trn-dev")}
    assert len(prefixes) == 4  # one rule per cluster: a registry holds one rule per prefix
    for prefix in prefixes:
        assert 2 <= len(prefix) <= 30 and re.fullmatch(pattern, prefix), prefix
    assert image_cache.cache_prefix(long_a) == image_cache.cache_prefix(long_a)  # stable across runs


def test_an_image_through_the_cache_keeps_its_repository_and_tag() -> None:
    cached = image_cache.through_cache(burn_in_objects.IMAGE, "aws", "us-west-2", ACCOUNT, "trn-dev")
    assert cached == (
        f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/trn-dev/ecr-public/"
        + burn_in_objects.IMAGE.removeprefix("public.ecr.aws/")
    )
    assert image_cache.registry_host("aws-cn", "cn-north-1", ACCOUNT).endswith(".amazonaws.com.cn")
    for not_public in ("docker.io/library/python:3.11", "public.ecr.aws/neuron/x", "ghcr.io/a/b:1"):
        with pytest.raises(ValueError, match="not a tagged public.ecr.aws"):
            image_cache.upstream_repository(not_public)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_burn_in_pulls_the_pinned_dlc_from_the_cluster_s_registry(stack: str, request) -> None:
    plan = request.getfixturevalue(stack)
    cluster, region = plan.outputs["clusterName"], plan.outputs["region"]
    (rule,) = plan.of_type("aws:ecr/pullThroughCacheRule:PullThroughCacheRule")
    assert rule.inputs["upstreamRegistryUrl"] == "public.ecr.aws"
    assert rule.inputs["ecrRepositoryPrefix"] == f"{cluster}/ecr-public"
    repos = {r.inputs["name"]: r for r in plan.of_type("aws:ecr/repository:Repository")}
    cache_repo = repos[image_cache.cached_repository(cluster, burn_in_objects.IMAGE)]
    assert cache_repo.inputs["name"] == f"{cluster}/ecr-public/neuron/pytorch-training-neuronx"
    burn_ins = [r for r in plan.of_type(DAEMON_SET) if r.inputs["metadata"]["name"].startswith("burn-in-")]
    assert burn_ins
    for ds in burn_ins:
        (container,) = ds.inputs["spec"]["template"]["spec"]["containers"]
        host, _, rest = container["image"].partition("/")
        assert host == f"{ACCOUNT}.dkr.ecr.{region}.amazonaws.com"
        assert rest == f"{cluster}/ecr-public/" + versions.NEURON_DLC_PYTORCH_2_9.removeprefix("public.ecr.aws/")
        # The tag stays the pin: the SDK the driver table checks is the one the node runs.
        assert container["image"].endswith(":" + versions.NEURON_DLC_PYTORCH_2_9.rsplit(":", 1)[1])
        # Declared after the rule and the repository exist: a node never pulls a reference nothing serves.
        assert {rule.urn, cache_repo.urn} <= set(ds.dependencies)


def test_no_per_launch_daemon_set_of_the_cluster_stack_pulls_from_the_internet(dev, prod) -> None:
    for plan in (dev, prod):
        for ds in plan.of_type(DAEMON_SET):
            for c in ds.inputs["spec"]["template"]["spec"]["containers"]:
                assert not c["image"].startswith("public.ecr.aws/"), (ds.name, c["image"])


def test_the_fsx_csi_node_images_come_through_the_cache(dev_fsx) -> None:
    """The driver's node DaemonSet runs on every node (tolerateAllTaints): its three images' repositories point
    through the cache, the chart keeping its tags, which image_cache records for the pinned chart; and the
    release waits for the rule and its repositories."""
    assert image_cache.FSX_CSI_CHART == versions.CHARTS["fsx-csi-driver"].version
    (release,) = [r for r in dev_fsx.of_type("kubernetes:helm.sh/v3:Release") if r.name == "aws-fsx-csi-driver"]
    values = release.inputs["values"]
    assert "tag" not in json.dumps({k: values[k] for k in ("image", "sidecars")})
    for path, image in image_cache.FSX_CSI_NODE_IMAGES.items():
        node = values
        for key in path:
            node = node[key]
        cached = image_cache.through_cache(image, "aws", "us-west-2", ACCOUNT, "trn-dev")
        assert f"{node['repository']}:{image.rsplit(':', 1)[1]}" == cached
    cache = {r.urn for r in dev_fsx.registrations if r.name.startswith(("ecr-cache-", "ecr-pull-through-cache"))}
    assert len(cache) == 1 + len(image_cache.CACHED_IMAGES)  # the rule and each repository
    assert cache <= set(release.dependencies)


def test_the_neuron_chart_node_images_come_through_the_cache(dev) -> None:
    """The Neuron chart's node DaemonSets run on every Trainium node: the images of the components a release
    turns on are pulled through the cache at the chart's tags (values.yaml at 1.9.0), and each release waits
    for the rule and its repositories. A release's components it turns off get no repository override."""
    from infra.facts.neuron import DEVICE_PLUGIN

    assert image_cache.NEURON_CHART == versions.CHARTS["neuron"].version
    assert image_cache.NEURON_CHART_IMAGES[("devicePlugin", "image")].endswith(":" + DEVICE_PLUGIN)
    cache = {r.urn for r in dev.registrations if r.name.startswith(("ecr-cache-", "ecr-pull-through-cache"))}
    (release,) = [r for r in dev.of_type("kubernetes:helm.sh/v3:Release") if r.name == "neuron"]
    values = release.inputs["values"]
    device_plugin = image_cache.NEURON_CHART_IMAGES[("devicePlugin", "image")]
    cached = image_cache.through_cache(device_plugin, "aws", "us-west-2", ACCOUNT, "trn-dev")
    assert f"{values['devicePlugin']['image']['repository']}:{device_plugin.rsplit(':', 1)[1]}" == cached
    # The recovery sidecar runs even when it may not act (tests/test_first_deploy.py): its image too.
    recovery = image_cache.NEURON_CHART_IMAGES[("npd", "nodeRecovery", "image")]
    assert (
        values["npd"]["nodeRecovery"]["image"]["repository"]
        == image_cache.through_cache(recovery, "aws", "us-west-2", ACCOUNT, "trn-dev").rsplit(":", 1)[0]
    )
    assert "draDriver" not in values and cache <= set(release.dependencies)


def _role_policies(plan) -> dict[str, dict[str, Any]]:
    return {r.name: json.loads(r.inputs["policy"]) for r in plan.of_type("aws:iam/rolePolicy:RolePolicy")}


@pytest.mark.parametrize("provisioner", ["cluster-autoscaler", "karpenter"])
def test_every_node_role_may_import_through_the_cache_and_nothing_more(provisioner, dev, plan_with) -> None:
    """ECR user guide, pull-through-cache-iam.html: pulling through a cache rule takes
    ecr:BatchImportUpstreamImage, and ecr:CreateRepository where the repository does not exist yet (every one is
    declared here, so that is left out and an undeclared image fails loudly); neither is
    in AmazonEC2ContainerRegistryReadOnly. Granted on this cluster's prefix only, to every EC2 node role."""
    plan = dev if provisioner == "cluster-autoscaler" else plan_with(nodeProvisioner="karpenter")
    node_roles = [
        r
        for r in plan.of_type("aws:iam/role:Role")
        if "ec2.amazonaws.com" in json.dumps(json.loads(r.inputs["assumeRolePolicy"]))
    ]
    policies = _role_policies(plan)
    assert node_roles
    for role in node_roles:
        statements = policies[f"{role.name}-pull-through-cache"]["Statement"]
        assert statements == [
            {
                "Sid": "PullThroughCache",
                "Effect": "Allow",
                "Action": ["ecr:BatchImportUpstreamImage"],
                "Resource": f"arn:aws:ecr:us-west-2:{ACCOUNT}:repository/trn-dev/ecr-public/*",
            }
        ]
    if provisioner == "cluster-autoscaler":
        # Nodes join only once their role may pull the burn-in's image.
        urn = next(
            r.urn for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "cluster-node-pull-through-cache"
        )
        groups = plan.of_type("aws:eks/nodeGroup:NodeGroup")
        assert groups and all(urn in g.dependencies for g in groups)


def test_layers_come_over_the_s3_gateway_endpoint_of_every_node_subnet(dev) -> None:
    """Private ECR keeps layers in S3 (ECR user guide, vpc-endpoints.html): every route table a node subnet
    uses routes S3 through the gateway endpoint, whose policy (none: full access) lets the layer bucket through."""
    (endpoint,) = [r for r in dev.of_type("aws:ec2/vpcEndpoint:VpcEndpoint") if r.inputs["serviceName"].endswith(".s3")]
    assert endpoint.inputs["vpcEndpointType"] == "Gateway" and "policy" not in endpoint.inputs
    associations = dev.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
    node_tables = {a.inputs["routeTableId"] for a in associations if "-node-" in a.inputs["subnetId"]}
    assert node_tables and node_tables <= set(endpoint.inputs["routeTableIds"])


# --- the pre-pull ---------------------------------------------------------------------------------------
def _prepulls(plan) -> dict[str, dict[str, Any]]:
    return {
        r.inputs["metadata"]["name"]: r.inputs
        for r in plan.of_type(DAEMON_SET)
        if r.inputs["metadata"]["name"].startswith("image-prepull-")
    }


def _job_images_by_selector(plan) -> dict[str, set[str]]:
    """Instance type -> the images of the training pods placed on it (Neuron taint tolerated)."""
    from workloads.kube import pod_templates

    found: dict[str, set[str]] = {}
    for r in plan.registrations:
        spec = r.inputs.get("spec")
        if not isinstance(spec, dict) or r.name.startswith("daemonset-image-prepull-"):
            continue
        for template in pod_templates(spec):
            pod = template["spec"]
            if not any(t.get("key") == NEURON_TAINT.key for t in pod.get("tolerations") or []):
                continue
            key = pod["nodeSelector"]["node.kubernetes.io/instance-type"]
            found.setdefault(key, set()).update(c["image"] for c in pod["containers"])
    return found


def test_each_group_pre_pulls_exactly_the_images_its_jobs_run(workloads_all, dev) -> None:
    groups = {g["name"]: g for g in dev.outputs["acceleratorNodeGroups"]}
    prepulls = _prepulls(workloads_all)
    jobs = _job_images_by_selector(workloads_all)
    assert set(prepulls) == {f"image-prepull-{g}" for g in groups}
    for name, ds in prepulls.items():
        group = groups[name.removeprefix("image-prepull-")]
        pod = ds["spec"]["template"]["spec"]
        images = [c["image"] for c in pod["initContainers"]]
        assert set(images) == jobs[group["instanceType"]] and len(images) == len(set(images))
        assert pod["containers"][0]["image"] == images[-1]  # the container's image is pulled already


def test_the_pre_pull_lives_only_during_the_burn_in_and_holds_nothing(workloads_all, dev) -> None:
    """It selects the pending label (gone with the burn-in's result, and never in a scale-up template:
    test_the_pending_label_is_in_no_template), tolerates the startup taint the training pods never do,
    and asks for no device and next to no CPU or memory."""
    groups = {g["name"]: g for g in dev.outputs["acceleratorNodeGroups"]}
    for name, ds in _prepulls(workloads_all).items():
        group = groups[name.removeprefix("image-prepull-")]
        pod = ds["spec"]["template"]["spec"]
        selector = pod["nodeSelector"]
        assert selector.items() >= BURN_IN_PENDING_LABELS.items()
        assert {k: v for k, v in selector.items() if k != BURN_IN_PENDING_LABEL} == {
            "node.kubernetes.io/instance-type": group["instanceType"],
            **{k: v for k, v in group["labels"].items() if k != "provisioner"},
        }
        keys = {t["key"] for t in pod["tolerations"]}
        assert {BURN_IN_TAINT.key, NEURON_TAINT.key} <= keys
        for c in pod["initContainers"] + pod["containers"]:
            requests = c["resources"]["requests"]
            assert set(requests) == {"cpu", "memory"}, c["name"]  # no Neuron device, no EFA interface
            assert requests["cpu"].endswith("m") and int(requests["cpu"][:-1]) <= 10
            assert requests["memory"].endswith("Mi") and int(requests["memory"][:-2]) <= 16
        assert ds["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}


def test_the_pending_label_is_in_no_template(dev, plan_with) -> None:
    """Neither autoscaler counts the pre-pull on the node it imagines for a scale-up: the node-template tags
    of the managed groups' Auto Scaling groups, and Karpenter's NodePool templates, lack the pending label."""
    tags = [r.inputs["tag"]["key"] for r in dev.of_type("aws:autoscaling/tag:Tag")]
    assert tags and not [t for t in tags if BURN_IN_PENDING_LABEL in t]
    karpenter = plan_with(nodeProvisioner="karpenter")
    pools = [r.inputs["spec"] for r in karpenter.registrations if r.type.endswith("NodePool")]
    assert pools and all(BURN_IN_PENDING_LABEL not in json.dumps(p) for p in pools)


def test_a_group_without_burn_in_gets_no_pre_pull(workloads_with) -> None:
    def without_burn_in(outputs: dict[str, Any]) -> None:
        for group in outputs["acceleratorNodeGroups"]:
            if group["name"] == "trn1n-32xl-ng":
                group["startupTaints"] = []

    plan = workloads_with(cluster=without_burn_in)
    assert set(_prepulls(plan)) == {"image-prepull-trn1-32xl-ng1"}


def test_the_pre_pull_reads_the_stack_s_image_tag(workloads_with) -> None:
    bert = {"nodeGroup": "trn1-32xl-ng1", "nodes": 2, "trainSteps": 200, "trainDeadlineMinutes": 60}
    plan = workloads_with(bertPretraining={**bert, "firstStepTimeoutMinutes": 30, "imageTag": "2026.12.1"})
    (ds,) = [d for n, d in _prepulls(plan).items() if n == "image-prepull-trn1-32xl-ng1"]
    images = [c["image"] for c in ds["spec"]["template"]["spec"]["initContainers"]]
    assert any(i.endswith("/bert-pretrain:2026.12.1") for i in images), images
