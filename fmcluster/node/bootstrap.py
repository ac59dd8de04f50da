"""Node bootstrap: the boot-time program of a node group, rendered from the instance catalog.

Sources and details: docs/research-notes.md, "fmcluster/node/bootstrap.py"."""

from __future__ import annotations

import base64
import lzma
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from fmcluster.facts import health as health_facts
from fmcluster.facts import openzfs
from fmcluster.facts.catalog import InstanceType
from fmcluster.facts.node import DLAMI_NVME_PATH, FMCLUSTER_LIB, HOME_PATH, IMEX_PROLOG, SCRATCH_PATH, TEXTFILE_DIR
from fmcluster.model import expected
from fmcluster.model.node import LUSTRE, SLURMD_UNIT, Containers, NodeSetup, SlurmPaths
from fmcluster.node.refs import NodeRefs

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup

SCRIPTS = Path(__file__).parent / "scripts" / "boot"
SLURM_SCRIPTS = Path(__file__).parent / "scripts" / "slurm"
IMAGE_SCRIPTS = Path(__file__).parent / "scripts" / "image"  # the node image's (fmcluster.node.image)
PROGRAMS = SCRIPTS / "programs"
COLLECTORS = SCRIPTS / "collectors"
NCCL_ENV_FILE = "/etc/profile.d/fmcluster-nccl.sh"
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
APT_LOCK_TIMEOUT_SECONDS = 300  # DPkg::Lock::Timeout of each apt-get
APT_ATTEMPTS = 5
APT_RETRY_SECONDS = 30
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
FMCLUSTER_ETC = "/etc/fmcluster"
BOUNDARY = "==FMCLUSTER-BOUNDARY=="
SCRIPT_NAME = "fmcluster-node.sh"
COLLECT_INTERVAL_SECONDS = 30

# --- Containers on Slurm: Enroot and Pyxis (issue 18; docs/research-notes.md section 10) -----------
# Enroot (github.com/NVIDIA/enroot), built into the node image (fmcluster.node.image) from its
# pinned tag, checked against its commit, as Pyxis is (doc/installation.md, "From source": `git
# clone --recurse-submodules`, `make install`, `make setcap`). 4.1.2 is the latest release
# (2026-03-23); AWS's PCS reference installs 3.5.0 (awslabs/awsome-distributed-ai
# architectures/aws-pcs/assets/scripts/install-enroot-pyxis.sh).
# NVIDIA's release .debs would do as well, but their SHA-256 are in no source this project can
# read, and an image never holds a download it cannot verify; a git commit is a digest of the
# whole tree, its submodules' commits included.
ENROOT_VERSION = "4.1.2"  # what `enroot version` prints (its Makefile's VERSION at the tag)
ENROOT_REPOSITORY = "https://github.com/NVIDIA/enroot.git"
ENROOT_TAG = f"v{ENROOT_VERSION}"  # the image bake clones v$ENROOT_VERSION
ENROOT_COMMIT = "bd51f53b6fa954805ae3e1985c5dc7594ff66d05"
# The submodules at ENROOT_COMMIT, path -> commit, in path order (`git submodule status`'s): the
# gitlinks of its tree, which git checks out by object id (the build compiles Enroot's helpers
# statically against musl). Their URLs (.gitmodules): makeself https://github.com/megastep/makeself.git,
# musl git://git.musl-libc.org/musl (the git protocol, TCP 9418: the node security group's egress
# allows it), linux-headers https://github.com/sabotage-linux/kernel-headers.git; deps/Makefile
# names their releases (makeself 2.4.5, musl 1.2.5, linux-headers 4.19.88-1).
ENROOT_SUBMODULES = {
    "deps/linux-headers": "c79004ad7f82165c86396b11bc6958ee53febb63",
    "deps/makeself": "5742be6410bfad2c619fb1e98bf795e8fa0913c7",
    "deps/musl": "0784374d561435f7c787a555aeab8ede699ed298",
}
# The bake (scripts/image/bake.sh) installs it where NVIDIA's .debs do (pkg/deb/rules): `make
# install prefix=/usr sysconfdir=/etc` (/usr/bin/enroot, /etc/enroot/enroot.conf, /usr/share/enroot/hooks.d), `make
# setcap` (the enroot+caps flavor: users import and convert images), and its AppArmor profile
# at /etc/apparmor.d/enroot, loaded (the .deb's dh_apparmor: Ubuntu 24.04 lets Enroot create user
# namespaces only with it).
# Pyxis (github.com/NVIDIA/pyxis): no prebuilt packages; a SPANK plugin compiled against the
# spank.h of the Slurm release it is loaded by ("Incompatible plugin version" otherwise), so the
# image bake builds it against the image's Slurm from the pinned tag, checked against its commit.
# v0.24.0 is the latest release (2026-05-11); AWS's references build v0.20.0 (PCS) and v0.19.0 (HyperPod).
PYXIS_REPOSITORY = "https://github.com/NVIDIA/pyxis.git"
PYXIS_TAG = "v0.24.0"
PYXIS_COMMIT = "107519944221822ea1dace4db8e7234b2eaa4cd5"
# What the image bake needs from the Ubuntu archive: to build Enroot and Pyxis
# (doc/installation.md's Debian build dependencies; build-essential for gcc and make), and Enroot's runtime dependencies
# (doc/installation.md, and zstd from the .deb's Depends), with the optional ones (pigz,
# squashfuse, fuse-overlayfs; libnvidia-container-tools is the AMI's, node-ready requires it).
CONTAINER_BUILD_PACKAGES = "git build-essential libcap2-bin libtool automake libmd-dev"
ENROOT_RUNTIME_PACKAGES = "curl gawk jq squashfs-tools parallel zstd pigz squashfuse fuse-overlayfs"
# The NFS client (mount.nfs), for the shared home on FSx for OpenZFS (home.sh): baked with them,
# since the boot path installs nothing.
NFS_CLIENT_PACKAGES = "nfs-common"
CONTAINER_PACKAGES = f"{CONTAINER_BUILD_PACKAGES} {ENROOT_RUNTIME_PACKAGES} {NFS_CLIENT_PACKAGES}"
# What the image bake installed (fmcluster/node/scripts/image/bake.sh), read by the boot's checks.
IMAGE_MANIFEST = f"{FMCLUSTER_ETC}/image.env"
DOWNLOAD_ATTEMPTS = 5  # the image bake's clones
DOWNLOAD_RETRY_SECONDS = 15
FALLBACK_SCRATCH = "/tmp"  # Enroot's node-local paths on a type without instance store
ENROOT_LOCAL_DIRS = ("runtime", "data", "tmp")  # under ENROOT_LOCAL, each mode 1777

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


def enroot_paths(containers: Containers, scratch_path: str) -> dict[str, str]:
    """Enroot's directories: runtime, data and temporary files node-local (the instance store at
    `scratch_path`, or FALLBACK_SCRATCH without one: ""), the image cache on the shared file system
    when there is one. Per user where Enroot writes per user (a shared cache's layers are the first
    importer's, mode 0640: awsome-distributed-ai's install-enroot-pyxis.sh); the roots 1777."""
    local = f"{scratch_path or FALLBACK_SCRATCH}/enroot"
    cache = f"{containers.shared_path}/enroot/cache" if containers.shared_path else f"{local}/cache"
    return {"ENROOT_LOCAL": local, "ENROOT_CACHE_ROOT": cache}


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


def slurm_bin(slurm_version: str) -> str:
    """Slurm's commands on an AWS PCS node of the cluster's Slurm version."""
    return SlurmPaths.pcs(slurm_version).bin


EMBED_END = "FMCLUSTER_PROGRAM_END"
COLLECTOR_FILES = {"dcgm": "gpu.sh", "efa": "efa.sh", "slurm": "slurm.sh"}  # scrape job -> collector


def embed(name: str, path: Path, text: str | None = None, *, note: bool = True) -> str:
    """A whole script the node keeps and runs on its own (a collector, a program) as a fragment:
    the shell function `program_NAME`, which prints the script (without its comment lines, but
    with its `#!` line: they are documented in the repository). The fragments write it to a file
    with `program_NAME >FILE`. `text`: the script as rendered (default: the file as it is). `note`:
    a comment line before it names the file it came from."""
    text = without_comments(path.read_text(encoding="utf-8") if text is None else text)
    if EMBED_END in text.splitlines():
        raise ValueError(f"{path.name} has a line {EMBED_END}, which ends its here-document")
    origin = path.relative_to(SCRIPTS.parents[1]).as_posix()
    source = f"# {origin}, embedded by fmcluster.node.bootstrap.embed.\n" if note else ""
    return source + f"program_{name}() {{\n  cat <<'{EMBED_END}'\n{text.rstrip()}\n{EMBED_END}\n}}\n"


def without_comments(text: str) -> str:
    """`text` without its whole-line comments (a first `#!` line and `# shellcheck` directives
    stay): the scripts are documented in the repository, and EC2 user data is limited to 16 KiB.
    No fragment has a here-document line that starts with `#`."""
    lines = text.splitlines(keepends=True)
    keep = lines[:1] if lines and lines[0].startswith("#!") else []
    return "".join(keep + [line for line in lines[len(keep):]
                           if not line.lstrip().startswith("#") or line.lstrip().startswith("# shellcheck ")])


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


APT_SETTINGS: dict[str, str | int] = {"APT_LOCK_TIMEOUT_SECONDS": APT_LOCK_TIMEOUT_SECONDS,
                                      "APT_ATTEMPTS": APT_ATTEMPTS, "APT_RETRY_SECONDS": APT_RETRY_SECONDS}


def device_rdma(instance: InstanceType, efa: bool) -> bool:
    """GPUDirect RDMA over EFA: on the GPU instance types whose EFA has it (the catalog's device_rdma)."""
    return efa and instance.is_gpu and instance.device_rdma


@dataclass(frozen=True)
class NcclSetting:
    """One variable of a node's EFA / NCCL environment, with why it is set."""

    name: str
    value: str
    why: str


def nccl_settings(instance: InstanceType, efa: bool) -> tuple[NcclSetting, ...]:
    """The EFA / NCCL environment of jobs on a node of `instance`: only well-known settings, each
    explained. The node bootstrap writes them to NCCL_ENV_FILE (nccl_environment); the
    Kubernetes acceptance and serving kits set them on their containers."""
    settings = []
    if efa:
        settings.append(NcclSetting("FI_PROVIDER", "efa",
                                    "libfabric: use the EFA provider for inter-node traffic (not TCP)."))
    if device_rdma(instance, efa):
        settings.append(NcclSetting("FI_EFA_USE_DEVICE_RDMA", "1",
                                    f"GPUDirect RDMA: EFA reads and writes GPU memory directly on {instance.name}."))
    settings.append(NcclSetting("NCCL_SOCKET_IFNAME", "^lo,docker",
                                "NCCL bootstrap and socket traffic: any interface but loopback and docker bridges."))
    if efa and instance.is_gpu:
        settings.append(NcclSetting("NCCL_BUFFSIZE", "8388608", "NCCL buffer size AWS recommends with EFA: 8 MiB."))
    return tuple(settings)


def nccl_environment(instance: InstanceType, efa: bool) -> str:
    """The content of the EFA / NCCL environment file (nccl_settings, each with its reason)."""
    lines = [
        "# Written by the fmcluster node bootstrap: EFA and NCCL settings for jobs on this",
        f"# {instance.name} node. Jobs that do not start a login shell can source this file.",
    ]
    for setting in nccl_settings(instance, efa):
        lines += [f"# {setting.why}", f"export {setting.name}={setting.value}"]
    return "\n".join(lines)


def fragment(path: Path) -> str:
    """A script fragment, without its `# shellcheck shell=bash` line (only for editors on the file)."""
    text = path.read_text(encoding="utf-8")
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# shellcheck shell="))


def _read(part: str | Path) -> str:
    """A fragment: a file name in SCRIPTS, or a path (fmcluster.node.lifecycle's own fragments)."""
    return fragment(part if isinstance(part, Path) else SCRIPTS / part)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _quote(value: str) -> str:
    """shlex.quote, and quotes on a bare word too: `NAME=eval` reads like a command (SC2209)."""
    quoted = shlex.quote(value)
    return f"'{value}'" if quoted == value and _WORD.fullmatch(value) else quoted


def _settings(values: Mapping[str, str | int]) -> str:
    lines = ["", "# Settings of this node group."]
    lines += [f"{name}={_quote(str(value))}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


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
        runtime = dict.fromkeys(("READY_ENROOT_VERSION", "READY_PYXIS_PLUGIN", "READY_PYXIS_CONF",
                                 "READY_PLUGSTACK", "READY_ENROOT_DIRS"), "")
        if containers is not None:
            paths = enroot_paths(containers, scratch_path)
            runtime = {"READY_ENROOT_VERSION": ENROOT_VERSION, "READY_PYXIS_PLUGIN": containers.plugin,
                       "READY_PYXIS_CONF": containers.pyxis_conf, "READY_PLUGSTACK": containers.slurmd_plugstack,
                       "READY_ENROOT_DIRS": " ".join([*(f"{paths['ENROOT_LOCAL']}/{d}" for d in ENROOT_LOCAL_DIRS),
                                                      paths["ENROOT_CACHE_ROOT"]])}
        return self.add("ready.sh", "install_node_ready", FMCLUSTER_LIB=FMCLUSTER_LIB, FMCLUSTER_ETC=FMCLUSTER_ETC,
                        EXPECTED_GPUS=self.instance.gpu_count or 0, REQUIRED_MOUNTS=" ".join(mounts),
                        LNET_EFA=int(lnet_efa), READY_WAIT_SECONDS=READY_WAIT_SECONDS, TEXTFILE_DIR=TEXTFILE_DIR,
                        READY_IMEX=int(imex), **runtime)

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
        return self.add("containers.sh", "setup_containers", ENROOT_VERSION=ENROOT_VERSION,
                        ENROOT_COMMIT=ENROOT_COMMIT, PYXIS_TAG=PYXIS_TAG, PYXIS_COMMIT=PYXIS_COMMIT,
                        IMAGE_MANIFEST=IMAGE_MANIFEST, SLURM_PREFIX=containers.slurm_prefix,
                        PYXIS_PLUGIN=containers.plugin, PLUGSTACK_DIR=containers.plugstack_dir,
                        SLURM_BIN=containers.slurm_bin, RESTART_SLURMD=int(containers.restart_slurmd),
                        CONTAINER_MOUNTS=" ".join(([containers.shared_path] if containers.shared_path else [])
                                                  + ([scratch_path] if scratch_path else [])),
                        **enroot_paths(containers, scratch_path))

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


def header(comment: str | None = None) -> str:
    """The bootstrap header (strict mode, ROOT, log, add_fstab, step, finish), under `comment`
    instead of its own (the AWS PCS one) when given."""
    text = _read("header.sh")
    if comment is None:
        return text
    lines = text.splitlines(keepends=True)[1:]
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "#!/bin/bash\n" + comment + "".join(lines)


def node_program(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> NodeProgram:
    """The AWS PCS node program of `group`'s nodes (docs/research-notes.md), from the model's setup
    of the group (`model.node(group)`) and the deploy-time names in `refs`; fmcluster.node.actions
    runs it as node lifecycle scripts.

    In order: the cluster's Slurm prolog where it has one (the IMEX prolog of a cluster with
    UltraServer node groups: slurmd runs it on every compute node, so every node needs it, and a
    node without it is not ready; on an UltraServer type nvidia-imex.service must be enabled too),
    the deep check of a new GPU node (a node that fails it is not ready), the readiness check and
    slurmd's gate, the EFA / NCCL environment, metrics (with `refs.remote_write_url`), /scratch,
    LNet over EFA, the file system, the shared home (FSx for OpenZFS over NFS, or the Lustre file
    system mounted at /home, the image's home directories copied in first), Enroot and Pyxis (the
    image cache on the file system), the continuous health check, and the node's place in EC2's
    network as Slurm node features (fmcluster.node.topology says which groups). A node without a
    mount, its GPUs or its container runtime is not ready.
    """
    setup = model.node(group)
    slurm = setup.slurm
    if slurm is None:
        raise ValueError(f"node group {group.name}: not a Slurm node group")
    lnet = setup.lnet_efa_interfaces > 0
    lustre = home = None
    if setup.lustre_path:
        if not (refs.lustre_dns_name and refs.lustre_mount_name):
            raise ValueError("the file system's DNS and mount names are needed (NodeRefs)")
        lustre = LustreMount(refs.lustre_dns_name, refs.lustre_mount_name, setup.lustre_path)
    if setup.home is not None and setup.home.kind == LUSTRE:
        assert lustre is not None  # the Lustre file system at /home
        home = HomeMount.lustre(lustre, lnet=lnet)
    elif setup.home is not None:
        if setup.lustre_path == setup.home.mount_path:
            raise ValueError("two shared homes: the Lustre file system at /home and another")
        if not refs.home_dns_name:
            raise ValueError("the shared home's DNS name is needed (NodeRefs)")
        home = HomeMount.nfs(refs.home_dns_name)
    program = NodeProgram(group.instance)
    if setup.slurm_prolog:
        program.slurm_prolog(slurm.bin if setup.imex else "")
    if setup.deep_check:
        program.deep_check(deep_nccl_floor(group))
    program.readiness(mounts=setup.mounts, lnet_efa=lnet, containers=setup.containers,
                      scratch_path=setup.scratch_path, imex=setup.imex)
    program.add("gate-slurmd.sh", "gate_slurmd", SLURMD_RETRY_SECONDS=SLURMD_RETRY_SECONDS,
                SLURMD_UNITS=slurm.slurmd_units)
    program.protect().nccl(setup.efa)
    if refs.remote_write_url is not None:
        program.metrics(Metrics(model.name, refs.remote_write_url, model.region, slurm=setup.slurm_metrics),
                        efa=setup.efa, lustre_path=setup.lustre_path)
    if setup.scratch_path:
        program.scratch(setup.scratch_path)
    if lnet:
        program.lnet(setup.lnet_efa_interfaces)
    if lustre is not None and (setup.home is None or setup.home.kind != LUSTRE):
        program.lustre(lustre, lnet=lnet)
    if home is not None:
        program.home(home)
    if setup.containers is not None:
        program.containers(setup.containers, setup.scratch_path)
    if setup.health is not None:
        install_health(program, model, setup, refs)
    if setup.network_features:
        program.network_features(slurm.bin, slurm.slurmd_units)
    program.steps.append("check_node_ready")
    return program


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


BODY_FILE = f"{FMCLUSTER_LIB}/bootstrap.sh"  # where a compact script keeps its decoded body
# A compact script's body is xz-compressed and base85-encoded (a quarter larger than its bytes,
# against base64's third): EC2 user data is limited to 16 KiB. python3 decodes it: cloud-init,
# which runs user data, is a Python 3 program, so every node that runs the script has python3 and
# its standard library (base64, lzma). The alphabet of base85 (Python's b85encode, RFC 1924) has no
# quote or backslash, so the value stands in single quotes.
BODY_DECODER = "import base64,lzma,sys;sys.stdout.buffer.write(lzma.decompress(base64.b85decode(sys.stdin.read())))"
BODY_LOADER = f"""
# The program, xz and base85 (fmcluster.node.bootstrap.pack), kept in {BODY_FILE}.
install -d -m 0755 "$ROOT{FMCLUSTER_LIB}"
printf '%s' "$FMCLUSTER_BOOTSTRAP" | /usr/bin/python3 -c '{BODY_DECODER}' >"$ROOT{BODY_FILE}"
# shellcheck source=/dev/null
source "$ROOT{BODY_FILE}"
"""


def pack(body: str) -> str:
    """`body` as a compact script carries it: xz (no mtime or name in the stream, so the same body
    gives the same bytes), then base85."""
    return base64.b85encode(lzma.compress(body.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME)).decode("ascii")


def compose(header: str, settings: Mapping[str, str | int], parts: Sequence[str | Path], steps: Sequence[str],
            extra: Sequence[str] = (), *, compact: bool = False, comments: bool = True) -> str:
    """A script: `header`, the settings block, and the body: the fragments `parts` (file names in
    SCRIPTS) and `extra` (fragment texts), and a `main` that runs each of `steps` with `step` (a
    failure is recorded and the next step runs), then `finish` (exit 1 when a step failed).

    `compact` (the PCS and EKS user data, limited to 16 KiB): the header and the body without their
    comment lines, the body packed (`pack`: xz, base85) in the setting FMCLUSTER_BOOTSTRAP, which
    the script decodes to BODY_FILE and sources; the settings go into the body too (first), except
    INSTANCE_TYPE and those whose value holds a CDK token (`plain_setting`: CDK resolves tokens in
    the template's text, never inside the packed body). Otherwise (the SageMaker HyperPod lifecycle scripts,
    fmcluster.node.lifecycle; tests) the body verbatim, or without `comments` (the AWS PCS node
    lifecycle scripts, fmcluster.node.actions: the header and the fragments without their comment
    lines; `extra` as given). All run the same code."""
    main = ["main() {", *(f"  step {step}" for step in steps), "  finish", "}", "", 'main "$@"', ""]
    if not compact:
        if not comments:
            return "\n".join([without_comments(header) + _settings(settings),
                              *(without_comments(_read(part)) for part in parts), *extra, *main])
        return "\n".join([header + _settings(settings), *map(_read, parts), *extra, *main])
    plain = {name: value for name, value in settings.items() if plain_setting(name, value)}
    inner = {name: value for name, value in settings.items() if name not in plain}
    body = "\n".join([_settings(inner).lstrip("\n").split("\n", 1)[1],
                      *(without_comments(_read(name)) for name in parts), *extra, *main])
    return without_comments(header) + _settings({**plain, "FMCLUSTER_BOOTSTRAP": pack(body)}) + BODY_LOADER


TOKEN_MARK = re.compile(r"[$#]\{Token\[")  # how CDK writes a string or list token into a string


def plain_setting(name: str, value: str | int) -> bool:
    """Whether a compact script keeps the setting in its plain settings block: the instance type
    (for whoever reads the user data), and any value with a CDK token in it."""
    return name == "INSTANCE_TYPE" or bool(TOKEN_MARK.search(str(value)))


def unpack(script: str) -> str:
    """The body of a `compact` script (for reading and tests): what the node writes to BODY_FILE."""
    packed = re.search(r"^FMCLUSTER_BOOTSTRAP='?([^'\s]+)'?$", script, re.MULTILINE)
    if packed is None:
        raise ValueError("not a compact fmcluster node script: no FMCLUSTER_BOOTSTRAP")
    return lzma.decompress(base64.b85decode(packed.group(1))).decode("utf-8")


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
