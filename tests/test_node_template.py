import pytest

from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.specs.node_template import NEURON_TAINT, autoscaler_tags, node_labels
from infra.specs.user_data import nodeadm_user_data

PREFIX = "k8s.io/cluster-autoscaler/node-template"


def test_labels_the_seed_workloads_select_on():
    assert node_labels("trn1.32xlarge", True, {}) == {
        "instance-type": "trn1-32xl",
        "provisioner": "cluster-autoscaler",
        "vpc.amazonaws.com/efa.present": "true",
    }


def test_no_efa_label_without_efa_and_extra_labels_win():
    labels = node_labels("inf2.xlarge", False, {"team": "research", "provisioner": "manual"})
    assert "vpc.amazonaws.com/efa.present" not in labels
    assert labels["team"] == "research" and labels["provisioner"] == "manual"


def test_neuron_taint():
    assert (NEURON_TAINT.key, NEURON_TAINT.value, NEURON_TAINT.effect) == (
        "aws.amazon.com/neuron",
        "true",
        "NoSchedule",
    )
    assert NEURON_TAINT.eks_effect == "NO_SCHEDULE"


def test_autoscaler_tags_for_trn1():
    facts = NEURON_INSTANCE_TYPES["trn1.32xlarge"]
    labels = node_labels("trn1.32xlarge", True, {})
    tags = autoscaler_tags(labels, [NEURON_TAINT], facts, 8)
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuron"] == "16"
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neurondevice"] == "16"
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuroncore"] == "32"
    assert tags[f"{PREFIX}/resources/vpc.amazonaws.com/efa"] == "8"
    assert tags[f"{PREFIX}/taint/aws.amazon.com/neuron"] == "true:NoSchedule"
    assert tags[f"{PREFIX}/label/instance-type"] == "trn1-32xl"
    assert tags[f"{PREFIX}/label/vpc.amazonaws.com/efa.present"] == "true"
    # cluster-autoscaler-1.35.2 cloudprovider/aws/README.md autoscaling-options: the group's own scale-down time.
    assert tags[f"{PREFIX}/autoscaling-options/scaledownunneededtime"] == "3m0s"
    assert len(tags) == 3 + 1 + 4 + 1


def test_trn2_advertises_logical_cores():
    facts = NEURON_INSTANCE_TYPES["trn2.48xlarge"]
    tags = autoscaler_tags({}, [], facts, 16)
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuroncore"] == "64"


def test_no_efa_resource_tag_without_interfaces():
    tags = autoscaler_tags({}, [], NEURON_INSTANCE_TYPES["inf2.48xlarge"], 0)
    assert not any(k.endswith("vpc.amazonaws.com/efa") for k in tags)
    assert tags[f"{PREFIX}/resources/aws.amazon.com/neuron"] == "12"


def test_raid0_user_data_only_with_instance_store():
    user_data = nodeadm_user_data(NEURON_INSTANCE_TYPES["trn1.32xlarge"].nvme_disks)
    assert user_data is not None
    assert "Content-Type: application/node.eks.aws" in user_data
    assert "kind: NodeConfig" in user_data and "strategy: RAID0" in user_data
    assert user_data.startswith("MIME-Version: 1.0\n")
    assert "localStorage" not in nodeadm_user_data(NEURON_INSTANCE_TYPES["inf2.48xlarge"].nvme_disks)


def node_config(user_data: str) -> dict:
    """The NodeConfig document of the MIME part nodeadm reads."""
    import yaml

    document = user_data.split("Content-Type: application/node.eks.aws\n\n", 1)[1].split("\n--", 1)[0]
    return yaml.safe_load(document)


@pytest.mark.parametrize(
    ("nvme", "efa", "labels"), [(0, False, None), (4, True, {"a": "b"}), (0, True, None), (4, False, None)]
)
def test_containers_get_their_devices_as_the_pod_s_user(nvme, efa, labels):
    """Every accelerator node: containerd v2.2.4's RuntimeConfig field device_ownership_from_security_context
    (internal/cri/config/config.go) of the plugin io.containerd.cri.v1.runtime (plugins/cri/runtime/plugin.go),
    in the same containerd mapping as the base runtime spec, a v3 name so nodeadm keeps its v3 template
    (awslabs/amazon-eks-ami v20260625 nodeadm/internal/containerd/config.go Version3configInNodeConfig)."""
    import tomllib

    config = node_config(nodeadm_user_data(nvme, efa=efa, node_labels=labels))
    containerd = config["spec"]["containerd"]
    assert ("baseRuntimeSpec" in containerd) == efa
    toml = tomllib.loads(containerd["config"])
    assert toml == {"plugins": {"io.containerd.cri.v1.runtime": {"device_ownership_from_security_context": True}}}
    assert "io.containerd.cri.v1.runtime" in containerd["config"]  # what nodeadm looks for, as text
    assert ("localStorage" in config["spec"].get("instance", {})) == bool(nvme)


def test_every_accelerator_node_gets_the_setting(dev, plan_with):
    import base64

    karpenter = plan_with(nodeProvisioner="karpenter")
    templates = [r for r in dev.of_type("aws:ec2/launchTemplate:LaunchTemplate") if "userData" in r.inputs]
    texts = [base64.b64decode(r.inputs["userData"]).decode() for r in templates]
    texts += [r.inputs["spec"]["userData"] for r in karpenter.registrations if r.type.endswith("EC2NodeClass")]
    assert len(texts) >= 4
    for text in texts:
        containerd = node_config(text)["spec"]["containerd"]["config"]
        assert "device_ownership_from_security_context = true" in containerd


@pytest.mark.parametrize(
    ("nvme", "fast", "expected"), [(4, None, True), (1, None, True), (0, None, False), (0, True, True)]
)
def test_parallel_image_pull_only_where_images_are_on_instance_store(nvme, fast, expected):
    """nodeadm's FastImagePull gate (awslabs/amazon-eks-ami v20260625 nodeadm/api/v1alpha1/nodeconfig_types.go
    Feature enum, json key featureGates) switches CRI to the AMI's SOCI snapshotter in parallel pull/unpack mode;
    only where the RAID0 array holds the snapshotter's store (nodeadm/doc/examples.md: slower on an EBS volume
    below 600 MiB/s; the root volume is gp3 at its 125 MiB/s)."""
    config = node_config(nodeadm_user_data(nvme, efa=True, fast_image_pull=fast))
    gates = config["spec"].get("featureGates", {})
    assert gates == ({"FastImagePull": True} if expected else {})
    # The rest of the NodeConfig is as before: the gate sits beside it, not in containerd's TOML.
    assert "soci" not in config["spec"]["containerd"]["config"]


def test_trainium_nodes_pull_images_in_parallel(dev, plan_with):
    """Every Trainium group of both provisioners has instance store (trn1/trn1n: 4 NVMe disks), so each gets
    the gate: the managed groups' launch templates with RAID0, Karpenter's NodeClasses with its instanceStorePolicy."""
    import base64

    karpenter = plan_with(nodeProvisioner="karpenter")
    templates = [r for r in dev.of_type("aws:ec2/launchTemplate:LaunchTemplate") if "userData" in r.inputs]
    managed = [node_config(base64.b64decode(r.inputs["userData"]).decode()) for r in templates]
    classes = [r.inputs["spec"] for r in karpenter.registrations if r.type.endswith("EC2NodeClass")]
    assert managed and classes
    for config in managed:
        assert config["spec"]["featureGates"] == {"FastImagePull": True}
        assert config["spec"]["instance"]["localStorage"]["strategy"] == "RAID0"
    for spec in classes:
        assert spec["instanceStorePolicy"] == "RAID0"
        assert node_config(spec["userData"])["spec"]["featureGates"] == {"FastImagePull": True}
