"""What keeps a pod from the node's identity: the instance metadata service's hop limit, the
node role's policies, and the egress rule every pod in a training namespace carries.

Pure values and functions, shared by the launch templates (infra/components/launch_template.py),
the cluster component, the NetworkPolicies and the policy pack, so a node class declared
elsewhere (Karpenter's EC2NodeClass) takes the same hop limit from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infra.specs.lustre_nids import LUSTRE_PORTS

# One hop: the metadata service answers the node itself and host-network pods (the EKS Pod
# Identity agent, the CloudWatch agent, the VPC CNI's aws-node, kube-proxy), and no pod on the pod
# network, whose packets cross one more hop (the veth) and are dropped when the TTL runs out
# (EC2 user guide, "Instance metadata access considerations"; EKS best practices, "Restrict access
# to the instance profile assigned to the worker node"). Training pods take their AWS credentials
# from EKS Pod Identity (169.254.170.23), not from the instance.
IMDS_HOP_LIMIT = 1
IMDS_TOKENS = "required"  # IMDSv2 only
# The IPv6 endpoint (fd00:ec2::254) stays off: the launch templates leave httpProtocolIpv6 disabled,
# so there is no second address to fence.
IMDS_IPV6 = "disabled"
IMDS_IPV4_CIDR = "169.254.169.254/32"

WORKER_POLICY = "AmazonEKSWorkerNodePolicy"
REGISTRY_POLICY = "AmazonEC2ContainerRegistryReadOnly"
# Session Manager (neuron-top / neuron-ls on a node without SSH). Its managed policy also allows
# ssm:GetParameter(s) on every parameter of the account, to every process that reaches the node's
# credentials: off unless a stack asks for it (features.sessionManager).
SESSION_MANAGER_POLICY = "AmazonSSMManagedInstanceCore"
# The VPC CNI's permissions (ENI create/attach/modify/delete on "*") go to the aws-node service
# account through EKS Pod Identity, never to the node role.
CNI_POLICY = "AmazonEKS_CNI_Policy"
CNI_NAMESPACE = "kube-system"
CNI_SERVICE_ACCOUNT = "aws-node"


def node_policies(session_manager: bool) -> tuple[str, ...]:
    """The managed policies of the node role: what the kubelet and image pulls need, and Session
    Manager only when switched on."""
    return (WORKER_POLICY, REGISTRY_POLICY, *((SESSION_MANAGER_POLICY,) if session_manager else ()))


TCP_PORTS = (1, 65535)


def ports_except(excluded: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """The TCP port ranges left of 1-65535 once ``excluded`` (sorted, inclusive ranges) are taken out."""
    ranges, start = [], TCP_PORTS[0]
    for low, high in excluded:
        if start < low:
            ranges.append((start, low - 1))
        start = high + 1
    if start <= TCP_PORTS[1]:
        ranges.append((start, TCP_PORTS[1]))
    return ranges


def _port(protocol: str, low: int, high: int) -> dict[str, Any]:
    return {"protocol": protocol, "port": low, **({"endPort": high} if high != low else {})}


def egress_except_instance_metadata_and_lustre(file_system_addresses: Sequence[str] = ()) -> dict[str, Any]:
    """An egress rule to everywhere but the instance metadata service and ``file_system_addresses``
    (the training file system's servers: FSx for Lustre's, or the EFS mount targets of `storage.kind: efs`),
    on every UDP port and every TCP port but Lustre's.

    NetworkPolicy is an allow-list: a policy with policyTypes [Egress] limits the pods it selects
    to the union of its rules and every other Egress policy's. So this rule alone leaves DNS, the
    API server, S3, ECR, Hugging Face, peers and the Pod Identity agent (169.254.170.23) reachable,
    and 169.254.169.254 not. The file system trusts the address and the user ids a client sends: a pod
    that spoke LNet to the servers itself would be believed, as any namespace's id and, from a core
    node (exempt from root squash), as root. So the servers' addresses are left out on every port
    (the agent turns each `except` into a deny-all entry and reads addresses exactly), and Lustre's
    ports everywhere, for file systems the stack does not know (the fsx-lustre StorageClass's): the
    agent reads a TCP port at a fixed offset past the IP header (aws/aws-network-policy-agent v1.2.7
    pkg/ebpf/c/tc.v4egress.bpf.c), which IP options would shift, so the ports alone are the weaker
    wall. The mounts are the kernel's, made from the FSx CSI node plugin in kube-system, which this
    rule does not select. EFS alike: an NFS client that reaches a mount target without an access point
    is trusted with any UID it sends, root included, so no pod may reach one on any port (NFS, 2049,
    included); the EFS node plugin's mounts and their TLS proxy run in the node's network namespace
    (hostNetwork), which no NetworkPolicy selects, so every claim still mounts. The agent honours endPort (pkg/utils/utils.go ComputeTrieValue). Other
    protocols (ICMP, SCTP) are not admitted.
    """
    tcp = [_port("TCP", low, high) for low, high in ports_except(LUSTRE_PORTS)]
    blocked = [IMDS_IPV4_CIDR, *(f"{address}/32" for address in sorted(file_system_addresses))]
    return {
        "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": blocked}}],
        "ports": [*tcp, _port("UDP", *TCP_PORTS)],
    }


METADATA_POLICY_NAME = "deny-instance-metadata"


def metadata_wall(namespace: str, file_system_addresses: Sequence[str] = ()) -> dict[str, Any]:
    """The second wall after the hop limit: every pod of the namespace (podSelector {}) may send
    anywhere but the instance metadata service and the file system's servers, and to no Lustre port.
    No other policy of ours opens egress, so the union stays closed to them. (Named for its first
    purpose: a new name would replace the policy, leaving egress open in between.)"""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": METADATA_POLICY_NAME, "namespace": namespace},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [egress_except_instance_metadata_and_lustre(file_system_addresses)],
        },
    }
