"""Reading a Dockerfile without building it, and the checks the reference image (fmcluster/data/docker/Dockerfile) and
the serving image (fmcluster/data/docker/Dockerfile.serving) share: a parser into instructions, their ARG defaults
held to fmcluster/facts/software.py, the architecture branches, the EFA installer step, the bundled
aws-ofi-nccl, and the NCCL environment held to the node bootstrap's. Not a test module. Used by
tests/node/test_image_recipe.py and tests/kits/test_serving_image.py."""

from __future__ import annotations

import re
import shlex
from typing import Iterable, Mapping, NamedTuple

from fmcluster.facts import catalog, software
from fmcluster.node import nccl as node_nccl
from tests.support.paths import ROOT

README = ROOT / "fmcluster" / "data" / "docker" / "README.md"
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


def efa_gpu_types() -> list[catalog.InstanceType]:
    return [t for t in catalog.catalog().values() if t.is_gpu and t.efa_supported]


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


def check_bundled_aws_ofi_nccl(instructions: list[Instruction]) -> None:
    """The plugin is the EFA installer's copy (not built), its version and its library checked."""
    runs = " ".join(i.arguments for i in instructions if i.keyword == "RUN")
    assert "aws-ofi-nccl.git" not in runs, "not built separately: the EFA installer's copy"
    assert 'grep -qF " ${AWS_OFI_NCCL_VERSION}"' in runs
    assert "ls /opt/amazon/ofi-nccl/lib/libnccl-net" in runs, "the plugin's library is where NCCL looks"


def image_nccl_environment(instructions: list[Instruction], own: Iterable[str] = ()) -> dict[str, str]:
    """The image's FI_/NCCL_ settings but the names in `own` (the image's own, no node's), held to
    those fmcluster's bootstrap writes on every EFA GPU node (fmcluster.node.nccl.nccl_environment),
    with its values: none contradicts a node's file, and the per-instance-type ones
    (FI_EFA_USE_DEVICE_RDMA) stay with the node."""
    image = {k: v for k, v in environment(instructions).items() if k.startswith(("FI_", "NCCL_")) and k not in own}
    types = efa_gpu_types()
    assert types
    nodes = [exported(node_nccl.nccl_environment(t, efa=True)) for t in types]
    common = {k: v for k, v in nodes[0].items() if all(n.get(k) == v for n in nodes)}
    assert image == common
    assert {"FI_PROVIDER", "NCCL_SOCKET_IFNAME", "NCCL_BUFFSIZE"} <= image.keys()
    assert image["FI_PROVIDER"] == "efa"
    assert "FI_EFA_USE_DEVICE_RDMA" not in image
    assert any("FI_EFA_USE_DEVICE_RDMA" in n for n in nodes), "some node types set it themselves"
    return image
