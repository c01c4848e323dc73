"""Every pin knows its end of support: each pin the stacks deploy answers to a row of
infra/facts/support.py (end date or none announced, source, step forward), read from where it is
set; the plan warns 90 days ahead and refuses a pin past its end unless the stack file keeps it by
name with a reason. Dates are injected: nothing here turns red as the calendar moves, except the
shipped stacks' horizon, which the table itself gives."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from infra.config.rules import cluster_pins, end_of_support
from infra.facts import pins, support, versions
from infra.facts.neuron import TRAINING_IMAGES
from infra.facts.pins import Pin, for_terminal, verdicts
from infra.validate import parse_stack_config
from offline.plan.runner import stack_config
from tests.fixture_project import FIXTURE_ROOT
from tools.push_images import BUILD_ARGS
from workloads import pins as workload_pins
from workloads.settings import parse_workloads_config

TODAY = date(2026, 11, 28)
ACK = "trainium-eks:endOfSupportAcknowledged"

# infra/facts/versions.py constants that are no version with a support window of their own: an AMI
# type, a repository path, a URL built from a pinned version, our own image tags, and code or data at
# a commit or digest (the training scripts match the image's SDK release, whose row covers them), and a Grafana
# plugin that moves with the Grafana it names in its plugin.json (the grafana-chart row covers it;
# grafana/grafana-amazonprometheus-datasource v3.2.0 publishes no support window in its README or docs).
UNDATED_CONSTANTS = {
    "AMAZON_PROMETHEUS_PLUGIN_VERSION",
    "NEURON_AMI_TYPE",
    "CORE_AMI_TYPE",
    "EFA_DEVICE_PLUGIN_REPOSITORY",
    "MPI_OPERATOR_MANIFEST",
    "MPI_OPERATOR_IMAGE",
    "TRAINING_IMAGE_TAG",
    "STAGING_IMAGE_TAG",
    "BERT_SAMPLES_COMMIT",
    "LLAMA2_TOKENIZER_REVISION",
    "LLAMA2_TOKENIZER_SHA256",
    "MEGATRON_LM_COMMIT",
}
# Build arguments of the same kind (tools/push_images.py BUILD_ARGS).
UNDATED_BUILD_ARGS = {"BERT_SAMPLES_COMMIT", "LLAMA2_REPO_REVISION", "LLAMA2_SPM_SHA256", "MEGATRON_LM_COMMIT"}


def everything_on(**extra: object) -> dict[str, str]:
    """A workload stack config with every workload on, the RedPajama staging and TensorBoard's proxy."""
    config = {
        "trainium-workloads:clusterStack": "organization/trainium-eks/dev",
        "trainium-workloads:dataStaging": '{"wikicorpus": true, "redpajama": true, "cmdShell": true}',
        "trainium-workloads:bertPretraining": '{"nodeGroup": "trn1-32xl-ng1"}',
        "trainium-workloads:rayLlama2": '{"nodeGroup": "trn1n-32xl-ng"}',
        "trainium-workloads:nxdLlama": '{"nodeGroup": "trn1-32xl-ng1"}',
        "trainium-workloads:tensorboard": '{"loadBalancer": {"allowedCidrs": ["10.0.0.0/8"]}}',
        "trainium-workloads:clusterCheck": '{"nodeGroup": "trn1-32xl-ng1"}',
        "trainium-workloads:hfToken": "hf_stand_in",
    }
    return {**config, **{f"trainium-workloads:{k}": v for k, v in extra.items()}}


def test_every_pin_of_every_configuration_has_a_support_row():
    """Completeness: the pins of a cluster stack with everything on, under either provisioner and on
    every Kubernetes minor EKS offers, and of a workload stack running every image, all have rows."""
    known = set(support.row_names())
    found: list[Pin] = []
    for minor in versions.EKS_KUBERNETES_VERSIONS:
        for provisioner in ("cluster-autoscaler", "karpenter"):
            config = parse_stack_config({"region": "us-west-2", "kubernetesVersion": minor})
            found += cluster_pins(config.model_copy(update={"node_provisioner": provisioner}))
    found += workload_pins.workload_pins(parse_workloads_config(everything_on()))
    assert {p.row for p in found} - known == set()
    # Every image-like constant (the next training line included), every chart, the engine,
    # the packages and the actions.
    images = [
        v for n, v in vars(versions).items() if n.isupper() and isinstance(v, str) and re.match(r"[\w.-]+\.\w+/.+:", v)
    ]
    assert len(images) >= 3
    assert {row for image in images for row in pins.image_rows(image)} - known == set()
    assert set(versions.CHARTS) - {"cluster-autoscaler"} <= set(pins.CHART_ROWS)
    assert {"pulumi-3", "pulumi-aws-7", "pulumi-eks-4", "pulumi-kubernetes-4", "torchx-0.7"} <= {
        p.row for p in pins.repository_pins()
    }
    assert {p.row for p in pins.repository_pins()} - known == set()


def test_every_versions_constant_is_read_as_a_pin_or_says_why_it_has_no_support_window():
    """A constant added to infra/facts/versions.py fails here until it is read as a pin (infra/facts/pins.py,
    workloads/pins.py) or listed above with why it has no end of its own."""
    read = {"KUBERNETES_VERSION", "MPI_OPERATOR_VERSION", "PYTHON_SLIM_IMAGE", "NGINX_UNPRIVILEGED_IMAGE"}
    read.add("NEURON_MONITOR_IMAGE")  # infra/config/rules.py monitoring_pins, with any Prometheus
    read |= {pins.constant_name(image.base) for image in TRAINING_IMAGES}
    read |= {name for releases in workload_pins.RELEASES.values() for name in releases}
    read |= {n for n, v in vars(versions).items() if n.startswith("NEURON_DLC_") and pins.image_rows(v)}
    constants = {n for n, v in vars(versions).items() if n.isupper() and isinstance(v, str)}
    assert constants - read - UNDATED_CONSTANTS == set()


def test_the_workload_stack_reads_every_build_argument_make_images_passes():
    """workloads/pins.py reads each image's base from infra/facts (the import graph keeps workloads
    from tools/): it must be the base `make images` builds on, and every other build argument either
    has a row (RELEASES) or is code at a commit."""
    for image, args in BUILD_ARGS.items():
        bases = [v for a, v in args.items() if a in ("NEURON_DLC", "PYTHON_IMAGE")]
        assert bases == [workload_pins.BASES[image]], image
        rest = set(args) - {"NEURON_DLC", "PYTHON_IMAGE"} - set(workload_pins.RELEASES.get(image, {}))
        assert rest <= UNDATED_BUILD_ARGS, (image, rest)
        for name in workload_pins.RELEASES.get(image, {}):
            assert args[name] == getattr(versions, name)


def test_every_row_has_a_source_and_a_step_forward():
    for name in support.row_names():
        row = support.support(name)
        assert row.what and row.source and row.forward, name
        assert row.ends is None or isinstance(row.ends, date)
    assert support.support("pulumi-3").shown_end == "none announced"


def test_dlc_tags_name_their_sdk_framework_python_and_ubuntu():
    assert pins.image_rows(versions.NEURON_DLC_PYTORCH_2_9) == [
        "neuron-sdk-2.30",
        "pytorch-xla-2.9",
        "python-3.12",
        "ubuntu-24.04",
    ]
    old = "public.ecr.aws/neuron/pytorch-training-neuronx:1.13.1-neuronx-py310-sdk2.20.2-ubuntu20.04"
    assert pins.image_rows(old) == [
        "neuron-sdk-2.20",
        "pytorch-xla-1.13",
        "python-3.10",
        "ubuntu-20.04",
    ]
    assert pins.image_rows(versions.PYTHON_SLIM_IMAGE) == ["python-3.11", "debian-13"]
    assert pins.image_rows("public.ecr.aws/docker/library/python:3.11.14-slim-bookworm") == ["python-3.11", "debian-12"]
    with pytest.raises(ValueError, match="no rule in infra/facts/pins.py"):
        pins.image_rows("public.ecr.aws/some/other:1.0")


PIN = Pin("infra/facts/versions.py NGINX_UNPRIVILEGED_IMAGE (proxy)", "nginx-unprivileged:1.29.3-alpine", "nginx-1.29")
ENDS = support.support("nginx-1.29").ends


def check(today: date, kept: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    assert ENDS is not None
    return verdicts([PIN], kept or {}, ACK, today)


def test_a_pin_89_days_from_its_end_is_warned_naming_the_pin_the_date_and_the_step_forward():
    assert ENDS is not None
    assert check(ENDS - timedelta(days=91)) == ([], [])
    [], [warning] = check(ENDS - timedelta(days=89))
    assert warning == (
        "infra/facts/versions.py NGINX_UNPRIVILEGED_IMAGE (proxy) = 'nginx-unprivileged:1.29.3-alpine': nginx 1.29 "
        f"(mainline) (nginx-1.29) ends {ENDS.isoformat()}, in 89 days; step forward: nginx-unprivileged 1.30 "
        "(stable) or the current mainline"
    )
    assert "in 0 days" in check(ENDS)[1][0]


def test_a_pin_past_its_end_is_refused_with_the_key_the_value_and_what_is_allowed():
    assert ENDS is not None
    [refusal], [] = check(ENDS + timedelta(days=1))
    assert refusal.startswith(
        "infra/facts/versions.py NGINX_UNPRIVILEGED_IMAGE (proxy) = 'nginx-unprivileged:1.29.3-alpine': nginx 1.29 "
        f"(mainline) (nginx-1.29) ended {ENDS.isoformat()} (endoflife.date/api/nginx.json"
    )
    assert refusal.endswith(
        "; allowed: nginx-unprivileged 1.30 (stable) or the current mainline, or keep it with a reason in "
        f"{ACK} (nginx-1.29: <why>)"
    )


def test_a_kept_pin_is_warned_with_its_reason_and_an_unknown_or_empty_acknowledgement_is_refused():
    assert ENDS is not None
    [], [kept] = check(ENDS + timedelta(days=1), {"nginx-1.29": "the proxy moves next sprint"})
    assert kept == (
        f"{PIN.key} = {PIN.value!r}: nginx 1.29 (mainline) (nginx-1.29) ended {ENDS.isoformat()}; kept by "
        f"{ACK}; step forward: nginx-unprivileged 1.30 (stable) or the current mainline"
    )
    (typo,), [] = check(ENDS + timedelta(days=1), {"ngnix-1.29": "soon"})
    assert typo.startswith(f"{ACK}.ngnix-1.29 = 'soon': not a pin the plan knows; allowed: kubernetes-1.32, ")
    assert "nginx-1.29" in typo
    (empty,), [] = check(ENDS + timedelta(days=1), {"nginx-1.29": " "})
    assert empty == f"{ACK}.nginx-1.29 = ' ': needs a reason"
    # Kept while not past its end, or not deployed: said, so the list shrinks with the pins.
    [], [early] = check(ENDS - timedelta(days=200), {"nginx-1.29": "just in case"})
    assert early == f"{ACK}.nginx-1.29: kept, but nothing this stack deploys is past nginx-1.29's end; drop it"
    [], [stale] = check(ENDS - timedelta(days=200), {"ray-2.22": "the old image"})
    assert stale.startswith(f"{ACK}.ray-2.22: kept, but")


def test_pins_sharing_a_row_are_named_in_one_message():
    image = Pin("infra/facts/versions.py NEURON_DLC_PYTORCH_1_13 (docker/nemo-megatron)", "x", "python-3.10")
    burn_in = Pin("infra/facts/versions.py NEURON_DLC_PYTORCH_2_5 (the burn-in image)", "y", "python-3.10")
    [refusal], [] = verdicts([image, burn_in], {}, ACK, date(2026, 10, 2))
    assert refusal.startswith(f"{image.key} = 'x'; {burn_in.key} = 'y': Python 3.10 (python-3.10) ended 2026-10-01")


def test_the_cluster_stack_checks_each_group_ami_release_as_long_as_its_minor():
    """An AMI release is superseded, not end-of-lifed: it is supported as long as the minor it is built for."""
    config = parse_stack_config(
        {
            "region": "us-west-2",
            "kubernetesVersion": "1.34",
            "upgradePolicy": "STANDARD",
            "endOfSupportAcknowledged": {n: "test" for n in ("neuron-sdk-2.21", "pytorch-xla-2.5", "python-3.10")},
        }
    )
    refused, _ = end_of_support(config, date(2026, 12, 3))
    [kubernetes] = [r for r in refused if "(kubernetes-1.34)" in r]
    assert kubernetes.startswith("trainium-eks:kubernetesVersion = '1.34'; trainium-eks:acceleratorNodeGroups[0].")
    assert "EKS upgrades the control plane itself, past the version this stack declares; allowed: raise" in kubernetes


def test_the_workload_stack_checks_the_images_it_runs_and_only_those():
    tensorboard_only = parse_workloads_config(
        {"trainium-workloads:clusterStack": "o/trainium-eks/dev", "trainium-workloads:tensorboard": "{}"}
    )
    assert {p.row for p in workload_pins.workload_pins(tensorboard_only)} == {"python-3.11", "debian-13"}
    assert workload_pins.end_of_support(tensorboard_only, TODAY)[0] == []
    refused, _ = workload_pins.end_of_support(tensorboard_only, date(2027, 10, 2))  # past Python 3.11's end
    assert [r.split(": ")[0] for r in refused] == [
        "infra/facts/versions.py PYTHON_SLIM_IMAGE (docker/cmd-shell) = 'python:3.11.16-slim-trixie'"
    ]
    assert refused[0].endswith(
        "keep it with a reason in trainium-workloads:endOfSupportAcknowledged (python-3.11: <why>)"
    )
    rows = {p.row for p in workload_pins.workload_pins(parse_workloads_config(everything_on()))}
    assert {"ray-2.55", "nxd-core-0.19", "nxd-training-1.7", "nginx-1.30", "neuron-sdk-2.30"} <= rows


SHIPPED = ("dev", "prod")


def shipped(stack: str) -> list[tuple[str, list[Pin], dict[str, str], bool]]:
    from infra.config.load import raw_from_pulumi_config

    cluster = parse_stack_config(raw_from_pulumi_config(stack_config(FIXTURE_ROOT, stack)))
    work = parse_workloads_config(stack_config(FIXTURE_ROOT / "workloads", stack))
    return [
        (
            "trainium-eks:endOfSupportAcknowledged",
            cluster_pins(cluster),
            cluster.end_of_support_acknowledged,
            cluster.upgrade_policy == "EXTENDED",
        ),
        (
            "trainium-workloads:endOfSupportAcknowledged",
            workload_pins.workload_pins(work),
            work.end_of_support_acknowledged,
            False,
        ),
    ]


@pytest.mark.parametrize("stack", SHIPPED)
def test_the_shipped_stacks_plan_green_until_the_horizon_the_table_gives(stack):
    """Green on 2026-11-28 and every day up to the first end of a row they deploy and do not keep:
    the table, not the clock, says how long; past it the same check refuses. A verdict only turns
    from green to refused as days pass, so the two ends of the span stand for every day in it."""
    for key, found, kept, extended in shipped(stack):
        ends = [support.support(p.row, extended).ends for p in found if p.row not in kept]
        horizon = min(e for e in ends if e is not None)
        assert horizon > TODAY
        for day in (TODAY, horizon):
            refused, warned = verdicts(found, kept, key, day, extended)
            assert refused == [], (day, refused)
            assert not [w for w in warned if "drop it" in w], warned
        assert verdicts(found, kept, key, horizon + timedelta(days=1), extended)[0]


def test_plan_warnings_fit_an_80_column_terminal():
    text = "x " * 30 + "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04 " * 2
    lines = for_terminal(text).splitlines()
    assert all(len(line) <= 80 for line in lines) and len(lines) > 2
    assert re.sub(r"\s+", "", for_terminal(text)) == re.sub(r"\s+", "", text)
    for stack in SHIPPED:
        for key, found, kept, extended in shipped(stack):
            for warning in verdicts(found, kept, key, TODAY, extended)[1]:
                assert all(len(line) <= 80 for line in for_terminal(warning).splitlines())


@pytest.mark.parametrize("stack", SHIPPED)
def test_the_plan_summary_lists_the_dated_pins_soonest_first_in_80_columns(stack):
    from offline.report.support import deployed, section

    rows, extended = deployed(FIXTURE_ROOT, stack)
    lines = section(rows, extended)
    assert lines[0].startswith("End of support") and max(len(line) for line in lines) <= 80
    listed = [line.split()[0] for line in lines[1:] if not line.strip().startswith("and ")]
    ends = [support.support(name, extended).ends for name in listed]
    assert ends == sorted(ends) and "kubernetes-1.35" in listed
    kept = [line for line in lines if "(kept)" in line]
    assert kept and all(support.support(line.split()[0]).ends < TODAY for line in kept)
    assert (
        lines[-1]
        == f"    and {sum(1 for n in rows if support.support(n, extended).ends is None)} pins with no end announced"
    )


def test_a_pin_without_a_row_is_refused_not_a_crash():
    new_ray = Pin("infra/facts/versions.py RAY_VERSION (docker/ray-llama2)", "2.99.0", pins.ray_row("2.99.0"))
    [refusal], [] = verdicts([new_ray], {}, ACK, TODAY)
    assert refusal.startswith(
        "infra/facts/versions.py RAY_VERSION (docker/ray-llama2) = '2.99.0': no row ray-2.99 in infra/facts/support.py"
    )


def test_every_image_the_cluster_stacks_render_answers_to_a_pin(dev, prod):
    """The images in the cluster stack's own Kubernetes objects (the burn-in DaemonSets and its sweeper;
    charts' images come with their chart's pin) are checked like the workload stack's images."""
    import json as _json

    from infra.config.load import raw_from_pulumi_config
    from infra.facts.versions import PYTHON_SLIM_IMAGE

    for stack, plan in (("dev", dev), ("prod", prod)):
        rendered = _json.dumps([r.inputs for r in plan.registrations if r.type.startswith("kubernetes:")])
        images = set(re.findall(r'"image": "([^"]+)"', rendered))
        assert PYTHON_SLIM_IMAGE in images
        config = parse_stack_config(raw_from_pulumi_config(stack_config(FIXTURE_ROOT, stack)))
        pinned = {p.value for p in cluster_pins(config)}
        assert {image.rsplit("/", 1)[-1] for image in images} <= pinned, stack
