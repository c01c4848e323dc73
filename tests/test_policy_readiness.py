"""Deploy-readiness rules: the lessons of the behaviour issues, so users' own edits are caught."""

from __future__ import annotations

import pytest

from tests.policy_helpers import k8s, reg, violations

RELEASE = "kubernetes:helm.sh/v3:Release"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"


def _cm(namespace):
    return k8s("kubernetes:core/v1:ConfigMap", f"cm-{namespace}", {"metadata": {"name": "cm", "namespace": namespace}})


def test_namespace_built_in_declared_or_created_by_a_chart():
    assert not violations("namespace-exists", _cm("kube-system"))
    [message] = violations("namespace-exists", _cm("research"))
    assert "'research'" in message and "externalNamespaces" in message
    declared = k8s("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "research"}})
    assert not violations("namespace-exists", declared, _cm("research"))
    volcano = reg(
        RELEASE,
        "volcano",
        {"chart": "volcano", "version": "1.15.1", "namespace": "volcano-system", "createNamespace": True},
    )
    assert not violations("namespace-exists", volcano, _cm("volcano-system"))
    assert not violations("namespace-exists", _cm("research"), config={"externalNamespaces": ["research"]})
    # The fix names the file and key of the stack (test, from the URN) where another stack's namespace goes.
    assert "namespace-exists.externalNamespaces in policy/config.test.json" in message


def test_namespaces_the_stack_config_names_need_no_second_list(monkeypatch):
    # A new training namespace set in the stack file is enough: the engine hands a Python pack the
    # stack's config as PULUMI_CONFIG (values as text, lists as JSON), the offline run passes the same.
    import json

    from offline.plan.policy_run import parse_config, run_policies
    from policy.guardrails import BY_NAME

    rule = [BY_NAME["namespace-exists"]]
    config = parse_config({}, "defaults")
    cluster = {"trainium-eks:trainingNamespaces": json.dumps(["default", "research"])}
    workloads = {"trainium-eks:namespace": "research"}  # the URNs' project is trainium-eks here
    for stack_config in (cluster, workloads):
        assert not run_policies([_cm("research")], config, policies=rule, stack_config=stack_config).violations
    assert run_policies([_cm("vision")], config, policies=rule, stack_config=cluster).violations
    # Another project's keys name nothing for this one.
    other = {"trainium-workloads:namespace": "research"}
    assert run_policies([_cm("research")], config, policies=rule, stack_config=other).violations
    # The real pack: no offline config given, the environment the language host sets.
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(cluster))
    assert not violations("namespace-exists", _cm("research"))
    monkeypatch.setenv("PULUMI_CONFIG", "{}")
    assert violations("namespace-exists", _cm("research"))


def test_chart_namespace_override_must_exist():
    # DESIGN §5: the Neuron chart renders its node problem detector into npd.namespaceOverride,
    # a namespace it does not create; the atomic release then rolls back.
    neuron = reg(
        RELEASE,
        "neuron",
        {
            "chart": "oci://x",
            "version": "1.9.0",
            "namespace": "kube-system",
            "values": {"npd": {"namespaceOverride": "neuron-healthcheck-system"}},
        },
    )
    [message] = violations("namespace-exists", neuron)
    assert "neuron-healthcheck-system" in message
    declared = k8s("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "neuron-healthcheck-system"}})
    assert not violations("namespace-exists", neuron, declared)
    # A release into a namespace nobody creates.
    assert violations("namespace-exists", reg(RELEASE, "x", {"chart": "x", "version": "1.0.0", "namespace": "nowhere"}))


def _claim(annotations=None, **spec):
    return k8s(
        PVC,
        "claim",
        {
            "metadata": {"name": "data", "namespace": "default", "annotations": annotations or {}},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1200Gi"}}, **spec},
        },
    )


def _class(mode):
    inputs = {"metadata": {"name": "fsx"}, "provisioner": "fsx.csi.aws.com"}
    if mode:
        inputs["volumeBindingMode"] = mode
    return k8s(SC, "sc", inputs)


# pulumi-kubernetes provider/pkg/await/awaiters.go untilCoreV1PersistentVolumeClaimReady (v4.32.0 and
# the newest mirrored commit, unchanged): ready on Bound, or on Pending when the claim's StorageClass is
# WaitForFirstConsumer; a fixed 5-minute watch; skipped when pulumi.com/skipAwait is exactly "true"
# (provider/pkg/metadata/annotations.go IsAnnotationTrue).
@pytest.mark.parametrize(
    "claim, classes",
    [
        (_claim(storageClassName="fsx"), [_class(None)]),  # Immediate is the default binding mode
        (_claim(storageClassName="fsx"), [_class("Immediate")]),
        (_claim(storageClassName="gp3"), []),  # class not in the stack: unknown mode
        (_claim(), []),  # default class
        (_claim({"pulumi.com/skipAwait": "True"}, storageClassName="fsx"), [_class("Immediate")]),  # not exactly "true"
    ],
)
def test_claims_that_hold_up_for_five_minutes(claim, classes):
    [message] = violations("pvc-no-blocking-await", claim, *classes)
    assert "5 minutes" in message


@pytest.mark.parametrize(
    "claim, classes",
    [
        (_claim(storageClassName="fsx"), [_class("WaitForFirstConsumer")]),
        (_claim(storageClassName="", volumeName="fsx-pv"), []),  # our static claims: bound to a PV
        (_claim({"pulumi.com/skipAwait": "true"}, storageClassName="fsx"), [_class("Immediate")]),
    ],
)
def test_claims_that_do_not(claim, classes):
    assert not violations("pvc-no-blocking-await", claim, *classes)


JOB_TYPES = [
    "kubernetes:batch.volcano.sh/v1alpha1:Job",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
    "kubernetes:ray.io/v1:RayJob",
]


@pytest.mark.parametrize("type_", JOB_TYPES)
def test_jobs_replaced_not_patched(type_):
    # workloads/kube.py replacing_options(): Volcano's admission webhook refuses most spec
    # updates; finished MPIJobs/RayJobs are not re-run when patched (DESIGN §5).
    manifest = {"metadata": {"name": "train", "namespace": "default"}, "spec": {}}
    assert not violations(
        "jobs-replaced-on-change", k8s(type_, "j", manifest, replaceOnChanges=["spec"], deleteBeforeReplace=True)
    )
    assert len(violations("jobs-replaced-on-change", k8s(type_, "j", manifest))) == 2
    # Same name, so the old object must go first.
    [message] = violations("jobs-replaced-on-change", k8s(type_, "j", manifest, replaceOnChanges=["spec"]))
    assert "deleteBeforeReplace" in message


def test_a_batch_job_is_not_held_to_the_job_rule():
    job = k8s("kubernetes:batch/v1:Job", "stage", {"metadata": {"name": "stage", "namespace": "default"}, "spec": {}})
    assert not violations("jobs-replaced-on-change", job)


@pytest.mark.parametrize(
    "version, bad",
    [
        ("1.15.1", False),
        ("v0.5.30", False),
        ("", True),
        (None, True),
        ("^1.15", True),
        ("~1.15.0", True),
        (">=1.0.0", True),
        ("1.x", True),
    ],
)
def test_helm_release_pins_one_version(version, bad):
    inputs = {"chart": "volcano", "namespace": "volcano-system", "createNamespace": True}
    if version is not None:
        inputs["version"] = version
    assert bool(violations("helm-release-pinned", reg(RELEASE, "volcano", inputs))) is bad
