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


@pytest.mark.parametrize("form", FORMS)
def test_each_step_gets_the_value_of_the_one_before_and_replays_its_own_output(form, capfd):
    def cluster():
        print("cluster planned", flush=True)
        return {"region": "us-west-2"}

    def workloads(cluster_outputs):
        print("warning: from the workload program", file=sys.stderr, flush=True)
        return f"workloads in {cluster_outputs['region']}"

    steps = form(cluster, workloads)
    assert steps.result(0) == {"region": "us-west-2"}
    out, err = capfd.readouterr()
    assert (out, _without_grpc_fork_notice(err)) == ("cluster planned\n", "")
    assert steps.result(1) == "workloads in us-west-2"
    out, err = capfd.readouterr()
    assert (out, _without_grpc_fork_notice(err)) == ("", "warning: from the workload program\n")


@pytest.mark.parametrize("form", FORMS)
def test_no_step_runs_after_one_that_failed(form, tmp_path):
    ran = tmp_path / "second-step-ran"
    steps = form(_refused, lambda _: ran.write_text("yes"))
    with pytest.raises(ConfigError):
        steps.result(0)
    steps.abandon()
    assert not ran.exists()


def test_a_forked_step_hands_over_its_result_before_the_next_step_ends():
    """The plan renders the cluster's part while the child runs the workload program."""
    steps = companion.Forked(lambda: "cluster", lambda _: time.sleep(30))
    started = time.monotonic()
    assert steps.result(0) == "cluster"
    assert time.monotonic() - started < 10
    steps.abandon()


def test_a_child_that_dies_says_how_it_ended():
    steps = companion.Forked(lambda: os.kill(os.getpid(), 9))
    with pytest.raises(RuntimeError, match=r"second process ended without a result \(killed by SIGKILL\)"):
        steps.result()


def test_a_result_that_does_not_pickle_comes_back_as_the_reason():
    with pytest.raises(RuntimeError, match="(?s)second process failed.*(pickle|lambda)"):
        companion.Forked(lambda: (lambda: None)).result()
