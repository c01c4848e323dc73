"""Small helpers for Kubernetes resources declared through the cluster's provider."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.node_template import NEURON_TAINT
from infra.versions import ChartPin

# Tolerating the taint every accelerator node carries.
NEURON_TOLERATION = {"key": NEURON_TAINT.key, "operator": "Exists", "effect": NEURON_TAINT.effect}
CORE_NODE_SELECTOR = {"role": "core"}


def helm_release(
    name: str,
    pin: ChartPin,
    namespace: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
    *,
    create_namespace: bool = False,
) -> k8s.helm.v3.Release:
    """A pinned Helm release. helm.v3.Release (not helm.v4.Chart) so charts' hooks run."""
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=pin.chart,
        version=pin.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=pin.repository) if pin.repository else None,
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        # Wait for the workloads to be ready so dependents (CRs, PVCs) find CRDs and webhooks.
        atomic=True,
        cleanup_on_fail=True,
        timeout=900,
        opts=opts,
    )
