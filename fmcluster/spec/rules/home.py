"""Shared home rules: the OpenZFS file system's throughput for its deployment type, and one file
system at /home (storage.home, or storage.lustre at mount_path /home)."""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import openzfs
from fmcluster.facts.node import HOME_PATH
from fmcluster.spec.diagnostics import Problem, error
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.registry import rule

HOME = ("storage", "home")


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@rule
def home_throughput_offered(spec: ClusterSpec) -> Iterator[Problem]:
    """The home file system's throughput capacity is one its deployment type offers (160 to 10240
    MB/s on the 2 types, 64 to 4096 on the 1 types)."""
    home = spec.storage.home
    if home is None:
        return
    allowed = openzfs.THROUGHPUT_MBPS[home.deployment_type]
    if home.throughput_mbps not in allowed:
        yield error(HOME + ("throughput_mbps",),
                    f"{home.throughput_mbps} MB/s is not a throughput capacity of {home.deployment_type}",
                    "one of " + ", ".join(map(str, allowed)))


@rule
def home_one_file_system(spec: ClusterSpec) -> Iterator[Problem]:
    """storage.home mounts at /home: the Lustre file system may not be mounted there too, nor
    inside it (a mount inside an NFS mount waits on it, and hides what users keep there)."""
    lustre = spec.storage.lustre
    if spec.storage.home is None or lustre is None or not _under(lustre.mount_path, HOME_PATH):
        return
    if lustre.mount_path == HOME_PATH:
        yield error(("storage", "lustre", "mount_path"),
                    "storage.home is mounted at /home already: two file systems cannot both be the home",
                    "keep the Lustre file system at a directory of its own, such as /fsx, or remove storage.home "
                    "to keep home directories on Lustre")
    else:
        yield error(("storage", "lustre", "mount_path"),
                    f"{lustre.mount_path} is inside /home, where storage.home is mounted",
                    "mount it at a directory of its own, such as /fsx")
