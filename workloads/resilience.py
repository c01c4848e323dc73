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
  Closed is not durable: the script does not fsync, and a node lost after the save may leave pages
  that never reached the file system, read back as zeros under an intact directory. So the pick
  (and what pruning keeps) must also read back whole: torch.save records each member's CRC-32
  (pytorch/pytorch torch/utils/serialization/config.py, save.compute_crc32 = True, as read at
  72950e3c; the image's torch 2.9 tag itself was not readable here), and
  ``ZipFile.testzip`` checks every member against it. Newest first, only as many as are needed.
  One found torn while nothing newer reads back whole is set aside, not deleted (``bert_prune``); a
  read the file system fails is no verdict: the attempt ends, and nothing is picked past it or removed.
- Ray Train (aws-neuron/neuronx-distributed fbac349 tp_zero1_llama_hf_pretrain.py l.337-352, l.376-394): NxD's
  ``save_checkpoint(<dir>, "step_<n>")`` writes ``<dir>/step_<n>/done`` only after every rank has
  saved (same commit,
  src/neuronx_distributed/trainer/checkpoint.py l.190-196) and removes ``done`` first when it
  deletes an old one (l.261-266); resumed with ``--resume_ckpt --loading_step <n>`` (ray_train_llama2.py).
  The same NxD writes NxD Training's saves, with the same synchronous torch.save and no fsync, so a
  ``step_<n>`` is verified, picked and pruned as they are (``nxdt_pick``, ``nxdt_prune``, kind ``ray``).
- NxD Training (aws-neuron/neuronx-distributed-training 9169aa0): the checkpoint callback names a save
  ``<log dir>/checkpoints/megatron_llama--step=<n>-consumed_samples=<m>.ckpt``
  (examples/conf/megatron_llama_7B_config.yaml), and NLPCheckpointIO.save_checkpoint hands its parent
  and name to NxD's ``save_checkpoint`` as directory and tag (nlp_overrides.py), so it is a directory
  that gets ``done`` only after every rank has saved (neuronx-distributed Release 2.29 fbac349
  src/neuronx_distributed/trainer/checkpoint.py CheckpointIOState.end l.190-195). ``done`` says every
  rank closed its files, not that their bytes arrived (nothing is fsynced), so the pick must also read
  back whole (``nxdt_pick``). exp_manager's own
  resume takes the newest ``*.ckpt`` by mtime, complete or not (utils/exp_manager.py check_resume),
  so failed ones are moved out of its way first (``nxdt_prune``) and the pick is passed as
  ``exp_manager.resume_from_checkpoint=<dir>/<name>`` (examples/training.py: ``trainer.fit(...,
  ckpt_path=cfg.exp_manager.resume_from_checkpoint)``). The name has ``=`` in it, which Hydra's
  override lexer reads as a second EQUAL token: the value is escaped the way Hydra escapes it
  (``hydra_escape``).

Heartbeat: the step counter the scripts print. BERT and Ray Train print
``LOG <time> - (<epoch>, <step>) step_loss : ...`` on global rank 0 every step (the logger.log of
both scripts). NxD Training's is Lightning's progress bar (Lightning 2.5.0, the DLC's
nxdt_requirements.txt): its ``global_step`` metric is a float that tqdm's ``format_num`` cuts to 3
significant digits (``1.2e+4`` for 12000), so the bar's own batch counter is read instead, an
integer (tqdm format_meter ``str(n)``: ``| <n>/<total> [`` or ``<n>it [``) that TQDMProgressBar
sets on every batch. ``beat``
copies its input through and rewrites the heartbeat file with each step line (temp file + rename,
so a reader never sees half a line); the liveness probe (``probe``) fails once the step has not
changed for the configured time, counted from the start of the attempt it watches.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import re
import shlex
import sys
import urllib.request
import time
import zipfile
from typing import Any, Callable, Iterable, Optional

STEP_PATTERNS = {
    "bert": r"\bLOG .* - \(\d+, (\d+)\) step_loss",
    "ray": r"\bLOG .* - \(\d+, (\d+)\) step_loss",
    # The main bar only ("Epoch <n>: "), one redraw at a time (\r separates them), as the
    # NxD Training docs show it (neuronx-distributed-training docs/tutorials/megatron_gpt_pretraining.rst);
    # "<n>/?" when Lightning 2.5 knows no total (its TQDMProgressBar bar_format).
    "nxdt": r"Epoch \d+: [^\r\n]*?(\d+)(?:/(?:\d+|\?)|it) \[",
}
# hydra v1.3.2 (nxdt_requirements.txt asks hydra-core>=1.3.0) hydra/_internal/grammar/utils.py _ESC:
# what the override lexer's ESC token covers.
HYDRA_SPECIAL = "\\()[]{}:=, \t"
BERT_NAME = re.compile(r"^ckpt_(\d+)\.pt$")
NXD_NAME = re.compile(r"^step_(\d+)$")
NXDT_NAME = re.compile(r"^.*--step=(\d+)-.*\.ckpt$")
# The heartbeat's tail is enough: the progress bar rewrites its line every step.
TAIL_BYTES = 65536


def last_step(text: str, kind: str) -> Optional[int]:
    """The step of the last heartbeat line in ``text`` (None: no step yet)."""
    found = re.findall(STEP_PATTERNS[kind], text)
    return int(found[-1]) if found else None


def newest_complete(steps: dict[int, Optional[bool]]) -> Optional[int]:
    """The highest step whose checkpoint is complete."""
    done = [step for step, complete in steps.items() if complete]
    return max(done) if done else None


def disposal(verdicts: dict[int, Optional[bool]]) -> tuple[list[int], list[int]]:
    """What a new attempt removes and what it sets aside before it starts (no writer is running then),
    from ``verified``'s verdicts: one found torn is set aside while nothing newer passed (nothing vouches
    that it is lost for good) and removed once something did; one not read is older than the ``enough``
    that passed, so it is beyond what is kept, and removed."""
    newest = newest_complete(verdicts)
    aside = sorted(s for s, ok in verdicts.items() if ok is False and (newest is None or s > newest))
    return sorted(s for s, ok in verdicts.items() if not ok and s not in aside), aside


def verified(steps: Iterable[int], verify: Callable[[int], bool], enough: int) -> dict[int, Optional[bool]]:
    """``verify``'s verdict on ``steps``, newest first until ``enough`` pass; older ones are beyond what
    is kept or picked, so they are not read (None). An error ``verify`` raises is no verdict: it ends
    the look-up."""
    checked: dict[int, Optional[bool]] = {}
    passed = 0
    for step in sorted(steps, reverse=True):
        checked[step] = verify(step) if passed < enough else None
        passed += bool(checked[step])
    return checked


class FileSystemErrors(io.BufferedReader):
    """A file that keeps the first error the file system gave one of its reads or seeks: zipfile reports
    some of them as a bad archive (CPython 3.10-3.13 Lib/zipfile.py: _RealGetContents raises BadZipFile
    for any OSError of _EndRecData, which itself takes a failed seek for a file too short)."""

    failed: Optional[OSError] = None

    def read(self, size: Optional[int] = -1) -> bytes:
        try:
            return super().read(size)
        except OSError as error:
            self.failed = self.failed or error
            raise

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return super().seek(offset, whence)
        except OSError as error:
            if error.errno != errno.EINVAL:  # EINVAL: a seek before the start, a file shorter than asked
                self.failed = self.failed or error
            raise


def bert_readable(path: str) -> bool:
    """Every member's bytes match the CRC-32 torch.save wrote for them (False: the bytes prove the
    save torn). A read the file system fails (Lustre's EIO, an evicted client) proves nothing about
    the bytes, so it raises OSError, naming the file, rather than count as torn."""
    with FileSystemErrors(io.FileIO(path)) as f:
        try:
            with zipfile.ZipFile(f) as archive:
                whole = archive.testzip() is None
        except Exception:  # what the bytes say: no central directory, a torn header, data cut short
            whole = False
        if f.failed is not None:
            raise OSError(f"cannot read checkpoint file {path}: {f.failed}") from f.failed
    return whole


def bert_steps(directory: str) -> list[int]:
    return [int(match.group(1)) for name in _listdir(directory) if (match := BERT_NAME.match(name))]


def bert_prune(directory: str, keep: int) -> tuple[list[str], list[str]]:
    """Before an attempt starts (no writer runs): reads BERT's checkpoints newest first until ``keep``
    read back whole, then removes and sets aside what ``disposal`` says. Set aside is SET_ASIDE inside
    the run directory: the script's own resume lists only ``*.pt`` there (l.461-463), and the run's
    saves of the same step are not in its way. One set aside earlier at or below the newest that
    passed goes then. Returns what was removed and what was set aside."""
    verdicts = verified(bert_steps(directory), lambda s: bert_readable(f"{directory}/ckpt_{s}.pt"), keep)
    remove, aside = disposal(verdicts)
    newest, set_aside = newest_complete(verdicts), os.path.join(directory, SET_ASIDE)
    removed = [p for step, p in set_aside_all(set_aside, BERT_NAME) if newest is not None and step <= newest]
    for path in removed:
        os.remove(path)
    for step in remove:
        try:
            os.remove(path := f"{directory}/ckpt_{step}.pt")
        except FileNotFoundError:  # removed meanwhile by another pruner: what was wanted
            continue
        removed.append(path)
    return removed, [move_aside(f"{directory}/ckpt_{step}.pt", set_aside) for step in aside]


def move_aside(path: str, aside: str) -> str:
    """Moves ``path`` into the directory ``aside`` (a number in front of its name when one of that name
    is there already); returns where it went."""
    os.makedirs(aside, exist_ok=True)
    name = os.path.basename(path)
    target, n = os.path.join(aside, name), 1
    while os.path.exists(target):
        target, n = os.path.join(aside, f"{n}-{name}"), n + 1
    os.rename(path, target)
    return target


def set_aside_all(aside: str, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """(step, path) of every checkpoint ``move_aside`` put in ``aside``, by its name's ``pattern``."""
    found = [(SET_ASIDE_PREFIX.sub("", name), os.path.join(aside, name)) for name in _listdir(aside)]
    return sorted((int(m.group(1)), path) for name, path in found if (m := pattern.match(name)))


# The name each kind that saves with NxD's save_checkpoint gives a save's directory.
NXD_SAVE_NAMES = {"ray": NXD_NAME, "nxdt": NXDT_NAME}


def nxdt_saves(directory: str, kind: str = "nxdt") -> dict[int, str]:
    """Step -> name of each NxD checkpoint directory of ``kind`` in ``directory``."""
    saves = {}
    for name in _listdir(directory):
        if (match := NXD_SAVE_NAMES[kind].match(name)) and os.path.isdir(os.path.join(directory, name)):
            saves[int(match.group(1))] = name
    return saves


# What proves an NxD save whole, NxD Training's and Ray Train's alike (tp_zero1_llama_hf_pretrain.py
# l.339-351: synchronous, use_xser). NxD writes ``done`` once every rank has closed its files, but
# fsyncs nothing and keeps no checksum (neuronx-distributed fbac349 trainer/checkpoint_storage.py
# FilesysCheckpointStorage.save_object: torch.save to the final name; save_text: open/write; checkpoint.py
# CheckpointIOState.end: a rendezvous, then rank 0 writes ``done``). Every data file is a torch.save
# archive (save_object; with the config's save_xser each tensor is its own tensor_<n>.pt, beside the
# reference data and its .info.pt), whose members carry CRC-32s (see BERT above): a save counts once
# ``done`` is there and every file but NxD's two markers reads back whole. The config's synchronous saves
# write no other kind of file (async_checkpointing: False; checkpoint.py asserts DCP is async-only); a
# save with one fails the check. Another client's read of a lost writer's file gets what reached the
# servers, the pages the lost node never wrote back as holes (reasoning, not measured). Reading a 7B
# save takes minutes, so one rank reads it, once: the verdict is written into the save (fsynced,
# then renamed into place) with the size and mtime of every file it covered, and a changed file voids it.
NXDT_MARKERS = ("checkpoint", "done")
NXDT_VERIFIED, NXDT_TORN = "verified.json", "torn.json"
# Beside checkpoints/, not in it: exp_manager's check_resume globs checkpoints/ for *.ckpt, and NeMo's
# checkpoint callback counts every directory there as a save when it trims to save_top_k on a resumed
# start (NeMo nemo/utils/callbacks/nemo_model_checkpoint.py _saved_checkpoint_paths and
# nemo_topk_check_previous_run, as read in NeMo's source, not at the DLC's 2.1.0 tag). Ray Train's NxD
# counts as its saves the directories in checkpoints/ with a ``checkpoint`` file and trims those with
# ``done`` to --num_kept_checkpoint by time (neuronx-distributed fbac349 checkpoint_storage.py
# list_checkpoint_tags l.59-60, checkpoint.py _determine_remove_tags l.66-98): a torn save left there
# would be kept as the newest and a good one removed, and its own verdict would outlive a new save of
# its step in the same directory.
SET_ASIDE = "incomplete-checkpoints"
SET_ASIDE_PREFIX = re.compile(r"^\d+-")


def nxdt_listing(path: str) -> dict[str, list[int]]:
    """Every file of a save but the verdicts (and one a reader died writing): relative path -> [size,
    mtime in ns]."""
    found = {}
    for root, _dirs, files in os.walk(path, onerror=_raise):  # a directory it cannot list is no verdict
        for name in files:
            relative = os.path.relpath(os.path.join(root, name), path)
            if relative not in (NXDT_VERIFIED, NXDT_TORN, f"{NXDT_VERIFIED}.tmp", f"{NXDT_TORN}.tmp"):
                status = os.stat(os.path.join(root, name))
                found[relative] = [status.st_size, status.st_mtime_ns]
    return found


def nxdt_verdict(path: str) -> Optional[bool]:
    """What is recorded about a save: False without ``done``, torn, or gone (set aside); True read back
    whole and unchanged since; None when no one has read it yet (or it changed since)."""
    if not os.path.exists(os.path.join(path, "done")) or os.path.exists(os.path.join(path, NXDT_TORN)):
        return False
    try:
        recorded = json.loads(_read(os.path.join(path, NXDT_VERIFIED)) or "null")
    except ValueError:
        return None
    return True if recorded is not None and recorded == nxdt_listing(path) else None


def _write_durably(path: str, text: str) -> None:
    with open(f"{path}.tmp", "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(f"{path}.tmp", path)
    directory = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def nxdt_read_back(path: str) -> bool:
    """Reads every data file of a save back against its CRC-32s and records the verdict in it; a read
    the file system fails records nothing and raises (bert_readable)."""
    listing = nxdt_listing(path)
    data = [relative for relative in listing if relative not in NXDT_MARKERS]
    whole = "done" in listing and bool(data) and all(bert_readable(os.path.join(path, r)) for r in data)
    _write_durably(os.path.join(path, NXDT_VERIFIED if whole else NXDT_TORN), json.dumps(listing if whole else {}))
    return whole


def nxdt_pick(directory: str, read: bool, poll_seconds: float = 1, kind: str = "nxdt") -> Optional[int]:
    """The step of the newest save that reads back whole (None: start afresh). The reader (rank 0) reads
    each save newest first until one passes, recording each verdict; every other rank waits for those
    verdicts instead of reading, so all ranks pick the same save."""
    saves = nxdt_saves(directory, kind)
    for step in sorted(saves, reverse=True):
        path = os.path.join(directory, saves[step])
        verdict = nxdt_verdict(path)
        while verdict is None:
            if read:
                verdict = nxdt_read_back(path)
            else:
                time.sleep(poll_seconds)
                verdict = nxdt_verdict(path)
        if verdict:
            return step
    return None


def nxdt_prune(directory: str, keep: int, kind: str = "nxdt") -> tuple[list[str], list[str]]:
    """Before an attempt starts (no writer runs): the newest save that reads back whole and the ``keep``
    - 1 complete ones before it stay. A failed save newer than it is moved beside ``directory`` (kept,
    out of exp_manager's and the callback's way, and out of the path of a save of the same step), since
    nothing newer vouches that it is lost for good; an incomplete one older than it is deleted, and so
    is one set aside earlier at its step or below (the pick was saved after it), as are complete ones
    beyond ``keep``. Returns what was removed and what was set aside."""
    import shutil

    saves, newest = nxdt_saves(directory, kind), nxdt_pick(directory, read=True, kind=kind)
    aside = os.path.join(os.path.dirname(directory.rstrip("/")), SET_ASIDE)
    removed, moved = [], []
    if newest is not None:
        for path in sorted(p for step, p in set_aside_all(aside, NXD_SAVE_NAMES[kind]) if step <= newest):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    # Older saves with ``done`` are kept unread (read only if ever picked), those found torn are not.
    complete = sorted((s for s in saves if newest is not None and s <= newest
                       and nxdt_verdict(os.path.join(directory, saves[s])) is not False), reverse=True)
    for step in sorted(saves):
        path = os.path.join(directory, saves[step])
        if newest is None or step > newest:
            moved.append(move_aside(path, aside))
        elif step not in complete[:keep]:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed, moved


def resume_args(kind: str, directory: str) -> list[str]:
    """The script arguments that continue from the newest complete checkpoint (none: start)."""
    if kind == "bert":
        readable = lambda s: bert_readable(f"{directory}/ckpt_{s}.pt")  # noqa: E731
        step = newest_complete(verified(bert_steps(directory), readable, 1))
        return [] if step is None else ["--resume_ckpt", "--resume_ckpt_path", f"{directory}/ckpt_{step}.pt"]
    if kind == "ray":  # one process on the head picks: it reads
        step = nxdt_pick(directory, read=True, kind="ray")
        return [] if step is None else ["--resume_ckpt", "--loading_step", str(step)]
    # NxD Training, the one kind left: rank 0 reads (its prune ran first), the other ranks wait for it.
    step = nxdt_pick(directory, read=os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0")
    if step is None:
        return []
    return [f"exp_manager.resume_from_checkpoint={hydra_escape(f'{directory}/{nxdt_saves(directory)[step]}')}"]


def hydra_escape(value: str) -> str:
    """``value`` as one Hydra override value: each special character backslash-escaped (hydra
    v1.2.0 escape_special_characters; OverrideLexer.g4 ESC, un-escaped by the visitor's
    ``text[1::2]``)."""
    return "".join("\\" + c if c in HYDRA_SPECIAL else c for c in value)


def prune(kind: str, directory: str, keep: int) -> list[str]:
    """Removes BERT's incomplete and surplus checkpoints (the script only counts its own run's; see
    bert_prune), and NxD Training's and Ray Train's (exp_manager would resume from an incomplete one,
    NxD would keep it among its newest; see nxdt_prune); sets aside those found torn that nothing
    newer vouches for. Returns what it removed."""
    removed, moved = bert_prune(directory, keep) if kind == "bert" else nxdt_prune(directory, keep, kind)
    for path in moved:
        print(f"set aside {path}: no checkpoint newer than it reads back whole", file=sys.stderr)
    return removed


# One writer per run directory: the process that trains there holds an exclusive flock(2) on LOCK_NAME
# for its whole life, and HOLDER_NAME says who it is. FSx is mounted with the `flock` option, so the
# lock is the file system's, cluster-wide (lustre-release v2_15_5 lustre/llite/file.c: ll_file_flock
# enqueues an LDLM_FLOCK lock on the MDS; without the option, ll_file_noflock answers ENOSYS).
LOCK_NAME, HOLDER_NAME = ".lock", ".lock-holder"
LOCK_POLL_SECONDS = 1


def holder(run_dir: str) -> dict[str, Any]:
    """What the lock's holder recorded when it took the lock ({} when nothing readable is there)."""
    try:
        record = json.loads(_read(f"{run_dir}/{HOLDER_NAME}") or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def describe(record: dict[str, Any]) -> str:
    if not record.get("owner"):
        return "a process that left no holder record"
    return f"job {record['owner']} (pod {record.get('pod')}, pid {record.get('pid')}, since {record.get('since')})"


def lock(fd: int, run_dir: str, owner: str, wait_seconds: float) -> Optional[str]:
    """Takes the exclusive lock on ``fd``, the lock file as the calling shell opened it: the lock belongs
    to that open file, so it is held until every process holding that descriptor (the shell, what it
    execs, children that inherit it) has exited; see RUN_ATTEMPT_ENV for the ones that do not. Then records ``owner`` (the job: the same for all its attempts) and this pod in
    HOLDER_NAME. None when taken, else why not. Held by another job: refused at once. Held under
    ``owner`` itself: an earlier attempt of this job on a node that was lost, whose lock Lustre drops
    only when it evicts that client; tried again for ``wait_seconds`` before refusing."""
    give_up = time.time() + wait_seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = holder(run_dir)
            if record.get("owner") != owner:
                return (f"run directory {run_dir} is in use by {describe(record)}: one job writes a run "
                        f"directory at a time, so this job ({owner}) stops before it overwrites or prunes that "
                        "job's checkpoints. Let that job end first, or give this one its own run directory")
            if time.time() >= give_up:
                return (f"run directory {run_dir} is still locked by an earlier attempt of this job, "
                        f"{describe(record)}, after {int(wait_seconds)} s: a lost node keeps its lock until "
                        "Lustre evicts its client")
            time.sleep(max(0.0, min(LOCK_POLL_SECONDS, give_up - time.time())))
            continue
        except OSError as error:
            return (f"cannot lock run directory {run_dir} ({error}): the file system must support flock(2) "
                    "(FSx for Lustre mounted with the flock option)")
        break
    record = {"owner": owner, "pod": os.uname().nodename, "pid": os.getppid(),
              "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    with open(f"{run_dir}/{HOLDER_NAME}.tmp", "w") as f:
        json.dump(record, f)
    os.replace(f"{run_dir}/{HOLDER_NAME}.tmp", f"{run_dir}/{HOLDER_NAME}")
    return None


# An attempt's processes carry RUN_ATTEMPT_ENV = "<run dir> <attempt>" (inherited by everything it
# starts: torchrun's agent gives each worker a copy of its own environment). The workers do not hold
# the lock's descriptor (started with their other descriptors closed), and torch 2.x's agent starts
# them in sessions of their own, out of reach of signals to the rank's process group; where the
# container outlives an attempt (NxD Training's worker pods, whose ranks mpirun starts over ssh), an agent
# killed with SIGKILL leaves them running, still writing the run directory and holding the
# NeuronCores. ``reap`` ends them before the next attempt in that container starts.
RUN_ATTEMPT_ENV = "TRAINING_RUN_ATTEMPT"


def reap(run_dir: str, attempt: str, grace_seconds: float, proc: str = "/proc") -> list[int]:
    """Ends every process whose RUN_ATTEMPT_ENV names ``run_dir`` and another attempt: SIGTERM, then
    SIGKILL after ``grace_seconds``. Returns their pids."""
    import signal

    def leftovers() -> list[int]:
        found = []
        for entry in os.listdir(proc):
            if not entry.isdigit():
                continue
            try:
                with open(f"{proc}/{entry}/environ", "rb") as f:
                    variables = f.read().split(b"\0")
            except OSError:  # gone meanwhile, or not ours to read
                continue
            prefix = f"{RUN_ATTEMPT_ENV}={run_dir} ".encode()
            for variable in variables:
                if variable.startswith(prefix) and variable != prefix + attempt.encode():
                    found.append(int(entry))
        return found

    ended = leftovers()
    for sig, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 10.0)):
        for pid in leftovers():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        give_up = time.time() + wait
        while leftovers() and time.time() < give_up:
            time.sleep(0.1)
    for pid in leftovers():  # stuck in the kernel (a device driver): the attempt may not get its cores
        print(f"process {pid} of an earlier attempt in {run_dir} survived SIGKILL", file=sys.stderr)
    return ended


# examples/train.sh (neuronx-distributed-training 9169aa0) ends with torchrun's Hydra overrides, the
# last of them this line; the overrides a run needs go before it, one shell word each (a Hydra-escaped
# value has backslashes), and the resumable copy runs in its place. The config's callback keeps the
# save_top_k checkpoints of the highest step (megatron_llama_7B_config.yaml: monitor step, mode max).
NXDT_LAST_OVERRIDE = "    exp_manager.explicit_log_dir=$EXPLICIT_LOGDIR   2>&1  | tee -a $LOG_PATH/log"
NXDT_SCRIPT, NXDT_RESUMABLE = "train.sh", "train_resumable.sh"


def nxdt_script(train_sh: str, overrides: list[str]) -> str:
    """train.sh with ``overrides`` added to torchrun's; refused when the pinned line is not there once."""
    if train_sh.count(NXDT_LAST_OVERRIDE) != 1:
        raise ValueError(f"expected {NXDT_LAST_OVERRIDE!r} once in the pinned train.sh")
    lines = "".join(f"    {shlex.quote(o)} \\\n" for o in overrides)
    return train_sh.replace(NXDT_LAST_OVERRIDE, lines + NXDT_LAST_OVERRIDE)


def write_nxdt_script(overrides: list[str], every: int = 0, keep: int = 0, checkpoints: str = "") -> None:
    """In the examples directory (mpirun's -wdir): train_resumable.sh, with ``overrides`` and, for a
    training run (``every`` > 0), checkpoints every ``every`` steps, ``keep`` kept, and the resume."""
    if every > 0:
        overrides = [*overrides, f"exp_manager.checkpoint_callback_params.every_n_train_steps={every}",
                     f"exp_manager.checkpoint_callback_params.save_top_k={keep}",
                     *resume_args("nxdt", checkpoints)]
    with open(NXDT_RESUMABLE, "w") as f:
        f.write(nxdt_script(_read(NXDT_SCRIPT), overrides))
    os.chmod(NXDT_RESUMABLE, 0o755)


def observe(state: Optional[dict[str, Any]], step: Optional[int], now: float,
            attempt: Optional[tuple[str, float]] = None) -> dict[str, Any]:
    """The probe's memory: the step last seen, since when, and whether it has moved in this attempt
    (a step left by an earlier attempt counts as no progress yet). ``attempt``: the id and start of
    the attempt running in the container, where the container outlives attempts (MPIJob workers);
    a new one starts the count afresh, from its start."""
    key = attempt[0] if attempt else None
    if state is None or state.get("attempt") != key:
        return {"step": step, "since": attempt[1] if attempt else now, "advanced": False, "attempt": key}
    if step != state["step"]:
        return {**state, "step": step, "since": now, "advanced": True}
    return state


def stalled(state: dict[str, Any], now: float, first_step_seconds: int, hang_seconds: int) -> Optional[str]:
    """Why the run counts as hung, or None."""
    limit = hang_seconds if state["advanced"] else first_step_seconds
    if now - state["since"] <= limit:
        return None
    what = f"step {state['step']}" if state["advanced"] else "no new step since the attempt started"
    return f"training hung: {what}, unchanged for {int(now - state['since'])} s (limit {limit} s)"


def beat(lines: Iterable[bytes], kind: str, heartbeat: str, out: Any) -> None:
    """Copies ``lines`` (bytes) to ``out``; rewrites ``heartbeat`` with each step line. Never
    raises on what it reads or on the heartbeat's file system: the training output must keep
    flowing (a dead filter closes the pipe the trainer writes to), and under pipefail a failed
    filter would fail a run that succeeded. A heartbeat it cannot write is a missed beat."""
    pattern = re.compile(STEP_PATTERNS[kind])
    for line in lines:
        out.write(line)
        out.flush()
        if pattern.search(line.decode(errors="replace")):
            try:
                with open(heartbeat + ".tmp", "wb") as f:
                    f.write(line)
                os.replace(heartbeat + ".tmp", heartbeat)
            except OSError:
                pass


def running_attempt(marker: str) -> Optional[tuple[str, float]]:
    """The attempt a job's command announced in ``marker`` (its process id, written at its start):
    (id, start time) while that process is alive in this container, else None."""
    try:
        pid, started = int(_read(marker).strip() or 0), os.path.getmtime(marker)
    except (OSError, ValueError):
        return None
    return (f"{pid}@{started}", started) if pid > 0 and _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:  # a zombie (exited, not reaped yet) is no attempt
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# KubeRay v1.7.0 common/pod.go initLivenessAndReadinessProbe: a worker's own liveness check (Ray
# 2.53 and later) is HTTP GET http://localhost:52365/api/healthz, the dashboard agent's node health,
# 503 unless the raylet answers (utils/constant.go DefaultDashboardAgentListenPort, RayNodeHealthPath;
# Ray 2.55.1 dashboard/modules/reporter/healthz_agent.py unified_health); it adds it only when the container has
# no livenessProbe, so a probe that replaces it runs the same check, with the same patience: KubeRay
# fails after 120 failed reads 5 s apart (DefaultLivenessProbeFailureThreshold, ...PeriodSeconds),
# 10 minutes, which also covers the raylet's start; the kubelet adds our probe's 3 reads 60 s apart.
HEALTH_GRACE_SECONDS = 600 - 3 * 60


def unhealthy(url: str, timeout: float = 10) -> Optional[str]:
    """Why the health endpoint at ``url`` does not answer success, or None."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            if b"success" in response.read():
                return None
            return f"{url} did not answer success"
    except OSError as error:
        return f"{url} unreachable: {error}"


def unhealthy_for_long(url: str, since_file: str, now: float) -> Optional[str]:
    """``unhealthy(url)`` once it has lasted HEALTH_GRACE_SECONDS (``since_file`` keeps its start)."""
    problem = unhealthy(url)
    if problem is None:
        if os.path.exists(since_file):
            os.remove(since_file)
        return None
    if not os.path.exists(since_file):
        with open(since_file, "w") as f:
            f.write(str(now))
    failing = now - float(_read(since_file) or now)
    return f"{problem} for {int(failing)} s" if failing > HEALTH_GRACE_SECONDS else None


def probe(kind: str, heartbeat: str, state_file: str, first_step_seconds: int, hang_seconds: int, now: float,
          attempt_marker: str = "", health_url: str = "") -> Optional[str]:
    """The liveness verdict. With ``attempt_marker``, only an attempt running in this container is
    watched: none running (between attempts, before the first) passes, and the launcher's retries
    and the job's deadline bound that time."""
    if health_url and (problem := unhealthy_for_long(health_url, state_file + ".health", now)):
        return problem
    attempt = None
    if attempt_marker and (attempt := running_attempt(attempt_marker)) is None:
        return None
    saved = json.loads(_read(state_file)) if os.path.exists(state_file) else None
    state = observe(saved, last_step(_read(heartbeat, TAIL_BYTES), kind), now, attempt)
    with open(state_file, "w") as f:
        json.dump(state, f)
    return stalled(state, now, first_step_seconds, hang_seconds)


def _raise(error: OSError) -> None:
    raise error


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
    if command == "resume":  # resume <kind> <checkpoint dir>: print the arguments
        print(" ".join(resume_args(kind, *rest)))
    elif command == "prune":  # prune <kind> <checkpoint dir> <keep>
        for path in prune(kind, rest[0], int(rest[1])):
            print(f"removed {path}", file=sys.stderr)
    elif command == "lock":  # lock <kind> <fd> <run dir> <owner> <wait s>: see lock()
        refused = lock(int(rest[0]), rest[1], rest[2], float(rest[3]))
        if refused:
            print(refused, file=sys.stderr)
            return 1
    elif command == "reap":  # reap <kind> <run dir> <attempt> <grace s>: see reap()
        for pid in reap(rest[0], rest[1], float(rest[2])):
            print(f"ended process {pid}, left by an earlier attempt in {rest[0]}", file=sys.stderr)
    elif command == "nxdt-script":  # nxdt-script nxdt <every> <keep> <checkpoint dir> <override>...
        write_nxdt_script(rest[3:], int(rest[0]), int(rest[1]), rest[2])
    elif command == "beat":  # beat <kind> <heartbeat file>: a filter on the training output
        beat(iter(sys.stdin.buffer.readline, b""), kind, rest[0], sys.stdout.buffer)
    elif command == "probe":  # probe <kind> <heartbeat> <state file> <first step s> <hang s> [--attempt F] [--health URL]
        options = dict(zip(rest[4::2], rest[5::2]))
        verdict = probe(kind, rest[0], rest[1], int(rest[2]), int(rest[3]), time.time(),
                        options.get("--attempt", ""), options.get("--health", ""))
        if verdict:
            print(verdict)  # the kubelet puts this in the pod's Unhealthy event
            return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as error:  # e.g. a checkpoint the file system would not read: no verdict, nothing removed
        print(f"resilience.py {sys.argv[1]}: {error}: this attempt ends here", file=sys.stderr)
        sys.exit(1)
