"""A hung run ended by its liveness probe is visible as a metric, on the
dashboard and as an alarm state, not only in `kubectl describe`.

Which metrics and dimension sets exist is taken from the agent the add-on runs, not from memory:
aws/amazon-cloudwatch-agent translator/translate/otel/exporter/awsemf/kubernetes.go,
getPodMetricDeclarations (identical from v1.300058.0, in add-on chart 4.3.0, to v1.300071.0; chart
6.4.0 runs 1.300070.0, aws-observability/helm-charts values.yaml agent.image.tag). With
``enhanced_container_insights: true`` -- the add-on's default agent config (helm-charts
amazon-cloudwatch-observability 4.8.0 values.yaml agent.defaultConfig; 6.4.0 templates/_helpers.tpl
sets it whenever containerInsights.enabled, default true) -- pod_number_of_container_restarts
and pod_status_failed are published with the sets below. AWS documents the same metrics on
"Amazon EKS and Kubernetes Container Insights with enhanced observability metrics",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-enhanced-EKS.html
"""

from __future__ import annotations

import json
import re

from infra.components.observability import (
    TRAINING_HEALTH_METRICS,
    dashboard_body,
    namespace_query,
    training_alarm_name,
)

PUBLISHED_POD_DIMENSION_SETS = (
    {"PodName", "Namespace", "ClusterName"},
    {"ClusterName"},
    {"FullPodName", "PodName", "Namespace", "ClusterName"},
    {"Service", "Namespace", "ClusterName"},
)
PUBLISHED_WITH_THOSE_SETS = {"pod_number_of_container_restarts", "pod_status_failed"}
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


def schema_dimensions(query: str) -> set[str]:
    match = re.search(r"FROM SCHEMA\(ContainerInsights, ([^)]*)\)", query)
    assert match, query
    return {d.strip().strip('"') for d in match.group(1).split(",")}


def training_widgets(body: str) -> dict[str, list[dict]]:
    widgets = json.loads(body)["widgets"]
    titles = {title for title, _, _ in TRAINING_HEALTH_METRICS}
    return {
        w["properties"]["title"]: [row[0] for row in w["properties"]["metrics"]]
        for w in widgets
        if w["properties"]["title"] in titles
    }


def test_the_query_filters_the_kubernetes_namespace_dimension_on_a_published_set():
    query = namespace_query("pod_number_of_container_restarts", "MAX", "trn-dev", "research")
    assert query == (
        'SELECT MAX(pod_number_of_container_restarts) FROM SCHEMA(ContainerInsights, ClusterName, "Namespace", '
        "PodName) WHERE ClusterName = 'trn-dev' AND \"Namespace\" = 'research' GROUP BY PodName"
    )
    # SCHEMA matches exactly one dimension set: a set the agent does not publish matches nothing
    # (the per-namespace aggregate [ClusterName, Namespace] does not exist for these metrics).
    assert schema_dimensions(query) in PUBLISHED_POD_DIMENSION_SETS
    assert {"ClusterName", "Namespace"} not in PUBLISHED_POD_DIMENSION_SETS
    assert not namespace_query("pod_status_failed", "SUM", "c", "n", per_pod=False).endswith("GROUP BY PodName")


def test_dashboard_has_restart_and_failed_pod_widgets_per_training_namespace(prod):
    # Pulumi.prod.yaml: trainingNamespaces [default, research], clusterName trn-prod.
    body = prod.named("observability-neuron").inputs["dashboardBody"]
    widgets = training_widgets(body)
    assert len(widgets) == 2
    metrics_shown = set()
    for expressions in widgets.values():
        assert [e["label"] for e in expressions] == ["default", "research"]
        assert len({e["id"] for e in expressions}) == 2
        for e, namespace in zip(expressions, ["default", "research"], strict=True):
            query = e["expression"]
            metric = re.match(r"SELECT (MAX|SUM)\((\w+)\)", query).group(2)
            metrics_shown.add(metric)
            assert metric in PUBLISHED_WITH_THOSE_SETS
            assert schema_dimensions(query) in PUBLISHED_POD_DIMENSION_SETS
            assert f"ClusterName = 'trn-prod' AND \"Namespace\" = '{namespace}'" in query
    assert metrics_shown == PUBLISHED_WITH_THOSE_SETS
    # every widget id in a dashboard must be unique, or CloudWatch rejects the body
    ids = [row[0]["id"] for w in json.loads(body)["widgets"] for row in w["properties"]["metrics"]]
    assert len(ids) == len(set(ids))


def test_no_training_namespace_means_only_the_neuron_widgets():
    assert training_widgets(dashboard_body("c", "us-west-2", [])) == {}


def test_a_restart_and_a_failed_pod_alarm_per_training_namespace(prod, dev):
    """NxD Training and Ray workers restart in place (a restart count); BERT's Volcano pods are
    restartPolicy Never, so a probe kill leaves a Failed pod and the restart count stays 0: the
    failed-pod alarm is the one a BERT hang raises."""
    kinds = {"training-restarts": "pod_number_of_container_restarts", "training-pods-failed": "pod_status_failed"}
    alarms = {a.inputs["name"]: a.inputs for a in prod.of_type(ALARM)}
    assert set(alarms) == {training_alarm_name("trn-prod", ns, k) for ns in ("default", "research") for k in kinds}
    for kind, metric in kinds.items():
        alarm = alarms[f"trn-prod-research-{kind}"]
        (query,) = alarm["metricQueries"]
        # An alarm needs one time series: the worst pod of the namespace, no GROUP BY.
        assert query["expression"] == namespace_query(metric, "MAX", "trn-prod", "research", per_pod=False)
        assert schema_dimensions(query["expression"]) in PUBLISHED_POD_DIMENSION_SETS
        assert metric in PUBLISHED_WITH_THOSE_SETS
        assert query["returnData"] is True and query["period"] == 60
        assert (alarm["comparisonOperator"], alarm["threshold"], alarm["evaluationPeriods"]) == (
            "GreaterThanThreshold",
            0,
            1,
        )
        # No pods, no data: an idle namespace is not a hang.
        assert alarm["treatMissingData"] == "notBreaching"
        # It says it counts every pod of the namespace, not only training pods.
        assert "any pod there" in alarm["alarmDescription"]
    assert "BERT" in alarms["trn-prod-research-training-pods-failed"]["alarmDescription"]
    assert sorted(a.inputs["name"] for a in dev.of_type(ALARM)) == [
        "trn-dev-default-training-pods-failed",
        "trn-dev-default-training-restarts",
    ]
