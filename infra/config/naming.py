"""The rules the receiving APIs apply to free-form strings, as pure checks.

Each function returns ``None`` when the value is acceptable, or the phrase to put after
``<key> = <value>:`` in a refusal. Sources are cited per rule so a reviewer can check them.
"""

from __future__ import annotations

import ipaddress
import re

# kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go
# (v1.34): qualifiedNameFmt, LabelValueMaxLength = 63, DNS1123SubdomainMaxLength = 253.
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
DNS_LABEL_PATTERN = rf"^{_DNS1123_LABEL}$"

# kubernetes/kubernetes pkg/kubelet/apis/well_known_labels.go (v1.34), IsKubeletLabel: a
# kubelet refuses to start with --node-labels in the kubernetes.io / k8s.io namespaces other
# than these, and EKS passes a managed node group's labels to the kubelet that way.
_KUBELET_ALLOWED_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
_KUBELET_ALLOWED_LABELS = (
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
)

# AWS tagging rules (Tagging AWS resources, "Tag naming limits and requirements"): keys
# 1-128, values 0-256 characters of letters, digits, spaces and _ . : / = + - @; the aws:
# prefix is reserved.
_AWS_TAG_CHARS = r"^[\w .:/=+\-@]*$"


# AWS CLI profile names: no spaces or brackets (they delimit sections of ~/.aws/config).
PROFILE_PATTERN = r"^[A-Za-z0-9_.+@-]{1,64}$"


def dns_label_problem(value: str) -> str | None:
    """RFC 1123 label: namespaces, object names used as DNS names (Services, claims)."""
    if len(value) > 63 or not re.fullmatch(DNS_LABEL_PATTERN, value):
        return "must be 1-63 characters of lower-case letters, digits and '-', starting and ending alphanumeric"
    return None


def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "the prefix before '/' is empty"
    if prefix and (len(prefix) > 253 or not re.fullmatch(_DNS1123_SUBDOMAIN, prefix)):
        return "the prefix before '/' must be a DNS subdomain (lower-case, at most 253 characters)"
    if not name or len(name) > 63 or not re.fullmatch(_QUALIFIED_NAME, name):
        return (
            "a label name must be 1-63 characters of letters, digits, '-', '_' and '.', "
            "starting and ending alphanumeric (optionally prefixed by a DNS subdomain and '/')"
        )
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or (value and not re.fullmatch(_QUALIFIED_NAME, value)):
        return (
            "a label value must be at most 63 characters of letters, digits, '-', '_' and '.', "
            "starting and ending alphanumeric (or empty)"
        )
    return None


def kubelet_label_problem(key: str) -> str | None:
    """Node labels the kubelet would refuse to register with (it then never joins), or that
    the kubelet and EKS set themselves (a config value would fight or fake them)."""
    prefix = key.rpartition("/")[0]
    if key in _KUBELET_ALLOWED_LABELS or prefix == "eks.amazonaws.com" or prefix.endswith(".eks.amazonaws.com"):
        return "set by the kubelet or EKS on every node; choose your own key"
    if not any(prefix == ns or prefix.endswith("." + ns) for ns in ("kubernetes.io", "k8s.io")):
        return None
    if any(prefix == ns or prefix.endswith("." + ns) for ns in _KUBELET_ALLOWED_NAMESPACES):
        return None
    return (
        "labels in the kubernetes.io and k8s.io namespaces are reserved; the kubelet refuses to start with them "
        f"(allowed there: {', '.join(_KUBELET_ALLOWED_NAMESPACES)} prefixes); use your own prefix"
    )


def aws_tag_problem(key: str, value: str) -> str | None:
    if not 1 <= len(key) <= 128 or not re.fullmatch(_AWS_TAG_CHARS, key):
        return "a tag key must be 1-128 characters of letters, digits, spaces and _ . : / = + - @"
    if key.lower().startswith("aws:"):
        return "the aws: prefix is reserved for AWS"
    if len(value) > 256 or not re.fullmatch(_AWS_TAG_CHARS, value):
        return "a tag value must be at most 256 characters of letters, digits, spaces and _ . : / = + - @"
    return None


def ipv4_cidr_problem(value: str) -> str | None:
    """A CIDR block with an explicit prefix and the host bits zero."""
    if "/" not in value:
        return "give a prefix length (for example 203.0.113.0/24)"
    try:
        ipaddress.IPv4Network(value)
    except ValueError as exc:
        return f"not a valid IPv4 CIDR block with host bits zero ({exc})"
    return None


def covers_internet(cidrs: list[str]) -> bool:
    """True when the blocks together are the whole IPv4 internet (0.0.0.0/1 + 128.0.0.0/1 is)."""
    networks = [ipaddress.IPv4Network(c) for c in cidrs if ipv4_cidr_problem(c) is None]
    return any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(networks))
