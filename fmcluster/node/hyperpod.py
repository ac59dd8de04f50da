"""What runs on a SageMaker HyperPod node once HyperPod has set it up: the lifecycle folder of each
instance group (its entry script and hooks), from the model's setup of the group.

Sources and details: docs/research-notes.md, "fmcluster/node/hyperpod.py"."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from fmcluster.facts.images import HYPERPOD_SLURM_PREFIX
from fmcluster.model.cluster import COMPUTE, CONTROLLER, ClusterModel, NodeGroup
from fmcluster.model.node import HYPERPOD_EKS, HYPERPOD_SLURM, Containers
from fmcluster.node import accounting
from fmcluster.node import eks as eks_node
from fmcluster.node.program import Metrics, NodeProgram, install_health
from fmcluster.node.refs import NodeRefs
from fmcluster.node.shell import header

SCRIPTS = Path(__file__).parent / "scripts" / "hyperpod"
ENTRYPOINT = "on_init.sh"
HOOKS_DIR = "hooks.d"
METRICS_HOOK = "50-metrics.sh"
EXPECTED_GPUS_HOOK = "50-expected-gpus.sh"
# Hooks whose failure leaves the node working (without metrics) and so must not fail it.
OPTIONAL_HOOKS = (METRICS_HOOK, EXPECTED_GPUS_HOOK)
ACCOUNTING_HOOK = "60-accounting.sh"  # the controller's: the teams as Slurm accounting (fmcluster.node.accounting)
HOOK_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*\.sh")
# The comments name the module these scripts had: new text here would change every lifecycle
# folder, and so HyperPod's instance groups.
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


def metrics_parameter_name(cluster: str) -> str:
    """The SSM parameter with the remote-write URL of the cluster's Prometheus workspace, which
    the metrics hook reads (the cluster stack writes it)."""
    return f"/fmcluster/{cluster}/prometheus-remote-write-url"


def entry_script(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> str:
    """The `on_init.sh` of an instance group (docs/research-notes.md), from the model's setup of the
    group (`model.node(group)`): the guard on package upgrades, the EFA / NCCL environment, the
    image's home directories copied into the shared home HyperPod mounted, the hooks, LNet over EFA
    for an EFA-enabled file system the node's pods mount (HyperPod EKS), /scratch; Enroot and Pyxis
    on the controller and the login nodes (slurm_runtime); on the Slurm compute groups the readiness
    check, whose failure drains the node, the container runtime, the health check of GPU nodes
    (its replacement requests to `refs.replacement_queue`) and the end of a training plan's capacity
    (NodeProgram.capacity_end)."""
    setup = model.node(group)
    program = NodeProgram(group.instance, NODE_GROUP=group.name).protect().nccl(setup.efa)
    if setup.home is not None:
        program.seed_mounted_home(setup.home.mount_path)
    program.add(SCRIPTS / "hooks.sh", "run_hooks", HOOKS_DIR=HOOKS_DIR, OPTIONAL_HOOKS=" ".join(OPTIONAL_HOOKS))
    if setup.lnet_efa_interfaces:
        program.lnet(setup.lnet_efa_interfaces, install_client=True)
    if setup.scratch_path:
        program.scratch(setup.scratch_path)
    if setup.containers is not None and group.role != COMPUTE:
        slurm_runtime(program, setup.containers, setup.scratch_path, controller=group.role == CONTROLLER)
    if model.control_plane.type == HYPERPOD_SLURM and group.role == COMPUTE:
        if setup.containers is not None:
            slurm_runtime(program, setup.containers, setup.scratch_path, controller=False)
        program.readiness(mounts=setup.mounts, lnet_efa=False, containers=setup.containers,
                          scratch_path=setup.scratch_path)
        program.add("gate-drain.sh", "gate_drain")
        if setup.health is not None:
            install_health(program, model, setup, refs)
        if setup.capacity_end is not None and setup.slurm is not None:
            program.capacity_end(setup.capacity_end, setup.slurm.bin, setup.slurm.slurmd_units,
                                 partition=group.name)  # the group's partition
    return program.render(header(COMMENT))


def slurm_runtime(program: NodeProgram, containers: Containers, scratch_path: str, *,
                  controller: bool) -> None:
    """Enroot and Pyxis, baked into the image, checked and configured (containers.sh), then Pyxis
    registered in the controller's plugstack.conf by name (lifecycle_scripts/plugstack.sh;
    `controller`: and slurmctld reconfigured), as AWS's HyperPod reference installs them on every
    group: the controller registers Pyxis for every configless slurmd, srun and sbatch load it on
    the login nodes, the compute nodes run it."""
    program.containers(containers, scratch_path)
    program.add(SCRIPTS / "plugstack.sh", "register_pyxis", PLUGSTACK_CONF=containers.plugstack_conf,
                SLURM_CONTROLLER=int(controller))


def metrics_hook(model: ClusterModel, group: NodeGroup) -> str:
    """The `hooks.d/50-metrics.sh` of a HyperPod Slurm instance group: node exporter, the GPU
    and EFA collectors where the devices are, the Slurm collector on the controller, and the
    Prometheus agent remote-writing with SigV4, as on AWS PCS nodes (bootstrap/metrics.sh and
    collectors/, verbatim). The hook reads the workspace's URL from the SSM parameter
    `metrics_parameter_name` (a deploy-time value), in the cluster's region."""
    setup = model.node(group)
    program = NodeProgram(group.instance, METRICS_PARAMETER=metrics_parameter_name(model.name))
    program.add(SCRIPTS / "remote_write.sh")
    program.metrics(Metrics(model.name, "", model.region, slurm=setup.slurm_metrics), efa=setup.efa,
                    lustre_path=setup.lustre_path, step="setup_metrics_from_parameter")
    del program.settings["REMOTE_WRITE_URL"]  # set by read_remote_write_url
    return program.render(header(METRICS_COMMENT))


def hooks(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> dict[str, str]:
    """The group's lifecycle hooks, file name -> script: with metrics (`refs.metrics`), the
    metrics hook on HyperPod Slurm, the expected-GPUs metric's on HyperPod EKS (the node exporter
    chart's textfile collector reads it: HyperPod nodes have no launch template user data); on
    the controller of a HyperPod Slurm cluster with teams, fmcluster-accounting and its timer,
    which apply the teams from their SSM parameter (fmcluster.node.accounting)."""
    plane = model.control_plane.type
    made = {}
    if refs.metrics and plane == HYPERPOD_SLURM:
        made[METRICS_HOOK] = metrics_hook(model, group)
    if refs.metrics and plane == HYPERPOD_EKS:
        made[EXPECTED_GPUS_HOOK] = eks_node.expected_gpus_script(group)
    if model.teams and plane == HYPERPOD_SLURM and group.role == CONTROLLER:
        made[ACCOUNTING_HOOK] = accounting.install_script(
            parameter=accounting.parameter_name(model.name), region=model.region,
            slurm_bin=f"{HYPERPOD_SLURM_PREFIX}/bin", slurm_conf=f"{HYPERPOD_SLURM_PREFIX}/etc/slurm.conf")
    return made


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


def folder(entry: str, hooks: Mapping[str, str]) -> Bundle:
    """A lifecycle folder: the entry script `entry` and the hooks (file name -> script text, run in
    name order; names like ``50-metrics.sh``)."""
    files = {ENTRYPOINT: entry}
    for name, text in sorted(hooks.items()):
        if not HOOK_NAME.fullmatch(name):
            raise ValueError(f"hook name {name!r} is not a plain *.sh file name")
        files[f"{HOOKS_DIR}/{name}"] = text
    return Bundle(files)


def bundle(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> Bundle:
    """The lifecycle folder of an instance group: its entry script (`entry_script`) and its hooks (`hooks`)."""
    return folder(entry_script(model, group, refs), hooks(model, group, refs))
