"""Root file systems of the Slurm releases AWS PCS runs, laid out as PCS's Slurm installer lays
them out, for the tests that run node programs against them.

Debian's archive has Slurm 24.11 (trixie) and 26.05 (sid, December 2026), the oldest and the newest
release AWS PCS creates clusters with; the machine itself has bookworm's 22.05. `debootstrap`
builds a minimal root of each suite with Debian's Slurm, and the root is then laid out as AWS
PCS's Slurm installer leaves a node (PCS User Guide, "Software installers to build custom AMIs for
AWS PCS"):

- Slurm under /opt/aws/pcs/scheduler/slurm-MAJOR.MINOR: bin/, sbin/, include/ (slurm/spank.h)
  and lib/slurm/ (its plugins). The client commands are moved into bin/, so that, as on a PCS
  node, no Slurm command is on a default PATH (/usr/bin has none); sbin/, lib/slurm and include/
  point at Debian's files, where the binaries look for them (slurmd runs slurmstepd from the
  /usr/sbin compiled into it);
- built without munge: the installer configures `--without-munge`, so PCS authenticates with
  auth/slurm and the cluster's key. Debian builds both; the munge plugins are removed, so
  anything that still asks for auth/munge fails as it fails on a PCS node;
- its slurmd unit is /etc/systemd/system/slurmd-MAJOR.MINOR.service (the build's unit, renamed),
  and no slurmd.service;
- /etc/aws/pcs/scheduler/slurm-MAJOR.MINOR/plugstack.conf.d/, where SPANK plugins are configured;
- the slurm user and group have UID and GID 401 where they did not exist.

`make tools` builds the roots (`python3 tests/support/slurm_roots.py build`, as root) into
ROOTS_DIR, outside any clone, once per recipe: a changed recipe (RECIPE) builds them again. The
tests use `root(version)` and run commands in a root with `in_root`.

Standard library only: `make tools` runs this before the project's virtual environment exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# suite -> the Slurm release (major.minor) it carries
SUITES = {"trixie": "24.11", "sid": "26.05"}
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("slurmd", "slurmctld", "slurmdbd", "slurm-client", "libslurm-dev")
ROOTS_DIR = Path(os.environ.get("FMCLUSTER_SLURM_ROOTS", "/var/cache/fmcluster-test/slurm-roots"))
PCS_PREFIX = "/opt/aws/pcs/scheduler/slurm-{version}"
PLUGIN_DIR = "usr/lib/x86_64-linux-gnu/slurm-wlm"  # Debian's (the binaries' compiled-in PluginDir)
MUNGE_PLUGINS = ("auth_munge.so", "cred_munge.so")
SLURM_UID = 401  # the installer's slurm user and group
CLIENTS = ("sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "sdiag",
           "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat")
DAEMONS = ("slurmd", "slurmctld", "slurmdbd", "slurmstepd")
LAYOUT_REVISION = 2  # raise when the layout below changes: every root is built again
RECIPE = hashlib.sha256(json.dumps([SUITES, MIRROR, PACKAGES, LAYOUT_REVISION]).encode()).hexdigest()[:12]
STAMP = ".fmcluster-slurm-root"


class Missing(Exception):
    """A root that `make tools` has not built (or could not)."""


def path_of(suite: str) -> Path:
    return ROOTS_DIR / f"{suite}-{RECIPE}"


def prefix(version: str) -> str:
    """Where AWS PCS installs Slurm `version` (major.minor)."""
    return PCS_PREFIX.format(version=version)


def release_of(path: str) -> str:
    """The Slurm release of an AWS PCS prefix (`prefix`'s inverse): /opt/aws/pcs/scheduler/slurm-24.11 -> 24.11."""
    return path.rsplit("slurm-", 1)[-1]


def carried(suite: str) -> str:
    """The Slurm release (major.minor) the root of `suite` carries: its stamp's, once built (a suite
    such as sid moves on to the next release), else SUITES'."""
    try:
        found = json.loads((path_of(suite) / STAMP).read_text())["slurm"]
    except (OSError, ValueError, KeyError, TypeError):
        return SUITES[suite]
    return ".".join(str(found).split(".")[:2])


def root(version: str) -> Path:
    """The built root of Slurm `version`; Missing when `make tools` has not built it."""
    suites = [suite for suite in SUITES if carried(suite) == version]
    if not suites:
        raise Missing(f"no Debian suite here carries Slurm {version} (have {', '.join(versions())})")
    path = path_of(suites[0])
    if not (path / STAMP).is_file() or not SCRATCH.is_dir():
        raise Missing(f"no root of Slurm {version} at {path}: run `make tools` as root (debootstrap builds it)")
    return path


def versions() -> tuple[str, ...]:
    """The Slurm releases the roots carry, oldest first."""
    return tuple(sorted({carried(suite) for suite in SUITES}, key=lambda v: tuple(int(p) for p in v.split("."))))


def in_root(base: Path, command: list[str], *, binds: tuple[str, ...] = (), env: dict[str, str] | None = None,
            timeout: float = 120, check: bool = False, user: str | None = None,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` chrooted in `base`, with each path of `binds` (directories of this machine,
    such as a test's tmp_path) at the same path inside (ENTER); `user`: as that user (runuser in
    the root, which must know the user: bind /etc/passwd)."""
    return subprocess.run(argv(base, command, binds=binds, user=user), capture_output=True, text=True,
                          timeout=timeout, env=env, check=check, input=input)


def argv(base: Path | str, command: list[str], *, binds: tuple[str, ...] = (), user: str | None = None) -> list[str]:
    """What runs `command` chrooted in `base` (in_root's), for a process of one's own (Popen: a
    daemon); `base` may be LAYER:ROOT (an overlay's lower directories: LAYER's files over ROOT's,
    such as an /etc/passwd of one's own). Each bind is a path of this machine seen at the same path
    inside, or TARGET=SOURCE: SOURCE (a directory or a file) seen at TARGET. The command starts in
    the caller's working directory where the root sees it, else in /; `user`: run as that user
    (the namespace and its mounts need root)."""
    as_user = ["/usr/sbin/runuser", "-u", user, "--"] if user else []
    return [UNSHARE, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", ENTER, "enter", str(base),
            str(SCRATCH), *binds, "--", *as_user, *command]


# sh -c ENTER enter ROOT SCRATCH BIND... -- COMMAND...: in the mount namespace of its own that
# `unshare` gave it, a writable view of ROOT (an overlay whose changes live in a tmpfs on SCRATCH,
# an empty directory beside the roots, and vanish with the namespace: the built root never
# changes), each BIND and /proc, /dev at their own paths in it (recursive binds: a user namespace,
# such as the sandbox's, may bind only so; TARGET=SOURCE: SOURCE at TARGET, a file over a file),
# then COMMAND chrooted there, in the caller's directory where the view has it.
# The system's programs by their paths: a sandboxed node's PATH finds its fakes first.
MOUNT, MKDIR, CHROOT, UNSHARE, NSENTER = (shutil.which(p) or f"/usr/bin/{p}"
                                          for p in ("mount", "mkdir", "chroot", "unshare", "nsenter"))
ENTER = r"""
root=$1 scratch=$2; shift 2
MOUNT -t tmpfs fmcluster-root "$scratch" && MKDIR "$scratch/upper" "$scratch/work" "$scratch/view" &&
  MOUNT -t overlay fmcluster-root -o "lowerdir=$root,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/view" ||
  exit 125
for bind; do
  shift
  [ "$bind" = -- ] && break
  target=${bind%%=*} source=${bind#*=}
  if [ -d "$source" ]; then
    MKDIR -p "$scratch/view$target" || exit 125
  else
    MKDIR -p "$scratch/view${target%/*}" && { [ -e "$scratch/view$target" ] || : >"$scratch/view$target"; } || exit 125
  fi
  MOUNT --rbind "$source" "$scratch/view$target" || exit 125
done
for system in /proc /dev; do MOUNT --rbind "$system" "$scratch/view$system" || exit 125; done
exec CHROOT "$scratch/view" /bin/sh -c 'IN_CWD' "$PWD" "$@"
"""
# sh -c IN_CWD DIR COMMAND...: COMMAND in DIR where the root has it, else in /
IN_CWD = 'cd "$0" 2>/dev/null || cd /; exec "$@"'
ENTER = ENTER.replace("MOUNT", MOUNT).replace("MKDIR", MKDIR).replace("CHROOT", CHROOT).replace("IN_CWD", IN_CWD)
SCRATCH = ROOTS_DIR / ".scratch"


def wrapper(base: Path | str, program: str, binds: tuple[str, ...]) -> str:
    """A script that runs `program` (a path inside the root) in the root with `binds`, passing its
    arguments and environment on: what a sandboxed node calls in place of PCS's Slurm command."""
    quoted = " ".join(shlex.quote(path) for path in (str(base), str(SCRATCH), *binds))
    return (f"#!/bin/sh\n# {program} of the Slurm root {base} (tests/support/slurm_roots.py)\n"
            f"exec {UNSHARE} --mount --propagation private -- /bin/sh -c {shlex.quote(ENTER)} enter {quoted} -- "
            f"{shlex.quote(program)} \"$@\"\n")


def joined(pid: int, command: list[str], *, user: str | None = None, cwd: str = "/") -> list[str]:
    """What runs `command` in the view of a root that process `pid` (one started with argv, in /
    of the root: HOLD) holds: its mount namespace and root, binds and all, entered with nsenter
    (in pid's working directory, then `cwd` where the view has it). A few milliseconds where
    argv's mounts take tens: for many commands in one view (a cluster's clients). `user`: as that
    user."""
    as_user = ["/usr/sbin/runuser", "-u", user, "--"] if user else []
    return [NSENTER, "-t", str(pid), "-m", "-r", "-w", "--", "/bin/sh", "-c", IN_CWD, cwd, *as_user, *command]


# What holds a view for `joined`: a process that waits, in / of the root (what joins it starts there)
HOLD = ["/bin/sh", "-c", "cd / && exec sleep infinity"]


def joining_wrapper(pid: int, program: str) -> str:
    """A script that runs `program` (a path inside the root) in the view process `pid` holds
    (joined), in the caller's directory, passing its arguments and environment on."""
    return (f"#!/bin/sh\n# {program} in the Slurm root that process {pid} holds (tests/support/slurm_roots.py)\n"
            f"exec {NSENTER} -t {pid} -m -r -w -- /bin/sh -c {shlex.quote(IN_CWD)} \"$PWD\" {shlex.quote(program)} "
            f"\"$@\"\n")


# ---- building (make tools) ----------------------------------------------------------------------

def build(suite: str) -> Path:
    """Build the root of `suite` unless it is there: debootstrap, then the PCS layout."""
    path = path_of(suite)
    if (path / STAMP).is_file():
        return path
    SCRATCH.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(partial),
                    MIRROR], check=True, stdout=subprocess.DEVNULL)
    found = subprocess.run(["chroot", str(partial), "slurmd", "-V"], check=True, capture_output=True,
                           text=True).stdout.split()[-1]
    version = ".".join(found.split(".")[:2])
    if version != SUITES[suite]:  # the suite moved on: its root is that release's, and the tests follow
        print(f"make tools: warning: Debian {suite} now carries Slurm {found}, not {SUITES[suite]}: its root is "
              f"laid out as {version}'s; update SUITES in tests/support/slurm_roots.py", file=sys.stderr)
    lay_out(partial, version)
    (partial / STAMP).write_text(json.dumps({"suite": suite, "slurm": found, "recipe": RECIPE}) + "\n")
    shutil.rmtree(path, ignore_errors=True)
    partial.rename(path)
    for stale in ROOTS_DIR.glob(f"{suite}-*"):  # the roots of older recipes
        if stale != path:
            shutil.rmtree(stale, ignore_errors=True)
    return path


def lay_out(base: Path, version: str) -> None:
    """Debian's Slurm in `base`, laid out as PCS's installer lays out Slurm `version`."""
    top = base / prefix(version).lstrip("/")
    for name in ("bin", "sbin", "lib"):
        (top / name).mkdir(parents=True, exist_ok=True)
    for client in CLIENTS:  # moved: no Slurm command on a default PATH
        (base / "usr/bin" / client).rename(top / "bin" / client)
    for daemon in DAEMONS:
        (top / "sbin" / daemon).symlink_to(f"/usr/sbin/{daemon}")
    (top / "lib/slurm").symlink_to(f"/{PLUGIN_DIR}")
    (top / "include").symlink_to("/usr/include")
    for plugin in MUNGE_PLUGINS:  # --without-munge
        (base / PLUGIN_DIR / plugin).unlink()
    packaged = base / "usr/lib/systemd/system/slurmd.service"
    unit = packaged.read_text().replace("/usr/sbin/slurmd", f"{prefix(version)}/sbin/slurmd")
    (base / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    (base / f"etc/systemd/system/slurmd-{version}.service").write_text(unit)
    packaged.unlink()
    (base / f"etc/aws/pcs/scheduler/slurm-{version}/plugstack.conf.d").mkdir(parents=True)
    _slurm_user(base)


def _slurm_user(base: Path) -> None:
    """The installer's slurm:slurm (401:401), unless the packages made one."""
    passwd, group = base / "etc/passwd", base / "etc/group"
    if not any(line.startswith("slurm:") for line in group.read_text().splitlines()):
        with group.open("a") as handle:
            handle.write(f"slurm:x:{SLURM_UID}:\n")
    if not any(line.startswith("slurm:") for line in passwd.read_text().splitlines()):
        with passwd.open("a") as handle:
            handle.write(f"slurm:x:{SLURM_UID}:{SLURM_UID}:Slurm:/nonexistent:/usr/sbin/nologin\n")


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python3 tests/support/slurm_roots.py build", file=sys.stderr)
        return 2
    for suite in SUITES:
        if (path_of(suite) / STAMP).is_file():
            continue
        print(f"make tools: building the Slurm {SUITES[suite]} root of Debian {suite} (debootstrap, about a minute)")
        build(suite)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
