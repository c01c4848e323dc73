"""What a load balancer in front of a workload may be: who may reach it, and over what.

The cluster runs no AWS Load Balancer Controller, so a Service of type LoadBalancer is served
by the Kubernetes cloud provider for AWS (a Classic ELB). Its rules, from
kubernetes/cloud-provider-aws v1.34 `pkg/providers/v1/aws.go`:
- ``loadBalancerSourceRanges`` become the ELB security group's `CidrIp` ranges: IPv4 only,
  each parsed as a CIDR (k8s.io/cloud-provider `GetLoadBalancerSourceRanges`), so a bare
  address or an IPv6 range makes the Service fail for ever;
- ``aws-load-balancer-internal`` anything but "false" (or unset) makes it internal;
- ``aws-load-balancer-ssl-cert`` on the ports in ``aws-load-balancer-ssl-ports`` makes an
  HTTPS listener (with backend protocol ``http``) that terminates TLS with that certificate.
Pure functions, so they are tested without the Pulumi runtime.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from infra.config.aws_limits import arn_region_problem
from workloads.settings import LoadBalancerSettings

# An ACM certificate in any partition: arn:<partition>:acm:<region>:<account>:certificate/<uuid>.
ACM_CERTIFICATE_ARN = re.compile(
    r"^arn:aws(-cn|-us-gov)?:acm:[a-z]{2}(-[a-z]+)+-\d:\d{12}:certificate/"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
# The load balancer's security group gets one ingress permission per Service port plus one for ICMP
# path-MTU discovery, each listing every source range (cloud-provider-aws v1.34.3
# pkg/providers/v1/aws.go EnsureLoadBalancer, "Allow ICMP fragmentation packets"); each range in a
# permission is one rule toward "Inbound rules per security group" (Amazon VPC user guide, "Amazon
# VPC quotas": 60 by default). The proxy's Service has one port (https), so two rules per range.
RULES_PER_SOURCE_RANGE = 2
INBOUND_RULES_PER_SECURITY_GROUP = 60
# Address space that is not the internet: RFC 1918 and the shared range (RFC 6598) VPCs use.
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)
# Together the ranges may hold at most this many public addresses (a /8): more is the internet
# in slices, as 0.0.0.0/1 + 128.0.0.0/1 is all of it.
MAX_PUBLIC_ADDRESSES = 2**24


def public_addresses(networks: list[ipaddress.IPv4Network]) -> int:
    """How many addresses outside PRIVATE_RANGES the networks cover together (overlaps once)."""
    total = 0
    for net in ipaddress.collapse_addresses(networks):
        private = 0
        for block in PRIVATE_RANGES:
            if block.subnet_of(net):
                private += block.num_addresses
            elif net.subnet_of(block):
                private += net.num_addresses
        total += net.num_addresses - private
    return total


def source_range_problems(cidrs: list[str], key: Callable[..., str]) -> list[str]:
    if not cidrs:
        return [f"{key()}: list the source ranges allowed to reach the load balancer; it is never left open"]
    problems, networks = [], []
    for i, cidr in enumerate(cidrs):
        if "/" not in cidr:
            example = f"{cidr}/32" if cidr else "10.0.0.0/8"
            problems.append(f"{key(i)} = {cidr!r}: no prefix length; write a CIDR block such as {example}")
            continue
        try:
            network = ipaddress.ip_network(cidr)
        except ValueError:
            problems.append(f"{key(i)} = {cidr!r}: not a CIDR block (network address/prefix, e.g. 10.0.0.0/8)")
            continue
        if network.version != 4:
            problems.append(f"{key(i)} = {cidr!r}: the load balancer's security group takes IPv4 ranges only")
        elif network.prefixlen == 0:
            problems.append(f"{key(i)} = {cidr!r}: would open the load balancer to the internet; list your ranges")
        else:
            networks.append(network)
    rules = len(cidrs) * RULES_PER_SOURCE_RANGE
    if rules > INBOUND_RULES_PER_SECURITY_GROUP:
        problems.append(
            f"{key()}: {len(cidrs)} ranges become {rules} inbound rules of the load balancer's security group (each "
            f"range on the https port and for ICMP path-MTU discovery), more than the {INBOUND_RULES_PER_SECURITY_GROUP} "
            "a security group holds by default, so the cloud provider fails to set it up and the load balancer never "
            f"serves; allowed: at most {INBOUND_RULES_PER_SECURITY_GROUP // RULES_PER_SOURCE_RANGE} ranges (merge "
            "neighbouring ones into wider blocks; the quota is adjustable in Service Quotas, but this check holds the "
            "default, which the plan can see)"
        )
    public = public_addresses(networks)
    if not problems and public > MAX_PUBLIC_ADDRESSES:
        problems.append(
            f"{key()} = {cidrs!r}: together these open the load balancer to {public:,} public addresses, "
            f"most of the internet; list your own ranges (at most {MAX_PUBLIC_ADDRESSES:,} public addresses, a /8)"
        )
    return problems


def certificate_problems(lb: LoadBalancerSettings, key: str, region: str | None = None) -> list[str]:
    """A load balancer always fronts the password proxy, so it always listens with TLS: basic auth
    sends the password with every request, readable by anyone on the path unless the listener
    encrypts it, and "internal" narrows who is on the path, not whether they can read it.

    ``region``: the cluster's, where the load balancer is created. "Certificates in ACM are regional
    resources. To use a certificate with Elastic Load Balancing [...] in more than one AWS region, you
    must request or import a certificate for each region" (ACM user guide, "Supported Regions")."""
    arn = lb.certificate_arn
    if arn is None:
        return [
            f"{key}: required: the load balancer serves TensorBoard behind a password, which crosses the "
            "network only over HTTPS; give an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>) "
            "for a name you point at it, or drop loadBalancer and reach TensorBoard with kubectl port-forward"
        ]
    if not ACM_CERTIFICATE_ARN.match(arn):
        return [
            f"{key} = {arn!r}: not an ACM certificate ARN; expected arn:aws:acm:<region>:<12-digit account>:certificate/<uuid>"
        ]
    problem = region and arn_region_problem(
        arn,
        region,
        "ACM certificate",
        "the load balancer is in the cluster's region and takes a certificate only from there",
    )
    return [f"{key} = {arn!r}: {problem}"] if problem else []


def load_balancer_problems(lb: LoadBalancerSettings, key: Callable[..., str], region: str | None = None) -> list[str]:
    """Every problem with ``lb``; ``key(*path)`` names a key under the load balancer's settings;
    ``region``: the cluster's, when known."""
    cidrs = source_range_problems(lb.allowed_cidrs, lambda *i: key("allowedCidrs", *i))
    return cidrs + certificate_problems(lb, key("certificateArn"), region)


# ECR repository URLs: <account>.dkr.ecr.<region>.amazonaws.com[.cn]/<name> (Amazon ECR user guide,
# "Private repository concepts").
ECR_URL = re.compile(r"^[0-9]{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?/")


def cluster_region(ecr_repository_urls: list[str]) -> str | None:
    """The cluster's region, read from the ECR repositories it exports (they live beside it)."""
    return next((m[1] for url in ecr_repository_urls if (m := ECR_URL.match(url))), None)


def service_annotations(lb: LoadBalancerSettings) -> dict[str, Any]:
    """The cloud provider's annotations: internal or not, and TLS on the https port (the ELB
    terminates it with the certificate and speaks HTTP to the proxy)."""
    if lb.certificate_arn is None:
        raise ValueError("a load balancer without a certificate is refused by load_balancer_problems")
    return {
        "service.beta.kubernetes.io/aws-load-balancer-internal": str(lb.internal).lower(),
        "service.beta.kubernetes.io/aws-load-balancer-ssl-cert": lb.certificate_arn,
        "service.beta.kubernetes.io/aws-load-balancer-ssl-ports": "https",
        "service.beta.kubernetes.io/aws-load-balancer-backend-protocol": "http",
    }
