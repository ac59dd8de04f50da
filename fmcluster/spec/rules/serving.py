"""Serving rules: the `serving` section names a GPU node group, its weights are on the cluster's
FSx for Lustre file system, a replica of the model fits in the group, the replicas asked for fit
too, and the weights' data type runs on the group's GPUs. The placement is fmcluster.facts.inference's
(the model resolves the same one)."""

from __future__ import annotations

from typing import Iterator, Optional

from fmcluster.facts import inference, software
from fmcluster.spec.diagnostics import Problem, error, warning
from fmcluster.spec.models import ClusterSpec, NodeGroupSpec, ServingSpec
from fmcluster.spec.rules.registry import rule

SERVING = ("serving",)
MODEL = SERVING + ("model",)


def _group(spec: ClusterSpec) -> tuple[Optional[ServingSpec], Optional[NodeGroupSpec]]:
    """The serving section and its node group where both exist and the group has GPUs."""
    serving = spec.serving
    if serving is None:
        return None, None
    group = next((g for g in spec.node_groups if g.name == serving.node_group), None)
    return serving, group if group is not None and group.instance.is_gpu else None


def _placement(spec: ClusterSpec) -> Optional[inference.ServingPlacement]:
    serving, group = _group(spec)
    if serving is None or group is None or not inference.dtype_supported(group.instance, serving.model.dtype):
        return None
    return inference.place(group.instance, group.max_nodes, serving.model.parameters_billions,
                           serving.model.dtype, serving.gpu_memory_utilization)


@rule
def serving_node_group(spec: ClusterSpec) -> Iterator[Problem]:
    """The group exists and has GPUs."""
    serving = spec.serving
    if serving is None:
        return
    names = [g.name for g in spec.node_groups]
    gpu = [g.name for g in spec.node_groups if g.instance.is_gpu]
    if serving.node_group not in names:
        yield error(SERVING + ("node_group",), f"there is no node group '{serving.node_group}'",
                    "a GPU node group of node_groups: " + (", ".join(gpu) or "none has GPUs"))
    elif serving.node_group not in gpu:
        group = next(g for g in spec.node_groups if g.name == serving.node_group)
        yield error(SERVING + ("node_group",), f"node group '{group.name}' ({group.instance_type}) has no GPUs",
                    "serve on a GPU node group: " + (", ".join(gpu) or "none has GPUs"))


@rule
def serving_file_system(spec: ClusterSpec) -> Iterator[Problem]:
    """The weights are read from the FSx for Lustre file system: the cluster needs one."""
    if spec.serving is not None and spec.storage.lustre is None:
        yield error(MODEL + ("path",), "the model's weights are read from FSx for Lustre, and the cluster has none",
                    "add storage.lustre, and copy the weights under its mount_path (or link a bucket that holds them)")


@rule
def serving_model_path(spec: ClusterSpec) -> Iterator[Problem]:
    """The weights' directory is under the file system's mount path."""
    serving, lustre = spec.serving, spec.storage.lustre
    if serving is None or lustre is None:
        return
    mount, path = lustre.mount_path, serving.model.path
    if not path.startswith(mount.rstrip("/") + "/"):
        yield error(MODEL + ("path",), f"{path} is not under the file system's mount path {mount}",
                    f"the directory of the weights on the file system, such as {mount.rstrip('/')}/models/"
                    f"{serving.model.name.rsplit('/', 1)[-1]}")


@rule
def serving_dtype_supported(spec: ClusterSpec) -> Iterator[Problem]:
    """FP4 weights only on GPUs with FP4 (the catalog's fp4_pflops)."""
    serving, group = _group(spec)
    if serving is None or group is None or inference.dtype_supported(group.instance, serving.model.dtype):
        return
    gpu = group.instance.gpu
    yield error(MODEL + ("dtype",), f"{gpu.name if gpu else group.instance_type} GPUs have no FP4: "
                f"{group.name} cannot serve fp4 weights",
                "use fp8 or bf16 weights, or a group of B200, B300 or GB200 GPUs")


@rule
def serving_model_fits(spec: ClusterSpec) -> Iterator[Problem]:
    """One replica fits in the group at its maximum size."""
    placed = _placement(spec)
    serving, group = _group(spec)
    if placed is None or serving is None or group is None or placed.fits:
        return
    yield error(MODEL + ("parameters_billions",),
                f"{serving.model.parameters_billions:g}B parameters in {placed.dtype} are {placed.weights_gib:.1f} GiB "
                f"of weights: a replica needs {placed.pipeline_parallel} x {group.instance_type}, the group "
                f"'{group.name}' has at most {placed.nodes}",
                f"weights may take {placed.gpu_memory_utilization - inference.KV_CACHE_RESERVE:.0%} of the GPUs' "
                "memory (gpu_memory_utilization, less fmcluster's 10% KV-cache floor): grow the group to "
                f"{placed.pipeline_parallel} nodes, or serve smaller weights (fp8)")


@rule
def serving_replicas_fit(spec: ClusterSpec) -> Iterator[Problem]:
    """The replicas asked for fit in the group at its maximum size."""
    placed = _placement(spec)
    serving = spec.serving
    if placed is None or serving is None or serving.replicas is None or not placed.fits:
        return
    if serving.replicas > placed.replicas_fit:
        yield error(SERVING + ("replicas",),
                    f"{serving.replicas} replicas asked for, {placed.replicas_fit} fit: each takes "
                    f"{placed.tensor_parallel} x {placed.pipeline_parallel} GPUs (tensor x pipeline parallel) of "
                    f"{placed.nodes} x {placed.instance_type}",
                    f"replicas: {placed.replicas_fit} or fewer (or leave it out: as many as fit)")


@rule(warns=True)
def serving_image_efa(spec: ClusterSpec) -> Iterator[Problem]:
    """A replica across nodes of an EFA group, in vLLM's own image: that image has no EFA libfabric
    and no aws-ofi-nccl (fmcluster.facts.software), so NCCL between the nodes of a replica runs over TCP
    sockets: it works, slowly. software.SERVING_DOCKERFILE builds vLLM's image with them."""
    placed = _placement(spec)
    serving, group = _group(spec)
    if placed is None or serving is None or group is None or not placed.fits:
        return
    if placed.pipeline_parallel > 1 and group.efa and serving.image == software.VLLM_IMAGE:
        yield warning(SERVING + ("image",),
                      f"a replica spans {placed.pipeline_parallel} nodes of '{group.name}', and {serving.image} has "
                      "no EFA libfabric or aws-ofi-nccl: NCCL between its nodes would run over TCP sockets, not EFA",
                      f"build {software.SERVING_DOCKERFILE} (vLLM's image with the EFA installer) and set "
                      "serving.image to it")
