"""What Amazon EFS offers the training file system of `storage.kind: efs`: its published limits, and the
throughput figure the goodput model saves checkpoints at.

Labels as in the cost and goodput tables: a figure read on a page is cited with it; one estimated from
such figures is marked E with its reasoning.
"""

from __future__ import annotations

# Amazon EFS user guide, performance.html ("Performance specifications for file systems using General
# Purpose performance mode"), Regional file system with Elastic throughput, as a search excerpt showed it
# on 2026-11-28 (the page itself and its footnotes were not readable from here): each client
# (one NFS mount of one node) reads and writes up to 1,500 MiBps; the file system writes 1-5 GiBps and
# reads 3-20 GiBps, "depending on Region". The figure for us-west-2 was not readable.
PER_CLIENT_MIBPS = 1500
FILE_SYSTEM_WRITE_GIBPS_RANGE = (1, 5)
PERFORMANCE_SOURCE = "https://docs.aws.amazon.com/efs/latest/ug/performance.html (Regional, Elastic throughput)"

MIB = 1024 * 1024
GIB = 1024 * MIB

# E: the aggregate throughput a checkpoint save sees, in MB/s (10^6 bytes: the goodput model's unit,
# workloads/goodput.py save_hours). Every node writes its shard at once over its own mount, so the save
# is bounded by the file system's write limit, not a client's, from two nodes up; the lowest end of the
# published write range is taken (the region's own figure unread), so the plan's save times are an upper
# bound where the region allows more. One node alone is capped by its client limit, 1,500 MiBps, which is
# above this figure, so the figure holds for every node count the workloads use.
SAVE_THROUGHPUT_MBPS = round(FILE_SYSTEM_WRITE_GIBPS_RANGE[0] * GIB / 1e6, 1)
SAVE_THROUGHPUT_BASIS = (
    f"E: the lowest Regional Elastic write limit, {FILE_SYSTEM_WRITE_GIBPS_RANGE[0]} GiBps, of the published "
    f"{FILE_SYSTEM_WRITE_GIBPS_RANGE[0]}-{FILE_SYSTEM_WRITE_GIBPS_RANGE[1]} GiBps (per client {PER_CLIENT_MIBPS} "
    f"MiBps); {PERFORMANCE_SOURCE}"
)
