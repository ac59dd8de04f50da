"""UltraServer rules: P6e-GB200 nodes come as whole UltraServers (one NVLink domain of 9 or 18
instances), bought as UltraServer Capacity Blocks (HyperPod: training plans), and only on control
planes that can keep a job inside one domain (AWS PCS, Amazon EKS, HyperPod on EKS; not yet
HyperPod Slurm, whose slurm.conf HyperPod manages: the IMEX prolog has no place there).

Sources and details: docs/research-notes.md, "fmcluster/spec/rules/ultraserver.py"."""

from __future__ import annotations

from typing import Iterator

from fmcluster.facts import catalog, controlplanes
from fmcluster.facts.controlplanes import CAPACITY_BLOCK
from fmcluster.facts.efa import efa_layout
from fmcluster.spec.diagnostics import Problem, error, warning
from fmcluster.spec.models import ClusterSpec
from fmcluster.spec.rules.capacity import _groups
from fmcluster.spec.rules.registry import rule

# The oldest version of each control plane that runs UltraServer node groups
ULTRASERVER_MIN_VERSION = {"pcs": controlplanes.PCS_SLURM_SINCE["ultraserver"], "eks": "1.33", "hyperpod-eks": "1.33"}


def _version(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in value.split("."))


@rule
def ultraserver_capacity(spec: ClusterSpec) -> Iterator[Problem]:
    """An UltraServer instance type runs on an UltraServer Capacity Block (or a HyperPod training
    plan of UltraServers), which says its UltraServer type."""
    for path, g in _groups(spec):
        if not g.instance.ultraserver:
            continue
        if g.capacity.type != CAPACITY_BLOCK:
            yield error(path + ("capacity", "type"),
                        f"{g.instance_type} is sold only as UltraServer Capacity Blocks, not {g.capacity.type}",
                        "capacity: {type: capacity-block, reservation_id: cr-..., ultraserver_type: "
                        f"{g.instance.ultraservers[-1]}}}")
        elif g.capacity.ultraserver_type is None:
            yield error(path + ("capacity", "ultraserver_type"),
                        f"{g.instance_type} runs on an UltraServer Capacity Block: say its UltraServer type",
                        "one of " + ", ".join(g.instance.ultraservers)
                        + " (aws ec2 describe-capacity-blocks shows UltraserverType)")


@rule
def ultraserver_type_matches(spec: ClusterSpec) -> Iterator[Problem]:
    for path, g in _groups(spec):
        kind = g.capacity.ultraserver_type
        if kind is None:
            continue
        server = catalog.ULTRASERVERS[kind]
        if server.instance_type != g.instance_type:
            yield error(path + ("capacity", "ultraserver_type"),
                        f"{kind} is made of {server.instance_type}, the node group runs {g.instance_type}",
                        f"set instance_type: {server.instance_type}, or remove ultraserver_type")
        elif g.capacity.type != CAPACITY_BLOCK:
            yield error(path + ("capacity", "ultraserver_type"),
                        f"an UltraServer type is given, but the capacity type is {g.capacity.type}",
                        "set capacity.type: capacity-block")


@rule
def ultraserver_count_fits(spec: ClusterSpec) -> Iterator[Problem]:
    """At most the block's UltraServers' instances."""
    for path, g in _groups(spec):
        kind = g.capacity.ultraserver_type
        if kind is None or catalog.ULTRASERVERS[kind].instance_type != g.instance_type:
            continue
        server, servers = catalog.ULTRASERVERS[kind], g.capacity.ultraserver_count
        if g.max_nodes > servers * server.instances:
            yield error(path + ("count" if g.count is not None else "max_count",),
                        f"{servers} x {kind} hold{'s' if servers == 1 else ''} {servers * server.instances} "
                        f"instances, the group asks for {g.max_nodes}",
                        f"count: {servers * server.instances}, or raise capacity.ultraserver_count")


@rule(warns=True)
def ultraserver_partial(spec: ClusterSpec) -> Iterator[Problem]:
    """Fewer nodes than the block's UltraServers hold: legal (a spare, or an instance held back),
    but the rest of the block is paid for and idle."""
    for path, g in _groups(spec):
        kind = g.capacity.ultraserver_type
        if kind is None or catalog.ULTRASERVERS[kind].instance_type != g.instance_type:
            continue
        whole = g.capacity.ultraserver_count * catalog.ULTRASERVERS[kind].instances
        if g.max_nodes < whole:
            yield warning(path + ("count" if g.count is not None else "max_count",),
                          f"{g.max_nodes} of the {whole} instances of {g.capacity.ultraserver_count} x {kind}: "
                          f"{whole - g.max_nodes} paid for and idle, and jobs see a partial NVLink domain",
                          f"count: {whole}; or accept this warning (a spare kept back for replacements)")


@rule
def ultraserver_placement_group(spec: ClusterSpec) -> Iterator[Problem]:
    """An UltraServer is one placed NVLink domain: a placement group cannot hold it."""
    for path, g in _groups(spec):
        if g.instance.ultraserver and g.placement_group not in ("auto", "none"):
            yield error(path + ("placement_group",),
                        f"an UltraServer is placed already: {g.instance_type} takes no placement group",
                        "use placement_group: auto (none for UltraServer Capacity Blocks)")


@rule
def ultraserver_control_plane(spec: ClusterSpec) -> Iterator[Problem]:
    cp = spec.orchestrator.control_plane
    oldest = ULTRASERVER_MIN_VERSION.get(cp.type)
    version = spec.orchestrator.version or cp.default_version
    for i, g in enumerate(spec.node_groups):
        if not g.instance.ultraserver:
            continue
        if cp.type == "hyperpod-slurm":
            yield error(("node_groups", i, "instance_type"),
                        f"fmcluster does not build UltraServer groups ({g.instance_type}) on hyperpod-slurm yet",
                        "HyperPod sets the block topology itself, but per-job IMEX needs a Slurm prolog in the "
                        "slurm.conf HyperPod manages: use orchestrator type pcs (or hyperpod-eks)")
            continue
        if oldest and _version(version) < _version(oldest):
            yield error(("orchestrator", "version"),
                        f"{cp.type} runs UltraServer node groups ({g.name}: {g.instance_type}) from "
                        f"{cp.version_label} {oldest}, not {version}",
                        f"version: \"{oldest}\" or later")
            return


@rule(warns=True)
def pcs_efa_only_interfaces(spec: ClusterSpec) -> Iterator[Problem]:
    """An AWS PCS node group whose EFA cards are EFA-only (p6e-gb200: cards 1, 5, 9, 13) gets the
    EC2 guide's efa-only interfaces, the only ones those cards take: PCS documents no layout for
    them (its guide shows efa interfaces only; AWS's PCS reference architecture lists P6e-GB200 as
    not yet supported), so a launch is untried on PCS. Details: fmcluster/facts/efa.py."""
    cp = spec.orchestrator.control_plane
    if cp.type != "pcs":
        return
    for i, g in enumerate(spec.node_groups):
        efa = bool(g.efa) and g.instance.efa_supported
        cards = [x.network_card_index for x in efa_layout(g.instance, cp.interface_mode, efa)
                 if x.interface_type == "efa-only"]
        if cards:
            yield warning(("node_groups", i, "instance_type"),
                          f"{g.instance_type}'s EFA cards ({', '.join(map(str, cards))}) are EFA-only: they take "
                          "no efa interface, the only type the AWS PCS guide shows, and PCS documents no "
                          f"{g.instance_type} layout; its nodes get EC2's efa-only interfaces at device index "
                          "0, untried on PCS",
                          "launch one node first and check its EFA devices (fi_info -p efa); accept this "
                          "warning (accepted_warnings), or run it on eks or hyperpod-eks, which take efa-only")
