"""The EFA devices' port counters as Prometheus metrics, under the names and labels of the amazonefa collector of
the EFA node exporter (aws-samples/awsome-distributed-training 054d5d4,
4.validation_and_observability/3.efa-node-exporter/amazon_efa_linux.go): ``node_amazonefa_<counter>{device,
port}`` for each file of /sys/class/infiniband/<device>/ports/<port>/hw_counters, and ``node_amazonefa_info
{device}`` = 1 for each device. Standard library only: this file's text is what the exporter pod runs
(``python3 efa_exporter.py <port> <sysfs>``, from a ConfigMap, with the host's /sys mounted read-only at
<sysfs>; infra/specs/node_metrics.py declares it), and the tests run the same file the same way.

Why not that collector itself: it is a patched node-exporter build with no published image; stock
node-exporter's infiniband collector reads the InfiniBand counters, not EFA's (infra/specs/goodput_rules.py).

Which counters: the EFA kernel driver's port statistics (amzn/amzn-drivers efa_linux_3.1.0,
kernel/linux/efa/src/efa_verbs.c EFA_DEFINE_PORT_STATS, the names efa_alloc_hw_port_stats hands the RDMA core
for each port), read from the port's hw_counters directory as the collector reads them
(class_amazon_efa.go parseAmazonEfaCounters). The collector knows all of them but the five the driver added
since (retrans_*, unresponsive_remote_events, impaired_remote_conn_events), which are served under the same
naming rule. Not served: ``lifespan``, the RDMA core's file beside the counters (the driver passes it
RDMA_HW_STATS_DEFAULT_LIFESPAN: how long a value read is reused), which the collector passes on as a counter;
and the device-wide statistics (EFA_DEFINE_DEVICE_STATS: cmds_err, ...), which the driver gives the device,
not its ports, and which the collector names but never reads. A counter a driver does not publish, or whose
read fails, is left out.
"""

from __future__ import annotations

import http.server
import os
import sys
import time
from typing import Any

PORT_COUNTERS = (
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
)
PREFIX = "node_amazonefa_"
# What the pod's probes ask: an answer from the server that reads no counter (each read of a port's counters makes
# the driver query the device).
HEALTH_PATH = "/healthz"
INFO = f"{PREFIX}info"


def _listing(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _counter(path: str) -> int | None:
    """A counter file's value, None if unreadable. The RDMA core prints it as ``%llu\n`` (torvalds/linux
    drivers/infiniband/core/sysfs.c as stored at 0147ebcf, print_hw_stat)."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def sample(sysfs: str) -> list[tuple[str, dict[str, str], int]]:
    """Every device's info and every port counter under ``<sysfs>/class/infiniband``."""
    out: list[tuple[str, dict[str, str], int]] = []
    devices = os.path.join(sysfs, "class", "infiniband")
    for device in _listing(devices):
        out.append((INFO, {"device": device}, 1))
        ports = os.path.join(devices, device, "ports")
        for port in _listing(ports):
            if not port.isdigit():
                continue
            counters = os.path.join(ports, port, "hw_counters")
            for name in PORT_COUNTERS:
                value = _counter(os.path.join(counters, name))
                if value is not None:
                    out.append((PREFIX + name, {"device": device, "port": port}, value))
    return out


def exposition(samples: list[tuple[str, dict[str, str], int]]) -> str:
    """Prometheus' text format 0.0.4: each family's HELP and TYPE once, then its samples."""
    lines: list[str] = []
    families = [(INFO, "gauge", "Non-numeric data from /sys/class/infiniband/<device>, value is always 1.")]
    families += [(PREFIX + n, "counter", f"EFA port counter hw_counters/{n}.") for n in PORT_COUNTERS]
    for name, kind, text in families:
        mine = [(labels, value) for n, labels, value in samples if n == name]
        if not mine:
            continue
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for labels, value in mine:
            body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{body}}} {value}")
    return "\n".join(lines) + "\n"


def handler(sysfs: str) -> Any:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path not in ("/metrics", HEALTH_PATH):
                self.send_error(404)
                return
            body = exposition(sample(sysfs)).encode() if self.path == "/metrics" else b"ok\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every 30 s: no access log
            pass

    return Handler


def main(argv: list[str]) -> int:  # pragma: no cover - runs in the pod; tests run it as a process
    port, sysfs = int(argv[0]), argv[1]
    server = http.server.ThreadingHTTPServer(("", port), handler(sysfs))
    print(f"serving {sysfs}/class/infiniband on :{port}/metrics at {time.ctime()}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
