"""The plan's "Node health" section, built from the cluster model: what checks, takes out and
replaces faulty GPU nodes on each control plane, and what new nodes run before their first job
(fmcluster/facts/health.py, docs/health.md)."""

from __future__ import annotations

from typing import Optional

from fmcluster.facts import health as health_facts
from fmcluster.model import cluster as model
from fmcluster.plan.shape.cluster import HealthPlan


def health(m: model.ClusterModel) -> Optional[HealthPlan]:
    """What checks, takes out and replaces faulty GPU nodes on the cluster's control plane, and
    what new nodes run before their first job (fmcluster/facts/health.py, docs/health.md)."""
    if not any(g.instance.is_gpu for g in m.node_groups):
        return None
    h, plane = m.health, m.control_plane.type
    slurm = m.control_plane.scheduler == "slurm"
    limits = (f"at most {h.max_replacing} at once (each counts {h.replace_window_minutes} minutes), never in a "
              f"Capacity Block's last {h.block_guard_minutes} minutes; every decision is logged (the stack "
              "output NodeReplacementLog)")
    if slurm:
        checked_by = (f"a systemd timer on each GPU node, every {h.check_minutes} minutes (fmcluster node-health; "
                      "AWS PCS takes no HealthCheckProgram setting)" if plane == "pcs" else
                      f"a systemd timer on each GPU node, every {h.check_minutes} minutes (fmcluster node-health), "
                      "besides SageMaker HyperPod's own health-monitoring agent")
        out_of_pool = ("drained in Slurm with the fault as the reason (sinfo -R: 'fmcluster-health: FAULT: ...'); "
                       "a file-system fault is resumed once the check passes again; a node drained by anyone "
                       "else is left alone")
        reset = (f"an XID asking for a GPU reset ({', '.join(map(str, health_facts.RESET_XIDS))}), or the "
                 "uncorrected ECC count or row remap it leaves pending, reboots the node through Slurm once its "
                 "jobs end (scontrol reboot ASAP nextstate=RESUME: Slurm resumes it when it is back), and replaces "
                 "it only if the same fault comes back on the same GPU right after; where Slurm has no "
                 "RebootProgram the reboot is not asked (Slurm 24.11 to 25.11 would accept it and do nothing, "
                 "26.05 refuses it): a dynamic node is powered down instead, a static one stays drained for a "
                 "person; fmcluster replaces at once only for XIDs "
                 f"{', '.join(map(str, health_facts.REPLACE_XIDS))} (its policy: NVIDIA's catalog gives a "
                 "reset or reboot as their first action)")
        if not h.replace:
            replaced_by = "no one: a drained node waits for a person (health.replace: false)"
        elif plane == "pcs":
            replaced_by = ("a dynamic node (above the group's minimum count), by Slurm's power saving once its jobs "
                           "have ended: scontrol update state=POWER_DOWN_ASAP, AWS PCS's SuspendProgram ends the "
                           "instance, Slurm clears the drain and the node's next job gets a new instance; a static "
                           "node (the minimum count, every Capacity Block node): no one, it stays drained for a "
                           "person: AWS PCS documents no replacement of a static node's instance except its own "
                           "instance health checks (instanceHealthChecks.healthMonitoring.repairAction "
                           "AUTO|REPLACE|ISOLATE|NONE, Slurm 26.05: the documented route), which are not in "
                           "CloudFormation and which fmcluster does not set yet (changing them replaces every "
                           "instance of the group); fmcluster's replacer logs the request (NodeReplacementLog); "
                           + reset)
        else:
            replaced_by = (f"fmcluster's replacer (in {m.name}-cluster), once the node's jobs have ended, "
                           "through SageMaker HyperPod's BatchReplaceClusterNodes; " + limits
                           + "; HyperPod's automatic node recovery also replaces what its own agent finds; " + reset)
    else:
        agent = ("the EKS node monitoring agent (node conditions AcceleratedHardwareReady, NetworkingReady, "
                 "StorageReady, KernelReady)" if plane == "eks" else
                 "SageMaker HyperPod's health-monitoring agent")
        checked_by = f"{agent}, and fmcluster node-health every {h.check_minutes} minutes for the metrics and alerts"
        out_of_pool = ("EKS node auto repair cordons a node whose condition fails: no new pod is scheduled there"
                       if plane == "eks" else
                       "SageMaker HyperPod marks a faulty node unschedulable and drains it")
        if not h.replace:
            replaced_by = "no one: a faulty node waits for a person (health.replace: false)"
        elif plane == "eks":
            replaced_by = (f"EKS node auto repair, after 10 minutes for GPU faults: at most {h.max_replacing} "
                           "nodes of a node group at once, halted while a fifth of the group is unhealthy, and off"
                           f" in a Capacity Block's last {h.block_guard_minutes} minutes")
        else:
            replaced_by = "SageMaker HyperPod's automatic node recovery (NodeRecovery: Automatic)"
    if not h.deep_check:
        new_nodes, minutes = "the readiness check only (health.deep_check: false)", None
    elif m.control_plane.hyperpod:
        new_nodes, minutes = ("SageMaker HyperPod's deep health checks (InstanceStress, InstanceConnectivity) when a "
                              "GPU group is created or grows; a node that fails is replaced"), None
    elif plane == "pcs":
        new_nodes = (f"a DCGM diagnostic (level {health_facts.DEEP_DCGM_LEVEL}) and a node-local NCCL all-reduce, "
                     "once per instance, before slurmd starts; a node that fails them takes no job")
        minutes = health_facts.DEEP_CHECK_MINUTES
    else:
        new_nodes, minutes = "the readiness check (the node monitoring agent's DCGM checks follow)", None
    return HealthPlan(
        check_minutes=h.check_minutes, checks=[f"{f.slug}: {f.what}" for f in health_facts.FAULTS],
        checked_by=checked_by, out_of_pool=out_of_pool, replace=h.replace, replaced_by=replaced_by,
        max_replacing=h.max_replacing, replace_window_minutes=h.replace_window_minutes,
        block_guard_minutes=h.block_guard_minutes, deep_check=h.deep_check, new_nodes=new_nodes,
        deep_check_minutes=minutes)
