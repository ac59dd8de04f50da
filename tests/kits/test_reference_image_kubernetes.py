"""The Kubernetes acceptance kit runs the reference image NAME-reference builds (fmcluster.kits.reference),
with nothing to set: its manifests and submit-all.sh, per group and architecture, validated as
tests/kits/test_jobs_kubernetes.py does, submit-all.sh run with fakes of kubectl and aws (the Slurm
kit's: tests/kits/test_reference_image_kits.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from fmcluster.kits import kubernetes as jobs_kubernetes
from fmcluster.kits import reference
from fmcluster.kits.writer import run as write_kit
from fmcluster.model.cluster import resolve
from tests.support import fake_slurm, specs
from tests.support.paths import EXAMPLES_DIR

ACCOUNT = "210987654321"  # the workstation's credentials' account, as the fake STS answers
SPEC_ACCOUNT = "310987654321"
FAKE_AWS = fake_slurm.AWS  # STS's account (FAKE_ACCOUNT); each call logged


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
    repository = model.reference_image(model.node_groups[0]).repository
    assert aws == [] and f"{SPEC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{repository}:" in created


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
