"""The spec's sections of what the cluster serves and who shares it: `serving` and `teams`.

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""

from typing import Literal, Optional, Union

from pydantic import Field

from fmcluster.facts import software
from fmcluster.spec.models.base import Model
from fmcluster.spec.models.formats import (
    AbsPath,
    GpuCount,
    ImageRef,
    Member,
    MemberGroup,
    Priority,
    ServedModelName,
    TeamName,
    Text,
)


class ServedModelSpec(Model):
    """The model a `serving` section serves: its weights on the shared file system and their size."""

    name: ServedModelName = Field(description=(
        "the name it is served as (vLLM --served-model-name), such as Llama-3.1-70B-Instruct"))
    path: AbsPath = Field(description=(
        "the directory of its weights (a Hugging Face checkpoint) on the FSx for Lustre file system, under "
        "storage.lustre.mount_path, such as /fsx/models/Llama-3.1-70B-Instruct"))
    parameters_billions: float = Field(gt=0, le=100000, description=(
        "its parameter count in billions, such as 70: with the dtype, the size of its weights"))
    dtype: Literal["bf16", "fp16", "fp8", "fp4"] = Field(default="bf16", description=(
        "the weights' data type: bf16 or fp16 (2 bytes a parameter), fp8 (1), fp4 (0.5: on GPUs with FP4 "
        "only, B200, B300, GB200)"))


class ServingSpec(Model):
    """Inference on the cluster: one model served by vLLM on a GPU node group, in replicas of
    tensor-parallel x pipeline-parallel GPUs that `fmcluster plan` shows and `fmcluster jobs` writes
    the jobs of."""

    model: ServedModelSpec = Field(description="the model: its name, weights, size and data type")
    node_group: Text = Field(description="the GPU node group it is served on, by name")
    replicas: Optional[int] = Field(default=None, ge=1, description=(
        "how many replicas to serve; default: as many as fit in the group at its maximum size"))
    engine: Literal["vllm"] = Field(default="vllm", description="the serving engine: vllm")
    image: ImageRef = Field(default=software.VLLM_IMAGE, description=(
        "the engine's container image (Enroot/Pyxis on Slurm, the pods' on Kubernetes); default: the vLLM "
        "release fmcluster.facts.software pins"))
    gpu_memory_utilization: float = Field(default=0.9, ge=0.5, le=0.98, description=(
        "the share of each GPU's memory vLLM takes (--gpu-memory-utilization, passed explicitly): the "
        "weights, the KV cache and activations; weights must leave at least 10% of the GPUs' memory"))
    max_model_len: Optional[int] = Field(default=None, ge=128, description=(
        "the longest context in tokens (vLLM --max-model-len); default: the model's own, which vLLM "
        "refuses to start with when the KV cache cannot hold one sequence of it"))


class TeamSpec(Model):
    """A team that shares the cluster: who is in it, the GPUs it is guaranteed, whether it may
    borrow idle GPUs and lend its own, and its priority. On Slurm a team is an account with fair
    share and limits; on Kubernetes a namespace with a LocalQueue and a ClusterQueue in the
    cluster's cohort."""

    name: TeamName = Field(description=(
        "the team's name: its Slurm account, or its Kubernetes namespace and ClusterQueue"))
    members: list[Member] = Field(default=[], description=(
        "who is in it: Linux user names on Slurm (the users of its account); IAM role or user ARNs on "
        "Kubernetes (given access to its namespace)"))
    groups: list[MemberGroup] = Field(default=[], description=(
        "groups whose members are in it: Linux groups on Slurm (their members, as the login node resolves "
        "them, join its account); Kubernetes groups on Kubernetes (bound to its namespace)"))
    gpus: dict[Text, GpuCount] = Field(default={}, description=(
        "GPUs guaranteed to it per GPU node group, by the group's name, such as {gpu: 64}, up to the group's GPUs "
        "at its largest size; or `share`"))
    share: Optional[float] = Field(default=None, gt=0, le=1, description=(
        "instead of `gpus`: the fraction of every shared GPU node group guaranteed to it, such as 0.25"))
    borrow: Union[bool, GpuCount] = Field(default=True, description=(
        "whether it may use idle GPUs beyond its guarantee: true (as many as are idle), false, or at most "
        "this many more per node group (up to what a shared group has beyond its guarantee)"))
    lend: Union[bool, GpuCount] = Field(default=True, description=(
        "whether others may use its idle guaranteed GPUs (taken back by preemption when it needs them): "
        "true, false, or at most this many per node group (up to its guarantee there)"))
    priority: Priority = Field(default="normal", description=(
        "its jobs' default priority and the highest it may use: high, normal or low (low jobs are "
        "preempted first; every team may run low jobs)"))
