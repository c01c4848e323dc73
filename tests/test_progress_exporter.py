"""The progress exporter run as its pod runs it: ``python3 progress_exporter.py <port> <runs JSON>`` from a
directory holding it and resilience.py (the ConfigMap), over a run tree laid out as each pinned script
writes it, scraped over HTTP; its output linted by `promtool check metrics`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import promtool
from tests.conftest import ALL_ON
from workloads import progress, resilience

REPO = Path(__file__).resolve().parent.parent


def bert_line(step: int, throughput: float) -> str:
    # The pinned BERT script's logger line (the seed's log, seeds/bert-torchx-eks-trn1-tutorial.md).
    return f"LOG Wed Dec 21 00:51:01 2022 - (0, {step}) step_loss : 10.70 learning_rate : 2.80e-06 throughput : {throughput}\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "opt").mkdir()
    bert = tmp_path / "shared" / "output" / "run-abc"
    bert.mkdir(parents=True)
    (bert / "heartbeat").write_text(bert_line(120, 6449.36))
    (bert / ".lock-holder").write_text('{"owner": "research/bert", "pod": "bert-worker-0", "pid": 7}')
    with zipfile.ZipFile(bert / "ckpt_100.pt", "w") as archive:  # a whole torch.save archive
        archive.writestr("archive/data.pkl", b"x" * 100)
    (bert / "ckpt_120.pt").write_bytes(b"PK\x03\x04 half written")  # a save under way: no end record yet
    nxd = tmp_path / "shared" / "nemo_experiments" / "run-def"
    (nxd / "0").mkdir(parents=True)
    (nxd / "0" / "log").write_text("Epoch 0:  12%|#2        | 57/466 [10:02<1:12:00, 9.2s/it, loss=4.2]\r")
    (nxd / "lock").mkdir()
    (nxd / "lock" / ".lock-holder").write_text('{"owner": "research/llama2-train"}')
    done = nxd / "checkpoints" / "megatron_llama--step=50-consumed_samples=51200.0.ckpt"
    done.mkdir(parents=True)
    (done / "done").write_text("")
    # An asynchronous save written while training steps on: NxD marks it `done` when the next save begins.
    (nxd / "checkpoints" / "megatron_llama--step=55-consumed_samples=56320.0.ckpt").mkdir()
    (tmp_path / "shared" / "nemo_experiments" / "not-a-run").mkdir()  # no heartbeat: not served
    # A run that ended mid-save a day ago: its save stays incomplete, and it is served no more.
    ended = tmp_path / "shared" / "output" / "run-old"
    ended.mkdir()
    (ended / "heartbeat").write_text(bert_line(5000, 6449.36))
    (ended / ".lock-holder").write_text("{}")
    (ended / "ckpt_5000.pt").write_bytes(b"PK\x03\x04 half written")
    for name in ("heartbeat", ".lock-holder", "ckpt_5000.pt"):
        os.utime(ended / name, (time.time() - 86400, time.time() - 86400))
    return tmp_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def planned(dev) -> dict[str, dict]:
    """The dev workload stack with the exporter on (BERT, Ray and NxD Training there): its objects by kind."""
    from tests.conftest import all_on_cluster, run_workloads

    result = run_workloads(dev, all_on_cluster, progressExporter={}, **ALL_ON)
    return {
        r.inputs["kind"]: r.inputs
        for r in result.registrations
        if r.type.startswith("kubernetes:") and r.inputs.get("metadata", {}).get("name", "").startswith(progress.NAME)
    }


@pytest.fixture
def exporter(tree: Path, planned) -> Iterator[str]:
    # The container's own command and the ConfigMap's files, with the pod's mounts (the ConfigMap's directory,
    # the claim) moved under the test's tree and the port to a free one.
    pod = planned["Deployment"]["spec"]["template"]["spec"]
    python, script, _port, runs = pod["containers"][0]["command"]
    assert python == "python" and script == f"{progress.SCRIPT_DIR}/{progress.EXPORTER_FILE}"
    for name, text in planned["ConfigMap"]["data"].items():
        (tree / "opt" / name).write_text(text)
    port = free_port()
    moved = runs.replace(f'"{progress.SHARED_MOUNT}/', f'"{tree}/shared/')
    command = [sys.executable, str(tree / "opt" / progress.EXPORTER_FILE), str(port), moved]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/")
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line[:1] != "#"}


def test_each_runs_progress_is_served_from_its_files(tree, exporter):
    found = scrape(exporter)
    bert = 'run="run-abc",workload="bert-pretraining"'
    nxd = 'run="run-def",workload="nxd-llama"'
    assert found[f"training_step{{{bert}}}"] == 120 and found[f"training_throughput{{{bert}}}"] == 6449.36
    assert found[f"training_checkpoint_step{{{bert}}}"] == 100
    assert found[f"training_checkpoint_saving{{{bert}}}"] == 1  # ckpt_120.pt has no end record yet
    assert found[f"training_heartbeat_timestamp_seconds{{{bert}}}"] == pytest.approx(
        os.path.getmtime(tree / "shared" / "output" / "run-abc" / "heartbeat")
    )
    assert (
        found[f"training_samples_per_step{{{bert}}}"] == 32768 and found[f"training_tokens_per_sample{{{bert}}}"] == 128
    )
    # NxD Training: the progress bar's batch counter, and its save with `done`. Its saves are asynchronous, so
    # the one still being written (step 55) holds nothing up: not saving, as far as the goodput ledger goes.
    assert found[f"training_step{{{nxd}}}"] == 57 and found[f"training_checkpoint_step{{{nxd}}}"] == 50
    assert found[f"training_checkpoint_saving{{{nxd}}}"] == 0 and f"training_throughput{{{nxd}}}" not in found
    # Its interval is unset: the Young/Daly optimum for asynchronous saves on 4 nodes (workloads/goodput.py).
    assert (
        found[f"training_restart_budget{{{nxd}}}"] == 3 and found[f"training_checkpoint_interval_steps{{{nxd}}}"] == 160
    )
    # Beside it, whether its saves are asynchronous: CheckpointOverdue then allows three intervals, not two.
    assert found[f"training_checkpoint_asynchronous{{{nxd}}}"] == 1
    assert found[f"training_restart_budget{{{bert}}}"] == 1  # dev's maxRetry 2: one restart
    assert f"training_checkpoint_interval_steps{{{bert}}}" not in found  # BERT's interval is in shards
    assert f"training_checkpoint_asynchronous{{{bert}}}" not in found
    assert not any("not-a-run" in k or "run-old" in k for k in found)
    # Each run's newest attempt: when it took the writer's lock (NxD Training's record is in lock/).
    assert found[f"training_attempt_start_timestamp_seconds{{{bert}}}"] == pytest.approx(
        os.path.getmtime(tree / "shared" / "output" / "run-abc" / ".lock-holder")
    )
    assert found[f"training_attempt_start_timestamp_seconds{{{nxd}}}"] == pytest.approx(
        os.path.getmtime(tree / "shared" / "nemo_experiments" / "run-def" / "lock" / ".lock-holder")
    )


def test_a_run_is_served_while_its_probe_would_let_it_live(tree, planned):
    # Dev's BERT: firstStepTimeoutMinutes and hangTimeoutMinutes both 30, the probe acting 3 minutes after.
    pod = planned["Deployment"]["spec"]["template"]["spec"]
    runs = {w["workload"]: w for w in json.loads(pod["containers"][0]["command"][3])}
    assert runs["bert-pretraining"]["liveSeconds"] == 33 * 60
    assert runs["nxd-llama"]["holder"] == "lock/.lock-holder"


def test_a_new_attempt_is_served_as_the_lock_records_time(tree, exporter):
    holder = tree / "shared" / "output" / "run-abc" / ".lock-holder"
    bert = 'run="run-abc",workload="bert-pretraining"'
    first = scrape(exporter)[f"training_attempt_start_timestamp_seconds{{{bert}}}"]
    os.utime(holder, (first + 90, first + 90))  # the next attempt took the lock 90 s later
    assert scrape(exporter)[f"training_attempt_start_timestamp_seconds{{{bert}}}"] == first + 90
    # A heartbeat silent past the live time, whose lock the new attempt took within it: still served.
    heartbeat = tree / "shared" / "output" / "run-abc" / "heartbeat"
    os.utime(heartbeat, (first - 7200, first - 7200))
    assert f"training_step{{{bert}}}" in scrape(exporter)
    os.utime(holder, (first - 7200, first - 7200))
    assert not any("run-abc" in k for k in scrape(exporter))


def test_nxd_trainings_heartbeat_is_when_its_step_last_changed(tree, exporter):
    log = tree / "shared" / "nemo_experiments" / "run-def" / "0" / "log"
    nxd = 'run="run-def",workload="nxd-llama"'
    start = scrape(exporter)[f"training_heartbeat_timestamp_seconds{{{nxd}}}"]
    assert start == pytest.approx(os.path.getmtime(log))  # first seen: the log's mtime stands for the change
    # Output that is no step line (a restart's start-up, a checkpoint load) moves the log's mtime, not the beat.
    with log.open("a") as f:
        f.write("\nLoading checkpoint megatron_llama--step=50\n")
    os.utime(log, (start + 300, start + 300))
    found = scrape(exporter)
    assert found[f"training_heartbeat_timestamp_seconds{{{nxd}}}"] == start and found[f"training_step{{{nxd}}}"] == 57
    with log.open("a") as f:
        f.write("Epoch 0:  12%|#2        | 58/466 [10:11<1:12:00, 9.2s/it, loss=4.2]\r")
    os.utime(log, (start + 360, start + 360))
    assert scrape(exporter)[f"training_heartbeat_timestamp_seconds{{{nxd}}}"] == start + 360


def test_steps_after_a_restart_count_as_redone(tree, exporter):
    heartbeat = tree / "shared" / "output" / "run-abc" / "heartbeat"
    bert = 'run="run-abc",workload="bert-pretraining"'
    scrape(exporter)  # step 120 seen
    heartbeat.write_text(bert_line(101, 6400.0))  # the restart resumed from ckpt_100.pt
    found = scrape(exporter)
    assert found[f"training_redoing{{{bert}}}"] == 1 and found[f"training_step_high_water{{{bert}}}"] == 120
    heartbeat.write_text(bert_line(110, 6400.0))
    assert scrape(exporter)[f"training_steps_redone_total{{{bert}}}"] == 9
    heartbeat.write_text(bert_line(125, 6400.0))  # past the high-water mark: 10 more redone (110 -> 120)
    found = scrape(exporter)
    assert found[f"training_steps_redone_total{{{bert}}}"] == 19 and found[f"training_redoing{{{bert}}}"] == 0


def test_the_output_is_valid_exposition_text(exporter):
    text = urllib.request.urlopen(exporter, timeout=5).read().decode()
    result = promtool.run("check", "metrics", stdin=text)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_pod_reads_the_claim_and_ships_the_files_unchanged(planned):
    pod = planned["Deployment"]["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts[progress.SHARED_MOUNT]["readOnly"] and mounts[progress.SCRIPT_DIR]["readOnly"]
    assert planned["ConfigMap"]["data"] == {n: (REPO / "workloads" / n).read_text() for n in progress.SHIPPED_FILES}
    # As the namespace's id (the one user its directory lets read), on the system nodes; the metrics port alone open.
    assert pod["securityContext"]["runAsUser"] == 20001 and pod["nodeSelector"]
    (rule,) = planned["NetworkPolicy"]["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [progress.PORT]


def test_a_changed_script_is_a_new_config_map_the_pod_rolls_onto(planned, tmp_path) -> None:
    # pulumi-kubernetes replaces a ConfigMap whose data changes, deleting it first under a fixed name, while an
    # unchanged Deployment keeps running the old code (workloads/progress.py scripts_config_map_name).
    config_map, deployment = planned["ConfigMap"], planned["Deployment"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["scripts"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert config_map["metadata"]["name"] == progress.scripts_config_map_name(config_map["data"])
    edited = {**config_map["data"], progress.EXPORTER_FILE: config_map["data"][progress.EXPORTER_FILE] + "\n"}
    assert progress.scripts_config_map_name(edited) != config_map["metadata"]["name"]


def test_a_complete_saves_write_time_is_served_from_its_files(tree, exporter):
    # Ray Train's synchronous NxD save, step_<n> with a data file per rank and `done` after the last one; NxD
    # Training's asynchronous one, whose `done` comes only when the next save begins. The verdict resilience.py
    # writes into a save later is no part of its write.
    start = time.time() - 3600
    ray = tree / "shared" / "llama2_output" / "run-ghi"
    (ray / "checkpoints" / "step_200" / "model").mkdir(parents=True)
    (ray / "heartbeat").write_text("LOG Wed Dec 21 00:51:01 2022 - (0, 210) step_loss : 2.1 throughput : 98.5\n")
    (ray / ".lock-holder").write_text("{}")
    ray_files = {"model/dp_rank_00_tp_rank_00.pt": 0, "model/dp_rank_00_tp_rank_31.pt": 75, "done": 81}
    nxd = tree / "shared" / "nemo_experiments" / "run-def" / "checkpoints"
    save = nxd / "megatron_llama--step=60-consumed_samples=61440.0.ckpt"
    (save / "model").mkdir(parents=True)
    nxd_files = {"model/tensor_0.pt": 10, "model/tensor_1.pt": 52, "checkpoint": 53, "done": 900}
    for root, files in ((ray / "checkpoints" / "step_200", ray_files), (save, nxd_files)):
        for name, offset in {**files, resilience.NXDT_VERIFIED: 2000}.items():
            (root / name).write_text("x")
            os.utime(root / name, (start + offset, start + offset))
    found = scrape(exporter)
    assert found['training_checkpoint_save_seconds{run="run-ghi",workload="ray-llama2"}'] == pytest.approx(81)
    assert found['training_checkpoint_step{run="run-def",workload="nxd-llama"}'] == 60
    assert found['training_checkpoint_save_seconds{run="run-def",workload="nxd-llama"}'] == pytest.approx(42)
    # BERT's save is one file whose start nothing records: no write time is made up for it.
    assert not any(k.startswith("training_checkpoint_save_seconds") and "bert" in k for k in found)
