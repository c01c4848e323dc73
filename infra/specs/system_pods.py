"""Requests and limits of the pods the workload stacks run on the system nodes.

Declared here, once: each workload module puts these in its pod spec, and the cluster stack's fit
check (infra/specs/system_capacity.py) counts the same figures, so the two cannot drift apart. They
live in infra because the workload stacks import infra, never the other way round.
"""

from __future__ import annotations

# On the core pods that keep an emptyDir (TensorBoard's /tmp, metrics-server's tmpVolume, the FSx controller's
# socket-dir): without it cluster-autoscaler never drains their node, because skip-nodes-with-local-storage is on
# by default (kubernetes/autoscaler cluster-autoscaler-1.35.2 config/flags/flags.go), so a second core node it
# added for a moment would stay. Its safetoevict rule is read before the local-storage and not-replicated ones
# (simulator/drainability/rules/rules.go Default); each of these pods has a controller that starts it again
# on the node that stays, and their budgets still bound the eviction.
SAFE_TO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
# The gang watchdog's Deployment, one per workload stack that runs a Volcano Job or MPIJob
# (workloads/gang_watchdog.py): a polling loop over the API.
GANG_WATCHDOG_RESOURCES = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
# A step gate's Job, one per gated step while it runs (workloads/step_gate.py): it reads one status.
STEP_GATE_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
# TensorBoard (workloads/tensorboard_viewer.py), and its password proxy, which runs only with a load balancer.
TENSORBOARD_RESOURCES = {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "8Gi"}}
TENSORBOARD_PROXY_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "128Mi"},
}
# The command shell (workloads/data_staging.py cmd_shell_pod): heavy work belongs in a Job.
CMD_SHELL_RESOURCES = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
# The training-progress exporter (workloads/progress.py), which a Prometheus scrapes.
PROGRESS_EXPORTER_RESOURCES = {
    "requests": {"cpu": "20m", "memory": "64Mi"},
    "limits": {"cpu": "500m", "memory": "256Mi"},
}
