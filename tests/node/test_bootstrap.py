"""Node bootstrap rendering (fmcluster.node.bootstrap): pure, no CDK. What the scripts do is tested by
running them (tests/node/test_boot_path.py); here: what they are made of, their quoting, their MIME
wrapping, their size and shellcheck.

shellcheck runs on every rendered variant (the verbatim form: the compact one is the same body,
xz and base85) and on every fragment and program. Where shellcheck is missing the test is
skipped locally, and fails in CI (CI=true), so that a CI image without it cannot pass silently.
"""

from __future__ import annotations

import email
import subprocess

import pytest

from fmcluster.facts import catalog
from fmcluster.facts.efa import lnet_efa_interfaces
from fmcluster.node import bootstrap
from fmcluster.node.bootstrap import LustreMount, Metrics
from tests.support.paths import ROOT
from tests.support.stacks import FSX
from tests.support.tools import assert_shellcheck_clean

EFA_FSX = LustreMount(FSX.dns_name, FSX.mount_name, "/fsx", efa=True)
METRICS = Metrics("demo", "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1/api/v1/remote_write",
                  "us-east-1")
VARIANTS = {  # name: (instance type, efa, lustre, metrics)
    "p5-lustre": ("p5.48xlarge", True, FSX, METRICS),
    "p5-efa-lustre": ("p5.48xlarge", True, EFA_FSX, METRICS),
    "p5-no-lustre": ("p5.48xlarge", True, None, None),
    "p5-4xl-lustre": ("p5.4xlarge", True, FSX, None),
    "c7i-lustre": ("c7i.8xlarge", False, FSX, Metrics("demo", "https://x", "us-east-1", slurm=True)),
    "c7i-no-lustre": ("c7i.8xlarge", False, None, None),
    "b300-efa-lustre": ("p6-b300.48xlarge", True, EFA_FSX, METRICS),
}


def render(name: str, compact: bool = True) -> str:
    instance_type, efa, lustre, metrics = VARIANTS[name]
    return bootstrap.node_script(instance_type, efa=efa, lustre=lustre, metrics=metrics, compact=compact)


def _settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def main_steps(script: str) -> list[str]:
    body = bootstrap.unpack(script) if "FMCLUSTER_BOOTSTRAP=" in script else script
    main = body.rsplit("\nmain() {\n", 1)[1].split("\n}", 1)[0]  # the script's, after the embedded programs
    return [line.strip().removeprefix("step ") for line in main.splitlines()]


# --- what each variant is made of -----------------------------------------------------------

@pytest.mark.parametrize("name, steps", [
    ("p5-efa-lustre", ["install_node_ready", "gate_slurmd", "protect_running_jobs", "write_nccl_env",
                       "setup_metrics", "setup_scratch", "setup_lnet_efa", "mount_lustre", "check_node_ready",
                       "finish"]),
    ("p5-lustre", ["install_node_ready", "gate_slurmd", "protect_running_jobs", "write_nccl_env", "setup_metrics",
                   "setup_scratch", "mount_lustre", "check_node_ready", "finish"]),
    ("p5-no-lustre", ["install_node_ready", "gate_slurmd", "protect_running_jobs", "write_nccl_env", "setup_scratch",
                      "check_node_ready", "finish"]),
    ("c7i-no-lustre", ["install_node_ready", "gate_slurmd", "protect_running_jobs", "write_nccl_env",
                       "check_node_ready", "finish"]),
])
def test_steps_of_each_variant(name, steps):
    assert main_steps(render(name)) == steps == main_steps(render(name, compact=False))


@pytest.mark.parametrize("instance_type, efa, expected, absent", [
    ("p5.48xlarge", True, ["FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1", "NCCL_BUFFSIZE=8388608"], []),
    ("p6-b300.48xlarge", True, ["FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1"], []),
    ("c7i.48xlarge", True, ["FI_PROVIDER=efa"], ["FI_EFA_USE_DEVICE_RDMA", "NCCL_BUFFSIZE"]),  # EFA, no GPU
    ("c7i.8xlarge", False, [], ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"]),
    ("p5.48xlarge", False, [], ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"]),  # efa: false in the spec
])
def test_nccl_environment(instance_type, efa, expected, absent):
    env = bootstrap.nccl_environment(catalog.get(instance_type), efa)
    exports = [line.removeprefix("export ") for line in env.splitlines() if line.startswith("export ")]
    for setting in expected:
        assert setting in exports
    assert not [e for e in exports if e.split("=")[0] in absent]
    assert "NCCL_SOCKET_IFNAME=^lo,docker" in exports
    assert all(line.startswith(("#", "export ")) for line in env.splitlines())  # every setting explained


@pytest.mark.parametrize("instance_type, efa, lustre_efa, interfaces", [
    ("p5.48xlarge", True, True, 8), ("p5e.48xlarge", True, True, 8), ("p5en.48xlarge", True, True, 2),
    ("p6-b200.48xlarge", True, True, 2), ("p5.4xlarge", True, True, 1), ("c7i.48xlarge", True, True, 1),
    ("p5.48xlarge", False, True, 0), ("p5.48xlarge", True, False, 0), ("c7i.8xlarge", False, True, 0),
])
def test_lnet_efa_interfaces(instance_type, efa, lustre_efa, interfaces):
    instance = catalog.get(instance_type)
    assert lnet_efa_interfaces(instance, efa=efa, lustre_efa=lustre_efa) == interfaces
    assert instance.lnet_efa_interfaces <= instance.max_efa_interfaces


def test_values_are_shell_quoted():
    """A hostile or token value stays one shell word: no command substitution, no split."""
    token = "${Token[TOKEN.123]}"
    script = bootstrap.node_script("c7i.8xlarge", efa=False,
                                   lustre=LustreMount(token, "x'; rm -rf / #", "/mnt/my fsx"), compact=False)
    settings = _settings(script)
    assert "FSX_SOURCE='${Token[TOKEN.123]}@tcp:/x'\"'\"'; rm -rf / #'" in settings
    assert "FSX_MOUNT_PATH='/mnt/my fsx'" in settings
    out = subprocess.run(["bash", "-c", settings + '\nprintf "%s|%s" "$FSX_SOURCE" "$FSX_MOUNT_PATH"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == f"{token}@tcp:/x'; rm -rf / #|/mnt/my fsx"


def test_compact_settings_without_tokens_are_packed():
    """A compact script keeps only the instance type and the token settings plain; the others
    are the body's first lines, quoted the same."""
    token = "${Token[TOKEN.5]}"
    script = bootstrap.node_script("c7i.8xlarge", efa=False, lustre=LustreMount(token, "abc", "/mnt/my fsx"))
    plain = [line.split("=", 1)[0] for line in _settings(script).splitlines()[1:]]
    assert plain == ["INSTANCE_TYPE", "FSX_SOURCE", "FMCLUSTER_BOOTSTRAP"]
    assert "\nFSX_MOUNT_PATH='/mnt/my fsx'\n" in bootstrap.unpack(script)


def test_tokens_stay_in_the_plain_settings():
    """CDK resolves tokens in the template's text: none may end up inside the packed body."""
    token = "${Token[TOKEN.77]}"
    script = bootstrap.node_script("p5.48xlarge", efa=True, lustre=LustreMount(token, token, "/fsx", efa=True),
                                   metrics=Metrics(token, token, token))
    assert token not in bootstrap.unpack(script) and script.count(token) >= 4


def test_a_setting_cannot_take_two_values():
    program = bootstrap.NodeProgram(catalog.get("p5.48xlarge")).add("nccl.sh", X=1)
    with pytest.raises(ValueError, match="two values"):
        program.add("lustre.sh", X=2)


def test_embedded_programs_keep_their_shebang_and_no_comments():
    text = bootstrap.embed("node_ready", bootstrap.PROGRAMS / "node-ready.sh")
    body = text.split(f"<<'{bootstrap.EMBED_END}'\n", 1)[1].split(f"\n{bootstrap.EMBED_END}\n", 1)[0]
    assert body.startswith("#!/bin/bash\n") and "\n#" not in body.replace("\n# shellcheck", "")


def test_unknown_instance_type():
    with pytest.raises(ValueError, match="not in the instance catalog"):
        bootstrap.node_script("p9.96xlarge", efa=True)


def test_scripts_ship_as_package_data():
    assert {p.name for p in bootstrap.SCRIPTS.glob("*.sh")} == {
        "header.sh", "common.sh", "nccl.sh", "protect.sh", "apt.sh", "ready.sh", "gate-slurmd.sh", "gate-kubelet.sh",
        "gate-drain.sh", "scratch.sh", "lnet.sh", "lustre.sh", "metrics.sh", "textfile.sh", "prolog.sh",
        "containers.sh", "arguments.sh", "lustre-client.sh", "home.sh", "health.sh", "replacement.sh",
        "network-features.sh"}
    assert {p.name for p in bootstrap.PROGRAMS.glob("*.sh")} == {"node-ready.sh", "lnet-efa.sh", "deep-check.sh",
                                                                 "node-health.sh", "request-replacement.sh",
                                                                 "network-features.sh", "slurm-node.sh"}
    pyproject = (ROOT / "pyproject.toml").read_text()
    for pattern in (
            "scripts/boot/*.sh", "scripts/boot/collectors/*.sh", "scripts/boot/programs/*.sh", "scripts/slurm/*.sh"):
        assert f'"{pattern}"' in pyproject


# --- MIME ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_user_data_is_mime_multipart_with_the_script(name):
    instance_type, efa, lustre, metrics = VARIANTS[name]
    text = bootstrap.user_data(instance_type, efa=efa, lustre=lustre, metrics=metrics)
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    assert message["MIME-Version"] == "1.0"
    (part,) = message.get_payload()
    assert part.get_content_type() == "text/x-shellscript"
    assert part.get_content_charset() == "us-ascii"
    assert part.get_filename() == "fmcluster-node.sh"
    assert part.get_payload() == render(name).rstrip("\n")
    assert not message.defects and not part.defects


def test_user_data_is_deterministic():
    assert bootstrap.user_data("p5.48xlarge", efa=True, lustre=FSX, metrics=METRICS) == bootstrap.user_data(
        "p5.48xlarge", efa=True, lustre=FSX, metrics=METRICS)


def test_mime_refuses_the_boundary_and_non_ascii():
    with pytest.raises(ValueError, match="boundary"):
        bootstrap.mime_multipart([("text/x-shellscript", "a.sh", f"echo {bootstrap.BOUNDARY}")])
    with pytest.raises(ValueError, match="ASCII"):
        bootstrap.mime_multipart([("text/x-shellscript", "a.sh", "echo caf\u00e9")])


# --- syntax and shellcheck ------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_script_parses(name, tmp_path):
    for compact in (True, False):
        script = tmp_path / f"node-{compact}.sh"
        script.write_text(render(name, compact))
        subprocess.run(["bash", "-n", str(script)], check=True)
    body = tmp_path / "body.sh"
    body.write_text(bootstrap.unpack(render(name)))
    subprocess.run(["bash", "-n", str(body)], check=True)


def test_rendered_scripts_are_shellcheck_clean(tmp_path):
    scripts = {name: render(name, compact=False) for name in VARIANTS}
    # the loader, around the packed body
    scripts["loader"] = "#!/bin/bash\nROOT=\nFMCLUSTER_BOOTSTRAP=H4sI\n" + bootstrap.BODY_LOADER
    scripts.update({f"program-{p.stem}": p.read_text() for p in bootstrap.PROGRAMS.glob("*.sh")})
    assert_shellcheck_clean(tmp_path, scripts)


def test_container_runtime_scripts_are_shellcheck_clean(tmp_path):
    """The PCS script and the HyperPod lifecycle script with Enroot and Pyxis."""
    from fmcluster.node import lifecycle

    scripts = {"pcs-containers": bootstrap.node_script("p5.48xlarge", efa=True, lustre=FSX, metrics=METRICS,
                                                       compact=False, containers=True, slurm_version="25.05"),
               "hyperpod-containers": lifecycle.entry_script("gpu", "p6e-gb200.36xlarge", efa=True,
                                                             checks=lifecycle.NodeChecks(("/fsx",), containers=True))}
    assert all("setup_containers" in text for text in scripts.values())
    assert_shellcheck_clean(tmp_path, scripts)
