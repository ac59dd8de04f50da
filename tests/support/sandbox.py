"""A sandboxed node for running the rendered node scripts as real processes (the boot-path harness).

`Sandbox(tmp_path, Scenario(...))` is a node: a sandbox root directory (the scripts' `ROOT`, set
through FMCLUSTER_ROOT) with the paths the scripts touch, and a bin/ of recording fakes
(tests/support/sandbox_fakes.sh) for every operating-system command they call (mdadm, mkfs.ext4, mount,
mountpoint, lsblk, blkid, systemctl, apt-get, dnf, lnetctl, modprobe, modinfo, ip, nvidia-smi,
scontrol, aws, hostname, install, sleep, curl for the instance metadata service and downloads,
mknod, pkill, timeout, logger, enroot, setcap, aa-enabled, apparmor_parser, nvidia-container-cli,
nvidia-imex-ctl, dpkg-query, ...). The fakes
model the node: its disks, mounts, units, LNet, GPUs, the dpkg lock and a virtual clock, as the
`Scenario` says. `run(script)` runs a script with bash; `calls()`, `mounts()`, `file()` read what
it did. `reboot()` boots the node again from what the first boot left on disk (/etc/fstab,
enabled units and drop-ins) in the order systemd would use, resolving every ordering the units
leave open against the scripts (mounts as early as they may go), and reports which units came up.

Where the kernel allows it (a user and mount namespace, `unshare -rm`), every run sees the host's
file system read-only apart from the sandbox, so a script that writes outside ROOT fails instead
of changing the test machine.

git, make and gcc are the real programs: `git` and `make` in bin/ only record the call and run
/usr/bin/git and /usr/bin/make. The repositories the scripts clone are the stand-ins of
tests/support/standins.py, copied into the sandbox (state/upstream) and reached through git's own
`url.<base>.insteadOf` (state/gitconfig, GIT_CONFIG_GLOBAL); a test renders its script with
the stand-ins' commits as the pins. Pyxis is compiled by real gcc against Debian's libslurm-dev
headers, linked under each Slurm prefix's include/: those of the Slurm root of the prefix's
release (tests/support/slurm_roots.py: 24.11 and 26.05, as AWS PCS lays them out) where `make
tools` built one, else this machine's (SLURM_HEADERS).

A node runs on its cluster's image (Scenario.image "baked"): the image's build phase
(fmcluster.node.image, scripts/image/bake.sh) really runs once per Ubuntu release and test
process (`baked_files`: Enroot, Pyxis against that release's Slurm prefix, the manifest, and the
packages dpkg-query then lists), and each sandbox starts with what it left. "bare" is an image
without them (an ami_id of one's own); Scenario.network off makes every download fail.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from fmcluster.facts import controlplanes
from fmcluster.facts import node as node_facts
from fmcluster.node import runtime as node_runtime
from tests.support import slurm_roots, standins

FAKES = Path(__file__).with_name("sandbox_fakes.sh")
COMMANDS = ("sleep", "mountpoint", "mount", "umount", "lsblk", "blkid", "mdadm", "mkfs.ext4", "systemctl",
            "apt-get", "dnf", "modinfo", "modprobe", "lnetctl", "ip", "nvidia-smi", "hostname", "scontrol", "aws",
            "install", "chown", "curl", "mknod", "pkill", "timeout", "logger", "enroot", "git", "make",
            "setcap", "aa-enabled", "apparmor_parser", "nvidia-container-cli", "nvidia-imex-ctl", "dpkg-query",
            "journalctl", "stat", "dcgmi", "_tick")
GPU_STANDINS = Path(__file__).with_name("gpu_standins")
PACKAGED_SLURMD = Path("/lib/systemd/system/slurmd.service")  # Debian's slurmd package's unit
# The Slurm installations whose spank.h a node has (Pyxis is built against one): AWS PCS's, by
# release, and SageMaker HyperPod's.
SLURM_PREFIXES = tuple(f"/opt/aws/pcs/scheduler/slurm-{v}" for v in controlplanes.get("pcs").versions) + ("/opt/slurm",)
# The Slurm headers Pyxis is built against: Debian's libslurm-dev (slurm/spank.h), linked into
# each installation of SLURM_PREFIXES.
SLURM_HEADERS = Path("/usr/include/slurm")
US = "\x1f"
# NVIDIA's IMEX package's /etc/nvidia-imex/config.cfg, the lines the scripts touch (the rest is the
# daemon's own): its command service, which nvidia-imex-ctl -N needs, off.
IMEX_PACKAGED_CONFIG = ("SERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n"
                        "IMEX_CMD_ENABLED=0\nIMEX_CMD_PORT=\n")


@dataclass(frozen=True)
class Scenario:
    """How the node behaves. Times are seconds of the virtual clock since the script started."""

    gpus: int = 8  # GPUs nvidia-smi lists
    gpu_model: str = "H100 80GB HBM3"
    nvme_disks: int = 8  # instance-store disks
    disks_at: int = 0  # when they appear (udev can be late)
    dlami_nvme: Optional[int] = None  # the AMI's dlami-nvme.service: None without one, else when it is done
    os_release: str = "noble"  # VERSION_CODENAME (noble, jammy) or "amzn2023" (no apt)
    dpkg_lock_until: int = 0  # unattended-upgrades holds the dpkg and apt lists locks until then
    apt_fails: bool = False  # the archive cannot be reached
    lustre_mount_fails: int = 0  # Lustre mounts that fail before one succeeds; -1: never succeeds
    lustre_client: bool = True  # a Lustre client with kefalnd is installed
    nfs_mount_fails: int = 0  # NFS mounts (the shared home) that fail before one succeeds; -1: never succeeds
    nfs_client: bool = True  # the NFS client (nfs-common: mount.nfs) is installed
    dnf_lustre: bool = True  # dnf can install lustre-client (Amazon Linux)
    efa_devices: int = 32  # entries of /sys/class/infiniband
    efa_driver: str = "2.13.0"  # modinfo -F version efa ("" for none)
    slurmd: bool = True  # the AMI has slurmd's unit
    # its name: slurmd.service (Slurm's packages, a node of one's own) or AWS PCS's
    # slurmd-VERSION.service, which the sandbox writes to /etc/systemd/system as PCS's Slurm
    # installer does (this machine's slurmd unit, renamed)
    slurmd_unit: str = "slurmd.service"
    ssm_value: str = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/api/v1/remote_write"
    instance_type: str = "p5.48xlarge"  # what the instance metadata service (IMDSv2, curl) says
    imds: bool = True  # the instance metadata service answers
    imex: bool = False  # the AMI has nvidia-imex.service, enabled (NVIDIA's IMEX packages)
    imex_channels_major: Optional[int] = 234  # nvidia-caps-imex-channels in /proc/devices; None: no driver
    imex_start_fails: bool = False
    imex_up_at: Optional[int] = 0  # when nvidia-imex-ctl -N says "Domain State: UP" (virtual time); None: never
    # what `scontrol show node` says of the job's nodes: (NodeName, NodeAddr)
    slurm_nodes: tuple[tuple[str, str], ...] = (("gpu-1", "10.1.0.11"), ("gpu-2", "10.1.0.12"))
    # downloads that fail before one succeeds: curl -o, and git clones (the musl repository,
    # reached over git://, is not there for that many clones: the real git fails)
    download_fails: int = 0
    # the upstream repositories (tests/support/standins.py, reached by the real git): those whose tag was
    # moved to another commit ("enroot", "pyxis"), and Enroot's submodules changed at its tag:
    # (PATH, "other") at another commit, (PATH, "missing"), ("deps/extra", "extra") one more
    git_moved_tags: tuple[str, ...] = ()
    enroot_submodules: tuple[tuple[str, str], ...] = ()
    apparmor: bool = True  # AppArmor is on (aa-enabled)
    slurm_headers: bool = True  # the Slurm installations of SLURM_PREFIXES have spank.h
    nvidia_container_cli: bool = True  # the AMI's NVIDIA Container Toolkit
    # SageMaker HyperPod: the plugstack.conf slurmctld sent to this configless slurmd (its
    # conf-cache), None: none yet
    slurmd_plugstack: Optional[str] = None
    # the node's image (Ubuntu only): "baked", fmcluster's node image (what scripts/image/bake.sh
    # installed, really baked once per release: `baked_files`), or "bare", an image without Enroot,
    # Pyxis and the exporters (an ami_id of one's own)
    image: str = "baked"
    # the Slurm the baked image's Pyxis is built against (None: its release's IMAGE_SLURM_PREFIXES)
    image_slurm_prefix: Optional[str] = None
    exporters: bool = True  # a baked image has the exporters' packages (dpkg-query lists them)
    network: bool = True  # off: every download fails (git clone, curl to a URL, apt-get)
    # GPU faults the node health check finds (fmcluster/node/scripts/boot/programs/node-health.sh),
    # all on GPU 0: XIDs in the kernel log since boot, uncorrected volatile ECC errors, a row
    # remap pending or failed, an error value nvidia-smi prints for a field ("[GPU requires
    # reset]"), NVLink links down, nvidia-smi hanging (the real `timeout` kills it)
    xids: tuple[int, ...] = ()
    ecc_errors: int = 0
    remap_pending: bool = False
    pages_pending: bool = False  # retired pages pending a reset (GPUs that retire pages, not remap rows)
    remap_failure: bool = False
    gpu_error: str = ""
    nvlink_inactive: int = 0
    nvidia_smi_hangs: bool = False
    gpu_lost: Optional[int] = None  # the GPU (index) fallen off the bus: nvidia-smi names it, exits 15
    nvlink: bool = True  # the GPUs have NVLink (`nvidia-smi nvlink -s` lists links)
    hung_mounts: tuple[str, ...] = ()  # mount points whose server does not answer (stat blocks)
    dcgm: str = "pass"  # what `dcgmi diag` finds: pass, fail (tests/support/gpu_standins/dcgmi)
    # the node as Slurm's controller sees it (`scontrol -o show node`): its State and Reason
    slurm_state: str = "IDLE"
    slurm_reason: str = ""
    slurm_name: str = "ip-10-1-0-42"  # its NodeName (AWS PCS names nodes otherwise than their hosts)
    # network-features.sh: the instance (IMDS), EC2's topology answers (state/topology.json) empty
    # for the first `topology_pending` calls or refused (`topology_denied`), and this node in
    # Slurm (`scontrol -o show node`): its features, and how many calls fail before it registered
    instance_id: str = "i-0a1b2c3d4e5f60001"
    region: str = "us-east-2"
    topology_pending: int = 0
    topology_denied: bool = False
    slurm_features: str = ""
    slurm_unregistered: int = 0

    def shell(self) -> str:
        values = {"GPUS": self.gpus, "GPU_MODEL": self.gpu_model, "NVME_DISKS": self.nvme_disks,
                  "DLAMI_NVME": "none" if self.dlami_nvme is None else self.dlami_nvme,
                  "DPKG_LOCK_UNTIL": self.dpkg_lock_until, "APT_FAILS": int(self.apt_fails),
                  "LUSTRE_MOUNT_FAILS": self.lustre_mount_fails, "LUSTRE_CLIENT": int(self.lustre_client),
                  "NFS_MOUNT_FAILS": self.nfs_mount_fails, "NFS_CLIENT": int(self.nfs_client),
                  "DNF_LUSTRE": int(self.dnf_lustre), "EFA_DRIVER": self.efa_driver,
                  "SLURMD": int(self.slurmd and self.slurmd_unit == "slurmd.service"),
                  "SSM_VALUE": self.ssm_value, "INSTANCE_TYPE": self.instance_type, "IMDS": int(self.imds),
                  "IMEX": int(self.imex), "IMEX_START_FAILS": int(self.imex_start_fails),
                  "IMEX_UP_AT": "never" if self.imex_up_at is None else self.imex_up_at,
                  "SLURM_NODES": " ".join(f"{n}={a}" for n, a in self.slurm_nodes),
                  "DOWNLOAD_FAILS": self.download_fails, "APPARMOR": int(self.apparmor),
                  "NETWORK": int(self.network), "XIDS": " ".join(map(str, self.xids)),
                  "ECC_ERRORS": self.ecc_errors, "REMAP_PENDING": int(self.remap_pending),
                  "PAGES_PENDING": int(self.pages_pending),
                  "REMAP_FAILURE": int(self.remap_failure), "GPU_ERROR": self.gpu_error,
                  "NVLINK_INACTIVE": self.nvlink_inactive, "NVIDIA_SMI_HANGS": int(self.nvidia_smi_hangs),
                  "GPU_LOST": "" if self.gpu_lost is None else self.gpu_lost,
                  "NVLINK": int(self.nvlink), "HUNG_MOUNTS": " ".join(self.hung_mounts), "DCGM": self.dcgm,
                  "SLURM_NAME": self.slurm_name,
                  "GPU_STANDINS": str(GPU_STANDINS), "INSTANCE_ID": self.instance_id, "REGION": self.region,
                  "TOPOLOGY_PENDING": self.topology_pending, "TOPOLOGY_DENIED": int(self.topology_denied),
                  "SLURM_FEATURES": self.slurm_features, "SLURM_UNREGISTERED": self.slurm_unregistered}
        return "".join(f"{k}='{v}'\n" for k, v in values.items())


@dataclass(frozen=True)
class Call:
    clock: int
    command: str
    args: tuple[str, ...]

    @property
    def line(self) -> str:
        return " ".join((self.command, *self.args))


@dataclass(frozen=True)
class Mount:
    target: str
    source: str
    fstype: str
    backing: str  # instance-store, root (the root EBS volume) or lustre
    extra: str = ""


@dataclass
class Unit:
    """A unit at boot: a mount from /etc/fstab, or a service."""

    name: str
    kind: str  # mount | service | target
    after: set[str] = field(default_factory=set)
    requires: set[str] = field(default_factory=set)
    target: str = ""  # a mount's mount point


@dataclass(frozen=True)
class Boot:
    order: tuple[str, ...]  # the units in the order they were started
    started: frozenset[str]  # units that came up
    failed: frozenset[str]  # units that failed, or whose required dependency did


def mount_unit_name(path: str) -> str:
    """systemd's name of the mount unit of `path` (/fsx -> fsx.mount, / -> -.mount)."""
    stripped = path.strip("/")
    return (stripped.replace("-", "\\x2d").replace("/", "-") or "-") + ".mount"


@functools.cache
def namespace_isolation() -> bool:
    """Whether runs can see the host read-only (unshare -rm works here)."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


# Run inside `unshare -rm`: the host's / read-only, the sandbox writable (the real mount, not
# the fake that PATH finds first). Bound recursively: a file system a test mounted in the sandbox
# (tests/support/frozen_fs.py) comes along, and a mount namespace of a user namespace refuses a
# plain bind of a directory that holds one (its mounts are locked together).
ISOLATE = """\
set -e
{mount} --make-rprivate /
{mount} --rbind "$FAKE_SANDBOX" "$FAKE_SANDBOX"
{mount} -o remount,bind,ro /
exec "$@"
""".format(mount=shutil.which("mount") or "/bin/mount")


class Sandbox:
    def __init__(self, tmp_path: Path, scenario: Scenario = Scenario()) -> None:
        self.dir = tmp_path / "node"
        self.root = self.dir / "root"
        self.state = self.dir / "state"
        self.bin = self.dir / "bin"
        self.scenario = scenario
        for directory in (self.root, self.state / "units", self.bin):
            directory.mkdir(parents=True)
        for path in ("etc/systemd/system", "etc/default", "usr/local/lib", "var/lib", "dev/disk/by-id",
                     "sys/class/infiniband", "opt", "run"):
            (self.root / path).mkdir(parents=True, exist_ok=True)
        (self.root / "etc/fstab").write_text("# /etc/fstab of the AMI\nLABEL=cloudimg-rootfs / ext4 defaults 0 1\n")
        if scenario.os_release == "amzn2023":
            (self.root / "etc/os-release").write_text('NAME="Amazon Linux"\nVERSION_ID="2023"\nID="amzn"\n')
        else:
            (self.root / "etc/os-release").write_text(f'NAME="Ubuntu"\nVERSION_CODENAME={scenario.os_release}\n')
            (self.root / "etc/apt/apt.conf.d").mkdir(parents=True)
        (self.root / "sys/bus/pci/drivers/efa").mkdir(parents=True)
        for i in range(scenario.efa_devices):  # as sysfs links them: device/driver -> the PCI driver
            (self.root / f"sys/class/infiniband/rdmap{i + 10}s0/device").mkdir(parents=True)
            (self.root / f"sys/class/infiniband/rdmap{i + 10}s0/device/driver").symlink_to(
                "../../../../bus/pci/drivers/efa")
        devices = "Character devices:\n  1 mem\n195 nvidia\n"
        if scenario.imex_channels_major is not None:
            devices += f"{scenario.imex_channels_major} nvidia-caps-imex-channels\n"
        (self.root / "proc").mkdir()
        (self.root / "proc/devices").write_text(devices)
        if scenario.imex:  # NVIDIA's packaged config.cfg: the command service off
            (self.root / "etc/nvidia-imex").mkdir(parents=True)
            (self.root / "etc/nvidia-imex/config.cfg").write_text(IMEX_PACKAGED_CONFIG)
        if scenario.dlami_nvme is not None:
            (self.root / "opt/dlami/nvme").mkdir(parents=True)  # the AMI's mount point, empty until mounted
        # EC2 puts the instance id in the DMI board asset tag (the deep check's marker reads it)
        (self.root / "sys/devices/virtual/dmi/id").mkdir(parents=True, exist_ok=True)
        (self.root / "sys/devices/virtual/dmi/id/board_asset_tag").write_text(scenario.instance_id + "\n")
        (self.state / "scenario.sh").write_text(scenario.shell())
        (self.state / "slurm-node").write_text(f"{scenario.slurm_state}\t{scenario.slurm_reason}\n")
        for name in ("calls", "mounts", "blockdevs", "filesystems", "enabled"):
            (self.state / name).touch()
        (self.state / "clock").write_text("0\n")
        events = []
        if scenario.nvme_disks:
            events.append((scenario.disks_at, "ev_disks"))
        if scenario.dlami_nvme is not None:
            events.append((scenario.dlami_nvme, "ev_dlami"))
        (self.state / "events").write_text("".join(f"{t}\t{what}\n" for t, what in events))
        fakes = self.bin / "fakes.sh"
        shutil.copyfile(FAKES, fakes)
        fakes.chmod(0o755)
        for command in COMMANDS:
            if command == "dnf" and scenario.os_release != "amzn2023":  # dnf only on Amazon Linux
                continue
            if command == "nvidia-container-cli" and not scenario.nvidia_container_cli:
                continue
            (self.bin / command).symlink_to(fakes)
        if scenario.slurm_headers:
            for prefix in SLURM_PREFIXES:
                (self.root / prefix.lstrip("/") / "include").mkdir(parents=True)
                (self.root / prefix.lstrip("/") / "include/slurm").symlink_to(slurm_headers(prefix))
        self._pristine_upstream: Optional[Path] = None  # the stand-ins to copy when first needed
        self.upstream = self._upstream(scenario)
        (self.state / "tmp").mkdir()
        if scenario.slurmd and scenario.slurmd_unit != "slurmd.service":  # AWS PCS's installer's
            (self.root / "etc/systemd/system" / scenario.slurmd_unit).write_text(PACKAGED_SLURMD.read_text())
        elif scenario.slurmd:  # a package's
            (self.root / "usr/lib/systemd/system").mkdir(parents=True, exist_ok=True)
            (self.root / "usr/lib/systemd/system/slurmd.service").write_text(PACKAGED_SLURMD.read_text())
        if scenario.slurmd_plugstack is not None:
            (self.root / "var/spool/slurmd/conf-cache").mkdir(parents=True)
            (self.root / "var/spool/slurmd/conf-cache/plugstack.conf").write_text(scenario.slurmd_plugstack)
        (self.state / "downloads").mkdir()
        if scenario.image == "baked" and scenario.os_release in IMAGE_SLURM_PREFIXES:
            self._baked(baked_files(scenario.os_release, scenario.image_slurm_prefix), exporters=scenario.exporters)
        self._tick()

    def _baked(self, baked: Path, *, exporters: bool) -> None:
        """What the image bake left (`baked_files`): its files in ROOT, and its packages."""
        shutil.copytree(baked / "root", self.root, symlinks=True, dirs_exist_ok=True)
        names = ("dpkg", "package-units") if exporters else ()
        for name in (*names, "enroot-caps"):
            if (baked / "state" / name).exists():
                shutil.copyfile(baked / "state" / name, self.state / name)

    def _upstream(self, scenario: Scenario) -> standins.Upstream:
        """The stand-in upstream repositories (a copy, changed as `scenario` says), and the git
        configuration that maps the node script's URLs to them. A scenario that changes none has
        them copied when first needed (`upstream_directory`, or the fake git's first call): most
        runs clone nothing, and a copy costs a sandbox more than the rest of its making."""
        directory = self.state / "upstream"
        if not (scenario.enroot_submodules or scenario.git_moved_tags):
            made = standins.pristine()
            self._pristine_upstream = made.directory
            (self.state / "gitconfig").write_text(standins.gitconfig(directory))
            return standins.Upstream(directory, made.enroot_commit, dict(made.enroot_submodules), made.pyxis_commit,
                                     dict(made.other_submodule_commits))
        upstream = standins.upstream_copy(directory)
        enroot = upstream.directory / "enroot.git"
        tag = f"v{node_runtime.ENROOT_VERSION}"
        if scenario.enroot_submodules:
            gitlinks, urls = dict(upstream.enroot_submodules), {}
            for path, change in scenario.enroot_submodules:
                if change == "other":
                    gitlinks[path] = upstream.other_submodule_commits[path]
                elif change == "missing":
                    del gitlinks[path]
                else:  # one more, from the makeself repository
                    gitlinks[path] = upstream.enroot_submodules["deps/makeself"]
                    urls[path] = standins.ENROOT_SUBMODULE_URLS["deps/makeself"][0]
            standins.move_tag(enroot, tag, standins.set_gitlinks(enroot, gitlinks, "other submodules", urls))
        for name in scenario.git_moved_tags:
            repo = upstream.directory / f"{name}.git"
            standins.git(repo, "commit", "-q", "--allow-empty", "-m", "not the pinned commit")
            other = standins.git(repo, "rev-parse", "HEAD")
            standins.move_tag(repo, tag if name == "enroot" else node_runtime.PYXIS_TAG, other)
        (self.state / "gitconfig").write_text(standins.gitconfig(upstream.directory))
        return upstream

    def upstream_directory(self) -> Path:
        """The sandbox's stand-in repositories, copied now if no git call has copied them yet
        (sandbox_fakes.sh's upstream_ready)."""
        if self._pristine_upstream is not None and not self.upstream.directory.exists():
            shutil.copytree(self._pristine_upstream, self.upstream.directory, symlinks=True)
        return self.upstream.directory

    def git_head(self, name: str) -> str:
        """The commit the tag of the stand-in `name` ("enroot", "pyxis") checks out now."""
        tag = f"v{node_runtime.ENROOT_VERSION}" if name == "enroot" else node_runtime.PYXIS_TAG
        return standins.git(self.upstream_directory() / f"{name}.git", "rev-parse", f"{tag}^{{commit}}")

    # --- running ---------------------------------------------------------------------------

    def env(self, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("FMCLUSTER_", "FAKE_"))}
        return {**base, "PATH": f"{self.bin}:/usr/bin:/bin:/usr/sbin:/sbin", "FMCLUSTER_ROOT": str(self.root),
                "FAKE_SANDBOX": str(self.dir), "GIT_CONFIG_GLOBAL": str(self.state / "gitconfig"),
                "GIT_CONFIG_NOSYSTEM": "1", "TMPDIR": str(self.state / "tmp"),
                "FAKE_UPSTREAM": str(self._pristine_upstream or ""), **(extra or {})}

    def _command(self, argv: list[str]) -> list[str]:
        if namespace_isolation():
            return ["unshare", "-rm", "bash", "-c", ISOLATE, "isolate", *argv]
        return argv

    def _tick(self) -> None:
        subprocess.run([str(self.bin / "_tick")], env=self.env(), check=True)

    def run(self, script: str, *args: str, name: str = "node.sh", files: Optional[dict[str, str]] = None,
            env: Optional[dict[str, str]] = None) -> subprocess.CompletedProcess:
        """Run `script` (its text) with bash, from a file `name` in the sandbox (outside ROOT), with
        `files` (relative path -> text) beside it: a lifecycle folder's hooks, say."""
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        for relative, text in (files or {}).items():
            (self.dir / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.dir / relative).write_text(text)
        return subprocess.run(self._command(["bash", str(path), *args]), env=self.env(env),
                              capture_output=True, text=True, timeout=120)

    def serve(self, files: dict[str, bytes]) -> None:
        """What the fake downloads answer: file name (a URL's last part) -> content."""
        for name, content in files.items():
            (self.state / "downloads" / name).write_bytes(content)

    def set_scenario(self, **changes) -> None:
        """Change how the node behaves from now on (e.g. a GPU lost before a reboot)."""
        from dataclasses import replace

        self.scenario = replace(self.scenario, **changes)
        (self.state / "scenario.sh").write_text(self.scenario.shell())

    # --- what happened ---------------------------------------------------------------------

    def calls(self, command: Optional[str] = None) -> list[Call]:
        """The calls recorded so far. Each fake appends its line in one write, a fake left running in
        the background too; a line whose newline is not there yet is being written, and is left out."""
        text = (self.state / "calls").read_text()
        found = []
        for line in text[:text.rfind("\n") + 1].splitlines():
            clock, name, *args = line.split(US)
            if command is None or name == command:
                found.append(Call(int(clock), name, tuple(args)))
        return found

    def lines(self, command: Optional[str] = None) -> list[str]:
        return [call.line for call in self.calls(command)]

    def mounts(self) -> dict[str, Mount]:
        table = {}
        for line in (self.state / "mounts").read_text().splitlines():
            target, source, fstype, backing, extra = line.split("\t")
            table[target] = Mount(target, source, fstype, backing, extra)
        return table

    def clock(self) -> int:
        return int((self.state / "clock").read_text())

    def file(self, node_path: str) -> str:
        return (self.root / node_path.lstrip("/")).read_text()

    def exists(self, node_path: str) -> bool:
        return (self.root / node_path.lstrip("/")).exists()

    def fstab(self) -> list[list[str]]:
        """/etc/fstab's entries (fields), comments left out."""
        return [line.split() for line in self.file("/etc/fstab").splitlines()
                if line.strip() and not line.startswith("#")]

    def unit_state(self, unit: str) -> str:
        path = self.state / "units" / unit
        return path.read_text().strip() if path.exists() else "inactive"

    def enabled(self) -> list[str]:
        return (self.state / "enabled").read_text().split()

    def verify_units(self) -> subprocess.CompletedProcess:
        """`systemd-analyze verify` (the real one) of every unit the scripts wrote to
        /etc/systemd/system, and of each unit a drop-in there changes (the package's unit, as this
        machine has it: slurmd's from Debian's slurmd), as systemd would load them on the node: in a
        private mount namespace, the node's /etc/systemd/system and FMCLUSTER_LIB are bound over
        this machine's, so that every ExecStart= program the node has is where its unit names it
        (the others, /bin/sh, prometheus-node-exporter, are this machine's, installed by make tools).
        Returns systemd-analyze's result: returncode, and on stdout its errors and its warnings
        (an unknown key is only a warning: a clean unit prints nothing)."""
        units = self.root / "etc/systemd/system"
        names = sorted(p.name for p in units.iterdir() if p.is_file() and p.suffix in (".service", ".timer", ".mount"))
        names += sorted(p.name[:-2] for p in units.iterdir() if p.is_dir() and p.name.endswith(".d"))
        if not names:
            return subprocess.CompletedProcess(["systemd-analyze", "verify"], 0, "", "")  # nothing to verify
        lib = self.root / node_facts.FMCLUSTER_LIB.lstrip("/")
        script = f"""set -e
mount --make-rprivate /
mount -t tmpfs fmcluster /etc/systemd/system
cp -a {shlex.quote(str(units))}/. /etc/systemd/system/
mount -t tmpfs fmcluster {node_facts.FMCLUSTER_LIB.rsplit("/", 1)[0]}
mkdir -p {node_facts.FMCLUSTER_LIB}
if [[ -d {shlex.quote(str(lib))} ]]; then cp -a {shlex.quote(str(lib))}/. {node_facts.FMCLUSTER_LIB}/; fi
exec systemd-analyze verify --man=no "$@" 2>&1
"""
        return subprocess.run(["unshare", "-m", "bash", "-c", script, "verify", *names], capture_output=True,
                              text=True, timeout=60)

    # --- a reboot --------------------------------------------------------------------------

    def reboot(self) -> Boot:
        """Boot again: memory state is gone (mounts, LNet, units, the clock), the disks keep what
        was written (the root volume's files, the instance store's arrays and file systems: a
        reboot is not a stop), and systemd starts the units of /etc/fstab, the enabled units and
        the AMI's own (dlami-nvme.service, slurmd.service) in dependency order."""
        for line in (self.state / "mounts").read_text().splitlines():  # NFS mounts give back what they hid
            target, source, _, backing, _ = line.split("\t")
            if backing == "nfs":
                key = lambda path: path.replace("/", "%")  # noqa: E731 (sandbox_fakes.sh's nfs_key)
                (self.root / target.lstrip("/")).rename(self.state / "nfs" / key(source))
                (self.state / "hidden" / key(target)).rename(self.root / target.lstrip("/"))
        for name in ("mounts", "calls", "lnet", "lustre-failures", "nfs-failures", "events.done"):
            (self.state / name).unlink(missing_ok=True)
        (self.state / "mounts").touch()
        (self.state / "calls").touch()
        for unit in (self.state / "units").iterdir():
            unit.unlink()
        shutil.rmtree(self.root / "run")  # a tmpfs
        (self.root / "run").mkdir()
        (self.state / "clock").write_text("0\n")
        (self.state / "events").write_text("")  # the disks are there, the AMI's unit runs when started
        units = self._boot_units()
        order, started, failed = [], set(), set()
        pending = dict(units)
        while pending:
            ready = [u for u in pending.values() if all(a in order or a not in units for a in u.after)]
            if not ready:
                raise AssertionError(f"ordering cycle among {sorted(pending)}")
            # What systemd leaves open, resolved against the scripts: mounts as early as they may go.
            unit = min(ready, key=lambda u: (u.kind != "mount", u.kind != "target", u.name))
            del pending[unit.name]
            order.append(unit.name)
            if any(r in failed or (r in units and r not in started) for r in unit.requires):
                failed.add(unit.name)
                continue
            if self._start(unit):
                started.add(unit.name)
            else:
                failed.add(unit.name)
        return Boot(tuple(order), frozenset(started), frozenset(failed))

    def _start(self, unit: Unit) -> bool:
        if unit.kind == "target":
            return True
        if unit.kind == "mount":
            argv = [str(self.bin / "mount"), unit.target]
        else:
            argv = [str(self.bin / "systemctl"), "start", unit.name]
        return subprocess.run(self._command(argv), env=self.env(), capture_output=True, text=True).returncode == 0

    def _boot_units(self) -> dict[str, Unit]:
        units: dict[str, Unit] = {}

        def add(unit: Unit) -> Unit:
            units.setdefault(unit.name, unit)
            return units[unit.name]

        local_fs = add(Unit("local-fs.target", "target"))
        network = add(Unit("network-online.target", "target", after={"local-fs.target"}))
        remote_pre = add(Unit("remote-fs-pre.target", "target", after={"network-online.target"}))
        remote = add(Unit("remote-fs.target", "target", after={"remote-fs-pre.target"}))
        for fields in self.fstab():
            what, where, _fstype, options = fields[:4]
            if where == "/":
                continue
            opts = options.split(",")
            unit = add(Unit(mount_unit_name(where), "mount", target=where))
            netdev = "_netdev" in opts
            if netdev:
                unit.after |= {network.name, remote_pre.name}
            if "nofail" not in opts:
                (remote if netdev else local_fs).after.add(unit.name)
            for opt in opts:
                key, _, value = opt.partition("=")
                if key == "x-systemd.requires":
                    unit.requires.add(value)
                    unit.after.add(value)
                elif key in ("x-systemd.after",):
                    unit.after.add(value)
                elif key == "x-systemd.requires-mounts-for":
                    unit.after.add(mount_unit_name(value))
                    unit.requires.add(mount_unit_name(value))
        services = list(dict.fromkeys(self.enabled()))
        if self.scenario.dlami_nvme is not None:
            services.append("dlami-nvme.service")
        if self.scenario.slurmd:
            services.append(self.scenario.slurmd_unit)
        for name in services:
            add(Unit(name, "service", after={local_fs.name}))
        for name in services:
            unit = units[name]
            for directive, values in self._unit_directives(name):
                if directive == "After":
                    unit.after |= set(values)
                elif directive == "Requires":
                    unit.requires |= set(values)
                    unit.after |= set(values)
                elif directive == "Before":
                    for value in values:
                        if value in units:
                            units[value].after.add(name)
                elif directive == "RequiresMountsFor":
                    for value in values:
                        unit.after.add(mount_unit_name(value))
                        unit.requires.add(mount_unit_name(value))
        for unit in units.values():  # drop orderings on units this boot does not have
            unit.after &= set(units)
        return units

    def _unit_directives(self, unit: str) -> Iterable[tuple[str, list[str]]]:
        paths = [self.root / "etc/systemd/system" / unit]
        dropins = self.root / "etc/systemd/system" / f"{unit}.d"
        if dropins.is_dir():
            paths += sorted(dropins.glob("*.conf"))
        for path in paths:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                match = re.fullmatch(r"(After|Before|Requires|RequiresMountsFor)=(.*)", line.strip())
                if match:
                    yield match.group(1), match.group(2).split()


# --- the node image ------------------------------------------------------------------------

# The Slurm each release's image is baked against: AWS PCS's (noble; the oldest release PCS
# creates clusters with, whose root tests/support/slurm_roots.py builds) and SageMaker HyperPod's
# (jammy).
IMAGE_PCS_SLURM = "24.11"
IMAGE_SLURM_PREFIXES = {"noble": slurm_roots.prefix(IMAGE_PCS_SLURM), "jammy": "/opt/slurm"}


def slurm_headers(prefix: str) -> Path:
    """The slurm/ headers a node has under `prefix`: those of the Slurm root of its release where
    there is one (AWS PCS's prefixes of 24.11 and 26.05), else this machine's."""
    version = slurm_roots.release_of(prefix)
    if version in slurm_roots.versions():
        try:
            return slurm_roots.root(version) / "usr/include/slurm"
        except slurm_roots.Missing:
            pass
    return SLURM_HEADERS


def pcs_slurm_command(node: "Sandbox", prefix: str, command: str, release: Optional[str] = None) -> None:
    """Put AWS PCS's Slurm `command` (srun, scontrol...) of `prefix` on the node: a script that runs
    the real one of the Slurm root of that release (tests/support/slurm_roots.py; `release`: of
    another one) with the sandbox's directory visible inside, so the files the node's scripts
    write are the files it reads. Missing (with the hint to run `make tools`) without that root."""
    version = release or slurm_roots.release_of(prefix)
    base = slurm_roots.root(version)
    path = node.root / prefix.lstrip("/") / "bin" / command
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(slurm_roots.wrapper(base, f"{slurm_roots.prefix(version)}/bin/{command}", (str(node.dir),)))
    path.chmod(0o755)
_BAKED: dict[tuple[str, str, str, str], Path] = {}


# Where the Deep Learning AMIs keep nccl-tests (fmcluster.facts.health.DEEP_NCCL_TESTS), for their CUDA 13.2
DLAMI_NCCL_TESTS = "/usr/local/cuda-13.2/efa/test-cuda-13.2"


def install_gpu_tools(node: "Sandbox", busbw_gbps: float = 400.0) -> None:
    """What the Deep Learning AMI base has for the deep check of a new GPU node: DCGM's dcgmi (the
    stand-in prints a real run) and nccl-tests' all_reduce_perf where the DLAMI keeps it, whose bus
    bandwidth inside the node is `busbw_gbps` (the stand-in's STANDIN_BUSBW_NODE)."""
    (node.bin / "dcgmi").unlink(missing_ok=True)
    (node.bin / "dcgmi").symlink_to(GPU_STANDINS / "dcgmi")
    binary = node.root / DLAMI_NCCL_TESTS.lstrip("/") / "all_reduce_perf"
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text(f"#!/bin/sh\nSTANDIN_BUSBW_NODE={busbw_gbps} exec {GPU_STANDINS / 'all_reduce_perf'} \"$@\"\n")
    binary.chmod(0o755)


def node_image(os_release: str = "noble", revision: int = 1, slurm_prefix: Optional[str] = None):
    """The NodeImage of a release's base (the model's, as fmcluster.model.cluster makes them),
    its Pyxis built against `slurm_prefix` (None: the release's IMAGE_SLURM_PREFIXES)."""
    from fmcluster.facts import images
    from fmcluster.model.cluster import NodeImage

    plane = images.PCS if os_release == "noble" else images.HYPERPOD_SLURM
    prefix = slurm_prefix or IMAGE_SLURM_PREFIXES[os_release]
    return NodeImage(key=f"{plane}-x86_64", plane=plane, architecture="x86_64", base=images.base(plane, "x86_64"),
                     slurm_version=slurm_roots.release_of(prefix) if plane == images.PCS else "",
                     slurm_prefix=prefix, build_instance_type="c6i.2xlarge",
                     revision=revision, encrypted=False, groups=("gpu",))


def bake(node: Sandbox, image=None, slurm_prefix: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run the image's build phase (fmcluster.node.image's bake script, pinned to the stand-ins'
    commits) on `node`: real git, make and gcc against the stand-ins."""
    from fmcluster.node.image import documents

    image = image or node_image(node.scenario.os_release, slurm_prefix=slurm_prefix)
    script = standins.with_pins(document_script(documents(image).build), node.upstream)
    return node.run(script, name="bake.sh")


def document_script(document: str) -> str:
    """The script of an AWSTOE document's one ExecuteBash step, as AWSTOE hands it to bash."""
    import yaml

    ((phase,),) = [yaml.safe_load(document)["phases"]]
    ((step,),) = [phase["steps"]]
    ((script,),) = [step["inputs"]["commands"]]
    return script


def baked_files(os_release: str, slurm_prefix: Optional[str] = None) -> Path:
    """What the image bake leaves on a `os_release` node, baked once per test process and Slurm:
    root/, the files it wrote (Enroot, Pyxis against `slurm_prefix`, by default
    IMAGE_SLURM_PREFIXES[os_release], the manifest...), and state/, the packages it installed (the
    fakes' dpkg, package-units, enroot-caps)."""
    from fmcluster.node.image import DIGEST_PLACEHOLDER, bake_script, check_script

    prefix = slurm_prefix or IMAGE_SLURM_PREFIXES[os_release]
    # the bake's documents follow the pins in force (the stand-ins' or the real ones): one bake
    # each, known by the scripts they hold (rendering the documents themselves, YAML, took 17 ms a
    # sandbox, the scripts 0.3 ms)
    image = node_image(os_release, slurm_prefix=prefix)
    key = (os_release, prefix, bake_script(image, DIGEST_PLACEHOLDER), check_script(image))
    if key not in _BAKED:
        import atexit
        import tempfile

        top = Path(tempfile.mkdtemp(prefix="fmcluster-baked-"))
        atexit.register(shutil.rmtree, top, True)
        node = Sandbox(top / "bake", Scenario(os_release=os_release, image="bare", gpus=0, nvme_disks=0,
                                              efa_devices=0, slurmd=False))
        before = {p.relative_to(node.root) for p in node.root.rglob("*")}
        result = bake(node, slurm_prefix=key[1])
        assert result.returncode == 0, result.stderr
        out = top / "image"
        for path in sorted(node.root.rglob("*")):
            relative = path.relative_to(node.root)
            if relative in before:
                continue
            target = out / "root" / relative
            if path.is_dir() and not path.is_symlink():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target, follow_symlinks=False)
        (out / "state").mkdir(parents=True)
        for name in ("dpkg", "package-units", "enroot-caps"):
            if (node.state / name).exists():
                shutil.copyfile(node.state / name, out / "state" / name)
        _BAKED[key] = out
    return _BAKED[key]


def user_data_parts(text: str) -> dict[str, tuple[str, str]]:
    """The parts of a MIME multipart user data: file name -> (content type, body)."""
    import email

    message = email.message_from_string(text)
    return {part.get_filename(): (part.get_content_type(), part.get_payload()) for part in message.get_payload()}


def template_text(value) -> str:
    """A CloudFormation string value as text: Fn::Base64 and Fn::Join unwrapped, other intrinsics
    (a file system's DNS name from another stack, say) as placeholders that are valid words."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Base64" in value:
        return template_text(value["Fn::Base64"])
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(template_text(p) for p in parts)
    return "placeholder-" + re.sub(r"[^a-z0-9]+", "-", json_key(value)).strip("-")[:40]


def json_key(value) -> str:
    import json

    return json.dumps(value, sort_keys=True).lower()
