"""The EFA / NCCL environment of jobs on a node: well-known settings only, each with its reason.
The node scripts write it to NCCL_ENV_FILE (fmcluster.node.program); the Kubernetes acceptance and
serving kits set the same on their containers (fmcluster.kits)."""

from __future__ import annotations

from dataclasses import dataclass

from fmcluster.facts.catalog import InstanceType

NCCL_ENV_FILE = "/etc/profile.d/fmcluster-nccl.sh"


def device_rdma(instance: InstanceType, efa: bool) -> bool:
    """GPUDirect RDMA over EFA: on the GPU instance types whose EFA has it (the catalog's device_rdma)."""
    return efa and instance.is_gpu and instance.device_rdma


@dataclass(frozen=True)
class NcclSetting:
    """One variable of a node's EFA / NCCL environment, with why it is set."""

    name: str
    value: str
    why: str


def nccl_settings(instance: InstanceType, efa: bool) -> tuple[NcclSetting, ...]:
    """The EFA / NCCL environment of jobs on a node of `instance`: only well-known settings, each
    explained. The node bootstrap writes them to NCCL_ENV_FILE (nccl_environment); the
    Kubernetes acceptance and serving kits set them on their containers."""
    settings = []
    if efa:
        settings.append(NcclSetting("FI_PROVIDER", "efa",
                                    "libfabric: use the EFA provider for inter-node traffic (not TCP)."))
    if device_rdma(instance, efa):
        settings.append(NcclSetting("FI_EFA_USE_DEVICE_RDMA", "1",
                                    f"GPUDirect RDMA: EFA reads and writes GPU memory directly on {instance.name}."))
    settings.append(NcclSetting("NCCL_SOCKET_IFNAME", "^lo,docker",
                                "NCCL bootstrap and socket traffic: any interface but loopback and docker bridges."))
    if efa and instance.is_gpu:
        settings.append(NcclSetting("NCCL_BUFFSIZE", "8388608", "NCCL buffer size AWS recommends with EFA: 8 MiB."))
    return tuple(settings)


def nccl_environment(instance: InstanceType, efa: bool) -> str:
    """The content of the EFA / NCCL environment file (nccl_settings, each with its reason)."""
    lines = [
        "# Written by the fmcluster node bootstrap: EFA and NCCL settings for jobs on this",
        f"# {instance.name} node. Jobs that do not start a login shell can source this file.",
    ]
    for setting in nccl_settings(instance, efa):
        lines += [f"# {setting.why}", f"export {setting.name}={setting.value}"]
    return "\n".join(lines)
