"""monitoring.prometheus: in-cluster and monitoring.grafana: in-cluster, as the plan declares them: the chart's server
with exactly the managed collector's scrape jobs and the workspace's goodput rules (promtool reads the file the
chart writes), its Alertmanager routing to the same SNS topic with a role that may publish there, the volumes on
an encrypted gp3 class and in the estimate; a Grafana reached only through port-forward, with the dashboards'
sidecar watching their namespace and one data source per Prometheus. Sources: infra/specs/monitoring.py."""

from __future__ import annotations

import json

import pytest
import yaml

from infra.components.kube import CORE_NODE_SELECTOR
from infra.facts.versions import AMAZON_PROMETHEUS_PLUGIN_VERSION
from infra.specs import dashboards, goodput_rules, monitoring
from tests import promtool
from tests.test_config import refused, with_changes

RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def in_cluster(dev):
    from offline.plan.runner import stack_config
    from tests.conftest import _remembered_run
    from tests.fixture_project import FIXTURE_ROOT

    config = stack_config(FIXTURE_ROOT, "dev")
    settings = {"prometheus": "in-cluster", "grafana": "in-cluster", "retentionDays": 30, "volumeGib": 100}
    config["trainium-eks:monitoring"] = json.dumps(settings)
    return _remembered_run(FIXTURE_ROOT, "dev", config)


def values(result, release: str) -> dict:
    return result.named(release, RELEASE).inputs["values"]


def test_the_server_scrapes_what_the_managed_collector_scrapes_and_nothing_else(in_cluster):
    chart = values(in_cluster, monitoring.IN_CLUSTER_PROMETHEUS)
    expected = yaml.safe_load(monitoring.scrape_configuration())
    assert chart["serverFiles"]["prometheus.yml"]["scrape_configs"] == expected["scrape_configs"]
    # templates/cm.yaml writes server.global as prometheus.yml's global: the collector's interval wins.
    assert expected["global"].items() <= chart["server"]["global"].items()
    # Every job of the chart's own is off; the chart renders an entry only when enabled.
    assert set(chart["scrapeConfigs"]) == set(monitoring.IN_CLUSTER_DEFAULT_JOBS)
    assert not any(job["enabled"] for job in chart["scrapeConfigs"].values())
    # kube-state-metrics from its own release, configured as managed has it; no other exporter from the chart.
    assert not chart["kube-state-metrics"]["enabled"]
    assert not chart["prometheus-node-exporter"]["enabled"] and not chart["prometheus-pushgateway"]["enabled"]
    state = values(in_cluster, monitoring.KUBE_STATE_METRICS)
    assert state == monitoring.kube_state_metrics_values(CORE_NODE_SELECTOR)
    assert chart["server"]["nodeSelector"] == chart["alertmanager"]["nodeSelector"] == CORE_NODE_SELECTOR


def test_the_server_evaluates_the_workspaces_rules_and_promtool_reads_them(in_cluster, tmp_path):
    chart = values(in_cluster, monitoring.IN_CLUSTER_PROMETHEUS)
    (rule_path,) = chart["serverFiles"]["prometheus.yml"]["rule_files"]
    # The chart mounts every serverFiles key under /etc/config.
    name = rule_path.removeprefix("/etc/config/")
    assert yaml.safe_load(goodput_rules.rule_file("us-west-2", 30)) == chart["serverFiles"][name]
    (tmp_path / name).write_text(yaml.safe_dump(chart["serverFiles"][name]))
    result = promtool.run("check", "rules", tmp_path / name)
    assert result.returncode == 0, result.stdout + result.stderr
    # (Not `promtool check config`: Debian's promtool is built without Kubernetes service discovery.)


def test_alerts_go_to_the_stacks_topic_which_the_alertmanager_role_may_publish_to(in_cluster):
    config = values(in_cluster, monitoring.IN_CLUSTER_PROMETHEUS)["alertmanager"]["config"]
    (receiver,) = config["receivers"]
    assert config["route"]["receiver"] == receiver["name"]
    (sns,) = receiver["sns_configs"]
    # No keys, profile or role: Alertmanager v0.34.0 then signs with the SDK's default chain (Pod Identity).
    assert sns["sigv4"] == {"region": "us-west-2"}
    assert sns["topic_arn"].endswith("placeholder/prometheus-alerts")
    (association,) = [
        a
        for a in in_cluster.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if "alertmanager" in a.name
    ]
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == (
        monitoring.IN_CLUSTER_NAMESPACE,
        values(in_cluster, monitoring.IN_CLUSTER_PROMETHEUS)["alertmanager"]["serviceAccount"]["name"],
    )
    policy = json.loads(in_cluster.named("prometheus-alertmanager-policy").inputs["policy"])
    assert policy["Statement"] == [{"Effect": "Allow", "Action": ["sns:Publish"], "Resource": sns["topic_arn"]}]
    # Nobody else publishes: no topic policy for AMP.
    assert not in_cluster.of_type("aws:sns/topicPolicy:TopicPolicy")
    assert not [r for r in in_cluster.registrations if r.type.startswith("aws:amp")]


def test_the_volumes_are_encrypted_gp3_sized_from_config_and_priced(in_cluster):
    chart = values(in_cluster, monitoring.IN_CLUSTER_PROMETHEUS)
    volume = chart["server"]["persistentVolume"]
    assert volume["size"] == "100Gi" and chart["server"]["retention"] == "30d"
    # The oldest data goes before the volume fills.
    assert chart["server"]["retentionSize"] == "80GB"
    (storage_class,) = [
        c
        for c in in_cluster.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
        if c.inputs["metadata"]["name"] == volume["storageClass"]
    ]
    assert chart["alertmanager"]["persistence"]["storageClass"] == volume["storageClass"]
    assert storage_class.inputs["provisioner"] == "ebs.csi.aws.com"
    assert storage_class.inputs["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert storage_class.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    from offline.report import report

    estimate = report.cluster_cost(in_cluster)
    (line,) = [line for line in estimate["lines"] if line["item"] == "In-cluster Prometheus volumes"]
    # 100 GiB + Alertmanager's 2 GiB at $0.08 per GiB-month, in every scenario.
    assert line["hourly"]["idle"] == pytest.approx(102 * 0.08 / 730, abs=1e-4)
    assert line["hourly"]["idle"] == line["hourly"]["fullScale"]


def test_grafana_reads_the_in_cluster_server_and_is_not_exposed(in_cluster):
    chart = values(in_cluster, monitoring.GRAFANA)
    (source,) = chart["datasources"]["datasources.yaml"]["datasources"]
    assert source["url"] == "http://prometheus-server.kube-system.svc.cluster.local"
    assert source["type"] == "prometheus" and source["isDefault"]
    # The core data source needs no plugin, and nothing is fetched from grafana.com at start.
    assert "sigV4Auth" not in source["jsonData"] and chart["plugins"] == []
    assert chart["service"]["type"] == "ClusterIP" and not chart["ingress"]["enabled"]
    assert not [r for r in in_cluster.registrations if r.type == "kubernetes:core/v1:Service"]
    # No role: the in-cluster server needs no AWS credentials.
    assert not [r for r in in_cluster.registrations if r.name.startswith("grafana-query")]


def test_the_sidecar_finds_every_dashboard_config_map(in_cluster):
    sidecar = values(in_cluster, monitoring.GRAFANA)["sidecar"]["dashboards"]
    maps = [r for r in in_cluster.of_type("kubernetes:core/v1:ConfigMap") if "-dashboard-" in r.name]
    assert len(maps) == len(dashboards.DASHBOARDS)
    assert sidecar["enabled"]
    for config_map in maps:
        metadata = config_map.inputs["metadata"]
        assert metadata["namespace"] == sidecar["searchNamespace"]
        assert metadata["labels"][sidecar["label"]] == sidecar["labelValue"]
    # Each dashboard's data source variable lists data sources of the provisioned one's type (the default).
    (source,) = values(in_cluster, monitoring.GRAFANA)["datasources"]["datasources.yaml"]["datasources"]
    for config_map in maps:
        (model,) = [json.loads(text) for text in config_map.inputs["data"].values()]
        (variable,) = [v for v in model["templating"]["list"] if v["name"] == dashboards.DATASOURCE_VARIABLE]
        assert variable["type"] == "datasource" and variable["query"] == source["type"] == "prometheus"


def test_grafanas_admin_password_is_generated_into_the_secret_it_reads(in_cluster):
    chart = values(in_cluster, monitoring.GRAFANA)
    secret = in_cluster.named(monitoring.GRAFANA_ADMIN_SECRET, "kubernetes:core/v1:Secret").inputs
    assert secret["metadata"]["name"] == chart["admin"]["existingSecret"]
    # The generated password keeps the whole data secret: the plan never shows it.
    assert secret["stringData"] == "[secret]"
    assert (chart["admin"]["userKey"], chart["admin"]["passwordKey"]) == ("admin-user", "admin-password")
    password = in_cluster.named("grafana-admin-password", "random:index/randomPassword:RandomPassword").inputs
    assert password["length"] >= 24
    assert "adminPassword" not in chart


def test_prod_grafana_signs_its_queries_to_the_workspace_with_its_pods_role(prod):
    chart = values(prod, monitoring.GRAFANA)
    (source,) = chart["datasources"]["datasources.yaml"]["datasources"]
    # Grafana 13's core Prometheus data source has no SigV4: the workspace is read through the plugin, whose SDK
    # reads these keys (grafana-plugin-sdk-go v0.294.0 backend/http_settings.go) and signs for aps.
    assert source["type"] == "grafana-amazonprometheus-datasource"
    assert source["jsonData"] == {
        "httpMethod": "POST",
        "sigV4Auth": True,
        "sigV4AuthType": "default",
        "sigV4Region": "us-east-2",
    }
    # The plugin, pinned, installed before Grafana serves: the chart joins ``plugins`` with commas into
    # GF_PLUGINS_PREINSTALL_SYNC, and Grafana splits each entry at "@" into id and version
    # (pkg/setting/setting_plugins.go processPreinstallPlugins).
    (entry,) = chart["plugins"]
    assert "," not in entry and entry.split("@") == [source["type"], AMAZON_PROMETHEUS_PLUGIN_VERSION]
    assert "auth" not in chart["grafana.ini"]
    # The plugins Grafana preinstalls unpinned stay as its image ships them: not replaced by grafana.com's newest
    # at every start ([plugins] preinstall_auto_update, pkg/setting/setting_plugins.go readPluginSettings).
    assert chart["grafana.ini"]["plugins"] == {"preinstall_auto_update": False}
    (association,) = [
        a.inputs
        for a in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if a.name.startswith("grafana")
    ]
    assert (association["namespace"], association["serviceAccount"]) == (
        monitoring.GRAFANA_NAMESPACE,
        chart["serviceAccount"]["name"],
    )
    (attachment,) = [
        r.inputs
        for r in prod.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if r.name.startswith("grafana")
    ]
    assert attachment["policyArn"].endswith(":policy/AmazonPrometheusQueryAccess")


def test_dev_as_shipped_declares_no_prometheus_and_no_grafana(dev):
    assert not [r for r in dev.of_type(RELEASE) if r.name in (monitoring.IN_CLUSTER_PROMETHEUS, monitoring.GRAFANA)]


def test_a_grafana_without_a_prometheus_and_a_volume_without_its_server_are_refused():
    message = refused(with_changes(monitoring={"grafana": "in-cluster"}))
    assert "trainium-eks:monitoring.grafana = 'in-cluster'" in message
    assert "trainium-eks:monitoring.prometheus is 'off'" in message
    message = refused(with_changes(monitoring={"prometheus": "managed", "volumeGib": 20}))
    assert "trainium-eks:monitoring.volumeGib is set" in message and "'managed'" in message
    assert "trainium-eks:monitoring.grafana" in refused(with_changes(monitoring={"grafana": "managed"}))
    assert "trainium-eks:monitoring.volumeGib" in refused(
        with_changes(monitoring={"prometheus": "in-cluster", "volumeGib": 5})
    )


def test_in_cluster_needs_no_private_endpoint_and_its_unheard_alerts_are_named():
    from infra.config.rules import advisories
    from infra.validate import parse_stack_config

    config = parse_stack_config(
        with_changes(monitoring={"prometheus": "in-cluster"}, endpointAccess={"private": False, "public": True})
    )
    assert [a for a in advisories(config) if "alertEmails is empty" in a]


def test_every_in_cluster_container_requests_cpu_and_memory_and_has_a_memory_limit(in_cluster):
    # The charts set no resources (prometheus-29.27.0 server.resources and configmapReload.prometheus.resources,
    # alertmanager-1.42.0 resources, grafana 12.11.1 resources and sidecar.resources: all {}): without these the
    # pods are BestEffort, evicted first and never counted by cluster-autoscaler or the system nodes' fit check.
    prometheus = values(in_cluster, monitoring.IN_CLUSTER_PROMETHEUS)
    grafana = values(in_cluster, monitoring.GRAFANA)
    containers = [
        prometheus["server"]["resources"],
        prometheus["configmapReload"]["prometheus"]["resources"],
        prometheus["alertmanager"]["resources"],
        grafana["resources"],
        grafana["sidecar"]["resources"],
    ]
    for resources in containers:
        assert set(resources["requests"]) == {"cpu", "memory"}
        assert "memory" in resources["limits"] and "cpu" not in resources["limits"]
    assert containers == list(monitoring.IN_CLUSTER_RESOURCES.values())
