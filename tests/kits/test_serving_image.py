"""The serving image recipe (fmcluster/data/docker/Dockerfile.serving,
fmcluster.facts.software.SERVING_DOCKERFILE), read, never built: vLLM's release image with the EFA
installer, as the reference image installs it, and the environment that makes the NCCL of vLLM's
PyTorch wheels load aws-ofi-nccl. It parses into one stage, its ARG defaults are software.py's (and
the comparison fails when one differs), the plugin is selected and on the library path, the NCCL
environment is the node bootstrap's, vLLM's entrypoint is kept, and hadolint finds nothing in it.
The parser and the checks shared with the reference image (tests/node/test_image_recipe.py) are
tests/support/dockerfile.py's."""

from __future__ import annotations

import pytest

from fmcluster.facts import software
from tests.support.dockerfile import (
    README,
    Instruction,
    architecture_branches,
    arg_defaults,
    assignments,
    check_bundled_aws_ofi_nccl,
    divergences,
    efa_installer_step,
    environment,
    image_nccl_environment,
    parse,
    unused_args,
)
from tests.support.paths import ROOT
from tests.support.tools import hadolint_findings

DOCKERFILE = ROOT / software.SERVING_DOCKERFILE
PLUGIN_DIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/efa/lib")
# The image's own settings, beyond the node bootstrap's: which net plugin NCCL opens.
IMAGE_ONLY = ("NCCL_NET_PLUGIN",)


@pytest.fixture(scope="module")
def text() -> str:
    return DOCKERFILE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def instructions(text) -> list[Instruction]:
    return parse(text)


def test_the_recipe_is_where_software_py_says():
    assert software.SERVING_DOCKERFILE == "fmcluster/data/docker/Dockerfile.serving"
    assert DOCKERFILE.is_file()


def test_the_serving_dockerfile_parses_into_one_stage_on_vllms_image(instructions):
    keywords = [i.keyword for i in instructions]
    assert keywords.count("FROM") == 1, "one stage, on vLLM's image"
    assert keywords[: keywords.index("FROM")] == ["ARG"], "only the base image's ARG before FROM"
    (base,) = [i for i in instructions if i.keyword == "FROM"]
    assert base.arguments == "${VLLM_IMAGE}"
    assert arg_defaults(instructions)["VLLM_IMAGE"] == software.VLLM_IMAGE
    assert "RUN" in keywords and "ENV" in keywords


def test_every_arg_has_the_default_software_py_chooses(instructions, text):
    defaults = arg_defaults(instructions)
    assert {n for n, v in defaults.items() if v is None} == {"TARGETARCH"}, "every other ARG has a default"
    assert not divergences(text, software.SERVING_IMAGE_ARGS)
    assert not unused_args(instructions, software.SERVING_IMAGE_ARGS), "declared but not used"
    # The same EFA installer and plugin as the reference image.
    for name in ("EFA_INSTALLER_VERSION", "AWS_OFI_NCCL_VERSION"):
        assert software.SERVING_IMAGE_ARGS[name] == software.IMAGE_ARGS[name]


def test_a_default_that_differs_from_software_py_is_found(text):
    """The check can fail: each of the three defaults changed, one ARG more and one ARG less."""
    expected = software.SERVING_IMAGE_ARGS
    for name, wrong in (("VLLM_IMAGE", "vllm/vllm-openai:v0.1.0"), ("EFA_INSTALLER_VERSION", "1.0.0"),
                        ("AWS_OFI_NCCL_VERSION", "1.0.0")):
        changed = text.replace(f"ARG {name}={expected[name]}\n", f"ARG {name}={wrong}\n")
        assert changed != text, name
        assert divergences(changed, expected) == {name: (wrong, expected[name])}
    extra = text.replace("ARG TARGETARCH\n", "ARG TARGETARCH\nARG UCX_VERSION=1.0\n")
    assert divergences(extra, expected) == {"UCX_VERSION": ("1.0", None)}
    fewer = text.replace(f"ARG AWS_OFI_NCCL_VERSION={expected['AWS_OFI_NCCL_VERSION']}\n", "")
    assert divergences(fewer, expected) == {"AWS_OFI_NCCL_VERSION": (None, expected["AWS_OFI_NCCL_VERSION"])}


def test_the_efa_installer_runs_with_the_container_flags_and_a_signature_check(instructions):
    install = efa_installer_step(instructions)
    assert "apt-get install" in install and " curl " in f"{install} " and " gnupg " in f"{install} ", (
        "curl and gnupg, whatever vLLM's image has")
    assert install.index("apt-get install") < install.index("curl -fsSLO")
    assert "rm -rf /tmp/efa /var/lib/apt/lists/*" in install


def test_aws_ofi_nccl_is_the_installers_bundled_copy_and_is_checked(instructions):
    check_bundled_aws_ofi_nccl(instructions)
    runs = " ".join(i.arguments for i in instructions if i.keyword == "RUN")
    assert "ls /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so" in runs, "the library NCCL_NET_PLUGIN=ofi opens"
    assert "ldconfig" in runs


def test_the_architecture_steps_branch_on_targetarch(instructions):
    assert architecture_branches(instructions) >= 1


def test_the_plugin_is_selected_and_on_the_library_path(instructions):
    """NCCL_NET_PLUGIN=ofi: NCCL opens libnccl-net-ofi.so, the name aws-ofi-nccl always installs
    (v1.21.1 src/Makefile.am); the plugin and libfabric lead the library path, the base image's
    own entries follow (no empty entry, which would be the working directory)."""
    env = environment(instructions)
    assert env["NCCL_NET_PLUGIN"] == "ofi"
    inherited = "${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"  # the base image's, after a colon if any
    ours, _, rest = env["LD_LIBRARY_PATH"].partition(inherited)
    assert rest == "" and env["LD_LIBRARY_PATH"].endswith(inherited)
    assert tuple(ours.split(":")) == PLUGIN_DIRS
    assert "/opt/nccl" not in env["LD_LIBRARY_PATH"], "the NCCL is vLLM's PyTorch wheels' (pip), not a build"


def test_the_nccl_environment_is_the_node_bootstraps(instructions):
    image = image_nccl_environment(instructions, own=IMAGE_ONLY)
    assert not set(IMAGE_ONLY) & image.keys()


def test_vllms_entrypoint_user_and_working_directory_are_kept(instructions):
    keywords = {i.keyword for i in instructions}
    assert not keywords & {"ENTRYPOINT", "CMD", "USER", "WORKDIR"}, "vLLM's ENTRYPOINT [vllm, serve] stays"


def test_the_labels_name_the_versions(instructions):
    labels = {k: v for i in instructions if i.keyword == "LABEL" for k, v in assignments(i.arguments).items()}
    assert labels["io.fmcluster.vllm-image"] == "${VLLM_IMAGE}"
    assert labels["io.fmcluster.efa-installer"] == "${EFA_INSTALLER_VERSION}"
    assert labels["io.fmcluster.aws-ofi-nccl"] == "${AWS_OFI_NCCL_VERSION}"


def test_hadolint_finds_nothing():
    assert hadolint_findings(DOCKERFILE) == ""


def test_the_readme_says_how_to_build_it_and_use_it():
    text = README.read_text(encoding="utf-8")
    assert "## The serving image" in text
    assert f"docker buildx build --platform linux/amd64 -f {software.SERVING_DOCKERFILE}" in text
    assert "serving.image" in text
