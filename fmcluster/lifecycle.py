"""SageMaker HyperPod lifecycle scripts: what runs on a HyperPod node once HyperPod has set it up.

Pure: no CDK, no AWS call. The scripts reuse the node bootstrap fragments of
``fmcluster/bootstrap/*.sh`` (EFA/NCCL environment, NVMe scratch) verbatim, rendered per
instance group from the instance catalog like the AWS PCS user data, plus
``fmcluster/lifecycle_scripts/hooks.sh`` (run every hook shipped in ``hooks.d/``: the exporters
of the observability layer plug in there: `metrics_hook`, the Slurm nodes' metrics collection of
``bootstrap/metrics.sh`` verbatim, and on HyperPod EKS the node's expected GPU count).

One instance group gets one *bundle*: its entry script ``on_init.sh`` and the hooks, published
under one S3 prefix named after the bundle's content digest (constructs_lib.hyperpod_lifecycle),
so a changed script is a new prefix and never overwrites what running nodes were created from.

HyperPod runs the entry script as its ``LifeCycleConfig.OnInitComplete`` script: "This script
runs on the node after the AMI-based initialization is complete" (SageMaker API Reference,
ClusterLifeCycleConfig). HyperPod itself configures Slurm (API-driven SlurmConfig) or joins the
node to EKS, and mounts the FSx for Lustre file system (InstanceStorageConfigs.FsxLustreConfig,
Slurm); the script does not redo any of that. The file system's DNS and mount names are
deploy-time values of NAME-storage, which a file asset cannot carry, so the Lustre mount is the
cluster's FsxLustreConfig and not ``lustre.sh``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from fmcluster import bootstrap

SCRIPTS = Path(__file__).with_name("lifecycle_scripts")
ENTRYPOINT = "on_init.sh"
HOOKS_DIR = "hooks.d"
METRICS_HOOK = "50-metrics.sh"
EXPECTED_GPUS_HOOK = "50-expected-gpus.sh"
HOOK_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*\.sh")
COMMENT = """\
# fmcluster SageMaker HyperPod lifecycle script (LifeCycleConfig.OnInitComplete), rendered by
# fmcluster.lifecycle for one instance group. HyperPod runs it after its own node set-up; its
# output goes to the cluster's CloudWatch log group /aws/sagemaker/Clusters/<name>/<id>.
"""


METRICS_COMMENT = """\
# fmcluster SageMaker HyperPod lifecycle hook, rendered by fmcluster.lifecycle for one instance
# group: metrics collection as on AWS PCS nodes (fmcluster/bootstrap/metrics.sh), remote-writing
# to the cluster's Prometheus workspace; its URL comes from an SSM parameter at run time.
"""


def _header(comment: str = COMMENT) -> str:
    """The bootstrap header (strict mode, log, add_fstab) under a HyperPod comment."""
    lines = bootstrap.fragment(bootstrap.SCRIPTS / "header.sh").splitlines(keepends=True)[1:]
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "#!/bin/bash\n" + comment + "".join(lines)


def entry_script(group: str, instance_type: str, *, efa: bool, scratch_path: str = bootstrap.SCRATCH_PATH) -> str:
    """The `on_init.sh` of an instance group: EFA/NCCL environment, NVMe scratch (instance types
    with instance store), then the hooks."""
    instance = bootstrap.instance_entry(instance_type)
    settings: dict[str, str | int] = {
        "NODE_GROUP": group,
        "INSTANCE_TYPE": instance.name,
        "NCCL_ENV_FILE": bootstrap.NCCL_ENV_FILE,
        "NCCL_ENV": bootstrap.nccl_environment(instance, efa),
    }
    parts, steps = ["nccl.sh"], ["write_nccl_env"]
    if instance.nvme_disks:
        settings.update(NVME_DISK_COUNT=instance.nvme_disks, SCRATCH_PATH=scratch_path,
                        SCRATCH_ARRAY=bootstrap.SCRATCH_ARRAY, SCRATCH_WAIT_SECONDS=bootstrap.SCRATCH_WAIT_SECONDS)
        parts.append("scratch.sh")
        steps.append("setup_scratch")
    settings["HOOKS_DIR"] = HOOKS_DIR
    steps.append("run_hooks")
    return bootstrap.compose(_header(), settings, parts, steps, extra=[bootstrap.fragment(SCRIPTS / "hooks.sh")])


def metrics_hook(instance_type: str, metrics: bootstrap.Metrics, *, efa: bool, parameter: str,
                 lustre_path: str = "") -> str:
    """The `hooks.d/50-metrics.sh` of a HyperPod Slurm instance group: node exporter, the GPU
    and EFA collectors where the devices are, the Slurm collector with `metrics.slurm` (the
    controller), and the Prometheus agent remote-writing with SigV4, as on AWS PCS nodes
    (bootstrap/metrics.sh and collectors/, verbatim). `metrics.remote_write_url` is not used: the
    hook reads the URL from the SSM parameter `parameter` (a deploy-time value), in `metrics.region`."""
    instance = bootstrap.instance_entry(instance_type)
    settings: dict[str, str | int] = {"INSTANCE_TYPE": instance.name, "METRICS_PARAMETER": parameter}
    settings.update(bootstrap.metrics_settings(instance, metrics, efa=efa, lustre_path=lustre_path))
    del settings["REMOTE_WRITE_URL"]  # set by read_remote_write_url
    return bootstrap.compose(_header(METRICS_COMMENT), settings, ["metrics.sh"],
                             ["read_remote_write_url", "setup_metrics"],
                             extra=[bootstrap.fragment(SCRIPTS / "remote_write.sh")])


@dataclass(frozen=True)
class Bundle:
    """The files of one instance group's lifecycle folder: relative path -> content."""

    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """SHA-256 of the names and contents: the folder's name in S3."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + self.files[name].encode() + b"\0")
        return h.hexdigest()


def bundle(group: str, instance_type: str, *, efa: bool, hooks: Mapping[str, str] | None = None) -> Bundle:
    """The lifecycle folder of an instance group: the entry script and the hooks (file name ->
    script text, run in name order; names like ``50-exporters.sh``)."""
    files = {ENTRYPOINT: entry_script(group, instance_type, efa=efa)}
    for name, text in sorted((hooks or {}).items()):
        if not HOOK_NAME.fullmatch(name):
            raise ValueError(f"hook name {name!r} is not a plain *.sh file name")
        files[f"{HOOKS_DIR}/{name}"] = text
    return Bundle(files)
