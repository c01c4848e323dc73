"""The offline runs' record of what the engine would receive (offline/plan/mocks.py RecordingMonitor)."""

from __future__ import annotations

from typing import Any

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime.proto import resource_pb2

from offline.plan.mocks import RecordingMonitor


def _request(name: str, inputs: dict[str, Any]) -> resource_pb2.RegisterResourceRequest:
    properties = struct_pb2.Struct()
    properties.update(inputs)
    return resource_pb2.RegisterResourceRequest(type="test:index:Thing", name=name, custom=True, object=properties)


class _Nesting(pulumi.runtime.Mocks):
    """Answering "outer" registers "inner" first, as answering a registration runs the event loop,
    which may register other resources (pulumi 3.272.0 runtime/mocks.py MockMonitor.RegisterResource
    serializes the state through _sync_await)."""

    monitor: RecordingMonitor

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        if args.name == "outer":
            self.monitor.RegisterResource(_request("inner", {"size": 2.0}))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        return {}


def test_each_record_holds_the_inputs_of_its_own_request_when_registrations_nest():
    mocks = _Nesting()
    monitor = mocks.monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(monitor.mocks, project="p", stack="s", preview=False, monitor=monitor)
    monitor.RegisterResource(_request("outer", {"size": 1.0, "tags": {"team": "ml"}}))
    assert [(r.name, r.inputs) for r in monitor.registrations] == [
        ("inner", {"size": 2}),
        ("outer", {"size": 1, "tags": {"team": "ml"}}),
    ]
