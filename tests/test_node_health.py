"""Health-gated Trainium nodes (infra/specs/burn_in_objects.py, node_template.py, node_health.py) and
Capacity Block windows (workloads/capacity_windows.py): pure functions, plus the dev plan's objects."""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import json
import subprocess
import sys
import time
import urllib.error
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from infra import contract
from infra.components.accelerators import group_spec, node_repair
from infra.config.models import AcceleratorNodeGroupConfig
from infra.facts.instances import NEURON_INSTANCE_TYPES
from infra.facts.versions import EKS_KUBERNETES_VERSIONS
from infra.specs import burn_in_objects
from infra.specs.node_health import NEURON_FATAL_REASONS
from infra.specs.node_template import (
    AUTOSCALER_STARTUP_TAINT_PREFIX,
    BURN_IN_FAILED_TAINT_KEY,
    BURN_IN_PENDING_LABEL,
    BURN_IN_REASON_LABEL,
    BURN_IN_RESULT_LABEL,
    BURN_IN_TAINT,
    GANG_HOLD_KEYS,
    GANG_HOLD_MARKER,
    NEURON_TAINT,
    NODE_TEMPLATE_PREFIX,
)
from infra.specs.placement import Zone
from tests.fixture_project import FIXTURE_ROOT
from workloads.capacity_windows import window_problems
from workloads.deadlines import TrainiumStep

TRN1 = NEURON_INSTANCE_TYPES["trn1.32xlarge"]
TARGET = burn_in_objects.BurnInTarget("trn1-32xl-ng1", "trn1.32xlarge", 16, 32, 8, "fsx-claim")


def spec(**config: Any):
    group = AcceleratorNodeGroupConfig.model_validate(
        {"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 4, **config}
    )
    return group_spec(group, TRN1, Zone("us-west-2d", "usw2-az4"))


# --- the taint and cluster-autoscaler ----------------------------------------------------------


def test_burn_in_taint_carries_the_autoscalers_startup_prefix():
    """kubernetes/autoscaler cluster-autoscaler-1.34.2 (chart 9.53.0) utils/taints/taints.go:
    StartupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"; SanitizeTaints drops a
    taint with it from the template node a scale-up is simulated on, so a pending gang that does not
    tolerate it still scales the group up from zero."""
    assert AUTOSCALER_STARTUP_TAINT_PREFIX == "startup-taint.cluster-autoscaler.kubernetes.io/"
    assert BURN_IN_TAINT.key.startswith(AUTOSCALER_STARTUP_TAINT_PREFIX)
    assert BURN_IN_TAINT.effect == "NoSchedule"


def test_new_nodes_register_tainted_but_training_pods_and_the_autoscaler_template_never_see_it(dev):
    s = spec()
    assert s.startup_taints == [BURN_IN_TAINT] and s.taints == [NEURON_TAINT]
    assert not any(BURN_IN_TAINT.key in tag for tag in s.autoscaler_tags)
    assert f"{NODE_TEMPLATE_PREFIX}/taint/{NEURON_TAINT.key}" in s.autoscaler_tags
    out = s.output()
    assert out["startupTaints"] == [{"key": BURN_IN_TAINT.key, "value": "pending", "effect": "NoSchedule"}]
    # The workload stacks tolerate exactly the exported "taints".
    outputs = {**copy.deepcopy(dev.outputs), "acceleratorNodeGroups": [out]}
    group = contract.parse_contract(outputs).node_groups[s.name]
    assert [t["key"] for t in group.tolerations] == [NEURON_TAINT.key]
    assert spec(burnIn=False).startup_taints == []


def test_the_dev_node_groups_carry_the_burn_in_taint_and_the_plugins_tolerate_it(dev):
    groups = [r for r in dev.registrations if r.type == "aws:eks/nodeGroup:NodeGroup" and "trn" in r.name]
    assert groups
    for g in groups:
        keys = [t["key"] for t in g.inputs["taints"]]
        assert keys == [NEURON_TAINT.key, BURN_IN_TAINT.key], g.name
    releases = {r.name: r.inputs for r in dev.registrations if r.type == "kubernetes:helm.sh/v3:Release"}
    tolerated = json.dumps([v for name, v in releases.items() if "neuron" in name or "efa" in name])
    assert tolerated.count(BURN_IN_TAINT.key) >= 3  # Neuron device plugin, problem detector, EFA plugin


# --- auto-repair ---------------------------------------------------------------------------------


def test_auto_repair_replaces_neuron_fatal_errors_at_once_and_stops_on_systemic_failure():
    """aws/eks-node-monitoring-agent v1.7.0 pkg/reasons/reasons.yaml: the four Neuron reasons are Fatal
    under AcceleratedHardwareReady; the EKS API allows 1 minute at least and Replace|Reboot|NoAction."""
    args = node_repair(True)
    overrides = args.node_repair_config_overrides
    assert {o.node_unhealthy_reason for o in overrides} == set(NEURON_FATAL_REASONS)
    assert all(
        o.node_monitoring_condition == "AcceleratedHardwareReady"
        and o.repair_action == "Replace"
        and o.min_repair_wait_time_mins == 1
        for o in overrides
    )
    assert args.max_unhealthy_node_threshold_percentage == 50
    assert args.max_parallel_nodes_repaired_percentage == 100
    assert node_repair(False).node_repair_config_overrides is None


# --- the admission policy ------------------------------------------------------------------------


def test_every_offered_kubernetes_version_has_the_node_claim_and_admission_policy_v1():
    """The node-name extra (ServiceAccountTokenPodNodeInfo) is on by default, and
    ValidatingAdmissionPolicy is GA, from 1.30 (kubernetes/website feature-gates)."""
    assert all(tuple(map(int, v.split("."))) >= (1, 30) for v in EKS_KUBERNETES_VERSIONS)
    assert burn_in_objects.MIN_KUBERNETES == "1.30"


def test_the_policy_binds_only_the_burn_in_identity_and_checks_its_own_node():
    policy = burn_in_objects.admission_policy()["spec"]
    assert policy["failurePolicy"] == "Fail"
    assert policy["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    assert (
        policy["matchConditions"][0]["expression"]
        == "request.userInfo.username == 'system:serviceaccount:neuron-burn-in:neuron-burn-in'"
    )
    first = policy["validations"][0]["expression"]
    assert "request.userInfo.extra['authentication.kubernetes.io/node-name'] == [object.metadata.name]" in first
    assert burn_in_objects.admission_policy_binding()["spec"] == {
        "policyName": "neuron-burn-in",
        "validationActions": ["Deny"],
    }
    rules = burn_in_objects.cluster_role()["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]


def _refused_by(
    old: dict[str, Any],
    new: dict[str, Any],
    node_claim: str,
    username: str = burn_in_objects.USERNAME,
    policy: dict[str, Any] | None = None,
) -> list[int]:
    """The policy's validations that fail for this update, evaluated by a CEL runtime (cel-cpp through
    cel-expr-python, with the optional-types extension Kubernetes' CEL environment includes); the
    policy's variables are inlined, as the API server binds them. None when the policy does not match."""
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_optional

    env = cel.NewEnv(
        variables={"object": cel.Type.DYN, "oldObject": cel.Type.DYN, "request": cel.Type.DYN},
        extensions=[ext_optional.ExtOptional()],
    )
    spec = (policy or burn_in_objects.admission_policy())["spec"]
    data = {
        "object": new,
        "oldObject": old,
        "request": {"userInfo": {"username": username, "extra": {burn_in_objects.NODE_NAME_EXTRA: [node_claim]}}},
    }

    def value(expression: str) -> Any:
        for v in spec["variables"]:
            expression = expression.replace(f"variables.{v['name']}", f"({v['expression']})")
        return env.compile(expression).eval(data=data).value()

    if not all(value(c["expression"]) is True for c in spec["matchConditions"]):
        return None
    return [i for i, v in enumerate(spec["validations"]) if value(v["expression"]) is not True]


NODE = {
    "metadata": {"name": "ip-10-0-1-1", "labels": {"role": "x"}},
    "spec": {
        "taints": [
            {"key": NEURON_TAINT.key, "effect": "NoSchedule"},
            {"key": BURN_IN_TAINT.key, "effect": "NoSchedule"},
        ]
    },
}


NODE["metadata"]["labels"][BURN_IN_PENDING_LABEL] = "true"


# A hold as the burn-in's pass sets it (infra/specs/gang_hold.py).
HELD = {
    "cluster-autoscaler.kubernetes.io/scale-down-disabled": "true",
    "karpenter.sh/do-not-disrupt": "true",
    GANG_HOLD_MARKER: "2026-11-28T12:00:00Z",
}


def _passed(n: dict[str, Any]) -> None:
    n["spec"]["taints"] = n["spec"]["taints"][:1]
    del n["metadata"]["labels"][BURN_IN_PENDING_LABEL]
    n["metadata"]["labels"][BURN_IN_RESULT_LABEL] = "passed"
    n["metadata"]["annotations"] = {**n["metadata"].get("annotations", {}), **HELD}


def _failed_because(reason: str, n: dict[str, Any]) -> None:
    """``n`` as the burn-in's (or the sweeper's) failure patch leaves it."""
    n["spec"]["taints"] = [
        n["spec"]["taints"][0],
        {"key": BURN_IN_FAILED_TAINT_KEY, "value": reason, "effect": "NoSchedule"},
    ]
    del n["metadata"]["labels"][BURN_IN_PENDING_LABEL]
    n["metadata"]["labels"].update({BURN_IN_RESULT_LABEL: "failed", BURN_IN_REASON_LABEL: reason})


_failed = functools.partial(_failed_because, "efa-interfaces")


@pytest.mark.parametrize(
    "change, claim, refused_by",
    [
        (_passed, "ip-10-0-1-1", []),
        (_failed, "ip-10-0-1-1", []),
        (_passed, "ip-10-0-9-9", [0]),  # another node than its pod's
        (lambda n: n["spec"].update(taints=[]), "ip-10-0-1-1", [1]),  # the Neuron taint too
        (lambda n: n["spec"]["taints"].append({"key": "x", "effect": "NoSchedule"}), "ip-10-0-1-1", [1]),
        (
            lambda n: n["spec"]["taints"].append({"key": BURN_IN_FAILED_TAINT_KEY, "effect": "NoExecute"}),
            "ip-10-0-1-1",
            [3],
        ),
        (lambda n: n["metadata"]["labels"].update(role="other"), "ip-10-0-1-1", [4]),
        (lambda n: n["metadata"]["labels"].update({BURN_IN_PENDING_LABEL: "again"}), "ip-10-0-1-1", [5]),
        (lambda n: n["spec"].update(unschedulable=True), "ip-10-0-1-1", [6]),
        (lambda n: n["spec"].update(podCIDR="10.9.0.0/24"), "ip-10-0-1-1", [6]),
        (lambda n: n["metadata"].update(annotations={"a": "b"}), "ip-10-0-1-1", [7]),
        # The hold only as "true": "false" would not hold, and another value is nobody's to set.
        (
            lambda n: (_passed(n), n["metadata"]["annotations"].update({GANG_HOLD_MARKER: "true"})),
            "ip-10-0-1-1",
            [7],
        ),
        # A dangling owner has the garbage collector delete the node; a finalizer keeps it forever.
        (
            lambda n: n["metadata"].update(
                ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "0"}]
            ),
            "ip-10-0-1-1",
            [6],
        ),
        (lambda n: n["metadata"].update(finalizers=["example.com/keep"]), "ip-10-0-1-1", [6]),
        # A hold comes only with a pass: a failed node must go.
        (lambda n: (_failed(n), n["metadata"].update(annotations=dict(HELD))), "ip-10-0-1-1", [8]),
    ],
)
def test_the_policy_allows_its_own_taints_and_labels_on_its_own_node_only(change, claim, refused_by):
    new = copy.deepcopy(NODE)
    change(new)
    assert _refused_by(NODE, new, claim) == refused_by


def test_an_operators_own_annotation_whatever_its_value_does_not_stand_in_the_way_of_a_result():
    operator = copy.deepcopy(NODE)
    operator["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "false"}
    for result in (_failed, _passed):
        new = copy.deepcopy(operator)
        result(new)
        assert _refused_by(operator, new, "ip-10-0-1-1") == [], result


def test_the_policy_refuses_setting_the_pending_label_on_a_node_without_it():
    done = copy.deepcopy(NODE)
    _passed(done)
    again = copy.deepcopy(done)
    again["metadata"]["labels"][BURN_IN_PENDING_LABEL] = "true"
    assert _refused_by(done, again, "ip-10-0-1-1") == [5]


def test_the_policy_refuses_adding_the_taint_back_and_leaves_other_users_alone():
    untainted = copy.deepcopy(NODE)
    untainted["spec"]["taints"] = untainted["spec"]["taints"][:1]
    assert _refused_by(untainted, NODE, "ip-10-0-1-1") == [2]
    assert _refused_by(NODE, untainted, "ip-10-0-9-9", username="system:node:ip-10-0-1-1") is None


@pytest.mark.parametrize("effects", [["NoExecute"], ["NoSchedule", "NoExecute"]])
def test_the_policy_refuses_changing_the_startup_taints_effect(effects):
    """A NoExecute startup taint would evict every pod on the node that does not tolerate it."""
    new = copy.deepcopy(NODE)
    new["spec"]["taints"] = new["spec"]["taints"][:1] + [{"key": BURN_IN_TAINT.key, "effect": e} for e in effects]
    assert _refused_by(NODE, new, "ip-10-0-1-1") == [2]


# --- the DaemonSet and its script ----------------------------------------------------------------


def test_the_daemon_set_takes_the_whole_node_tolerates_both_taints_and_runs_only_on_pending_nodes():
    ds = burn_in_objects.daemon_set(TARGET)
    pod = ds["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["aws.amazon.com/neuron"] == "16"
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "8"
    assert {t["key"] for t in pod["tolerations"]} == {NEURON_TAINT.key, BURN_IN_TAINT.key, BURN_IN_FAILED_TAINT_KEY}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": BURN_IN_PENDING_LABEL, "operator": "In", "values": ["true"]} in terms[0]["matchExpressions"]
    assert {"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["trn1-32xl-ng1"]} in terms[0][
        "matchExpressions"
    ]
    # Karpenter's nodes carry their NodePool's name instead (the NodePool is named after the group).
    karpenter = burn_in_objects.daemon_set(dataclasses.replace(TARGET, provisioner="karpenter"))
    k_terms = karpenter["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["trn1-32xl-ng1"]} in k_terms[
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    assert container["securityContext"]["privileged"] is False
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-claim", "readOnly": True}}]
    assert "hostPath" not in json.dumps(pod) and "hostNetwork" not in pod


def _run_script(
    tmp_path: Path,
    target: burn_in_objects.BurnInTarget,
    neuron_ls: str,
    efa_domains: int,
    nccom_exit: int,
    locked: str = "unlimited",
    age: int = 60,
    nccom: str = "",
) -> str:
    """The check script under bash, with the node's tools replaced by stubs printing what the real
    ones print (neuron-ls's table rows, fi_info's ``domain:`` lines)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "neuron-ls").write_text(f"#!/bin/sh\ncat <<'EOF'\n{neuron_ls}\nEOF\n")
    domains = "".join(f"    domain: rdmap{i}s0-rdm\\n" for i in range(efa_domains))
    (bin_ / "fi_info").write_text(f"#!/bin/sh\nprintf '{domains}'\n")
    (bin_ / "nccom-test").write_text(f"#!/bin/sh\n{nccom}exit {nccom_exit}\n")
    devices = tmp_path / "dev"
    devices.mkdir()
    for i in range(target.neuron_devices):
        (devices / f"neuron{i}").write_text("")
    for f in bin_.iterdir():
        f.chmod(0o755)
    script = (
        burn_in_objects.check_script(target)
        .replace(burn_in_objects.NEURON_BIN, str(bin_))
        .replace(burn_in_objects.FI_INFO, str(bin_ / "fi_info"))
        .replace("/dev/neuron", str(devices / "neuron"))
        .replace("l=$(ulimit -l)", f"l={locked}")
        .replace(f"stat -f -c %T {burn_in_objects.SHARED_MOUNT}", "echo lustre")
        .replace("exec sleep infinity", "exit 0")
    )
    patch = f"import sys; print({age}) if sys.argv[1] == 'age' else print('PATCH', sys.argv[1], sys.argv[2] or '-')"
    out = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "NODE_NAME": "n1", "PATCH_NODE": patch},
    )
    return out.stderr + out.stdout


# neuron-ls's table as the tools in the burn-in image print it (aws-neuron-sdk v2.30.0
# tools/neuron-sys-tools/neuron-ls.rst): device, NeuronCore count, NeuronCore ids, memory, ...
TABLE_16 = "\n".join(f"| {i:<6} | 2      | {2 * i}-{2 * i + 1:<5} | 32 GB  | 10:1e.0 |" for i in range(16))


def test_a_healthy_node_passes(tmp_path):
    assert _run_script(tmp_path, TARGET, TABLE_16, 8, 0).splitlines()[-1] == "PATCH passed -"


def test_a_locked_memory_limit_at_the_user_datas_passes(tmp_path):
    """The check's floor is what the EFA nodes' user data sets (2**53 bytes), in KiB as `ulimit -l` prints."""
    assert burn_in_objects.LOCKED_MEMORY_KIB == 2**43
    assert _run_script(tmp_path, TARGET, TABLE_16, 8, 0, str(2**43)).splitlines()[-1] == "PATCH passed -"


def test_a_burn_in_over_its_budget_fails_with_timeout(tmp_path):
    """The budget counts from the node's creation, so a slow image pull uses it up too; a hung check
    is cut off when the budget runs out (the stub sleeps past the 1 s left)."""
    assert burn_in_objects.BUDGET_SECONDS == 780 and burn_in_objects.BURN_IN_MINUTES == 13
    late = tmp_path / "late"
    late.mkdir()
    budget = burn_in_objects.BUDGET_SECONDS
    assert _run_script(late, TARGET, TABLE_16, 8, 0, age=budget + 1).splitlines()[-1] == "PATCH failed timeout"
    hung = tmp_path / "hung"
    hung.mkdir()
    started = time.monotonic()
    out = _run_script(hung, TARGET, TABLE_16, 8, 0, age=budget - 1, nccom="sleep 30\n")
    assert out.splitlines()[-1] == "PATCH failed timeout" and "1 s left" in out
    # The hung check ends with the budget, not after its own 30 s (which would also hold the output).
    assert time.monotonic() - started < 15


def test_the_budget_is_well_under_the_autoscalers_node_startup_limit():
    """kubernetes/autoscaler cluster-autoscaler-1.34.2 clusterstate/clusterstate.go: MaxNodeStartupTime =
    15 * time.Minute from registration to ready (a node with a startup taint is not ready), then it
    counts as unready; config/flags/flags.go: max-node-provision-time defaults to 15 minutes too."""
    assert burn_in_objects.BUDGET_SECONDS + 120 <= 15 * 60  # two minutes left for the patch and the boot


@pytest.mark.parametrize(
    "table, efa, nccom, locked, reason",
    [
        ("\n".join(TABLE_16.splitlines()[:15]), 8, 0, "unlimited", "neuron-devices"),
        (TABLE_16, 7, 0, "unlimited", "efa-interfaces"),
        (TABLE_16, 8, 0, "8192", "locked-memory"),  # containerd's own limit: systemd's 8 MiB
        (TABLE_16, 8, 1, "unlimited", "neuron-runtime"),
    ],
)
def test_a_failed_check_names_itself(tmp_path, table, efa, nccom, locked, reason):
    out = _run_script(tmp_path, TARGET, table, efa, nccom, locked)
    assert out.splitlines()[-1] == f"PATCH failed {reason}"
    assert "FAIL" in out


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _patch_node(
    monkeypatch,
    result: str,
    reason: str,
    conflicts: int = 0,
    created: str = "2026-01-01T00:00:00Z",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    annotations: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Runs PATCH_NODE against a fake API server: returns the patches it sent."""
    sent: list[dict[str, Any]] = []
    state = {"conflicts": conflicts}

    def urlopen(request, context=None, timeout=None):
        if request.get_method() == "GET":
            node = {
                "metadata": {
                    **NODE["metadata"],
                    "resourceVersion": "7",
                    "creationTimestamp": created,
                    "labels": labels if labels is not None else NODE["metadata"]["labels"],
                    **({"annotations": annotations} if annotations is not None else {}),
                },
                "spec": {"taints": taints if taints is not None else NODE["spec"]["taints"]},
            }
            return _Response(json.dumps(node).encode())
        sent.append(json.loads(request.data))
        if state["conflicts"]:
            state["conflicts"] -= 1
            raise urllib.error.HTTPError(request.full_url, 409, "Conflict", {}, io.BytesIO(b"conflict"))
        return _Response(b"{}")

    monkeypatch.setenv("NODE_NAME", "ip-10-0-1-1")
    assert run_in_pod(monkeypatch, burn_in_objects.PATCH_NODE, urlopen, [result, reason]) == 0
    return sent


def run_in_pod(monkeypatch, source: str, urlopen: Any, args: list[str], now: datetime | None = None) -> int:
    """Runs an in-pod program's ``source`` as its pod would, its API calls answered by ``urlopen``, its
    service-account token and CA stubbed, no wait between retries and, given ``now``, its clock stopped there:
    returns its exit code."""
    import builtins
    import datetime as datetime_module
    import ssl
    import time
    import urllib.request

    if now is not None:

        class Clock(datetime):
            @classmethod
            def now(cls, tz=None):
                return now

        monkeypatch.setattr(datetime_module, "datetime", Clock)

    real_open = builtins.open
    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(ssl, "create_default_context", lambda **_: None)
    monkeypatch.setattr(time, "sleep", lambda _: None)
    monkeypatch.setattr(
        builtins,
        "open",
        lambda path, *a, **k: io.StringIO("token") if "serviceaccount" in str(path) else real_open(path, *a, **k),
    )
    # What the kubelet gives every container: the API server's service address.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.100.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(sys, "argv", ["-c", *args])
    with pytest.raises(SystemExit) as exit_:
        exec(compile(source, "in-pod", "exec"), {})
    return exit_.value.code


def test_a_pass_removes_only_the_burn_in_taint_and_the_pending_label_conditionally_and_holds_the_node(monkeypatch):
    before = datetime.now(UTC).replace(microsecond=0)
    [patch] = _patch_node(monkeypatch, "passed", "")
    assert patch["spec"]["taints"] == [{"key": NEURON_TAINT.key, "effect": "NoSchedule"}]
    since = datetime.strptime(patch["metadata"]["annotations"][GANG_HOLD_MARKER], "%Y-%m-%dT%H:%M:%SZ")
    assert before <= since.replace(tzinfo=UTC) <= datetime.now(UTC)  # held from the pass, in UTC
    assert patch["metadata"] == {
        "labels": {BURN_IN_RESULT_LABEL: "passed", BURN_IN_REASON_LABEL: None, BURN_IN_PENDING_LABEL: None},
        "annotations": {**HELD, GANG_HOLD_MARKER: patch["metadata"]["annotations"][GANG_HOLD_MARKER]},
        "resourceVersion": "7",
    }
    # What the policy sees from that patch is allowed.
    new = copy.deepcopy(NODE)
    new["spec"]["taints"] = patch["spec"]["taints"]
    labels = {**new["metadata"]["labels"], **patch["metadata"]["labels"]}
    new["metadata"]["labels"] = {k: v for k, v in labels.items() if v is not None}
    new["metadata"]["annotations"] = patch["metadata"]["annotations"]
    assert _refused_by(NODE, new, "ip-10-0-1-1") == []


def test_a_failed_re_run_ends_the_hold_the_pass_set_and_only_that(monkeypatch):
    """A failed node must go, so a hold left on it would keep it for good; a node nobody held keeps
    an operator's own annotation."""
    held = {**HELD, "note": "x"}
    [patch] = _patch_node(monkeypatch, "failed", "neuron-runtime", annotations=held)
    assert patch["metadata"]["annotations"] == dict.fromkeys(GANG_HOLD_KEYS)
    operator = {"karpenter.sh/do-not-disrupt": "true"}
    [patch] = _patch_node(monkeypatch, "failed", "neuron-runtime", annotations=operator)
    assert "annotations" not in patch["metadata"]


def test_a_failure_swaps_the_startup_taint_for_the_failed_one_and_says_why(monkeypatch):
    patches = _patch_node(monkeypatch, "failed", "efa-interfaces", conflicts=1)
    assert len(patches) == 2
    assert patches[-1]["spec"]["taints"] == [
        {"key": NEURON_TAINT.key, "effect": "NoSchedule"},
        {"key": BURN_IN_FAILED_TAINT_KEY, "value": "efa-interfaces", "effect": "NoSchedule"},
    ]
    assert patches[-1]["metadata"]["labels"] == {
        BURN_IN_RESULT_LABEL: "failed",
        BURN_IN_REASON_LABEL: "efa-interfaces",
        BURN_IN_PENDING_LABEL: None,
    }
    # What the policy sees from that patch is allowed.
    new = copy.deepcopy(NODE)
    new["spec"]["taints"] = patches[-1]["spec"]["taints"]
    labels = {**new["metadata"]["labels"], **patches[-1]["metadata"]["labels"]}
    new["metadata"]["labels"] = {k: v for k, v in labels.items() if v is not None}
    assert _refused_by(NODE, new, "ip-10-0-1-1") == []


def test_the_age_of_the_node_comes_from_its_creation_unless_it_is_a_re_run(monkeypatch, capsys):
    _patch_node(monkeypatch, "age", "", created="2020-01-01T00:00:00Z")
    assert int(capsys.readouterr().out) > 10**8
    _patch_node(monkeypatch, "age", "", created="2020-01-01T00:00:00Z", labels={BURN_IN_RESULT_LABEL: "failed"})
    assert int(capsys.readouterr().out) == 0


def test_a_pass_after_a_failure_removes_the_failed_taint(monkeypatch):
    failed_taint = {"key": BURN_IN_FAILED_TAINT_KEY, "value": "timeout", "effect": "NoSchedule"}
    [patch] = _patch_node(monkeypatch, "passed", "", taints=[NODE["spec"]["taints"][0], failed_taint])
    assert patch["spec"]["taints"] == [{"key": NEURON_TAINT.key, "effect": "NoSchedule"}]


# --- Capacity Block windows ----------------------------------------------------------------------

BLOCK = {"start": "2026-12-01T11:30:00Z", "end": "2026-12-02T11:30:00Z"}


def _steps(hours: float) -> list[TrainiumStep]:
    return [TrainiumStep("bertPretraining", "bert-train", "cb", 2, int(hours * 3600), "")]


def test_a_run_that_ends_before_the_scale_down_fits():
    now = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    # 24 h block, EKS scales to zero 40 min before its end (EKS user guide ml/capacity-blocks-mng.adoc),
    # and the gang watchdog stops the group's jobs 10 min before that (capacity_windows.stop_by).
    assert window_problems(_steps(23 + 10 / 60), {"cb": BLOCK}, now, str) == []
    [problem] = window_problems(_steps(23 + 11 / 60), {"cb": BLOCK}, now, str)
    assert "need up to 23 h 11 min" in problem and "2026-12-02T10:40:00Z" in problem and "23 h 10 min" in problem


def test_the_window_counts_a_burn_in_for_every_attempt_on_a_health_gated_group():
    now = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    steps = [dataclasses.replace(s, attempts=2) for s in _steps(22 + 55 / 60)]
    assert window_problems(steps, {"cb": BLOCK}, now, str) == []
    assert window_problems(steps, {"cb": BLOCK}, now, str, {"cb": 0}) == []
    [problem] = window_problems(steps, {"cb": BLOCK}, now, str, {"cb": burn_in_objects.BURN_IN_MINUTES * 60})
    assert "need up to 23 h 21 min" in problem and "+ 2 burn-ins of 13 min" in problem


def test_the_window_counts_from_now_once_the_block_has_started():
    later = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    [problem] = window_problems(_steps(2), {"cb": BLOCK}, later, str)
    assert "1 h 40 min from now" in problem
    assert window_problems(_steps(2), {"cb": None}, later, str) == []


def test_the_mock_block_has_a_realistic_end_and_the_output_carries_it():
    from offline.plan.fixtures import CAPACITY_BLOCKS

    for _, _, _, start, end, _ in CAPACITY_BLOCKS.values():
        s, e = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
        assert s.hour == e.hour == 11 and s.minute == e.minute == 30  # blocks start and end at 11:30 UTC
        assert 1 <= (e - s).days <= 14
    out = spec(capacityReservation={"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"})
    assert out.output()["capacityBlock"] is None  # only the look-up's window is exported


# --- the Neuron compatibility table --------------------------------------------------------------


def _config(**group: Any):
    from infra.validate import parse_stack_config

    return parse_stack_config(
        {
            "region": "us-west-2",
            "acceleratorNodeGroups": [
                {"name": "trn1-32xl-ng1", "instanceType": "trn1.32xlarge", "maxSize": 4, **group}
            ],
        }
    )


def test_the_sdks_the_images_name_are_in_the_table_with_their_manifest_versions():
    """aws-neuron-sdk v2.32.0 src/helperscripts/n2-manifest.json: SDK 2.21.0 ships runtime-lib
    2.23.110.0, neuronx-cc 2.16.345.0, aws-neuronx-dkms 2.19.64.0; SDK 2.31.0 driver 2.29.0.0."""
    from infra.facts import neuron

    assert {i.sdk.version for i in neuron.TRAINING_IMAGES} == {"2.30.0"}
    assert neuron.SDK_RELEASES["2.21.0"].runtime == "2.23.110.0"
    assert neuron.SDK_RELEASES["2.21.0"].compiler == "2.16.345.0"
    assert neuron.SDK_RELEASES["2.31.0"].driver.startswith("2.29")
    assert neuron.DEVICE_PLUGIN == "2.31.0.0"


def test_an_ami_built_after_driver_2_29_shipped_is_refused_with_every_part_named():
    """aws-neuron-sdk v2.31.0 release-notes/components/runtime.rst: "Neuron Driver 2.29 requires Neuron
    Runtime Library 2.33 or later ... nrt_init() to fail"; SDK 2.31.0 released 07/07/2026."""
    from infra.config.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        _config(amiReleaseVersion="1.35.2-20260707")
    text = str(err.value)
    assert "acceleratorNodeGroups[0].amiReleaseVersion = 1.35.2-20260707" in text
    assert "Neuron driver 2.29 or newer" in text and "nrt_init() fails" in text
    for part in (
        "docker/bert-pretrain (Neuron SDK 2.30.0: runtime 2.32.31.0, compiler 2.25.3371.0, torch-neuronx 2.9.0)",
        "docker/ray-llama2 (Neuron SDK 2.30.0: runtime 2.32.31.0, compiler 2.25.3371.0, torch-neuronx 2.9.0)",
        "docker/nxd-llama (Neuron SDK 2.30.0: runtime 2.32.31.0",
    ):
        assert part in text
    assert "fix: pin acceleratorNodeGroups[].amiReleaseVersion to a release built before 2026-07-07" in text
    _config(amiReleaseVersion="1.35.2-20260706")  # the day before: driver 2.28


def test_the_latest_ami_is_refused_with_the_release_to_pin():
    """Unpinned, the nodes launch on the latest AMI, which carries driver 2.29 or newer (awslabs/amazon-eks-ami
    v20260724 CHANGELOG.md, AMI Release v20260714: aws-neuronx-dkms 2.29.0.0-dkms): refused like a failing pin,
    the fix naming the release for the cluster's minor."""
    from infra.config.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        _config()
    text = str(err.value)
    assert (
        "acceleratorNodeGroups[0].amiReleaseVersion = unset (the latest AMI): Neuron driver 2.30 or newer "
        "(latest AL2023 Neuron AMI) cannot run docker/bert-pretrain (Neuron SDK 2.30.0" in text
    )
    assert "nrt_init() fails" in text
    assert "(for Kubernetes 1.35: 1.35.6-20260625, Neuron driver 2.28.0.0)" in text
    # An Inferentia group runs no training image: unpinned is fine there.
    from infra.validate import parse_stack_config

    parse_stack_config(
        {
            "region": "us-west-2",
            "acceleratorNodeGroups": [{"name": "inf2", "instanceType": "inf2.xlarge", "maxSize": 1}],
        }
    )


def test_the_recorded_releases_carry_a_driver_the_images_run_on():
    """awslabs/amazon-eks-ami v20260707 CHANGELOG.md, AMI Release v20260625: release 1.34.9-20260625
    (line 226), aws-neuronx-dkms 2.28.0.0-dkms (line 258), the same driver for 1.30-1.36 (1.35.6-20260625 at
    lines 145, 177). One release per
    minor EKS offers, each built for that minor, before driver 2.29 shipped, and accepted for every
    Trainium type (trn2 included: driver 2.28 is past RULES[1]'s 2.22)."""
    from infra.config.rules import ami_release_problem
    from infra.facts import neuron
    from infra.facts.versions import EKS_KUBERNETES_VERSIONS

    assert set(neuron.COMPATIBLE_AMI_RELEASES) == set(EKS_KUBERNETES_VERSIONS)
    for minor, (release, driver) in neuron.COMPATIBLE_AMI_RELEASES.items():
        assert ami_release_problem(release, minor) is None
        assert driver == neuron.SDK_RELEASES["2.30.0"].driver  # SDK 2.30.0's driver, which no rule refuses
        assert neuron.ami_driver(release).describe().startswith(f"Neuron driver {driver} (AMI release {release}")
        for instance_type in ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"):
            assert neuron.incompatibilities(release, instance_type) == []
    # The release after it carries driver 2.29.0.0: the table refuses it by date alone.
    assert neuron.incompatibilities("1.34.9-20260714", "trn1.32xlarge")


def test_the_shipped_stacks_pin_a_recorded_release_on_every_trainium_group():
    from infra.facts import neuron
    from offline.docs.generate import _trainium_groups
    from offline.plan.runner import stack_config

    for stack in ("dev", "prod"):
        groups = _trainium_groups(FIXTURE_ROOT, stack)
        minor = stack_config(FIXTURE_ROOT, stack)["trainium-eks:kubernetesVersion"]
        assert groups and {g["amiReleaseVersion"] for g in groups} == {neuron.COMPATIBLE_AMI_RELEASES[minor][0]}


def test_trn2_on_a_driver_older_than_2_22_with_a_new_runtime_fails():
    """aws-neuron-sdk v2.32.0 release-notes/components/runtime.rst, runtime 2.26.42.0: "requires
    aws-neuron-dkms 2.22 or later on Trainium2"."""
    from infra.facts import neuron

    image = neuron.TrainingImage("x", "public.ecr.aws/neuron/x:2.1-sdk2.24.0-u", "torch-neuronx")
    old_ami = neuron.ami_driver("1.31.0-20250101")
    assert old_ami.below == "2.22" and old_ami.low is None
    rule = neuron.RULES[1]
    assert rule.fails(old_ami, image, "trn2.48xlarge")
    assert not rule.fails(old_ami, image, "trn1.32xlarge")
    assert not rule.fails(neuron.ami_driver("1.34.2-20251112"), image, "trn2.48xlarge")


def test_the_policy_pack_reports_a_failing_combination():
    from tests.policy_helpers import violations
    from tests.test_policy_trainium import stack

    assert violations("neuron-compatibility", *stack({"releaseVersion": "1.34.2-20251112"})) == []
    [message] = [
        m
        for m in violations("neuron-compatibility", *stack({"releaseVersion": "1.34.2-20260801"}))
        if "bert-pretrain" in m
    ]
    assert "Node group 'trn' (trn1.32xlarge) on Neuron driver 2.29 or newer, below 2.30" in message
    assert "runtime 2.32.31.0" in message and "nrt_init() fails" in message and "fix: pin" in message
    assert not any(
        "burn-in" in m for m in violations("neuron-compatibility", *stack({"releaseVersion": "1.34.2-20260801"}))
    )
    # A group with the burn-in's startup taint runs the burn-in image too.
    gated = {
        "releaseVersion": "1.34.2-20260801",
        "taints": [
            {"key": NEURON_TAINT.key, "value": "true", "effect": "NO_SCHEDULE"},
            {"key": BURN_IN_TAINT.key, "value": "pending", "effect": "NO_SCHEDULE"},
        ],
    }
    [burn] = [m for m in violations("neuron-compatibility", *stack(gated)) if "burn-in" in m]
    assert "cannot run the burn-in image (Neuron SDK 2.30.0, runtime 2.32.31.0)" in burn
    assert violations("neuron-compatibility", *stack({"releaseVersion": "1.34.9-20260625"})) == []
    # Unpinned: the latest AMI, refused alike, the fix naming the release for the group's minor.
    unpinned = violations("neuron-compatibility", *stack({"version": "1.34"}))
    assert len(unpinned) == 3 and all("Neuron driver 2.30 or newer (latest AL2023 Neuron AMI)" in m for m in unpinned)
    assert all("(for Kubernetes 1.34: 1.34.9-20260625, Neuron driver 2.28.0.0)." in m for m in unpinned)


def test_the_burn_in_is_billed_per_node_launch_on_a_health_gated_group():
    from offline.report.cost import WorkloadRun, with_burn_in

    run = WorkloadRun("bertPretraining", "g", 2, 3600, "at most 60 min", launches=4)
    gated = with_burn_in(run, {"startupTaints": [{"key": BURN_IN_TAINT.key}]})
    assert gated.bound_seconds == 3600 + 4 * burn_in_objects.BURN_IN_MINUTES * 60
    assert "+ 4 × 13 min burn-in: each attempt of each step" in gated.bound_text
    # No burn-in: none billed, and no gang hold, so its idle nodes stay 10 minutes, not 3 (7 more).
    ungated = with_burn_in(run, {"startupTaints": []})
    assert (
        ungated.bound_seconds == 3600 + 7 * 60
        and "a group without burn-in keeps idle nodes 10m0s" in ungated.bound_text
    )


def test_the_workload_stack_refuses_a_run_its_capacity_block_cannot_hold(dev):
    """Through the contract and the checks the workload program runs (workloads/__main__.py)."""
    from tests.test_schedule import problems
    from workloads import checks

    def on_a_block(outputs: dict[str, Any]) -> None:
        for g in outputs["acceleratorNodeGroups"]:
            g["capacityBlock"] = {"start": "2026-12-01T11:30:00Z", "end": "2026-12-01T20:30:00Z"}  # 9 h

    # BERT's steps hold trn1-32xl-ng1 up to 630 min (tests/test_cost.py), plus a 13-minute burn-in for
    # each of the 2 attempts of its 2 steps: more than 9 h - 50 min.
    before = datetime(2026, 11, 1, tzinfo=UTC)
    outputs = copy.deepcopy(dev.outputs)
    on_a_block(outputs)
    from offline.plan.runner import stack_config
    from tests.conftest import WORKLOADS_DIR
    from workloads.settings import parse_workloads_config

    settings = parse_workloads_config({**stack_config(WORKLOADS_DIR, "dev"), "trainium-workloads:hfToken": "hf_x"})
    found = checks.workload_problems(settings, contract.parse_contract(outputs), now=before)
    [bert] = [p for p in found if p.startswith("trainium-workloads:bertPretraining")]
    assert "starts on node group trn1-32xl-ng1 need up to 11 h 22 min" in bert
    assert "8 h 10 min from the block start" in bert and "+ 4 burn-ins of 13 min" in bert
    # 192 minutes too many: the precompile's 2 attempts give back 2 minutes per minute of its deadline;
    # the training's 60 minutes cannot give back enough on their own.
    assert (
        "lower trainium-workloads:bertPretraining.precompileDeadlineMinutes from 120 to at most 24 (it replaces" in bert
    )
    assert "trainDeadlineMinutes" not in bert
    assert problems(dev) == []  # on-demand groups: no window


def test_efa_nodes_give_containers_a_locked_memory_limit_through_nodeadm():
    """awslabs/amazon-eks-ami nodeadm: containerd.baseRuntimeSpec is merged over
    internal/containerd/base-runtime-spec.json (RLIMIT_NOFILE 65536/1048576 only) by mergo with
    override through float64 numbers (internal/util/merge.go): the list must repeat NOFILE, and the
    limit must be exact in a float64."""
    import yaml

    from infra.specs.user_data import LOCKED_MEMORY_BYTES, nodeadm_user_data

    text = nodeadm_user_data(4, efa=True)
    document = text.split("Content-Type: application/node.eks.aws\n\n", 1)[1].split("\n--", 1)[0]
    config = yaml.safe_load(document)
    assert config["spec"]["instance"]["localStorage"]["strategy"] == "RAID0"
    rlimits = config["spec"]["containerd"]["baseRuntimeSpec"]["process"]["rlimits"]
    assert rlimits == [
        {"type": "RLIMIT_NOFILE", "soft": 65536, "hard": 1048576},
        {"type": "RLIMIT_MEMLOCK", "soft": LOCKED_MEMORY_BYTES, "hard": LOCKED_MEMORY_BYTES},
    ]
    assert int(float(LOCKED_MEMORY_BYTES)) == LOCKED_MEMORY_BYTES
    assert "RLIMIT_MEMLOCK" not in nodeadm_user_data(4)  # no EFA: nothing to register


def test_the_burn_in_image_is_checked_like_the_training_images_where_the_burn_in_runs():
    """The burn-in's nccom-test needs a runtime the node's driver works with, or
    every new node fails its burn-in; the table checks its DLC on groups with burnIn."""
    from infra.config.errors import ConfigError
    from infra.facts import neuron

    assert burn_in_objects.IMAGE == neuron.BURN_IN_IMAGE.base
    assert neuron.BURN_IN_IMAGE in neuron.images_for(True) and neuron.BURN_IN_IMAGE not in neuron.images_for(False)
    assert set(neuron.TRAINING_IMAGES) <= set(neuron.images_for(False))
    with pytest.raises(ConfigError) as err:
        _config(amiReleaseVersion="1.35.2-20260707")
    assert "the burn-in image (Neuron SDK 2.30.0: runtime 2.32.31.0" in str(err.value)
    with pytest.raises(ConfigError) as err:
        _config(amiReleaseVersion="1.35.2-20260707", burnIn=False)
    assert "burn-in image" not in str(err.value)


def test_a_karpenter_group_on_tag_selected_capacity_blocks_is_warned_about():
    """aws/karpenter-provider-aws v1.14.0 pkg/apis/v1/ec2nodeclass_status.go: capacityReservationExpirationPeriod
    = 40 minutes, after which the expiration controller deletes the block's NodeClaims."""
    from infra.config.rules import advisories
    from infra.validate import parse_stack_config

    group = {
        "name": "trn1-cb",
        "instanceType": "trn1.32xlarge",
        "maxSize": 2,
        "azId": "usw2-az4",
        "amiReleaseVersion": "1.35.6-20260625",
        "capacityReservation": {"tags": {"team": "ml"}, "type": "capacity-block"},
    }
    config = parse_stack_config(
        {"region": "us-west-2", "nodeProvisioner": "karpenter", "acceleratorNodeGroups": [group]}
    )
    [note] = [a for a in advisories(config) if "Capacity Blocks by tag" in a]
    assert note.startswith(
        "trainium-eks:acceleratorNodeGroups[0].capacityReservation.tags = {'team': 'ml'}: node group trn1-cb"
    )
    assert "40 minutes before a block ends" in note and "from 30 minutes before the end" in note
    by_id = {**group, "capacityReservation": {"id": "cr-0c0ffee0c0ffee001", "type": "capacity-block"}}
    config = parse_stack_config(
        {"region": "us-west-2", "nodeProvisioner": "karpenter", "acceleratorNodeGroups": [by_id]}
    )
    assert not [a for a in advisories(config) if "Capacity Blocks by tag" in a]
