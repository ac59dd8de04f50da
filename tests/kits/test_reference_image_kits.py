"""The acceptance kits run the reference image NAME-images builds (fmcluster.kits.reference), with
nothing to set: the Slurm kit's nccl and fio batch scripts run with bash against the stand-ins of
tests/support/fake_slurm.py and a fake `aws` (STS's account, ECR's token), and every container
step's import is done as Enroot v4.1.2 does it, with Enroot's own code (tests/kits/enroot_credentials.sh,
held verbatim to NVIDIA/enroot): the image URI parsed, the user found in the credentials file, the
file chosen and evaluated; the Kubernetes kit's manifests and submit-all.sh, per group and
architecture, validated as tests/kits/test_jobs_kubernetes.py does."""

from __future__ import annotations

import copy
import netrc
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from fmcluster.kits import jobs, reference
from fmcluster.kits import kubernetes as jobs_kubernetes
from fmcluster.kits.writer import run as write_kit
from fmcluster.model import reference_image
from fmcluster.model.cluster import resolve
from fmcluster.node import bootstrap
from tests.support import fake_slurm, specs
from tests.support.paths import EXAMPLES_DIR

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
HERE = Path(__file__).parent
ENROOT_CODE = HERE / "enroot_credentials.sh"
ENROOT_MIRROR = Path("/work/.mirror/NVIDIA+enroot/repo")  # a git snapshot of NVIDIA/enroot, where there is one
ACCOUNT = "210987654321"  # the node role's account, as the fake STS answers
SPEC_ACCOUNT = "310987654321"
HOSTS = ["gpu-1", "gpu-2"]

# aws: `sts get-caller-identity` answers FAKE_ACCOUNT (or fails as the CLI does without
# credentials, FAKE_STS_FAILS=1); `ecr get-login-password` a token of the region; each call logged
FAKE_AWS = r'''#!/bin/bash
printf '%s\n' "$*" >>"$FAKE_SLURM_DIR/aws.log"
case "$1 $2" in
  "sts get-caller-identity")
    if [[ ${FAKE_STS_FAILS:-0} == 1 ]]; then
      printf '\nUnable to locate credentials. You can configure credentials by running "aws configure".\n' >&2
      exit 253
    fi
    echo "$FAKE_ACCOUNT" ;;
  "ecr get-login-password") echo "ecr-token-${4:?}" ;;
  *) echo "fake aws: $*" >&2; exit 2 ;;
esac
'''
# srun: before the step, each container image imported as Enroot would on the node, with the
# step's environment (Pyxis passes ENROOT_CONFIG_PATH), by Enroot's own code; then the stand-in srun
SRUN_WITH_ENROOT = r'''#!/bin/bash
for arg; do
  [[ $arg == --container-image=* ]] || continue
  bash "$ENROOT_IMPORT" "${arg#*=}" >"$(mktemp "$FAKE_SLURM_DIR/import.XXXXXX")" 2>&1
done
exec srun-standin "$@"
'''
ENROOT_IMPORT = r'''#!/bin/bash
# an Enroot import's reading of the credentials: ENROOT_CONFIG_PATH as enroot.in defaults it
set -u
ENROOT_CONFIG_PATH=${ENROOT_CONFIG_PATH:-${XDG_CONFIG_HOME:-$HOME/.config}/enroot}
readonly creds_file="${ENROOT_CONFIG_PATH}/.credentials"
source "$ENROOT_CODE"
{ read -r user; read -r registry; read -r image; read -r tag; } < <(docker::_parse_uri "$1")
echo "import user=$user registry=$registry image=$image tag=$tag config=$ENROOT_CONFIG_PATH"
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
    extra = {"aws": FAKE_AWS, "srun": SRUN_WITH_ENROOT, "srun-standin": fake_slurm.SRUN,
             "fio": "#!/bin/bash\necho '{\"jobs\": []}'\n"}
    result = fake_slurm.run_batch(script, tmp_path, HOSTS, extra=extra, signal_after=signal_after, timeout=60, env={
        "HOME": str(home), "FAKE_ACCOUNT": ACCOUNT, "NCCL_TESTS": str(tests), "ENROOT_CODE": str(ENROOT_CODE),
        "ENROOT_IMPORT": str(tmp_path / "enroot-import.sh"), **(env or {})})
    log = "".join(p.read_text() for p in sorted(tmp_path.glob("import.*")))  # each import's own record
    return result, log, _text(tmp_path / "aws.log").splitlines(), _text(tmp_path / "srun.log")


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


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
    group's reference image from the cluster's registry, and each import gets the registry's
    credentials from the job's own file: user AWS, a fresh token of the region, no other file."""
    model = model_of()
    image = model.reference_image(model.node_groups[0])
    result, log, aws, sruns = run_job(tmp_path, model)
    assert result.returncode == 0, result.stdout
    uri = image.enroot_uri(ACCOUNT, "us-east-1")
    steps = re.findall(r"^srun image=(\S*)", sruns, re.MULTILINE)
    assert steps and set(steps) == {uri}
    registry = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"
    found = imports(log)
    assert len(found) == len(steps)
    config = f"{tmp_path}/{reference.ENROOT_DIR}/4242"
    for record in found:
        assert (record["user"], record["registry"], record["image"], record["tag"], record["config"]) == (
            "AWS", registry, image.repository, image.tag, config)
        assert record["mode"] == ["700", "600"]
        assert record["netrc"] == f"machine {registry} login AWS password ecr-token-us-east-1\n"
        parsed = netrc.netrc(_written(tmp_path, record["netrc"]))  # as a netrc reader takes it
        assert parsed.authenticators(registry) == ("AWS", "", "ecr-token-us-east-1")
    # STS once, for the account; ECR's token at every import (Enroot runs the password's command)
    assert aws.count("sts get-caller-identity --region us-east-1 --query Account --output text") == 1
    assert aws.count("ecr get-login-password --region us-east-1") == len(steps)
    assert not (tmp_path / reference.ENROOT_DIR).exists()  # removed at the end


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
    assert set(re.findall(r"^srun image=(\S*)", sruns, re.MULTILINE)) == {uri}
    assert not [call for call in aws if call.startswith("sts")]
    assert {r["netrc"] for r in imports(log)} == {
        f"machine {SPEC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com login AWS password ecr-token-us-east-1\n"}


def test_the_users_own_credentials_and_config_come_first(tmp_path):
    """The user's .credentials lines (a file without its last newline) come first and are kept
    as they are; the user's hooks.d, mounts.d, environ.d are linked in; the user's file is left."""
    own = tmp_path / "home" / ".config" / "enroot"
    (own / "hooks.d").mkdir(parents=True)
    (own / "environ.d").mkdir()
    mine = ("machine nvcr.io login $oauthtoken password nvapi-secret\n"
            "machine authn.nvidia.com login $oauthtoken password nvapi-secret")
    (own / ".credentials").write_text(mine)
    model = model_of()
    result, log, _, _ = run_job(tmp_path, model, "fio")
    assert result.returncode == 0, result.stdout
    found = imports(log)
    assert found
    registry = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"
    for record in found:
        assert record["netrc"] == f"{mine}\nmachine {registry} login AWS password ecr-token-us-east-1\n"
        assert record["links"] == {"environ.d": str(own / "environ.d"), "hooks.d": str(own / "hooks.d")}
    assert (own / ".credentials").read_text() == mine
    assert not (tmp_path / reference.ENROOT_DIR).exists()


def test_a_users_enroot_config_path_is_read(tmp_path):
    own = tmp_path / "my-enroot"
    own.mkdir()
    (own / ".credentials").write_text("machine ghcr.io login me password ghp-secret\n")
    result, log, _, _ = run_job(tmp_path, model_of(), env={"ENROOT_CONFIG_PATH": str(own)})
    assert result.returncode == 0, result.stdout
    (record, *_) = imports(log)
    assert record["netrc"].startswith("machine ghcr.io login me password ghp-secret\nmachine ")
    assert record["config"] == f"{tmp_path}/{reference.ENROOT_DIR}/4242"


def test_image_overrides_the_reference_image(tmp_path):
    """IMAGE set: it runs, nothing asks STS, and Enroot reads the user's own configuration."""
    image = "docker://nvcr.io#nvidia/my-nccl:1"
    result, log, aws, sruns = run_job(tmp_path, model_of(), env={"IMAGE": image})
    assert result.returncode == 0, result.stdout
    assert set(re.findall(r"^srun image=(\S*)", sruns, re.MULTILINE)) == {image}
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
    assert not (tmp_path / reference.ENROOT_DIR).exists()


def test_the_credentials_go_when_the_job_is_cancelled(tmp_path):
    result, log, _, _ = run_job(tmp_path, model_of(), env={"FAKE_NCCL_SECONDS": "30"}, signal_after=2)
    assert result.returncode == 143
    assert imports(log)
    assert not (tmp_path / reference.ENROOT_DIR).exists()


def test_a_requeued_job_replaces_what_its_killed_run_left(tmp_path):
    left = tmp_path / reference.ENROOT_DIR / "4242"
    left.mkdir(parents=True)
    (left / ".credentials").write_text("machine stale login x password y\n")
    result, log, _, _ = run_job(tmp_path, model_of())
    assert result.returncode == 0, result.stdout
    assert "stale" not in log and imports(log)
    assert not (tmp_path / reference.ENROOT_DIR).exists()


def test_without_a_reference_image_image_is_required(tmp_path):
    model = model_of(images={"reference": False})
    assert model.reference_image(model.node_groups[0]) is None
    result, _, aws, sruns = run_job(tmp_path, model)
    assert result.returncode != 0 and "set IMAGE to an image with nccl-tests and fio" in result.stdout
    assert sruns == "" and aws == []
    result, _, _, sruns = run_job(tmp_path, model, env={"IMAGE": "docker://x#y:1"})
    assert result.returncode == 0 and set(re.findall(r"^srun image=(\S*)", sruns, re.MULTILINE)) == {"docker://x#y:1"}


def test_the_smoke_job_keeps_nvidias_pytorch_image():
    model = model_of()
    script = jobs.smoke_sbatch(model, model.node_groups[0])
    assert "REGISTRY" not in script and "ENROOT_CONFIG_PATH" not in script and jobs.PYTORCH_IMAGE in script
    assert bootstrap.NCCL_ENV_FILE in script


def test_enroots_code_is_held_verbatim_to_the_release_nodes_run():
    """Each block of tests/kits/enroot_credentials.sh is in NVIDIA/enroot's file at the commit the
    node images bake (checked where a snapshot of the repository is at hand)."""
    text = ENROOT_CODE.read_text()
    blocks = re.findall(r"^# >>> (\S+)\n(.*?)^# <<<$", text, re.MULTILINE | re.DOTALL)
    assert [path for path, _ in blocks] == ["src/common.sh", "src/docker.sh", "src/docker.sh"]
    assert bootstrap.ENROOT_COMMIT in text and f"v{bootstrap.ENROOT_VERSION}" in text
    # the credentials line is Enroot's documented ECR example (doc/cmd/import.md)
    example = reference.credentials_line("12345.dkr.ecr.eu-west-2.amazonaws.com", "eu-west-2")
    assert example == ("machine 12345.dkr.ecr.eu-west-2.amazonaws.com login AWS password "
                       "$(aws ecr get-login-password --region eu-west-2)")
    if not ENROOT_MIRROR.is_dir():
        pytest.skip(f"no snapshot of NVIDIA/enroot at {ENROOT_MIRROR}")
    blocks.append(("doc/cmd/import.md", f"\n{example}\n"))
    for path, block in blocks:
        upstream = subprocess.run(["git", f"--git-dir={ENROOT_MIRROR}", "show", f"{bootstrap.ENROOT_COMMIT}:{path}"],
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
    assert f"`{model.name}-images`" in readme and "nothing needs building or pushing" in readme
    assert "IMAGE=" in readme and reference.RECIPE in readme and "docker/README.md" not in readme


def test_a_kit_without_reference_images_says_to_set_image(tmp_path):
    model = model_of(images={"reference": False})
    write_kit(model, tmp_path / "kit")
    readme = (tmp_path / "kit" / "README.md").read_text()
    assert "this cluster builds no reference image" in readme and "nothing needs building" not in readme


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


# --- Kubernetes -----------------------------------------------------------------------------------


def two_architectures(**changes):
    """The GB200 EKS example (arm64) with a p5 group (x86_64) too."""
    data = yaml.safe_load((EXAMPLES_DIR / "p6e-gb200-eks.yaml").read_text())
    data["node_groups"].append({"name": "h100", "instance_type": "p5.48xlarge", "count": 2,
                                "capacity": {"type": "on-demand"}})
    data.update(changes)
    return resolve(specs.validated(data))


def container_images(documents: list[dict]) -> dict[str, set[str]]:
    """Kind -> the images of its containers."""
    found: dict[str, set[str]] = {}
    for document in documents:
        for pod in _pods(document):
            found.setdefault(document["kind"], set()).update(c["image"] for c in pod["containers"])
    return found


def _pods(document: dict) -> list[dict]:
    spec = document.get("spec", {})
    replicas = spec.get("mpiReplicaSpecs") or spec.get("pytorchReplicaSpecs")
    if replicas:
        return [r["template"]["spec"] for r in replicas.values()]
    return [spec["template"]["spec"]] if "template" in spec else []


@pytest.mark.parametrize("account", [None, SPEC_ACCOUNT])
def test_each_groups_manifests_name_its_architectures_image(tmp_path, account):
    model = two_architectures(**({"account": account} if account else {}))
    arm, x86 = (model.reference_image(g) for g in model.node_groups if g.instance.is_gpu)
    assert (arm.architecture, x86.architecture) == ("arm64", "x86_64") and arm.repository != x86.repository
    write_kit(model, tmp_path / "kit")
    version = f"{model.spec.orchestrator.version}.0"
    for group, image in (("gb200", arm), ("h100", x86)):
        uri = image.uri(account or reference.ACCOUNT, "us-east-1")
        for test in ("nccl", "fio"):
            documents = [d for d in yaml.safe_load_all((tmp_path / "kit" / group / f"{test}.yaml").read_text()) if d]
            assert {i for images in container_images(documents).values() for i in images} == {uri}, (group, test)
            for document in documents:
                if document["apiVersion"] == "batch/v1":
                    kubernetes_validate.validate(document, version, strict=True)
    assert jobs_kubernetes.IMAGE_PLACEHOLDER not in "".join(p.read_text() for p in (tmp_path / "kit").rglob("*.yaml"))


def submit(kit: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, str, list[str]]:
    """submit-all.sh with fakes of kubectl (keeps what it creates) and aws; (result, created, aws calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in {"kubectl": f'if [[ $1 == create ]]; then cat >"$(mktemp {tmp_path}/created.XXXXXX)"; '
                                  'elif [[ " $* " == *" - "* ]]; then cat >/dev/null; fi\n',
                       "aws": FAKE_AWS.split("\n", 1)[1]}.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    for old in tmp_path.glob("created.*"):
        old.unlink()
    result = subprocess.run(["bash", str(kit / "submit-all.sh")], capture_output=True, text=True, timeout=60,
                            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_SLURM_DIR": str(tmp_path),
                                 "FAKE_ACCOUNT": ACCOUNT, **env})
    created = "\n---\n".join(p.read_text() for p in sorted(tmp_path.glob("created.*")))  # each file created
    aws = (tmp_path / "aws.log").read_text().splitlines() if (tmp_path / "aws.log").exists() else []
    (tmp_path / "aws.log").unlink(missing_ok=True)
    return result, created, aws


def test_submit_fills_in_the_account_of_the_workstations_credentials(tmp_path):
    model = two_architectures()
    write_kit(model, tmp_path / "kit")
    result, created, aws = submit(tmp_path / "kit", tmp_path)
    assert result.returncode == 0, result.stderr
    assert aws == ["sts get-caller-identity --region us-east-1 --query Account --output text"]
    images = {d["metadata"]["name"]: container_images([d]) for d in yaml.safe_load_all(created)
              if d and d["kind"] != "ComputeDomain"}
    for group in ("gb200", "h100"):
        uri = model.reference_image(next(g for g in model.node_groups if g.name == group)).uri(ACCOUNT, "us-east-1")
        assert images[f"{group}-nccl"] == {"MPIJob": {uri}} and images[f"{group}-fio"] == {"Job": {uri}}
    assert "ACCOUNT." not in created


def test_submit_with_the_spec_account_asks_nothing(tmp_path):
    model = two_architectures(account=SPEC_ACCOUNT)
    write_kit(model, tmp_path / "kit")
    result, created, aws = submit(tmp_path / "kit", tmp_path)
    assert result.returncode == 0, result.stderr
    assert aws == [] and f"{SPEC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/fmcluster/" in created


def test_submit_image_replaces_every_groups_image(tmp_path):
    write_kit(two_architectures(), tmp_path / "kit")
    image = "public.ecr.aws/hpc-cloud/nccl-tests:latest"
    result, created, aws = submit(tmp_path / "kit", tmp_path, IMAGE=image)
    assert result.returncode == 0, result.stderr
    assert aws == [] and "dkr.ecr" not in created
    assert created.count(f"image: {image}") == 2 * (2 + 1)  # each group: the MPIJob's launcher and worker, fio's


def test_submit_fails_in_one_line_without_an_account(tmp_path):
    write_kit(two_architectures(), tmp_path / "kit")
    result, created, _ = submit(tmp_path / "kit", tmp_path, FAKE_STS_FAILS="1")
    assert result.returncode == 1 and created == ""
    (line,) = result.stderr.splitlines()
    assert "Unable to locate credentials" in line and "set IMAGE" in line


def test_submit_without_reference_images_needs_image(tmp_path):
    model = two_architectures(images={"reference": False})
    write_kit(model, tmp_path / "kit")
    assert jobs_kubernetes.IMAGE_PLACEHOLDER in (tmp_path / "kit" / "h100" / "nccl.yaml").read_text()
    result, created, aws = submit(tmp_path / "kit", tmp_path)
    assert result.returncode != 0 and "set IMAGE" in result.stderr and created == "" and aws == []
    result, created, _ = submit(tmp_path / "kit", tmp_path, IMAGE="registry.example/mine:1")
    assert result.returncode == 0 and jobs_kubernetes.IMAGE_PLACEHOLDER not in created
    assert created.count("image: registry.example/mine:1") == 6
