"""What an Amazon EKS node runs at boot, rendered from the node bootstrap fragments: the AL2023
`nodeadm` NodeConfig, the node script (textfile metric, LNet over EFA, readiness gate), and the
MIME multipart user data that carries both (managed node groups); the HyperPod EKS lifecycle
hook writes the expected-GPUs metric with `expected_gpus_script`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional

import yaml

from fmcluster.facts.kubernetes import NOT_READY_TAINT
from fmcluster.facts.node import TEXTFILE_DIR
from fmcluster.node.program import NodeProgram, install_health
from fmcluster.node.refs import ClusterDetails, NodeRefs
from fmcluster.node.shell import header, mime_multipart

if TYPE_CHECKING:
    from fmcluster.model.cluster import ClusterModel, NodeGroup

NODECONFIG_MEDIA_TYPE = "application/node.eks.aws"
NODECONFIG_FILE = "fmcluster-nodeconfig.yaml"


def node_config(*, raid0: bool, cluster: Optional[ClusterDetails] = None) -> Optional[str]:
    """The NodeConfig document of a node group, or None when it needs none.

    `raid0`: stripe the instance-store NVMe disks into one RAID 0 array that kubelet and
    containerd use (nodeadm `instance.localStorage.strategy: RAID0`). `cluster`: the cluster's
    connection details (custom AMIs only; with the EKS AMI types, EKS adds them itself).
    """
    spec: dict[str, Any] = {}
    if cluster is not None:
        spec["cluster"] = {"name": cluster.name, "apiServerEndpoint": cluster.endpoint,
                           "certificateAuthority": cluster.certificate_authority, "cidr": cluster.service_cidr}
    if raid0:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if not spec:
        return None
    document = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    # block style in this key order, one line per value however long (a CA certificate is)
    return yaml.safe_dump(document, explicit_start=True, sort_keys=False, width=float("inf"))


EXPECTED_GPUS_SCRIPT = "fmcluster-expected-gpus.sh"
NODE_SCRIPT = "fmcluster-node.sh"
EXPECTED_GPUS_COMMENT = """\
# fmcluster: the GPUs of this node's instance type (fmcluster instance catalog), for the alert
# GpuMissing; the node exporter's textfile collector reads this directory.
"""
NODE_SCRIPT_COMMENT = """\
# fmcluster Amazon EKS node script (AL2023), rendered by fmcluster.node.eks for one node group.
# It runs from cloud-init before nodeadm starts kubelet; its output is in
# /var/log/cloud-init-output.log.
"""


def expected_gpus_script(group: NodeGroup) -> str:
    """A shell script that writes the textfile metric `fmcluster_expected_gpus` of a node of
    `group` (bootstrap/textfile.sh; the HyperPod EKS hook)."""
    program = NodeProgram(group.instance)
    program.add("textfile.sh", "write_expected_gpus", EXPECTED_GPUS=group.instance.gpu_count or 0,
                TEXTFILE_DIR=TEXTFILE_DIR)
    return program.render(header(EXPECTED_GPUS_COMMENT))


def taint_flag(taints: Iterable[Mapping[str, str]]) -> str:
    """Taints as kubelet's --register-with-taints value (KEY=VALUE:EFFECT, comma-separated)."""
    return ",".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints)


def node_script(model: ClusterModel, group: NodeGroup, refs: NodeRefs, *, compact: bool = True) -> Optional[str]:
    """The shell part of a managed node group's user data (bootstrap fragments), from the model's
    setup of the group (`model.node(group)`), or None when the node needs none: with metrics
    (`refs.metrics`), the textfile metric fmcluster_expected_gpus and, on GPU nodes, fmcluster's
    node health check, for its metrics and alerts (the EKS node monitoring agent and node repair
    take faulty nodes out); LNet over EFA for an EFA-enabled file system (the FSx CSI driver's
    mounts); on GPU nodes (and LNet ones) the readiness check, whose failure registers the node
    with the NOT_READY_TAINT besides the group's taints (bootstrap/gate-kubelet.sh)."""
    setup = model.node(group)
    instance = group.instance
    lnet = setup.lnet_efa_interfaces
    program = NodeProgram(instance)
    if refs.metrics:
        program.add("textfile.sh", "write_expected_gpus", EXPECTED_GPUS=instance.gpu_count or 0,
                    TEXTFILE_DIR=TEXTFILE_DIR)
    if lnet:
        program.lnet(lnet, install_client=True)
    if instance.is_gpu or lnet:
        program.readiness(mounts=setup.mounts, lnet_efa=lnet > 0)
        program.add("gate-kubelet.sh", "gate_kubelet", REGISTER_TAINTS=taint_flag(group.taints),
                    NOT_READY_TAINT=NOT_READY_TAINT)
    if refs.metrics and setup.health is not None:
        install_health(program, model, setup, refs)
    if not program.steps:
        return None
    return program.render(header(NODE_SCRIPT_COMMENT), compact=compact)


def node_user_data(model: ClusterModel, group: NodeGroup, refs: NodeRefs) -> Optional[str]:
    """The node group's user data: MIME multipart with the NodeConfig part (EKS merges it with
    its own for managed node groups: the instance store striped for kubelet, and on a custom AMI
    (the group's `ami_id`) the cluster `refs.eks_cluster` to join) and the node script
    (`node_script`); None when there is neither."""
    parts: list[tuple[str, str, str]] = []  # (media type, file name, content)
    document = node_config(raid0=group.instance.nvme_disks > 0, cluster=refs.eks_cluster if group.ami_id else None)
    if document is not None:
        parts.append((NODECONFIG_MEDIA_TYPE, NODECONFIG_FILE, document))
    script = node_script(model, group, refs)
    if script is not None:
        parts.append(("text/x-shellscript", NODE_SCRIPT, script))
    if not parts:
        return None
    return mime_multipart(parts)
