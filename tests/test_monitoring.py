"""monitoring.prometheus: managed, as the prod plan declares it: the goodput rules in the workspace, the
collector's scrape configuration against the pods it must find, its access to the cluster, the alerts'
route to SNS and the topic's policy, kube-state-metrics' labels for the rules, and the refusal without a
private API endpoint. Sources: infra/specs/monitoring.py."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.specs import goodput_rules, monitoring
from tests import promtool
from tests.test_config import refused, with_changes
from workloads import progress


def by_type(result, type_: str) -> list:
    return [r for r in result.registrations if r.type == type_]


def one(result, type_: str):
    (found,) = by_type(result, type_)
    return found


def test_dev_declares_none_of_it(dev):
    assert not [r for r in dev.registrations if r.type.startswith("aws:amp")]
    assert not [r for r in dev.registrations if r.name == monitoring.KUBE_STATE_METRICS]


def test_the_workspace_holds_the_goodput_rules_and_promtool_reads_them(prod, tmp_path):
    rules = one(prod, "aws:amp/ruleGroupNamespace:RuleGroupNamespace").inputs["data"]
    assert rules == goodput_rules.rule_file("us-east-2", 30)
    (tmp_path / "rules.yml").write_text(rules)
    result = promtool.run("check", "rules", tmp_path / "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    workspace = one(prod, "aws:amp/workspace:Workspace").inputs
    assert monitoring.AGENTLESS_TAG in workspace["tags"]


def test_the_collector_finds_kube_state_metrics_and_every_progress_exporter(prod, workloads_prod):
    scraper = one(prod, "aws:amp/scraper:Scraper").inputs
    config = yaml.safe_load(scraper["scrapeConfiguration"])
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    # The collector's limits: 30 s at least, Kubernetes discovery only.
    assert all(int(job["scrape_interval"].rstrip("s")) >= 30 for job in jobs.values())
    assert all(
        set(job) <= {"job_name", "scrape_interval", "kubernetes_sd_configs", "relabel_configs"} for job in jobs.values()
    )

    def kept(job: str) -> dict[str, str]:
        return {r["source_labels"][0]: r["regex"] for r in jobs[job]["relabel_configs"] if r.get("action") == "keep"}

    # The exporter's pod as the prod workload stack declares it: its name label and its port's name.
    exporter = next(
        r.inputs
        for r in workloads_prod.registrations
        if r.inputs.get("kind") == "Deployment" and r.inputs["metadata"]["name"] == progress.NAME
    )
    pod = exporter["spec"]["template"]
    keep = kept("progress-exporter")
    assert (
        keep["__meta_kubernetes_pod_label_app_kubernetes_io_name"]
        == pod["metadata"]["labels"]["app.kubernetes.io/name"]
    )
    assert keep["__meta_kubernetes_pod_container_port_name"] == pod["spec"]["containers"][0]["ports"][0]["name"]
    assert {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace", "action": "replace"} in jobs[
        "progress-exporter"
    ]["relabel_configs"]
    release = next(r for r in prod.registrations if r.name == monitoring.KUBE_STATE_METRICS)
    assert kept("kube-state-metrics")["__meta_kubernetes_namespace"] == release.inputs["namespace"]
    # Every label the rules read from kube_pod_labels and kube_node_labels is allowed onto them.
    allowed = release.inputs["values"]["metricLabelsAllowlist"]
    assert "pods=[app.kubernetes.io/part-of]" in allowed
    assert "nodes=[node.kubernetes.io/instance-type,eks.amazonaws.com/capacityType]" in allowed
    # The pods' nodeSelector (the pending state's instance type) is an opt-in family, named in the args.
    assert "--metric-opt-in-list=kube_pod_nodeselectors" in release.inputs["values"]["extraArgs"]


def test_the_collector_is_the_user_its_cluster_role_is_bound_to(prod):
    entries = [r for r in by_type(prod, "aws:eks/accessEntry:AccessEntry") if r.inputs.get("userName")]
    (entry,) = entries
    # The service-linked role's ARN without its path, as EKS takes it.
    assert entry.inputs["principalArn"].endswith(":role/AWSServiceRoleForAmazonPrometheusScraper_placeholder")
    binding = next(
        r.inputs
        for r in prod.registrations
        if r.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
        and r.name.endswith("collector-binding")
    )
    assert binding["subjects"][0]["name"] == entry.inputs["userName"] == monitoring.COLLECTOR_USER
    assert monitoring.eks_principal("arn:aws:iam::1:role/a/b/Name_x") == "arn:aws:iam::1:role/Name_x"


def test_the_alerts_go_to_the_topic_the_workspace_may_publish_to(prod):
    # The offline plan's ARNs end in placeholder/<resource name> (offline/plan/mocks.py).
    definition = one(prod, "aws:amp/alertManagerDefinition:AlertManagerDefinition").inputs["definition"]
    config = yaml.safe_load(yaml.safe_load(definition)["alertmanager_config"])
    (receiver,) = config["receivers"]
    assert config["route"]["receiver"] == receiver["name"]
    (sns,) = receiver["sns_configs"]
    assert sns["sigv4"] == {"region": "us-east-2"} and sns["topic_arn"].endswith("placeholder/prometheus-alerts")
    policy = json.loads(one(prod, "aws:sns/topicPolicy:TopicPolicy").inputs["policy"])
    (statement,) = policy["Statement"]
    assert statement["Principal"] == {"Service": "aps.amazonaws.com"} and "sns:Publish" in statement["Action"]
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"].endswith("placeholder/prometheus-workspace")
    assert statement["Resource"] == sns["topic_arn"]


def test_an_existing_topic_is_used_as_given(plan_with):
    arn = "arn:aws:sns:us-west-2:123456789012:team-pager"
    result = plan_with(monitoring={"prometheus": "managed", "alertTopicArn": arn})
    assert not by_type(result, "aws:sns/topic:Topic")
    definition = yaml.safe_load(
        one(result, "aws:amp/alertManagerDefinition:AlertManagerDefinition").inputs["definition"]
    )
    assert yaml.safe_load(definition["alertmanager_config"])["receivers"][0]["sns_configs"][0]["topic_arn"] == arn


def test_managed_without_a_private_endpoint_is_refused():
    message = refused(with_changes(monitoring={"prometheus": "managed"}, endpointAccess={"private": False}))
    assert "trainium-eks:monitoring.prometheus: 'managed' needs the private API endpoint" in message
    assert "trainium-eks:endpointAccess.private is false" in message


@pytest.mark.parametrize("minutes", [5, 2000])
def test_the_idle_alert_time_is_bounded(minutes):
    assert "idleNodeAlertMinutes" in refused(with_changes(monitoring={"idleNodeAlertMinutes": minutes}))


def test_the_collector_is_unknown_in_the_estimate_never_free(prod):
    from offline.report import report

    estimate = report.cluster_cost(prod)
    line = next(line for line in estimate["lines"] if line["item"] == "Managed Prometheus collector")
    assert line["hourly"]["idle"] is None and estimate["hourly"]["idle"] is None
    assert any("Prometheus" in u for u in estimate["unknown"])


def test_alert_emails_subscribe_to_the_stacks_topic(plan_with):
    result = plan_with(monitoring={"prometheus": "managed", "alertEmails": ["oncall@example.com", "ml@example.com"]})
    subscriptions = by_type(result, "aws:sns/topicSubscription:TopicSubscription")
    assert sorted(s.inputs["endpoint"] for s in subscriptions) == ["ml@example.com", "oncall@example.com"]
    assert {s.inputs["protocol"] for s in subscriptions} == {"email"}
    # The offline plan's ARNs end in placeholder/<resource name> (offline/plan/mocks.py).
    assert all(s.inputs["topic"].endswith("placeholder/prometheus-alerts") for s in subscriptions)


def test_alerts_nobody_hears_are_named_and_bad_addresses_refused():
    from infra.config.rules import advisories
    from infra.validate import parse_stack_config

    (note,) = [
        a
        for a in advisories(parse_stack_config(with_changes(monitoring={"prometheus": "managed"})))
        if "alertEmails" in a
    ]
    assert "trainium-eks:monitoring.alertEmails is empty: the training alerts go to the stack's SNS topic" in note
    heard = with_changes(monitoring={"prometheus": "managed", "alertEmails": ["oncall@example.com"]})
    assert not [a for a in advisories(parse_stack_config(heard)) if "alertEmails" in a]
    message = refused(with_changes(monitoring={"prometheus": "managed", "alertEmails": ["oncall"]}))
    assert "trainium-eks:monitoring.alertEmails[0] = 'oncall': not an email address" in message
    arn = "arn:aws:sns:us-west-2:123456789012:team-pager"
    message = refused(
        with_changes(monitoring={"prometheus": "managed", "alertTopicArn": arn, "alertEmails": ["a@b.io"]})
    )
    assert "trainium-eks:monitoring.alertEmails = ['a@b.io']: only for the stack's own alert topic" in message


def test_removing_one_alert_address_leaves_the_others_subscribed(plan_with):
    # Subscriptions are named by their address: dropping the first keeps the second's resource (and so its
    # confirmed subscription) as it was, where naming by position would replace it.
    both = plan_with(monitoring={"prometheus": "managed", "alertEmails": ["a@example.com", "b@example.com"]})
    one_left = plan_with(monitoring={"prometheus": "managed", "alertEmails": ["b@example.com"]})

    def names(plan):
        return {s.inputs["endpoint"]: s.name for s in by_type(plan, "aws:sns/topicSubscription:TopicSubscription")}

    assert names(one_left) == {"b@example.com": names(both)["b@example.com"]}
    message = refused(
        with_changes(monitoring={"prometheus": "managed", "alertEmails": ["a@example.com", "A@example.com"]})
    )
    assert "trainium-eks:monitoring.alertEmails[1] = 'A@example.com': listed twice" in message
