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
    assert len(tags) == 3 + 1 + 4


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
    assert nodeadm_user_data(NEURON_INSTANCE_TYPES["inf2.48xlarge"].nvme_disks) is None
