"""The context every component shares (infra/components/context.py) and the Pod Identity scope it is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any, cast

import pytest

from infra.components.context import ClusterContext
from infra.components.iam import pod_identity_trust_policy

CTX = ClusterContext("aws-cn", "cn-north-1", "210987654321", "trn-cn", {"team": "ml"})


def test_the_cluster_arn_is_in_the_context_partition_region_and_account():
    assert CTX.cluster_arn == "arn:aws-cn:eks:cn-north-1:210987654321:cluster/trn-cn"


def test_pod_identity_roles_trust_only_the_context_account_and_cluster():
    (statement,) = json.loads(pod_identity_trust_policy(CTX, "research", "training"))["Statement"]
    assert statement["Condition"]["StringEquals"] == {
        "aws:SourceAccount": "210987654321",
        "aws:RequestTag/eks-cluster-arn": "arn:aws-cn:eks:cn-north-1:210987654321:cluster/trn-cn",
        "aws:RequestTag/kubernetes-namespace": "research",
        "aws:RequestTag/kubernetes-service-account": "training",
    }


def test_what_exists_only_once_the_cluster_is_declared_is_refused_before():
    with pytest.raises(ValueError, match="trn-cn: the cluster's name as an Output exists once it is declared"):
        _ = CTX.cluster_name_output
    with pytest.raises(ValueError, match="trn-cn: the Kubernetes provider exists once the cluster is declared"):
        _ = CTX.kubernetes


def test_with_cluster_is_a_new_context_with_the_same_facts():
    name, provider = cast(Any, object()), cast(Any, object())
    after = CTX.with_cluster(name, provider)
    assert (after.cluster_name_output, after.kubernetes) == (name, provider)
    assert (after.partition, after.region, after.account_id, after.cluster_name, after.tags) == (
        CTX.partition,
        CTX.region,
        CTX.account_id,
        CTX.cluster_name,
        CTX.tags,
    )
    with pytest.raises(ValueError):
        _ = CTX.kubernetes  # the context before the cluster is unchanged


# A component given a provider in its options registers only once that provider has a URN and an ID,
# and its children only once the component has a URN (pulumi 3.272.0 sdk/python/lib/pulumi/runtime/
# resource.py prepare_resource: provider_refs of a non-custom resource, then the parent's URN). So
# the components take the Kubernetes provider from the context and give it to their Kubernetes
# children only; their AWS children do not wait for the cluster's nodes. Here the provider takes a
# second to come up.
_PROGRAM = textwrap.dedent("""
    import asyncio, json, time
    import pulumi

    start, registered = time.monotonic(), {}

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            if args.typ == "pulumi:providers:kubernetes":
                time.sleep(1)
            registered[args.name] = time.monotonic() - start
            return args.name + "-id", args.inputs

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), preview=False)

    class Mixed(pulumi.ComponentResource):
        def __init__(self, name, opts=None):
            super().__init__("test:index:Mixed", name, None, opts)
            self.child = pulumi.CustomResource("aws:index:Thing", f"{name}-aws-child", {},
                                               pulumi.ResourceOptions(parent=self))

    kubernetes = pulumi.ProviderResource("kubernetes", "cluster", {})
    children = [Mixed("explicit").child, Mixed("in-options", pulumi.ResourceOptions(provider=kubernetes)).child]
    asyncio.get_event_loop().run_until_complete(asyncio.gather(*(c.urn.future() for c in children)))
    print(json.dumps(registered))
""")


def test_a_component_given_a_provider_holds_back_its_other_packages_children_until_the_provider_exists():
    run = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=60, check=True)
    registered = json.loads(run.stdout.splitlines()[-1])
    assert registered["explicit-aws-child"] < registered["cluster"] <= registered["in-options-aws-child"]
