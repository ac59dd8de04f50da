"""The reference image recipe (fmcluster/data/docker/Dockerfile, issue 18), read, never built: it parses, each of
its ARG defaults is the version fmcluster/facts/software.py chooses (and the comparison fails when one
differs), its base image is pinned by tag and digest, both architectures are handled, the NCCL
environment is the node bootstrap's, and hadolint finds nothing in it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from fmcluster.facts import catalog, software
from tests.support.dockerfile import (
    ARCH_TOKENS,
    PLATFORM_ARGS,
    README,
    Instruction,
    architecture_branches,
    arg_defaults,
    check_bundled_aws_ofi_nccl,
    divergences,
    efa_installer_step,
    environment,
    image_nccl_environment,
    parse,
    unused_args,
)
from tests.support.paths import ROOT
from tests.support.tools import hadolint, hadolint_findings

DOCKERFILE = ROOT / "fmcluster" / "data" / "docker" / "Dockerfile"


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse(DOCKERFILE.read_text(encoding="utf-8"))


# ---- parsing and the versions --------------------------------------------------------------------

def test_the_dockerfile_parses_into_one_stage(instructions):
    keywords = [i.keyword for i in instructions]
    assert keywords.count("FROM") == 1, "one stage: the image is the build"
    assert set(keywords[: keywords.index("FROM")]) <= {"ARG"}, "only ARGs before FROM"
    assert "RUN" in keywords and "ENV" in keywords


def test_the_parser_joins_continuations_and_skips_comments():
    text = "# a comment\nARG A=1\nRUN echo a \\\n    # inside\n    && echo b\nENV X=1 \\\n    Y=\"two words\"\n"
    parsed = parse(text)
    assert [(i.line, i.keyword) for i in parsed] == [(2, "ARG"), (3, "RUN"), (6, "ENV")]
    assert parsed[1].arguments == "echo a && echo b"
    assert environment(parsed) == {"X": "1", "Y": "two words"}


def test_a_global_arg_may_be_declared_again_in_its_stage_only_without_a_default():
    assert arg_defaults(parse("ARG A=1\nFROM x\nARG A\nARG B\n")) == {"A": "1", "B": None}
    for text in ("ARG A=1\nFROM x\nARG A=2\n", "ARG A=1\nARG A\nFROM x\n", "FROM x\nARG A\nARG A\n",
                 "ARG A=1\nFROM x\nARG A\nARG A\n"):
        with pytest.raises(AssertionError, match="declared twice"):
            arg_defaults(parse(text))


def test_every_arg_has_the_default_software_py_chooses(instructions):
    defaults = arg_defaults(instructions)
    assert {n for n, v in defaults.items() if v is None} == PLATFORM_ARGS, "every other ARG has a default"
    assert not divergences(DOCKERFILE.read_text(encoding="utf-8"))


def test_a_default_that_differs_from_software_py_is_found():
    """The check can fail: the recipe with one version changed, one ARG more and one ARG less."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    changed = text.replace(f"ARG NCCL_VERSION={software.NCCL_VERSION}\n", "ARG NCCL_VERSION=v2.0.0-1\n")
    assert changed != text
    assert divergences(changed) == {"NCCL_VERSION": ("v2.0.0-1", software.NCCL_VERSION)}
    extra = text.replace("ARG TARGETARCH\n", "ARG TARGETARCH\nARG UCX_VERSION=1.0\n")
    assert divergences(extra) == {"UCX_VERSION": ("1.0", None)}
    fewer = text.replace(f"ARG GDRCOPY_VERSION={software.GDRCOPY_VERSION}\n", "")
    assert divergences(fewer) == {"GDRCOPY_VERSION": (None, software.GDRCOPY_VERSION)}


def test_every_version_arg_is_used(instructions):
    assert not unused_args(instructions, software.IMAGE_ARGS), "declared but not used"


def test_software_py_imports_only_the_standard_library():
    tree = ast.parse((ROOT / "fmcluster" / "facts" / "software.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            top = module.split(".")[0]
            assert top == "__future__" or top in sys.stdlib_module_names, module


# ---- the base image --------------------------------------------------------------------------------

def test_the_base_image_is_pinned_by_tag_and_digest(instructions):
    (base,) = [i for i in instructions if i.keyword == "FROM"]
    assert base.arguments == "${CUDA_BASE_IMAGE}"
    reference = arg_defaults(instructions)["CUDA_BASE_IMAGE"]
    assert reference == software.CUDA_BASE_IMAGE
    match = re.fullmatch(r"(?P<repo>[a-z0-9.\-/]+):(?P<tag>[A-Za-z0-9._\-]+)@(?P<digest>sha256:[0-9a-f]{64})",
                         reference or "")
    assert match, reference
    assert "latest" not in match["tag"]
    assert match["repo"] in ("docker.io/nvidia/cuda", "nvcr.io/nvidia/cuda")
    assert match["tag"] == f"{software.CUDA_VERSION}-devel-ubuntu{software.UBUNTU_VERSION}"
    assert not [i.line for i in instructions if "latest" in i.arguments.lower()]


def test_the_build_checks_the_base_images_cuda_is_the_chosen_one(instructions):
    runs = [i.arguments for i in instructions if i.keyword == "RUN"]
    assert any('"${CUDA_VERSION}" = "${CUDA_TOOLKIT_VERSION}"' in r for r in runs)


def test_cuda_13_runs_on_the_oldest_driver_of_fmclusters_amis():
    """CUDA 13.x needs a driver of branch 580 or later (NVIDIA's minor version compatibility); the
    EKS AL2023 NVIDIA AMIs' is 580 (research notes 11a), so the image may not move to CUDA 14."""
    major, minor, _ = (int(p) for p in software.CUDA_VERSION.split("."))
    assert (major, minor) == (13, 0), "the EKS AL2023 NVIDIA AMI's R580 driver is a CUDA 13.0 driver"


# ---- both architectures ------------------------------------------------------------------------------

def test_both_architectures_are_handled(instructions):
    assert architecture_branches(instructions, ("CUDA_ARCHS_AMD64", "CUDA_ARCHS_ARM64")) >= 2


def test_the_image_platforms_are_the_catalogs_architectures():
    architectures = {t.architecture for t in catalog.catalog().values() if t.is_gpu}
    assert {software.DOCKER_ARCHITECTURES[a] for a in architectures} == set(software.CUDA_ARCHITECTURES)
    assert software.IMAGE_PLATFORMS == ("linux/amd64", "linux/arm64")


def test_the_cuda_architectures_are_those_of_the_catalogs_gpus():
    """Each architecture's image compiles SASS for exactly the GPUs fmcluster builds nodes of."""
    wanted: dict[str, set[str]] = {}
    for t in catalog.catalog().values():
        if t.gpu is not None:
            assert t.gpu.name in software.GPU_COMPUTE_CAPABILITY, f"{t.name}: no compute capability for {t.gpu.name}"
            wanted.setdefault(software.DOCKER_ARCHITECTURES[t.architecture], set()).add(
                software.GPU_COMPUTE_CAPABILITY[t.gpu.name])
    for arch, capabilities in software.CUDA_ARCHITECTURES.items():
        assert set(capabilities) == wanted[arch], arch
        assert list(capabilities) == sorted(capabilities, key=int)
    assert software.gencode("arm64") == "-gencode=arch=compute_100,code=sm_100"
    assert "-gencode=arch=compute_103,code=sm_103" in software.gencode("amd64")


# ---- the EFA user space, NCCL and nccl-tests -------------------------------------------------------

def test_the_efa_installer_runs_as_the_ec2_user_guide_runs_it_in_a_container(instructions):
    efa_installer_step(instructions)


def test_aws_ofi_nccl_is_the_installers_bundled_copy_and_is_checked(instructions):
    check_bundled_aws_ofi_nccl(instructions)


def test_nccl_and_nccl_tests_are_built_from_their_tags_with_mpi(instructions):
    runs = [i.arguments for i in instructions if i.keyword == "RUN"]
    (nccl,) = [r for r in runs if "NVIDIA/nccl.git" in r]
    (tests,) = [r for r in runs if "NVIDIA/nccl-tests.git" in r]
    assert '-b "${NCCL_VERSION}"' in nccl and "NVCC_GENCODE=" in nccl
    assert '-b "${NCCL_TESTS_VERSION}"' in tests
    for setting in ("MPI=1", "MPI_HOME=/opt/amazon/openmpi", "NCCL_HOME=/opt/nccl/build"):
        assert setting in tests
    assert any("apt-get remove" in r and "libnccl2" in r for r in runs), "the base image's NCCL goes"


def test_the_library_path_puts_the_built_nccl_first(instructions):
    env = environment(instructions)
    paths = env["LD_LIBRARY_PATH"].split(":")
    assert paths[0] == "/opt/nccl/build/lib"
    assert {"/opt/amazon/ofi-nccl/lib", "/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib"} <= set(paths)
    assert not ARCH_TOKENS.search(env["LD_LIBRARY_PATH"])
    assert "/opt/amazon/openmpi/bin" in env["PATH"].split(":")


def test_the_nccl_environment_is_the_node_bootstraps(instructions):
    image_nccl_environment(instructions)


# ---- hadolint, and the README ----------------------------------------------------------------------

def test_hadolint_finds_nothing():
    assert hadolint_findings(DOCKERFILE) == ""


def test_hadolint_can_fail(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN cd /tmp && apt-get install -y curl\n")
    result = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "DL3007" in result.stdout and "DL3003" in result.stdout


def test_the_readme_builds_both_platforms_and_names_the_chosen_versions():
    text = README.read_text(encoding="utf-8")
    assert f"--platform {','.join(software.IMAGE_PLATFORMS)}" in text
    assert "fmcluster/facts/software.py" in text
    for value in (software.CUDA_VERSION, software.EFA_INSTALLER_VERSION, software.AWS_OFI_NCCL_VERSION,
                  software.NCCL_VERSION, software.NCCL_TESTS_VERSION, software.GDRCOPY_VERSION,
                  software.CUDA_IMAGE_DIGEST):
        assert f"`{value}`" in text, f"fmcluster/data/docker/README.md does not name {value}"
    assert "--container-image" in text and "vpc.amazonaws.com/efa" in text
