"""How the offline plan runs its longest step, the cluster program, in a second process.

The plan's steps are sequential on paper: the cluster program, the workload program (its
StackReference reads the cluster's outputs), the bootstrap program, then the reports. On a
machine with a second core, ``Forked`` runs the cluster program in a forked child while this
process loads the reporting modules, runs the bootstrap program (``Captured``) and loads what
the workload program needs; then it continues with the cluster plan the child sends back.

Each step's result is collected where the sequential plan computed it: errors are raised in
the same order, and a step's own output (a program's warnings on stderr) is replayed at that
point, so what `make plan` prints and writes does not depend on which form ran
(``tests/test_plan_cli.py`` compares them). ``Deferred`` is the sequential form: the step runs
when its result is asked for (the tests, which run the plan inside a pytest worker, use it).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import tempfile
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union


@dataclass
class Outcome:
    value: Any = None
    error: Optional[BaseException] = None
    stdout: str = ""
    stderr: str = ""

    def unwrap(self) -> Any:
        """Replay the step's output here, then return its value or raise its error."""
        sys.stdout.write(self.stdout)
        sys.stdout.flush()
        sys.stderr.write(self.stderr)
        sys.stderr.flush()
        if self.error is not None:
            raise self.error
        return self.value


class Deferred:
    """Runs ``work`` when its result is first asked for."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._work = work

    def result(self) -> Any:
        return self._work()

    def abandon(self) -> None:
        pass


class Captured:
    """Runs ``work`` now, its output held back until its result is asked for."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._outcome = captured(work)

    def result(self) -> Any:
        return self._outcome.unwrap()

    def abandon(self) -> None:
        pass


class Forked:
    """Runs ``work`` now in a forked child; its result comes back pickled."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._from_child, to_parent = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        self._pid = os.fork()
        if self._pid == 0:  # pragma: no cover - the child; tests/test_plan_cli.py runs it
            os.close(self._from_child)
            _child(work, to_parent)
        os.close(to_parent)
        self._collected = False

    def result(self) -> Any:
        with os.fdopen(self._from_child, "rb") as pipe:
            data = pipe.read()
        os.waitpid(self._pid, 0)
        self._collected = True
        if not data:
            raise RuntimeError("the offline plan's second process ended without a result")
        outcome: Outcome = pickle.loads(data)
        return outcome.unwrap()

    def abandon(self) -> None:
        """End the child unless its result was collected (a step before it failed)."""
        if self._collected:
            return
        self._collected = True
        try:
            os.kill(self._pid, signal.SIGKILL)
            os.waitpid(self._pid, 0)
        except OSError:
            pass


Step = Union[Deferred, Captured, Forked]


def second_core() -> bool:
    """Whether this process may run on more than one core, and can fork."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return hasattr(os, "fork") and cores > 1


def _child(work: Callable[[], Any], to_parent: int) -> None:  # pragma: no cover - see Forked
    try:
        outcome = captured(work)
        try:
            data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # an error that does not pickle goes as its traceback's text
            text = "".join(traceback.format_exception(outcome.error)) if outcome.error else ""
            outcome.error = RuntimeError(f"the offline plan's second process failed:\n{text}")
            outcome.value = None
            data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(to_parent, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(0)


def captured(work: Callable[[], Any]) -> Outcome:
    """Run ``work`` with its output (Python's streams and the file descriptors under them) going
    to files, kept for replay."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved_fds, saved_streams = (os.dup(1), os.dup(2)), (sys.stdout, sys.stderr)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        # Descriptors dup'ed from one file share its offset: writes from either side interleave.
        sys.stdout, sys.stderr = (open(os.dup(f.fileno()), "w", encoding="utf-8", errors="backslashreplace")
                                  for f in (out, err))
        outcome = Outcome()
        try:
            outcome.value = work()
        except BaseException as exc:  # raised again where the sequential plan would raise it
            outcome.error = exc
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.close()
            sys.stdout, sys.stderr = saved_streams
            for fd, target in zip(saved_fds, (1, 2)):
                os.dup2(fd, target)
                os.close(fd)
        out.seek(0)
        err.seek(0)
        outcome.stdout = out.read().decode("utf-8", errors="replace")
        outcome.stderr = err.read().decode("utf-8", errors="replace")
        return outcome
