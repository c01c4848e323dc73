"""Reading several outputs of another stack as one Output, as ``get_output`` reads each.

pulumi 3.272.0 ``StackReference.get_output(name)`` (sdk/python/lib/pulumi/stack_reference.py)
is ``Output.all(name, self.outputs)``: ``Output.all`` lifts its arguments deeply
(``Output.from_input``, output.py), so every call turns the referenced stack's whole output map
(kubeconfig included) into a tree of Outputs again. The workload program reads a dozen names:
that was half of each of its runs under the mocks (`make plan`, the tests). ``read`` picks the
names from one ``apply`` over the map and keeps what ``get_output`` gives each name: the map's
resources and knownness, and secrecy by name (``__is_secret_name``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import pulumi


async def _any_secret(reference: pulumi.StackReference, names: Sequence[str]) -> bool:
    """``__is_secret_name`` for several known names: secret when the referenced stack lists any of
    them as secret; the whole map's secrecy when that list is unknown or absent (an older CLI)."""
    secret_names = reference.secret_output_names
    if not await secret_names.is_known():
        return await reference.outputs.is_secret()
    listed = await secret_names.future()
    if listed is None:
        return await reference.outputs.is_secret()
    return any(name in listed for name in names)


def read(reference: pulumi.StackReference, names: Sequence[str]) -> pulumi.Output[dict[str, Any]]:
    """``{name: value}`` for ``names`` (None for an output the stack does not have)."""
    names = tuple(names)
    picked = reference.outputs.apply(lambda outputs: {name: outputs.get(name) for name in names})
    # As get_output builds its result: the map's resources, value and knownness, secrecy by name.
    return pulumi.Output(picked.resources(), picked.future(), picked.is_known(),
                         asyncio.ensure_future(_any_secret(reference, names)))


def output(reference: pulumi.StackReference, name: str) -> pulumi.Output[Any]:
    """One output, as ``reference.get_output(name)`` gives it."""
    return read(reference, [name]).apply(lambda read_: read_[name])
