"""The instance table (infra/facts/instances.py) against the published facts, complete for every
row, the only place a type's facts come from: a new type is one row, and no code reads a type's
name for what the table says."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra.facts import instances
from infra.facts.instances import (
    INFERENTIA2,
    INSTANCE_TYPES,
    NEURON_INSTANCE_TYPES,
    TRAINIUM,
    TRAINIUM2,
    node_group_instance_types,
    node_label_value,
    trains,
)
from infra.facts.prices import REGIONS
from infra.facts.regions import regions_offering
from offline.plan.fixtures import instance_type_answer

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("instance_type", "devices", "cores", "cards", "efa"),
    [
        ("trn1.2xlarge", 1, 2, 1, False),
        ("trn1.32xlarge", 16, 32, 8, True),
        ("trn1n.32xlarge", 16, 32, 16, True),
        # 128 physical NeuronCores, advertised as 64 at the default LNC=2
        ("trn2.48xlarge", 16, 64, 16, True),
        ("trn2u.48xlarge", 16, 64, 16, True),
        # One Trainium2: 8 physical cores, 4 at LNC=2, and EFA on its one card
        ("trn2.3xlarge", 1, 4, 1, True),
        ("inf2.xlarge", 1, 2, 1, False),
        ("inf2.24xlarge", 6, 12, 1, False),
        ("inf2.48xlarge", 12, 24, 1, False),
    ],
)
def test_instance_facts(instance_type, devices, cores, cards, efa):
    facts = NEURON_INSTANCE_TYPES[instance_type]
    assert facts.neuron_devices == devices
    assert facts.neuron_cores == cores
    assert facts.network_cards == cards
    assert facts.efa_supported is efa
    assert facts.max_efa_interfaces == (cards if efa else 0)


def test_trn2_physical_cores():
    assert NEURON_INSTANCE_TYPES["trn2.48xlarge"].physical_neuron_cores == 128


@pytest.mark.parametrize(
    ("instance_type", "per_device", "total"),
    [
        # EC2's specifications page: 1 x 32 GiB per Trainium and Inferentia2 device.
        ("trn1.32xlarge", 32, 512),
        ("inf2.48xlarge", 32, 384),
        # The Neuron docs (trn2-arch.rst, trainium2.rst): 96 GiB per Trainium2, 1,536 GiB per instance,
        # not EC2's 512 GiB per device.
        ("trn2.48xlarge", 96, 1536),
        ("trn2u.48xlarge", 96, 1536),
        ("trn2.3xlarge", 96, 96),
    ],
)
def test_device_memory(instance_type, per_device, total):
    facts = NEURON_INSTANCE_TYPES[instance_type]
    assert (facts.device_memory_gib, facts.device_memory_gib_total) == (per_device, total)


def test_trainium2_rows_lnc_disks_pods_and_no_price():
    # LNC=2 is the Neuron runtime's default on Trn2 (logical-neuroncore-config.rst; nccom-test.rst).
    for name in ("trn2.48xlarge", "trn2u.48xlarge", "trn2.3xlarge"):
        row = INSTANCE_TYPES[name]
        assert row.neuron.logical_nc_config == 2 and row.neuron.physical_neuron_cores == 8 * row.neuron.neuron_devices
        # No on-demand list price anywhere (only Capacity Block products): unknown, not zero.
        assert row.on_demand == {}, name
    disks = {t: (f.nvme_disks, f.nvme_disk_gb) for t, f in NEURON_INSTANCE_TYPES.items()}
    assert disks["trn2u.48xlarge"] == (4, 1900) and disks["trn2.3xlarge"] == (1, 470)
    # nodeadm's formula, ENIs on card 0 x (IPv4 per ENI - 1) + 2: 2 x 49 + 2 and 2 x 14 + 2.
    pods = {t: INSTANCE_TYPES[t].node.max_pods for t in ("trn2.48xlarge", "trn2u.48xlarge", "trn2.3xlarge")}
    assert pods == {"trn2.48xlarge": 100, "trn2u.48xlarge": 100, "trn2.3xlarge": 30}
    assert "instance-info.jsonl" in INSTANCE_TYPES["trn2.3xlarge"].node.source
    assert "no trn2u.48xlarge row" in INSTANCE_TYPES["trn2u.48xlarge"].node.source


@pytest.mark.parametrize(
    ("instance_type", "label"),
    [
        ("trn1.32xlarge", "trn1-32xl"),
        ("trn1n.32xlarge", "trn1n-32xl"),
        ("trn2.48xlarge", "trn2-48xl"),
        ("trn2u.48xlarge", "trn2u-48xl"),
        ("trn2.3xlarge", "trn2-3xl"),
        ("inf2.xlarge", "inf2-xl"),
    ],
)
def test_node_label_value(instance_type, label):
    assert node_label_value(instance_type) == label


def _as_ec2_result(answer: dict) -> SimpleNamespace:
    return SimpleNamespace(
        neuron_devices=[
            SimpleNamespace(count=d["count"], core_count=d["coreCount"], memory_size=d["memorySize"])
            for d in answer["neuronDevices"]
        ],
        instance_disks=[
            SimpleNamespace(count=d["count"], type=d["type"], size=d["size"]) for d in answer["instanceDisks"]
        ],
        maximum_network_cards=answer["maximumNetworkCards"],
        efa_supported=answer["efaSupported"],
    )


@pytest.mark.parametrize("instance_type", sorted(NEURON_INSTANCE_TYPES))
def test_facts_from_ec2_agree_with_table(instance_type):
    ec2 = _as_ec2_result(instance_type_answer(instance_type))
    assert instances.from_ec2(instance_type, ec2) == NEURON_INSTANCE_TYPES[instance_type]


def test_from_ec2_trusts_ec2_counts():
    ec2 = SimpleNamespace(
        neuron_devices=[SimpleNamespace(count=12, core_count=2, memory_size=16384)],
        instance_disks=[],
        maximum_network_cards=4,
        efa_supported=True,
    )
    facts = instances.from_ec2("trn1.32xlarge", ec2)
    assert facts.network_cards == 4
    assert facts.nvme_disks == 0
    assert (facts.neuron_devices, facts.device_memory_gib) == (12, 16)
    # What EC2 does not know stays the table's.
    assert facts.logical_nc_config == 1
    assert facts.allreduce_floor == NEURON_INSTANCE_TYPES["trn1.32xlarge"].allreduce_floor


@pytest.mark.parametrize(
    ("instance_type", "accelerator", "vcpus", "memory_gib"),
    [
        # The Neuron docs' architecture pages each row cites.
        ("trn1.2xlarge", TRAINIUM, 8, 32),
        ("trn1.32xlarge", TRAINIUM, 128, 512),
        ("trn1n.32xlarge", TRAINIUM, 128, 512),
        ("trn2.48xlarge", TRAINIUM2, 192, 2048),
        ("trn2u.48xlarge", TRAINIUM2, 192, 2048),
        ("trn2.3xlarge", TRAINIUM2, 12, 128),
        ("inf2.xlarge", INFERENTIA2, 4, 16),
        ("inf2.8xlarge", INFERENTIA2, 32, 128),
        ("inf2.24xlarge", INFERENTIA2, 96, 384),
        ("inf2.48xlarge", INFERENTIA2, 192, 768),
    ],
)
def test_accelerator_and_size(instance_type, accelerator, vcpus, memory_gib):
    row = INSTANCE_TYPES[instance_type]
    assert row.neuron.accelerator == accelerator and trains(instance_type) is accelerator.trains
    assert (row.node.vcpus, row.node.memory_mib) == (vcpus, memory_gib * 1024)


def _trainium2_as_ec2_describes_it(devices: list) -> SimpleNamespace:
    """ec2.get_instance_type for a Trainium2 type as EC2 answers it: 16 x 200 Gbps EFA, 4 NVMe disks, and
    the NeuronInfo given (EC2's specifications page; a third-party describe-instance-types of 2026-10-03)."""
    return SimpleNamespace(
        neuron_devices=devices,
        instance_disks=[SimpleNamespace(count=4, type="ssd", size=1900)],
        maximum_network_cards=16,
        efa_supported=True,
    )


def test_from_ec2_keeps_the_neuron_docs_figures_for_trainium2():
    table = NEURON_INSTANCE_TYPES["trn2u.48xlarge"]
    # trn2u.48xlarge: EC2 lists no accelerator at all. Taken from EC2 it would have 0 devices (and its
    # groups no aws.amazon.com/neuron request).
    facts = instances.from_ec2("trn2u.48xlarge", _trainium2_as_ec2_describes_it([]))
    assert facts == table and facts.neuron_devices == 16 and facts.neuron_cores == 64
    assert facts.device_memory_gib_total == 1536
    # trn2.48xlarge: EC2 lists 16 Trainium2 of 512 GiB (MemoryInfo.SizeInMiB 524288) each.
    wrong_memory = [SimpleNamespace(count=16, core_count=8, memory_size=524288)]
    facts = instances.from_ec2("trn2.48xlarge", _trainium2_as_ec2_describes_it(wrong_memory))
    assert facts == NEURON_INSTANCE_TYPES["trn2.48xlarge"] and facts.device_memory_gib == 96
    # Even a device count EC2 might one day change stays the table's for Trainium2, while the network
    # figures are still EC2's.
    ec2 = _trainium2_as_ec2_describes_it([SimpleNamespace(count=8, core_count=8, memory_size=98304)])
    ec2.maximum_network_cards = 8
    facts = instances.from_ec2("trn2.48xlarge", ec2)
    assert (facts.neuron_devices, facts.network_cards) == (16, 8)
    assert "512 GiB" in TRAINIUM2.ec2_neuron_info_wrong and "trn2u.48xlarge" in TRAINIUM2.ec2_neuron_info_wrong
    assert TRAINIUM.ec2_neuron_info_wrong is None and INFERENTIA2.ec2_neuron_info_wrong is None


def test_only_trainium_trains_and_unknown_types_do_not():
    training = ["trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge", "trn2.3xlarge"]
    assert [t for t in NEURON_INSTANCE_TYPES if trains(t)] == training
    assert not trains("m6i.large") and not trains("trn3.48xlarge")


def test_acceptance_floors_and_what_ec2_would_answer():
    floors = {t: f.allreduce_floor.gbps for t, f in NEURON_INSTANCE_TYPES.items() if f.allreduce_floor}
    assert floors == {
        "trn1.32xlarge": 20.0,
        "trn1n.32xlarge": 20.0,
        "trn2.48xlarge": 20.0,
        "trn2u.48xlarge": 20.0,
        "trn2.3xlarge": 5.0,
    }
    assert "47.09 GB/s" in NEURON_INSTANCE_TYPES["trn1.32xlarge"].allreduce_floor.source
    disks = {t: (f.nvme_disks, f.nvme_disk_gb) for t, f in NEURON_INSTANCE_TYPES.items()}
    assert disks["trn1.2xlarge"] == (1, 474) and disks["trn1.32xlarge"] == (4, 1900)
    assert disks["inf2.48xlarge"] == (0, None)
    answer = instance_type_answer("trn2.48xlarge")
    assert answer["neuronDevices"][0]["name"] == "Trainium2" and answer["neuronDevices"][0]["coreVersion"] == 3
    assert instance_type_answer("inf2.xlarge")["neuronDevices"][0]["name"] == "Inferentia2"


def test_every_row_is_complete_and_cites_its_figures():
    for name, row in INSTANCE_TYPES.items():
        assert row.name == name
        assert row.node is not None or row.on_demand, f"{name}: a row with no facts"
        if row.node is not None:
            assert row.node.vcpus > 0 and row.node.memory_mib > 0 and row.node.max_pods > 2, name
            assert (
                "eni-max-pods.txt" in row.node.source
                or "eni_max_pods.go" in row.node.source
                or ("instance-info.jsonl" in row.node.source)
            ), name
        # A general-purpose price is known in every region of the price table or in none (then the cost
        # report says unknown); a Neuron type's in the regions it is offered in (infra/facts/regions.py).
        if row.neuron is None:
            assert set(row.on_demand) in (set(), set(REGIONS)), name
        else:
            assert set(row.on_demand) in (set(), set(regions_offering([name]))), name
        for region, price in row.on_demand.items():
            assert price.unit == "hour" and price.usd > 0 and "https://" in price.source, (name, region)
    for name, facts in NEURON_INSTANCE_TYPES.items():
        row = INSTANCE_TYPES[name]
        assert facts.instance_type == name and row.node is not None, name
        assert "https://" in facts.source and "from_ec2" in facts.source, name
        assert "docs.aws.amazon.com/ec2/latest/instancetypes/ac.html" in facts.source, name
        assert facts.device_memory_gib > 0, name
        assert facts.neuron_devices > 0 and facts.cores_per_device > 0 and facts.network_cards > 0, name
        assert (facts.nvme_disks == 0) == (facts.nvme_disk_gb is None), name
        assert facts.physical_neuron_cores % facts.logical_nc_config == 0, name
    labels = [row.node_label for row in INSTANCE_TYPES.values()]
    assert len(set(labels)) == len(labels), "two types would share one instance-type node label"


def test_node_group_instance_types_come_from_the_group_or_its_launch_template():
    own = {"instanceTypes": ["trn1.32xlarge"]}
    assert node_group_instance_types(own, {"instanceType": "m6i.large"}) == ["trn1.32xlarge"]
    # A Capacity Block group names its type in the launch template only.
    block = {"capacityType": "CAPACITY_BLOCK"}
    assert node_group_instance_types(block, {"instanceType": "trn2.48xlarge"}) == ["trn2.48xlarge"]
    assert node_group_instance_types({"instanceTypes": []}, {}) == []
    assert node_group_instance_types({}, None) == []


# A row for a made-up type whose name no code could recognise: everything that reads a type's facts
# must find them through the table.
_NEW_ROW = """\
        _neuron("zz9.24xlarge", TRAINIUM2, devices=8, cores_per_device=8, memory_gib=96, cards=8, efa=True,
                nvme=(2, 950), lnc=2,
                node=NodeSize(96, 1048576, 120, "test row; " + _MAX_PODS),
                on_demand=_us_hourly(33.0, "https://example.test/zz9-price"),
                floor=AllReduceFloor(31.0, "test floor"), source="https://example.test/zz9"),
"""

_CHECK_NEW_ROW = """\
import json
from types import SimpleNamespace

from infra.components.accelerators import group_spec
from infra.config.errors import ConfigError
from infra.config.models import FeaturesConfig
from infra.facts.instances import INSTANCE_TYPES, NEURON_INSTANCE_TYPES, from_ec2, instance_hourly
from infra.facts.neuron import COMPATIBLE_AMI_RELEASES
from infra.facts.versions import KUBERNETES_VERSION
from infra.specs.placement import Zone
from infra.specs.system_capacity import node_allocatable
from infra.validate import parse_stack_config
from offline.plan.fixtures import instance_type_answer
from workloads.cluster_check import floor_for

config = parse_stack_config({"region": "us-east-2", "acceleratorNodeGroups": [
    {"name": "zz9-ng", "instanceType": "zz9.24xlarge", "minSize": 0, "desiredSize": 0, "maxSize": 2,
     "amiReleaseVersion": COMPATIBLE_AMI_RELEASES[KUBERNETES_VERSION][0]}]})
group = config.accelerator_node_groups[0]
try:  # a Trainium type's group is held to the training images' Neuron driver range
    parse_stack_config({"region": "us-east-2", "acceleratorNodeGroups": [
        {"name": "zz9-ng", "instanceType": "zz9.24xlarge", "maxSize": 2, "amiReleaseVersion": "1.34.9-20260714"}]})
    refusal = None
except ConfigError as error:
    refusal = str(error)
answer = instance_type_answer("zz9.24xlarge")
ec2 = SimpleNamespace(
    neuron_devices=[SimpleNamespace(count=d["count"], core_count=d["coreCount"], memory_size=d["memorySize"])
                    for d in answer["neuronDevices"]],
    instance_disks=[SimpleNamespace(count=d["count"], type=d["type"]) for d in answer["instanceDisks"]],
    maximum_network_cards=answer["maximumNetworkCards"], efa_supported=answer["efaSupported"])
facts = from_ec2("zz9.24xlarge", ec2)
spec = group_spec(group, facts, Zone("us-east-2c", "use2-az3"),
                  node_allocatable("zz9.24xlarge", FeaturesConfig(), accelerator=True))
print(json.dumps({
    "refused": refusal is not None and "acceleratorNodeGroups[0].amiReleaseVersion = 1.34.9-20260714" in refusal,
    "efa": group.efa_enabled,
    "from_ec2": facts == NEURON_INSTANCE_TYPES["zz9.24xlarge"],
    "accelerator": answer["neuronDevices"][0]["name"],
    "interfaces": len(spec.interfaces),
    "label": spec.labels["instance-type"],
    "output": {k: v for k, v in spec.output().items() if k in ("neuronDevices", "neuronCores")},
    "allocatable": spec.allocatable,
    "price": {region: instance_hourly(region, "zz9.24xlarge").usd for region in ("us-east-1", "us-west-2")},
    "floor": floor_for(SimpleNamespace(instance_type="zz9.24xlarge"), SimpleNamespace(bus_bandwidth_floor=None)),
}))
"""


def test_a_new_type_is_one_row(tmp_path):
    """Copy the program, add one row to the table of the copy, and build a group of the new type: the
    configuration is accepted (and checked against the training images, since the type trains), and
    its EC2 answer, node group spec (EFA, labels, allocatable), prices and acceptance floor all come
    from that row."""
    for package in ("infra", "workloads", "offline", "policy", "bootstrap"):
        # The program, not the stack files (a team's own, which this test does not plan).
        shutil.copytree(
            REPO_ROOT / package,
            tmp_path / package,
            ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml", "config.*.json"),
        )
    table = tmp_path / "infra" / "facts" / "instances.py"
    source = table.read_text()
    anchor = '        _neuron(\n            "inf2.xlarge",'
    assert source.count(anchor) == 1
    table.write_text(source.replace(anchor, _NEW_ROW + anchor))
    # PYTHONPATH puts the copy ahead of this checkout: the editable install's finder (written by
    # setuptools==84.2.1, pyproject.toml; .venv/.../__editable___trainium_eks_0_1_0_finder.py install())
    # is appended to sys.meta_path, after the path finder that reads PYTHONPATH.
    run = subprocess.run(
        [sys.executable, "-c", _CHECK_NEW_ROW],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert found.pop("allocatable")["cpu"].endswith("m")
    assert found == {
        "refused": True,
        "efa": True,
        "from_ec2": True,
        "accelerator": "Trainium2",
        "interfaces": 8,
        "label": "zz9-24xl",
        # 8 devices x 8 physical cores at LNC=2
        "output": {"neuronDevices": 8, "neuronCores": 32},
        "price": {"us-east-1": 33.0, "us-west-2": 33.0},
        "floor": 31.0,
    }


# A family or prefix of a type's name: "trn", "trn2", "inf2", "trn1n." (a whole type name such as
# "trn1.32xlarge" is a row's key or a default, not a test of a name).
_FAMILY = re.compile(r"(trn|inf)\d*[a-z]?\.?")


def _is_family(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_FAMILY.fullmatch(node.value))


def _prefix_tests(tree: ast.AST) -> list[int]:
    """Lines that decide something from a type's name: ``t.startswith("trn")`` (or a tuple of such),
    ``family == "trn2"``, ``"inf" in t``."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
        ):
            args = [a for arg in node.args for a in (arg.elts if isinstance(arg, ast.Tuple) else [arg])]
            if any(_is_family(a) for a in args):
                lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(_is_family(n) for n in (node.left, *node.comparators)):
            lines.append(node.lineno)
    return lines


def test_the_prefix_finder_finds_prefix_tests():
    found = _prefix_tests(
        ast.parse(
            't.startswith("trn")\nt.startswith(("trn2", "inf2"))\nt.startswith("trn1n.")\nfamily == "trn2"\n"inf" in t'
        )
    )
    assert found == [1, 2, 3, 4, 5]
    allowed = (
        't.startswith("al2023@")\nname.startswith("tr")\nt == "trn1.32xlarge"\nt in ("trn1.32xlarge", "inf2.xlarge")'
    )
    assert _prefix_tests(ast.parse(allowed)) == []


def test_no_code_tests_an_instance_type_by_its_name():
    found = {
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for package in ("infra", "workloads", "offline", "policy", "bootstrap", "tools")
        for path in (REPO_ROOT / package).rglob("*.py")
        for line in _prefix_tests(ast.parse(path.read_text()))
    }
    found |= {f"__main__.py:{line}" for line in _prefix_tests(ast.parse((REPO_ROOT / "__main__.py").read_text()))}
    assert not found, "read the fact from infra/facts/instances.py instead: " + ", ".join(sorted(found))


@pytest.mark.parametrize(
    ("instance_type", "ec2_devices", "devices", "cores", "interfaces", "label"),
    [
        # EC2's NeuronInfo as it is: none for trn2u.48xlarge, 512 GiB per device for trn2.
        ("trn2u.48xlarge", [], 16, 64, 16, "trn2u-48xl"),
        ("trn2.3xlarge", [SimpleNamespace(count=1, core_count=8, memory_size=524288)], 1, 4, 1, "trn2-3xl"),
    ],
)
def test_a_trainium2_group_deployed_from_ec2s_answer(instance_type, ec2_devices, devices, cores, interfaces, label):
    """The node group a deploy builds from EC2's look-up: the Neuron docs' devices and cores, EC2's EFA
    cards (card 0 `efa` at device index 0, the rest `efa-only` at 1), the seeds' label and the Neuron taint."""
    from infra.components.accelerators import group_spec
    from infra.config.models import AcceleratorNodeGroupConfig, FeaturesConfig
    from infra.specs.node_template import NEURON_TAINT
    from infra.specs.placement import Zone
    from infra.specs.system_capacity import node_allocatable

    table = NEURON_INSTANCE_TYPES[instance_type]
    ec2 = SimpleNamespace(
        neuron_devices=ec2_devices,
        instance_disks=[SimpleNamespace(count=table.nvme_disks, type="ssd", size=table.nvme_disk_gb)],
        maximum_network_cards=table.network_cards,
        efa_supported=True,
    )
    group = AcceleratorNodeGroupConfig(name="trn2-ng", instance_type=instance_type, max_size=4)
    spec = group_spec(
        group,
        instances.from_ec2(instance_type, ec2),
        Zone("ap-south-2a", "aps2-az1"),
        node_allocatable(instance_type, FeaturesConfig(), accelerator=True),
    )
    output = spec.output()
    assert (output["neuronDevices"], output["neuronCores"], output["efaInterfaces"]) == (devices, cores, interfaces)
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in spec.interfaces] == [
        (card, 0 if card == 0 else 1, "efa" if card == 0 else "efa-only") for card in range(interfaces)
    ]
    assert spec.labels["instance-type"] == label and spec.labels["vpc.amazonaws.com/efa.present"] == "true"
    assert NEURON_TAINT in spec.taints and spec.allocatable is not None
