"""What every process of a test run shares (pytest-xdist workers included): a lock (a file's
exclusive flock), and directories of this machine held while tests need them. Not a test module."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

# host_directories' lock (.lock) and what it knows (.json): one for every run on this machine
HOST_DIRECTORIES = Path(tempfile.gettempdir()) / "fmcluster-tests-host-directories"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (made when missing, with its folder) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def host_directories(paths: Sequence[str], registry: Path = HOST_DIRECTORIES) -> Iterator[None]:
    """`paths` exist as directories of this machine while the block runs: mount points, say, that
    each test's Slurm node binds a directory of its own over in a mount namespace of its own.

    Every process of every run on the machine shares them. Each is made when missing, and removed
    (if still empty) when the last holder leaves, never before: a worker whose share of a module
    ends must not take a mount point from under another worker's cluster while it starts. The
    holders (process ids) and the directories made are kept in `registry`.json under
    `registry`.lock; a holder that died without leaving is forgotten."""
    lock, known = registry.with_suffix(".lock"), registry.with_suffix(".json")
    with locked(lock):
        state = _held(known)
        for path in paths:
            if not os.path.isdir(path):
                os.mkdir(path)
                state["made"] = sorted(set(state["made"]) | {path})
        state["holders"].append(os.getpid())
        known.write_text(json.dumps(state))
    try:
        yield
    finally:
        with locked(lock):
            state = _held(known)
            if os.getpid() in state["holders"]:
                state["holders"].remove(os.getpid())
            if not state["holders"]:
                for path in state["made"]:
                    try:
                        os.rmdir(path)
                    except OSError:  # gone already, or something was left in it: kept
                        pass
                state["made"] = []
            known.write_text(json.dumps(state))


def _held(known: Path) -> dict[str, list]:
    """The registry's holders still alive, and the directories made."""
    state = json.loads(known.read_text()) if known.exists() else {}
    return {"holders": [pid for pid in state.get("holders", []) if _alive(pid)], "made": state.get("made", [])}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
