"""How a model of a given size is placed on a node group for serving with vLLM: GPUs per replica,
tensor-parallel and pipeline-parallel sizes, the room left for the KV cache, and how many replicas
fit. Pure and light (the rules use it at `validate`, the model resolves the spec's `serving` with it
once, the plan shows standard sizes with it).

Sources and details: docs/research-notes.md, "fmcluster/facts/inference.py"."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from fmcluster.facts.catalog import InstanceType

GIB = 2**30
BYTES_PER_PARAMETER = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}
GPU_MEMORY_UTILIZATION = 0.9  # the default of serving.gpu_memory_utilization
KV_CACHE_RESERVE = 0.10  # fmcluster's floor: the least share of the replica's GPU memory left beside the weights
PORT = 8000  # vLLM's OpenAI-compatible server (vllm serve --port; its default)
# The models `fmcluster plan` places on every GPU group: (billions of parameters, dtype), the
# sizes of the Llama 3.1 family (8B, 70B, 405B)
STANDARD_MODELS = ((8.0, "bf16"), (8.0, "fp8"), (70.0, "bf16"), (70.0, "fp8"), (405.0, "bf16"), (405.0, "fp8"))


def weights_gib(parameters_billions: float, dtype: str) -> float:
    return parameters_billions * 1e9 * BYTES_PER_PARAMETER[dtype] / GIB


def dtype_supported(instance: InstanceType, dtype: str) -> bool:
    """FP4 weights only on GPUs with FP4 tensor cores (the catalog's fp4_pflops: B200, B300, GB200)."""
    gpu = instance.gpu
    return gpu is not None and (dtype != "fp4" or gpu.fp4_pflops is not None)


@dataclass(frozen=True)
class ServingPlacement:
    """A model of `parameters_billions` in `dtype` on a group of `nodes` x `instance_type`."""

    instance_type: str
    nodes: int  # the group's maximum size
    parameters_billions: float
    dtype: str
    gpu_memory_utilization: float
    weights_gib: float
    gpus_per_node: int
    gpu_memory_gib: float  # of one GPU
    tensor_parallel: int  # GPUs of a node a replica uses (0: the group has no GPU)
    pipeline_parallel: int  # nodes a replica uses (more than `nodes` where it does not fit)

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    @property
    def replica_memory_gib(self) -> float:
        return self.gpus_per_replica * self.gpu_memory_gib

    @property
    def kv_cache_gib(self) -> float:
        """What vLLM's share of the replica's GPU memory keeps beside the weights: the KV cache
        and activations (negative: the weights do not fit in the share)."""
        return self.gpu_memory_utilization * self.replica_memory_gib - self.weights_gib

    @property
    def reserve_gib(self) -> float:
        return KV_CACHE_RESERVE * self.replica_memory_gib

    @property
    def fits(self) -> bool:
        """A replica fits in the group: it has GPUs, and the nodes it needs are there."""
        return self.tensor_parallel > 0 and 0 < self.pipeline_parallel <= self.nodes

    @property
    def replicas_per_unit(self) -> int:
        """Replicas on one unit of PIPELINE_PARALLEL nodes: those of one node or less pack the node."""
        if not self.tensor_parallel:
            return 0
        return self.gpus_per_node // self.tensor_parallel if self.pipeline_parallel == 1 else 1

    @property
    def replicas_fit(self) -> int:
        """Replicas the group holds at its maximum size."""
        return (self.nodes // self.pipeline_parallel) * self.replicas_per_unit if self.fits else 0

    def units(self, replicas: int) -> int:
        """Units of PIPELINE_PARALLEL nodes that `replicas` replicas take (a Slurm job or an LWS
        group each)."""
        per = self.replicas_per_unit
        return math.ceil(replicas / per) if per else 0


def _fits(weights: float, gpus: int, gpu_memory: float, utilization: float) -> bool:
    return weights <= (utilization - KV_CACHE_RESERVE) * gpus * gpu_memory


def place(instance: InstanceType, nodes: int, parameters_billions: float, dtype: str,
          gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION) -> ServingPlacement:
    """Where a replica of the model goes on a group of `nodes` x `instance` (docs/research-notes.md):
    the smallest power-of-two tensor-parallel size inside a node that fits, else every GPU of a
    node and the fewest nodes that fit (even more than the group has: then it does not fit)."""
    gpu, per_node = instance.gpu, instance.gpu_count
    weights = weights_gib(parameters_billions, dtype)
    memory = gpu.memory_gib if gpu else 0.0
    tp, pp = 0, 0
    if gpu is not None and per_node:
        sizes = [2**i for i in range(per_node.bit_length()) if per_node % 2**i == 0]
        tp = next((s for s in sizes if _fits(weights, s, memory, gpu_memory_utilization)), per_node)
        pp = 1 if tp < per_node or _fits(weights, per_node, memory, gpu_memory_utilization) else \
            math.ceil(weights / ((gpu_memory_utilization - KV_CACHE_RESERVE) * per_node * memory))
    return ServingPlacement(
        instance_type=instance.name, nodes=nodes, parameters_billions=parameters_billions, dtype=dtype,
        gpu_memory_utilization=gpu_memory_utilization, weights_gib=weights, gpus_per_node=per_node,
        gpu_memory_gib=memory, tensor_parallel=tp, pipeline_parallel=pp)


@dataclass(frozen=True)
class Serving:
    """The spec's `serving` section, resolved (ClusterModel.serving): what is served where, and how."""

    name: str  # --served-model-name
    path: str  # the weights' directory on the file system
    group: str  # the node group's name (its Slurm partition, its Kubernetes node-group label)
    engine: str
    image: str
    max_model_len: Optional[int]
    placement: ServingPlacement
    replicas: int  # served: the spec's, or every replica that fits

    @property
    def tensor_parallel(self) -> int:
        return self.placement.tensor_parallel

    @property
    def pipeline_parallel(self) -> int:
        return self.placement.pipeline_parallel

    @property
    def units(self) -> int:
        """Units of PIPELINE_PARALLEL nodes the served replicas take."""
        return self.placement.units(self.replicas)

    @property
    def gpu_memory_utilization(self) -> float:
        return self.placement.gpu_memory_utilization
