"""Rank 0 of the stand-in for nccl-tests' *_perf binaries (all_reduce_perf, all_gather_perf,
reduce_scatter_perf), for the kit jobs on the tests' localhost Slurm: the hardware is what a test
machine lacks. `nccl_perf` beside it (what the binaries' names link to) runs it as
`python3 -S nccl_perf.py NAME ARGS...` for rank 0 only; NAME is the binary's name.

It honours what the kit and `fmcluster verify` rely on: nccl-tests' command line (-b -e -f -g -n),
one process per rank under srun (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_NODELIST), only rank 0
printing (nccl_perf ends the others): the header, one `# Rank` line per rank with its node and
device, the table from -b to -e by factor -f with out-of-place and in-place columns, and the two
summary lines; with NCCL_DEBUG=INFO and ranks on more than one node, the NCCL INFO lines that name
the network and libfabric provider.
Its figures: the bus bandwidth at the largest size is STANDIN_BUSBW_NODE (ranks on one node) or
STANDIN_BUSBW_NODES (across nodes), GB/s; smaller sizes ramp up to it. Its GPUs: STANDIN_GPU, the
name NVIDIA's driver gives them ("NVIDIA H100 80GB HBM3" unless set).
"""
import os
import re
import subprocess
import sys

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not match:
        sys.exit(f"{sys.argv[1]}: invalid size {text}")
    return int(match.group(1)) * UNITS[match.group(2)]


def main() -> None:
    name = sys.argv[1]
    operation = name[: -len("_perf")]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2], strict=False))
    low, high, factor = size(args.get("-b", "8")), size(args.get("-e", "8")), int(args.get("-f", "2"))
    iters = int(args.get("-n", "20"))
    ranks = int(os.environ.get("SLURM_NTASKS", "1"))
    nodes = subprocess.run(["scontrol", "show", "hostnames", os.environ.get("SLURM_STEP_NODELIST", "")],
                           capture_output=True, text=True).stdout.split() or [os.environ.get("SLURMD_NODENAME", "node")]
    per_node = max(1, ranks // len(nodes))
    gpu = os.environ.get("STANDIN_GPU", "NVIDIA H100 80GB HBM3")
    multi = len(nodes) > 1
    out = []
    if os.environ.get("NCCL_DEBUG", "").upper() == "INFO":
        out.append(f"{nodes[0]}:1:1 [0] NCCL INFO NCCL version 2.27.3+cuda12.9")
        if multi:
            out.append(f"{nodes[0]}:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct "
                       "(found 32 nics)")
            out.append(f"{nodes[0]}:1:1 [0] NCCL INFO Using network AWS Libfabric")
    out.append("# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703")
    out.append(f"# Collective test starting: {name}")
    out.append(f"# nThread 1 nGpus 1 minBytes {low} maxBytes {high} step: {factor}(factor) warmup iters: 5 "
               f"iters: {iters} agg iters: 1 validation: 1 graph: 0")
    out.append("#")
    out.append("# Using devices")
    for r in range(ranks):
        device = r % per_node
        out.append(f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {nodes[min(r // per_node, len(nodes) - 1)]} "
                   f"device {device:2d} [0000:{device:02x}:00] {gpu}")
    out.append("#")
    out.append("#" + " " * 62 + "out-of-place" + " " * 23 + "in-place" + " " * 10)
    out.append("#       size         count      type   redop    root     time   algbw   busbw #wrong"
               "     time   algbw   busbw #wrong")
    out.append("#        (B)    (elements)" + " " * 31 + "(us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"
               + " " * 7)
    peak = float(os.environ.get("STANDIN_BUSBW_NODES" if multi else "STANDIN_BUSBW_NODE", "400"))
    ratio = {"all_reduce": 2 * (ranks - 1) / ranks}.get(operation, (ranks - 1) / ranks) or 1.0
    total, rows, current = 0.0, 0, low
    while current <= high:
        busbw = peak * min(1.0, current / high * 64) if current < high else peak
        algbw = busbw / ratio
        usec = current / (algbw * 1e3) if algbw else 0.0
        elements = current // 4 if operation == "all_reduce" else current // 4 // ranks
        redop = "none" if operation == "all_gather" else "sum"
        out.append(f"{current:12d} {elements:13d}     float {redop:>7s}      -1 {usec:8.1f} {algbw:7.2f} {busbw:7.2f}"
                   f"      0 {usec:8.1f} {algbw:7.2f} {busbw:7.2f}      0")
        total, rows = total + busbw, rows + 1
        current *= factor
    out.append("# Out of bounds values : 0 OK")
    out.append(f"# Avg bus bandwidth    : {total / max(rows, 1):.4f} ")
    out.append("#")
    print("\n".join(out))


main()
