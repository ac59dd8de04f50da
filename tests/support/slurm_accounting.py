"""Slurm accounting for the localhost Slurm cluster of tests/support/slurm_cluster.py: a MariaDB of
its own (Debian's mariadb-server: `mariadb-install-db` into a temporary directory, `mariadbd`
listening on the clusters' CONTROLLER address at a free port, its socket in the same directory)
and Debian's `slurmdbd` against it, started between munged and slurmctld, so that slurmctld runs with
AccountingStorageType=accounting_storage/slurmdbd and sacctmgr talks to a real slurmdbd.

    with AccountingDatabase(directory) as database:
        with SlurmCluster(directory / "slurm", **accounting(database, enforce=True)) as cluster:
            cluster.run("sacctmgr", "-Pn", "show", "qos")

slurmdbd finds slurmdbd.conf next to the cluster's slurm.conf (SLURM_CONF's directory); it runs
as root (the cluster's SlurmUser), so the file is root's, mode 600, as slurmdbd requires. On a
cluster of an AWS PCS release (SlurmCluster's `release`), slurmdbd is that release's, run from its
root like the cluster's other daemons, and authenticates with auth/slurm and the cluster's key
(next to slurm.conf, as slurmdbd.conf is); MariaDB stays this machine's, reached over loopback.
The roots' MariaDB client library (Connector/C 3.4) insists on TLS and verifies the server, so
MariaDB has a certificate of its own that is its own CA (slurmdbd's StorageParameters=SSL_CA=);
and the database exists before slurmdbd starts: Slurm 24.11's slurmdbd with that library, when it
creates the database and connects again on the same handle, fails every query ("Number of
columns in result ... exceeds maximum allowed number of columns"). The
database and slurmdbd end with the cluster (their processes are the cluster's), MariaDB with the
AccountingDatabase. Every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping, Optional

import pytest

from fmcluster.node.accounting import SLURM_SETTINGS
from tests.support.slurm_cluster import CONTROLLER, SlurmCluster, fast_loopback, find, free_ports, start_lock

COMMANDS = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr", "openssl")
START_TIMEOUT = 30.0
DATABASE = "slurm_acct_db"
USER, PASSWORD = "slurm", "fmcluster-test"  # a throwaway database of the test's own, on loopback only


def require_accounting() -> None:
    """MariaDB and slurmdbd here (a root's slurmdbd is its recipe's: require_slurm checks the root)."""
    missing = [c for c in COMMANDS if find(c) is None]
    if missing:
        message = f"Slurm accounting needs {', '.join(missing)} (Debian: slurmdbd mariadb-server)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


class AccountingDatabase:
    """A MariaDB server in `directory`, on CONTROLLER:`port`, with a database user for slurmdbd."""

    def __init__(self, directory: Path) -> None:
        require_accounting()
        self.dir = Path(directory)
        self.data = self.dir / "data"
        # the socket path must stay under 108 bytes: a short directory of its own
        self.sockets = Path(tempfile.mkdtemp(prefix="fmmaria-"))
        self.socket = self.sockets / "mysqld.sock"
        self.port = 0  # picked by start(), under the clusters' start lock
        self.certificate = self.dir / "server.pem"  # its TLS certificate, its own CA (start)
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> "AccountingDatabase":
        fast_loopback()
        self.dir.mkdir(parents=True, exist_ok=True)
        log = open(self.dir / "mariadb.log", "ab")
        subprocess.run([find("mariadb-install-db"), "--no-defaults", f"--datadir={self.data}", "--user=root",
                        "--auth-root-authentication-method=socket", "--skip-test-db"],
                       stdout=log, stderr=subprocess.STDOUT, check=True, timeout=120)
        key = self.dir / "server.key"
        subprocess.run([find("openssl"), "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "7", "-subj", "/CN=fmcluster-test-mariadb",
                        "-addext", f"subjectAltName=IP:{CONTROLLER},DNS:localhost", "-keyout", str(key),
                        "-out", str(self.certificate)], stdout=log, stderr=subprocess.STDOUT, check=True, timeout=60)
        with start_lock():  # its port stays free until it listens
            self.port = free_ports(1)[0]
            self.process = subprocess.Popen(
                [find("mariadbd"), "--no-defaults", f"--datadir={self.data}", "--user=root", f"--socket={self.socket}",
                 f"--port={self.port}", f"--bind-address={CONTROLLER}", "--skip-name-resolve",
                 f"--pid-file={self.dir}/mariadb.pid", "--innodb-buffer-pool-size=32M", "--skip-log-bin",
                 f"--ssl-cert={self.certificate}", f"--ssl-key={key}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
            deadline = time.monotonic() + START_TIMEOUT
            while self.sql("SELECT 1", check=False).returncode != 0:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"mariadbd did not start:\n{(self.dir / 'mariadb.log').read_text()[-3000:]}")
                time.sleep(0.2)
        # from any loopback address: CONTROLLER's with fast_loopback's route, 127.0.0.1's without
        self.sql(f"CREATE USER '{USER}'@'127.%' IDENTIFIED BY '{PASSWORD}'; "
                 f"GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.%'; CREATE DATABASE {DATABASE};")
        return self

    def sql(self, statement: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([find("mariadb"), "--no-defaults", f"--socket={self.socket}", "-u", "root", "-N",
                               "-e", statement], capture_output=True, text=True, check=check, timeout=20)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        shutil.rmtree(self.sockets, ignore_errors=True)

    def __enter__(self) -> "AccountingDatabase":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _answers(cluster: SlurmCluster) -> bool:
    return cluster.run("sacctmgr", "-Pn", "show", "cluster", check=False, timeout=10).returncode == 0


def slurmdbd_service(database: AccountingDatabase):
    """What starts slurmdbd for a cluster (SlurmCluster's `services`): slurmdbd.conf next to its
    slurm.conf, on the cluster's service port, then `slurmdbd -D`, waited for until it listens."""

    def start(cluster: SlurmCluster) -> None:
        port = cluster.service_port  # picked with the cluster's other ports, under its start lock
        # the clients' and slurmctld's connection to slurmdbd takes its munge socket from
        # AccountingStoragePass (slurm.conf), not AuthInfo; auth/slurm needs neither
        munge = cluster.base is None
        with open(cluster.conf, "a") as conf_file:
            conf_file.write((f"AccountingStoragePass={cluster.socket}\n" if munge else "")
                            + f"AccountingStoragePort={port}\n")
        conf = cluster.conf.parent / "slurmdbd.conf"
        auth = ["AuthType=auth/munge", f"AuthInfo=socket={cluster.socket}"] if munge else ["AuthType=auth/slurm"]
        # a root's MariaDB client library asks for TLS and verifies the server (module docstring)
        tls = [] if munge else [f"StorageParameters=SSL_CA={database.certificate}"]
        conf.write_text("\n".join([
            *auth, "DbdHost=localhost", f"DbdAddr={CONTROLLER}", f"DbdPort={port}",
            "SlurmUser=root", f"PidFile={cluster.dir}/slurmdbd.pid", f"LogFile={cluster.dir}/log/slurmdbd.log",
            "StorageType=accounting_storage/mysql", f"StorageHost={CONTROLLER}", f"StoragePort={database.port}",
            *tls, f"StorageUser={USER}", f"StoragePass={PASSWORD}", f"StorageLoc={DATABASE}", "DebugLevel=info",
        ]) + "\n")
        conf.chmod(0o600)
        ca = str(database.certificate)
        cluster._spawn(cluster.daemon("slurmdbd", "-D", binds={ca: ca}), "slurmdbd.out")
        cluster._until(lambda: _answers(cluster),
                       "slurmdbd to answer sacctmgr")

    return start


def accounting(database: AccountingDatabase, *, enforce: bool = True,
               settings: Mapping[str, str] = SLURM_SETTINGS) -> dict:
    """SlurmCluster arguments for a cluster with accounting in `database`: slurmdbd started before
    slurmctld, and the slurm.conf settings of a cluster with teams (fmcluster.node.accounting's,
    or `settings`: those fmcluster sets on AWS PCS)."""
    extra = ["AccountingStorageType=accounting_storage/slurmdbd", f"AccountingStorageHost={CONTROLLER}",
             *(f"{k}={v}" for k, v in settings.items() if enforce or k != "AccountingStorageEnforce")]
    return {"services": [slurmdbd_service(database)], "extra": extra}
