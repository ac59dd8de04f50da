"""SageMaker HyperPod lifecycle scripts: what runs on a HyperPod node once HyperPod has set it up.

Sources and details: docs/research-notes.md, "fmcluster/node/lifecycle.py"."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from fmcluster.facts.efa import lnet_efa_interfaces
from fmcluster.facts.node import SCRATCH_PATH
from fmcluster.model.node import HYPERPOD_SLURM_BIN, Containers
from fmcluster.node import bootstrap

SCRIPTS = Path(__file__).parent / "scripts" / "hyperpod"
ENTRYPOINT = "on_init.sh"
HOOKS_DIR = "hooks.d"
METRICS_HOOK = "50-metrics.sh"
EXPECTED_GPUS_HOOK = "50-expected-gpus.sh"
# Hooks whose failure leaves the node working (without metrics) and so must not fail it.
OPTIONAL_HOOKS = (METRICS_HOOK, EXPECTED_GPUS_HOOK)
HOOK_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*\.sh")
COMMENT = """\
# fmcluster SageMaker HyperPod lifecycle script (LifeCycleConfig.OnInitComplete), rendered by
# fmcluster.node.lifecycle for one instance group. HyperPod runs it after its own node set-up; its
# output goes to the cluster's CloudWatch log group /aws/sagemaker/Clusters/<name>/<id>.
"""


METRICS_COMMENT = """\
# fmcluster SageMaker HyperPod lifecycle hook, rendered by fmcluster.node.lifecycle for one instance
# group: metrics collection as on AWS PCS nodes (fmcluster/node/scripts/boot/metrics.sh), remote-writing
# to the cluster's Prometheus workspace; its URL comes from an SSM parameter at run time.
"""


@dataclass(frozen=True)
class NodeChecks:
    """What an instance group's node must have before it takes jobs (HyperPod Slurm compute
    groups; a node that fails is drained with the reasons): `mounts`, the file system's mount
    point (HyperPod's FsxLustreConfig) and the shared home's (FsxOpenZfsConfig) besides /scratch;
    `containers`: on GPU nodes, Enroot and Pyxis (bootstrap/containers.sh, against HyperPod's
    /opt/slurm), the image cache on `shared_path` (default: the first of `mounts`), a node without
    them drained. `health`: on GPU nodes, the continuous health check (bootstrap.NodeProgram.health,
    Slurm's commands in /opt/slurm/bin): a node that turns faulty in service is drained with the fault."""

    mounts: tuple[str, ...] = ()
    containers: bool = False
    shared_path: Optional[str] = None  # Enroot's image cache: the Lustre mount ("" none; None: the first of mounts)
    health: Optional[bootstrap.HealthCheck] = None

    @property
    def cache_path(self) -> str:
        return self.shared_path if self.shared_path is not None else (self.mounts[0] if self.mounts else "")


@dataclass(frozen=True)
class SlurmRuntime:
    """Enroot and Pyxis on a HyperPod Slurm group without readiness checks: the controller
    (`controller`: it registers Pyxis in the plugstack.conf slurmctld sends to every configless
    slurmd, and reconfigures) and the login nodes (srun and sbatch load Pyxis there), as AWS's
    HyperPod reference installs them on every group. `shared_path`: the file system's mount
    point, for Enroot's image cache ("" none)."""

    controller: bool = False
    shared_path: str = ""


def entry_script(group: str, instance_type: str, *, efa: bool, scratch_path: str = SCRATCH_PATH,
                 checks: Optional[NodeChecks] = None, lnet_efa: bool = False,
                 runtime: Optional[SlurmRuntime] = None, home: str = "") -> str:
    """The `on_init.sh` of an instance group (docs/research-notes.md). `checks`: drain the node unless
    it is ready (Slurm compute groups). `lnet_efa`: configure LNet over EFA for an EFA-enabled file
    system mounted by the node's pods (HyperPod EKS; EFA groups only). `runtime`: Enroot and Pyxis
    on a controller or login group (SlurmRuntime). `home`: the shared home HyperPod mounted there
    (/home; "" none): the image's home directories are copied into it."""
    instance = bootstrap.instance_entry(instance_type)
    program = bootstrap.NodeProgram(instance, NODE_GROUP=group).protect().nccl(efa)
    if home:
        program.seed_mounted_home(home)
    program.add(SCRIPTS / "hooks.sh", "run_hooks", HOOKS_DIR=HOOKS_DIR, OPTIONAL_HOOKS=" ".join(OPTIONAL_HOOKS))
    lnet = lnet_efa_interfaces(instance, efa=efa, lustre_efa=lnet_efa)
    if lnet:
        program.lnet(lnet, install_client=True)
    if instance.nvme_disks:
        program.scratch(scratch_path)
    local = scratch_path if instance.nvme_disks else ""  # Enroot's node-local files: /tmp without it
    if runtime is not None:
        slurm_runtime(program, Containers.hyperpod(runtime.shared_path), local,
                      controller=runtime.controller)
    if checks is not None:
        containers = None
        if checks.containers and instance.is_gpu:
            containers = Containers.hyperpod(checks.cache_path)
            slurm_runtime(program, containers, local, controller=False)
        mounts = [*checks.mounts, *([scratch_path] if instance.nvme_disks else [])]
        program.readiness(mounts=mounts, lnet_efa=False, containers=containers, scratch_path=local)
        program.add("gate-drain.sh", "gate_drain")
        if checks.health is not None and instance.is_gpu:
            checks.health.install(program, efa_devices=bootstrap.efa_devices(instance, efa), mounts=mounts,
                                  slurm_bin=HYPERPOD_SLURM_BIN)
    return program.render(bootstrap.header(COMMENT))


def slurm_runtime(program: bootstrap.NodeProgram, containers: Containers, scratch_path: str, *,
                  controller: bool) -> None:
    """Enroot and Pyxis, baked into the image, checked and configured (containers.sh), then Pyxis
    registered in the controller's plugstack.conf by name (lifecycle_scripts/plugstack.sh;
    `controller`: and slurmctld reconfigured)."""
    program.containers(containers, scratch_path)
    program.add(SCRIPTS / "plugstack.sh", "register_pyxis", PLUGSTACK_CONF=containers.plugstack_conf,
                SLURM_CONTROLLER=int(controller))


def metrics_hook(instance_type: str, metrics: bootstrap.Metrics, *, efa: bool, parameter: str,
                 lustre_path: str = "") -> str:
    """The `hooks.d/50-metrics.sh` of a HyperPod Slurm instance group: node exporter, the GPU
    and EFA collectors where the devices are, the Slurm collector with `metrics.slurm` (the
    controller), and the Prometheus agent remote-writing with SigV4, as on AWS PCS nodes
    (bootstrap/metrics.sh and collectors/, verbatim). `metrics.remote_write_url` is not used: the
    hook reads the URL from the SSM parameter `parameter` (a deploy-time value), in `metrics.region`."""
    instance = bootstrap.instance_entry(instance_type)
    program = bootstrap.NodeProgram(instance, METRICS_PARAMETER=parameter)
    program.add(SCRIPTS / "remote_write.sh")
    program.metrics(metrics, efa=efa, lustre_path=lustre_path, step="setup_metrics_from_parameter")
    del program.settings["REMOTE_WRITE_URL"]  # set by read_remote_write_url
    return program.render(bootstrap.header(METRICS_COMMENT))


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


def bundle(group: str, instance_type: str, *, efa: bool, hooks: Mapping[str, str] | None = None,
           checks: Optional[NodeChecks] = None, lnet_efa: bool = False,
           runtime: Optional[SlurmRuntime] = None, home: str = "") -> Bundle:
    """The lifecycle folder of an instance group: the entry script (`entry_script`) and the hooks
    (file name -> script text, run in name order; names like ``50-exporters.sh``)."""
    files = {ENTRYPOINT: entry_script(group, instance_type, efa=efa, checks=checks, lnet_efa=lnet_efa,
                                      runtime=runtime, home=home)}
    for name, text in sorted((hooks or {}).items()):
        if not HOOK_NAME.fullmatch(name):
            raise ValueError(f"hook name {name!r} is not a plain *.sh file name")
        files[f"{HOOKS_DIR}/{name}"] = text
    return Bundle(files)
