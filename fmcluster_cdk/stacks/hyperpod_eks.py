"""NAME-cluster for `orchestrator.type: hyperpod-eks`: SageMaker HyperPod on Amazon EKS.

Sources and details: docs/research-notes.md, "fmcluster_cdk/stacks/hyperpod_eks.py"."""

from __future__ import annotations

from typing import Any, Optional

import aws_cdk as cdk
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from fmcluster.facts import kubernetes as k8s
from fmcluster.facts.controlplanes import SPOT
from fmcluster.kubernetes import manifests as kubernetes
from fmcluster.model.cluster import ClusterModel
from fmcluster_cdk.constructs.hyperpod.cluster import CONTINUOUS, HyperPodCluster
from fmcluster_cdk.constructs.hyperpod.dependencies import HyperPodDependencies, chart_values
from fmcluster_cdk.stacks.eks import EksClusterStack
from fmcluster_cdk.stacks.hyperpod import HyperPodGroups, compute_group, node_recovery, provisioning_mode
from fmcluster_cdk.stacks.reference import reference_repository_arns
from fmcluster_cdk.stacks.refs import NetworkRefs, ObservabilityRefs, StorageRefs

# The chart's EFA device plugin tolerates only its own taints; GPU nodes carry nvidia.com/gpu.
EFA_PLUGIN_TOLERATIONS = [{"operator": "Exists"}]


class HyperPodEksStack(EksClusterStack):
    def __init__(self, scope: Construct, construct_id: str, *, model: ClusterModel, network: NetworkRefs,
                 storage: StorageRefs, observability: Optional[ObservabilityRefs] = None, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, model=model, network=network, storage=storage,
                         observability=observability, **kwargs)
        spec = model.spec
        system = self.node_groups[k8s.SYSTEM_NODE_GROUP]

        values = chart_values(self.region)
        values["aws-efa-k8s-device-plugin"] = {"tolerations": EFA_PLUGIN_TOLERATIONS}
        # jsii: the Python class aws_eks_v2.Cluster lacks the ICluster protocol's kubectl_provider_options
        # (the generated class does not declare it), so mypy refuses a Cluster where an ICluster goes.
        self.hyperpod_dependencies = HyperPodDependencies(
            self, "HyperPodDependencies", cluster=self.cluster,  # type: ignore[arg-type]
            values=values, **self.handler_placement())
        self.hyperpod_dependencies.resource.node.add_dependency(system)  # the chart's operators run there

        groups = [compute_group(model, g, kubernetes_labels=dict(g.labels),
                                kubernetes_taints=[dict(t) for t in g.taints])
                  for g in model.node_groups]
        subnets = [network.gpu_subnet_id]
        security_groups = [network.node_security_group_id, self.cluster.cluster_security_group_id]
        if any(model.efa_groups.values()):
            security_groups.append(network.efa_security_group_id)
        # Each group's lifecycle folder is its setup's (fmcluster.node.hyperpod.bundle): with
        # observability, the hook that writes the node exporter chart's textfile metric
        # fmcluster_expected_gpus (HyperPod nodes have no launch template user data); with an
        # EFA-enabled file system, which the FSx CSI driver mounts on the node, LNet over EFA first.
        self.instance_groups = HyperPodGroups(
            self, "InstanceGroups", model=model, groups=groups, refs=self.refs, network=network, storage=storage,
            subnet_ids=subnets,
            security_group_ids=security_groups, eks_cluster_arn=self.cluster.cluster_arn,
            description=f"SageMaker HyperPod instance groups of {spec.name} (EKS)",
            image_repository_arns=reference_repository_arns(self, model))
        for group in model.node_groups:  # a training plan's end, handled inside the cluster
            self._add_capacity_end(group, self, f"CapacityEnd-{group.name}")
        spot = any(g.capacity.type == SPOT for g in model.node_groups)
        mode = CONTINUOUS if spot else provisioning_mode(spec)
        # A faulty node leaves the pool through HyperPod itself: its health-monitoring agent and the
        # deep checks label the node sagemaker.amazonaws.com/node-health-status (Schedulable;
        # Unschedulable while deep checks run; UnschedulablePendingReplacement or
        # UnschedulablePendingReboot after a failed check), and with NodeRecovery Automatic
        # (health.replace) HyperPod replaces or reboots it (SageMaker Developer Guide,
        # "Resilience-related Kubernetes labels by SageMaker HyperPod"). The NoSchedule taint
        # sagemaker.amazonaws.com/node-health-status=Unschedulable that keeps new pods off is
        # documented by awslabs/agent-plugins' HyperPod debugging skill, after the agent's page.
        self.hyperpod = HyperPodCluster(
            self, "HyperPod", name=spec.name, instance_groups=self.instance_groups.instance_groups,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=self.cluster.cluster_arn)),
            subnet_ids=subnets, security_group_ids=security_groups, node_provisioning_mode=mode,
            node_recovery=node_recovery(model))
        self.hyperpod.add_dependency(self.hyperpod_dependencies.resource, system,
                                     *(self.addons[a.name] for a in (kubernetes.VPC_CNI, kubernetes.KUBE_PROXY,
                                                                     kubernetes.COREDNS)))

        for output_id, value, description in (
                ("HyperPodClusterArn", self.hyperpod.cluster_arn, "SageMaker HyperPod cluster ARN"),
                ("ExecutionRoleArn", self.instance_groups.role.role_arn, "execution role of the instance groups")):
            cdk.CfnOutput(self, output_id, value=value, description=description)

    def _add_compute(self) -> None:
        """No managed node groups for the spec's groups: they are HyperPod instance groups."""
