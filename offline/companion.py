"""How the offline plan runs its programs in a second process.

The plan's steps are sequential on paper: the cluster program, the workload program (its
StackReference reads the cluster's outputs), the bootstrap program, then the reports. On a
machine with a second core, ``Forked`` runs the cluster program and then the workload program
in a forked child, sending each plan back as soon as it is ready. Meanwhile this process loads
the reporting modules and runs the bootstrap program (``Captured``), then renders the cluster's
part of the report while the child runs the workload program.

Each step's result is collected where the sequential plan computed it: errors are raised in
the same order, and a step's own output (a program's warnings on stderr) is replayed at that
point, so what `make plan` prints and writes does not depend on which form ran
(``tests/test_plan_cli.py`` compares them). ``Deferred`` is the sequential form: a step runs
when its result is asked for (the tests, which run the plan inside a pytest worker, use it).
Every form takes a chain of steps, each given the value of the one before; none runs after a
step that failed.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import tempfile
import traceback
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator, Optional, Sequence


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
    """Runs each step when its result is first asked for (the ones before it first)."""

    def __init__(self, *steps: Callable[..., Any]) -> None:
        self._steps = steps
        self._values: list[Any] = []

    def result(self, step: int = 0) -> Any:
        while len(self._values) <= step:
            index = len(self._values)
            self._values.append(self._steps[index](*self._values[-1:]))
        return self._values[step]

    def abandon(self) -> None:
        pass


class Captured:
    """Runs the steps now, their output held back until each result is asked for."""

    def __init__(self, *steps: Callable[..., Any]) -> None:
        self._outcomes = list(chained(steps))

    def result(self, step: int = 0) -> Any:
        return self._outcomes[step].unwrap()

    def abandon(self) -> None:
        pass


class Forked:
    """Runs the steps now in a forked child; each result comes back pickled as soon as it is
    ready, so this process can work on one while the child computes the next."""

    def __init__(self, *steps: Callable[..., Any]) -> None:
        self._from_child, to_parent = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        self._pid = os.fork()
        if self._pid == 0:  # pragma: no cover - the child; tests/test_plan_cli.py runs it
            os.close(self._from_child)
            _child(steps, to_parent)
        os.close(to_parent)
        self._pipe = os.fdopen(self._from_child, "rb")
        self._outcomes: list[Outcome] = []
        self._collected = False
        self._ended = "status unknown"

    def result(self, step: int = 0) -> Any:
        while len(self._outcomes) <= step and not self._collected:
            outcome = _read_frame(self._pipe)
            if outcome is None:
                self._end()
            else:
                self._outcomes.append(outcome)
        if len(self._outcomes) <= step:
            raise RuntimeError(f"the offline plan's second process ended without a result ({self._ended})")
        return self._outcomes[step].unwrap()

    def abandon(self) -> None:
        """End the child unless it has sent everything (a step before it failed)."""
        if self._collected:
            return
        try:
            os.kill(self._pid, signal.SIGKILL)
        except OSError:
            pass
        self._end()

    def _end(self) -> None:
        self._collected = True
        self._pipe.close()
        try:
            _, status = os.waitpid(self._pid, 0)
        except OSError:
            return
        # A child killed for memory (SIGKILL) and one that crashed read differently.
        if not os.WIFSIGNALED(status):
            self._ended = f"exit status {os.waitstatus_to_exitcode(status)}"
            return
        number = os.WTERMSIG(status)
        names = {s.value: s.name for s in signal.Signals}  # a real-time signal has no name
        self._ended = f"killed by {names.get(number, f'signal {number}')}"


FRAME_LENGTH = struct.Struct(">Q")


def second_core() -> bool:
    """Whether this process may run on more than one core, and can fork."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return hasattr(os, "fork") and cores > 1


def chained(steps: Sequence[Callable[..., Any]]) -> Iterator[Outcome]:
    """Each step's outcome, each step given the value of the one before; none after a failure."""
    previous: tuple[Any, ...] = ()
    for step in steps:
        outcome = captured(lambda: step(*previous))
        yield outcome
        if outcome.error is not None:
            return
        previous = (outcome.value,)


def _child(steps: Sequence[Callable[..., Any]], to_parent: int) -> None:  # pragma: no cover - see Forked
    try:
        with os.fdopen(to_parent, "wb") as pipe:
            for outcome in chained(steps):
                pipe.write(_frame(outcome))
                pipe.flush()
    finally:
        os._exit(0)


def _frame(outcome: Outcome) -> bytes:
    try:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as unpicklable:  # an error (or a value) that does not pickle goes as text
        failure = outcome.error or unpicklable
        text = "".join(traceback.format_exception(failure))
        outcome.error = RuntimeError(f"the offline plan's second process failed:\n{text}")
        outcome.value = None
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME_LENGTH.pack(len(data)) + data


def _read_frame(pipe: BinaryIO) -> Optional[Outcome]:
    """The next outcome the child sent; None when it sent no more (or died midway)."""
    head = pipe.read(FRAME_LENGTH.size)
    if len(head) < FRAME_LENGTH.size:
        return None
    (length,) = FRAME_LENGTH.unpack(head)
    data = pipe.read(length)
    return pickle.loads(data) if len(data) == length else None


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
