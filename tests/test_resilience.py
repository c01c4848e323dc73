"""Resume from the newest complete checkpoint, bounded whole-gang restarts, and hang detection:
the pod-side functions (workloads/resilience.py) on real files, the
shell around the training command run for real, and what each job kind declares."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sysconfig
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from infra.facts import versions
from offline.plan.runner import PlanResult
from tests.test_workload_config import refusal
from tests.test_workloads import manifest
from tools.push_images import BUILD_ARGS
from workloads import bert_launch, resilience, resumable

# What the pinned scripts print, copied from them.
# aws-neuron-samples d6e1754 dp_bert_large_hf_pretrain_hdf5.py l.152 (Logger.log), and the same
# line from data-on-eks a32d9f2 llama2_pretrain/logger.py l.64 (Ray prefixes a worker's output).
# The scripts' `python3` is the base interpreter this virtualenv was made from: the standard
# library only, as the resilience script must need (the images bring their own Python), and not a
# version manager's shim found on PATH, which starts bash and another process first (pyenv's).
SCRIPT_PATH = f"{sysconfig.get_config_var('BINDIR')}:{os.environ['PATH']}"
BERT_LINE = (
    "LOG Tue Nov 24 21:00:00 2026 - (0, {step}) step_loss : 9.1234 learning_rate : 1.00e-04 throughput : 812.00 \n"
)
RAY_LINE = "(RayTrainWorker pid=4242, ip=10.0.1.7) " + BERT_LINE


def tqdm_format_num(n: float) -> str:
    """tqdm (tqdm/tqdm v4.66.1 tqdm/std.py) format_num: 3 significant digits, exponent when shorter."""
    f = f"{n:.3g}".replace("+0", "+").replace("-0", "-")
    return f if len(f) < len(str(n)) else str(n)


def lightning_format_num(n: float) -> str:
    """Lightning's Tqdm.format_num (lightning 2.5.0, the DLC's nxdt_requirements.txt: pytorch/callbacks/
    progress/tqdm_progress.py): tqdm's, then floats padded to 5 characters unless in exponent form."""
    text = tqdm_format_num(n)
    if "e" not in text:
        if "." not in text and len(text) < 5:
            text += "."
        text += "0" * (5 - len(text))
    return text


def lightning_bar(batch: int, total: int | None = None) -> str:
    """One redraw of Lightning's main progress bar (TQDMProgressBar: description "Epoch <n>", n set
    to the batch on every batch) as tqdm v4.66.1 format_meter draws it with and without a total, with
    the prog_bar metrics NxD Training's tutorial shows (global_step and consumed_samples as floats:
    neuronx-distributed-training docs/tutorials/megatron_gpt_pretraining.rst), redrawn with a
    carriage return."""
    metrics = {"loss": 9.1, "reduced_train_loss": 9.1, "global_step": float(batch), "consumed_samples": batch * 256.0}
    postfix = "loss=9.1, v_num=, " + ", ".join(
        f"{k}={lightning_format_num(v)}" for k, v in metrics.items() if k != "loss"
    )
    if total is None:
        return f"Epoch 0: {batch}it [01:02:03, 3.01s/it, {postfix}]\r"
    return f"Epoch 0: {100 * batch / total:3.0f}%|██        | {batch}/{total} [01:02:03<3:04:05, 3.01s/it, {postfix}]\r"


def torch_save_like(path: Path, size: int = 4096, cut: bool = False) -> None:
    """torch.save writes a zip archive (PyTorchStreamWriter) whose central directory comes last; a
    save cut short by a dying pod lacks it."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", os.urandom(size))
    if cut:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def tear_like_a_lost_node(path: Path) -> None:
    """A save closed but not flushed: pages the node never wrote back read as zeros, here in the
    middle of the member's data, while the central directory at the end arrived."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle - 512 : middle + 512] = bytes(1024)
    path.write_bytes(bytes(data))


def cut_short(path: Path) -> None:
    """A save the dying pod never finished: no central directory at the end."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", [cut_short, tear_like_a_lost_node])
def test_bert_resumes_from_the_newest_checkpoint_that_reads_back_whole(tmp_path: Path, damage) -> None:
    """The script's own --resume_ckpt takes the highest ckpt_<n>.pt, whole or not (l.461-463): the
    pick goes to --resume_ckpt_path instead. is_zipfile sees only the end-of-central-directory
    record, which a torn save still has; the CRC-32 torch.save recorded per member shows its holes."""
    assert resilience.resume_args("bert", str(tmp_path)) == []  # first attempt: from step 0
    for step in (400, 800, 1200):
        torch_save_like(tmp_path / f"ckpt_{step}.pt")
    damage(tmp_path / "ckpt_1200.pt")  # the save the node died in
    assert zipfile.is_zipfile(tmp_path / "ckpt_1200.pt") == (damage is tear_like_a_lost_node)
    assert not resilience.bert_readable(str(tmp_path / "ckpt_1200.pt"))
    assert resilience.bert_readable(str(tmp_path / "ckpt_800.pt"))
    assert resilience.bert_steps(str(tmp_path)) == [1200, 400, 800]
    assert resilience.resume_args("bert", str(tmp_path)) == [
        "--resume_ckpt",
        "--resume_ckpt_path",
        f"{tmp_path}/ckpt_800.pt",
    ]
    # The script keeps N only among its own run's saves (a deque, l.594-600): the next attempt drops
    # what is beyond N across attempts, keeping `keep` checkpoints that read back whole (800, although
    # 1200 is newer), and sets the damaged one aside (nothing newer passed), out of the way of the
    # resumed run's own save of step 1200.
    assert resilience.prune("bert", str(tmp_path), 1) == [f"{tmp_path}/ckpt_400.pt"]
    assert sorted(os.listdir(tmp_path)) == ["ckpt_800.pt", "incomplete-checkpoints"]
    assert os.listdir(tmp_path / "incomplete-checkpoints") == ["ckpt_1200.pt"]


def test_a_torn_local_header_is_no_checkpoint_either(tmp_path: Path) -> None:
    torch_save_like(tmp_path / "ckpt_5.pt")
    data = bytearray((tmp_path / "ckpt_5.pt").read_bytes())
    data[:64] = bytes(64)  # the first page lost: zipfile raises on the member's header
    (tmp_path / "ckpt_5.pt").write_bytes(bytes(data))
    assert zipfile.is_zipfile(tmp_path / "ckpt_5.pt")
    assert resilience.resume_args("bert", str(tmp_path)) == []


def test_only_as_many_checkpoints_are_read_back_as_are_kept_or_picked() -> None:
    # Each read is a whole checkpoint (gigabytes on Lustre): newest first, stop once enough pass.
    read: list[int] = []

    def verify(step: int) -> bool:
        read.append(step)
        return step not in (300, 400)

    steps = [100, 200, 300, 400]
    assert resilience.verified(steps, verify, 1) == {400: False, 300: False, 200: True, 100: None}
    assert read == [400, 300, 200]
    read.clear()
    assert resilience.verified(steps, verify, 2) == {400: False, 300: False, 200: True, 100: True}
    assert read == [400, 300, 200, 100]
    read.clear()
    assert resilience.verified(steps, verify, 0) == dict.fromkeys(steps) and read == []


def test_selection_and_pruning_rules() -> None:
    """Removed: what is older than a checkpoint that passed, torn or beyond the kept; set aside: what is
    found torn while nothing newer passed."""
    verdicts = {50: None, 100: True, 150: False, 200: True, 300: False}
    assert resilience.newest_complete(verdicts) == 200
    assert resilience.newest_complete({300: False}) is None
    assert resilience.disposal(verdicts) == ([50, 150], [300])
    assert resilience.disposal({100: False, 300: False}) == ([], [100, 300])


def test_bert_deletes_a_torn_checkpoint_only_once_a_newer_one_passes(tmp_path: Path) -> None:
    """The prune as the pods run it (resilience.py as a program): a torn newest checkpoint with nothing
    newer that reads back whole is set aside, never deleted, and goes once a newer save passes."""
    tear_like_a_lost_node(torn := torch_save_like(tmp_path / "ckpt_400.pt") or tmp_path / "ckpt_400.pt")
    run = run_resilience("prune", "bert", str(tmp_path), "2")
    assert run.returncode == 0 and "removed" not in run.stderr, run.stderr
    aside = tmp_path / "incomplete-checkpoints"
    assert not torn.exists() and (aside / "ckpt_400.pt").read_bytes()
    assert run_resilience("resume", "bert", str(tmp_path)).stdout.strip() == ""  # from step 0
    # The run saves 400 again, torn again, then 800 whole: the two set aside at or below 800 go.
    torch_save_like(torn)
    tear_like_a_lost_node(torn)
    run = run_resilience("prune", "bert", str(tmp_path), "2")
    assert run.returncode == 0 and sorted(os.listdir(aside)) == ["1-ckpt_400.pt", "ckpt_400.pt"], run.stderr
    torch_save_like(tmp_path / "ckpt_800.pt")
    run = run_resilience("prune", "bert", str(tmp_path), "2")
    assert run.returncode == 0, run.stderr
    assert os.listdir(aside) == [] and sorted(os.listdir(tmp_path)) == ["ckpt_800.pt", "incomplete-checkpoints"]


@pytest.mark.parametrize("unreadable", ["fifo", "directory"])
def test_a_checkpoint_the_file_system_will_not_read_is_neither_deleted_nor_passed_over(
    tmp_path: Path, unreadable: str
) -> None:
    """An I/O error says nothing about the bytes (a Lustre EIO, an evicted client): the attempt ends
    (exit 1, the file named) and the next one reads again; nothing is removed, set aside or picked past
    it. The errors are the kernel's, as a failed read on FSx would be: opening a directory (EISDIR), or
    seeking in a FIFO (ESPIPE; held open for writing here, so that the open does not wait)."""
    for step in (100, 200):
        torch_save_like(tmp_path / f"ckpt_{step}.pt")
    newest = tmp_path / "ckpt_300.pt"
    if unreadable == "fifo":
        os.mkfifo(newest)
        writer = os.open(newest, os.O_RDWR)
    else:
        newest.mkdir()
    try:
        for command in (["prune", "bert", str(tmp_path), "1"], ["resume", "bert", str(tmp_path)]):
            run = run_resilience(*command)
            assert run.returncode == 1 and str(newest) in run.stderr and "attempt ends" in run.stderr, run
            assert run.stdout == "" and "Traceback" not in run.stderr
            assert sorted(os.listdir(tmp_path)) == ["ckpt_100.pt", "ckpt_200.pt", "ckpt_300.pt"]
    finally:
        if unreadable == "fifo":
            os.close(writer)


def run_resilience(*args: str) -> subprocess.CompletedProcess[str]:
    """resilience.py run as the pods run it, a program on the base interpreter."""
    script = Path(resilience.__file__)
    return subprocess.run(["python3", str(script), *args], env={"PATH": SCRIPT_PATH}, capture_output=True,
                          text=True, timeout=30)  # fmt: skip


# One data file of each kind a Ray Train save holds (below).
RAY_SAVE_FILES = (
    "optim/dp_rank_00_tp_rank_00_pp_rank_00.pt",
    "optim/dp_rank_00_tp_rank_00_pp_rank_00.pt.tensors/tensor_0.pt",
    "model/dp_rank_00_tp_rank_00_pp_rank_00.pt",
    "model/dp_rank_00_tp_rank_00_pp_rank_00.pt.info.pt",
    "model/dp_rank_00_tp_rank_00_pp_rank_00.pt.tensors/tensor_0.pt",
    "scheduler.pt",
    "user_content.pt",
)
RAY_SHARD = RAY_SAVE_FILES[-3]


def ray_save(checkpoints: Path, step: int, done: bool = True) -> Path:
    """A save as Ray Train's script has NxD write it (aws-neuron/neuronx-distributed fbac349
    tp_zero1_llama_hf_pretrain.py l.339-351: save_checkpoint(checkpoint_dir, "step_<n>", model, optimizer,
    scheduler, user_content, use_xser=True), synchronous; trainer/checkpoint.py l.737-824): the tag's
    ``checkpoint`` marker, torch.save archives for the ZeRO-1 optimizer's and the model's reference data
    and each of their tensors, the scheduler and the user content, ``done`` last (l.190-196)."""
    directory = checkpoints / f"step_{step}"
    directory.mkdir(parents=True)
    (directory / "checkpoint").write_text("1")
    for name in RAY_SAVE_FILES:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        torch_save_like(directory / name)
    if done:
        (directory / "done").write_text("1")
    return directory


def test_ray_resumes_from_the_newest_save_that_reads_back_whole_never_one_with_done_alone(tmp_path: Path) -> None:
    """NxD writes ``done`` once every rank has closed its files and fsyncs nothing (checkpoint_storage.py
    l.188-195): a save whose pages a lost node never wrote back has ``done`` and holes. The prune and the
    resume, run as the head runs them, read the saves back as NxD Training's (nxdt_pick): the torn save
    and the cut one are set aside beside checkpoints/, out of NxD's own count (list_checkpoint_tags, by
    mtime) and of the resumed run's saves of the same steps; the script loads step_<loading_step>."""
    checkpoints = tmp_path / "checkpoints"
    assert run_resilience("resume", "ray", str(checkpoints)).stdout == "\n"  # first attempt: from step 0
    older, good = ray_save(checkpoints, 100), ray_save(checkpoints, 200)
    tear_like_a_lost_node((torn := ray_save(checkpoints, 300)) / RAY_SHARD)
    cut = ray_save(checkpoints, 400, done=False)  # the save the pod died in
    (checkpoints / "step_500").write_text("a file, not a checkpoint")

    pruned = run_resilience("prune", "ray", str(checkpoints), "2")
    assert pruned.returncode == 0 and "removed" not in pruned.stderr, pruned.stderr
    aside = tmp_path / "incomplete-checkpoints"
    assert sorted(p.name for p in aside.iterdir()) == [torn.name, cut.name]
    assert (aside / torn.name / "torn.json").exists() and (good / "verified.json").exists()
    assert sorted(p.name for p in checkpoints.iterdir()) == [older.name, good.name, "step_500"]
    resumed = run_resilience("resume", "ray", str(checkpoints))
    assert resumed.returncode == 0 and resumed.stdout.split() == ["--resume_ckpt", "--loading_step", "200"]

    # The run goes on from 200 and saves step_300 and step_400 again, whole: once 400 passes, what was
    # set aside at or below it goes, and the saves beyond the 2 kept.
    again_300, again_400 = ray_save(checkpoints, 300), ray_save(checkpoints, 400)
    pruned = run_resilience("prune", "ray", str(checkpoints), "2")
    assert pruned.returncode == 0, pruned.stderr
    assert not list(aside.iterdir())
    assert sorted(p.name for p in checkpoints.iterdir()) == [again_300.name, again_400.name, "step_500"]
    assert run_resilience("resume", "ray", str(checkpoints)).stdout.split()[-1] == "400"


def test_a_ray_save_the_file_system_will_not_read_gets_no_verdict(tmp_path: Path) -> None:
    """A read that fails (here a FIFO in a data file's place, held open for writing so that the open does
    not wait: the kernel refuses its seeks) records nothing in the save and ends the attempt; the next
    attempt reads it again."""
    checkpoints = tmp_path / "checkpoints"
    ray_save(checkpoints, 100)
    newest = ray_save(checkpoints, 200)
    (newest / "user_content.pt").unlink()
    os.mkfifo(newest / "user_content.pt")
    writer = os.open(newest / "user_content.pt", os.O_RDWR)
    files = sorted(os.listdir(newest))
    try:
        for command in (["prune", "ray", str(checkpoints), "2"], ["resume", "ray", str(checkpoints)]):
            run = run_resilience(*command)
            assert run.returncode == 1 and f"{newest}/user_content.pt" in run.stderr, run
            assert sorted(os.listdir(newest)) == files  # no verdict written
            assert not (tmp_path / "incomplete-checkpoints").exists()
    finally:
        os.close(writer)
    (newest / "user_content.pt").unlink()
    torch_save_like(newest / "user_content.pt")  # readable again
    assert run_resilience("resume", "ray", str(checkpoints)).stdout.split()[-1] == "200"


# facebookresearch/hydra v1.2.0 hydra/grammar/OverrideLexer.g4, VALUE_MODE: each token's
# alternatives. ANTLR takes the longest match, the first rule on a tie. hydra-core is not in the
# project's environment (1.2.0 does not import on Python 3.11), so the lexer is written out here.
_INT_UNSIGNED = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT_FLOAT = [_INT_UNSIGNED + r"\.", f"(?:{_INT_UNSIGNED})?" + r"\.[0-9](?:_?[0-9])*"]
_EXPONENT = r"[eE][+-]?[0-9](?:_?[0-9])*"
HYDRA_VALUE_TOKENS = [
    ("POPEN", [r"[ \t]*\([ \t]*"]),
    ("COMMA", [r"[ \t]*,[ \t]*"]),
    ("PCLOSE", [r"[ \t]*\)"]),
    ("BRACKET_OPEN", [r"\[[ \t]*"]),
    ("BRACKET_CLOSE", [r"[ \t]*\]"]),
    ("BRACE_OPEN", [r"\{[ \t]*"]),
    ("BRACE_CLOSE", [r"[ \t]*\}"]),
    ("COLON", [r"[ \t]*:[ \t]*"]),
    ("EQUAL", [r"[ \t]*=[ \t]*"]),
    (
        "FLOAT",
        [
            f"[+-]?(?:{x})"
            for x in [
                *_POINT_FLOAT,
                *(f"(?:{b}){_EXPONENT}" for b in [_INT_UNSIGNED, *_POINT_FLOAT]),
                "[Ii][Nn][Ff]",
                "[Nn][Aa][Nn]",
            ]
        ],
    ),
    ("INT", [r"[+-]?" + _INT_UNSIGNED]),
    ("BOOL", [r"(?i:true|false)"]),
    ("NULL", [r"(?i:null)"]),
    ("UNQUOTED_CHAR", [r"[/\-\\+.$%*@?|]"]),
    ("ID", [r"[a-zA-Z_][a-zA-Z0-9_]*"]),
    ("ESC", [r"(?:\\\\|\\[()\[\]{}:=, \t])+"]),
    ("WS", [r"[ \t]+"]),
    ("INTERPOLATION", [r"\$\{[^}]+\}"]),
]
# OverrideParser.g4 `primitive`: the tokens an unquoted value may be made of.
HYDRA_PRIMITIVE = {"ID", "NULL", "INT", "FLOAT", "BOOL", "INTERPOLATION", "UNQUOTED_CHAR", "COLON", "ESC", "WS"}


def hydra_value(text: str) -> str:
    """The string Hydra makes of an unquoted override value: refused unless every token is a
    primitive's; ESC tokens un-escaped by skipping every other character, the rest joined
    (hydra v1.2.0 core/override_parser/overrides_visitor.py _createPrimitive)."""
    out, at = [], 0
    while at < len(text):
        length, name = max(
            (len(m.group()), -i, name)
            for i, (name, alternatives) in enumerate(HYDRA_VALUE_TOKENS)
            for alt in alternatives
            if (m := re.compile(alt).match(text, at))
        )[::2]
        assert name in HYDRA_PRIMITIVE, f"{name} token at {text[at : at + length]!r} in {text!r}"
        out.append(text[at : at + length][1::2] if name == "ESC" else text[at : at + length])
        at += length
    return "".join(out)


def test_the_resume_override_reaches_hydra_as_the_checkpoint_path(tmp_path: Path) -> None:
    r"""A real NxD Training checkpoint name (megatron_llama_7B_config.yaml filename
    'megatron_llama--{step}-{consumed_samples}', Lightning inserting `step=`): written into
    train_resumable.sh, read back by bash, then lexed as Hydra's override grammar does. Unescaped,
    the second `=` is an EQUAL token the parser refuses ("mismatched input '='")."""
    from tests.test_nxd_llama import TRAIN_SH

    path = "/shared/nemo_experiments/run-0123456789ab/checkpoints/megatron_llama--step=12000-consumed_samples=3072000.0.ckpt"
    with pytest.raises(AssertionError, match="EQUAL"):
        hydra_value(path)  # the path unescaped
    for name in (path, path.replace(".ckpt", "-last.ckpt"), "/x/a b(c)[d]{e}:f,g\\h.ckpt"):
        override = f"exp_manager.resume_from_checkpoint={resilience.hydra_escape(name)}"
        script = resilience.nxdt_script(TRAIN_SH, [override])
        (line,) = [li for li in script.splitlines() if "resume_from_checkpoint" in li]
        shell_word = line.removesuffix("\\").strip()
        word = subprocess.run(["bash", "-c", "printf '%s\\n' " + shell_word], capture_output=True, text=True).stdout
        key, value = word.rstrip("\n").split("=", 1)
        assert key == "exp_manager.resume_from_checkpoint" and hydra_value(value) == name


@pytest.mark.parametrize(("kind", "text", "step"), [
    ("bert", BERT_LINE.format(step=7) + "Checkpointing...\n" + BERT_LINE.format(step=8), 8),
    ("ray", RAY_LINE.format(step=12), 12),
    ("nxdt", lightning_bar(3) + lightning_bar(4, 10000) + "Validation DataLoader 0: 100%|█| 1/1 [00:01<00:00]\n", 4),
    ("bert", "Rank 3 working on shard x\n", None),
])  # fmt: skip
def test_the_heartbeat_is_the_step_counter_the_scripts_print(kind: str, text: str, step: int | None) -> None:
    assert resilience.last_step(text, kind) == step


def test_the_heartbeat_reads_the_bars_integer_counter_not_the_rounded_global_step() -> None:
    """Past 10000 steps tqdm's format_num shows global_step with 3 significant digits (12000 ->
    1.2e+4), so a step read from it stood still for up to 101 steps, and from 100000 on for good;
    the bar's own counter is str(n), an integer, with or without a total."""
    assert "global_step=1.2e+4," in lightning_bar(12000) and "global_step=1e+5," in lightning_bar(100099)
    for steps in (range(10950, 11050), range(100000, 100100)):
        for total in (None, 2000000):
            log = "".join(lightning_bar(n, total) for n in steps)
            assert resilience.last_step(log, "nxdt") == steps[-1]
            assert (
                resilience.last_step(log + "Validation DataLoader 0:  50%|█████     | 5/10 [00:01<00:01]\r", "nxdt")
                == steps[-1]
            )


def test_the_heartbeat_reads_lightnings_own_bar_without_a_total() -> None:
    """Lightning's TQDMProgressBar draws with its own bar_format ("{l_bar}{bar}| {n_fmt}/{total_fmt}
    [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]", lightning 2.5.0 pytorch/callbacks/progress/
    tqdm_progress.py), where tqdm writes "?" for an unknown total."""
    redraws = "".join(f"Epoch 0: | {n}/? [01:02:03<?, 3.01s/it, loss=9.1, v_num=]\r" for n in (41, 42))
    assert resilience.last_step(redraws, "nxdt") == 42


def test_the_probe_fails_only_when_the_step_stops_advancing() -> None:
    first, hang = 3600, 1800
    state = resilience.observe(None, 500, 0)  # a step left by the attempt before
    assert resilience.stalled(state, 3600, first, hang) is None  # start-up gets firstStepTimeout
    assert "no new step since the attempt started" in resilience.stalled(state, 3601, first, hang)
    state = resilience.observe(state, 401, 3000)  # resumed from 400: any change is progress
    state = resilience.observe(state, 402, 3010)
    assert state == {"step": 402, "since": 3010, "advanced": True, "attempt": None}
    assert resilience.stalled(resilience.observe(state, 402, 4810), 4810, first, hang) is None
    verdict = resilience.stalled(resilience.observe(state, 402, 4811), 4811, first, hang)
    assert verdict == "training hung: step 402, unchanged for 1801 s (limit 1800 s)"


def test_the_probe_keeps_its_memory_in_the_container(tmp_path: Path) -> None:
    heartbeat, state = tmp_path / "heartbeat", tmp_path / "state.json"
    assert resilience.probe("bert", str(heartbeat), str(state), 600, 300, 1000.0) is None  # no heartbeat yet
    heartbeat.write_text(BERT_LINE.format(step=1))
    assert resilience.probe("bert", str(heartbeat), str(state), 600, 300, 1100.0) is None
    assert json.loads(state.read_text()) == {"step": 1, "since": 1100.0, "advanced": True, "attempt": None}
    assert resilience.probe("bert", str(heartbeat), str(state), 600, 300, 1401.0).startswith("training hung: step 1")


def test_in_a_container_that_outlives_attempts_the_clock_restarts_with_each_attempt(tmp_path: Path) -> None:
    """NxD Training's MPIJob workers are sshd containers that serve attempt after attempt: a new attempt gets
    firstStepTimeout from its own start, not the hang limit counted from the last attempt's last
    step; between attempts (none running) the probe passes."""
    heartbeat, state, marker = tmp_path / "log", tmp_path / "state.json", tmp_path / "attempt"
    first, hang = 3600, 1800

    def attempt(started: float) -> subprocess.Popen:
        process = subprocess.Popen(["sleep", "60"])
        marker.write_text(f"{process.pid}\n")
        os.utime(marker, (started, started))
        return process

    def verdict(now: float) -> str | None:
        return resilience.probe("nxdt", str(heartbeat), str(state), first, hang, now, str(marker))

    assert verdict(0) is None  # no attempt yet
    one = attempt(100)
    heartbeat.write_text(lightning_bar(10))
    assert verdict(160) is None and verdict(200) is None
    heartbeat.write_text(lightning_bar(10) + lightning_bar(11))
    assert verdict(260) is None  # advanced at 260
    one.kill(), one.wait()  # a rank crashed: mpirun and its ranks are gone
    assert verdict(260 + hang + 1) is None  # between attempts
    two = attempt(2000)  # the launcher's next mpirun; start-up prints nothing for a while
    try:
        assert verdict(2000 + hang + 1) is None  # the old attempt's last step does not count
        assert (
            verdict(2000 + first + 1)
            == f"training hung: no new step since the attempt started, unchanged for {first + 1} s (limit {first} s)"
        )
    finally:
        two.kill(), two.wait()
    assert verdict(2000 + first + 61) is None


def test_the_training_shell_resumes_writes_the_heartbeat_and_keeps_the_exit_status(tmp_path: Path) -> None:
    """The shell resumable.training_line builds, run for real with a stand-in for torchrun that
    echoes its arguments, prints two step lines and exits 3."""
    run_dir, heartbeat = tmp_path / "run", tmp_path / "run" / "heartbeat"
    run_dir.mkdir()
    torch_save_like(run_dir / "ckpt_20.pt")
    torch_save_like(run_dir / "ckpt_30.pt", cut=True)
    fake = tmp_path / "trainer"
    fake.write_text(
        '#!/bin/sh\necho "args: $*"\n'
        + "".join(f"echo '{BERT_LINE.format(step=s).strip()}'\n" for s in (21, 22))
        + "exit 3\n"
    )
    fake.chmod(0o755)
    writer = resumable.RunLock(str(run_dir), "default/bert-train")
    line = resumable.training_line(f"{fake} --output_dir {run_dir}", "bert", str(run_dir), str(heartbeat), 2, writer)
    result = subprocess.run(
        ["bash", "-c", line], env={"PATH": SCRIPT_PATH, **resumable.env()}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3, result.stderr  # pipefail: the trainer's status, not the filter's
    assert f"args: --output_dir {run_dir} --resume_ckpt --resume_ckpt_path {run_dir}/ckpt_20.pt" in result.stdout
    assert "(0, 22) step_loss" in result.stdout and resilience.last_step(heartbeat.read_text(), "bert") == 22
    # The cut save, newer than any that passed, is set aside; the lock file and its holder's record stay
    # (resilience.lock).
    assert sorted(os.listdir(run_dir)) == [".lock", ".lock-holder", "ckpt_20.pt", "heartbeat", "incomplete-checkpoints"]
    assert os.listdir(run_dir / "incomplete-checkpoints") == ["ckpt_30.pt"]


def test_a_failed_resume_look_up_ends_the_attempt_instead_of_training_from_step_0(tmp_path: Path) -> None:
    """An FSx error in the look-up (here: resilience.py failing on `resume`, `prune` or `lock`) must
    not start the trainer without its resume arguments, in the run directory it failed to read."""
    fake = tmp_path / "trainer"
    fake.write_text("#!/bin/sh\necho started\n")
    fake.chmod(0o755)
    run = str(tmp_path / "run")
    line = resumable.training_line(str(fake), "bert", run, f"{run}/heartbeat", 2, resumable.RunLock(run, "a/job"))
    for failing in ("resume", "prune", "lock"):
        script = f"import sys\nif sys.argv[1] == {failing!r}: sys.exit(2)\n"
        result = subprocess.run(
            ["bash", "-c", line],
            env={"PATH": SCRIPT_PATH, resumable.ENV_NAME: script},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1 and "started" not in result.stdout, (failing, result)


def test_the_heartbeat_filter_never_takes_the_training_output_down(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 and a heartbeat it cannot write (ENOSPC/EIO on FSx; here a missing
    directory) leave the output flowing and the filter's status 0, so pipefail reports the trainer's."""
    output = b"\xff\xfe not utf-8\n" + BERT_LINE.format(step=5).encode() + b"tail \xc3\n"
    result = subprocess.run(
        ["bash", "-c", resumable.call("beat", "bert", str(tmp_path / "missing" / "heartbeat"))],
        input=output,
        env={"PATH": SCRIPT_PATH, **resumable.env()},
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout == output, result.stderr
    ok = subprocess.run(
        ["bash", "-c", resumable.call("beat", "bert", str(tmp_path / "heartbeat"))],
        input=output,
        env={"PATH": SCRIPT_PATH, **resumable.env()},
        capture_output=True,
        timeout=60,
    )
    assert ok.stdout == output and resilience.last_step((tmp_path / "heartbeat").read_text(), "bert") == 5


def test_the_run_directory_follows_the_neuron_sdk_the_image_is_built_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new SDK's torch-neuronx / neuronx-distributed may not read the old one's checkpoints: a new
    base image starts a new run directory. The hashed image is the one the job's image is built from."""
    run = bert_launch.BertRun(nnodes=2, nproc_per_node=32)
    assert bert_launch.model_settings(run)["neuron_sdk_image"] == BUILD_ARGS["bert-pretrain"]["NEURON_DLC"]
    before = bert_launch.run_dir(run)
    monkeypatch.setattr(
        versions, "NEURON_DLC_PYTORCH_2_9", versions.NEURON_DLC_PYTORCH_2_9.replace("sdk2.30.0", "sdk2.31.0")
    )
    assert bert_launch.run_dir(run) != before


def test_a_change_to_model_settings_starts_a_new_run_directory() -> None:
    base = bert_launch.BertRun(nnodes=2, nproc_per_node=32)
    same = [
        bert_launch.BertRun(
            nnodes=2,
            nproc_per_node=32,
            steps_this_run=500,
            checkpoint_every_shards=3,
            checkpoints_to_keep=5,
            cacheset="other",
        )
    ]
    changed = [
        bert_launch.BertRun(nnodes=4, nproc_per_node=32),
        bert_launch.BertRun(nnodes=2, nproc_per_node=32, batch_size=8),
        bert_launch.BertRun(nnodes=2, nproc_per_node=32, bf16=False),
    ]
    assert re.fullmatch(r"/data/output/run-[0-9a-f]{12}", bert_launch.run_dir(base))
    assert {bert_launch.run_dir(r) for r in same} == {bert_launch.run_dir(base)}
    assert len({bert_launch.run_dir(r) for r in [base, *changed]}) == 4


def container(template: dict[str, Any]) -> dict[str, Any]:
    return template["spec"]["containers"][0]


def run_probe(probe: dict[str, Any], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        probe["exec"]["command"], env={"PATH": SCRIPT_PATH, **env}, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_bert_training_pods_carry_the_probe_and_volcano_restarts_the_gang(workloads_dev: PlanResult) -> None:
    """A probe failure kills the container; with restartPolicy Never the pod goes Failed and the
    PodFailed -> RestartJob policy restarts every task (volcano v1.15.1 job_controller_util.go
    applyPolicies), at most maxRetry attempts. The exit code is not `timeout`'s 124: coreutils
    src/timeout.c (v8.32, Ubuntu 22.04's, l.182-184 and l.573-574) sets timed_out only on its own
    SIGALRM and returns 124 only then, so the kubelet's SIGTERM is not taken for the deadline."""
    train = manifest(workloads_dev, "Job", "bert-train")["spec"]
    precompile = manifest(workloads_dev, "Job", "bert-precompile")["spec"]
    for task in train["tasks"]:
        assert task["template"]["spec"]["restartPolicy"] == "Never"
        assert {"event": "PodFailed", "action": "RestartJob"} in task["policies"]
        probe = container(task["template"])["livenessProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] <= 300
        assert "probe bert /data/output/run-" in probe["exec"]["command"][-1]
        assert "RESILIENCE_PY" in {e["name"] for e in container(task["template"])["env"]}
    assert train["maxRetry"] == 2  # dev: Pulumi.dev.yaml maxRetry
    assert all("livenessProbe" not in container(t["template"]) for t in precompile["tasks"])


def declared_probe(c: dict[str, Any], tmp_path: Path, root: str, **more: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A container's rendered probe with its FSx ``root`` and /tmp files under ``tmp_path``, and the
    container's own environment (where the kubelet runs it), nothing else."""
    text = (
        json.dumps(c["livenessProbe"])
        .replace(root, str(tmp_path))
        .replace(resumable.PROBE_STATE, str(tmp_path / "state.json"))
    )
    for old, new in more.items():
        text = text.replace(old, new)
    return json.loads(text), {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}


def assert_fails_on_a_stale_heartbeat(probe: dict[str, Any], env: dict[str, str], tmp_path: Path) -> None:
    started = run_probe(probe, env, tmp_path)
    assert started.returncode == 0, started  # starting: within firstStepTimeoutMinutes
    state = json.loads((tmp_path / "state.json").read_text())
    (tmp_path / "state.json").write_text(json.dumps({**state, "since": state["since"] - 3601 * 24}))
    stuck = run_probe(probe, env, tmp_path)
    assert stuck.returncode == 1 and stuck.stdout.startswith("training hung: no new step"), stuck
    # Without its variable the probe fails loudly; `python3 -c ""` would pass forever.
    missing = run_probe(probe, {}, tmp_path)
    assert missing.returncode != 0 and "RESILIENCE_PY: parameter null or not set" in missing.stderr


def test_the_declared_probe_command_runs(workloads_dev: PlanResult, tmp_path: Path) -> None:
    c = container(manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"][0]["template"])
    assert_fails_on_a_stale_heartbeat(*declared_probe(c, tmp_path, "/data/output"), tmp_path)


class NodeHealth(http.server.BaseHTTPRequestHandler):
    """A worker's dashboard agent at /api/healthz (Ray 2.55.1 dashboard/modules/reporter/healthz_agent.py
    unified_health): 200 with each check's result while the raylet is up, 503 once it is not."""

    raylet_up = True

    def do_GET(self) -> None:
        assert self.path == "/api/healthz", self.path
        raylet = "success" if self.raylet_up else "Local Raylet failed"
        self.send_response(200 if self.raylet_up else 503)
        self.end_headers()
        self.wfile.write(f"raylet: {raylet}\ngcs: success (no local gcs)".encode())

    def log_message(self, *_: Any) -> None:
        pass


def test_the_declared_ray_worker_probe_runs_with_the_workers_env(workloads_dev: PlanResult, tmp_path: Path) -> None:
    """The kubelet runs the probe in the ray-worker container with that container's env: the job's
    runtimeEnv reaches Ray's processes, not the container. The probe replaces KubeRay's own (kuberay
    v1.7.0 common/pod.go: injected only when livenessProbe is nil), so it also fails when the node's
    health endpoint reports the raylet down, or does not answer, for longer than KubeRay would wait."""
    spec = manifest(workloads_dev, "RayJob", "llama2-pretraining-job")["spec"]
    c = container(spec["rayClusterSpec"]["workerGroupSpecs"][0]["template"])
    server = http.server.HTTPServer(("127.0.0.1", 0), NodeHealth)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/api/healthz"
    health = tmp_path / "state.json.health"
    try:
        probe, env = declared_probe(c, tmp_path, "/shared/llama2_output", **{resumable.RAY_NODE_HEALTH_URL: url})
        assert resumable.RAY_NODE_HEALTH_URL in json.dumps(c["livenessProbe"])
        assert_fails_on_a_stale_heartbeat(probe, env, tmp_path)
        (tmp_path / "state.json").unlink()
        NodeHealth.raylet_up = False
        assert run_probe(probe, env, tmp_path).returncode == 0  # a raylet down for a moment: KubeRay waits too
        health.write_text(str(float(health.read_text()) - resilience.HEALTH_GRACE_SECONDS - 1))
        raylet_down = run_probe(probe, env, tmp_path)
        assert raylet_down.returncode == 1 and "HTTP Error 503" in raylet_down.stdout, raylet_down
    finally:
        NodeHealth.raylet_up = True
        server.shutdown()
        server.server_close()
    (tmp_path / "state.json").unlink()
    health.unlink()
    assert run_probe(probe, env, tmp_path).returncode == 0  # the raylet (and its agent) gone: KubeRay waits too
    health.write_text(str(float(health.read_text()) - resilience.HEALTH_GRACE_SECONDS - 1))
    down = run_probe(probe, env, tmp_path)
    assert down.returncode == 1 and "api/healthz unreachable" in down.stdout


def test_the_declared_nxd_worker_probe_watches_the_attempt_its_rank_announced(
    workloads_all: PlanResult, tmp_path: Path
) -> None:
    spec = manifest(workloads_all, "MPIJob", "llama2-train")["spec"]["mpiReplicaSpecs"]
    c = container(spec["Worker"]["template"])
    marker = tmp_path / "attempt"
    probe, env = declared_probe(c, tmp_path, "/shared/nemo_experiments", **{resumable.ATTEMPT_MARKER: str(marker)})
    assert run_probe(probe, env, tmp_path).returncode == 0 and not (tmp_path / "state.json").exists()  # no attempt yet
    # The rank command announces itself in the worker container before anything else.
    rank = container(spec["Launcher"]["template"])["command"][-1]
    assert rank.startswith(resumable.announce_attempt() + " && ")
    attempt = subprocess.Popen(
        [
            "bash",
            "-c",
            resumable.announce_attempt().replace(resumable.ATTEMPT_MARKER, str(marker)) + " && exec sleep 60",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while not (marker.exists() and marker.read_text().strip() == str(attempt.pid)):
            assert time.monotonic() < deadline, "the rank command never announced its attempt"
            time.sleep(0.005)
        assert_fails_on_a_stale_heartbeat(probe, env, tmp_path)
    finally:
        attempt.kill(), attempt.wait()


def mpirun_runs(restart_policy: str, backoff_limit: int) -> int:
    """How many times the launcher Job runs mpirun when every run fails. kubernetes
    pkg/controller/job/job_controller.go (6ae037f, a 1.3x tree; unchanged in substance since
    backoffLimit began): syncJob fails the Job once ``failed > backoffLimit`` (failed pods, the
    measure under Never), and for OnFailure pastBackoffLimitOnFailure fails it once the container
    restarts summed reach ``>= backoffLimit`` (``> 0`` when it is 0), killing that restart."""
    runs = 0
    while True:
        runs += 1  # this run fails
        if restart_policy == "Never" and runs > backoff_limit:  # failed pods
            return runs
        restarts = runs  # OnFailure: the container restarts in place
        if restart_policy == "OnFailure" and (restarts > 0 if backoff_limit == 0 else restarts >= backoff_limit):
            return runs


def test_the_job_controller_rules_behind_maxrestarts() -> None:
    assert [mpirun_runs("Never", n) for n in (0, 1, 3)] == [1, 2, 4]
    assert [mpirun_runs("OnFailure", n) for n in (0, 1, 3)] == [1, 1, 3]  # why the launcher is not OnFailure


def test_nxd_workers_restart_in_place_and_the_launcher_reruns_every_rank(workloads_all: PlanResult) -> None:
    """kubeflow/mpi-operator v0.8.2: runPolicy.backoffLimit becomes the launcher Job's
    (mpi_job_controller.go newLauncherJob); workers default to restartPolicy Never
    (v2beta1/constants.go DefaultRestartPolicy) and a worker pod that exists is never recreated
    (getOrCreateWorker l.1010-1024), so training workers restart OnFailure."""
    train = manifest(workloads_all, "MPIJob", "llama2-train")["spec"]
    compile_ = manifest(workloads_all, "MPIJob", "llama2-compile")["spec"]
    assert train["runPolicy"]["backoffLimit"] == 3  # maxRestarts' default
    assert (
        mpirun_runs(train["mpiReplicaSpecs"]["Launcher"]["restartPolicy"], train["runPolicy"]["backoffLimit"]) == 3 + 1
    )
    worker = train["mpiReplicaSpecs"]["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    assert (
        "probe nxdt /shared/nemo_experiments/run-"
        in container(worker["template"])["livenessProbe"]["exec"]["command"][-1]
    )
    # The ranks mpirun starts over ssh do not see the container's environment: the worker writes
    # resilience.py to a file when it starts, and the ranks run it from there.
    assert container(worker["template"])["command"] == resumable.with_script_file(
        ["/usr/local/bin/mpi-user", "/usr/local/bin/mpi-sshd"]
    )
    command = container(train["mpiReplicaSpecs"]["Launcher"]["template"])["command"]
    assert command[-1].startswith(f"{resumable.announce_attempt()} && export {resilience.RUN_ATTEMPT_ENV}=")
    assert ' && { [ "$OMPI_COMM_WORLD_RANK" != 0 ] || ' in command[-1]
    assert " && python3 /tmp/resilience.py prune nxdt /shared/nemo_experiments/run-" in command[-1]
    # checkpointEverySteps unset: the Young/Daly optimum for asynchronous saves on 4 nodes (workloads/goodput.py).
    assert " && python3 /tmp/resilience.py nxdt-script nxdt 160 2 /shared/nemo_experiments/run-" in command[-1]
    assert command[-1].endswith(" && exec ./train_resumable.sh")
    assert "livenessProbe" not in container(compile_["mpiReplicaSpecs"]["Worker"]["template"])
    compile_rank = compile_["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][-1]
    assert compile_rank.startswith("python3 /tmp/resilience.py nxdt-script nxdt 0 0 '' ")
    assert compile_rank.endswith(" && exec ./train_resumable.sh") and "resume" not in compile_rank


def test_the_ray_train_step_retries_on_a_new_cluster_from_its_checkpoint(workloads_dev: PlanResult) -> None:
    """kuberay v1.7.0 rayjob_types.go: backoffLimit, "each retry creates a new RayCluster";
    rayjob_controller.go l.542-556 retries a Failed job unless its deadline ended it."""
    jobs = {
        n: manifest(workloads_dev, "RayJob", n)["spec"] for n in ("llama2-precompilation-job", "llama2-pretraining-job")
    }
    train = jobs["llama2-pretraining-job"]
    # checkpointEverySteps unset: the Young/Daly optimum for dev's 2 workers saving synchronously at dev's
    # EFS save throughput, 1,074 MB/s (infra/facts/efs.py), 500 steps on the model's grid (workloads/goodput.py);
    # the 20-step run ends before it saves.
    assert train["backoffLimit"] == 2 and "backoffLimit" not in jobs["llama2-precompilation-job"]
    worker = container(train["rayClusterSpec"]["workerGroupSpecs"][0]["template"])
    assert "probe ray /shared/llama2_output/run-" in worker["livenessProbe"]["exec"]["command"][-1]
    # The entrypoint runs train.sh from the steps' ConfigMap, which runs resilience.py from beside it
    # (tests/test_ray_entrypoints.py replays the whole chain).
    assert train["entrypoint"] == "bash /llama2-steps/train.sh"
    assert "RESILIENCE_PY" not in train["runtimeEnvYAML"]
    assert re.search(
        r"resume_args=\$\(python3 /llama2-steps/resilience.py resume ray "
        r"/shared/llama2_output/run-[0-9a-f]{12}/checkpoints\) \|\| exit 1; .* --checkpoint_freq 500 "
        r"--num_kept_checkpoint 2 \$resume_args 2>&1",
        ray_steps(workloads_dev)["train.sh"],
    )
    # Ray runs the entrypoint once per job, so the head's train.sh holds the run directory's lock
    # (tests/test_run_directory_lock.py runs the lock for real).
    assert re.search(
        r"exec 9>>/shared/llama2_output/run-[0-9a-f]{12}/\.lock && python3 /llama2-steps/resilience.py lock ray 9 "
        r"/shared/llama2_output/run-[0-9a-f]{12} default/llama2-pretraining-job 300 \|\| exit 1; ",
        ray_steps(workloads_dev)["train.sh"],
    )
    precompile_worker = container(
        jobs["llama2-precompilation-job"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]
    )
    assert "livenessProbe" not in precompile_worker


def test_resilience_settings_are_refused_out_of_range(workloads_with) -> None:
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "hangTimeoutMinutes": 5})
    assert problem.startswith("trainium-workloads:bertPretraining.hangTimeoutMinutes = 5") and "10" in problem


def test_the_worker_command_writes_the_script_file_then_runs_its_own(tmp_path: Path) -> None:
    command = resumable.with_script_file(["sh", "-c", "echo started"])
    command[2] = command[2].replace(resumable.SCRIPT_FILE, str(tmp_path / "r.py"))
    result = subprocess.run(command, env={"PATH": SCRIPT_PATH, **resumable.env()}, capture_output=True, text=True)
    assert result.stdout == "started\n" and (tmp_path / "r.py").read_text() == resumable.source()


def test_the_stack_names_the_run_directories_its_jobs_use(workloads_dev: PlanResult) -> None:
    runs = workloads_dev.outputs["workloads"]["runDirectories"]
    assert set(runs) == {"bertPretraining", "rayLlama2"}  # NxD Training is off in dev
    bert_line = container(manifest(workloads_dev, "Job", "bert-train")["spec"]["tasks"][0]["template"])["command"][-1]
    assert f"--output_dir {runs['bertPretraining']} " in bert_line
    assert f"--output_dir {runs['rayLlama2']} " in ray_steps(workloads_dev)["train.sh"]


def ray_steps(result: PlanResult) -> dict[str, str]:
    """The files of the Ray Llama-2 steps' ConfigMap."""
    return manifest(result, "ConfigMap", "ray-llama2-steps")["data"]


def test_a_hang_limit_the_deadline_would_beat_is_refused(workloads_with) -> None:
    """dev's BERT deadline is 60 minutes: a 58-minute limit is ended 61 minutes after the last step."""
    (problem,) = refusal(
        workloads_with,
        bertPretraining={
            "nodeGroup": "trn1-32xl-ng1",
            "trainDeadlineMinutes": 60,
            "hangTimeoutMinutes": 58,
            "firstStepTimeoutMinutes": 30,
        },
    )
    assert problem.startswith("trainium-workloads:bertPretraining.hangTimeoutMinutes = 58: a hang is ended 61 minutes")
    assert "(trainDeadlineMinutes, 60 minutes)" in problem
    workloads_with(
        bertPretraining={
            "nodeGroup": "trn1-32xl-ng1",
            "trainDeadlineMinutes": 60,
            "hangTimeoutMinutes": 56,
            "firstStepTimeoutMinutes": 56,
        }
    )


def test_a_first_step_limit_the_deadline_would_beat_is_refused(workloads_with) -> None:
    """The shipped dev file once had BERT's default 60-minute first-step limit under a 60-minute
    deadline: a hang before the first step ended with exit 124 (TerminateJob), never restarted."""
    (problem,) = refusal(workloads_with, bertPretraining={"nodeGroup": "trn1-32xl-ng1", "trainDeadlineMinutes": 60})
    assert problem.startswith(
        "trainium-workloads:bertPretraining.firstStepTimeoutMinutes = 60: a hang is ended "
        "63 minutes after an attempt's start"
    )
    assert "(trainDeadlineMinutes, 60 minutes)" in problem
    (problem,) = refusal(
        workloads_with,
        rayLlama2={
            "nodeGroup": "trn1n-32xl-ng",
            "trainDeadlineSeconds": 2100,
            "hangTimeoutMinutes": 20,
            "firstStepTimeoutMinutes": 32,
        },
    )
    assert problem.startswith("trainium-workloads:rayLlama2.firstStepTimeoutMinutes = 32: a hang is ended 35 minutes")
