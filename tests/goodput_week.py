"""A synthetic week of the series the goodput ledger and the alerts read, minute by minute, rendered as a
`promtool test rules` input: kube-state-metrics' node and pod series and the progress exporter's, shaped
as each emits them (one series per label set, present only while its object exists, then stale).

The week (minutes from 0 to 10079), in namespace ``research``, NxD Llama on trn1.32xlarge nodes n1 and n2:
- 1-14 both nodes burn in (they join at 1) (the startup taint); 15-19 the job's two pods wait unscheduled (pending);
- 20-24 the pods are bound and pull their image (Pending), 25 on Running; rank 0 takes the run's lock at 30;
  first step at 40;
- a 5-minute checkpoint save every hour at 100 + 60k (the heartbeat stops while it saves);
- the last step before a hang at 2999; the probe ends the pods at 3035; the new attempt's pods start at
  3035, take the lock at 3038, step again from 3045 and redo the steps since the last save until 3061;
- the job ends at 9000, and the exporter serves its run until its live time has passed (9033); n1 and n2 stay,
  idle, to the end of the week (minute 10080);
- n3 (on demand) joins at 5000, burns in until 5009 and idles until 5119; n4 (a Capacity Block node)
  idles from 7000 to 7059; c1 is a core node all week.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

WEEK = 10080
# Minutes 0 to WEEK: the ledger at WEEK sums the whole hours 1 to 168, minutes 1 to WEEK.
MINUTES = WEEK + 1
NAMESPACE = "research"
WORKLOAD = "nxd-llama"
RUN = "run-1"
# Restarts the job may make: the one after the hang leaves one.
RESTART_BUDGET = 2
BURN_IN_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/neuron-burn-in"

FIRST_ATTEMPT = range(15, 3035)
SECOND_ATTEMPT = range(3035, 9000)
FIRST_START, SECOND_START = 20, 3035
FIRST_LOCK, SECOND_LOCK = 30, 3038
# The run's live time (workloads/progress.py live_seconds: 30-minute limits, the probe 3 minutes after).
LIVE_MINUTES = 33
INSTANCE_TYPE = "trn1.32xlarge"
FIRST_STEP, LAST_BEAT_BEFORE_HANG, STEPS_AGAIN, REDO_END, JOB_END = 40, 2999, 3045, 3062, 9000
SAVES = [s for s in range(100, JOB_END, 60) if not LAST_BEAT_BEFORE_HANG < s < STEPS_AGAIN]
SAVE_MINUTES = 5
SAVING = {m for s in SAVES for m in range(s, s + SAVE_MINUTES)}


def beating(t: int) -> bool:
    """A step line arrives in minute ``t``."""
    frozen = LAST_BEAT_BEFORE_HANG < t < STEPS_AGAIN
    return FIRST_STEP <= t < JOB_END and not frozen and t not in SAVING


def heartbeats() -> list[float | None]:
    """The heartbeat file's mtime each minute: the minute of its last step line."""
    values: list[float | None] = []
    last = None
    for t in range(MINUTES):
        last = 60.0 * t if beating(t) else last
        values.append(last)
    return values


def high_water() -> list[float | None]:
    """The highest step seen: 10 new steps in every minute that steps past it."""
    values: list[float | None] = []
    steps = 0.0
    for t in range(MINUTES):
        values.append(None if t < FIRST_STEP else steps)
        if beating(t) and not STEPS_AGAIN <= t < REDO_END:
            steps += 10
    return values


Values = list[float | None]


def during(minutes: Iterable[int], value: Callable[[int], float | None] | float) -> Values:
    inside = set(minutes)
    return [(value(t) if callable(value) else value) if t in inside else None for t in range(MINUTES)]


def series() -> dict[str, Values]:
    out: dict[str, Values] = {}
    nodes = {
        "n1": (range(1, WEEK + 1), "ON_DEMAND", range(1, 15)),
        "n2": (range(1, WEEK + 1), "ON_DEMAND", range(1, 15)),
        "n3": (range(5000, 5120), "ON_DEMAND", range(5000, 5010)),
        "n4": (range(7000, 7060), "CAPACITY_BLOCK", range(0)),
    }
    for node, (alive, capacity, burn_in) in nodes.items():
        out[f'kube_node_status_capacity{{node="{node}",resource="aws_amazon_com_neuron",unit="integer"}}'] = during(
            alive, 16
        )
        out[
            f'kube_node_labels{{node="{node}",label_node_kubernetes_io_instance_type="{INSTANCE_TYPE}",'
            f'label_eks_amazonaws_com_capacity_type="{capacity}"}}'
        ] = during(alive, 1)
        if burn_in:
            out[f'kube_node_spec_taint{{node="{node}",key="{BURN_IN_KEY}",value="pending",effect="NoSchedule"}}'] = (
                during(burn_in, 1)
            )
    out['kube_node_status_capacity{node="c1",resource="cpu",unit="core"}'] = during(range(MINUTES), 2)
    pods = {"worker-0": ("n1", FIRST_ATTEMPT, FIRST_START), "worker-1": ("n2", FIRST_ATTEMPT, FIRST_START)}
    pods |= {"worker-2": ("n1", SECOND_ATTEMPT, SECOND_START), "worker-3": ("n2", SECOND_ATTEMPT, SECOND_START)}
    for pod, (node, alive, start) in pods.items():
        key = f'namespace="{NAMESPACE}",pod="{pod}"'
        out[f'kube_pod_labels{{{key},label_app_kubernetes_io_part_of="{WORKLOAD}"}}'] = during(alive, 1)
        running = start + 5 if start == FIRST_START else start
        out[f'kube_pod_status_phase{{{key},phase="Pending"}}'] = during(
            alive, lambda t, running=running: float(t < running)
        )
        out[f'kube_pod_status_phase{{{key},phase="Running"}}'] = during(
            alive, lambda t, running=running: float(t >= running)
        )
        out[f"kube_pod_start_time{{{key}}}"] = during(range(start, alive.stop), 60.0 * start)
        out[f'kube_pod_info{{{key},node=""}}'] = during(range(alive.start, start), 1)
        out[f'kube_pod_info{{{key},node="{node}"}}'] = during(range(start, alive.stop), 1)
        out[f'kube_pod_nodeselectors{{{key},nodeselector_node_kubernetes_io_instance_type="{INSTANCE_TYPE}"}}'] = (
            during(alive, 1)
        )
    # mpirun's launcher, on a core node: it holds no Trainium node.
    launcher = f'namespace="{NAMESPACE}",pod="launcher"'
    out[f'kube_pod_labels{{{launcher},label_app_kubernetes_io_part_of="{WORKLOAD}"}}'] = during(range(20, JOB_END), 1)
    out[f'kube_pod_status_phase{{{launcher},phase="Running"}}'] = during(range(20, JOB_END), 1)
    out[f'kube_pod_info{{{launcher},node="c1"}}'] = during(range(20, JOB_END), 1)
    run = f'namespace="{NAMESPACE}",run="{RUN}",workload="{WORKLOAD}"'
    served = range(FIRST_LOCK, JOB_END + LIVE_MINUTES)
    exported = range(FIRST_STEP, served.stop)
    out[f"training_attempt_start_timestamp_seconds{{{run}}}"] = during(
        served, lambda t: 60.0 * (FIRST_LOCK if t < SECOND_LOCK else SECOND_LOCK)
    )
    beats, high = heartbeats(), high_water()
    out[f"training_heartbeat_timestamp_seconds{{{run}}}"] = during(served, lambda t: beats[t])
    out[f"training_checkpoint_saving{{{run}}}"] = during(exported, lambda t: float(t in SAVING))
    out[f"training_redoing{{{run}}}"] = during(exported, lambda t: float(STEPS_AGAIN <= t < REDO_END))
    out[f"training_step_high_water{{{run}}}"] = during(served, lambda t: high[t])
    out[f"training_samples_per_step{{{run}}}"] = during(exported, 1024)
    out[f"training_tokens_per_sample{{{run}}}"] = during(exported, 4096)
    out[f"training_restart_budget{{{run}}}"] = during(exported, RESTART_BUDGET)
    return out


def promtool_values(values: Values) -> str:
    """promtool's expanding notation: ``a+bxn`` is n+1 values from a in steps of b, ``_xn`` n missing
    samples, ``stale`` a staleness marker (what Prometheus writes when a series disappears)."""
    tokens: list[str] = []
    t = 0
    while t < len(values):
        v = values[t]
        end = t + 1
        if v is None:
            while end < len(values) and values[end] is None:
                end += 1
            gone = t > 0 and values[t - 1] is not None
            tokens.append("stale" if gone else "_")
            if end - t - 1:
                tokens.append(f"_x{end - t - 1}")
        else:
            step = (values[t + 1] - v) if t + 1 < len(values) and values[t + 1] is not None else 0.0
            while end < len(values) and values[end] is not None and values[end] - values[end - 1] == step:
                end += 1
            tokens.append(f"{v:.15g}{step:+.15g}x{end - t - 1}" if end - t > 1 else f"{v:.15g}")
        t = end
    return " ".join(tokens)


def input_series() -> list[dict[str, str]]:
    return [{"series": name, "values": promtool_values(values)} for name, values in series().items()]
