"""The acceptance kits run the reference image NAME-reference builds (fmcluster.kits.reference), with
nothing to set: the Slurm kit's nccl and fio batch scripts run with bash against the stand-ins of
tests/support/fake_slurm.py and a fake `aws` (STS's account, ECR's token), and every container
step's import (once a node: the steps share a named container, tests/kits/test_slurm_kit_containers.py)
is done as Enroot v4.1.2 does it, with Enroot's own code (tests/kits/enroot_credentials.sh, held
verbatim to NVIDIA/enroot): the image URI parsed, the user found in the credentials file, the file
chosen and evaluated. The Kubernetes kit's: tests/kits/test_reference_image_kubernetes.py."""

from __future__ import annotations

import copy
import netrc
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fmcluster.kits import jobs, reference
from fmcluster.kits.writer import run as write_kit
from fmcluster.model import reference_image
from fmcluster.model.cluster import resolve
from fmcluster.node import nccl as node_nccl
from fmcluster.node import runtime as node_runtime
from tests.support import fake_slurm, specs
from tests.support.paths import EXAMPLES_DIR

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
HERE = Path(__file__).parent
ENROOT_CODE = HERE / "enroot_credentials.sh"
ENROOT_MIRROR = Path("/work/.mirror/NVIDIA+enroot/repo")  # a git snapshot of NVIDIA/enroot, where there is one
ACCOUNT = "210987654321"  # the node role's account, as the fake STS answers
SPEC_ACCOUNT = "310987654321"
HOSTS = ["gpu-1", "gpu-2"]

FAKE_AWS = fake_slurm.AWS  # STS's account (FAKE_ACCOUNT), ECR's token; each call logged
# each import of a container step on a node (fake_slurm's Pyxis: FAKE_ENROOT_IMPORT), with the step's
# environment (Pyxis passes ENROOT_CONFIG_PATH): the credentials read by Enroot's own code
ENROOT_IMPORT = r'''#!/bin/bash
# an Enroot import's reading of the credentials: ENROOT_CONFIG_PATH as enroot.in defaults it
set -u
ENROOT_CONFIG_PATH=${ENROOT_CONFIG_PATH:-${XDG_CONFIG_HOME:-$HOME/.config}/enroot}
readonly creds_file="${ENROOT_CONFIG_PATH}/.credentials"
source "$ENROOT_CODE"
{ read -r user; read -r registry; read -r image; read -r tag; } < <(docker::_parse_uri "$1")
echo "import user=$user registry=$registry image=$image tag=$tag config=$ENROOT_CONFIG_PATH host=$FAKE_HOSTNAME"
if [[ -d $ENROOT_CONFIG_PATH ]]; then
  echo "mode $(stat -c %a "$ENROOT_CONFIG_PATH") $(stat -c %a "$creds_file" 2>/dev/null)"
  for link in "$ENROOT_CONFIG_PATH"/*.d; do [[ -L $link ]] && echo "link ${link##*/} $(readlink "$link")"; done
fi
if [[ -n $user ]] && fmcluster_uses_file "$user" "$registry"; then
  echo "netrc-begin"; common::evalnetrc "$creds_file" 2>/dev/null; echo "netrc-end"
fi
'''
NCCL_TEST = '#!/bin/bash\necho "$0 on $FAKE_HOSTNAME"\nsleep "${FAKE_NCCL_SECONDS:-0}"\n'
NCCL_TESTS = {f"{op}_perf": NCCL_TEST for op in ("all_reduce", "all_gather", "reduce_scatter")}


def model_of(example: str = "p5-pcs.yaml", **changes):
    data = yaml.safe_load((EXAMPLES_DIR / example).read_text())
    for key, value in changes.items():
        if isinstance(value, dict):
            data[key] = {**data.get(key, {}), **value}
        else:
            data[key] = copy.deepcopy(value)
    return resolve(specs.validated(data))


def run_job(tmp_path: Path, model, test: str = "nccl", *, env: dict[str, str] | None = None,
            signal_after: float | None = None):
    """The group's `test` batch script run as its first node would, every container step's import
    read as Enroot reads it; (the result, the import records, the aws calls, the srun log)."""
    group = model.node_groups[0]
    script = {"nccl": jobs.nccl_sbatch, "fio": jobs.fio_sbatch}[test](model, group)
    if test == "fio":
        script = fake_slurm.relocated(script, model, group, tmp_path, 1)
    tests = tmp_path / "nccl-tests"
    tests.mkdir(exist_ok=True)
    for name, text in NCCL_TESTS.items():
        (tests / name).write_text(text)
        (tests / name).chmod(0o755)
    (tmp_path / "enroot-import.sh").write_text(ENROOT_IMPORT)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    extra = {"aws": FAKE_AWS, "fio": "#!/bin/bash\necho '{\"jobs\": []}'\n"}
    result = fake_slurm.run_batch(script, tmp_path, HOSTS, extra=extra, signal_after=signal_after, timeout=60, env={
        "HOME": str(home), "FAKE_ACCOUNT": ACCOUNT, "NCCL_TESTS": str(tests), "ENROOT_CODE": str(ENROOT_CODE),
        "FAKE_ENROOT_IMPORT": str(tmp_path / "enroot-import.sh"), **(env or {})})
    log = "".join(p.read_text() for p in sorted(tmp_path.glob("import.*")))  # each import's own record
    return result, log, _text(tmp_path / "aws.log").splitlines(), _text(tmp_path / "srun.log")


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def container_steps(sruns: str) -> list[str]:
    """The image of each container step of the srun log (the job's other steps remove containers)."""
    return re.findall(r"^srun image=(\S+)", sruns, re.MULTILINE)


def imports(log: str) -> list[dict]:
    """Each import of the Enroot log: its parsed URI, the config directory's modes and links, and
    the credentials curl would read (None where Enroot passes no file)."""
    found = []
    for block in log.split("import ")[1:]:
        first, *rest = block.splitlines()
        record = dict(field.split("=", 1) for field in first.split())
        record["mode"] = next((line.split()[1:] for line in rest if line.startswith("mode ")), None)
        record["links"] = {line.split()[1]: line.split()[2] for line in rest if line.startswith("link ")}
        text = "\n".join(rest)
        record["netrc"] = (text.split("netrc-begin\n", 1)[1].split("netrc-end", 1)[0]
                           if "netrc-begin" in text else None)
        found.append(record)
    return found


def test_the_job_runs_the_reference_image_in_the_account_of_the_nodes_role(tmp_path):
    """No IMAGE and no account in the spec: STS names the account, every container step runs the
    group's reference image from the cluster's registry, and each import (one a node) gets the
    registry's credentials from the job's own file: user AWS, a fresh token of the region, no other
    line and no other file."""
    model = model_of()
    image = model.reference_image(model.node_groups[0])
    result, log, aws, sruns = run_job(tmp_path, model)
    assert result.returncode == 0, result.stdout
    uri = image.enroot_uri(ACCOUNT, "us-east-1")
    steps = container_steps(sruns)
    assert steps and set(steps) == {uri}
    registry = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"
    found = imports(log)
    assert sorted(r["host"] for r in found) == HOSTS  # each node once (the job's named container)
    config = f"{tmp_path}/{reference.ENROOT_DIR}/4242"
    for record in found:
        assert (record["user"], record["registry"], record["image"], record["tag"], record["config"]) == (
            "AWS", registry, image.repository, image.tag, config)
        assert record["mode"] == ["700", "600"]
        assert record["netrc"] == f"machine {registry} login AWS password ecr-token-us-east-1\n"
        parsed = netrc.netrc(_written(tmp_path, record["netrc"]))  # as a netrc reader takes it
        assert parsed.authenticators(registry) == ("AWS", "", "ecr-token-us-east-1")
    # STS once, for the account; ECR's token once before the steps, then at every import (Enroot
    # runs the password's command)
    assert aws.count("sts get-caller-identity --region us-east-1 --query Account --output text") == 1
    assert aws.count("ecr get-login-password --region us-east-1") == 1 + len(found)
    assert job_dirs(tmp_path) == []  # removed at the end


def job_dirs(tmp_path: Path) -> list[str]:
    """What is left under the kit's .enroot (which itself stays: jobs make their own there at once)."""
    parent = tmp_path / reference.ENROOT_DIR
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evaluated.netrc"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_the_spec_account_names_the_registry_without_sts(tmp_path):
    model = model_of(account=SPEC_ACCOUNT)
    image = model.reference_image(model.node_groups[0])
    script = jobs.nccl_sbatch(model, model.node_groups[0])
    uri = image.enroot_uri(SPEC_ACCOUNT, "us-east-1")
    assert f"IMAGE=${{IMAGE:-docker://$REGISTRY#{image.repository}:{image.tag}}}" in script
    assert f"REGISTRY={SPEC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com" in script
    result, log, aws, sruns = run_job(tmp_path, model)
    assert result.returncode == 0, result.stdout
    assert set(container_steps(sruns)) == {uri}
    assert not [call for call in aws if call.startswith("sts")]
    assert {r["netrc"] for r in imports(log)} == {
        f"machine {SPEC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com login AWS password ecr-token-us-east-1\n"}


def test_only_the_registrys_line_is_written_and_the_users_config_linked(tmp_path):
    """The user's .credentials (literal passwords; a stale line of its own for the same registry,
    which Enroot and curl would take first) is neither copied nor read: the job's file holds the
    registry's line alone, so the import gets the fresh token; the user's hooks.d, mounts.d,
    environ.d are linked in (links, not copies); the user's file is left as it was."""
    own = tmp_path / "home" / ".config" / "enroot"
    (own / "hooks.d").mkdir(parents=True)
    (own / "environ.d").mkdir()
    registry = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"
    mine = ("machine nvcr.io login $oauthtoken password nvapi-secret\n"
            f"machine {registry} login AWS password expired-token-of-yesterday\n"
            "machine authn.nvidia.com login $oauthtoken password nvapi-secret")
    (own / ".credentials").write_text(mine)
    model = model_of()
    result, log, _, _ = run_job(tmp_path, model, "fio")
    assert result.returncode == 0, result.stdout
    found = imports(log)
    assert found
    for record in found:
        assert record["user"] == "AWS"
        assert record["netrc"] == f"machine {registry} login AWS password ecr-token-us-east-1\n"
        assert record["links"] == {"environ.d": str(own / "environ.d"), "hooks.d": str(own / "hooks.d")}
    assert "secret" not in log and "expired" not in log
    assert (own / ".credentials").read_text() == mine
    assert job_dirs(tmp_path) == []


def test_a_users_enroot_config_path_is_linked_not_copied(tmp_path):
    own = tmp_path / "my-enroot"
    (own / "mounts.d").mkdir(parents=True)
    (own / ".credentials").write_text("machine ghcr.io login me password ghp-secret\n")
    result, log, _, _ = run_job(tmp_path, model_of(), env={"ENROOT_CONFIG_PATH": str(own)})
    assert result.returncode == 0, result.stdout
    (record, *_) = imports(log)
    assert record["netrc"].startswith(f"machine {ACCOUNT}.dkr.ecr.") and "ghp-secret" not in log
    assert record["links"] == {"mounts.d": str(own / "mounts.d")}
    assert record["config"] == f"{tmp_path}/{reference.ENROOT_DIR}/4242"


def test_an_enroot_config_path_of_an_earlier_kit_job_is_not_the_users(tmp_path):
    """The submitting shell still has ENROOT_CONFIG_PATH of an earlier kit job (its directory, while
    that job runs, with links of its own): it is ignored, so the links point into the user's own
    directory, not into one that vanishes; with IMAGE elsewhere, Enroot reads the user's own."""
    earlier = tmp_path / reference.ENROOT_DIR / "4100"
    (earlier / "hooks.d").mkdir(parents=True)
    own = tmp_path / "home" / ".config" / "enroot"
    (own / "hooks.d").mkdir(parents=True)
    result, log, _, _ = run_job(tmp_path, model_of(), env={"ENROOT_CONFIG_PATH": str(earlier)})
    assert result.returncode == 0, result.stdout
    assert {r["links"]["hooks.d"] for r in imports(log)} == {str(own / "hooks.d")}
    for old in tmp_path.glob("import.*"):
        old.unlink()
    result, log, _, _ = run_job(tmp_path, model_of(), env={"ENROOT_CONFIG_PATH": str(earlier),
                                                           "IMAGE": "docker://nvcr.io#nvidia/my-nccl:1"})
    assert result.returncode == 0, result.stdout
    assert {r["config"] for r in imports(log)} == {str(own)}


def test_image_overrides_the_reference_image(tmp_path):
    """IMAGE set: it runs, nothing asks STS, and Enroot reads the user's own configuration."""
    image = "docker://nvcr.io#nvidia/my-nccl:1"
    result, log, aws, sruns = run_job(tmp_path, model_of(), env={"IMAGE": image})
    assert result.returncode == 0, result.stdout
    assert set(container_steps(sruns)) == {image}
    assert aws == []
    assert {r["config"] for r in imports(log)} == {str(tmp_path / "home" / ".config" / "enroot")}


def test_image_in_the_clusters_registry_gets_its_credentials(tmp_path):
    """IMAGE of another repository of the spec's account's registry: the registry's credentials too."""
    image = f"docker://{SPEC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com#team/my-nccl:2"
    result, log, _, _ = run_job(tmp_path, model_of(account=SPEC_ACCOUNT), env={"IMAGE": image})
    assert result.returncode == 0, result.stdout
    assert {(r["image"], r["user"]) for r in imports(log)} == {("team/my-nccl", "AWS")}


def test_no_account_fails_in_one_clear_line(tmp_path):
    result, log, _, sruns = run_job(tmp_path, model_of(), env={"FAKE_STS_FAILS": "1"})
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("fmcluster: no AWS account for the reference image: 'aws sts get-caller-identity' on ")
    assert "Unable to locate credentials" in line and "set IMAGE" in line
    assert sruns == "" and log == ""
    assert job_dirs(tmp_path) == []


@pytest.mark.parametrize("test", ["nccl", "fio"])
def test_a_failing_ecr_token_stops_the_job_in_one_clear_line(tmp_path, test):
    """Enroot runs the password's command with its errors to /dev/null (a 401 at import is all one
    would see): the job runs it once before its steps and stops with one line that says where and
    what to check."""
    result, log, aws, sruns = run_job(tmp_path, model_of(), test, env={"FAKE_ECR_FAILS": "1"})
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert re.match(r"fmcluster: no ECR token for the image: '\S*/aws ecr get-login-password --region us-east-1' "
                    r"on \S+ failed \(An error occurred \(AccessDeniedException\) when calling", line), line
    for check in ("node role's ECR permissions", "route from the nodes to ECR", "AWS_* variables in the job's"):
        assert check in line
    assert aws[-1] == "ecr get-login-password --region us-east-1"
    assert sruns == "" and log == "" and job_dirs(tmp_path) == []


def test_the_credentials_go_when_the_job_is_cancelled(tmp_path):
    result, log, _, _ = run_job(tmp_path, model_of(), env={"FAKE_NCCL_SECONDS": "30"}, signal_after=2)
    assert result.returncode == 143
    assert imports(log)
    assert job_dirs(tmp_path) == []


def test_a_requeued_job_replaces_what_its_killed_run_left(tmp_path):
    left = tmp_path / reference.ENROOT_DIR / "4242"
    left.mkdir(parents=True)
    (left / ".credentials").write_text("machine stale login x password y\n")
    result, log, _, _ = run_job(tmp_path, model_of())
    assert result.returncode == 0, result.stdout
    assert "stale" not in log and imports(log)
    assert job_dirs(tmp_path) == []


def test_the_enroot_directory_stays_and_a_failing_mkdir_says_so(tmp_path):
    """The kit's .enroot is never removed (another job may be between its `mkdir -p .enroot` and its
    `mkdir .enroot/JOBID`); a job that cannot make its directory stops with a line that says so."""
    other = tmp_path / reference.ENROOT_DIR / "4100"  # another job's, running
    other.mkdir(parents=True)
    result, _, _, _ = run_job(tmp_path, model_of())
    assert result.returncode == 0, result.stdout
    assert job_dirs(tmp_path) == ["4100"]
    other.rmdir()
    result, _, _, _ = run_job(tmp_path, model_of())
    assert result.returncode == 0 and (tmp_path / reference.ENROOT_DIR).is_dir() and job_dirs(tmp_path) == []
    (tmp_path / reference.ENROOT_DIR).rmdir()
    (tmp_path / reference.ENROOT_DIR).write_text("not a directory")
    (tmp_path / "srun.log").unlink()
    result, _, _, sruns = run_job(tmp_path, model_of())
    assert result.returncode == 1 and container_steps(sruns) == []
    assert (f"fmcluster: cannot make Enroot's configuration directory {tmp_path}/{reference.ENROOT_DIR}/4242 "
            "on ") in result.stdout.splitlines()[-1]


def test_without_a_reference_image_image_is_required(tmp_path):
    model = model_of(images={"reference": False})
    assert model.reference_image(model.node_groups[0]) is None
    result, _, aws, sruns = run_job(tmp_path, model)
    assert result.returncode != 0 and "set IMAGE to an image with nccl-tests and fio" in result.stdout
    assert sruns == "" and aws == []
    result, _, _, sruns = run_job(tmp_path, model, env={"IMAGE": "docker://x#y:1"})
    assert result.returncode == 0 and set(container_steps(sruns)) == {"docker://x#y:1"}


def test_the_smoke_job_keeps_nvidias_pytorch_image():
    model = model_of()
    script = jobs.smoke_sbatch(model, model.node_groups[0])
    assert "REGISTRY" not in script and "ENROOT_CONFIG_PATH" not in script and jobs.PYTORCH_IMAGE in script
    assert node_nccl.NCCL_ENV_FILE in script


def test_enroots_code_is_held_verbatim_to_the_release_nodes_run():
    """Each block of tests/kits/enroot_credentials.sh is in NVIDIA/enroot's file at the commit the
    node images bake (checked where a snapshot of the repository is at hand)."""
    text = ENROOT_CODE.read_text()
    blocks = re.findall(r"^# >>> (\S+)\n(.*?)^# <<<$", text, re.MULTILINE | re.DOTALL)
    assert [path for path, _ in blocks] == ["src/common.sh", "src/docker.sh", "src/docker.sh"]
    assert node_runtime.ENROOT_COMMIT in text and f"v{node_runtime.ENROOT_VERSION}" in text
    # the credentials line is Enroot's documented ECR example (doc/cmd/import.md)
    example = reference.credentials_line("12345.dkr.ecr.eu-west-2.amazonaws.com", "eu-west-2")
    assert example == ("machine 12345.dkr.ecr.eu-west-2.amazonaws.com login AWS password "
                       "$(aws ecr get-login-password --region eu-west-2)")
    if not ENROOT_MIRROR.is_dir():
        pytest.skip(f"no snapshot of NVIDIA/enroot at {ENROOT_MIRROR}")
    blocks.append(("doc/cmd/import.md", f"\n{example}\n"))
    for path, block in blocks:
        upstream = subprocess.run(["git", f"--git-dir={ENROOT_MIRROR}", "show", f"{node_runtime.ENROOT_COMMIT}:{path}"],
                                  capture_output=True, text=True, check=True).stdout
        assert block in upstream, path


# --- the kits' files -----------------------------------------------------------------------------


@pytest.mark.parametrize("example", ["p5-pcs.yaml", "p6e-gb200-eks.yaml"])
def test_the_kit_ships_the_recipe_and_says_which_image_each_group_runs(tmp_path, example):
    model = model_of(example)
    report = write_kit(model, tmp_path / "kit")
    assert report.error is None
    assert (tmp_path / "kit" / reference.RECIPE).read_text() == reference_image.dockerfile()
    readme = (tmp_path / "kit" / "README.md").read_text()
    for group in model.node_groups:
        image = model.reference_image(group)
        if image is not None:
            assert f"| {group.name} | {image.architecture} | `{image.repository}` | `{image.tag}` |" in readme
    assert f"`{model.name}-reference`" in readme and "nothing needs building or pushing" in readme
    assert "IMAGE=" in readme and reference.RECIPE in readme and "docker/README.md" not in readme


def test_a_kit_without_reference_images_says_to_set_image(tmp_path):
    model = model_of(images={"reference": False})
    write_kit(model, tmp_path / "kit")
    readme = (tmp_path / "kit" / "README.md").read_text()
    assert "this cluster builds no reference image" in readme and "nothing needs building" not in readme


def test_the_slurm_readme_says_what_the_credentials_hold_and_what_the_nodes_may_pull(tmp_path):
    """The file holds one line and a command, not a token, and none of the user's own lines; an
    IMAGE in another repository of the registry is refused to the nodes' role (403)."""
    write_kit(model_of(), tmp_path / "kit")
    readme = " ".join((tmp_path / "kit" / "README.md").read_text().split())
    assert ("The file holds one line, the registry's, and no token: its password is a command, "
            "`$(aws ecr get-login-password --region us-east-1)`, which Enroot runs at each import on each node"
            in readme)
    assert "Your own `.credentials` is not copied" in readme and "lines first" not in readme
    assert ("the nodes' role may pull only the reference repositories there, and ECR answers "
            "403 for any other") in readme
    assert "ran out of time" in readme  # what a cancelled or timed-out job leaves
    assert f"`{jobs.CONTAINER_PREFIX}-JOBID`" in readme


@pytest.mark.parametrize("changes", [{"account": SPEC_ACCOUNT}, {"images": {"reference": False}}],
                         ids=["spec-account", "no-reference-image"])
@pytest.mark.parametrize("example", ["p5-pcs.yaml", "p6e-gb200-eks.yaml"])
def test_the_scripts_of_every_variant_pass_shellcheck(tmp_path, example, changes):
    """The examples' kits (no account, reference images) are shellchecked in test_jobs*.py; the others here."""
    write_kit(model_of(example, **changes), tmp_path / "kit")
    scripts = [str(p) for p in (tmp_path / "kit").rglob("*") if p.suffix in (".sh", ".sbatch")]
    assert scripts
    result = subprocess.run([SHELLCHECK, "--shell=bash", *scripts], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
