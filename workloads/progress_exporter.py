"""Each training run's progress as Prometheus metrics, read from the files the run already writes on the
shared file system: its heartbeat (the step line ``resilience.beat`` keeps, or NxD Training's rank-0 log)
and its checkpoints. Standard library only, beside ``resilience.py``, whose step patterns and checkpoint
names it reuses: this file's text is what the exporter pod runs (``python3 progress_exporter.py <port>
<runs JSON>``, from a ConfigMap that holds both files; workloads/progress.py declares it), and the tests run
the same file the same way.

Why from the files and not from inside the training pods: the run directory is already where the
heartbeat and the checkpoints are, one read-only pod per namespace on a core node sees every run in it,
and the training pods' specs stay as they are (a changed spec replaces a running job).

What it serves, one series per live run directory (label ``run``: its name) and workload (``workload``: the
pods' ``app.kubernetes.io/part-of``); the scrape adds ``namespace``. A run is live while its heartbeat or its
writer's lock record (resilience.lock rewrites it as each attempt takes the lock) is younger than the workload's
``liveSeconds``: the longest its liveness probe lets an attempt stay silent before ending it. Not the lock
itself: testing a flock(2) from here would make an attempt that finds it taken by another owner refuse to
start (resilience.lock). A run that ended (mid-save too) is served no more once that time has passed:
- ``training_attempt_start_timestamp_seconds``: when the run's newest attempt took the lock (the record's
  mtime); each new value is a restart of the run's training step;
- ``training_step``: the step of the heartbeat's last step line;
- ``training_step_high_water``: the highest step this exporter has seen in the run;
- ``training_redoing``: 1 while the step is below that (an attempt re-doing steps after a restart);
- ``training_steps_redone_total``: steps trained again after a restart;
- ``training_heartbeat_timestamp_seconds``: when the step last changed: the heartbeat's mtime when this
  exporter saw the new step (NxD Training's log changes on any output, not only on a step);
- ``training_throughput``: the last step line's ``throughput : <samples/s>`` (BERT and Ray print it);
- ``training_checkpoint_step`` and ``training_checkpoint_timestamp_seconds``: the newest save that is
  complete by its script's own marker (BERT: a zip archive with its end record; NxD: ``done``);
- ``training_checkpoint_saving``: 1 while a save newer than that is being written and holds training up
  (an asynchronous save, written while training steps on and marked complete only at the next, does not);
- ``training_checkpoint_save_seconds``: how long that newest complete save took, where a save is a directory
  of files (NxD's, Ray's): from its first data file's mtime to ``done``'s (to its last data file's where saves
  are asynchronous: their ``done`` waits for the next save). The first file's own write is not in it, so it is
  a little short. BERT's save is one file whose start no file records: none is served for it;
- ``training_samples_per_step`` and ``training_tokens_per_sample``: from the workload's settings, so the
  ledger can price a trained token; ``training_restart_budget``, ``training_checkpoint_interval_steps``
  (where the interval is in steps: not BERT's, in shards) and beside it ``training_checkpoint_asynchronous``,
  for the alerts.
The high-water mark and the step's last change live in this process: after the exporter restarts, steps redone
before it are not seen, and the heartbeat's mtime stands for the last change until the step moves.
"""

from __future__ import annotations

import http.server
import importlib
import json
import os
import re
import sys
import threading
import time
import zipfile
from typing import Any

# resilience.py lies beside this file, in the pod's ConfigMap as in the repository's workloads/; run as a
# script, this file's directory is first on the module path.
resilience = importlib.import_module("resilience")

THROUGHPUT = re.compile(rb"throughput\s*:\s*([0-9.]+)")
CHECKPOINT_NAMES = {"bert": resilience.BERT_NAME, "ray": resilience.NXD_NAME, "nxdt": resilience.NXDT_NAME}


def complete(kind: str, path: str) -> bool:
    """The script's own marker of a finished save, cheap to read: BERT's torch.save writes the zip's
    end record last; NxD writes ``done`` after every rank saved (resilience.py says where each is from)."""
    if kind == "bert":
        try:
            return zipfile.is_zipfile(path)
        except OSError:
            return False
    return os.path.exists(os.path.join(path, "done"))


def save_seconds(path: str, asynchronous: bool) -> float | None:
    """A complete save directory's write time by its files' mtimes (the markers and the verdict
    resilience.py writes into it afterwards left out), or None where it holds no data file."""
    data: list[float] = []
    for parent, _dirs, files in os.walk(path):
        for name in files:
            if parent == path and name in (*resilience.NXDT_MARKERS, resilience.NXDT_VERIFIED, resilience.NXDT_TORN):
                continue
            try:
                data.append(os.path.getmtime(os.path.join(parent, name)))
            except OSError:  # pruned meanwhile
                pass
    if not data:
        return None
    end = max(data) if asynchronous else os.path.getmtime(os.path.join(path, "done"))
    return max(0.0, end - min(data))


def checkpoints(kind: str, directory: str) -> tuple[tuple[int, float] | None, bool]:
    """(step, mtime) of the newest complete save, and whether a newer one is being written."""
    names = resilience._listdir(directory)
    found = sorted(
        ((int(m.group(1)), name) for name in names if (m := CHECKPOINT_NAMES[kind].match(name))), reverse=True
    )
    newest: tuple[int, float] | None = None
    saving = False
    for step, name in found:
        path = os.path.join(directory, name)
        if complete(kind, path):
            marker = path if kind == "bert" else os.path.join(path, "done")
            newest = (step, os.path.getmtime(marker))
            break
        saving = True
    return newest, saving


class Runs:
    """What the exporter remembers between scrapes: each run's last and highest step."""

    def __init__(self, workloads: list[dict[str, Any]]) -> None:
        self.workloads = workloads
        self.seen: dict[tuple[str, str], dict[str, float]] = {}
        # Each run's newest complete save and its write time: walking a save's files once, not at every scrape.
        self.saves: dict[tuple[str, str], tuple[tuple[int, float], float | None]] = {}
        self.lock = threading.Lock()

    def run_dirs(self, workload: dict[str, Any]) -> list[str]:
        root = workload["root"]
        return [
            os.path.join(root, name)
            for name in resilience._listdir(root)
            if os.path.exists(os.path.join(root, name, workload["heartbeat"]))
        ]

    def sample(self) -> list[tuple[str, dict[str, str], float]]:
        samples: list[tuple[str, dict[str, str], float]] = []
        with self.lock:
            for w in self.workloads:
                for run_dir in self.run_dirs(w):
                    samples += self.sample_run(w, run_dir)
        return samples

    def sample_run(self, w: dict[str, Any], run_dir: str) -> list[tuple[str, dict[str, str], float]]:
        labels = {"workload": w["workload"], "run": os.path.basename(run_dir)}
        heartbeat = os.path.join(run_dir, w["heartbeat"])
        try:
            text = resilience._read(heartbeat, resilience.TAIL_BYTES)
            beat_time = os.path.getmtime(heartbeat)
        except OSError:  # gone meanwhile: the run is not served this time
            return []
        try:
            attempt: float | None = os.path.getmtime(os.path.join(run_dir, w["holder"]))
        except OSError:
            attempt = None
        if time.time() - max(beat_time, attempt or 0.0) > w["liveSeconds"]:
            return []
        out = [
            *([("training_attempt_start_timestamp_seconds", labels, attempt)] if attempt is not None else []),
            ("training_samples_per_step", labels, float(w["samplesPerStep"])),
            ("training_tokens_per_sample", labels, float(w["tokensPerSample"])),
            ("training_restart_budget", labels, float(w["restartBudget"])),
        ]
        if w.get("checkpointIntervalSteps"):
            out.append(("training_checkpoint_interval_steps", labels, float(w["checkpointIntervalSteps"])))
            out.append(("training_checkpoint_asynchronous", labels, 1.0 if w.get("asynchronousSaves") else 0.0))
        step = resilience.last_step(text, w["kind"])
        if step is not None:
            key = (w["workload"], labels["run"])
            seen = self.seen.setdefault(key, {"last": step, "high": step, "redone": 0, "changed": beat_time})
            if step != seen["last"]:
                seen["changed"] = beat_time
            if step < seen["last"]:
                seen["last"] = step  # a restart from a checkpoint: what follows up to ``high`` is trained again
            elif step > seen["last"]:
                seen["redone"] += max(0, min(step, seen["high"]) - seen["last"])
                seen["last"] = step
            seen["high"] = max(seen["high"], step)
            out += [
                ("training_heartbeat_timestamp_seconds", labels, seen["changed"]),
                ("training_step", labels, float(step)),
                ("training_step_high_water", labels, float(seen["high"])),
                ("training_redoing", labels, 1.0 if step < seen["high"] else 0.0),
                ("training_steps_redone_total", labels, float(seen["redone"])),
            ]
            lines = text.encode().splitlines()
            rate = THROUGHPUT.search(lines[-1]) if lines else None
            if rate:
                out.append(("training_throughput", labels, float(rate.group(1))))
        newest, saving = checkpoints(w["kind"], os.path.join(run_dir, w["checkpoints"]))
        out.append(("training_checkpoint_saving", labels, 1.0 if saving and not w.get("asynchronousSaves") else 0.0))
        if newest is not None:
            out += [
                ("training_checkpoint_step", labels, float(newest[0])),
                ("training_checkpoint_timestamp_seconds", labels, newest[1]),
            ]
            if w["kind"] != "bert":
                key, directory = (w["workload"], labels["run"]), os.path.join(run_dir, w["checkpoints"])
                if key not in self.saves or self.saves[key][0] != newest:
                    name = resilience.nxdt_saves(directory, w["kind"]).get(newest[0])
                    asynchronous = bool(w.get("asynchronousSaves"))
                    seconds = save_seconds(os.path.join(directory, name), asynchronous) if name else None
                    self.saves[key] = (newest, seconds)
                written = self.saves[key][1]
                if written is not None:
                    out.append(("training_checkpoint_save_seconds", labels, written))
        return out


HELP = {
    "training_attempt_start_timestamp_seconds": ("gauge", "When the run's newest attempt took the writer's lock."),
    "training_step": ("gauge", "Step of the run's last heartbeat line."),
    "training_step_high_water": ("gauge", "Highest step this exporter has seen in the run."),
    "training_redoing": ("gauge", "1 while the run trains steps below its high-water mark again."),
    "training_steps_redone_total": ("counter", "Steps trained again after a restart."),
    "training_heartbeat_timestamp_seconds": ("gauge", "When the run's step last changed."),
    "training_throughput": ("gauge", "Samples per second the last step line reports."),
    "training_checkpoint_step": ("gauge", "Step of the newest complete checkpoint."),
    "training_checkpoint_timestamp_seconds": ("gauge", "When the newest complete checkpoint was finished."),
    "training_checkpoint_saving": ("gauge", "1 while a checkpoint newer than the newest complete one is written."),
    "training_checkpoint_save_seconds": ("gauge", "Seconds the newest complete checkpoint took to write."),
    "training_samples_per_step": ("gauge", "Samples (sequences) one step trains, from the workload's settings."),
    "training_tokens_per_sample": ("gauge", "Tokens in one sample, from the workload's settings."),
    "training_restart_budget": ("gauge", "Restarts the workload's controller allows, from its settings."),
    "training_checkpoint_interval_steps": ("gauge", "Steps between checkpoints, from the workload's settings."),
    "training_checkpoint_asynchronous": ("gauge", "1 where saves are asynchronous, from the workload's settings."),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(samples: list[tuple[str, dict[str, str], float]]) -> str:
    """Prometheus' text format 0.0.4: each family's HELP and TYPE once, then its samples."""
    lines: list[str] = []
    for name, (kind, text) in HELP.items():
        mine = [(labels, value) for n, labels, value in samples if n == name]
        if not mine:
            continue
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for labels, value in mine:
            body = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{body}}} {value!r}")
    return "\n".join(lines) + "\n"


def handler(runs: Runs) -> Any:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = exposition(runs.sample()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every 30 s: no access log
            pass

    return Handler


def main(argv: list[str]) -> int:  # pragma: no cover - runs in the pod; tests run it as a process
    port, workloads = int(argv[0]), json.loads(argv[1])
    server = http.server.ThreadingHTTPServer(("", port), handler(Runs(workloads)))
    print(f"serving {len(workloads)} workload(s) on :{port}/metrics at {time.ctime()}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
