"""A real Slurm cluster on localhost for tests: munged, slurmctld and N slurmd, each a process of
the Debian packages (slurmctld, slurmd, slurm-client, munge), configured in a temporary directory;
or, with `release` ("24.11", "26.05"), slurmctld and N slurmd of that AWS PCS release, run from its
root as PCS lays Slurm out (tests/support/slurm_roots.py; "Slurm releases of AWS PCS" below).

    with SlurmCluster(tmp_path, nodes=2, gres="gpu:8", extra=["Prolog=/x", "PrologFlags=Alloc,NoHold"]) as cluster:
        job = cluster.sbatch("#!/bin/sh\\nhostname\\n", "--exclusive", "-N2")
        assert cluster.wait_job(job)["JobState"] == "COMPLETED"

`start()` writes slurm.conf (and gres.conf with `gres`) into the directory, starts munged with a
key of its own on a socket of its own (AuthInfo=socket=...), `slurmctld -D` and one `slurmd -D -N
NAME` per node (NodeHostname=localhost, each node its own Port= and its own NodeAddr in the
block of LOOPBACK), and waits until `sinfo` shows every node idle: a few seconds. `stop()` (the
context manager's exit) ends every process it started, by its own process id, and waits for them. Every wait is bounded,
so a broken Slurm fails the test instead of hanging the suite.

The clients (sinfo, sbatch, scontrol) find the cluster through SLURM_CONF (`cluster.env`). slurmd
runs its prologs and epilogs as Slurm does on a real node: as root, with Slurm's environment and no
PATH (bash then uses its built-in default).

`hide`: paths that slurmd, and so its prologs and jobs, must not see (an empty file bound over each
in a private mount namespace; the rest of the host is untouched; `binds` binds other files so).
Debian keeps Slurm's commands in /usr/bin, on bash's default PATH, where AWS PCS keeps them in
/opt/aws/pcs/scheduler/slurm-VERSION/bin and SageMaker HyperPod in /opt/slurm/bin, on no PATH a
prolog gets. Hiding /usr/bin/scontrol makes this host a PCS node for a prolog.

Debian's Slurm is 22.05; AWS PCS runs 24.11 and later. What differs for what the tests here see:
- a prolog's environment: 22.05 has SLURM_JOB_ID, SLURM_NODELIST, SLURMD_NODENAME, SLURM_CONF (the
  cluster's slurm.conf, so scontrol in a prolog finds it), CUDA_VISIBLE_DEVICES with Gres, but no
  SLURM_JOB_OVERSUBSCRIBE (23.02 and later set it; tests/node/test_imex_slurm.py stands in for it);
- no topology/block (24.05 and later): no --segment, no block placement;
- the same on a failing prolog: the node is drained with the reason "Prolog error" and the batch
  job requeued and held (PENDING, launch_failed_requeued_held);
- bash's built-in PATH for a prolog (slurmd passes none) is, with Debian's bash,
  /usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin:. : it finds Debian's Slurm
  commands in /usr/bin, never PCS's or HyperPod's (hence `hide`).

Several slurmd on one host: `slurmd -N NAME` with a distinct Port= per node
(NodeHostname=localhost, the documented way) runs with Debian's build, and %n in SlurmdSpoolDir,
SlurmdPidFile and SlurmdLogFile expands to each node's name (checked with 22.05.8). Each node
gets its own NodeAddr (127.0.77.11, .12, ...: all of 127/8 is loopback), so a prolog sees distinct
addresses; slurmctld (and slurmdbd and MariaDB, tests/support/slurm_accounting.py) are at
CONTROLLER, in the same block.

Loopback at full speed: Slurm writes each message in two writes (its length, then its body), so
with Nagle's algorithm on the sender and delayed acknowledgement on the receiver every answer
waits about 40 ms on Linux loopback: about 0.35 s for one sacctmgr or scontrol command, seconds
for a test. `fast_loopback()` gives the clusters' block of loopback addresses (nothing else uses
it) a route with `quickack` (ip-route(8)): the receiver acknowledges at once and a command takes
a few milliseconds; what Slurm does is the same. It needs root and `ip` (iproute2); without them
the clusters work as before, only slower.

Slurm releases of AWS PCS (`release`): every daemon (slurmctld, slurmd, and slurmdbd,
tests/support/slurm_accounting.py) runs from /opt/aws/pcs/scheduler/slurm-RELEASE/sbin in a view
of the release's root of its own (slurm_roots.argv: a mount namespace, the root behind an
overlay, then chroot), with the cluster's directories and `shared` at their own paths, this
machine's users, groups and host names added to the root's (a layer of the cluster's own over
it, as a directory service gives a node) and /sys (hwloc). The client commands share one more
view, held by a process of the cluster's and joined with nsenter (`bin`'s scripts, `as_user`): a
few milliseconds a command, where a view of its own takes tens of milliseconds of mounts.
cgroup.conf says CgroupPlugin=disabled (slurmd of 24.11 and later loads a cgroup plugin by
default; these clusters track processes without cgroups).

PCS's Slurm has no munge: AuthType=auth/slurm and CredType=cred/slurm, with the cluster's key in
slurm.key next to slurm.conf, mode 600 (slurm.conf(5), AuthType; Slurm's authentication.html).
Only the daemons read the key; a client asks a daemon's SACK socket (/run/slurm/sack.socket, then
/run/slurmctld/ and /run/slurmdbd/: src/common/sack_api.c), so the controller's and slurmdbd's
/run directories are directories of the cluster, bound into their views and the clients', and a
program slurmd runs (a prolog, the HealthCheckProgram, a job) asks its own slurmd's
/run/slurm/sack.socket. What runs on a node finds the clients where PCS keeps them (`node_bin`: no
Slurm command is on a default PATH there); what runs on this machine, as a login node's programs
do, finds them in `bin`. Prologs, the HealthCheckProgram and jobs run in the root: with its
programs (a Debian minbase system: bash, coreutils, util-linux, no Python) and what `shared`
makes visible. Slurm 24.11's slurmctld here now and then answers a request only after 5 s (26.05's
does not): a test on 24.11 takes about 5 s longer.

Gres: gres.conf File= must name character devices, so the stand-ins are device nodes made with
mknod (1, 3: what /dev/null is), one per GPU; slurmd then sets CUDA_VISIBLE_DEVICES.
Starting takes well under a second here (munged, slurmctld, two slurmd, all idle).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence

import pytest

from tests.support import slurm_roots
from tests.support.locks import locked

COMMANDS = ("munged", "slurmctld", "slurmd", "sinfo", "sbatch", "scontrol", "squeue")
START_TIMEOUT = 30.0  # seconds for munged, slurmctld and every slurmd to be up and the nodes idle
COMMAND_TIMEOUT = 20.0  # seconds for one client command
START_LOCK = Path(tempfile.gettempdir()) / "fmcluster-tests-slurm-start.lock"  # SlurmCluster.start
LOOPBACK = "127.0.77.0/24"  # the test clusters' own loopback addresses (module docstring)
CONTROLLER = "127.0.77.1"  # slurmctld's (SlurmctldHost's), slurmdbd's and MariaDB's address


@contextmanager
def start_lock() -> Iterator[None]:
    """Held from picking free ports until the daemons have bound them: by SlurmCluster.start, and by
    whatever else starts a daemon on a port of its own beside the clusters (MariaDB). Clusters of
    test processes that run side by side (pytest-xdist) would otherwise pick the same port."""
    with locked(START_LOCK):
        yield


# The Slurm releases of AWS PCS that a cluster can run (SlurmCluster's `release`), oldest first;
# None: this machine's Debian Slurm (22.05, munge: what HyperPod authenticates with).
PCS_RELEASES = slurm_roots.versions()
RELEASES = (None, *PCS_RELEASES)


def release_id(release: Optional[str]) -> str:
    """A test id for `release`: pcs-24.11, or debian for this machine's Slurm."""
    return f"pcs-{release}" if release else "debian"


def node_address(index: int) -> str:
    """The NodeAddr of the cluster's node number `index` (from 0)."""
    return f"127.0.77.{11 + index}"


@functools.cache
def fast_loopback() -> None:
    """Acknowledge at once on LOOPBACK (module docstring): its local route with quickack, made or
    replaced as root (the same route every time, so workers racing here agree), once a process;
    else nothing."""
    if os.geteuid() != 0 or find("ip") is None:
        return
    subprocess.run([find("ip"), "route", "replace", "local", LOOPBACK, "dev", "lo", "table", "local", "scope", "host",
                    "src", CONTROLLER, "quickack", "1"], capture_output=True, timeout=10)


def find(command: str) -> Optional[str]:
    return shutil.which(command, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def require_slurm(release: Optional[str] = None) -> None:
    """Skip the test where the Slurm and munge binaries are missing (`release`: the root of that
    AWS PCS release); fail where CI is set (the CI image has them: make tools)."""
    missing = [c for c in COMMANDS if find(c) is None] if release is None else []
    if os.geteuid() != 0:
        missing.append("root (slurmd runs prologs as root)")
    if release is not None:
        try:
            slurm_roots.root(release)
        except slurm_roots.Missing as exc:
            missing.append(str(exc))
    if missing:
        message = f"a real Slurm needs {', '.join(missing)} (Debian: slurmctld slurmd slurm-client munge)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("", 0))  # every address, as slurmd binds: a port in use on any loopback address is not free
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _listening(port: int) -> bool:
    """Whether a socket listens on TCP `port` (the kernel's tables: nothing connects to it)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                return True
    return False


def parse(line: str) -> dict[str, str]:
    """One `scontrol -o show ...` line as KEY -> value (values with spaces, like Reason, kept whole)."""
    fields: dict[str, str] = {}
    key = None
    for word in line.split(" "):
        name, sep, value = word.partition("=")
        if sep and name and name.replace("/", "").replace(":", "").isalnum():
            key = name
            fields[key] = value
        elif key is not None:
            fields[key] += " " + word
    return {k: v.strip() for k, v in fields.items()}


class SlurmCluster:
    """A localhost Slurm cluster (module docstring). `nodes`: how many; `cpus`: each node's;
    `gres`: each node's Gres (e.g. "gpu:8": stand-in device files, GresTypes=gpu); `extra`: more
    slurm.conf lines (Prolog=..., PrologFlags=...); `partitions`: name -> node names (default: one
    partition `debug` of every node); `hide`: paths slurmd must not see; `binds`: host path -> the
    file slurmd sees there instead (stand-ins for what a GPU node has, e.g. /usr/bin/systemctl);
    `node_binds(NODE)`: more of them, for one node's slurmd only (a node's own /scratch);
    `partition_settings`: partition name -> more settings of its PartitionName= line; `services`:
    what starts after munged and before slurmctld (each called with the cluster; slurmdbd, with
    an `extra` AccountingStorageType= in place of accounting_storage/none); `release`: run that AWS
    PCS release of Slurm from its root (module docstring), where `shared` (directories of this
    machine) are visible at their own paths to the daemons and what they run."""

    def __init__(self, directory: Path, nodes: int = 1, *, cpus: int = 2, gres: str = "",
                 extra: Sequence[str] = (), partitions: Optional[dict[str, Sequence[str]]] = None,
                 hide: Sequence[str] = (), binds: Optional[Mapping[str, str]] = None,
                 node_binds: Optional[Callable[[str], Mapping[str, str]]] = None,
                 partition_settings: Optional[Mapping[str, Mapping[str, str]]] = None, name: str = "fmtest",
                 services: Sequence[Callable[["SlurmCluster"], None]] = (), release: Optional[str] = None,
                 shared: Sequence[str] = ()) -> None:
        require_slurm(release)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.names = [f"node{i + 1}" for i in range(nodes)]
        self.addresses = {n: node_address(i) for i, n in enumerate(self.names)}
        self.cpus, self.gres, self.extra, self.hide, self.cluster = cpus, gres, list(extra), list(hide), name
        self.binds = dict(binds or {})
        self.node_binds = node_binds
        self.partition_settings = {name: dict(v) for name, v in (partition_settings or {}).items()}
        self.partitions = partitions or {"debug": self.names}
        self.services = list(services)
        self.conf = self.dir / "slurm.conf"
        # Unix sockets (munged's, slurmstepd's in the spool directory) take paths of at most 108
        # bytes, which a test's tmp_path can pass: they live in a short directory of their own.
        self.sockets = Path(tempfile.mkdtemp(prefix="fmslurm-"))
        self.socket = self.sockets / "munge.socket"
        self.processes: list[subprocess.Popen] = []
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.env.pop("SLURM_JOB_ID", None)
        self.release = release
        if release is None:
            self.base: Optional[Path] = None
            self.bin = self.node_bin = Path(find("scontrol") or "/usr/bin/scontrol").parent
        else:
            self.base, self.prefix = slurm_roots.root(release), slurm_roots.prefix(release)
            self.key = self.dir / "slurm.key"  # next to slurm.conf, where auth/slurm looks
            runs = {name: self.sockets / "run" / name for name in ("slurmctld", "slurmdbd")}
            for run in runs.values():
                run.mkdir(parents=True)
                run.chmod(0o755)  # every user's client connects to the SACK sockets
            self.root_binds = (str(self.dir), str(self.sockets), *shared,
                               *(f"/run/{name}={run}" for name, run in runs.items()))
            self.lower = self._identity_layer()
            self.node_bin = Path(self.prefix) / "bin"
            self.bin = self.sockets / "bin"  # its scripts, once the clients' view is up (start)
            self.bin.mkdir()

    def _identity_layer(self) -> str:
        """The root with a layer of the cluster's own over it (the lower directories of its overlay,
        slurm_roots.argv): the root's /etc/passwd and /etc/group with this machine's users and
        groups added (PCS's slurm user stays 401), and this machine's /etc/hosts."""
        etc = self.sockets / "layer" / "etc"
        etc.mkdir(parents=True)
        for name in ("passwd", "group"):
            lines = (self.base / "etc" / name).read_text().splitlines()
            known = {line.split(":")[0] for line in lines}
            lines += [line for line in Path("/etc", name).read_text().splitlines() if line.split(":")[0] not in known]
            (etc / name).write_text("\n".join(lines) + "\n")
        shutil.copy("/etc/hosts", etc / "hosts")
        return f"{etc.parent}:{self.base}"

    # --- configuration ------------------------------------------------------------------------

    def write_config(self) -> None:
        # service_port: one more, for a service's daemon (slurmdbd), picked with the others
        ctld_port, self.service_port, *node_ports = free_ports(2 + len(self.names))
        for sub in ("state", "log", "munge"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for node in self.names:
            (self.sockets / "spool" / node).mkdir(parents=True, exist_ok=True)
        gres_type = self.gres.split(":")[0] if self.gres else ""
        lines = [
            f"ClusterName={self.cluster}", f"SlurmctldHost=localhost({CONTROLLER})", f"SlurmctldPort={ctld_port}",
            *(["AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}"] if self.base is None
              else ["AuthType=auth/slurm", "CredType=cred/slurm"]),
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={self.dir}/state", f"SlurmdSpoolDir={self.sockets}/spool/%n",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid", f"SlurmctldLogFile={self.dir}/log/slurmctld.log",
            f"SlurmdPidFile={self.sockets}/spool/slurmd-%n.pid", f"SlurmdLogFile={self.dir}/log/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none",
            *([] if any(e.startswith("AccountingStorageType=") for e in self.extra)
              else ["AccountingStorageType=accounting_storage/none"]), "JobCompType=jobcomp/none",
            "SchedulerType=sched/backfill", "ReturnToService=2", "SlurmdTimeout=30", "MessageTimeout=10",
            "SlurmctldDebug=info", "SlurmdDebug=info", "KillWait=2", "MinJobAge=600",
            *([f"GresTypes={gres_type}"] if gres_type else []), *self.extra,
        ]
        self.node_ports = dict(zip(self.names, node_ports, strict=True))
        for node, port in self.node_ports.items():
            gres = f" Gres={self.gres}" if self.gres else ""
            lines.append(f"NodeName={node} NodeHostname=localhost NodeAddr={self.addresses[node]} Port={port} "
                         f"CPUs={self.cpus} RealMemory=1000 State=UNKNOWN{gres}")
        for i, (partition, members) in enumerate(self.partitions.items()):
            settings = "".join(f" {k}={v}" for k, v in self.partition_settings.get(partition, {}).items())
            lines.append(f"PartitionName={partition} Nodes={','.join(members)} Default={'YES' if i == 0 else 'NO'} "
                         f"MaxTime=INFINITE State=UP{settings}")
        self.conf.write_text("\n".join(lines) + "\n")
        if self.base is not None:  # no cgroup plugin (24.11 and later load one by default), as 22.05 here
            (self.dir / "cgroup.conf").write_text("CgroupPlugin=disabled\n")
        if self.gres:
            self._write_gres()

    def _write_gres(self) -> None:
        """gres.conf: each node's Gres as stand-in device files (empty files under the directory:
        slurmd only stats them; no job here opens a GPU)."""
        kind, _, count = self.gres.partition(":")
        entries = []
        for node in self.names:
            devices = self.dir / "dev" / node
            devices.mkdir(parents=True, exist_ok=True)
            for i in range(int(count or 1)):
                if not (devices / f"{kind}{i}").exists():
                    os.mknod(devices / f"{kind}{i}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            entries.append(f"NodeName={node} Name={kind} File={devices}/{kind}[0-{int(count or 1) - 1}]")
        (self.dir / "gres.conf").write_text("\n".join(entries) + "\n")

    # --- processes ------------------------------------------------------------------------------

    def _spawn(self, argv: list[str], log: str) -> subprocess.Popen:
        out = open(self.dir / "log" / log, "ab")
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=self.env, start_new_session=True)
        out.close()
        self.processes.append(process)
        return process

    def _start_munged(self) -> None:
        key = self.dir / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.dir.joinpath("munge").chmod(0o700)
        self._spawn([find("munged"), "--foreground", "--force", f"--socket={self.socket}", f"--key-file={key}",
                     f"--pid-file={self.dir}/munge/munged.pid", f"--log-file={self.dir}/log/munged.log",
                     f"--seed-file={self.dir}/munge/munged.seed", "--num-threads=2"], "munged.out")
        self._until(lambda: self.socket.exists(), "munged to open its socket")

    def _write_key(self) -> None:
        """The cluster's auth/slurm key: random bytes, root's, mode 600 (else Slurm refuses it)."""
        self.key.write_bytes(os.urandom(1024))
        self.key.chmod(0o600)

    def _start_clients(self) -> None:
        """The clients' view of the root: a process that holds it (`sleep infinity` in the root, with
        the cluster's binds), which every client command joins (slurm_roots.joined: no mounts of
        its own), and `bin`'s scripts that run each client there."""
        self.clients = self._spawn(slurm_roots.argv(self.lower, slurm_roots.HOLD, binds=self.root_binds), "clients.out")
        ready = slurm_roots.joined(self.clients.pid, ["/usr/bin/test", "-x", f"{self.node_bin}/scontrol"])
        self._until(lambda: subprocess.run(ready, capture_output=True, timeout=10).returncode == 0,
                    "the clients' view of the root")
        for client in slurm_roots.CLIENTS:
            (self.bin / client).write_text(slurm_roots.joining_wrapper(self.clients.pid, f"{self.node_bin}/{client}"))
            (self.bin / client).chmod(0o755)

    def daemon(self, name: str, *args: str, binds: Optional[Mapping[str, str]] = None) -> list[str]:
        """What runs daemon `name` (slurmctld, slurmd, slurmdbd) with `args`: this machine's, or the
        release's from PCS's sbin in its root; `binds`: target -> source, seen by it alone."""
        if self.base is None:
            return [find(name) or name, *args]
        extra = tuple(f"{target}={source}" for target, source in (binds or {}).items())
        return slurm_roots.argv(self.lower, [f"{self.prefix}/sbin/{name}", *args],
                                binds=(*self.root_binds, "/sys", *extra))

    def _slurmd_argv(self, node: str) -> list[str]:
        binds = {**self.binds, **(self.node_binds(node) if self.node_binds else {})}
        if self.hide:
            empty = self.dir / "hidden"
            empty.touch()
            # in a root, only what it has: a path it lacks is already unseen
            binds.update(dict.fromkeys([path for path in self.hide if self.base is None
                                        or os.path.lexists(self.base / path.lstrip("/"))], str(empty)))
        if self.base is not None:
            return self.daemon("slurmd", "-D", "-N", node, "-f", str(self.conf), binds=binds)
        argv = [find("slurmd"), "-D", "-N", node, "-f", str(self.conf)]
        if not binds:
            return argv
        script = " && ".join(f"mount --bind {shlex.quote(source)} {shlex.quote(target)}"
                             for target, source in binds.items())
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{script} && exec "$@"', "slurmd",
                *argv]

    def start(self) -> "SlurmCluster":
        """Start the cluster. Clusters of test processes that run side by side (pytest-xdist) start
        one at a time, under START_LOCK: the ports free_ports picks stay free only until the daemons
        bind them, and two clusters on one port would take each other's messages (munge then
        refuses the other cluster's credentials)."""
        began = time.monotonic()
        fast_loopback()
        with start_lock():
            self.write_config()
            try:
                if self.base is None:
                    self._start_munged()
                else:
                    self._write_key()
                    self._start_clients()
                for service in self.services:  # e.g. slurmdbd (tests/support/slurm_accounting.py)
                    service(self)
                self.start_controller()
                for node in self.names:
                    self._spawn(self._slurmd_argv(node), f"slurmd-{node}.out")
                self._until(self._all_idle, "every node idle in sinfo")
            except BaseException:
                self.stop()
                raise
        self.start_seconds = time.monotonic() - began
        return self

    def _all_idle(self) -> bool:
        states = self.node_states()
        return set(states) == set(self.names) and all(s == "idle" for s in states.values())

    def _until(self, condition, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args[0]} exited with {process.returncode} while waiting for "
                                       f"{what}\n{self.logs()}")
            if condition():
                return
            time.sleep(0.2)
        raise TimeoutError(f"waited {timeout:.0f} s for {what}\n{self.logs()}")

    def stop(self) -> None:
        """End every process this cluster started (its own ids, the whole session of each), then
        wait for them; bounded."""
        for process in reversed(self.processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for process in reversed(self.processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=5)
        self.processes.clear()
        self._end_leftovers()
        shutil.rmtree(self.sockets, ignore_errors=True)

    def _end_leftovers(self) -> None:
        """End what the daemons leave behind: slurmstepd starts a session of its own for each job
        step (and the batch script), so a step still running when slurmd ends outlives it, and its
        tasks with it (a test's `while :; do sleep 0.2; done` would run on through the rest of the
        suite). Each of them has this cluster's SLURM_CONF in its environment, as slurmd passed it on."""
        marker = f"SLURM_CONF={self.conf}".encode()
        for _ in range(3):  # a step may start a task while its parent is being killed
            found = []
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:  # gone, or not ours to read
                    continue
                if marker in environ.split(b"\0"):
                    found.append(int(entry.name))
            if not found:
                return
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def start_controller(self) -> None:
        """Start slurmctld (-i: its saved state ignored) and wait until it answers."""
        self.controller = self._spawn(self.daemon("slurmctld", "-D", "-i", "-f", str(self.conf)), "slurmctld.out")
        self._until(lambda: self.run("scontrol", "ping", check=False).returncode == 0, "slurmctld to answer")

    def stop_controller(self) -> None:
        """End slurmctld alone (the nodes' slurmd go on): clients then get no answer."""
        self.controller.terminate()
        self.controller.wait(timeout=10)
        self.processes.remove(self.controller)

    @contextmanager
    def controller_down(self) -> Iterator[None]:
        """slurmctld ended for the block, then started again (without its saved state). The start lock
        is held meanwhile: a cluster that another test process starts beside this one would
        otherwise take slurmctld's port while it is free (free_ports)."""
        with start_lock():
            self.stop_controller()
            try:
                yield
            finally:
                self.start_controller()

    def restart_slurmd(self, node: str, *args: str) -> None:
        """End `node`'s slurmd and start it again, with `args` (-b: a new boot), under the start lock
        until it listens on its port again (as controller_down, for the node's port)."""
        with start_lock():
            old = next(p for p in self.processes if node in p.args and any("slurmd" in str(a) for a in p.args))
            old.terminate()
            old.wait(timeout=20)
            self.processes.remove(old)
            self._spawn(self._slurmd_argv(node) + list(args), f"slurmd-{node}-restarted.out")
            self._until(lambda: _listening(self.node_ports[node]), f"{node}'s slurmd to listen again")

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- clients --------------------------------------------------------------------------------

    def client(self, command: str) -> str:
        """The path on this machine of the cluster's client `command` (sinfo, sbatch...)."""
        return str(self.bin / command) if self.base is not None else (find(command) or command)

    def run(self, command: str, *args: str, check: bool = True, input: Optional[str] = None,
            timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
        result = subprocess.run([self.client(command), *args], env=self.env, capture_output=True, text=True,
                                input=input, timeout=timeout)
        if check and result.returncode != 0:
            raise RuntimeError(f"{command} {' '.join(args)}: {result.stderr}{result.stdout}")
        return result

    def as_user(self, user: str, command: str, *args: str,
                timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
        """Client `command` run as `user` (runuser; in a root, inside it: its namespace needs root)."""
        if self.base is None:
            argv = ["runuser", "-u", user, "--", self.client(command), *args]
        else:
            argv = slurm_roots.joined(self.clients.pid, [f"{self.node_bin}/{command}", *args], user=user)
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_states(self) -> dict[str, str]:
        result = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        if result.returncode != 0:
            return {}
        return dict(line.split() for line in result.stdout.splitlines() if line.strip())

    def node(self, name: str) -> dict[str, str]:
        return parse(self.run("scontrol", "-o", "show", "node", name).stdout.strip())

    def job(self, job_id: str) -> dict[str, str]:
        return parse(self.run("scontrol", "-o", "show", "job", job_id).stdout.strip())

    def sbatch(self, script: str, *args: str) -> str:
        """Submit `script` (its text) with sbatch's `args`, from the cluster's directory; the job id."""
        result = subprocess.run([self.client("sbatch"), "--parsable", f"--chdir={self.dir}", *args], env=self.env,
                                capture_output=True, text=True, input=script, timeout=COMMAND_TIMEOUT)
        if result.returncode != 0:
            raise RuntimeError(f"sbatch: {result.stderr}")
        return result.stdout.strip().split(";")[0]

    def wait_job(self, job_id: str, states: Iterable[str] = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                                             "NODE_FAIL", "OUT_OF_MEMORY"),
                 timeout: float = 30.0, until=None) -> dict[str, str]:
        """The job once its JobState is one of `states` (or `until(job)` holds); bounded by `timeout`."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        job: dict[str, str] = {}
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if job.get("JobState") in wanted or (until is not None and until(job)):
                return job
            time.sleep(0.2)
        raise TimeoutError(f"job {job_id} still {job.get('JobState')} after {timeout:.0f} s: {job}\n{self.logs()}")

    def logs(self, lines: int = 30) -> str:
        out = []
        for path in sorted((self.dir / "log").glob("*")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)
