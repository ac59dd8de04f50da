"""Node program rendering (fmcluster.node.program, fmcluster.node.shell, fmcluster.node.nccl): pure, no
CDK. What the scripts do is tested by running them (tests/node/test_boot_path.py); here: what
they are made of, their quoting, their MIME
wrapping, their size and shellcheck. Each variant is a node group of a model resolved from the test
spec (tests/support/nodes.py), rendered as AWS PCS runs it (node lifecycle scripts) or packed as
the compact scripts of user data are (the Amazon EKS node script's form).

shellcheck runs on every rendered variant (the verbatim form: the compact one is the same body,
xz and base85) and on every fragment and program. Where shellcheck is missing the test is
skipped locally, and fails in CI (CI=true), so that a CI image without it cannot pass silently.
"""

from __future__ import annotations

import email
import subprocess

import pytest

from fmcluster.node import eks as eks_node
from fmcluster.node import hyperpod as hyperpod_node
from fmcluster.node import nccl as node_nccl
from fmcluster.node import pcs as pcs_node
from fmcluster.node import program as prog
from fmcluster.node import shell as node_shell
from fmcluster.node.refs import NodeRefs
from tests.support import nodes
from tests.support.nodes import NO_METRICS, REFS
from tests.support.paths import ROOT
from tests.support.specs import paths
from tests.support.tools import assert_shellcheck_clean, phase_scripts

VARIANTS = {  # name: (instance type, the file system: None, over "tcp" or "efa", metrics, the group)
    "p5-lustre": ("p5.48xlarge", "tcp", True, "gpu"),
    "p5-efa-lustre": ("p5.48xlarge", "efa", True, "gpu"),
    "p5-no-lustre": ("p5.48xlarge", None, False, "gpu"),
    "p5-4xl-lustre": ("p5.4xlarge", "tcp", False, "gpu"),
    "c7i-lustre": ("c7i.8xlarge", "tcp", True, "login"),  # the login nodes: the Slurm collector
    "c7i-no-lustre": ("c7i.8xlarge", None, False, "gpu"),  # a CPU compute group
    "b300-efa-lustre": ("p6-b300.48xlarge", "efa", True, "gpu"),
}


def group(name: str):
    """The model and the group of a variant: one node (no network features), login nodes of c7i.8xlarge."""
    instance_type, lustre, _, group_name = VARIANTS[name]
    edits = {"node_groups[0].count": 1, "orchestrator.login.instance_type": "c7i.8xlarge",
             **({"storage.lustre": None} if lustre is None else {"storage.lustre.efa": lustre == "efa"})}
    return nodes.group("pcs", instance_type, edits, name=group_name)


def program(name: str, refs: NodeRefs | None = None) -> prog.NodeProgram:
    return pcs_node.node_program(*group(name), refs or (REFS if VARIANTS[name][2] else NO_METRICS))


def scripts(name: str) -> tuple[pcs_node.LifecycleScript, ...]:
    return pcs_node.scripts(program(name))


def packed(name: str, compact: bool = True) -> str:
    """The variant's program as one script, as the compact user data of Amazon EKS nodes carries one."""
    return program(name).render(node_shell.header(), compact=compact)


def _settings(script: str) -> str:
    return script.split("# Settings of this node group", 1)[1].split("\n\n", 1)[0]


def main_steps(script: str) -> list[str]:
    body = node_shell.unpack(script) if "FMCLUSTER_BOOTSTRAP=" in script else script
    main = body.rsplit("\nmain() {\n", 1)[1].split("\n}", 1)[0]  # the script's, after the embedded programs
    return [line.strip().removeprefix("step ") for line in main.splitlines()]


# --- what each variant is made of -----------------------------------------------------------

CONFIGURE = ["install_node_ready", "gate_slurmd", "protect_running_jobs", "write_nccl_env"]
GPU_CONFIGURE = [*CONFIGURE, "install_node_health", "install_request_replacement", "finish"]


@pytest.mark.parametrize("name, steps", [
    ("p5-efa-lustre", [GPU_CONFIGURE, ["setup_scratch", "setup_lnet_efa", "mount_lustre", "finish"],
                       ["setup_containers", "finish"], ["check_node_ready", "finish"], ["setup_metrics", "finish"]]),
    ("p5-lustre", [GPU_CONFIGURE, ["setup_scratch", "mount_lustre", "finish"], ["setup_containers", "finish"],
                   ["check_node_ready", "finish"], ["setup_metrics", "finish"]]),
    ("p5-no-lustre", [GPU_CONFIGURE, ["setup_scratch", "finish"], ["setup_containers", "finish"],
                      ["check_node_ready", "finish"]]),
    ("c7i-no-lustre", [[*CONFIGURE, "finish"], ["check_node_ready", "finish"]]),
])
def test_steps_of_each_variant(name, steps):
    assert [main_steps(s.text) for s in scripts(name)] == steps
    flat = [step for phase in steps for step in phase if step != "finish"]
    assert sorted(main_steps(packed(name))[:-1]) == sorted(main_steps(packed(name, compact=False))[:-1]) == sorted(
        flat)


@pytest.mark.parametrize("instance_type, efa, expected, absent", [
    ("p5.48xlarge", True, ["FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1", "NCCL_BUFFSIZE=8388608"], []),
    ("p6-b300.48xlarge", True, ["FI_PROVIDER=efa", "FI_EFA_USE_DEVICE_RDMA=1"], []),
    ("c7i.48xlarge", True, ["FI_PROVIDER=efa"], ["FI_EFA_USE_DEVICE_RDMA", "NCCL_BUFFSIZE"]),  # EFA, no GPU
    ("c7i.8xlarge", False, [], ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"]),
    ("p5.48xlarge", False, [], ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA"]),  # efa: false in the spec
])
def test_nccl_environment(instance_type, efa, expected, absent):
    made, gpu = nodes.group("pcs", instance_type, {"node_groups[0].efa": efa})
    env = node_nccl.nccl_environment(gpu.instance, made.node(gpu).efa)
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
    made, gpu = nodes.group("pcs", instance_type, {"node_groups[0].efa": efa, "storage.lustre.efa": lustre_efa})
    assert made.node(gpu).lnet_efa_interfaces == gpu.lnet_efa_interfaces == interfaces
    assert gpu.instance.lnet_efa_interfaces <= gpu.instance.max_efa_interfaces


def test_values_are_shell_quoted():
    """A hostile value stays one shell word: no command substitution, no split."""
    made, gpu = nodes.group("pcs", "c7i.8xlarge", {"storage.lustre.mount_path": "/mnt/fsx"})
    refs = NodeRefs(lustre_dns_name="fs-1.fsx", lustre_mount_name="x'; rm -rf / #")
    (configure, *_) = pcs_node.node_actions(made, gpu, refs)
    settings = _settings(configure.text)
    assert "FSX_SOURCE='fs-1.fsx@tcp:/x'\"'\"'; rm -rf / #'" in settings
    assert "FSX_MOUNT_PATH=/mnt/fsx" in settings
    out = subprocess.run(["bash", "-c", settings + '\nprintf "%s|%s" "$FSX_SOURCE" "$FSX_MOUNT_PATH"'],
                         capture_output=True, text=True, check=True).stdout
    assert out == "fs-1.fsx@tcp:/x'; rm -rf / #|/mnt/fsx"


def test_compact_settings_without_tokens_are_packed():
    """A compact script keeps only the instance type and the token settings plain; the others
    are the body's first lines, quoted the same."""
    token = "${Token[TOKEN.5]}"
    made, gpu = nodes.group("pcs", "c7i.8xlarge", {"storage.lustre.mount_path": "/mnt/fsx"})
    script = pcs_node.node_program(made, gpu, NodeRefs(lustre_dns_name=token, lustre_mount_name="abc")).render(
        node_shell.header(), compact=True)
    plain = [line.split("=", 1)[0] for line in _settings(script).splitlines()[1:]]
    assert plain == ["INSTANCE_TYPE", "FSX_SOURCE", "FMCLUSTER_BOOTSTRAP"]
    assert "\nFSX_MOUNT_PATH=/mnt/fsx\nFSX_MOUNT_OPTIONS=" in node_shell.unpack(script)


def test_tokens_stay_in_the_plain_settings():
    """CDK resolves tokens in the template's text: none may end up inside the packed body."""
    token = "${Token[TOKEN.77]}"
    made, gpu = nodes.group("pcs", "p5.48xlarge", {"storage.lustre.efa": True})
    refs = NodeRefs(lustre_dns_name=token, lustre_mount_name=token, remote_write_url=token, replacement_queue=token)
    script = pcs_node.node_program(made, gpu, refs).render(node_shell.header(), compact=True)
    assert token not in node_shell.unpack(script) and script.count(token) >= 4


def test_a_setting_cannot_take_two_values():
    program = prog.NodeProgram(nodes.group("pcs", "p5.48xlarge")[1].instance).add("nccl.sh", X=1)
    with pytest.raises(ValueError, match="two values"):
        program.add("lustre.sh", X=2)


def test_embedded_programs_keep_their_shebang_and_no_comments():
    text = node_shell.embed("node_ready", node_shell.PROGRAMS / "node-ready.sh")
    body = text.split(f"<<'{node_shell.EMBED_END}'\n", 1)[1].split(f"\n{node_shell.EMBED_END}\n", 1)[0]
    assert body.startswith("#!/bin/bash\n") and "\n#" not in body.replace("\n# shellcheck", "")


def test_unknown_instance_type():
    """A type the catalog does not have never reaches a node script: the spec refuses it."""
    assert "node_groups[0].instance_type" in paths(nodes.spec(edits={"node_groups[0].instance_type": "p9.96xlarge"}))


def test_scripts_ship_as_package_data():
    assert {p.name for p in node_shell.SCRIPTS.glob("*.sh")} == {
        "header.sh", "common.sh", "nccl.sh", "protect.sh", "apt.sh", "ready.sh", "gate-slurmd.sh", "gate-kubelet.sh",
        "gate-drain.sh", "scratch.sh", "lnet.sh", "lustre.sh", "metrics.sh", "textfile.sh", "prolog.sh",
        "containers.sh", "arguments.sh", "lustre-client.sh", "home.sh", "health.sh", "replacement.sh",
        "network-features.sh", "capacity-end.sh", "interruption.sh"}
    assert {p.name for p in node_shell.PROGRAMS.glob("*.sh")} == {"node-ready.sh", "lnet-efa.sh", "deep-check.sh",
                                                                 "node-health.sh", "request-replacement.sh",
                                                                 "network-features.sh", "slurm-node.sh",
                                                                 "capacity-end.sh", "slurm-jobs.sh",
                                                                 "interruption.sh"}
    pyproject = (ROOT / "pyproject.toml").read_text()
    for pattern in (
            "scripts/boot/*.sh", "scripts/boot/collectors/*.sh", "scripts/boot/programs/*.sh", "scripts/slurm/*.sh"):
        assert f'"{pattern}"' in pyproject


# --- MIME ---------------------------------------------------------------------------------

EKS_VARIANTS = {  # name: (instance type, the file system EFA-enabled, observability, the group)
    "p5en": ("p5en.48xlarge", False, True, "gpu"),
    "p5en-efa-lustre": ("p5en.48xlarge", True, True, "gpu"),
    "p5en-unobserved": ("p5en.48xlarge", False, False, "gpu"),
    "p5-4xl": ("p5.4xlarge", False, True, "gpu"),
    "gb200": ("p6e-gb200.36xlarge", True, True, "gpu"),
    "c7i": ("c7i.8xlarge", False, True, "gpu"),  # a CPU group: the expected-GPUs metric only
    "system": ("p5en.48xlarge", False, True, "system"),
}


def eks_user_data(name: str) -> tuple[str, str]:
    """An Amazon EKS group's user data, and the node script it carries (fmcluster.node.eks)."""
    instance_type, lustre_efa, observed, group_name = EKS_VARIANTS[name]
    made, group = nodes.group("eks", instance_type, {"storage.lustre.efa": lustre_efa}, name=group_name)
    refs = REFS if observed else NO_METRICS
    return eks_node.node_user_data(made, group, refs), eks_node.node_script(made, group, refs)


@pytest.mark.parametrize("name", sorted(EKS_VARIANTS))
def test_user_data_is_mime_multipart_with_the_script(name):
    text, script = eks_user_data(name)
    message = email.message_from_string(text)
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    assert message["MIME-Version"] == "1.0"
    parts = {part.get_filename(): part for part in message.get_payload()}
    assert set(parts) <= {eks_node.NODECONFIG_FILE, eks_node.NODE_SCRIPT}
    for part in parts.values():
        assert part.get_content_charset() == "us-ascii" and not part.defects
    part = parts[eks_node.NODE_SCRIPT]
    assert part.get_content_type() == "text/x-shellscript"
    assert part.get_payload() == script.rstrip("\n")
    assert not message.defects


def test_user_data_is_deterministic():
    assert eks_user_data("p5en-efa-lustre") == eks_user_data("p5en-efa-lustre")
    assert pcs_node.user_data() == pcs_node.user_data()


def test_mime_refuses_the_boundary_and_non_ascii():
    with pytest.raises(ValueError, match="boundary"):
        node_shell.mime_multipart([("text/x-shellscript", "a.sh", f"echo {node_shell.BOUNDARY}")])
    with pytest.raises(ValueError, match="ASCII"):
        node_shell.mime_multipart([("text/x-shellscript", "a.sh", "echo caf\u00e9")])


# --- syntax and shellcheck ------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_script_parses(name, tmp_path):
    for i, script in enumerate([*(s.text for s in scripts(name)), packed(name), packed(name, compact=False)]):
        path = tmp_path / f"node-{i}.sh"
        path.write_text(script)
        subprocess.run(["bash", "-n", str(path)], check=True)
    body = tmp_path / "body.sh"
    body.write_text(node_shell.unpack(packed(name)))
    subprocess.run(["bash", "-n", str(body)], check=True)


def test_rendered_scripts_are_shellcheck_clean(tmp_path):
    made = {f"{name}-{s.file_name}": s.text for name in VARIANTS for s in scripts(name)}
    made.update({f"{name}-verbatim": packed(name, compact=False) for name in VARIANTS})
    # the loader, around the packed body
    made["loader"] = "#!/bin/bash\nROOT=\nFMCLUSTER_BOOTSTRAP=H4sI\n" + node_shell.BODY_LOADER
    made.update({f"program-{p.stem}": p.read_text() for p in node_shell.PROGRAMS.glob("*.sh")})
    assert_shellcheck_clean(tmp_path, made)


def test_the_phases_of_each_variant_are_checked_as_one_script():
    """What the shellcheck test above merges: every variant's phases, which differ only in their
    main's steps, into one script that steps through all of them (tests.support.tools.phase_scripts)."""
    made = {f"{name}-{s.file_name}": s.text for name in VARIANTS for s in scripts(name)}
    texts, phases = phase_scripts(made)
    assert sorted(phases) == sorted(f"{name}-{scripts(name)[0].file_name}+phases" for name in VARIANTS)
    assert sorted(n for names in phases.values() for n in names) == sorted(made)
    for name, members in phases.items():
        merged = texts[name].splitlines()
        for member in members:  # each phase: the merged script but for its main's steps, and those among them
            lines = made[member].splitlines()
            assert [line for line in lines if not line.startswith("  step ")] == \
                [line for line in merged if not line.startswith("  step ")]
            assert {line for line in lines if line.startswith("  step ")} <= set(merged)


TOY_HEAD = '#!/bin/bash\nstep() { "$1"; }\nfinish() { :; }\none() { :; }\ntwo() { :; }\n'


def toy(head: str, *steps: str) -> str:
    return "\n".join([head.rstrip("\n"), *node_shell.main_lines(steps)])


def test_a_finding_in_one_phase_is_found_and_named(tmp_path):
    """A phase whose text before its main differs from the others' is checked on its own; a finding
    in the text they share names the merged script and its phases."""
    for run in ("clean", "one", "shared"):
        (tmp_path / run).mkdir()
    clean = {"toy-one": toy(TOY_HEAD, "one"), "toy-two": toy(TOY_HEAD, "two")}
    assert_shellcheck_clean(tmp_path / "clean", clean)
    assert len(phase_scripts(clean)[0]) == 1
    faulty = {**clean, "toy-two": toy(TOY_HEAD + "echo $1\n", "two")}
    assert len(phase_scripts(faulty)[0]) == 2
    with pytest.raises(AssertionError, match=r"(?s)toy-two\.sh.*SC2086"):
        assert_shellcheck_clean(tmp_path / "one", faulty)
    shared = {name: text.replace("two() { :; }", "two() { :; }\necho $1") for name, text in clean.items()}
    with pytest.raises(AssertionError, match=r"(?s)toy-one\+phases\.sh.*SC2086.*the phases toy-one, toy-two"):
        assert_shellcheck_clean(tmp_path / "shared", shared)


def test_container_runtime_scripts_are_shellcheck_clean(tmp_path):
    """The PCS script and the HyperPod lifecycle script with Enroot and Pyxis."""

    made = {"pcs-containers": packed("p5-lustre", compact=False),
            "hyperpod-containers": hyperpod_node.entry_script(*nodes.group("hyperpod-slurm", "p6-b200.48xlarge"), REFS)}
    assert all("setup_containers" in text for text in made.values())
    assert_shellcheck_clean(tmp_path, made)
