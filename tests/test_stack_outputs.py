"""workloads/stack_outputs.py reads what ``StackReference.get_output`` reads, name by name.

Each case answers a StackReference under pulumi's own mocks (pulumi 3.272.0) and compares
``read`` with ``get_output`` (sdk/python/lib/pulumi/stack_reference.py): value, secrecy
(``__is_secret_name``), knownness and the resources the result depends on.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import pulumi
import pytest
from pulumi.runtime import rpc
from pulumi.runtime.sync_await import _sync_await

from workloads import stack_outputs

KUBECONFIG = {"apiVersion": "v1", "clusters": [{"name": "kubernetes", "cluster": {"server": "https://x"}}]}


class _Reference(pulumi.runtime.Mocks):
    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[Optional[str], dict[str, Any]]:
        return args.inputs["name"], {"name": args.inputs["name"], **self.state}

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


async def _facts(output: pulumi.Output[Any]) -> tuple[Any, bool, bool, set[str]]:
    resources = await output.resources()
    return (await output.future(), await output.is_secret(), await output.is_known(),
            {r._name for r in resources})  # noqa: SLF001 (the resource's name, for a readable comparison)


def both_ways(state: dict[str, Any], names: list[str]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """What ``read`` gives for ``names``, and what ``get_output`` gives them one by one (combined
    as ``read`` combines them: secret when any is)."""
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(_Reference(state), project="p", stack="dev", preview=False)
    reference = pulumi.StackReference("cluster", stack_name="org/trainium-eks/dev")

    async def run() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        ours = await _facts(stack_outputs.read(reference, names))
        each = [await _facts(reference.get_output(name)) for name in names]
        theirs = ({name: value for name, (value, *_) in zip(names, each)}, any(f[1] for f in each),
                  all(f[2] for f in each), set().union(*(f[3] for f in each)))
        return ours, theirs

    return _sync_await(run())


def secret_kubeconfig(listed: bool = True) -> dict[str, Any]:
    """The cluster stack's map as the engine sends it: kubeconfig a secret value in it, and
    listed in secretOutputNames (unless an older CLI sends no list)."""
    secret = {rpc._special_sig_key: rpc._special_secret_sig, "value": KUBECONFIG}  # noqa: SLF001 (the wire form)
    outputs = {"clusterName": "trn", "features": {"volcano": True}, "kubeconfig": secret}
    return {"outputs": outputs, **({"secretOutputNames": ["kubeconfig"]} if listed else {})}


@pytest.mark.parametrize("names", [["clusterName", "features"], ["kubeconfig"], ["clusterName", "kubeconfig"], ["absent"]])
def test_read_gives_what_get_output_gives_each_name(names: list[str]) -> None:
    ours, theirs = both_ways(secret_kubeconfig(), names)
    assert ours == theirs
    assert ours[3] == {"cluster"}  # depends on the StackReference, as get_output's result does


def test_only_a_listed_name_is_secret_though_the_map_holds_a_secret() -> None:
    (_, plain, *_), _ = both_ways(secret_kubeconfig(), ["clusterName", "features"])
    (value, secret, *_), _ = both_ways(secret_kubeconfig(), ["kubeconfig"])
    assert (plain, secret, value) == (False, True, {"kubeconfig": KUBECONFIG})


def test_without_a_list_of_secret_names_the_whole_map_decides() -> None:
    # An older CLI sends no secretOutputNames: get_output copies the map's secrecy to every name.
    ours, theirs = both_ways(secret_kubeconfig(listed=False), ["clusterName"])
    assert ours == theirs and ours[1] is True
    ours, theirs = both_ways({"outputs": {"clusterName": "trn"}}, ["clusterName"])
    assert ours == theirs and ours[1] is False


def test_one_output_is_its_value() -> None:
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(_Reference(secret_kubeconfig()), project="p", stack="dev", preview=False)
    reference = pulumi.StackReference("cluster", stack_name="org/trainium-eks/dev")
    assert _sync_await(_facts(stack_outputs.output(reference, "kubeconfig")))[:2] == (KUBECONFIG, True)
