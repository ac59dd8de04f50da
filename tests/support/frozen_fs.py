"""A file system that stops answering the way a dead Lustre or NFS server does: a real FUSE mount
whose daemon holds every stat of its root (getattr, statfs) while the test says it is frozen. Not
a test module.

    with FrozenFs(path) as fs:      # mounted at `path`, answering
        fs.freeze()                 # from now on a stat of `path` blocks in the kernel
        fs.wait_blocked()           # a caller is stuck (the daemon holds its request)
        fs.thaw()                   # every held request is answered, later ones at once
        fs.kill()                   # the daemon dies: every call on the mount fails (ENOTCONN)

A process whose request the daemon holds sleeps uninterruptibly in the kernel (D state, in
request_wait_answer): once the daemon has read the request, a fatal signal only marks it, and the
process waits on until the answer comes. So `timeout` cannot end it, as it cannot end a stat on a
hung Lustre server; when the file system thaws, the process completes its call and dies of the
signal it was sent. `freeze(seconds)` holds each request that many seconds and then answers it (a
server that answers late).

The daemon is fusepy (Debian's python3-fusepy, `make tools`) under Debian's /usr/bin/python3, as
root: libfuse 2 mounts with mount(2) itself, no fusermount. `available()` says why none can run
here (no /dev/fuse, not root, no fusepy); `require()` skips the test locally then and fails it in
CI. The mount is `allow_other` with attr_timeout=0 (no getattr answered from the kernel's cache);
the daemon's control files (frozen, blocked) are in a directory of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest

PYTHON = "/usr/bin/python3"  # Debian's, where python3-fusepy is installed
START_SECONDS = 10.0

DAEMON = r'''
import errno, os, stat, sys, time
import fusepy

control = sys.argv[2]
frozen, blocked = os.path.join(control, "frozen"), os.path.join(control, "blocked")


class Frozen(fusepy.Operations):
    """An empty directory, held while CONTROL/frozen exists: for ever when it is empty, else
    for the seconds it holds."""

    def hold(self):
        try:
            text = open(frozen).read().strip()
        except FileNotFoundError:
            return
        with open(blocked, "a") as f:
            f.write("1\n")
        if text:
            time.sleep(float(text))
            return
        while os.path.exists(frozen):
            time.sleep(0.02)

    def getattr(self, path, fh=None):
        self.hold()
        if path != "/":
            raise fusepy.FuseOSError(errno.ENOENT)
        return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)

    def statfs(self, path):
        self.hold()
        return dict(f_bsize=4096, f_frsize=4096, f_blocks=1 << 20, f_bfree=1 << 20, f_bavail=1 << 20,
                    f_files=1 << 16, f_ffree=1 << 16, f_namemax=255)

    def readdir(self, path, fh):
        return [".", ".."]


fusepy.FUSE(Frozen(), sys.argv[1], foreground=True, allow_other=True, fsname="frozen", attr_timeout=0,
            entry_timeout=0, negative_timeout=0)
'''


def available() -> Optional[str]:
    """Why no FUSE file system can be mounted here, or None when one can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine (the kernel's FUSE device)"
    if os.geteuid() != 0:
        return "not root (the daemon mounts with mount(2))"
    if not os.path.exists(PYTHON):
        return f"no {PYTHON}"
    probe = subprocess.run([PYTHON, "-c", "import fusepy"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "python3-fusepy is not installed (make tools, as root)"
    return None


def require() -> None:
    reason = available()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"a FUSE file system cannot run, and CI is set: {reason}")
    pytest.skip(f"a FUSE file system cannot run: {reason}")


def is_mounted(path: Path) -> bool:
    """Whether `path` is a mount point, from the kernel's mount table (touches nothing on it)."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(path) for line in f)


class FrozenFs:
    def __init__(self, mountpoint: Path) -> None:
        self.mountpoint = Path(mountpoint)
        self.control = self.mountpoint.parent / f".{self.mountpoint.name}.control"
        self.process: Optional[subprocess.Popen] = None

    def __enter__(self) -> "FrozenFs":
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.control.mkdir(parents=True, exist_ok=True)
        self.log = open(self.control / "daemon.log", "wb")
        self.process = subprocess.Popen([PYTHON, "-c", DAEMON, str(self.mountpoint), str(self.control)],
                                        stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        for _ in range(int(START_SECONDS / 0.05)):
            if is_mounted(self.mountpoint):
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"the FUSE daemon did not mount {self.mountpoint}: "
                           f"{(self.control / 'daemon.log').read_text(errors='replace')}")

    @property
    def pid(self) -> Optional[int]:
        """The daemon's process id."""
        return self.process.pid if self.process is not None else None

    def freeze(self, seconds: Optional[float] = None) -> None:
        (self.control / "frozen").write_text("" if seconds is None else f"{seconds}\n")

    def thaw(self) -> None:
        (self.control / "frozen").unlink(missing_ok=True)

    def kill(self) -> None:
        """The daemon dies (a FUSE server that crashed): the file system stays mounted, and every
        call on it fails with ENOTCONN ("Transport endpoint is not connected") until it is unmounted."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def blocked(self) -> int:
        """How many requests the daemon has held so far."""
        path = self.control / "blocked"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def wait_blocked(self, count: int = 1, seconds: float = 10.0) -> None:
        for _ in range(int(seconds / 0.02)):
            if self.blocked() >= count:
                return
            time.sleep(0.02)
        raise TimeoutError(f"no request reached the frozen file system at {self.mountpoint}")

    def __exit__(self, *exc) -> None:
        self.thaw()
        if self.process is not None:
            # unmounting ends the daemon's loop; lazily, in case a caller still holds the mount
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
            self.process = None
        self.log.close()
        shutil.rmtree(self.control, ignore_errors=True)

