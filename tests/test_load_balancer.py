"""Who may reach a workload's load balancer, and over what (workloads/load_balancer_rules.py).

kubernetes/cloud-provider-aws v1.34.3, pkg/providers/v1/aws.go (the cluster has no AWS Load
Balancer Controller, so this service controller serves type LoadBalancer as a Classic ELB):
- EnsureLoadBalancer: `loadBalancerSourceRanges` become the ELB security group's IpRanges
  (`CidrIp`, IPv4); k8s.io/cloud-provider service helpers' GetLoadBalancerSourceRanges parses
  each as a CIDR, so a bare address fails the Service for ever;
- `aws-load-balancer-internal`: anything but "false" or unset makes the ELB internal;
- buildListener: with `aws-load-balancer-ssl-cert` set and the port listed in
  `aws-load-balancer-ssl-ports`, backend protocol `http` gives an HTTPS listener terminating
  TLS with that certificate; without the certificate the listener is plain TCP/HTTP.
"""

from __future__ import annotations

import ipaddress

import pytest

from infra.config.errors import ConfigError
from workloads.load_balancer_rules import load_balancer_problems, public_addresses, service_annotations
from workloads.settings import LoadBalancerSettings, TensorBoardSettings
from workloads.tensorboard_viewer import TensorBoardLayout, load_balancer_service

ARN = "arn:aws:acm:us-west-2:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def problems(**settings) -> list[str]:
    """The rules' problems; every case but the certificate's own names a valid certificate."""
    lb = LoadBalancerSettings(**{"certificate_arn": ARN, **settings})
    return load_balancer_problems(lb, lambda *rest: ".".join(["lb", *map(str, rest)]))


@pytest.mark.parametrize(
    "cidrs",
    [["0.0.0.0/1", "128.0.0.0/1"], ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"], ["2.0.0.0/7"]],
)
def test_ranges_that_together_open_the_internet_are_refused(cidrs: list[str]) -> None:
    (problem,) = problems(allowed_cidrs=cidrs, internal=True)
    assert problem.startswith(f"lb.allowedCidrs = {cidrs!r}: together these open the load balancer to")


def test_private_space_and_a_public_office_range_are_fine() -> None:
    assert problems(allowed_cidrs=["10.0.0.0/8", "172.16.0.0/12", "100.64.0.0/10", "203.0.113.0/24"]) == []
    # All of IPv4 less 10/8, 172.16/12, 192.168/16 and 100.64/10.
    assert public_addresses([ipaddress.ip_network("0.0.0.0/0")]) == 2**32 - 2**24 - 2**20 - 2**16 - 2**22


@pytest.mark.parametrize(
    ("cidr", "message"),
    [
        (
            "203.0.113.7",
            "lb.allowedCidrs.0 = '203.0.113.7': no prefix length; write a CIDR block such as 203.0.113.7/32",
        ),
        (
            "2001:db8::/32",
            "lb.allowedCidrs.0 = '2001:db8::/32': the load balancer's security group takes IPv4 ranges only",
        ),
        ("10.0.0.1/8", "lb.allowedCidrs.0 = '10.0.0.1/8': not a CIDR block (network address/prefix, e.g. 10.0.0.0/8)"),
    ],
)
def test_each_range_is_an_ipv4_cidr_with_a_prefix(cidr: str, message: str) -> None:
    assert problems(allowed_cidrs=[cidr]) == [message]


@pytest.mark.parametrize("internal", [True, False])
def test_every_load_balancer_needs_a_certificate_internal_or_not(internal: bool) -> None:
    # The proxy's basic auth sends the password with every request: only over TLS, inside the VPC too.
    (problem,) = problems(allowed_cidrs=["10.0.0.0/8"], internal=internal, certificate_arn=None)
    assert problem.startswith("lb.certificateArn: required: the load balancer serves TensorBoard behind a password")
    assert "kubectl port-forward" in problem
    assert problems(allowed_cidrs=["10.0.0.0/8"], internal=internal, certificate_arn=ARN) == []


@pytest.mark.parametrize(
    "arn", ["arn:aws:iam::123456789012:server-certificate/x", ARN.replace("acm:us-west-2", "acm:")]
)
def test_the_certificate_must_be_an_acm_arn(arn: str) -> None:
    (problem,) = problems(allowed_cidrs=["10.0.0.0/8"], certificate_arn=arn)
    assert problem.startswith(f"lb.certificateArn = {arn!r}: not an ACM certificate ARN")


def test_empty_ranges_and_certificates_are_refused_by_the_settings_model() -> None:
    # Every config model refuses "" before any rule runs (infra/config/base.py, str_min_length).
    for fields in ({"allowed_cidrs": [""]}, {"allowed_cidrs": ["10.0.0.0/8"], "certificate_arn": ""}):
        with pytest.raises(ValueError, match="at least 1 character"):
            LoadBalancerSettings(**fields)


def test_with_a_certificate_the_elb_terminates_tls_on_the_https_port_only() -> None:
    lb = LoadBalancerSettings(allowed_cidrs=["203.0.113.0/24"], internal=False, certificate_arn=ARN)
    layout = TensorBoardLayout("default", "img", "fsx-claim", {}, TensorBoardSettings(load_balancer=lb), 20001)
    service = load_balancer_service(layout, lb)
    assert service["metadata"]["annotations"] == {
        "service.beta.kubernetes.io/aws-load-balancer-internal": "false",
        "service.beta.kubernetes.io/aws-load-balancer-ssl-cert": ARN,
        "service.beta.kubernetes.io/aws-load-balancer-ssl-ports": "https",
        "service.beta.kubernetes.io/aws-load-balancer-backend-protocol": "http",
        "pulumi.com/skipAwait": "true",
    }
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "proxy"}]


def test_an_internal_load_balancer_terminates_tls_too_and_none_serves_plain_http() -> None:
    lb = LoadBalancerSettings(allowed_cidrs=["10.0.0.0/8"], certificate_arn=ARN)
    layout = TensorBoardLayout("default", "img", "fsx-claim", {}, TensorBoardSettings(load_balancer=lb), 20001)
    service = load_balancer_service(layout, lb)
    assert service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-internal"] == "true"
    assert service["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == ARN
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "proxy"}]
    with pytest.raises(ValueError, match="refused by load_balancer_problems"):
        service_annotations(LoadBalancerSettings(allowed_cidrs=["10.0.0.0/8"]))


def test_the_stack_refuses_an_internal_tensorboard_without_a_certificate(workloads_with) -> None:
    with pytest.raises(ConfigError) as info:
        workloads_with(tensorboard={"loadBalancer": {"allowedCidrs": ["10.0.0.0/8"], "internal": True}})
    (problem,) = info.value.problems
    assert problem.startswith("trainium-workloads:tensorboard.loadBalancer.certificateArn: required")


def test_the_stack_refuses_an_open_or_plain_http_public_tensorboard(workloads_with) -> None:
    with pytest.raises(ConfigError) as info:
        workloads_with(tensorboard={"loadBalancer": {"allowedCidrs": ["0.0.0.0/1", "128.0.0.0/1"], "internal": False}})
    assert [p.split(":")[1].split(" ")[0] for p in info.value.problems] == [
        "tensorboard.loadBalancer.allowedCidrs", "tensorboard.loadBalancer.certificateArn"]  # fmt: skip
