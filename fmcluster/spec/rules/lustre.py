"""FSx for Lustre rules: capacity and throughput grids, metadata IOPS, EFA, data repository links."""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import controlplanes, fsx
from fmcluster.facts import node as node_facts
from fmcluster.spec.diagnostics import Problem, error
from fmcluster.spec.models import ClusterSpec, LustreSpec
from fmcluster.spec.rules.registry import rule

LUSTRE = ("storage", "lustre")


def _lustre(spec: ClusterSpec) -> LustreSpec | None:
    return spec.storage.lustre


@rule
def lustre_capacity_grid(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    efa = bool(fs and fs.efa and fs.deployment_type == "PERSISTENT_2")
    if fs and not fsx.capacity_ok(fs.storage_capacity_gib, efa, fs.throughput_per_tib):
        step = fsx.capacity_increment(efa, fs.throughput_per_tib)
        lower = max(step, fs.storage_capacity_gib // step * step)
        what = f"an EFA file system at {fs.throughput_per_tib} MB/s per TiB" if efa else fs.deployment_type
        grid = f"a multiple of {step}" if efa else f"1200 or a multiple of {step}"
        yield error(LUSTRE + ("storage_capacity_gib",),
                    f"{fs.storage_capacity_gib} GiB is not a valid capacity for {what}",
                    f"use {grid}, such as {lower} or {lower + step}")


@rule
def lustre_throughput_grid(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    if not fs:
        return
    allowed = fsx.THROUGHPUT_PER_TIB.get(fs.deployment_type)
    path = LUSTRE + ("throughput_per_tib",)
    if allowed is None and fs.throughput_per_tib is not None:
        yield error(path, f"{fs.deployment_type} has a fixed throughput (200 MB/s per TiB)",
                    "remove throughput_per_tib, or use PERSISTENT_2")
    elif allowed and fs.throughput_per_tib not in allowed:
        yield error(path, f"{fs.throughput_per_tib} MB/s per TiB is not offered for {fs.deployment_type}",
                    "one of " + ", ".join(map(str, allowed)))


@rule
def lustre_metadata_iops(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    if not fs or fs.metadata_iops == "auto":
        return
    path = LUSTRE + ("metadata_iops",)
    if fs.deployment_type != "PERSISTENT_2":
        yield error(path, f"metadata IOPS are provisioned only on PERSISTENT_2, not {fs.deployment_type}",
                    "remove metadata_iops, or use PERSISTENT_2")
    elif not (isinstance(fs.metadata_iops, int) and fsx.metadata_iops_ok(fs.metadata_iops)):  # not auto: an int
        yield error(path, f"{fs.metadata_iops} is not a valid metadata IOPS setting",
                    "auto, or 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000")


@rule
def lustre_efa_deployment(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    if fs and fs.efa and fs.deployment_type != "PERSISTENT_2":
        yield error(LUSTRE + ("efa",), f"EFA-enabled file systems must be PERSISTENT_2, not {fs.deployment_type}",
                    "set deployment_type: PERSISTENT_2")


@rule
def lustre_efa_clients(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    if fs and fs.efa and not any(g.efa for g in spec.node_groups):
        yield error(LUSTRE + ("efa",), "the file system uses EFA, but no node group has EFA to reach it that way",
                    "use efa: false, or add an EFA node group")


@rule
def lustre_links_limit(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    if fs and len(fs.links) > fsx.MAX_LINKS:
        yield error(LUSTRE + ("links",),
                    f"{len(fs.links)} links; a file system has at most {fsx.MAX_LINKS} data repository associations",
                    "link fewer paths, or link prefixes of one bucket under one path")


@rule
def lustre_links_buckets_declared(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    declared = [b.name for b in spec.storage.buckets]
    for i, link in enumerate(fs.links if fs else []):
        if link.bucket not in declared:
            hint = ("declared buckets: " + ", ".join(declared)) if declared else "declare it under storage.buckets"
            yield error(LUSTRE + ("links", i, "bucket"),
                        f"bucket '{link.bucket}' is not declared in storage.buckets", hint)


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


@rule
def lustre_links_distinct_paths(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    links = fs.links if fs else []
    for i, link in enumerate(links):
        if link.path == "/":
            if len(links) > 1:
                yield error(LUSTRE + ("links", i, "path"),
                            f"a link of the whole file system (/) must be its only link; there are {len(links)}",
                            "link each bucket or prefix under a directory of its own, such as /datasets")
            continue
        for j in range(i):
            if links[j].path != "/" and _overlaps(link.path, links[j].path):
                yield error(LUSTRE + ("links", i, "path"),
                            f"path {link.path} overlaps {links[j].path} of links[{j}]",
                            "each link needs its own file-system directory, not nested in another")
                break


@rule
def lustre_links_distinct_repositories(spec: ClusterSpec) -> Iterator[Problem]:
    """Each association needs its own S3 bucket or prefix (prefixes compared as FSx writes them,
    without leading or trailing '/')."""
    fs = _lustre(spec)
    seen: dict[tuple[str, str], int] = {}
    for i, link in enumerate(fs.links if fs else []):
        key = (link.bucket, link.prefix.strip("/"))
        if key in seen:
            where = f"prefix '{key[1]}' of bucket {link.bucket}" if key[1] else f"the whole bucket {link.bucket}"
            yield error(LUSTRE + ("links", i, "prefix" if link.prefix else "bucket"),
                        f"{where} is linked already, by links[{seen[key]}]",
                        "link it once; each association needs its own bucket or prefix")
        seen.setdefault(key, i)


@rule
def lustre_link_events_distinct(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    for i, link in enumerate(fs.links if fs else []):
        for field, events in (("import", link.import_), ("export", link.export)):
            for j, event in enumerate(events):
                if event in events[:j]:
                    yield error(LUSTRE + ("links", i, field, j), f"event {event} is listed twice",
                                "list each of NEW, CHANGED and DELETED at most once")


# Where the file system must not be mounted: system directories (a mount there hides what the OS,
# the AMI or the login user keep there), and the mount points of fmcluster and the AMI.
SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
                "/run", "/sbin", "/snap", "/sys", "/usr", "/var")  # nor anything under them
SYSTEM_DIRECTORIES = ("/", "/media", "/mnt", "/opt", "/srv", "/tmp")  # these exactly
# /home is not among them: the file system may be the cluster's shared home, mounted over the
# image's /home (the node scripts copy the image's home directories into it first; rules.home
# refuses it there together with storage.home).


def _mount_points(spec: ClusterSpec) -> list[tuple[str, str]]:
    points = [(node_facts.SCRATCH_PATH, "fmcluster's instance-store NVMe volume"),
              (node_facts.DLAMI_NVME_PATH, "the Deep Learning AMI's NVMe mount")]
    if spec.orchestrator.control_plane.hyperpod:
        points.append((controlplanes.HYPERPOD_VOLUME_PATH, "SageMaker HyperPod's volume"))
    return points


@rule
def lustre_mount_path_free(spec: ClusterSpec) -> Iterator[Problem]:
    fs = _lustre(spec)
    if not fs:
        return
    path, where = fs.mount_path, LUSTRE + ("mount_path",)
    hint = "mount it at a directory of its own, such as /fsx"
    tree = next((t for t in SYSTEM_TREES if path == t or path.startswith(t + "/")), None)
    if tree or path in SYSTEM_DIRECTORIES:
        yield error(where, f"{path} is a system directory" + (f" (under {tree})" if tree and tree != path else "")
                    + ": a file system mounted there hides what the system keeps in it",
                    hint)
        return
    for point, what in _mount_points(spec):
        if _overlaps(path, point):
            yield error(where, f"{path} {'is' if path == point else 'overlaps'} {point}, where {what} is mounted",
                        hint)
            return
