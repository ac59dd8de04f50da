"""A node's program being assembled (`NodeProgram`): the fragments of fmcluster/node/scripts/boot/
with their settings and the steps `main` runs, one method per part of what a node does at boot
(the readiness check, the deep and continuous health checks, /scratch, LNet over EFA, the file
system and the shared home, Enroot and Pyxis, the IMEX prolog, network features, metrics).
The control planes' renderers (fmcluster.node.pcs, fmcluster.node.hyperpod, fmcluster.node.eks)
call them with what the model resolved for a group (`ClusterModel.node`).

Sources and details: docs/research-notes.md, "The node kit (fmcluster/node/)"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from fmcluster.facts import health as health_facts
from fmcluster.facts import openzfs
from fmcluster.facts.catalog import InstanceType
from fmcluster.facts.node import DLAMI_NVME_PATH, FMCLUSTER_LIB, HOME_PATH, IMEX_PROLOG, SCRATCH_PATH, TEXTFILE_DIR
from fmcluster.model import expected
from fmcluster.model.node import SLURMD_UNIT, SPOT_NOTICE, CapacityEnd, Containers, NodeSetup
from fmcluster.node import runtime
from fmcluster.node.nccl import NCCL_ENV_FILE, nccl_environment
from fmcluster.node.refs import NodeRefs
from fmcluster.node.shell import (
    COLLECTORS,
    FMCLUSTER_ETC,
    IMAGE_SCRIPTS,
    PROGRAMS,
    SLURM_SCRIPTS,
    compose,
    embed,
)

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup

SCRATCH_ARRAY = "/dev/md/scratch"
SCRATCH_WAIT_SECONDS = 60  # for the instance-store disks to appear
DLAMI_NVME_UNIT = "dlami-nvme.service"  # the Deep Learning AMIs' own instance-store set-up
DLAMI_WAIT_SECONDS = 120  # for that unit to finish
FSX_MOUNT_ATTEMPTS = 20
FSX_RETRY_SECONDS = 15
FSX_MOUNT_OPTIONS = "defaults,relatime,flock,_netdev"
LNET_EFA_UNIT = "fmcluster-lnet-efa.service"
# The shared home over NFS (FSx for OpenZFS: fmcluster.facts.openzfs.MOUNT_OPTIONS); fstab adds
# _netdev: mounted once the network is up.
NFS_MOUNT_OPTIONS = ",".join(openzfs.MOUNT_OPTIONS)
HOME_STAGING = "/run/fmcluster-home"  # where the shared home is mounted while the image's /home is copied in
HOME_IMAGE_ROOT = "/run/fmcluster-image-root"  # a bind mount of /: the image's /home under a mounted home
HOME_MOUNT_ATTEMPTS = 20
HOME_RETRY_SECONDS = 15
LUSTRE_CLIENT_ATTEMPTS = 3  # dnf install lustre-client, on Amazon EKS's images
READY_WAIT_SECONDS = 120  # how long the readiness check waits for late GPUs and mounts
SLURMD_RETRY_SECONDS = 30  # a slurmd held back by the readiness check is tried again this often
# network-features (programs/network-features.sh): tries for 10 minutes (EC2 answers an instance's
# topology some time after its launch; slurmd registers after the boot script)
NETWORK_FEATURES_ATTEMPTS = 40
NETWORK_FEATURES_RETRY_SECONDS = 15
# `--clear` at every start of slurmd (its ExecStartPost=): tried every few seconds until slurmd has
# registered, within a bound well inside slurmd's start timeout
NETWORK_FEATURES_CLEAR_SECONDS = 45
NETWORK_FEATURES_CLEAR_RETRY_SECONDS = 3
# `--leave` when the instance shuts down (the unit's ExecStop=, before slurmd stops): bounded, so a
# slurmctld that does not answer never holds the shutdown up
NETWORK_FEATURES_LEAVE_SECONDS = 30
# its restore: set again what slurmctld forgot, at once after a reconfigure (configless slurmd
# rewrites /run/slurm/conf/slurm.conf) and, a slow backstop for a slurmctld restart, every 3 to 5
# minutes (spread at random: at 1,000 nodes a few requests a second, not one node-table dump each)
NETWORK_FEATURES_RESTORE_SECONDS = 180
NETWORK_FEATURES_RESTORE_SPREAD_SECONDS = 120
COLLECT_INTERVAL_SECONDS = 30
# capacity-end (programs/capacity-end.sh): how often a node acts on its Capacity Block's or training
# plan's end; with its timer's random delay of up to a minute, the signal comes at most about 3 minutes
# late, a backup node's GRACE later still (hence end_signal_minutes of at least 12). It reads
# the end again only once the answer kept is older than a random half to whole of READ_MINUTES, and
# at every run from NEAR_MINUTES before the signal to the reclaim: at 1,000 nodes 0.74
# DescribeCapacityReservations (or DescribeTrainingPlan) a second instead of 8.3, against EC2's 20 a
# second for the API in an account and Region (the program's header has the sums and sources). A job
# whose first node has not signalled it GRACE after the signal time (two runs, at most half the lead)
# is signalled by another of its nodes.
CAPACITY_END_SECONDS = 120
CAPACITY_END_READ_MINUTES = 30
CAPACITY_END_NEAR_MINUTES = 10
CAPACITY_END_GRACE_SECONDS = 2 * CAPACITY_END_SECONDS
CAPACITY_END_STATE_DIR = "/var/lib/fmcluster/capacity-end"
# interruption (programs/interruption.sh): how often a spot node looks for EC2's interruption notice
# (aws-node-termination-handler's 2 seconds; EC2 recommends 5), the longest wait while the instance
# metadata service fails, and the IMDSv2 token's lifetime (its most: 6 hours)
INTERRUPTION_POLL_SECONDS = 2
INTERRUPTION_BACKOFF_SECONDS = 60
INTERRUPTION_TOKEN_SECONDS = 21600
INTERRUPTION_STATE_DIR = "/var/lib/fmcluster/interruption"
METRICS_PATHS = {"FMCLUSTER_ETC": FMCLUSTER_ETC, "SYSTEMD_DIR": "/etc/systemd/system",
                 "METRICS_LIB": FMCLUSTER_LIB, "METRICS_STATE": "/var/lib/fmcluster",
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
class HomeMount:
    """The cluster's shared home as a node mounts it at /home (values may be CDK tokens):
    `source`, `fstype` (nfs or lustre), the options of its fstab line and of the mount that seeds
    it (home.sh). `nfs` (FSx for OpenZFS) and `lustre` (the Lustre file system at /home) make them."""

    source: str
    fstype: str
    fstab_options: str
    mount_options: str
    mount_path: str = HOME_PATH

    @classmethod
    def nfs(cls, dns_name: str) -> "HomeMount":
        """FSx for OpenZFS: its root volume over NFS 4.1."""
        return cls(openzfs.source(dns_name), "nfs", NFS_MOUNT_OPTIONS + ",_netdev", NFS_MOUNT_OPTIONS)

    @classmethod
    def lustre(cls, mount: "LustreMount", *, lnet: bool) -> "HomeMount":
        """The FSx for Lustre file system mounted at /home (its options as lustre.sh's)."""
        options = FSX_MOUNT_OPTIONS + (f",x-systemd.requires={LNET_EFA_UNIT}" if lnet else "")
        return cls(mount.source, "lustre", options, "relatime,flock", mount.mount_path)


@dataclass(frozen=True)
class Metrics:
    """Where a node sends its metrics (values may be CDK tokens): the cluster's name (label
    `cluster`), the workspace's remote-write URL and region; `slurm`: this node runs the Slurm
    collector (the login node on PCS, the controller on HyperPod)."""

    cluster: str
    remote_write_url: str
    region: str
    slurm: bool = False


HEALTH_SLURM_PROGRAM = f"{FMCLUSTER_LIB}/node-health-slurm"  # what HealthCheckProgram= names
HEALTH_DCGM_LEVEL = 1  # the quick DCGM diagnostic, on an idle node
# Seconds one command of the check may take (a hung mount, nvidia-smi), and the DCGM diagnostic,
# by runner: slurmd kills its HealthCheckProgram after 60 s (src/slurmd/slurmd/slurmd.c,
# run_script_health_check: max_wait 60 * 1000 ms; its environment holds SLURMD_NODENAME alone).
HEALTH_TIMEOUTS = {"timer": (30, 120), "slurm": (8, 30), "metrics": (30, 120)}


def has_nvlink(instance: InstanceType) -> bool:
    """Whether the instance's GPUs are joined by NVLink (the catalog's nvlink_gbps, and more than
    one GPU: a lone H100 of p5.4xlarge has no peer, its links stay inactive)."""
    return bool(instance.gpu and instance.gpu.nvlink_gbps) and instance.gpu_count > 1


def imex_prolog(slurm_bin: str, **settings: str) -> str:
    """The IMEX Slurm prolog (fmcluster/node/scripts/slurm/imex-prolog.sh) for nodes whose Slurm commands are in
    `slurm_bin` (Slurm gives a prolog no PATH): its settings lines SLURM_BIN, and any of `settings`
    (ROOT, IMEX_WAIT_SECONDS: tests), replaced. Values go in as written (shell words)."""
    text = (SLURM_SCRIPTS / "imex-prolog.sh").read_text(encoding="utf-8")
    if not re.fullmatch(r"/[A-Za-z0-9._/-]+", slurm_bin):
        raise ValueError(f"Slurm's bin directory {slurm_bin!r} is not a plain absolute path")
    for name, value in {"SLURM_BIN": slurm_bin, **settings}.items():
        line = f"{name}={value}".replace("\\", "\\\\")  # a replacement template: only backslashes are special
        text, count = re.subn(rf"^{name}=.*$", line, text, count=1, flags=re.MULTILINE)
        if count != 1:
            raise ValueError(f"the IMEX prolog has no setting {name}")
    return text


COLLECTOR_FILES = {"dcgm": "gpu.sh", "efa": "efa.sh", "slurm": "slurm.sh"}  # scrape job -> collector


def metrics_settings(instance: InstanceType, metrics: Metrics, *, efa: bool,
                     lustre_path: str = "") -> dict[str, str | int]:
    """The settings block of ``metrics.sh`` for one node group."""
    return {
        "CLUSTER_NAME": metrics.cluster, "REMOTE_WRITE_URL": metrics.remote_write_url,
        "METRICS_REGION": metrics.region, "EXPECTED_GPUS": instance.gpu_count or 0,
        "EXPECTED_LUSTRE_MOUNT": lustre_path, "COLLECT_INTERVAL_SECONDS": COLLECT_INTERVAL_SECONDS,
        **METRICS_PATHS, "METRICS_COLLECTORS": " ".join(metrics_collectors(instance, metrics, efa=efa)),
    }


def metrics_collectors(instance: InstanceType, metrics: Metrics, *, efa: bool) -> list[str]:
    """The textfile collectors (scrape jobs) of a node: GPU where there are GPUs, EFA where there
    is EFA, Slurm where `metrics.slurm`."""
    return [job for job, wanted in (("dcgm", instance.is_gpu), ("efa", efa), ("slurm", metrics.slurm)) if wanted]


# The deep check's bound: each tool's, and a minute to spare (node-ready's `timeout`).
DEEP_CHECK_SECONDS = health_facts.DEEP_DCGM_TIMEOUT_SECONDS + health_facts.DEEP_NCCL_TIMEOUT_SECONDS + 60


def deep_nccl_floor(group: NodeGroup) -> str:
    """The all_reduce bus bandwidth (GB/s) below which the deep check fails a node of `group`: the
    FAIL line of the node-local figure `fmcluster verify` holds the acceptance kit's
    nccl-all_reduce-node to (fmcluster.model.expected), "0" where it has none (PCIe or one GPU:
    measured, not judged)."""
    figure = expected.nccl_inside_node(group, "all_reduce")
    return f"{figure.warn_at:g}" if figure.warn_at is not None else "0"


class NodeProgram:
    """A node script being assembled: settings, fragments (file names in SCRIPTS, or paths) and
    the steps `main` runs in order. `add` appends a fragment with its steps and settings; a fragment or
    setting added twice counts once (the same value)."""

    def __init__(self, instance: InstanceType, **settings: str | int) -> None:
        self.instance = instance
        self.settings: dict[str, str | int] = {"INSTANCE_TYPE": instance.name, **settings}
        self.parts: list[str | Path] = ["common.sh"]
        self.steps: list[str] = []
        self.programs: dict[str, Path] = {}  # embedded whole scripts: name -> file
        self.rendered: dict[str, str] = {}  # name -> the program's text where rendered (settings in it)

    def add(self, part: str | Path, *steps: str, **settings: str | int) -> "NodeProgram":
        if part not in self.parts:
            self.parts.append(part)
        self.steps += steps
        for name, value in settings.items():
            if self.settings.get(name, value) != value:
                raise ValueError(f"setting {name} given two values: {self.settings[name]!r} and {value!r}")
            self.settings[name] = value
        return self

    def nccl(self, efa: bool) -> "NodeProgram":
        return self.add("nccl.sh", "write_nccl_env", NCCL_ENV_FILE=NCCL_ENV_FILE,
                        NCCL_ENV=nccl_environment(self.instance, efa))

    def protect(self) -> "NodeProgram":
        return self.add("protect.sh", "protect_running_jobs")

    def readiness(self, *, mounts: Sequence[str], lnet_efa: bool, containers: Optional[Containers] = None,
                  scratch_path: str = "", imex: bool = False) -> "NodeProgram":
        """The readiness check and its settings (no gate: the caller adds one); with `containers`,
        the container runtime is checked too (NodeProgram.containers installs it); with `imex`,
        nvidia-imex.service must be enabled (NodeProgram.slurm_prolog enables it)."""
        self.programs["node_ready"] = PROGRAMS / "node-ready.sh"
        checked = dict.fromkeys(("READY_ENROOT_VERSION", "READY_PYXIS_PLUGIN", "READY_PYXIS_CONF",
                                 "READY_PLUGSTACK", "READY_ENROOT_DIRS"), "")
        if containers is not None:
            paths = runtime.enroot_paths(containers, scratch_path)
            local = [f"{paths['ENROOT_LOCAL']}/{d}" for d in runtime.ENROOT_LOCAL_DIRS]
            checked = {"READY_ENROOT_VERSION": runtime.ENROOT_VERSION, "READY_PYXIS_PLUGIN": containers.plugin,
                       "READY_PYXIS_CONF": containers.pyxis_conf, "READY_PLUGSTACK": containers.slurmd_plugstack,
                       "READY_ENROOT_DIRS": " ".join([*local, paths["ENROOT_CACHE_ROOT"]])}
        return self.add("ready.sh", "install_node_ready", FMCLUSTER_LIB=FMCLUSTER_LIB, FMCLUSTER_ETC=FMCLUSTER_ETC,
                        EXPECTED_GPUS=self.instance.gpu_count or 0, REQUIRED_MOUNTS=" ".join(mounts),
                        LNET_EFA=int(lnet_efa), READY_WAIT_SECONDS=READY_WAIT_SECONDS, TEXTFILE_DIR=TEXTFILE_DIR,
                        READY_IMEX=int(imex), **checked)

    def deep_check(self, nccl_floor: str) -> "NodeProgram":
        """The deep check of a new GPU node (programs/deep-check.sh: a DCGM diagnostic and a
        node-local NCCL all-reduce whose bus bandwidth must reach `nccl_floor` GB/s: deep_nccl_floor),
        run by the readiness check once per instance; call it before `readiness` (its settings go
        into node-ready.env, its bound into slurmd's TimeoutStartSec)."""
        if not self.instance.is_gpu:
            return self
        self.programs["deep_check"] = PROGRAMS / "deep-check.sh"
        return self.add("ready.sh", DEEP_CHECK=1, DEEP_CHECK_SECONDS=DEEP_CHECK_SECONDS,
                        DEEP_DCGM_LEVEL=health_facts.DEEP_DCGM_LEVEL,
                        DEEP_DCGM_SECONDS=health_facts.DEEP_DCGM_TIMEOUT_SECONDS,
                        DEEP_NCCL_SECONDS=health_facts.DEEP_NCCL_TIMEOUT_SECONDS,
                        DEEP_NCCL_TESTS=" ".join(health_facts.DEEP_NCCL_TESTS), DEEP_MPIRUN=health_facts.DEEP_MPIRUN,
                        DEEP_NCCL_BUSBW_FLOOR=nccl_floor,
                        DEEP_CHECK_MARKER=health_facts.DEEP_CHECK_MARKER, DEEP_CHECK_LOG=health_facts.DEEP_CHECK_LOG)

    def replacement(self, queue_url: str, region: str, cluster: str, plane: str = "pcs") -> "NodeProgram":
        """$FMCLUSTER_LIB/request-replacement (programs/request-replacement.sh, replacement.sh) and
        its settings file: the node health program's way to ask the cluster's node replacer
        (fmcluster_cdk/constructs/compute/node_replacer.py) to replace this node. `queue_url` may
        be a CDK token; `plane`: pcs or hyperpod-slurm."""
        self.programs["request_replacement"] = PROGRAMS / "request-replacement.sh"
        return self.add("replacement.sh", "install_request_replacement", FMCLUSTER_LIB=FMCLUSTER_LIB,
                        FMCLUSTER_ETC=FMCLUSTER_ETC, REPLACE_QUEUE_URL=queue_url, REPLACE_REGION=region,
                        REPLACE_CLUSTER=cluster, REPLACE_PLANE=plane)

    def containers(self, containers: Containers, scratch_path: str = "") -> "NodeProgram":
        """Enroot and Pyxis, baked into the node's image (fmcluster.node.image), checked and
        configured (containers.sh): after /scratch and the file system are mounted. Nothing is
        downloaded or built: a node whose image lacks them is not ready."""
        return self.add("containers.sh", "setup_containers", ENROOT_VERSION=runtime.ENROOT_VERSION,
                        ENROOT_COMMIT=runtime.ENROOT_COMMIT, PYXIS_TAG=runtime.PYXIS_TAG,
                        PYXIS_COMMIT=runtime.PYXIS_COMMIT,
                        IMAGE_MANIFEST=runtime.IMAGE_MANIFEST, SLURM_PREFIX=containers.slurm_prefix,
                        PYXIS_PLUGIN=containers.plugin, PLUGSTACK_DIR=containers.plugstack_dir,
                        SLURM_BIN=containers.slurm_bin, RESTART_SLURMD=int(containers.restart_slurmd),
                        CONTAINER_MOUNTS=" ".join(([containers.shared_path] if containers.shared_path else [])
                                                  + ([scratch_path] if scratch_path else [])),
                        **runtime.enroot_paths(containers, scratch_path))

    def slurm_prolog(self, slurm_bin: str) -> "NodeProgram":
        """The cluster's Slurm prolog at IMEX_PROLOG, before slurmd may start: on an UltraServer
        instance the IMEX prolog (fmcluster/node/scripts/slurm/imex-prolog.sh, with Slurm's commands in
        `slurm_bin`), and nvidia-imex.service enabled; on any other, one that does nothing
        (no-imex-prolog.sh: Prolog= is cluster-wide, and a node without it drains)."""
        if not self.instance.ultraserver:
            self.programs["imex_prolog"] = SLURM_SCRIPTS / "no-imex-prolog.sh"
            return self.add("prolog.sh", "install_slurm_prolog", IMEX_PROLOG=IMEX_PROLOG)
        self.programs["imex_prolog"] = SLURM_SCRIPTS / "imex-prolog.sh"
        self.rendered["imex_prolog"] = imex_prolog(slurm_bin)
        return self.add("prolog.sh", "install_slurm_prolog", "enable_imex", IMEX_PROLOG=IMEX_PROLOG)

    def health(self, *, efa_devices: int, mounts: Sequence[str], check_seconds: int, replace: bool,
               slurm_bin: str, runner: str = "timer") -> "NodeProgram":
        """The continuous health check (health.sh; programs/node-health.sh): GPUs, XIDs, ECC,
        NVLink where the type has it, `efa_devices` EFA devices (0: none checked), `mounts`
        answering, DCGM on an idle node; a faulty node drained through Slurm's commands in
        `slurm_bin`, and with `replace` reported for replacement. `runner`: "timer" (every
        `check_seconds`), "slurm" (HealthCheckProgram=HEALTH_SLURM_PROGRAM) or "metrics" (a
        Kubernetes node: every `check_seconds`, only the metrics, no Slurm)."""
        if runner not in HEALTH_TIMEOUTS:
            raise ValueError(f"health check runner {runner!r}: timer, slurm or metrics")
        if runner != "metrics" and not re.fullmatch(r"/[A-Za-z0-9._/-]+", slurm_bin):
            raise ValueError(f"Slurm's bin directory {slurm_bin!r} is not a plain absolute path")
        self.programs["node_health"] = PROGRAMS / "node-health.sh"
        self.programs["slurm_node"] = PROGRAMS / "slurm-node.sh"
        node_faults = " ".join(f.slug for f in health_facts.FAULTS if f.kind == health_facts.NODE)
        return self.add("health.sh", "install_node_health", FMCLUSTER_LIB=FMCLUSTER_LIB, FMCLUSTER_ETC=FMCLUSTER_ETC,
                        TEXTFILE_DIR=TEXTFILE_DIR, EXPECTED_GPUS=self.instance.gpu_count or 0,
                        HEALTH_EFA=efa_devices, HEALTH_NVLINK=int(has_nvlink(self.instance)),
                        HEALTH_MOUNTS=" ".join(mounts), HEALTH_XIDS=" ".join(map(str, health_facts.REPLACE_XIDS)),
                        HEALTH_RESET_XIDS=" ".join(map(str, health_facts.RESET_XIDS)),
                        HEALTH_NODE_FAULTS=node_faults, HEALTH_REASON_PREFIX=health_facts.REASON_PREFIX,
                        HEALTH_COMMAND_TIMEOUT=HEALTH_TIMEOUTS[runner][0], HEALTH_DCGM_LEVEL=HEALTH_DCGM_LEVEL,
                        HEALTH_DCGM_TIMEOUT=HEALTH_TIMEOUTS[runner][1], HEALTH_SLURM_BIN=slurm_bin,
                        HEALTH_REPLACE=int(replace), HEALTH_RUNNER=runner, HEALTH_CHECK_SECONDS=check_seconds)

    def network_features(self, slurm_bin: str, slurmd_units: str = SLURMD_UNIT) -> "NodeProgram":
        """The node's place in EC2's network (DescribeInstanceTopology) as Slurm node features
        nn1-ID..nnN-ID, set at every boot once slurmd has registered (network-features.sh), with
        Slurm's commands in `slurm_bin`: what the kit's placement.sh asks for on AWS PCS. Its unit
        starts after slurmd's, whichever of `slurmd_units` (SLURMD_UNITS) the node has."""
        self.programs["network_features"] = PROGRAMS / "network-features.sh"
        self.programs["slurm_node"] = PROGRAMS / "slurm-node.sh"
        if not re.fullmatch(r"/[A-Za-z0-9._/-]+", slurm_bin):
            raise ValueError(f"Slurm's bin directory {slurm_bin!r} is not a plain absolute path")
        return self.add("network-features.sh", "clear_network_features", "setup_network_features",
                        FMCLUSTER_LIB=FMCLUSTER_LIB,
                        NETWORK_FEATURES_SLURM_BIN=slurm_bin,
                        NETWORK_FEATURES_ATTEMPTS=NETWORK_FEATURES_ATTEMPTS,
                        NETWORK_FEATURES_RETRY_SECONDS=NETWORK_FEATURES_RETRY_SECONDS,
                        NETWORK_FEATURES_CLEAR_SECONDS=NETWORK_FEATURES_CLEAR_SECONDS,
                        NETWORK_FEATURES_LEAVE_SECONDS=NETWORK_FEATURES_LEAVE_SECONDS,
                        NETWORK_FEATURES_CLEAR_RETRY_SECONDS=NETWORK_FEATURES_CLEAR_RETRY_SECONDS,
                        NETWORK_FEATURES_RESTORE_SECONDS=NETWORK_FEATURES_RESTORE_SECONDS,
                        NETWORK_FEATURES_RESTORE_SPREAD_SECONDS=NETWORK_FEATURES_RESTORE_SPREAD_SECONDS,
                        SLURMD_UNITS=slurmd_units)

    def capacity_end(self, end: CapacityEnd, slurm_bin: str, slurmd_units: str = SLURMD_UNIT,
                     partition: str = "") -> "NodeProgram":
        """The end of the node's Capacity Block or training plan handled (capacity-end.sh;
        programs/capacity-end.sh, reading the end where `end.source` says): a Slurm maintenance
        reservation over the group's `partition` from the time EC2 or SageMaker terminates the
        instances, the jobs signalled and the node drained `end.signal_minutes` before it, with
        Slurm's commands in `slurm_bin`; run after slurmd (whichever of `slurmd_units`) and every
        CAPACITY_END_SECONDS. The readiness check then wants the AWS CLI, which reads the end."""
        if not re.fullmatch(r"/[A-Za-z0-9._/-]+", slurm_bin):
            raise ValueError(f"Slurm's bin directory {slurm_bin!r} is not a plain absolute path")
        if end.source == SPOT_NOTICE:
            return self.interruption(end, slurm_bin, slurmd_units)
        self.programs["capacity_end"] = PROGRAMS / "capacity-end.sh"
        self.programs["slurm_node"] = PROGRAMS / "slurm-node.sh"
        self.programs["slurm_jobs"] = PROGRAMS / "slurm-jobs.sh"
        return self.add("capacity-end.sh", "install_capacity_end", FMCLUSTER_LIB=FMCLUSTER_LIB,
                        FMCLUSTER_ETC=FMCLUSTER_ETC, CAPACITY_END_SLURM_BIN=slurm_bin,
                        CAPACITY_END_SOURCE=end.source, CAPACITY_END_RESERVATION_ID=end.reservation_id,
                        CAPACITY_END_TRAINING_PLAN_ARN=end.training_plan_arn,
                        CAPACITY_END_TERMINATION_MINUTES=end.termination_minutes,
                        CAPACITY_END_SIGNAL_MINUTES=end.signal_minutes, CAPACITY_END_SIGNAL=end.signal,
                        CAPACITY_END_STATE_DIR=CAPACITY_END_STATE_DIR, CAPACITY_END_SECONDS=CAPACITY_END_SECONDS,
                        CAPACITY_END_PARTITION=partition, CAPACITY_END_READ_MINUTES=CAPACITY_END_READ_MINUTES,
                        CAPACITY_END_NEAR_MINUTES=CAPACITY_END_NEAR_MINUTES,
                        CAPACITY_END_GRACE_SECONDS=min(CAPACITY_END_GRACE_SECONDS, end.signal_minutes * 30),
                        SLURMD_UNITS=slurmd_units, READY_AWS_CLI=1)

    def interruption(self, end: CapacityEnd, slurm_bin: str, slurmd_units: str = SLURMD_UNIT) -> "NodeProgram":
        """EC2's interruption notice of a spot node handled (interruption.sh; programs/interruption.sh):
        looked for every INTERRUPTION_POLL_SECONDS, and on it the node drained and its jobs signalled
        with `end.signal` at once, with Slurm's commands in `slurm_bin`; the service starts after
        slurmd (whichever of `slurmd_units`) and runs as long as the node."""
        self.programs["interruption"] = PROGRAMS / "interruption.sh"
        self.programs["slurm_node"] = PROGRAMS / "slurm-node.sh"
        self.programs["slurm_jobs"] = PROGRAMS / "slurm-jobs.sh"
        return self.add("interruption.sh", "install_interruption", FMCLUSTER_LIB=FMCLUSTER_LIB,
                        FMCLUSTER_ETC=FMCLUSTER_ETC, INTERRUPTION_SLURM_BIN=slurm_bin, INTERRUPTION_SIGNAL=end.signal,
                        INTERRUPTION_POLL_SECONDS=INTERRUPTION_POLL_SECONDS,
                        INTERRUPTION_BACKOFF_SECONDS=INTERRUPTION_BACKOFF_SECONDS,
                        INTERRUPTION_TOKEN_SECONDS=INTERRUPTION_TOKEN_SECONDS,
                        INTERRUPTION_STATE_DIR=INTERRUPTION_STATE_DIR, SLURMD_UNITS=slurmd_units)

    def scratch(self, path: str = SCRATCH_PATH) -> "NodeProgram":
        return self.add("scratch.sh", "setup_scratch", NVME_DISK_COUNT=self.instance.nvme_disks, SCRATCH_PATH=path,
                        SCRATCH_ARRAY=SCRATCH_ARRAY, SCRATCH_WAIT_SECONDS=SCRATCH_WAIT_SECONDS,
                        DLAMI_NVME_UNIT=DLAMI_NVME_UNIT, DLAMI_NVME_PATH=DLAMI_NVME_PATH,
                        DLAMI_WAIT_SECONDS=DLAMI_WAIT_SECONDS)

    def lnet(self, interfaces: int, *, install_client: bool = False) -> "NodeProgram":
        """LNet over EFA on `interfaces` EFA devices (lnet.sh); `install_client`: install the Lustre
        client first (lustre-client.sh: Amazon EKS's images lack it; the Slurm planes' have it)."""
        self.programs["lnet_efa"] = PROGRAMS / "lnet-efa.sh"
        if install_client:
            self.add("lustre-client.sh", "install_lustre_client", LUSTRE_CLIENT_ATTEMPTS=LUSTRE_CLIENT_ATTEMPTS)
        return self.add("lnet.sh", "setup_lnet_efa", FMCLUSTER_LIB=FMCLUSTER_LIB, LNET_EFA_INTERFACES=interfaces)

    def lustre(self, mount: LustreMount, *, lnet: bool) -> "NodeProgram":
        options = FSX_MOUNT_OPTIONS + (f",x-systemd.requires={LNET_EFA_UNIT}" if lnet else "")
        return self.add("lustre.sh", "mount_lustre", FSX_SOURCE=mount.source, FSX_MOUNT_PATH=mount.mount_path,
                        FSX_MOUNT_OPTIONS=options, FSX_MOUNT_ATTEMPTS=FSX_MOUNT_ATTEMPTS,
                        FSX_RETRY_SECONDS=FSX_RETRY_SECONDS)

    def home(self, home: HomeMount) -> "NodeProgram":
        """The shared home at /home (home.sh): the image's home directories copied into it first."""
        return self.add("home.sh", "mount_home", HOME_SOURCE=home.source, HOME_FSTYPE=home.fstype,
                        HOME_PATH=home.mount_path, HOME_FSTAB_OPTIONS=home.fstab_options,
                        HOME_MOUNT_OPTIONS=home.mount_options, HOME_STAGING=HOME_STAGING,
                        HOME_MOUNT_ATTEMPTS=HOME_MOUNT_ATTEMPTS, HOME_RETRY_SECONDS=HOME_RETRY_SECONDS)

    def seed_mounted_home(self, path: str = HOME_PATH) -> "NodeProgram":
        """The image's home directories copied into a shared home mounted at `path` before the
        script runs (SageMaker HyperPod mounts it itself; home.sh's seed_mounted_home)."""
        return self.add("home.sh", "seed_mounted_home", HOME_PATH=path, HOME_IMAGE_ROOT=HOME_IMAGE_ROOT)

    def metrics(self, metrics: Metrics, *, efa: bool, lustre_path: str = "",
                step: str = "setup_metrics") -> "NodeProgram":
        """Metrics collection (metrics.sh), run by the step `step` (a function calling setup_metrics):
        the exporters' packages baked into the image (IMAGE_SCRIPTS/exporters.sh), checked."""
        self.add(IMAGE_SCRIPTS / "exporters.sh")
        for job in metrics_collectors(self.instance, metrics, efa=efa):
            self.programs[f"collect_{job}"] = COLLECTORS / COLLECTOR_FILES[job]
        return self.add("metrics.sh", step,
                        **metrics_settings(self.instance, metrics, efa=efa, lustre_path=lustre_path))

    def render(self, header: str, *, extra: Sequence[str] = (), compact: bool = False) -> str:
        embedded = [embed(name, path, self.rendered.get(name), note=not compact)
                    for name, path in self.programs.items()]
        return compose(header, self.settings, self.parts, self.steps, [*embedded, *extra], compact=compact)


def install_health(program: NodeProgram, model: ClusterModel, setup: NodeSetup, refs: NodeRefs) -> NodeProgram:
    """The continuous health check of `setup`'s nodes (NodeProgram.health: its EFA devices and
    mounts, Slurm's commands where it drains through Slurm), and the replacement request where it
    asks for one (to `refs.replacement_queue`)."""
    check = setup.health
    if check is None:
        raise ValueError("the node group runs no health check")
    if check.replace and not refs.replacement_queue:
        raise ValueError("a health check that asks for replacements needs the replacer's queue (NodeRefs)")
    program.health(efa_devices=setup.efa_devices, mounts=setup.mounts, check_seconds=check.check_seconds,
                   replace=check.replace, slurm_bin=setup.slurm.bin if setup.slurm else "", runner=check.runner)
    if check.replace:
        program.replacement(refs.replacement_queue, model.region, model.name, check.plane)
    return program


