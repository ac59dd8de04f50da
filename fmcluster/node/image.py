"""Node images: the build and test documents EC2 Image Builder runs to bake a NodeImage.

What every Slurm node needs and that does not depend on the node (Enroot, Pyxis built against the
image's Slurm, the exporters' packages) is installed once into an image (scripts/image/bake.sh,
the build phase) and checked on an instance launched from it (scripts/image/check.sh, the test
phase); a node's boot only checks it (scripts/boot/containers.sh, scripts/boot/metrics.sh).

Each document is an AWSTOE component document (Image Builder User Guide, "Use the AWSTOE component
document framework for custom components"): name, description, schemaVersion 1.0 and one phase
whose ExecuteBash step runs the script. A component's inline data is at most 16,000 characters
(AWS::ImageBuilder::Component Data), so the scripts go in without their comment lines: they are
documented here. The digest is the image's identity: a changed recipe is a new digest, a new image.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import yaml

from fmcluster.facts import controlplanes, health
from fmcluster.facts import images as image_facts
from fmcluster.model.cluster import NodeImage
from fmcluster.node import runtime, shell

SCRIPTS = Path(__file__).parent / "scripts" / "image"
COMPONENT_DATA_LIMIT = 16000  # characters of AWS::ImageBuilder::Component Data
SCHEMA_VERSION = 1.0  # AWSTOE's document schema version
IMAGE_MANIFEST = runtime.IMAGE_MANIFEST  # what the bake installed (bake.sh)
BUILD_DIR = "/var/tmp/fmcluster-image"  # the sources while they build; removed after
OS_RELEASE = "/etc/os-release"
BAKE_TIMEOUT_SECONDS = 3600  # the build step (AWSTOE's default is 7200)
CHECK_TIMEOUT_SECONDS = 600  # the test step
CHECK_EXPORTER_PORT = 19100  # a loopback port the test phase starts a node exporter on
CHECK_EXPORTER_TRIES = 30  # seconds it may take to serve /metrics
DIGEST_PLACEHOLDER = "0" * 64  # IMAGE_DIGEST while the digest is computed
# The bake's apt-get (fmcluster/node/scripts/boot/apt.sh): its DPkg::Lock::Timeout, and its tries
APT_SETTINGS: dict[str, str | int] = {"APT_LOCK_TIMEOUT_SECONDS": 300, "APT_ATTEMPTS": 5, "APT_RETRY_SECONDS": 30}


@dataclass(frozen=True)
class ImageDocuments:
    """The AWSTOE component documents of one node image (YAML text, each at most
    COMPONENT_DATA_LIMIT characters) and its digest (hex SHA-256)."""

    build: str
    test: str
    digest: str


UBUNTU_RELEASES = {"noble": "24.04", "jammy": "22.04"}


def exporter_pins() -> dict[str, dict[str, str]]:
    """The exporters' pinned package versions per Ubuntu release, read from their one source
    (scripts/image/exporters.sh): package -> {release codename: apt version pattern}."""
    text = (SCRIPTS / "exporters.sh").read_text(encoding="utf-8")
    tables = {"prometheus-node-exporter": "NODE_EXPORTER_VERSIONS", "prometheus": "PROMETHEUS_VERSIONS"}
    found = {}
    for package, name in tables.items():
        match = re.search(rf"^declare -A {name}=\((.*)\)$", text, re.MULTILINE)
        if match is None:
            raise ValueError(f"exporters.sh has no table {name}")
        found[package] = dict(re.findall(r"\[(\w+)\]='([^']+)'", match.group(1)))
    return found


def own_image_needs(plane: str, slurm_prefix: str, *, containers: bool, metrics: bool,
                    aws_cli: bool = False) -> tuple[str, ...]:
    """What a node group's own image (its `ami_id`) must have on a Slurm plane, as the boot checks
    it (containers.sh, metrics.sh; on AWS PCS the agent that runs node lifecycle actions; with
    `aws_cli`, the readiness check of a group whose nodes read their capacity's end): a node without
    any of it is not ready and never takes a job."""
    needs = []
    if containers:
        needs += [f"Enroot {runtime.ENROOT_VERSION} (/usr/bin/enroot)",
                  f"Pyxis {runtime.PYXIS_TAG} built against the Slurm at {slurm_prefix} "
                  f"({slurm_prefix}/lib/slurm/spank_pyxis.so)"]
    if metrics:
        for package, versions in exporter_pins().items():
            pinned = "; ".join(f"{UBUNTU_RELEASES.get(r, r)}: {v}" for r, v in versions.items())
            needs.append(f"{package} ({pinned})")
    if plane == image_facts.PCS:
        needs.append(f"the AWS PCS agent {image_facts.PCS_AGENT_MIN} or later (node lifecycle actions)")
    if aws_cli:
        needs.append("the AWS CLI (`aws` on root's PATH: capacity-end reads the Capacity Block's or training "
                     "plan's end with it)")
    return tuple(needs)


def pins(image: NodeImage) -> dict[str, str | int]:
    """The settings both scripts share: the image and what it pins."""
    return {"IMAGE_KEY": image.key, "IMAGE_MANIFEST": IMAGE_MANIFEST, "ENROOT_VERSION": runtime.ENROOT_VERSION,
            "ENROOT_COMMIT": runtime.ENROOT_COMMIT, "PYXIS_TAG": runtime.PYXIS_TAG,
            "PYXIS_COMMIT": runtime.PYXIS_COMMIT, "SLURM_PREFIX": image.slurm_prefix}


def bake_settings(image: NodeImage, digest: str) -> dict[str, str | int]:
    return {**pins(image), "IMAGE_DIGEST": digest, "ENROOT_REPOSITORY": runtime.ENROOT_REPOSITORY,
            "ENROOT_SUBMODULES": " ".join(runtime.ENROOT_SUBMODULES.values()),
            "PYXIS_REPOSITORY": runtime.PYXIS_REPOSITORY, "CONTAINER_PACKAGES": runtime.CONTAINER_PACKAGES,
            "DOWNLOAD_ATTEMPTS": runtime.DOWNLOAD_ATTEMPTS,
            "DOWNLOAD_RETRY_SECONDS": runtime.DOWNLOAD_RETRY_SECONDS, "BUILD_DIR": BUILD_DIR,
            "OS_RELEASE": OS_RELEASE, **APT_SETTINGS}


def check_settings(image: NodeImage) -> dict[str, str | int]:
    """The test phase's settings; CHECK_DEEP_NCCL_TESTS: where the deep check of new GPU nodes looks
    for nccl-tests (fmcluster.facts.health.DEEP_NCCL_TESTS), "" where the image's nodes run none."""
    deep = " ".join(health.DEEP_NCCL_TESTS) if image.deep_check_tools else ""
    auth, cred = controlplanes.SLURM_AUTH[image.plane]
    return {**pins(image), "CHECK_EXPORTER_PORT": CHECK_EXPORTER_PORT, "CHECK_EXPORTER_TRIES": CHECK_EXPORTER_TRIES,
            "CHECK_DEEP_NCCL_TESTS": deep, "CHECK_SLURM_AUTH": auth, "CHECK_SLURM_CRED": cred}


def program(settings: Mapping[str, str | int], parts: tuple[Path, ...], entry: str) -> str:
    """A whole bash program: strict mode, ROOT (FMCLUSTER_ROOT: the tests' sandbox; empty on an
    instance), the settings, the fragments `parts` and a call of `entry` (its failure fails the
    program), without comment lines."""
    head = "#!/bin/bash\nset -euo pipefail\nROOT=${FMCLUSTER_ROOT:-}\n"
    body = [shell.fragment(part) for part in parts]
    return shell.without_comments("\n".join([head + shell.settings_block(settings), *body, f"{entry}\n"]))


def bake_script(image: NodeImage, digest: str = DIGEST_PLACEHOLDER) -> str:
    """The build phase's script (scripts/image/bake.sh), `digest` recorded in the manifest."""
    return program(bake_settings(image, digest),
                   (shell.SCRIPTS / "common.sh", shell.SCRIPTS / "apt.sh", SCRIPTS / "exporters.sh",
                    SCRIPTS / "bake.sh"), "bake_image")


def check_script(image: NodeImage) -> str:
    """The test phase's script (scripts/image/check.sh)."""
    return program(check_settings(image),
                   (shell.SCRIPTS / "common.sh", SCRIPTS / "check.sh"), "check_image")


class _BlockDumper(yaml.SafeDumper):
    """yaml.SafeDumper writing multi-line strings as literal block scalars (`|`)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_BlockDumper.add_representer(str, _str)


def component(name: str, description: str, phase: str, step: str, script: str, timeout: int) -> str:
    """An AWSTOE component document: one phase, one ExecuteBash step running `script` (which
    must not hold `{{`: AWSTOE reads that as a variable)."""
    if "{{" in script:
        raise ValueError(f"the {phase} script of {name} holds '{{{{', which AWSTOE would expand")
    text = _component_text(name, description, phase, step, script, timeout)
    if len(text) > COMPONENT_DATA_LIMIT:
        raise ValueError(f"the {phase} document of {name} is {len(text)} characters, over Image Builder's "
                         f"{COMPONENT_DATA_LIMIT}")
    return text


@functools.lru_cache(maxsize=64)
def _component_text(name: str, description: str, phase: str, step: str, script: str, timeout: int) -> str:
    """The document's YAML. Kept per input: PyYAML's emitter takes tens of milliseconds over a
    script, and a process that synthesizes several specs (diff, the tests) writes the same again."""
    document = {"name": name, "description": description, "schemaVersion": SCHEMA_VERSION,
                "phases": [{"name": phase, "steps": [{"name": step, "action": "ExecuteBash",
                                                      "timeoutSeconds": timeout, "onFailure": "Abort",
                                                      "inputs": {"commands": [script]}}]}]}
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, width=1000)


def _documents(image: NodeImage, digest: str) -> tuple[str, str]:
    build = component(f"fmcluster-{image.key}-bake", f"Bakes Enroot, Pyxis and the exporters into {image.key}",
                      "build", "Bake", bake_script(image, digest), BAKE_TIMEOUT_SECONDS)
    test = component(f"fmcluster-{image.key}-check", f"Checks what was baked into {image.key} works",
                     "test", "Check", check_script(image), CHECK_TIMEOUT_SECONDS)
    return build, test


def image_digest(image: NodeImage, build: str, test: str) -> str:
    """SHA-256 of the documents (the build one with DIGEST_PLACEHOLDER for its own digest), the
    base's parent, the architecture and the revision."""
    h = hashlib.sha256()
    for part in (build, test, image.base.parent, image.architecture, str(image.revision)):
        h.update(part.encode("utf-8") + b"\0")
    return h.hexdigest()


def documents(image: NodeImage) -> ImageDocuments:
    """The build and test documents of `image` and its digest. The build document records the
    digest in the image's manifest; the digest is taken over it with DIGEST_PLACEHOLDER there
    (the documents otherwise as they are), so it names exactly one recipe."""
    digest = image_digest(image, *_documents(image, DIGEST_PLACEHOLDER))
    build, test = _documents(image, digest)
    return ImageDocuments(build, test, digest)
