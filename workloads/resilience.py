"""Resume and hang detection inside the training pods: which checkpoint a restart continues from,
the heartbeat the training process writes, and the liveness verdict on it. Standard library only:
this file's text is what the pods run (``python3 -c "$RESILIENCE_PY" <command> ...``, see
``resumable.py``), and the tests import the same functions.

A checkpoint is *complete* by each pinned script's own evidence, never by its name alone:
- BERT (aws-neuron-samples d6e1754 dp_bert_large_hf_pretrain_hdf5.py l.572-600): ``torch.save`` of
  ``<output_dir>/ckpt_<step>.pt`` straight to its final name. torch.save's file is a zip archive
  whose central directory is written last (torch serialization, PyTorchStreamWriter
  writeEndOfFile), so a file cut short has no end-of-central-directory record:
  ``zipfile.is_zipfile`` is False. The script's own ``--resume_ckpt`` takes the highest step of
  any ``*.pt`` (l.461-463), complete or not, so the pick is passed as ``--resume_ckpt_path``.
- Ray Train (data-on-eks a32d9f2 tp_zero1_llama2_7b_hf_pretrain.py l.432-445, l.472-481): NxD's
  ``save_checkpoint(<dir>, "step_<n>")`` writes ``<dir>/step_<n>/done`` only after every rank has
  saved (aws-neuron/neuronx-distributed SDK 2.18.0 release 8520967,
  src/neuronx_distributed/trainer/checkpoint.py l.103-117) and removes ``done`` first when it
  deletes an old one (l.157-163); resumed with ``--resume_ckpt --loading_step <n>``.
- NeMo (aws-neuron/neuronx-nemo-megatron d22aabf): the checkpoint callback writes
  ``<log dir>/checkpoints/mp_rank_XX/<name>.ckpt`` per tensor-parallel rank
  (nemo/utils/model_utils.py inject_model_parallel_rank) and leaves no marker on disk; rank 0 logs
  ``Synchronous saving of checkpoint <name> fully completed`` after the rendezvous that follows
  every rank's save (nlp_overrides.py NLPCheckpointIOState.end l.478-485, removal protection on by
  default). Complete = named in such a line of node 0's log; resumed with
  ``model.resume_from_checkpoint=<dir>/<name>`` (megatron_gpt_pretraining.py l.86-88; the
  checkpoint IO puts the rank directory back in, nlp_overrides.py load_checkpoint l.586-588).

Heartbeat: the step counter the scripts print. BERT and Ray Train print
``LOG <time> - (<epoch>, <step>) step_loss : ...`` on global rank 0 every step (the logger.log of
both scripts); NeMo's progress bar shows ``global_step=<n>`` (megatron_gpt_model.py l.458,
``prog_bar=True``). ``beat`` copies its input through and rewrites the heartbeat file with each
step line (temp file + rename, so a reader never sees half a line); the liveness probe (``probe``)
fails once the step has not changed for the configured time.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import zipfile
from typing import Any, Iterable, Optional

STEP_PATTERNS = {
    "bert": r"\bLOG .* - \(\d+, (\d+)\) step_loss",
    "ray": r"\bLOG .* - \(\d+, (\d+)\) step_loss",
    "nemo": r"\bglobal_step=(\d+)",
}
NEMO_SAVED = re.compile(r"saving of checkpoint (\S+\.ckpt) fully completed")
NEMO_STEP = re.compile(r"step=(\d+)")
BERT_NAME = re.compile(r"^ckpt_(\d+)\.pt$")
NXD_NAME = re.compile(r"^step_(\d+)$")
# The heartbeat's tail is enough: NeMo's progress bar rewrites its line every step.
TAIL_BYTES = 65536


def last_step(text: str, kind: str) -> Optional[int]:
    """The step of the last heartbeat line in ``text`` (None: no step yet)."""
    found = re.findall(STEP_PATTERNS[kind], text)
    return int(found[-1]) if found else None


def newest_complete(steps: dict[int, bool]) -> Optional[int]:
    """The highest step whose checkpoint is complete."""
    done = [step for step, complete in steps.items() if complete]
    return max(done) if done else None


def to_delete(steps: dict[int, bool], keep: int) -> list[int]:
    """What a new attempt removes before it starts (no writer is running then): every incomplete
    checkpoint, and complete ones beyond the ``keep`` newest."""
    complete = sorted((s for s, ok in steps.items() if ok), reverse=True)
    return sorted([s for s, ok in steps.items() if not ok] + complete[keep:])


def bert_steps(directory: str) -> dict[int, bool]:
    steps = {}
    for name in _listdir(directory):
        if match := BERT_NAME.match(name):
            steps[int(match.group(1))] = zipfile.is_zipfile(os.path.join(directory, name))
    return steps


def nxd_steps(directory: str) -> dict[int, bool]:
    steps = {}
    for name in _listdir(directory):
        if (match := NXD_NAME.match(name)) and os.path.isdir(os.path.join(directory, name)):
            steps[int(match.group(1))] = os.path.exists(os.path.join(directory, name, "done"))
    return steps


def nemo_complete(log_text: str) -> dict[int, str]:
    """Step -> checkpoint name of every save node 0's log reports as fully completed."""
    done = {}
    for name in NEMO_SAVED.findall(log_text):
        if match := NEMO_STEP.search(name):
            done[int(match.group(1))] = name
    return done


def resume_args(kind: str, directory: str, log_file: str = "") -> list[str]:
    """The script arguments that continue from the newest complete checkpoint (none: start)."""
    if kind == "bert":
        step = newest_complete(bert_steps(directory))
        return [] if step is None else ["--resume_ckpt", "--resume_ckpt_path", f"{directory}/ckpt_{step}.pt"]
    if kind == "ray":
        step = newest_complete(nxd_steps(directory))
        return [] if step is None else ["--resume_ckpt", "--loading_step", str(step)]
    names = nemo_complete(_read(log_file))
    on_disk = {n for sub in _listdir(directory) if sub.startswith("mp_rank_") for n in _listdir(f"{directory}/{sub}")}
    steps = [step for step, name in names.items() if name in on_disk]
    return [f"model.resume_from_checkpoint={directory}/{names[max(steps)]}"] if steps else []


def prune(kind: str, directory: str, keep: int) -> list[str]:
    """Removes BERT's incomplete and surplus checkpoints (the script only counts its own run's)."""
    removed = []
    if kind == "bert":
        for step in to_delete(bert_steps(directory), keep):
            os.remove(path := f"{directory}/ckpt_{step}.pt")
            removed.append(path)
    return removed


# test_llama.sh (neuronx-nemo-megatron d22aabf, nemo/examples/nlp/language_modeling l.82) checkpoints
# every 10 hours; PyTorch Lightning's ModelCheckpoint takes one of every_n_train_steps and
# train_time_interval, so this line is replaced, not added to. The config's callback keeps the
# save_top_k checkpoints of the highest step (conf/megatron_llama_config.yaml: monitor step, mode max).
NEMO_INTERVAL_LINE = "    +exp_manager.checkpoint_callback_params.train_time_interval=36000 \\\n"
NEMO_SCRIPT, NEMO_RESUMABLE = "./test_llama.sh", "./test_llama_resumable.sh"


def nemo_scripts(llama_7b: str, test_llama: str, every: int, keep: int, resume: list[str]) -> tuple[str, str]:
    """llama_7b.sh and test_llama.sh rewritten to checkpoint every ``every`` steps, keep ``keep``, and
    continue from ``resume`` (resume_args); refused when the pinned lines are not there once each."""
    for text, line in ((llama_7b, NEMO_SCRIPT + "\n"), (test_llama, NEMO_INTERVAL_LINE)):
        if text.count(line) != 1:
            raise ValueError(f"expected {line!r} once in the pinned NeMo scripts")
    overrides = [f"+exp_manager.checkpoint_callback_params.every_n_train_steps={every}",
                 f"exp_manager.checkpoint_callback_params.save_top_k={keep}", *resume]
    lines = "".join(f"    {o} \\\n" for o in overrides)
    return (llama_7b.replace(NEMO_SCRIPT + "\n", NEMO_RESUMABLE + "\n"), test_llama.replace(NEMO_INTERVAL_LINE, lines))


def write_nemo_scripts(every: int, keep: int, checkpoints: str, log_file: str) -> None:
    """In the examples directory (mpirun's -wdir): llama_7b_resumable.sh and test_llama_resumable.sh."""
    llama, test = nemo_scripts(_read("llama_7b.sh"), _read(NEMO_SCRIPT), every, keep,
                               resume_args("nemo", checkpoints, log_file))
    for name, text in (("llama_7b_resumable.sh", llama), (NEMO_RESUMABLE, test)):
        with open(name, "w") as f:
            f.write(text)
        os.chmod(name, 0o755)


def observe(state: Optional[dict[str, Any]], step: Optional[int], now: float) -> dict[str, Any]:
    """The probe's memory: the step last seen, since when, and whether it has moved since the
    container started (a step left by an earlier attempt counts as no progress yet)."""
    if state is None:
        return {"step": step, "since": now, "advanced": False}
    if step != state["step"]:
        return {"step": step, "since": now, "advanced": True}
    return state


def stalled(state: dict[str, Any], now: float, first_step_seconds: int, hang_seconds: int) -> Optional[str]:
    """Why the run counts as hung, or None."""
    limit = hang_seconds if state["advanced"] else first_step_seconds
    if now - state["since"] <= limit:
        return None
    what = f"step {state['step']}" if state["advanced"] else "no new step since the container started"
    return f"training hung: {what}, unchanged for {int(now - state['since'])} s (limit {limit} s)"


def beat(lines: Iterable[str], kind: str, heartbeat: str, out: Any) -> None:
    """Copies ``lines`` to ``out``; rewrites ``heartbeat`` with each step line."""
    pattern = re.compile(STEP_PATTERNS[kind])
    for line in lines:
        out.write(line)
        out.flush()
        if pattern.search(line):
            with open(heartbeat + ".tmp", "w") as f:
                f.write(line)
            os.replace(heartbeat + ".tmp", heartbeat)


def probe(kind: str, heartbeat: str, state_file: str, first_step_seconds: int, hang_seconds: int, now: float) -> Optional[str]:
    saved = json.loads(_read(state_file)) if os.path.exists(state_file) else None
    state = observe(saved, last_step(_read(heartbeat, TAIL_BYTES), kind), now)
    with open(state_file, "w") as f:
        json.dump(state, f)
    return stalled(state, now, first_step_seconds, hang_seconds)


def _listdir(directory: str) -> list[str]:
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def _read(path: str, tail: int = 0) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        if tail:
            f.seek(max(0, os.path.getsize(path) - tail))
        return f.read().decode(errors="replace")


def main(argv: list[str]) -> int:  # pragma: no cover - runs in the pods; the functions are tested
    command, kind, *rest = argv
    if command == "resume":  # resume <kind> <checkpoint dir> [<nemo log>]: print the arguments
        print(" ".join(resume_args(kind, *rest)))
    elif command == "prune":  # prune <kind> <checkpoint dir> <keep>
        for path in prune(kind, rest[0], int(rest[1])):
            print(f"removed {path}", file=sys.stderr)
    elif command == "nemo-scripts":  # nemo-scripts nemo <every> <keep> <checkpoint dir> <node 0 log>
        write_nemo_scripts(int(rest[0]), int(rest[1]), rest[2], rest[3])
    elif command == "beat":  # beat <kind> <heartbeat file>: a filter on the training output
        beat(iter(sys.stdin.readline, ""), kind, rest[0], sys.stdout)
    elif command == "probe":  # probe <kind> <heartbeat> <state file> <first step s> <hang s>
        verdict = probe(kind, rest[0], rest[1], int(rest[2]), int(rest[3]), time.time())
        if verdict:
            print(verdict)  # the kubelet puts this in the pod's Unhealthy event
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
