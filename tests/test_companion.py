"""The offline plan's steps give the same results, errors and output whichever form runs them
(offline/companion.py): in a forked process, now with output held back, or when asked."""

from __future__ import annotations

import os
import sys
import time

import pytest

from infra.config.errors import ConfigError
from offline import companion

FORMS = (companion.Forked, companion.Captured, companion.Deferred)


def _without_grpc_fork_notice(err: str) -> str:
    """A pytest worker has run programs, and gRPC (loaded by pulumi) logs a line when a process
    forks while its threads are about; the plan forks before any program runs."""
    return "".join(line for line in err.splitlines(keepends=True) if "fork_posix.cc" not in line)


def _refused() -> None:
    print("warning: about to refuse", file=sys.stderr)
    raise ConfigError(["trainium-eks:network.vpcCidr = '10.0.0.0/33': not a CIDR"], source="stack configuration")


@pytest.mark.parametrize("form", FORMS)
def test_a_step_returns_its_value_and_replays_its_output_when_asked(form, capfd):
    def work():
        print("planned", flush=True)
        print("warning: from the step", file=sys.stderr, flush=True)
        return {"region": "us-west-2", "pid": os.getpid()}

    step = form(work)
    print("before the result", flush=True)
    value = step.result()
    out, err = capfd.readouterr()
    assert value["region"] == "us-west-2"
    assert (value["pid"] != os.getpid()) is (form is companion.Forked)
    # The step's own output comes where its result is taken, as in the sequential plan.
    assert out == "before the result\nplanned\n"
    assert _without_grpc_fork_notice(err) == "warning: from the step\n"


@pytest.mark.parametrize("form", FORMS)
def test_a_refusal_comes_back_whole_where_the_result_is_asked_for(form, capfd):
    step = form(_refused)
    with pytest.raises(ConfigError) as raised:
        step.result()
    assert raised.value.problems == ["trainium-eks:network.vpcCidr = '10.0.0.0/33': not a CIDR"]
    assert str(raised.value) == "Invalid stack configuration:\n  - trainium-eks:network.vpcCidr = '10.0.0.0/33': not a CIDR"
    assert _without_grpc_fork_notice(capfd.readouterr().err) == "warning: about to refuse\n"


def test_an_error_that_does_not_pickle_comes_back_as_its_traceback():
    class Unpicklable(Exception):
        def __reduce__(self):
            raise TypeError("no")

    def work():
        raise Unpicklable("the bad thing")

    with pytest.raises(RuntimeError, match="(?s)second process failed.*Unpicklable: the bad thing"):
        companion.Forked(work).result()


def test_abandoning_a_forked_step_ends_its_process():
    step = companion.Forked(lambda: time.sleep(60))
    started = time.monotonic()
    step.abandon()
    assert time.monotonic() - started < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(step._pid, os.WNOHANG)  # already reaped
    step.abandon()  # twice is harmless
