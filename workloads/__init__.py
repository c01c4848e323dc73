"""Training workloads layered on the cluster stack (a Pulumi project of its own)."""
