"""TensorBoard over the experiment logs on FSx.

ClusterIP only by default: `kubectl port-forward svc/tensorboard 6006`. With
`tensorboard.loadBalancer`, an nginx sidecar asks for a password (generated, exported as a
secret output), TensorBoard listens on the pod's localhost only (so nothing reaches it but
through the proxy), the Services point at the proxy, and the load balancer accepts only the
listed source ranges, over HTTPS only, with the ACM certificate every load balancer must name
(workloads/load_balancer_rules.py). The ELB forwards to the node port over HTTP, between its own
security group and the nodes inside the VPC; the proxy serves no TLS of its own.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_random as random

from infra.facts import versions
from infra.specs import system_pods
from workloads import pods
from workloads.kube import declare
from workloads.load_balancer_rules import service_annotations
from workloads.settings import LoadBalancerSettings, TensorBoardSettings

NAME = "tensorboard"
TENSORBOARD_PORT = 6006
PROXY_PORT = 8080
LABELS = {"app.kubernetes.io/name": NAME}
TMP_VOLUME = "tmp"

NGINX_CONF = f"""\
server {{
  listen {PROXY_PORT};
  location / {{
    auth_basic "TensorBoard";
    auth_basic_user_file /etc/nginx/auth/htpasswd;
    proxy_pass http://127.0.0.1:{TENSORBOARD_PORT};
    proxy_read_timeout 900;
  }}
}}
"""


@dataclass(frozen=True)
class TensorBoardLayout:
    namespace: str
    image: str
    claim: str
    core_node_selector: Mapping[str, str]
    settings: TensorBoardSettings
    # The namespace's id, which the pod runs as to read the claim (pods.namespace_pod).
    namespace_id: int


def tmp_mount() -> dict[str, str]:
    return {"name": TMP_VOLUME, "mountPath": "/tmp"}


def serving_port(layout: TensorBoardLayout) -> int:
    """The one port the pod serves on: the proxy's when it is on (TensorBoard then listens on loopback)."""
    return PROXY_PORT if layout.settings.load_balancer is not None else TENSORBOARD_PORT


def network_policy(layout: TensorBoardLayout) -> dict[str, Any]:
    """Anyone may reach the serving port, nothing else. Not narrowed by source: a load balancer's
    traffic arrives from node addresses (kube-proxy forwards NodePort traffic), and the Service's
    loadBalancerSourceRanges already limit who reaches it from outside."""
    return pods.network_policy(NAME, layout.namespace, LABELS, [pods.from_anywhere([serving_port(layout)])])


def htpasswd_line(username: str, password: str, salt: bytes) -> str:
    """An nginx `{SSHA}` entry: base64(sha1(password + salt) + salt)."""
    digest = hashlib.sha1(password.encode() + salt).digest()
    return f"{username}:{{SSHA}}{base64.b64encode(digest + salt).decode()}\n"


# TensorBoard re-walks every log directory's whole tree on each reload (tensorboard 2.18.0
# backend/event_processing/io_wrapper.py GetLogdirSubdirectories, os.walk through tf.io.gfile.walk;
# the Rust data server gets the same interval, data/server_ingester.py `--reload`), by default every
# 5 s (plugins/core/core_plugin.py). The runs' event files lie beside their checkpoints, in names
# only known at run time: BERT and Ray write <run dir>/neuron_tblogs_<start time>_... next to the
# checkpoints (aws-neuron-samples d6e1754 dp_bert_large_hf_pretrain_hdf5.py Logger; neuronx-distributed
# fbac349 tp_zero1_llama_hf_pretrain/logger.py), and NxD Training's exp manager writes into the run
# directory itself, above checkpoints/ (exp_manager.explicit_log_dir, the directory train_setup.sh names:
# neuronx-distributed-training 9169aa0 utils/exp_manager.py, over NeMo's get_log_dir and its
# TensorBoard logger). NxD checkpoints hold a file per tensor, so no directory list avoids walking
# them: a reload every 5 minutes instead of every 5 s keeps that metadata load on Lustre small.
RELOAD_INTERVAL_SECONDS = 300


def logdir_spec(directories: list[str]) -> str:
    """TensorBoard 2.18's `--logdir_spec` (tensorboard/plugins/core/core_plugin.py: comma-separated
    `name:path`), each run group named after its directory: only these are walked."""
    return ",".join(f"{d.rstrip('/').rsplit('/', 1)[-1]}:{d}" for d in directories)


def deployment(layout: TensorBoardLayout) -> dict[str, Any]:
    proxied = layout.settings.load_balancer is not None
    # Behind the proxy TensorBoard binds to the pod's loopback: the kubelet's probes come from
    # outside the pod, so readiness is checked from inside it (the image has curl).
    host = "127.0.0.1" if proxied else "0.0.0.0"
    url = f"http://127.0.0.1:{TENSORBOARD_PORT}/"
    probe = (
        {"exec": {"command": ["curl", "-fsS", "-o", "/dev/null", url]}}
        if proxied
        else {"httpGet": {"path": "/", "port": TENSORBOARD_PORT}}
    )
    tensorboard = {
        "name": NAME,
        "image": layout.image,
        "command": [
            "tensorboard",
            "--logdir_spec",
            logdir_spec(layout.settings.log_dirs),
            "--host",
            host,
            "--port",
            str(TENSORBOARD_PORT),
            "--reload_interval",
            str(RELOAD_INTERVAL_SECONDS),
        ],
        "ports": [{"name": "http", "containerPort": TENSORBOARD_PORT}],
        "readinessProbe": probe,
        # A TensorBoard that stops answering (a huge event file can wedge it) is restarted.
        "livenessProbe": {**probe, "initialDelaySeconds": 30, "periodSeconds": 20, "failureThreshold": 6},
        "resources": copy.deepcopy(system_pods.TENSORBOARD_RESOURCES),
        # It writes only its info file under /tmp (tempfile.gettempdir()), an emptyDir, where HOME is too.
        "env": pods.env_list(pods.IDENTITY_ENV),
        "securityContext": pods.container_security_context(read_only_root=True),
        "volumeMounts": [{**pods.claim_mount("/shared"), "readOnly": True}, tmp_mount()],
    }
    containers: list[dict[str, Any]] = [tensorboard]
    volumes: list[dict[str, Any]] = [pods.claim_volume(layout.claim), {"name": TMP_VOLUME, "emptyDir": {}}]
    if layout.settings.load_balancer is not None:
        containers.append(
            {
                "name": "auth-proxy",
                "image": versions.NGINX_UNPRIVILEGED_IMAGE,
                "ports": [{"name": "proxy", "containerPort": PROXY_PORT}],
                "readinessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 10},
                "livenessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 20, "failureThreshold": 3},
                "resources": copy.deepcopy(system_pods.TENSORBOARD_PROXY_RESOURCES),
                # nginx-unprivileged keeps its pid file and temporary files in /tmp and reads the
                # rest (nginx/docker-nginx-unprivileged Dockerfile-alpine-slim.template at 8b44229,
                # stable 1.30.4), so it runs as any user, the namespace's id here; its entrypoint
                # leaves a read-only conf.d alone.
                "securityContext": pods.container_security_context(read_only_root=True),
                "volumeMounts": [
                    {"name": "proxy-config", "mountPath": "/etc/nginx/conf.d", "readOnly": True},
                    {"name": "proxy-auth", "mountPath": "/etc/nginx/auth", "readOnly": True},
                    tmp_mount(),
                ],
            }
        )
        volumes += [
            {
                "name": "proxy-config",
                "secret": {"secretName": f"{NAME}-proxy", "items": [{"key": "default.conf", "path": "default.conf"}]},
            },
            {
                "name": "proxy-auth",
                "secret": {"secretName": f"{NAME}-proxy", "items": [{"key": "htpasswd", "path": "htpasswd"}]},
            },
        ]
    # As the namespace's id, the one user its directory lets read (the proxy too: one user per pod).
    metadata = {"name": NAME, "namespace": layout.namespace, "labels": LABELS}
    spec = pods.system_deployment(
        metadata,
        LABELS,
        layout.core_node_selector,
        run_as_user=layout.namespace_id,
        containers=containers,
        volumes=volumes,
    )
    # One core node keeps less CPU free than TensorBoard asks (the plan prints what the system pods ask of it): a
    # rolling update's surge pod would wait there until cluster-autoscaler added a second core node for it. A
    # viewer can be down for the seconds a restart takes, so the old pod goes first, whatever the group's size:
    # a rolling update with no surge, not `Recreate`. A Deployment created without a strategy holds the API
    # server's defaulted rollingUpdate, which a server-side apply of `type: Recreate` does not own and so leaves,
    # and validation then refuses ("spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy
    # `type` is 'Recreate'"; pulumi/pulumi-kubernetes#2843, this provider applies server-side).
    spec["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    # Its /tmp is an emptyDir; without this its node would never be drained (infra/specs/system_pods.py).
    spec["spec"]["template"]["metadata"]["annotations"] = dict(system_pods.SAFE_TO_EVICT)
    return spec


def cluster_service(layout: TensorBoardLayout) -> dict[str, Any]:
    target = "proxy" if layout.settings.load_balancer is not None else "http"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": layout.namespace, "labels": LABELS},
        # With the proxy on, in-cluster clients go through it too.
        "spec": {
            "type": "ClusterIP",
            "selector": LABELS,
            "ports": [{"name": "http", "port": TENSORBOARD_PORT, "targetPort": target}],
        },
    }


def load_balancer_service(layout: TensorBoardLayout, lb: LoadBalancerSettings) -> dict[str, Any]:
    # HTTPS on 443 only: the ELB terminates TLS with the certificate every load balancer must name.
    port = {"name": "https", "port": 443}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{NAME}-public",
            "namespace": layout.namespace,
            "labels": LABELS,
            "annotations": {**service_annotations(lb), "pulumi.com/skipAwait": "true"},
        },
        # Only the proxy port is exposed; TensorBoard itself stays behind the password.
        "spec": {
            "type": "LoadBalancer",
            "selector": LABELS,
            "loadBalancerSourceRanges": list(lb.allowed_cidrs),
            "ports": [{**port, "targetPort": "proxy"}],
        },
    }


@dataclass(frozen=True)
class TensorBoardArgs:
    layout: TensorBoardLayout


class TensorBoard(pulumi.ComponentResource):
    """``password`` is the generated basic-auth password when a load balancer is on, else None."""

    def __init__(self, name: str, args: TensorBoardArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("trainium:workloads:TensorBoard", name, None, opts)
        layout, lb = args.layout, args.layout.settings.load_balancer
        self.password: pulumi.Output[str] | None = None
        proxy: list[pulumi.Resource] = []
        if lb is not None:
            password = random.RandomPassword(
                f"{name}-password", length=24, special=False, opts=pulumi.ResourceOptions(parent=self)
            )
            salt = random.RandomString(
                f"{name}-salt", length=8, special=False, opts=pulumi.ResourceOptions(parent=self)
            )
            htpasswd: pulumi.Output[str] = pulumi.Output.secret(
                pulumi.Output.all(password.result, salt.result).apply(
                    lambda ps: htpasswd_line(lb.username, ps[0], ps[1].encode())
                )
            )
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"{NAME}-proxy", "namespace": layout.namespace},
                "type": "Opaque",
                "stringData": {"default.conf": NGINX_CONF, "htpasswd": htpasswd},
            }
            proxy = [declare(secret, self)]
            self.password = password.result
        policy = declare(network_policy(layout), self)
        self.deployment = declare(deployment(layout), self, [*proxy, policy])
        declare(cluster_service(layout), self)
        if lb is not None:
            declare(load_balancer_service(layout, lb), self, [self.deployment])
        self.register_outputs({})
