"""The EFA exporter (infra/node_agents/efa_exporter.py) as the prod plan ships it: the ConfigMap's file run with the
DaemonSet's own command against a fake /sys in tmp_path, scraped over HTTP, every series name and label held to the
amazonefa collector EfaTrafficAbsent was written against and to the EFA kernel driver's counter names."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.specs import goodput_rules, node_metrics
from infra.specs.node_template import EFA_PRESENT_LABEL
from tests import promtool
from tests.test_progress_exporter import free_port

# aws-samples/awsome-distributed-training 054d5d4 4.validation_and_observability/3.efa-node-exporter/
# amazon_efa_linux.go: the collector's `descriptions`, each served as node_amazonefa_<name>{device, port}
# (prometheus.BuildFQName("node", "amazonefa", name)), and node_amazonefa_info{device}.
AMAZONEFA_COLLECTOR = {
    "alloc_pd_err",
    "alloc_ucontext_err",
    "cmds_err",
    "completed_cmds",
    "create_ah_err",
    "create_cq_err",
    "create_qp_err",
    "keep_alive_rcvd",
    "lifespan",
    "mmap_err",
    "no_completion_cmds",
    "rdma_read_bytes",
    "rdma_read_resp_bytes",
    "rdma_read_wr_err",
    "rdma_read_wrs",
    "rdma_write_bytes",
    "rdma_write_recv_bytes",
    "rdma_write_wr_err",
    "rdma_write_wrs",
    "recv_bytes",
    "recv_wrs",
    "reg_mr_err",
    "rx_bytes",
    "rx_drops",
    "rx_pkts",
    "send_bytes",
    "send_wrs",
    "submitted_cmds",
    "tx_bytes",
    "tx_pkts",
}
# amzn/amzn-drivers efa_linux_3.1.0 kernel/linux/efa/src/efa_verbs.c: EFA_DEFINE_PORT_STATS (each port's
# hw_counters) and EFA_DEFINE_DEVICE_STATS (the device's own).
EFA_PORT_STATS = {
    "tx_bytes",
    "tx_pkts",
    "rx_bytes",
    "rx_pkts",
    "rx_drops",
    "send_bytes",
    "send_wrs",
    "recv_bytes",
    "recv_wrs",
    "rdma_read_wrs",
    "rdma_read_bytes",
    "rdma_read_wr_err",
    "rdma_read_resp_bytes",
    "rdma_write_wrs",
    "rdma_write_bytes",
    "rdma_write_wr_err",
    "rdma_write_recv_bytes",
    "retrans_bytes",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
}
EFA_DEVICE_STATS = {
    "submitted_cmds",
    "completed_cmds",
    "cmds_err",
    "no_completion_cmds",
    "keep_alive_rcvd",
    "alloc_pd_err",
    "create_qp_err",
    "create_cq_err",
    "reg_mr_err",
    "alloc_ucontext_err",
    "create_ah_err",
    "mmap_err",
}
SERVED = {f"node_amazonefa_{n}" for n in EFA_PORT_STATS} | {"node_amazonefa_info"}


def test_the_names_are_the_drivers_port_counters_as_the_collector_names_them():
    spec = (Path(node_metrics.__file__).parents[1] / "node_agents" / node_metrics.EFA_EXPORTER_FILE).read_text()
    listed = re.search(r"PORT_COUNTERS = \(\n(.*?)\n\)", spec, re.DOTALL)
    assert listed and set(re.findall(r'"(\w+)"', listed.group(1))) == EFA_PORT_STATS
    # Every counter of a port the collector serves is served, under its name; what it names beyond those is the
    # RDMA core's lifespan and the device-wide statistics.
    assert AMAZONEFA_COLLECTOR - EFA_PORT_STATS == EFA_DEVICE_STATS | {"lifespan"}
    assert goodput_rules.EFA_TRANSMITTED in SERVED


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """Two EFA devices as the host's /sys shows them: a counter per file, one unreadable, one not a number,
    the RDMA core's lifespan and a name no driver writes."""
    root = tmp_path / "sys"
    for device, port, counters in (
        ("rdmap16s27", "1", {"tx_bytes": 1000, "rx_bytes": 2000, "rx_drops": 3, "retrans_timeout_events": 4}),
        ("rdmap32s27", "1", {"tx_bytes": 5, "rdma_read_wr_err": 6}),
    ):
        counters_dir = root / "class" / "infiniband" / device / "ports" / port / "hw_counters"
        counters_dir.mkdir(parents=True)
        for name, value in counters.items():
            (counters_dir / name).write_text(f"{value}\n")
        (counters_dir / "lifespan").write_text("10\n")
        (counters_dir / "made_up_counter").write_text("7\n")
    broken = root / "class" / "infiniband" / "rdmap32s27" / "ports" / "1" / "hw_counters"
    (broken / "rx_bytes").write_text("N/A\n")
    (broken / "tx_pkts").mkdir()  # a read fails
    return root


def efa_exporter_objects(result) -> dict[str, dict]:
    """The EFA exporter's objects a stack declares, by kind (its ConfigMap's name carries a digest)."""
    return {
        r.inputs["kind"]: r.inputs
        for r in result.registrations
        if r.type.startswith("kubernetes:")
        and r.inputs.get("metadata", {}).get("labels", {}).get(node_metrics.NAME_LABEL) == node_metrics.EFA_EXPORTER
    }


@pytest.fixture
def efa_objects(prod) -> dict[str, dict]:
    return efa_exporter_objects(prod)


@pytest.fixture
def exporter(tmp_path: Path, sysfs: Path, efa_objects) -> Iterator[str]:
    # The container's own command on the ConfigMap's file, with the pod's mounts (the script's directory, the
    # host's /sys) moved under the test's tree and the port to a free one.
    pod = efa_objects["DaemonSet"]["spec"]["template"]["spec"]
    python, script, _port, host_sys = pod["containers"][0]["command"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    assert python == "python3" and mounts[host_sys] == "sys" and script.startswith(next(iter(mounts)))
    (tmp_path / "opt").mkdir()
    for name, text in efa_objects["ConfigMap"]["data"].items():
        (tmp_path / "opt" / name).write_text(text)
    port = free_port()
    command = [sys.executable, str(tmp_path / "opt" / Path(script).name), str(port), str(sysfs)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/")
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_each_ports_counters_are_served_with_the_collectors_labels(exporter):
    text = urllib.request.urlopen(exporter, timeout=5).read().decode()
    samples = {line.rsplit(" ", 1)[0]: line.rsplit(" ", 1)[1] for line in text.splitlines() if line[:1] != "#"}
    first, second = 'device="rdmap16s27",port="1"', 'device="rdmap32s27",port="1"'
    assert samples == {
        'node_amazonefa_info{device="rdmap16s27"}': "1",
        'node_amazonefa_info{device="rdmap32s27"}': "1",
        f"node_amazonefa_tx_bytes{{{first}}}": "1000",
        f"node_amazonefa_tx_bytes{{{second}}}": "5",
        f"node_amazonefa_rx_bytes{{{first}}}": "2000",
        f"node_amazonefa_rx_drops{{{first}}}": "3",
        f"node_amazonefa_rdma_read_wr_err{{{second}}}": "6",
        f"node_amazonefa_retrans_timeout_events{{{first}}}": "4",
    }
    assert {n.split("{")[0] for n in samples} <= SERVED
    assert "# TYPE node_amazonefa_tx_bytes counter" in text and "# TYPE node_amazonefa_info gauge" in text
    # Prometheus' own parser takes it. Its lint wants counters named *_total, which the collector's names (and so
    # the alert's) are not: only that complaint is accepted.
    checked = promtool.run("check", "metrics", stdin=text)
    complaints = [line for line in (checked.stdout + checked.stderr).splitlines() if line.strip()]
    assert all('counter metrics should have "_total" suffix' in line for line in complaints), complaints


def test_a_node_with_no_efa_device_serves_nothing_and_other_paths_are_not_found(tmp_path, exporter, sysfs):
    import shutil
    import urllib.error

    shutil.rmtree(sysfs / "class")
    assert urllib.request.urlopen(exporter, timeout=5).read().decode() == "\n"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(exporter.replace("/metrics", "/"), timeout=5)
    assert refused.value.code == 404


def test_the_daemon_set_reads_the_hosts_sys_read_only_on_efa_nodes_only(efa_objects, dev):
    pod = efa_objects["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {EFA_PRESENT_LABEL: "true"}
    (host,) = [v for v in pod["volumes"] if "hostPath" in v]
    assert host["hostPath"]["path"] == "/sys"
    (container,) = pod["containers"]
    assert all(m["readOnly"] for m in container["volumeMounts"])
    assert container["securityContext"]["readOnlyRootFilesystem"] and not container["securityContext"]["privileged"]
    assert pod["securityContext"]["runAsNonRoot"] and not pod.get("hostNetwork")
    # Pulled through the cluster's cache, the pinned Python image's tag.
    assert container["image"].endswith("/ecr-public/docker/library/python:3.11.16-slim-trixie")
    assert not efa_exporter_objects(dev)


def test_a_changed_script_is_a_new_config_map_and_a_new_pod_template(efa_objects):
    # The DaemonSet mounts the ConfigMap declared beside it, named after the file it holds.
    (volume,) = [v for v in efa_objects["DaemonSet"]["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    files = efa_objects["ConfigMap"]
    assert volume["configMap"]["name"] == files["metadata"]["name"]
    assert files["metadata"]["name"] == f"{node_metrics.EFA_EXPORTER}-{node_metrics.files_digest(files['data'])}"
    # One changed line of the script: a ConfigMap of another name (the provider creates it before deleting the old
    # one) and a pod template that differs (the DaemonSet rolls its pods onto it); the same script, the same objects.
    script = files["data"][node_metrics.EFA_EXPORTER_FILE]
    image = efa_objects["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["image"]
    before = node_metrics.efa_exporter(image, script)
    after = node_metrics.efa_exporter(image, script.replace('PREFIX = "node_amazonefa_"', 'PREFIX = "node_efa_"'))
    assert script != after[0]["data"][node_metrics.EFA_EXPORTER_FILE]
    assert before == node_metrics.efa_exporter(image, script)
    assert before[0]["metadata"]["name"] != after[0]["metadata"]["name"]
    assert before[1]["spec"]["template"] != after[1]["spec"]["template"]
    (mounted,) = [v for v in after[1]["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert mounted["configMap"]["name"] == after[0]["metadata"]["name"]
    # The objects' other names do not move: the DaemonSet is updated in place, the ConfigMap one resource replaced.
    assert before[1]["metadata"] == after[1]["metadata"]
    assert before[0]["metadata"]["labels"] == after[0]["metadata"]["labels"]


def test_the_config_map_is_one_resource_whatever_its_content(prod):
    # Its resource's name is the agent's, not the object's: a new digest replaces the resource (pulumi-kubernetes
    # replaces on a new metadata.name, creating the new object first) rather than declaring a second one.
    (resource,) = [
        r
        for r in prod.registrations
        if r.type == "kubernetes:core/v1:ConfigMap" and r.name.endswith(f"-configmap-{node_metrics.EFA_EXPORTER}")
    ]
    assert resource.inputs["metadata"]["name"].startswith(f"{node_metrics.EFA_EXPORTER}-")


def test_the_probes_ask_the_server_and_read_no_counter(tmp_path, exporter, sysfs, efa_objects):
    import os

    # A counter file whose read never returns (a FIFO nobody writes): the probes' path answers all the same, so it
    # reads no counter; the path is the one both probes of the DaemonSet ask, on the port it names.
    (container,) = efa_objects["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    probes = [container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]]
    assert all(p == {"path": node_metrics.EFA_HEALTH_PATH, "port": container["ports"][0]["name"]} for p in probes)
    os.mkfifo(sysfs / "class" / "infiniband" / "rdmap16s27" / "ports" / "1" / "hw_counters" / "rx_pkts")
    answer = urllib.request.urlopen(exporter.replace("/metrics", node_metrics.EFA_HEALTH_PATH), timeout=5)
    assert answer.status == 200 and answer.read() == b"ok\n"
