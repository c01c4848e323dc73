"""Dynamic Resource Allocation (DRA) of Neuron devices and EFA interfaces: where it is served, from
which Kubernetes version, and the names its drivers publish. The rules that read these live in
infra/config/rules.py (``device_allocation_problems``); docs/dra.md explains the choice.
"""

from __future__ import annotations

# The instance types the Neuron DRA driver serves. Three sources disagree:
# - the Neuron DRA documentation (aws-neuron/aws-neuron-sdk 81ce03a, deploy/eks/dra.rst, 2026-06-05):
#   prerequisite "Trn2.48xlarge launched with K8s version 1.34.2+", examples for trn2.48xlarge and
#   trn2u.48xlarge (Example 3), attributes (LNC per claim, devicegroup EFA alignment) documented for trn2;
# - the EKS user guide (awsdocs/amazon-eks-user-guide 43d79bdb, latest/ug/ml/device-management-neuron.adoc):
#   "Trainium or Inferentia2" nodes;
# - the chart's DaemonSet affinity (aws-neuron/neuron-helm-charts charts/neuron-helm-chart 1.8.0 cea92c38
#   templates/_helpers.tpl neuron-dra-driver.affinity): every `neuronInstances` type except inf*/ml.inf*,
#   trn1 included.
# The Neuron documentation wins: it is the driver owner's statement of support and the only source that
# documents per-claim LNC and EFA alignment, for trn2 only. An inf2 group would get no driver at all (the
# chart drops inf types), and on trn1 the driver may run but LNC does not apply.
DRA_INSTANCE_TYPES = ("trn2.48xlarge", "trn2u.48xlarge")
DRA_SOURCES = (
    "Neuron DRA docs (aws-neuron-sdk deploy/eks/dra.rst): trn2.48xlarge and trn2u.48xlarge; EKS user guide "
    "device-management-neuron: 'Trainium or Inferentia2'; the Neuron chart's DRA DaemonSet affinity: every Neuron "
    "type but inf*. The Neuron docs win: they are the driver owner's, and the only ones documenting per-claim LNC "
    "and EFA alignment"
)

# resource.k8s.io/v1, the API the driver's DeviceClass and every claim use, exists from Kubernetes 1.34
# (kubernetes/api kubernetes-1.34.0 resource/v1). The Neuron driver needs a 1.34+ control plane and a node
# of 1.34.2 or later: "We do not support Node AMI for 1.34.0 or 1.34.1 since it had a regression in DRA"
# (dra.rst, "What Kubernetes versions are supported?", kubernetes/kubernetes#133920).
DRA_MIN_KUBERNETES = "1.34"
DRA_MIN_NODE_VERSION = (1, 34, 2)
# The cluster-autoscaler release this project runs on 1.34 (v1.34.2, chart 9.53.0) simulates DRA claims
# only with --enable-dynamic-resource-allocation, off by default (kubernetes/autoscaler
# cluster-autoscaler-1.34.2 cluster-autoscaler/config/flags/flags.go:227), and chart 9.53.0 grants no
# resource.k8s.io RBAC; from 1.35 the release locks it on (FAQ.md at cluster-autoscaler-1.35.2). So a
# cluster whose groups cluster-autoscaler scales needs 1.35 for DRA.
DRA_MIN_KUBERNETES_WITH_AUTOSCALER = "1.35"
# aws-dranet, the EFA DRA driver: "Kubernetes 1.35+" (aws/eks-charts stable/aws-dranet 1.0.0 README.md,
# Prerequisites), while the EKS user guide's device-management-efa says 1.34: the chart's own line is what
# its release was built against.
DRANET_MIN_KUBERNETES = "1.35"

# The DeviceClasses the two drivers' charts create (neuron-helm-charts templates/dra-driver/
# dra-driver-deviceclass.yaml; eks-charts stable/aws-dranet 1.0.0 values.yaml deviceClass.name).
NEURON_DEVICE_CLASS = "neuron.aws.com"
NEURON_DRIVER = "neuron.aws.com"
EFA_DEVICE_CLASS = "efa.networking.k8s.aws"
# The logical NeuronCore setting a claim asks for (dra.rst, Example 2: opaque NeuronConfig
# `logicalNeuronCore`): 2, Trn2's default (about-neuron/arch/neuron-features/logical-neuroncore-config.rst),
# so a job sees the same cores under DRA as under the device plugin.
DEFAULT_LOGICAL_NEURON_CORE = 2
