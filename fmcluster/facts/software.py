"""The software versions fmcluster chooses, in one place, each with why and where from.

Pure data: nothing here imports more than the standard library, and nothing here is read at synth
time to build a cluster. Each part of the project that pins software keeps its own delimited
section below; the research behind the choices is docs/research-notes.md (section 11 for the
reference image, 11f for the serving image).
"""

from __future__ import annotations

# =================================================================================================
# The reference container image (fmcluster/data/docker/Dockerfile, fmcluster/data/docker/README.md; issue 18)
#
# One image for every GPU node fmcluster builds: linux/amd64 (p4d, p5, p5e, p5en, p6-b200,
# p6-b300, g6e) and linux/arm64 (p6e-gb200, Grace). The Dockerfile's ARG defaults are these
# values (IMAGE_ARGS); tests/node/test_image_recipe.py fails when the two differ. Change a version
# here first, then the ARG default, then rebuild (the image is never built at synth).
#
# The hosts it runs on (docs/research-notes.md 11a):
# - AWS PCS (and the Slurm examples): the PCS-ready DLAMI, built on "Deep Learning Base OSS
#   Nvidia Driver GPU AMI (Ubuntu 24.04)"; its 2026-09/10 releases ship NVIDIA driver 595.91.07
#   (CUDA 13.2 at most), EFA installer 1.50.0 and aws-ofi-nccl 1.21.1 (DLAMI release notes,
#   x86_64 and arm64).
# - Amazon EKS: the AL2023 NVIDIA AMI types (AL2023_x86_64_NVIDIA, AL2023_ARM_64_NVIDIA) build
#   with nvidia_driver_major_version 580 (awslabs/amazon-eks-ami templates/al2023/
#   variables-default.json); release v20260714 ships kmod-nvidia-latest-dkms 580.159.03 on both
#   architectures (CHANGELOG.md). Their EFA installer runs with --minimal (kernel module and
#   rdma-core only, templates/al2023/provisioners/install-efa.sh), so on EKS the image brings
#   libfabric and aws-ofi-nccl itself.
# =================================================================================================

# CUDA toolkit of the image. The rule (NVIDIA, "CUDA Compatibility", minor version compatibility):
# a CUDA 13.x application needs a driver of branch 580 or later; a container's CUDA must not need a
# newer driver than the host's unless the forward-compatibility package is used (fmcluster does not
# use it). The oldest driver among fmcluster's AMIs is the EKS AL2023 NVIDIA AMI's R580, whose own
# CUDA is 13.0, so the image stays on 13.0 and needs no minor-version-compatibility caveats there;
# the DLAMI's R595 runs it by backward compatibility. 13.0.2 is the latest 13.0 update and the one
# AWS's reference nccl-tests image uses (awslabs/awsome-distributed-ai micro-benchmarks/nccl-tests/
# nccl-tests.Dockerfile, CUDA_VERSION=13.0.2). CUDA 13.0 compiles sm_103 (B300), which needs 12.9+.
CUDA_VERSION = "13.0.2"
# Ubuntu 24.04, the DLAMI's own release (EFA installer and aws-ofi-nccl support it).
UBUNTU_VERSION = "24.04"
CUDA_IMAGE_REPOSITORY = "docker.io/nvidia/cuda"
CUDA_IMAGE_TAG = f"{CUDA_VERSION}-devel-ubuntu{UBUNTU_VERSION}"
# The multi-architecture index (linux/amd64 and linux/arm64) of that tag. NOT resolved against the
# registry from here (no registry access in this project's workspace): it is the digest that several
# independent public Dockerfiles pin for docker.io/nvidia/cuda:13.0.2-devel-ubuntu24.04 (and one for
# the nvcr.io copy), one of them naming sha256:450d1155... as its arm64 manifest and others
# sha256:0eee3094... as the amd64 one. `docker buildx imagetools inspect` shows it; a wrong digest
# fails the build's first step, never silently (fmcluster/data/docker/README.md, "Pinning the base image").
CUDA_IMAGE_DIGEST = "sha256:5dc1bca23d05bd37b011be68ec470c03b403a5da07ec3a86e41af9470e9d0cc6"
CUDA_BASE_IMAGE = f"{CUDA_IMAGE_REPOSITORY}:{CUDA_IMAGE_TAG}@{CUDA_IMAGE_DIGEST}"

# EFA installer (libfabric, rdma-core user space, Open MPI and aws-ofi-nccl), installed in the image
# without its kernel module. 1.50.0 (2026-08-21: libfabric 2.6.0amzn1.0, rdma-core 64.0, aws-ofi-nccl
# 1.21.1; EC2 User Guide, "Elastic Fabric Adapter release notes") is the version the current
# PCS-ready DLAMI hosts run, so on PCS the container's EFA user space is the host's. 1.51.0 (2026-10,
# aws-ofi-nccl 1.22.0) is newer than any AMI fmcluster uses; AWS's reference image is on 1.48.0.
# No AWS page read states a minimum installer version for P6-B300 or P6e-GB200 (research notes 11c);
# aws-ofi-nccl's own notes say where those platforms arrived (below).
EFA_INSTALLER_VERSION = "1.50.0"
LIBFABRIC_VERSION = "2.6.0amzn1.0"  # bundled with EFA_INSTALLER_VERSION (informational; not an ARG)
# aws-ofi-nccl: the EFA installer's bundled copy (AWS's reference Dockerfile dropped its separate
# AWS_OFI_NCCL_VERSION build for the same reason, awsome-distributed-training #965). 1.21.1 is
# what installer 1.50.0 bundles; the Dockerfile fails if the installed plugin is another version.
# Needed for the newest node types (aws-ofi-nccl RELEASENOTES.md): P6-B200 platform support since
# 1.15.0, P6-B300 tuner since 1.18.0, GB200 topology inside Docker containers fixed in 1.19.0.
AWS_OFI_NCCL_VERSION = "1.21.1"
# NCCL, built from source for the GPUs below. v2.31.2-1 is the release aws-ofi-nccl 1.21.1 is
# tested with ("tested with NCCL v2.31.2-1", backward compatible to 2.17.1). UNVERIFIED here: the
# stored snapshot of NVIDIA/nccl (2026-06) ends at v2.30.7-1; AWS's reference image uses v2.30.4-1.
NCCL_VERSION = "v2.31.2-1"
# nccl-tests, built with MPI (the EFA installer's Open MPI). Latest tag of NVIDIA/nccl-tests
# (2026-07); AWS's reference image uses v2.18.3.
NCCL_TESTS_VERSION = "v2.19.6"
# GDRCopy user-space library (NCCL loads it when the host has gdrdrv). 2.5.2: the DLAMI's gdr_copy
# and AWS's reference image; aws-ofi-nccl's GPU-initiated networking needs 2.5 or later.
GDRCOPY_VERSION = "v2.5.2"

# Compute capability of each GPU model of fmcluster/facts/catalog.py (NVIDIA, "CUDA GPUs - Compute
# Capability"): the SASS the image compiles, per image architecture. tests/node/test_image_recipe.py
# holds CUDA_ARCHITECTURES equal to the capabilities of the catalog's GPU types of each
# architecture, so a GPU added to the catalog needs its entry here.
GPU_COMPUTE_CAPABILITY = {"A100": "80", "L40S": "89", "H100": "90", "H200": "90", "B200": "100",
                          "GB200": "100", "B300": "103"}
# Docker's architecture names (TARGETARCH) -> compute capabilities, ascending. No PTX is embedded:
# a GPU newer than these needs its entry (and a rebuild).
CUDA_ARCHITECTURES = {"amd64": ("80", "89", "90", "100", "103"), "arm64": ("100",)}
# The catalog's (and DescribeImages') architecture names -> Docker's.
DOCKER_ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}
IMAGE_PLATFORMS = tuple(f"linux/{arch}" for arch in CUDA_ARCHITECTURES)


def gencode(architecture: str) -> str:
    """nvcc's -gencode flags for one Docker architecture (amd64, arm64): SASS for each capability."""
    return " ".join(f"-gencode=arch=compute_{cc},code=sm_{cc}" for cc in CUDA_ARCHITECTURES[architecture])


# The Dockerfile's ARG defaults, by ARG name (BuildKit's TARGETARCH is not one: the build sets it).
IMAGE_ARGS = {
    "CUDA_BASE_IMAGE": CUDA_BASE_IMAGE,
    "CUDA_TOOLKIT_VERSION": CUDA_VERSION,
    "EFA_INSTALLER_VERSION": EFA_INSTALLER_VERSION,
    "AWS_OFI_NCCL_VERSION": AWS_OFI_NCCL_VERSION,
    "NCCL_VERSION": NCCL_VERSION,
    "NCCL_TESTS_VERSION": NCCL_TESTS_VERSION,
    "GDRCOPY_VERSION": GDRCOPY_VERSION,
    "CUDA_ARCHS_AMD64": " ".join(CUDA_ARCHITECTURES["amd64"]),
    "CUDA_ARCHS_ARM64": " ".join(CUDA_ARCHITECTURES["arm64"]),
}
# ==================================== end of the reference container image =========================

# =================================================================================================
# Serving (fmcluster/facts/inference.py, fmcluster/kits/serving.py; the spec's `serving` section)
#
# vLLM's OpenAI-compatible server image, the default of serving.image. vLLM publishes one image per
# release on Docker Hub as vllm/vllm-openai:vX.Y.Z (vLLM docs, "Using Docker": "vLLM offers an
# official Docker image for deployment ... vllm/vllm-openai"). 0.33.0 is the newest vLLM release on
# PyPI (`pip index versions vllm`, 2026-11); the image tag follows it. Not verified here: the tag's
# digest and its platforms (Docker Hub cannot be read from this workplace), so pin the digest
# (vllm/vllm-openai@sha256:...) in serving.image before production, and check that the release
# has an arm64 image before serving on p6e-gb200. The image carries no EFA libfabric or
# aws-ofi-nccl: across nodes (pipeline parallel, Ray) NCCL falls back to TCP sockets. The recipe
# SERVING_DOCKERFILE builds on it with the EFA installer as fmcluster/data/docker/Dockerfile does (the same
# EFA_INSTALLER_VERSION and bundled AWS_OFI_NCCL_VERSION), and selects the plugin for the NCCL of
# vLLM's PyTorch wheels; its ARG defaults are SERVING_IMAGE_ARGS (tests/kits/test_serving_image.py), and
# fmcluster/data/docker/README.md ("The serving image") says how to build it and point serving.image at it. Like
# the reference image, fmcluster never builds it: the same digest and arm64 checks apply to its base.
# =================================================================================================
VLLM_VERSION = "0.33.0"
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_VERSION}"
SERVING_DOCKERFILE = "fmcluster/data/docker/Dockerfile.serving"  # relative to the repository root
# The serving Dockerfile's ARG defaults, by ARG name (BuildKit's TARGETARCH is not one).
SERVING_IMAGE_ARGS = {
    "VLLM_IMAGE": VLLM_IMAGE,
    "EFA_INSTALLER_VERSION": EFA_INSTALLER_VERSION,
    "AWS_OFI_NCCL_VERSION": AWS_OFI_NCCL_VERSION,
}
# ==================================== end of serving ==============================================
