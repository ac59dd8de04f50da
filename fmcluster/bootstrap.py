"""Node bootstrap: the user data of a node group, rendered from the instance catalog.

Pure: no CDK, no AWS call. The shell code lives in ``fmcluster/bootstrap/*.sh`` (package data)
and is used verbatim; what differs between node groups is a block of shell variables at the top
of the script, each value quoted with ``shlex.quote``. Values may be CDK token strings (the file
system's DNS name comes from another stack): quoting keeps them intact for CDK to resolve.

The script (``set -euo pipefail``):

1. writes the EFA / NCCL environment file ``/etc/profile.d/fmcluster-nccl.sh``;
2. stripes the instance-store NVMe disks into one RAID 0 volume at ``/scratch`` (one disk is
   formatted directly; none, nothing to do); the disk count comes from the catalog;
3. mounts the FSx for Lustre file system (when there is one), with retries, and adds it to
   ``/etc/fstab``;
4. with observability on (`Metrics`), installs node exporter and a Prometheus agent from the
   Ubuntu archive (``metrics.sh``) with the textfile collectors of ``bootstrap/collectors/``
   (GPU, EFA, Slurm), remote-writing to the cluster's Prometheus workspace.

AWS PCS merges its own user data with the node group's, so the user data is MIME multipart
(``multipart/mixed``) with one ``text/x-shellscript`` part.
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from fmcluster import catalog
from fmcluster.catalog import InstanceType

SCRIPTS = Path(__file__).with_name("bootstrap")
NCCL_ENV_FILE = "/etc/profile.d/fmcluster-nccl.sh"
SCRATCH_PATH = "/scratch"
SCRATCH_ARRAY = "/dev/md/scratch"
SCRATCH_WAIT_SECONDS = 60  # for the instance-store disks to appear
FSX_MOUNT_ATTEMPTS = 20
FSX_RETRY_SECONDS = 15
BOUNDARY = "==FMCLUSTER-BOUNDARY=="
SCRIPT_NAME = "fmcluster-node.sh"
COLLECTORS = SCRIPTS / "collectors"
COLLECT_INTERVAL_SECONDS = 30
METRICS_PATHS = {"FMCLUSTER_ETC": "/etc/fmcluster", "SYSTEMD_DIR": "/etc/systemd/system",
                 "METRICS_LIB": "/usr/local/lib/fmcluster", "METRICS_STATE": "/var/lib/fmcluster",
                 "NODE_EXPORTER_DEFAULTS": "/etc/default/prometheus-node-exporter", "OS_RELEASE": "/etc/os-release"}


@dataclass(frozen=True)
class LustreMount:
    """Where a node mounts the FSx for Lustre file system (values may be CDK tokens)."""

    dns_name: str
    mount_name: str
    mount_path: str = "/fsx"

    @property
    def source(self) -> str:
        return f"{self.dns_name}@tcp:/{self.mount_name}"


@dataclass(frozen=True)
class Metrics:
    """Where a node sends its metrics (values may be CDK tokens): the cluster's name (label
    `cluster`), the workspace's remote-write URL and region; `slurm`: this node runs the Slurm
    collector (the login node on PCS, the controller on HyperPod)."""

    cluster: str
    remote_write_url: str
    region: str
    slurm: bool = False


def collector(name: str) -> str:
    """A textfile collector script of ``bootstrap/collectors/`` (a whole script, run on its own),
    without its comment lines (documented in the repository), gzipped and base64-encoded:
    EC2 user data is limited to 16 KiB, and base64 needs no shell quoting. ``metrics.sh``
    decodes it (``base64 -d | gunzip``). Deterministic: the same script gives the same text."""
    text = without_comments((COLLECTORS / f"{name}.sh").read_text(encoding="utf-8"))
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


def without_comments(text: str) -> str:
    """`text` without its whole-line comments (a first `#!` line and `# shellcheck` directives
    stay): the scripts are documented in the repository, and EC2 user data is limited to 16 KiB.
    No fragment has a here-document line that starts with `#`."""
    lines = text.splitlines(keepends=True)
    keep = lines[:1] if lines and lines[0].startswith("#!") else []
    return "".join(keep + [line for line in lines[len(keep):]
                           if not line.lstrip().startswith("#") or line.lstrip().startswith("# shellcheck ")])


def metrics_settings(instance: InstanceType, metrics: Metrics, *, efa: bool, lustre_path: str = "") -> dict[str, str | int]:
    """The settings block of ``metrics.sh`` for one node group."""
    return {
        "CLUSTER_NAME": metrics.cluster, "REMOTE_WRITE_URL": metrics.remote_write_url,
        "METRICS_REGION": metrics.region, "EXPECTED_GPUS": instance.gpu_count or 0,
        "EXPECTED_LUSTRE_MOUNT": lustre_path, "COLLECT_INTERVAL_SECONDS": COLLECT_INTERVAL_SECONDS,
        **METRICS_PATHS,
        "GPU_COLLECTOR": collector("gpu") if instance.is_gpu else "",
        "EFA_COLLECTOR": collector("efa") if efa else "",
        "SLURM_COLLECTOR": collector("slurm") if metrics.slurm else "",
    }


def instance_entry(instance_type: str) -> InstanceType:
    entry = catalog.get(instance_type)
    if entry is None:
        raise ValueError(f"unknown instance type {instance_type!r}: not in the instance catalog")
    return entry


def device_rdma(instance: InstanceType, efa: bool) -> bool:
    """GPUDirect RDMA over EFA: GPU instance types with EFA generation 2 or later."""
    return efa and instance.is_gpu and (instance.efa_generation or 0) >= 2


def nccl_environment(instance: InstanceType, efa: bool) -> str:
    """The content of the EFA / NCCL environment file: only well-known settings, each explained."""
    lines = [
        "# Written by the fmcluster node bootstrap: EFA and NCCL settings for jobs on this",
        f"# {instance.name} node. Jobs that do not start a login shell can source this file.",
    ]
    if efa:
        lines += [
            "# libfabric: use the EFA provider for inter-node traffic (not TCP).",
            "export FI_PROVIDER=efa",
        ]
    if device_rdma(instance, efa):
        lines += [
            "# GPUDirect RDMA: EFA reads and writes GPU memory directly (EFA generation 2 and later).",
            "export FI_EFA_USE_DEVICE_RDMA=1",
        ]
    lines += [
        "# NCCL bootstrap and socket traffic: any interface but loopback and docker bridges.",
        "export NCCL_SOCKET_IFNAME=^lo,docker",
    ]
    if efa and instance.is_gpu:
        lines += [
            "# NCCL buffer size AWS recommends with EFA: 8 MiB.",
            "export NCCL_BUFFSIZE=8388608",
        ]
    return "\n".join(lines)


def fragment(path: Path) -> str:
    """A script fragment, without its `# shellcheck shell=bash` line (only for editors on the file)."""
    text = path.read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# shellcheck shell="))


def _read(name: str) -> str:
    return fragment(SCRIPTS / name)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _quote(value: str) -> str:
    """shlex.quote, and quotes on a bare word too: `NAME=eval` reads like a command (SC2209)."""
    quoted = shlex.quote(value)
    return f"'{value}'" if quoted == value and _WORD.fullmatch(value) else quoted


def _settings(values: dict[str, str | int]) -> str:
    lines = ["", "# Settings of this node group, rendered by fmcluster.bootstrap."]
    lines += [f"{name}={_quote(str(value))}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


def node_script(instance_type: str, *, efa: bool, lustre: LustreMount | None = None,
                scratch_path: str = SCRATCH_PATH, metrics: Metrics | None = None) -> str:
    """The bootstrap shell script of a node of `instance_type`.

    `efa`: the node has EFA interfaces (sets the EFA environment). `lustre`: the file system to
    mount, or None. The NVMe part is left out for instance types without instance store.
    """
    instance = instance_entry(instance_type)
    settings: dict[str, str | int] = {
        "INSTANCE_TYPE": instance.name,
        "NCCL_ENV_FILE": NCCL_ENV_FILE,
        "NCCL_ENV": nccl_environment(instance, efa),
    }
    parts = ["nccl.sh"]
    steps = ["write_nccl_env"]
    if instance.nvme_disks:
        settings.update(NVME_DISK_COUNT=instance.nvme_disks, SCRATCH_PATH=scratch_path,
                        SCRATCH_ARRAY=SCRATCH_ARRAY, SCRATCH_WAIT_SECONDS=SCRATCH_WAIT_SECONDS)
        parts.append("scratch.sh")
        steps.append("setup_scratch")
    if lustre is not None:
        settings.update(FSX_SOURCE=lustre.source, FSX_MOUNT_PATH=lustre.mount_path,
                        FSX_MOUNT_ATTEMPTS=FSX_MOUNT_ATTEMPTS, FSX_RETRY_SECONDS=FSX_RETRY_SECONDS)
        parts.append("lustre.sh")
        steps.append("mount_lustre")
    if metrics is not None:
        settings.update(metrics_settings(instance, metrics, efa=efa, lustre_path=lustre.mount_path if lustre else ""))
        parts.append("metrics.sh")
        steps.append("setup_metrics")
    return compose(_read("header.sh"), settings, parts, steps, compact=True)


def compose(header: str, settings: dict[str, str | int], parts: Sequence[str], steps: Sequence[str],
            extra: Sequence[str] = (), *, compact: bool = False) -> str:
    """A script: `header`, the settings block, the fragments `parts` (file names in SCRIPTS) and
    `extra` (fragment texts), and a `main` that runs `steps` in order. Used for the PCS user data
    (`compact`: the fragments without their comment lines, for the 16 KiB limit) and for the
    SageMaker HyperPod lifecycle scripts (fmcluster.lifecycle; verbatim)."""
    read = (lambda name: without_comments(_read(name))) if compact else _read
    main = ["main() {", *(f"  {step}" for step in steps), '  log "done: $INSTANCE_TYPE node set up"', "}", "",
            'main "$@"', ""]
    return "\n".join([header + _settings(settings), *map(read, parts), *extra, *main])


def mime_multipart(parts: Sequence[tuple[str, str, str]], boundary: str = BOUNDARY) -> str:
    """A multipart/mixed document of (content type, file name, body) parts, ASCII, 7bit.

    The boundary is fixed, so the same parts always give the same bytes (stable templates).
    """
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for content_type, filename, body in parts:
        if boundary in body:
            raise ValueError(f"part {filename} contains the MIME boundary {boundary}")
        if not body.isascii():
            raise ValueError(f"part {filename} is not ASCII")
        lines += [f"--{boundary}", f'Content-Type: {content_type}; charset="us-ascii"',
                  "Content-Transfer-Encoding: 7bit", f'Content-Disposition: attachment; filename="{filename}"',
                  "", body.rstrip("\n")]
    lines += [f"--{boundary}--", ""]
    return "\n".join(lines)


def user_data(instance_type: str, *, efa: bool, lustre: LustreMount | None = None,
              scratch_path: str = SCRATCH_PATH, metrics: Metrics | None = None) -> str:
    """The node group's user data: MIME multipart with the bootstrap script (not yet base64)."""
    script = node_script(instance_type, efa=efa, lustre=lustre, scratch_path=scratch_path, metrics=metrics)
    return mime_multipart([("text/x-shellscript", SCRIPT_NAME, script)])
