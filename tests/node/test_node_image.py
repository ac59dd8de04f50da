"""The node image's documents (fmcluster.node.image), read and run.

Read: each document parses, follows the AWSTOE component document format (the schema in
tests/support/awstoe_document.schema.json, written from the Image Builder User Guide), fits
Image Builder's inline component data, and the digest names the recipe: it changes with the pins,
the revision and the base, and only with what the image holds.

Run: the build phase (bake.sh) really runs in a sandboxed node (tests/support/sandbox.py: real git,
make and gcc against the stand-ins of tests/support/standins.py) and leaves Enroot, the Pyxis plugin
and the manifest; the test phase (check.sh) passes on that baked root with the real srun (Debian's
Slurm, which loads the stand-in Pyxis through a plugstack.conf), node exporter and Prometheus, and
fails, saying why, when a piece is missing or broken. For AWS PCS the srun is that of the Slurm
releases PCS runs (24.11 and 26.05), laid out as PCS lays them out and without munge
(tests/support/slurm_roots.py): the check passes with auth/slurm and fails as it failed on every
PCS deploy when it asks for munge.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from fmcluster.facts import images
from fmcluster.node import image as node_image
from fmcluster.node import runtime as node_runtime
from tests.support import slurm_roots, standins
from tests.support.paths import ROOT
from tests.support.sandbox import (
    IMAGE_PCS_SLURM,
    IMAGE_SLURM_PREFIXES,
    Sandbox,
    Scenario,
    bake,
    baked_files,
    document_script,
    pcs_slurm_command,
)
from tests.support.sandbox import (
    node_image as image_of,
)
from tests.support.slurm_cluster import find, free_ports
from tests.support.tools import assert_shellcheck_clean

SCHEMA = json.loads((ROOT / "tests/support/awstoe_document.schema.json").read_text())
RELEASES = sorted(IMAGE_SLURM_PREFIXES)  # jammy (SageMaker HyperPod), noble (AWS PCS)


@pytest.fixture(autouse=True)
def standin_pins(monkeypatch):
    """The documents pin the stand-ins' commits (as tests/node/test_boot_path.py's scripts do)."""
    for name, value in standins.pristine().pins().items():
        monkeypatch.setattr(node_runtime, name, value)


def cfn_schema(type_name: str) -> dict:
    """cfn-lint's resource schema of `type_name` (its files are named by a hash)."""
    import cfnlint

    for path in (Path(cfnlint.__file__).parent / "data/schemas/resources").glob("*.json"):
        if f'"{type_name}"' in path.read_text():
            schema = json.loads(path.read_text())
            if schema.get("typeName") == type_name:
                return schema
    raise AssertionError(f"cfn-lint has no schema of {type_name}")


def manifest(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


# --- the documents, read ----------------------------------------------------------------------

@pytest.mark.parametrize("release", RELEASES)
def test_documents_follow_the_awstoe_format(release):
    documents = node_image.documents(image_of(release))
    for text, phase in ((documents.build, "build"), (documents.test, "test")):
        document = yaml.safe_load(text)
        jsonschema.validate(document, SCHEMA)
        assert document["schemaVersion"] == 1.0 and [p["name"] for p in document["phases"]] == [phase]
        ((step,),) = [document["phases"][0]["steps"]]
        assert step["action"] == "ExecuteBash" and step["onFailure"] == "Abort"
        script = document_script(text)
        assert script.startswith("#!/bin/bash\nset -euo pipefail\n")
        assert "      - |\n        #!/bin/bash\n" in text  # a literal block scalar, as written
        assert "{{" not in script  # AWSTOE would expand it


def test_the_schema_catches_what_awstoe_refuses():
    """The schema is no formality: a document AWSTOE refuses fails it."""
    document = yaml.safe_load(node_image.documents(image_of("noble")).build)
    broken = [
        {k: v for k, v in document.items() if k != "schemaVersion"},
        {**document, "phases": [{**document["phases"][0], "name": "bake"}]},
        {**document, "phases": [{"name": "build", "steps": [{**document["phases"][0]["steps"][0],
                                                             "timeoutSeconds": 0}]}]},
        {**document, "phases": [{"name": "build", "steps": [{**document["phases"][0]["steps"][0],
                                                             "inputs": {"command": ["true"]}}]}]},
    ]
    for bad in broken:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, SCHEMA)


@pytest.mark.parametrize("release", RELEASES)
def test_documents_fit_the_component_data_limit_without_comments(release):
    limit = cfn_schema("AWS::ImageBuilder::Component")["properties"]["Data"]["maxLength"]
    assert node_image.COMPONENT_DATA_LIMIT == limit == 16000
    documents = node_image.documents(image_of(release))
    for text in (documents.build, documents.test):
        assert len(text) <= limit, len(text)
        body = document_script(text).splitlines()[1:]
        assert not [line for line in body if line.lstrip().startswith("#") and "# shellcheck " not in line]


def test_documents_over_the_limit_are_refused(monkeypatch):
    monkeypatch.setattr(node_image, "COMPONENT_DATA_LIMIT", 2000)
    with pytest.raises(ValueError, match="over Image Builder's 2000"):
        node_image.documents(image_of("noble"))


def test_scripts_are_shellcheck_clean(tmp_path):
    scripts = {}
    for release in RELEASES:
        documents = node_image.documents(image_of(release))
        scripts[f"bake-{release}"] = document_script(documents.build)
        scripts[f"check-{release}"] = document_script(documents.test)
    assert_shellcheck_clean(tmp_path, scripts)


def test_the_digest_names_the_recipe(monkeypatch):
    image = image_of("noble")
    digest = node_image.documents(image).digest
    assert re.fullmatch(r"[0-9a-f]{64}", digest) and node_image.documents(image).digest == digest
    # recorded in the image's manifest by the build phase
    settings = document_script(node_image.documents(image).build).splitlines()
    assert {f"IMAGE_DIGEST={digest}", f"IMAGE_DIGEST='{digest}'"} & set(settings)  # quoted when it starts a word
    # what does not change the image does not change the digest
    for same in ({"groups": ("a", "b")}, {"build_instance_type": "c6i.4xlarge"}, {"encrypted": True}):
        assert node_image.documents(dataclasses.replace(image, **same)).digest == digest, same
    changed = {
        "revision": dataclasses.replace(image, revision=2),
        "base": dataclasses.replace(image, base=images.Base("pcs", "x86_64", "/aws/service/pcs/other/ami-id")),
        "architecture": dataclasses.replace(image, architecture="arm64", base=images.base("pcs", "arm64")),
        "slurm": dataclasses.replace(image, slurm_prefix="/opt/aws/pcs/scheduler/slurm-25.11"),
    }
    digests = {name: node_image.documents(other).digest for name, other in changed.items()}
    for name, pin in (("ENROOT_COMMIT", "1" * 40), ("PYXIS_COMMIT", "2" * 40), ("PYXIS_TAG", "v0.25.0"),
                      ("ENROOT_VERSION", "4.2.0")):
        with monkeypatch.context() as patch:
            patch.setattr(node_runtime, name, pin)
            digests[name] = node_image.documents(image).digest
    assert digest not in digests.values() and len(set(digests.values())) == len(digests), digests


# --- the build phase, run -----------------------------------------------------------------------

@pytest.mark.parametrize("release", RELEASES)
def test_bake_leaves_enroot_pyxis_and_the_manifest(release):
    baked = baked_files(release)  # the bake of this test process (tests/support/sandbox.py)
    prefix = IMAGE_SLURM_PREFIXES[release]
    root = baked / "root"
    upstream = standins.pristine()
    assert manifest((root / node_runtime.IMAGE_MANIFEST.lstrip("/")).read_text()) == {
        "IMAGE_KEY": image_of(release).key, "IMAGE_DIGEST": node_image.documents(image_of(release)).digest,
        "ENROOT_VERSION": node_runtime.ENROOT_VERSION, "ENROOT_COMMIT": upstream.enroot_commit,
        "PYXIS_TAG": node_runtime.PYXIS_TAG, "PYXIS_COMMIT": upstream.pyxis_commit, "SLURM_PREFIX": prefix,
        "PYXIS_PLUGIN": f"{prefix}/lib/slurm/spank_pyxis.so",
        "NODE_EXPORTER_VERSION": {"noble": "1.7.0-1ubuntu0.1", "jammy": "1.3.1-1ubuntu0.1"}[release],
        "PROMETHEUS_VERSION": {"noble": "2.45.3+ds-2ubuntu0.1", "jammy": "2.31.2+ds1-1ubuntu0.1"}[release]}
    assert (root / "usr/bin/enroot").exists() and (root / "etc/apparmor.d/enroot").exists()
    assert (root / prefix.lstrip("/") / "lib/slurm/spank_pyxis.so").read_bytes().startswith(b"\x7fELF")
    assert (baked / "state/enroot-caps").read_text().count("cap_sys_admin") == 2  # make setcap
    assert not (root / node_image.BUILD_DIR.lstrip("/")).exists()  # the sources are gone
    assert "prometheus.service" in (baked / "state/package-units").read_text()


def test_bake_installs_the_pinned_packages_waiting_for_the_dpkg_lock(tmp_path):
    node = Sandbox(tmp_path, Scenario(image="bare", dpkg_lock_until=100, nvme_disks=0, efa_devices=0))
    result = bake(node)
    assert result.returncode == 0, result.stderr
    installs = [line for line in node.lines("apt-get") if " install " in line]
    assert installs[-1].endswith(f" {node_runtime.CONTAINER_PACKAGES} prometheus-node-exporter=1.7.0-1* "
                                 "prometheus=2.45.3+ds-2*")
    assert all("DPkg::Lock::Timeout=300" in line for line in node.lines("apt-get"))
    assert [c for c in node.calls("sleep") if c.args == (str(node_image.APT_SETTINGS["APT_RETRY_SECONDS"]),)]
    assert "systemctl disable prometheus.service prometheus-node-exporter.service" in node.lines("systemctl")
    clones = [line.replace(str(node.root), "") for line in node.lines("git") if line.startswith("git clone")]
    assert clones == [
        f"git clone -q --depth 1 --recurse-submodules --branch v{node_runtime.ENROOT_VERSION} "
        f"{node_runtime.ENROOT_REPOSITORY} {node_image.BUILD_DIR}/enroot",
        f"git clone -q --depth 1 --recurse-submodules --branch {node_runtime.PYXIS_TAG} "
        f"{node_runtime.PYXIS_REPOSITORY} {node_image.BUILD_DIR}/pyxis"]
    pyxis = [line.replace(str(node.root), "") for line in node.lines("make") if "/pyxis" in line]
    assert pyxis[-1].endswith(f"install DESTDIR= prefix=/usr/local libdir={IMAGE_SLURM_PREFIXES['noble']}/lib")


@pytest.mark.parametrize("change, message", [
    ({"git_moved_tags": ("enroot",)}, "not the pinned"),  # the tag moved: nothing built
    ({"enroot_submodules": (("deps/musl", "other"),)}, "not the pinned"),
    ({"git_moved_tags": ("pyxis",)}, "pyxis v0.24.0 is "),
    ({"slurm_headers": False}, "no Slurm headers"),
    ({"os_release": "focal"}, "no pinned exporter packages for the Ubuntu release 'focal'"),
    ({"apt_fails": True}, "apt-get update -q failed 5 times"),
])
def test_a_bake_that_cannot_verify_or_build_fails_without_a_manifest(tmp_path, change, message):
    node = Sandbox(tmp_path, Scenario(**{"image": "bare", "nvme_disks": 0, "efa_devices": 0, **change}))
    result = bake(node, image_of("noble"))
    assert result.returncode != 0 and message in result.stderr, result.stderr
    assert not node.exists(node_runtime.IMAGE_MANIFEST)


def test_the_bake_retries_its_clones(tmp_path):
    node = Sandbox(tmp_path, Scenario(image="bare", download_fails=2, nvme_disks=0, efa_devices=0))
    result = bake(node)
    assert result.returncode == 0, result.stderr
    assert "git_clone failed (attempt 2 of 5)" in result.stderr and node.exists(node_runtime.IMAGE_MANIFEST)


# --- the test phase, run on the baked root ------------------------------------------------------

def require_tools(*slurm_versions: str) -> None:
    """The programs the check runs, and the roots of the PCS Slurm releases `slurm_versions`."""
    missing = [c for c in ("srun", "prometheus-node-exporter", "prometheus") if find(c) is None]
    message = (f"the image check needs {', '.join(missing)} (Debian: slurm-client prometheus "
               "prometheus-node-exporter)") if missing else ""
    for version in slurm_versions:
        try:
            slurm_roots.root(version)
        except slurm_roots.Missing as exc:
            message = str(exc)
    if message:
        import os

        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def checked_node(tmp_path, release="noble") -> tuple[Sandbox, str]:
    """A node launched from the baked image (its root as the bake left it), with srun where the
    image's Slurm has it: for AWS PCS, the real srun of its release's Slurm root, without munge
    (tests/support/slurm_roots.py), whose headers the stand-in Pyxis was built against; for
    HyperPod, this machine's, with munge. The test phase's script is on a free loopback port."""
    require_tools(*([IMAGE_PCS_SLURM] if release == "noble" else []))
    node = Sandbox(tmp_path, Scenario(os_release=release, nvme_disks=0, efa_devices=0))
    prefix = IMAGE_SLURM_PREFIXES[release]
    if release == "noble":  # AWS PCS: its Slurm, without munge, in the root of that release
        pcs_slurm_command(node, prefix, "srun")
    else:  # HyperPod's Slurm runs munge: this machine's
        (node.root / prefix.lstrip("/") / "bin").mkdir(parents=True, exist_ok=True)
        (node.root / prefix.lstrip("/") / "bin/srun").symlink_to(find("srun"))
    (port,) = free_ports(1)
    script = standins.with_pins(document_script(node_image.documents(image_of(release)).test), node.upstream)
    script = re.sub(r"^CHECK_EXPORTER_PORT=.*$", f"CHECK_EXPORTER_PORT={port}", script, count=1, flags=re.MULTILINE)
    return node, script


@pytest.mark.parametrize("release", RELEASES)
def test_check_passes_on_the_baked_image(tmp_path, release):
    node, script = checked_node(tmp_path, release)
    result = node.run(script, name="check.sh")
    assert result.returncode == 0, result.stderr
    assert f"image {image_of(release).key}: Enroot 4.1.2, Pyxis against {IMAGE_SLURM_PREFIXES[release]}" in (
        result.stderr)


# --- the test phase on the Slurm releases AWS PCS runs, as PCS lays them out ------------------------

def pcs_checked_node(tmp_path, version: str, srun_of: str | None = None,
                     auth: tuple[str, str] | None = None) -> tuple[Sandbox, str]:
    """A PCS node image baked against Slurm `version` (its headers: the Slurm root of that release,
    tests/support/slurm_roots.py), checked with the srun of that root (or of `srun_of`'s), whose
    Slurm has no munge; `auth`: the AuthType and CredType the check writes instead of the plane's."""
    require_tools(version, *([srun_of] if srun_of else []))
    prefix = slurm_roots.prefix(version)
    node = Sandbox(tmp_path, Scenario(os_release="noble", nvme_disks=0, efa_devices=0, image_slurm_prefix=prefix))
    pcs_slurm_command(node, prefix, "srun", release=srun_of)
    (port,) = free_ports(1)
    image = image_of("noble", slurm_prefix=prefix)
    script = standins.with_pins(document_script(node_image.documents(image).test), node.upstream)
    script = re.sub(r"^CHECK_EXPORTER_PORT=.*$", f"CHECK_EXPORTER_PORT={port}", script, count=1, flags=re.MULTILINE)
    if auth is not None:
        for name, value in zip(("CHECK_SLURM_AUTH", "CHECK_SLURM_CRED"), auth, strict=True):
            script = re.sub(rf"^{name}=.*$", f"{name}={value}", script, count=1, flags=re.MULTILINE)
    return node, script


@pytest.mark.parametrize("version", slurm_roots.versions())
def test_check_passes_on_the_slurm_pcs_runs(tmp_path, version):
    """Pyxis built against the PCS prefix's headers loads into that Slurm's srun, which
    authenticates with auth/slurm: its munge plugins are not there, as on a PCS node."""
    node, script = pcs_checked_node(tmp_path, version)
    result = node.run(script, name="check.sh")
    assert result.returncode == 0, result.stderr
    assert f"Pyxis against /opt/aws/pcs/scheduler/slurm-{version}, the exporters work" in result.stderr


@pytest.mark.parametrize("version", slurm_roots.versions())
def test_a_check_that_asks_for_munge_fails_on_pcs_slurm(tmp_path, version):
    """What every default PCS deploy did before: srun dies loading auth/munge before it reads
    --help, the test phase fails and no image is published."""
    node, script = pcs_checked_node(tmp_path, version, auth=("auth/munge", "cred/munge"))
    result = node.run(script, name="check.sh")
    assert result.returncode == 1, result.stderr
    assert "does not load Pyxis" in result.stderr and "auth/munge" in result.stderr


def test_a_pyxis_built_against_another_slurm_fails_the_check(tmp_path):
    """The plugin must be built for the Slurm that loads it: 24.11's in 26.05's srun is refused."""
    old, new = slurm_roots.versions()[0], slurm_roots.versions()[-1]
    node, script = pcs_checked_node(tmp_path, old, srun_of=new)
    result = node.run(script, name="check.sh")
    assert result.returncode == 1 and "does not load Pyxis" in result.stderr, result.stderr
    assert "Incompatible plugin version" in result.stderr


PLUGIN = f"{IMAGE_SLURM_PREFIXES['noble']}/lib/slurm/spank_pyxis.so"


def _remove(node: Sandbox, path: str) -> None:
    (node.root / path.lstrip("/")).unlink()


def _not_a_plugin(node: Sandbox, path: str) -> None:
    (node.root / path.lstrip("/")).write_bytes(b"not an ELF file\n")


def _edit(node: Sandbox, path: str, old: str, new: str) -> None:
    file = node.root / path.lstrip("/")
    assert old in file.read_text()
    file.write_text(file.read_text().replace(old, new))


def _failing(node: Sandbox, command: str) -> None:
    (node.bin / command).write_text("#!/bin/sh\necho broken >&2\nexit 1\n")
    (node.bin / command).chmod(0o755)


@pytest.mark.parametrize("breakage, message", [
    (lambda node: _remove(node, "/usr/bin/enroot"), "error: enroot does not run"),
    (lambda node: _remove(node, PLUGIN), f"error: no Pyxis plugin {PLUGIN}"),
    (lambda node: _not_a_plugin(node, PLUGIN), "does not load Pyxis"),
    (lambda node: _remove(node, node_runtime.IMAGE_MANIFEST), "error: no manifest /etc/fmcluster/image.env"),
    (lambda node: _edit(node, node_runtime.IMAGE_MANIFEST, "PYXIS_TAG=v0.24.0", "PYXIS_TAG=v0.23.0"),
     "error: the manifest's PYXIS_TAG is 'v0.23.0', not v0.24.0"),
    (lambda node: _failing(node, "prometheus-node-exporter"), "prometheus-node-exporter did not serve /metrics"),
    (lambda node: _failing(node, "prometheus"), "error: prometheus --version fails: broken"),
], ids=["enroot", "plugin", "plugin-that-does-not-load", "manifest", "manifest-pins", "node-exporter",
        "prometheus"])
def test_check_fails_when_a_piece_is_missing(tmp_path, breakage, message):
    node, script = checked_node(tmp_path)
    breakage(node)
    result = node.run(script, name="check.sh")
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert "error: image pcs-x86_64 failed check_" in result.stderr


def _deep_checked_node(tmp_path, *, dcgmi: bool, nccl: bool) -> tuple[Sandbox, str]:
    """A PCS node image whose GPU nodes run the deep check: its test phase looks for DCGM and nccl-tests."""
    node, _ = checked_node(tmp_path)
    image = dataclasses.replace(image_of("noble"), deep_check_tools=True)
    script = standins.with_pins(document_script(node_image.documents(image).test), node.upstream)
    (port,) = free_ports(1)
    script = re.sub(r"^CHECK_EXPORTER_PORT=.*$", f"CHECK_EXPORTER_PORT={port}", script, count=1, flags=re.MULTILINE)
    (node.bin / "dcgmi").unlink(missing_ok=True)  # the sandbox's recording fake: a link to the shared fakes
    if dcgmi:
        (node.bin / "dcgmi").write_text("#!/bin/sh\nexit 0\n")
        (node.bin / "dcgmi").chmod(0o755)
    if nccl:
        tests = node.root / "usr/local/cuda-13.2/efa/test-cuda-13.2"
        tests.mkdir(parents=True)
        (tests / "all_reduce_perf").write_text("#!/bin/sh\n")
        (tests / "all_reduce_perf").chmod(0o755)
    return node, script


def test_check_finds_the_deep_check_tools(tmp_path):
    """Where GPU nodes run the deep check, the image holds dcgmi and the DLAMI's nccl-tests."""
    node, script = _deep_checked_node(tmp_path, dcgmi=True, nccl=True)
    result = node.run(script, name="check.sh")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("dcgmi, nccl, message", [
    (True, False, "error: no nccl-tests all_reduce_perf at /usr/local/cuda/efa/test-cuda-*/all_reduce_perf"),
    (False, True, "error: no dcgmi (DCGM)"),
], ids=["no-nccl-tests", "no-dcgmi"])
def test_check_fails_an_image_without_the_deep_check_tools(tmp_path, dcgmi, nccl, message):
    """A base image without them would leave every new GPU node not ready: the image fails instead."""
    node, script = _deep_checked_node(tmp_path, dcgmi=dcgmi, nccl=nccl)
    result = node.run(script, name="check.sh")
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert "failed check_deep_tools" in result.stderr


def test_model_asks_for_the_deep_check_tools_only_on_pcs_gpu_images():
    from fmcluster.model.cluster import resolve
    from tests.support.specs import base_spec, on, validated, with_

    assert all(i.deep_check_tools for i in resolve(validated(base_spec())).images)
    off = with_(base_spec(), "health.deep_check", False)
    assert not any(i.deep_check_tools for i in resolve(validated(off)).images)
    assert not any(i.deep_check_tools for i in resolve(validated(on("hyperpod-slurm"))).images)
