"""Accelerator device plugins: Neuron (devices, cores, health) and EFA."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.kube import NEURON_TOLERATION, helm_release
from infra.versions import CHARTS

EFA_NODE_SELECTOR = {"vpc.amazonaws.com/efa.present": "true"}


def neuron_values(scheduler_extension: bool) -> dict[str, Any]:
    # Tolerations spelled out (the chart's defaults include the Neuron taint today) so a
    # chart upgrade that changes them cannot silently strand the plugins off Trainium nodes.
    return {
        "devicePlugin": {
            "enabled": True,
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, NEURON_TOLERATION],
        },
        # Reports Neuron hardware errors as node conditions so broken nodes are seen and replaced.
        "npd": {"enabled": True, "tolerations": [NEURON_TOLERATION, {"operator": "Exists", "effect": "NoExecute"}]},
        # The chart refuses the scheduler extension without the device plugin, which is always on here.
        "scheduler": {"enabled": scheduler_extension},
    }


def efa_values() -> dict[str, Any]:
    # The chart's default tolerations are empty: without one it never lands on Trainium nodes.
    return {"nodeSelector": EFA_NODE_SELECTOR, "tolerations": [NEURON_TOLERATION]}


class DevicePlugins(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        neuron: bool,
        efa: bool,
        neuron_scheduler_extension: bool,
        provider: k8s.Provider,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("trainium:infra:DevicePlugins", name, None, opts)
        on_cluster = pulumi.ResourceOptions(parent=self, provider=provider)
        if neuron:
            helm_release("neuron", CHARTS["neuron"], "kube-system", neuron_values(neuron_scheduler_extension), on_cluster)
        if efa:
            helm_release("aws-efa-k8s-device-plugin", CHARTS["efa-device-plugin"], "kube-system", efa_values(), on_cluster)
        self.register_outputs({})
