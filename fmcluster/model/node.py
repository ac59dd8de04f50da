"""What runs on the nodes of each node group, resolved once (`fmcluster.model.cluster.resolve`) from
the catalog and the spec: a `NodeSetup` per group (its EFA devices, LNet, /scratch, the mounts a
node must have, Enroot and Pyxis, the Slurm paths, the IMEX prolog, the deep and continuous health
checks, network features, the Slurm collector), read by the node renderers (fmcluster.node.pcs,
fmcluster.node.hyperpod, fmcluster.node.eks), which derive none of it again. The roles of a group,
the shared home and the health policy the setups follow are here too (fmcluster.model.cluster
names them as well).

Sources and details: docs/research-notes.md, "The node kit (fmcluster/node/)"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from fmcluster.facts import health as health_facts
from fmcluster.facts import images as image_facts
from fmcluster.facts import node as node_facts
from fmcluster.facts.catalog import InstanceType
from fmcluster.facts.controlplanes import (
    CAPACITY_BLOCK,
    SPOT,
    SPOT_NOTICE_MINUTES,
    ControlPlane,
    termination_minutes,
)
from fmcluster.spec.models import CapacitySpec, ClusterSpec

COMPUTE, LOGIN, SYSTEM, CONTROLLER = "compute", "login", "system", "controller"  # NodeGroup.role
OPENZFS, LUSTRE = "openzfs", "lustre"  # what the shared home is (Home.kind)
PCS, HYPERPOD_SLURM, HYPERPOD_EKS, EKS = "pcs", "hyperpod-slurm", "hyperpod-eks", "eks"  # ControlPlane.type

# Where Slurm is: AWS PCS installs each Slurm release it offers under its own prefix and includes
# /etc/aws/pcs/scheduler/slurm-VERSION/plugstack.conf.d/ itself (PCS User Guide, "Install SPANK
# plugins", "Configure SPANK plugins"); SageMaker HyperPod keeps Slurm under /opt/slurm, and its
# slurmd runs configless: it reads the plugstack.conf that slurmctld sends (cached in
# HYPERPOD_CONF_CACHE), so the controller's plugstack.conf includes the plugin's configuration by
# name (a wildcard include breaks configless; lifecycle_scripts/plugstack.sh), and each node
# keeps that included file, and the plugin, itself (an absolute include is read on the node).
# The Slurm prefixes are fmcluster.facts.images' (the image bakes Pyxis against the same ones).
PCS_SLURM_ETC = "/etc/aws/pcs/scheduler/slurm-{version}"
# slurmd's unit: AWS PCS's Slurm installer copies the unit its build makes to /etc/systemd/system
# as slurmd-VERSION.service (PCS User Guide, "Software installers to build custom AMIs for AWS
# PCS"; the PCS-ready DLAMI has one per release it carries), and the PCS agent starts the one of
# the cluster's release; Slurm's own packages and SageMaker HyperPod name it slurmd.service.
# Which one the agent starts is not documented (a PCS-ready DLAMI node's journal shows slurmd.service),
# so the node scripts write each drop-in for both names (common.sh's slurmd_dropin, SLURMD_UNITS).
PCS_SLURMD_UNIT = "slurmd-{version}.service"
SLURMD_UNIT = "slurmd.service"
HYPERPOD_CONF_CACHE = "/var/spool/slurmd/conf-cache"  # slurmd's copy of the controller's configuration
HYPERPOD_SLURM_BIN = f"{image_facts.HYPERPOD_SLURM_PREFIX}/bin"


@dataclass(frozen=True)
class Home:
    """The cluster's shared home: which file system is mounted at /home on every node.
    `kind`: "openzfs" (storage.home, NFS) or "lustre" (storage.lustre at mount_path /home)."""

    kind: str
    mount_path: str = node_facts.HOME_PATH


def home_of(spec: ClusterSpec) -> Optional[Home]:
    """The spec's shared home, or None: storage.home, else the Lustre file system where it is
    mounted at /home (the rules refuse both at once)."""
    if spec.storage.home is not None:
        return Home(OPENZFS)
    lustre = spec.storage.lustre
    if lustre is not None and lustre.mount_path == node_facts.HOME_PATH:
        return Home(LUSTRE)
    return None


@dataclass(frozen=True)
class Health:
    """How the cluster keeps its GPU nodes healthy (the spec's `health`, resolved): the check's
    period, whether and how fast faulty nodes are replaced, and the deep check of new nodes."""

    check_minutes: int
    replace: bool
    max_replacing: int
    deep_check: bool
    replace_window_minutes: int = health_facts.REPLACE_WINDOW_MINUTES
    block_guard_minutes: int = health_facts.BLOCK_GUARD_MINUTES

    @property
    def check_seconds(self) -> int:
        return self.check_minutes * 60


def health_of(spec: ClusterSpec) -> Health:
    h = spec.health
    return Health(check_minutes=h.check_minutes, replace=h.replace, max_replacing=h.max_replacing,
                  deep_check=h.deep_check)


def slurmd_units(slurm_version: str) -> str:
    """The names slurmd's unit may have on an AWS PCS node of `slurm_version`, the installer's first
    (SLURMD_UNITS; only slurmd.service without a version)."""
    return " ".join(([PCS_SLURMD_UNIT.format(version=slurm_version)] if slurm_version else []) + [SLURMD_UNIT])


@dataclass(frozen=True)
class SlurmPaths:
    """Slurm on a node: the cluster's release (AWS PCS; "" where it is the plane's own: HyperPod),
    its commands (`bin`) and the names slurmd's unit may have (SLURMD_UNITS)."""

    version: str
    bin: str
    slurmd_units: str = SLURMD_UNIT

    @classmethod
    def pcs(cls, slurm_version: str) -> "SlurmPaths":
        return cls(slurm_version, image_facts.slurm_prefix(image_facts.PCS, slurm_version) + "/bin",
                   slurmd_units(slurm_version))

    @classmethod
    def hyperpod(cls) -> "SlurmPaths":
        return cls("", HYPERPOD_SLURM_BIN)


@dataclass(frozen=True)
class Containers:
    """Enroot and Pyxis on a Slurm node (``containers.sh``). `slurm_prefix`: the node's Slurm
    (spank.h under include/; Pyxis goes to lib/slurm/); `plugstack_dir`: the directory of SPANK
    configuration Slurm includes; `plugstack_conf`: the plugstack.conf that must include it ("" where
    the scheduler's own does: AWS PCS; lifecycle_scripts/plugstack.sh writes it); `slurmd_plugstack`: the
    plugstack.conf slurmd really reads, which must include PLUGSTACK_DIR/pyxis.conf by name ("": it
    is the scheduler's, which includes PLUGSTACK_DIR); `slurm_bin`: Slurm's commands, put on slurmd's PATH for
    Enroot's Slurm PMI hook ("" to leave it); `restart_slurmd`: restart a running slurmd after the
    install (HyperPod, where slurmd runs before the lifecycle script); `shared_path`: the shared
    file system's mount point, for the image cache ("" none: the cache is node-local)."""

    slurm_prefix: str
    plugstack_dir: str
    plugstack_conf: str = ""
    slurmd_plugstack: str = ""
    slurm_bin: str = ""
    restart_slurmd: bool = False
    shared_path: str = ""

    @classmethod
    def pcs(cls, slurm_version: str, shared_path: str = "") -> "Containers":
        return cls(image_facts.slurm_prefix(image_facts.PCS, slurm_version),
                   PCS_SLURM_ETC.format(version=slurm_version) + "/plugstack.conf.d",
                   slurm_bin=SlurmPaths.pcs(slurm_version).bin, shared_path=shared_path)

    @classmethod
    def hyperpod(cls, shared_path: str = "") -> "Containers":
        prefix = image_facts.slurm_prefix(image_facts.HYPERPOD_SLURM, "")
        etc = f"{prefix}/etc"
        return cls(prefix, f"{etc}/plugstack.conf.d", plugstack_conf=f"{etc}/plugstack.conf",
                   slurmd_plugstack=f"{HYPERPOD_CONF_CACHE}/plugstack.conf", restart_slurmd=True,
                   shared_path=shared_path)

    @property
    def plugin(self) -> str:
        return f"{self.slurm_prefix}/lib/slurm/spank_pyxis.so"

    @property
    def pyxis_conf(self) -> str:
        return f"{self.plugstack_dir}/pyxis.conf"


TIMER, SLURM, METRICS = "timer", "slurm", "metrics"  # what runs the continuous health check (HealthCheck.runner)


@dataclass(frozen=True)
class HealthCheck:
    """The continuous node health check of a GPU node (health.sh, programs/node-health.sh), from the
    model's `health`: `check_seconds`, how often; `replace`, a node drained for a hardware fault is
    reported for replacement to the cluster's node replacer once its jobs ended; `runner`, "timer"
    (a systemd timer runs it), "slurm" (slurm.conf's HealthCheckProgram) or "metrics" (a Kubernetes
    node: the timer, only the metrics); `plane`, the control plane the replacer acts on."""

    check_seconds: int
    replace: bool
    runner: str
    plane: str


BLOCK_END, PLAN_END, SPOT_NOTICE = "capacity-block", "training-plan", "spot"  # CapacityEnd.source


@dataclass(frozen=True)
class CapacityEnd:
    """The end of a compute group's capacity, handled on its Slurm nodes. `source`, where a node
    learns it: BLOCK_END, its Capacity Block's EndDate from EC2 (`reservation_id`; "" where the group
    names a resource group: the node asks EC2 for its own), or PLAN_END, its training plan's reserved
    capacity from SageMaker (`training_plan_arn`), both read by programs/capacity-end.sh, which
    reserves the nodes from `termination_minutes` before the end (when EC2 or SageMaker starts
    terminating the instances), signals the jobs with `signal` (as sbatch --signal names it) and
    drains the nodes `signal_minutes` before that; or SPOT_NOTICE, EC2's interruption notice in the
    instance metadata (programs/interruption.sh): `termination_minutes` after it the instance is
    interrupted, and the jobs are signalled and the node drained at once (`signal_minutes` 0)."""

    reservation_id: str
    termination_minutes: int
    signal_minutes: int
    signal: str
    source: str = BLOCK_END
    training_plan_arn: str = ""


def capacity_end_of(cp: ControlPlane, capacity: CapacitySpec) -> Optional[CapacityEnd]:
    """The end handled on the nodes of a compute group: on a Capacity Block of AWS PCS, on a training
    plan of SageMaker HyperPod Slurm, and on spot instances of a Slurm plane (only AWS PCS takes
    them); None elsewhere (on the Kubernetes planes a function in the cluster handles a Capacity Block's
    or training plan's end: fmcluster.kubernetes.capacity_end)."""
    if cp.type == PCS and capacity.type == CAPACITY_BLOCK:
        return CapacityEnd(capacity.reservation_id or "", termination_minutes(False, bool(capacity.ultraserver_type)),
                           capacity.end_signal_minutes, capacity.end_signal)
    if cp.type == HYPERPOD_SLURM and capacity.training_plan_arn:
        return CapacityEnd("", termination_minutes(True, bool(capacity.ultraserver_type)), capacity.end_signal_minutes,
                           capacity.end_signal,
                           PLAN_END, capacity.training_plan_arn)
    if cp.scheduler == "slurm" and capacity.type == SPOT:
        return CapacityEnd("", SPOT_NOTICE_MINUTES, 0, capacity.end_signal, SPOT_NOTICE)
    return None


@dataclass(frozen=True)
class NodeSetup:
    """What the nodes of one group run, as its plane runs it (`resolve_node`)."""

    efa: bool  # the nodes have EFA interfaces (the EFA / NCCL environment, the EFA collector)
    efa_devices: int  # /sys/class/infiniband: one per EFA interface of its layout
    lnet_efa_interfaces: int  # EFA devices the node's script puts LNet on (0: LNet over TCP, or the plane's own)
    scratch_path: str  # where the node's script makes the instance-store volume ("" none)
    lustre_path: str  # where the cluster's Lustre file system is on the node ("" none: not a Slurm node's)
    home: Optional[Home]  # the shared home at /home (Slurm planes)
    mounts: tuple[str, ...]  # what the readiness and health checks require mounted, /scratch last
    containers: Optional[Containers]  # Enroot and Pyxis (Slurm planes: GPU compute nodes and the plane's own)
    slurm: Optional[SlurmPaths]  # Slurm on the node (Slurm planes)
    slurm_prolog: bool  # the cluster's Slurm prolog (AWS PCS compute nodes of a cluster with the IMEX prolog)
    imex: bool  # the IMEX prolog, and nvidia-imex.service enabled (UltraServer nodes of those)
    deep_check: bool  # a new node runs the deep check before its first job (AWS PCS GPU compute nodes)
    health: Optional[HealthCheck]  # the continuous health check (GPU compute nodes)
    network_features: bool  # the node publishes its place in EC2's network as Slurm node features
    slurm_metrics: bool  # the node runs the Slurm collector (the PCS login nodes, the HyperPod controller)
    capacity_end: Optional[CapacityEnd] = None  # the capacity's end handled (capacity_end_of)


class Group(Protocol):
    """What `resolve_node` reads of a node group (fmcluster.model.cluster.NodeGroup)."""

    @property
    def role(self) -> str: ...

    @property
    def instance(self) -> InstanceType: ...

    @property
    def efa(self) -> bool: ...

    @property
    def efa_interfaces(self) -> int: ...

    @property
    def lnet_efa_interfaces(self) -> int: ...

    @property
    def network_placed(self) -> bool: ...

    @property
    def capacity(self) -> CapacitySpec: ...


def runs_containers(cp: ControlPlane, group: Group) -> bool:
    """The group's nodes run Slurm jobs in containers (Enroot and Pyxis): on a Slurm plane, the
    GPU compute groups and the control plane's own (login nodes, the HyperPod controller)."""
    return cp.scheduler == "slurm" and (group.role != COMPUTE or group.instance.is_gpu)


def checks_health(cp: ControlPlane, group: Group) -> bool:
    """The group's nodes run fmcluster's continuous health check: the GPU compute groups of a
    Slurm plane (on Kubernetes the node monitoring agents take nodes out of the pool)."""
    return cp.scheduler == "slurm" and group.role == COMPUTE and group.instance.is_gpu


def deep_checks(cp: ControlPlane, health: Health, group: Group) -> bool:
    """A new node of the group runs fmcluster's deep check before its first job: the GPU
    compute groups of AWS PCS with health.deep_check (SageMaker HyperPod runs its own)."""
    return cp.type == PCS and health.deep_check and checks_health(cp, group)


def resolve_node(spec: ClusterSpec, cp: ControlPlane, health: Health, home: Optional[Home], group: Group, *,
                 imex_prolog: bool) -> NodeSetup:
    """The setup of `group`'s nodes on `cp` (`imex_prolog`: the cluster's Slurm runs the IMEX prolog).

    On AWS PCS the node mounts /scratch, the file system and the home itself; SageMaker HyperPod
    mounts the file system and the home (its FsxLustreConfig, FsxOpenZfsConfig) and leaves LNet to
    them on Slurm, the lifecycle script makes /scratch (and LNet over EFA on HyperPod EKS, whose pods
    mount the file system). On Kubernetes the pods mount the file systems, and nodeadm stripes the
    instance store of Amazon EKS nodes for kubelet: nothing to require mounted."""
    instance = group.instance
    slurm_plane = cp.scheduler == "slurm"
    lustre = spec.storage.lustre
    scratch = node_facts.SCRATCH_PATH if instance.nvme_disks and cp.type != EKS else ""
    lustre_path = lustre.mount_path if lustre is not None and slurm_plane else ""
    node_home = home if slurm_plane else None
    mounts = ((lustre_path,) if lustre_path else ()) + (
        (node_home.mount_path,) if node_home is not None and node_home.kind == OPENZFS else ()) + (
        (scratch,) if scratch and slurm_plane else ())
    containers = slurm = None
    if cp.type == PCS:
        assert spec.orchestrator.version is not None  # the spec resolves it (its default: the newest)
        slurm = SlurmPaths.pcs(spec.orchestrator.version)
        containers = Containers.pcs(slurm.version, lustre_path) if runs_containers(cp, group) else None
    elif cp.type == HYPERPOD_SLURM:
        slurm = SlurmPaths.hyperpod()
        containers = Containers.hyperpod(lustre_path) if runs_containers(cp, group) else None
    prolog = cp.type == PCS and imex_prolog and group.role == COMPUTE
    check = None
    if checks_health(cp, group):
        check = HealthCheck(health.check_seconds, health.replace, TIMER, cp.type)
    elif cp.type == EKS and instance.is_gpu:  # its metrics only, where the cluster is observed
        check = HealthCheck(health.check_seconds, False, METRICS, cp.type)
    return NodeSetup(
        efa=group.efa, efa_devices=group.efa_interfaces,
        lnet_efa_interfaces=0 if cp.type == HYPERPOD_SLURM else group.lnet_efa_interfaces,
        scratch_path=scratch, lustre_path=lustre_path, home=node_home, mounts=mounts, containers=containers,
        slurm=slurm, slurm_prolog=prolog, imex=prolog and instance.ultraserver,
        deep_check=deep_checks(cp, health, group), health=check,
        network_features=cp.type == PCS and group.network_placed,
        slurm_metrics=(cp.type, group.role) in ((PCS, LOGIN), (HYPERPOD_SLURM, CONTROLLER)),
        capacity_end=capacity_end_of(cp, group.capacity) if group.role == COMPUTE else None)
