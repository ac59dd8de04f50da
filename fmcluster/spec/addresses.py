"""What takes an address in the GPU AZ's private subnet, read from the spec: the check that the
subnet holds the cluster (fmcluster.spec.rules.network) and the plan report's address table."""

from __future__ import annotations

from fmcluster.facts import fsx
from fmcluster.facts.efa import addresses_per_node
from fmcluster.facts.network import CONTROL_PLANE_HEADROOM, AddressNeed
from fmcluster.spec.models import ClusterSpec


def address_needs(spec: ClusterSpec) -> list[AddressNeed]:
    """What takes an address in the GPU AZ's private subnet: each node's interfaces that take
    one (efa-only interfaces take none), pods on Kubernetes nodes, login nodes (Slurm) or system nodes (Kubernetes), the
    Lustre file system and control-plane headroom."""

    cp = spec.orchestrator.control_plane
    needs: list[AddressNeed] = []
    for group in spec.node_groups:
        per_node = addresses_per_node(group.instance, cp.interface_mode, bool(group.efa)) + cp.pod_addresses_per_node
        needs.append(AddressNeed(f"node group {group.name}: {group.max_nodes} x {per_node}",
                                 group.max_nodes * per_node))
    login = spec.orchestrator.login
    if login.count:
        per_login = 1 + cp.pod_addresses_per_node
        kind = "system nodes" if cp.scheduler == "kubernetes" else "login nodes"  # what `login` is on each
        needs.append(AddressNeed(f"{kind}: {login.count} x {per_login}", login.count * per_login))
    lustre = spec.storage.lustre
    if lustre:
        needs.append(AddressNeed("FSx for Lustre", fsx.addresses(lustre.storage_capacity_gib, lustre.efa,
                                                                 lustre.throughput_per_tib)))
    needs.append(AddressNeed("control plane and endpoints", CONTROL_PLANE_HEADROOM))
    return needs
