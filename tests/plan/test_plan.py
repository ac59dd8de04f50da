"""fmcluster plan: the figures, the price rules, the JSON contract and the text/markdown output of
every example against golden files (UPDATE_GOLDEN=1 rewrites them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import takewhile
from pathlib import Path

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.facts import catalog, prices
from fmcluster.facts import images as image_facts
from fmcluster.plan import cluster_rows, compute_rows, figures
from fmcluster.plan import render as plan_render
from fmcluster.plan import report as plan
from fmcluster.plan.shape.estimates import CostLine
from fmcluster.spec import loader
from fmcluster.text import table
from tests.support.docs import readme_output
from tests.support.paths import EXAMPLES, ROOT
from tests.support.specs import base_spec, to_yaml, validated, with_
from tests.support.ultraserver import gb200

GOLDEN = ROOT / "tests" / "golden" / "plan"
SUFFIX = {"text": "txt", "markdown": "md"}


def plan_of(path: str, **kwargs) -> plan.Plan:
    spec = loader.load(ROOT / path).spec
    return plan.build(spec, yaml.safe_load((ROOT / path).read_text()), **kwargs)


def plan_of_dict(data: dict, **kwargs) -> plan.Plan:
    return plan.build(validated(data), data, **kwargs)


@pytest.mark.parametrize("fmt", ["text", "markdown"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_golden(example, fmt, capsys):
    """What a user sees for every example; regenerate with UPDATE_GOLDEN=1 after a deliberate change."""
    assert main(["plan", str(ROOT / example), "--format", fmt]) == 0
    out = capsys.readouterr().out
    golden = GOLDEN / f"{Path(example).stem}.{SUFFIX[fmt]}"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(out)
    assert golden.is_file(), f"no golden file {golden.relative_to(ROOT)}: run UPDATE_GOLDEN=1 pytest tests/plan"
    assert out == golden.read_text(), (f"plan of {example} changed: review, "
                                       "then UPDATE_GOLDEN=1 pytest tests/plan/test_plan.py")


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_line_of_the_text_plan_fits_100_columns(example, capsys):
    assert main(["plan", str(ROOT / example)]) == 0
    wide = [line for line in capsys.readouterr().out.splitlines() if len(line) > table.WIDTH]
    assert table.WIDTH == 100 and not wide, wide


@pytest.mark.parametrize("example", EXAMPLES)
def test_json_is_the_documented_model(example, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    assert main(["plan", str(ROOT / example), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, plan.json_schema())
    assert plan.Plan.model_validate(data) == plan_of(example)
    assert data["schema_version"] == "fmcluster.plan/v1"


def test_published_plan_schema_is_current(capsys):
    assert main(["plan", "--json-schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == plan.json_schema() == json.loads((ROOT / "docs/plan.schema.json").read_text()), \
        "regenerate: fmcluster plan --json-schema > docs/plan.schema.json"


def test_p5_figures():
    p = plan_of("examples/p5-pcs.yaml")
    gpu = p.node_groups[0]
    assert (gpu.min_count, gpu.max_count, gpu.gpu) == (16, 16, "H100")
    assert gpu.per_node.gpus == 8 and p.total.gpus == 128
    assert p.total.bf16_pflops == pytest.approx(128 * 0.9895, abs=1e-3)
    assert p.total.fp8_pflops == pytest.approx(128 * 1.979, abs=1e-3)
    assert p.total.fp4_pflops is None  # H100 has no FP4
    assert gpu.per_node.hbm_gib == 640 and gpu.per_node.hbm_tbps == pytest.approx(26.8)
    # AWS PCS gets `efa` interfaces: one per network card, the primary among them
    assert (gpu.interface_type, gpu.per_node.efa_interfaces, gpu.per_node.efa_gbps) == ("efa", 32, 3200)
    assert p.total.efa_gbps == 16 * 3200
    assert gpu.per_node.nvme_tb == pytest.approx(30.4)
    assert gpu.placement == "none (a Capacity Block is placed already)"
    assert gpu.reservation_id == "cr-0123456789abcdef0"
    assert p.control_plane.pcs_size == "SMALL"
    assert [s.name for s in p.stacks] == ["llm-pretrain-network", "llm-pretrain-storage", "llm-pretrain-observability",
                                          "llm-pretrain-images", "llm-pretrain-cluster", "llm-pretrain-reference"]


def test_b300_fp4_and_efa_without_card_0():
    p = plan_of("examples/p6-b300-pcs.yaml")
    b300 = next(g for g in p.node_groups if g.name == "b300")
    assert b300.per_node.fp4_pflops == pytest.approx(8 * 13.5)
    assert (b300.per_node.efa_interfaces, b300.per_node.efa_gbps) == (16, 6400)  # card 0 is ENA only
    assert (b300.min_count, b300.max_count) == (0, 8)
    assert b300.placement == "new cluster placement group"
    cpu = next(g for g in p.node_groups if g.name == "cpu")
    assert cpu.gpu is None and cpu.per_node.efa_interfaces == 0 and cpu.placement == "none (no EFA)"


def test_efa_only_layout_of_kubernetes_nodes():
    data = with_(base_spec(orchestrator={"type": "eks"}), "network.extra_availability_zone_ids", ["use1-az6"])
    gpu = plan_of_dict(data).node_groups[0]
    assert (gpu.interface_type, gpu.per_node.efa_interfaces) == ("efa-only", 32)


def test_plan_shows_each_nodes_interfaces_and_the_addresses_they_take():
    """The layout of each group's launch template, by type, and the addresses it takes: AWS PCS's
    `efa` interfaces one each (p5: 32), efa-only interfaces none (EKS: the ENA primary's only)."""
    pcs = plan_of("examples/p5-pcs.yaml")
    gpu = pcs.node_groups[0]
    assert [(i.network_card_index, i.device_index, i.interface_type) for i in gpu.interfaces[:3]] == [
        (0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa")]
    assert (len(gpu.interfaces), gpu.interface_addresses) == (32, 32)
    assert compute_rows.interfaces_cell(gpu) == "32 efa, 32 IP addresses"
    b300, cpu = plan_of("examples/p6-b300-pcs.yaml").node_groups
    assert compute_rows.interfaces_cell(b300) == "1 ENA + 16 efa, 17 IP addresses"  # card 0 is ENA only
    assert compute_rows.interfaces_cell(cpu) == "1 ENA, 1 IP address"
    data = with_(base_spec(orchestrator={"type": "eks"}), "network.extra_availability_zone_ids", ["use1-az6"])
    eks = plan_of_dict(data)
    assert compute_rows.interfaces_cell(eks.node_groups[0]) == "1 ENA + 32 efa-only, 1 IP address"
    assert [(i.network_card_index, i.device_index) for i in eks.node_groups[0].interfaces[:3]] == [
        (0, 0), (0, 1), (1, 0)]
    text = plan_render.RENDERERS["text"](eks)
    assert _cells(text, "interfaces")[-1] == "2 IP addresses"  # at the group's maximum, pods' left out


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_gpu_subnet_holds_the_addresses_the_interfaces_take(example):
    """Subnet sizing counts what each node's layout takes: its interfaces' addresses (and its pods')."""
    p = plan_of(example)
    pods = loader.load(ROOT / example).spec.orchestrator.control_plane.pod_addresses_per_node
    needs = {n.what.split(":")[0]: n.what for n in p.network.address_needs}
    for group in p.node_groups:
        assert group.interface_addresses == sum(i.interface_type != "efa-only" for i in group.interfaces)
        assert needs[f"node group {group.name}"].endswith(f"{group.max_count} x {group.interface_addresses + pods}")


def test_checkpoint_time_formula():
    p = plan_of("examples/p5-pcs.yaml", checkpoint_params=70e9)
    fs = p.storage.lustre
    assert fs.throughput_gbps == pytest.approx(4800 / 1024 * 250 / 1000)
    assert fs.checkpoint.bytes_per_parameter == 14  # bf16 2 + fp32 master 4 + Adam moments 4 + 4
    assert fs.checkpoint.gigabytes == pytest.approx(980)
    assert fs.checkpoint.seconds == pytest.approx(980e9 / (4800 / 1024 * 250 * 1e6), abs=0.1)
    bigger = plan_of("examples/p5-pcs.yaml", checkpoint_params=405e9).storage.lustre.checkpoint
    assert bigger.seconds == pytest.approx(fs.checkpoint.seconds * 405 / 70, rel=1e-3)


def test_subnets_and_addresses_come_from_network_plan():
    p = plan_of("examples/p5-pcs.yaml")
    assert [(s.az_id, s.cidr, s.public) for s in p.network.subnets] == [
        ("use1-az4", "10.0.0.0/17", False), ("use1-az4", "10.0.192.0/24", True)]
    assert p.network.addresses_needed == sum(a.addresses for a in p.network.address_needs)
    assert p.network.address_needs[0].what == "node group gpu: 16 x 32"


def test_defaults_are_marked():
    p = plan_of("examples/p5-pcs.yaml")
    assert {"network.vpc_cidr", "node_groups[0].efa", "node_groups[0].placement_group", "protect"} <= set(p.defaulted)
    assert "name" not in p.defaulted and "node_groups[0].count" not in p.defaulted
    text = plan_render.render_text(p)
    assert "    vpc_cidr: 10.0.0.0/16  # default" in text and "  name: llm-pretrain\n" in text


@pytest.mark.parametrize("example", EXAMPLES)
def test_resolved_spec_section_is_yaml_of_the_resolved_spec(example):
    """The resolved spec is written line by line (PyYAML writes no comments, and each defaulted
    value carries one); read back with a YAML library it is the resolved spec, every example, and
    the file validates as the original does."""
    p = plan_of(example)
    markdown = plan_render.render_markdown(p)
    block = markdown.split("```yaml\n", 1)[1].split("\n```", 1)[0]
    assert yaml.safe_load(block) == json.loads(json.dumps(p.resolved_spec))
    assert validated(yaml.safe_load(block)).name == p.name


# ---- cost ----------------------------------------------------------------------------------

def _line(p: plan.Plan, start: str) -> CostLine:
    return next(line for line in p.cost.lines if line.item.startswith(start))


def test_on_demand_cost_from_the_table():
    p = plan_of_dict(base_spec())  # 2 x p5.48xlarge on demand, 4800 GiB PERSISTENT_2 at 250, us-east-1
    table = prices.table()
    gpu = _line(p, "node group gpu")
    assert gpu.status == "priced" and gpu.hourly_usd_max == pytest.approx(2 * table.instance_hourly("p5.48xlarge"))
    fsx = _line(p, "FSx for Lustre")
    assert fsx.hourly_usd_max == pytest.approx(4800 * 0.21 / 730, abs=1e-4)
    expected = (2 * 55.04 + table.instance_hourly("m7i.2xlarge") + 4800 * 0.21 / 730
                + table.nat_gateway_hourly + table.public_ipv4_hourly)
    assert p.cost.hourly_usd_max == pytest.approx(expected, abs=1e-3)
    assert p.cost.daily_usd_max == pytest.approx(expected * 24, abs=0.01)
    assert p.cost.region_note is None
    assert not p.cost.complete  # PCS and usage-based items are not priced


def test_unknown_prices_are_never_zero():
    data = with_(base_spec(), "node_groups[0].instance_type", "p5e.48xlarge")
    p = plan_of_dict(data)
    line = _line(p, "node group gpu")
    assert (line.status, line.hourly_usd_min, line.hourly_usd_max) == ("unknown", None, None)
    assert any(item.startswith("node group gpu") for item in p.cost.not_included)
    assert "unknown" in plan_render.render_text(p).split("node group gpu: 2 x p5e.48xlarge", 1)[1].splitlines()[0]


def test_capacity_blocks_and_reservations_are_priced_at_purchase():
    p = plan_of("examples/p5-pcs.yaml")
    assert _line(p, "node group gpu").status == "priced-at-purchase"
    odcr = _line(plan_of("examples/p5en-reservation-pcs.yaml"), "node group train")
    assert odcr.status == "priced-at-purchase" and odcr.hourly_usd_max is None
    assert "$63.30/h per instance, used or not" in odcr.note


def test_spot_and_hyperpod_are_unknown():
    spot = plan_of_dict(with_(base_spec(), "node_groups[0].capacity.type", "spot"))
    line = _line(spot, "node group gpu")
    assert line.status == "unknown" and "at most the On-Demand $55.04/h" in line.note
    hyperpod = plan_of_dict(base_spec(orchestrator={"type": "hyperpod-slurm"}))
    assert _line(hyperpod, "node group gpu").status == "unknown"
    assert "ml.p5.48xlarge" in _line(hyperpod, "node group gpu").note


def test_other_regions_say_whose_prices_they_are():
    data = base_spec(region="us-west-2", availability_zone_id="usw2-az2")
    cost = plan_of_dict(data).cost
    assert cost.prices_region == "us-east-1" and cost.spec_region == "us-west-2"
    assert "us-east-1 list prices" in cost.region_note and "us-west-2" in cost.region_note


def test_kubernetes_control_plane_is_priced():
    data = with_(base_spec(orchestrator={"type": "eks"}), "network.extra_availability_zone_ids", ["use1-az6"])
    assert _line(plan_of_dict(data), "Amazon EKS cluster").hourly_usd_max == prices.table().eks_cluster_hourly


def test_price_table_covers_the_catalog_and_says_where_it_comes_from():
    table = prices.table()
    assert table.region == "us-east-1" and table.as_of and table.currency == "USD"
    assert set(table.ec2_on_demand_hourly) <= set(catalog.catalog())
    # unpriced (unknown, never zero): no list price taken for these yet
    unpriced = {"p5e.48xlarge", "p6-b300.48xlarge", "p4d.24xlarge", "p4de.24xlarge"}
    unpriced.add("p6e-gb200.36xlarge")  # sold only as UltraServer Capacity Blocks: no On-Demand price
    unpriced |= {n for n in catalog.catalog() if n.startswith("g6e.")}
    assert set(catalog.catalog()) - set(table.ec2_on_demand_hourly) == unpriced
    assert all(price > 0 for price in table.ec2_on_demand_hourly.values())
    for key in ("ec2_on_demand_hourly", "fsx_lustre_gib_month", "nat_gateway_hourly", "public_ipv4_hourly",
                "eks_cluster_hourly"):
        assert "http" in table.sources[key]


# ---- node images (NAME-images) --------------------------------------------------------------

def test_each_image_is_listed_with_its_base_groups_and_first_deploy_time():
    p = plan_of("examples/p6e-gb200-pcs.yaml")
    assert p.images is not None and p.images.stack == "gb200-pcs-images"
    arm, x86 = p.images.images
    assert (arm.key, arm.architecture, arm.build_instance_type, arm.groups) == ("pcs-arm64", "arm64", "c7g.2xlarge",
                                                                               ["gb200"])
    assert arm.base_parameter == "/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id"
    assert (x86.key, x86.groups, x86.slurm_version) == ("pcs-x86_64", ["login"], "25.05")
    assert p.images.first_deploy_minutes == image_facts.BUILD_MINUTES_ESTIMATE
    assert "estimate" in p.images.note and "before gb200-pcs-cluster" in p.images.note
    # the reference GPU image: NAME-reference's, after the cluster
    assert p.reference_images is not None and p.reference_images.stack == "gb200-pcs-reference"
    (reference,) = p.reference_images.images
    assert (reference.architecture, reference.build_instance_type, reference.groups) == ("arm64", "c7g.8xlarge",
                                                                                        ["gb200"])
    assert reference.repository.startswith("fmcluster-images/gb200-pcs/reference-arm64-")
    assert reference.repository.endswith(f"-{reference.tag}")
    assert p.reference_images.build_minutes == image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE
    assert "after gb200-pcs-cluster, which does not wait for them" in p.reference_images.note
    text = plan_render.render_text(p)
    section = text.split("Node images (gb200-pcs-images, EC2 Image Builder)\n", 1)[1].split("\n\n", 1)[0]
    assert ("  pcs-arm64\n    base image (SSM parameter)  "
            "/aws/service/pcs/ami/dlami-base-ubuntu2404/arm64/latest/ami-id\n") in section
    assert f"about {p.images.first_deploy_minutes} min more for 2 images (an estimate" in " ".join(section.split())
    references = text.split("Reference GPU images (gb200-pcs-reference, EC2 Image Builder)\n", 1)[1].split("\n\n")[0]
    assert f"  reference-arm64\n    ECR repository:tag  {reference.repository}:{reference.tag}\n" in references
    assert f"about {p.reference_images.build_minutes} min for 1 image (an estimate" in " ".join(references.split())
    md = plan_render.render_markdown(p)
    assert "#### Node images (`gb200-pcs-images`, EC2 Image Builder)" in md
    assert "#### Reference GPU images (`gb200-pcs-reference`, EC2 Image Builder)" in md
    assert "| pcs-x86_64 | /aws/service/pcs/ami/dlami-base-ubuntu2404/x86_64/latest/ami-id |" in md
    assert f"| reference-arm64 | {reference.repository}:{reference.tag} | c7g.8xlarge | gb200 |" in md
    builds = [line.item for line in p.cost.lines if line.item.startswith("EC2 Image Builder")]
    minutes = image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE
    assert builds[-1] == f"EC2 Image Builder: 1 x c7g.8xlarge for about {minutes} min a build (reference images)"


def test_hyperpod_image_serves_its_own_groups_and_is_not_encrypted():
    p = plan_of("examples/p6-b200-hyperpod-slurm.yaml")
    (image,) = p.images.images
    assert image.groups == ["controller", "login", "train", "eval"] and image.slurm_version is None
    assert image.base_parameter.startswith("/aws/service/sagemaker-hyperpod/") and not image.encrypted
    assert "the base image's, at /opt/slurm" in plan_render.render_text(p)
    kms = plan_of_dict(with_(base_spec(), "storage.kms", True))
    assert kms.images.images[0].encrypted and "yes (storage key)" in plan_render.render_text(kms)


@pytest.mark.parametrize("example", ["examples/p5en-eks.yaml", "examples/p5-hyperpod-eks.yaml"])
def test_kubernetes_planes_have_no_node_images_but_the_reference_image(example):
    p = plan_of(example)
    assert p.images is None and p.reference_images is not None
    (reference,) = p.reference_images.images
    assert reference.architecture == "x86_64" and reference.build_instance_type == "c6i.8xlarge"
    assert p.reference_images.build_minutes == image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE
    text, md = plan_render.render_text(p), plan_render.render_markdown(p)
    assert "Node images" not in text and "Node images" not in md and "base image (SSM parameter)" not in md
    assert f"| reference-x86_64 | {reference.repository}:{reference.tag} | c6i.8xlarge |" in md
    assert [line.item for line in p.cost.lines if "Image Builder" in line.item] == [
        f"EC2 Image Builder: 1 x c6i.8xlarge for about {image_facts.REFERENCE_BUILD_MINUTES_ESTIMATE} min a build "
        "(reference images)"]
    without = plan_of_dict(with_(yaml.safe_load((ROOT / example).read_text()), "images", {"reference": False}))
    assert without.images is None and without.reference_images is None
    assert not any("Image Builder" in line.item for line in without.cost.lines)


def test_a_node_group_with_its_own_ami_launches_from_no_image():
    data = with_(base_spec(), "node_groups[0].ami_id", "ami-0123456789abcdef0")
    (image,) = plan_of_dict(data).images.images
    assert image.groups == ["login"]


def test_plan_says_what_a_groups_own_image_must_have():
    """A Slurm group with its own ami_id: plan names what the boot will check on it (Enroot, Pyxis
    against the cluster's Slurm, the pinned exporters with observability, the PCS agent); a CPU group
    runs no containers; without observability no exporters; on Kubernetes nothing."""
    data = with_(with_(base_spec(), "node_groups[0].ami_id", "ami-0123456789abcdef0"), "node_groups", [
        {"name": "gpu", "instance_type": "p5.48xlarge", "max_count": 2, "ami_id": "ami-0123456789abcdef0"},
        {"name": "cpu", "instance_type": "c7i.8xlarge", "max_count": 2, "ami_id": "ami-0fedcba9876543210"}])
    p = plan_of_dict(data)
    own = {o.group: o for o in p.own_images}
    assert set(own) == {"gpu", "cpu"} and own["gpu"].ami_id == "ami-0123456789abcdef0"
    prefix = image_facts.slurm_prefix(image_facts.PCS, validated(data).orchestrator.version)
    assert own["gpu"].needs[:2] == ["Enroot 4.1.2 (/usr/bin/enroot)", f"Pyxis v0.24.0 built against the Slurm at "
                                    f"{prefix} ({prefix}/lib/slurm/spank_pyxis.so)"]
    assert any(n.startswith("prometheus-node-exporter (24.04: 1.7.0-1*") for n in own["gpu"].needs)
    assert own["gpu"].needs[-1] == "the AWS PCS agent 1.5.0-1 or later (node lifecycle actions)"
    assert not any("Enroot" in n for n in own["cpu"].needs)
    text = plan_render.render_text(p)
    assert "node group gpu launches from its own ami-0123456789abcdef0, which must have: Enroot 4.1.2" in \
        " ".join(text.split())
    assert "- node group cpu launches from its own ami-0fedcba9876543210" in plan_render.render_markdown(p)
    quiet = plan_of_dict(with_(data, "observability", {"prometheus": False, "grafana": False}))
    assert not any("prometheus" in n for o in quiet.own_images for n in o.needs)
    eks = with_(with_(data, "orchestrator.type", "eks"), "network.extra_availability_zone_ids", ["use1-az6"])
    assert plan_of_dict(eks).own_images == []


def test_build_instance_is_priced_only_from_the_table(monkeypatch):
    p = plan_of_dict(base_spec())
    assert "c6i.2xlarge" not in prices.table().ec2_on_demand_hourly  # no price invented for it
    (image,) = p.images.images
    assert image.build_instance_hourly_usd is None
    builds = _line(p, "EC2 Image Builder")
    assert builds.status == "usage-based" and builds.hourly_usd_max is None
    assert "no On-Demand price for c6i.2xlarge in the table" in builds.note
    assert p.cost.hourly_usd_max == plan_of_dict(base_spec()).cost.hourly_usd_max  # not added to the hourly total
    monkeypatch.setitem(image_facts.BUILD_INSTANCE_TYPES, "x86_64", "c7i.2xlarge")
    priced = plan_of_dict(base_spec())
    unit = prices.table().instance_hourly("c7i.2xlarge")
    assert priced.images.images[0].build_instance_hourly_usd == unit
    build = unit * image_facts.BUILD_MINUTES_ESTIMATE / 60
    assert f"${unit:,.2f} an instance hour, about ${build:,.2f} a build" in _line(priced, "EC2 Image Builder").note
    assert f"c7i.2xlarge ({figures.usd(unit)}/h)" in plan_render.render_text(priced)


# ---- markdown and the command line ---------------------------------------------------------

def test_markdown_has_a_mermaid_diagram_of_the_cluster():
    p = plan_of("examples/p6-b300-pcs.yaml")
    md = plan_render.render_markdown(p)
    diagram = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    for text in ('subgraph vpc["VPC 10.0.0.0/16"]', "AZ ID use2-az1", "node group b300", "node group cpu",
                 "FSx for Lustre", "S3 datasets", "login nodes", "pcs<br/>Slurm version 25.11", "NAT gateway"):
        assert text in diagram
    assert 'b0 -->|"/datasets"| fsx' in diagram  # import only: from the bucket to the file system
    assert "<details><summary>Resolved spec" in md


def test_invalid_spec_and_bad_options_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["plan", str(bad)]) == 2
    assert main(["plan"]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["plan", "examples/p5-pcs.yaml", "--checkpoint-params", "seventy"])
    assert exc.value.code == 2


def test_plan_imports_neither_aws_cdk_nor_boto3(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(to_yaml(base_spec()))
    code = ("import sys; from fmcluster.cli import main; rc = main(['plan', sys.argv[1], '--format', 'markdown']); "
            "heavy = [m for m in ('aws_cdk', 'jsii', 'boto3', 'botocore') if m in sys.modules]; "
            "print('HEAVY', heavy); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code, str(spec)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


def test_readme_shows_real_plan_output():
    shown = readme_output("fmcluster plan examples/p5-pcs.yaml")
    real = (GOLDEN / "p5-pcs.txt").read_text()
    parts = shown.split("...\n")
    assert len(parts) == 3 and all(part.strip("\n") in real for part in parts)


def test_a100_and_l40s_groups_have_no_fp8_or_fp4_where_the_gpu_has_none():
    """A100 has no FP8: its cells say '-', and a total counts the GPUs that have it."""
    p = plan_of_dict(base_spec(node_groups=[
        {"name": "a100", "instance_type": "p4d.24xlarge", "count": 2},
        {"name": "l40s", "instance_type": "g6e.48xlarge", "count": 1}]))
    a100, l40s = p.node_groups
    assert (a100.per_node.bf16_pflops, a100.per_node.fp8_pflops, a100.per_node.fp4_pflops) == (2.496, None, None)
    assert (l40s.per_node.fp8_pflops, l40s.gpu) == (5.864, "L40S")
    assert p.total.fp8_pflops == 5.864 and p.total.bf16_pflops == round(2 * 2.496 + 2.8964, 4)
    text = plan_render.RENDERERS["text"](p)
    fp8_row = next(line for line in text.splitlines() if line.strip().startswith("FP8 PFLOPS"))
    assert fp8_row.split()[2:] == ["-", "5.86", "5.86"]
    only_a100 = plan_of_dict(base_spec(node_groups=[{"name": "a100", "instance_type": "p4de.24xlarge", "count": 1}]))
    assert only_a100.total.fp8_pflops is None
    assert "PFLOPS BF16 (dense peak)" in cluster_rows.summary(only_a100)


# ---- NVLink domains ------------------------------------------------------------------------

def _gb200(count=18, **capacity):
    return plan_of_dict(gb200(count=count, **capacity))


def _cells(text: str, label: str) -> list[str]:
    """The cells of a row of the text compute table, its label's cell first, each cell's wrapped
    lines joined: the columns start where the header's cells do."""
    lines = text.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("Compute ("))) + 1
    starts = [2, *(i for i in range(3, len(lines[header])) if lines[header][i - 2:i] == "  " and
                   lines[header][i] != " ")]
    first = next(i for i in range(header, len(lines)) if lines[i].startswith(f"  {label}  "))
    rows = [lines[first]] + list(takewhile(lambda line: line.startswith(" " * starts[1]) and line.strip(),
                                           lines[first + 1:]))
    ends = [*starts[1:], None]
    return [" ".join(part for row in rows if (part := row[start:end].strip()))
            for start, end in zip(starts, ends, strict=True)]


def _row(text: str, label: str) -> str:
    """A row of the text compute table, its label cut off, its cells apart by two spaces."""
    return "  ".join(_cells(text, label)[1:]).strip()


def _summary(text: str) -> str:
    """The text plan's summary (the lines under its title), on one line."""
    lines = text.splitlines()[1:]
    return " ".join(line.strip() for line in takewhile(lambda line: line.strip(), lines)
                    if not line.startswith("   "))


def test_an_ultraserver_group_is_one_nvlink_domain_of_72_gpus(capsys, tmp_path):
    p = _gb200()
    (group,) = p.node_groups
    d = group.nvlink_domain
    assert (d.ultraserver_type, d.instances, d.gpus, d.nvlink_gbps_per_gpu) == ("u-p6e-gb200x72", 18, 72, 1800)
    assert d.domain_nvlink_tbps == pytest.approx(129.6)
    assert (d.ultraservers, d.domains, d.whole_domains, d.partial_domain_instances) == (1, 1, 1, 0)
    assert (p.nvlink_domains, p.largest_nvlink_domain_gpus) == (1, 72)
    assert group.per_node.nvlink_tbps == pytest.approx(7.2) and p.total.nvlink_tbps == pytest.approx(129.6)

    text = plan_render.render_text(p)
    assert _row(text, "NVLink domain").startswith(
        "u-p6e-gb200x72: 18 instances, 72 GPUs, 1,800 GB/s per GPU, 129.6 TB/s  largest 72 GPUs")
    assert _row(text, "NVLink domains").split() == ["1", "x", "u-p6e-gb200x72", "1"]
    assert _row(text, "NVLink bandwidth").split() == ["7.2", "TB/s", "129.6", "TB/s"]
    assert "· 1 NVLink domain of 72 GPUs ·" in _summary(text)

    md = plan_render.render_markdown(p)
    assert "| NVLink domain | u-p6e-gb200x72: 18 instances, 72 GPUs, 1,800 GB/s per GPU, 129.6 TB/s | " \
           "largest 72 GPUs |" in md
    diagram = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert 'subgraph ng0["node group gb200<br/>18 x p6e-gb200.36xlarge<br/>72 x GB200"]' in diagram
    assert ('ng0u1["u-p6e-gb200x72 #1: 18 x p6e-gb200.36xlarge, 72 GPUs, NVLink 1,800 GB/s per GPU"]'
            in diagram)
    assert "ng0u2" not in diagram and "cp --> ng0" in diagram  # one box per UltraServer, not 18 nodes
    # the GPU nodes in the Dallas Local Zone, the NAT gateway in the region's first AZ ID
    assert 'sn2["public 10.0.193.0/24<br/>NAT gateway"]' in diagram
    assert "  use1-az4       10.0.193.0/24  public (NAT gateway)" in text

    spec = tmp_path / "gb200.yaml"
    spec.write_text(to_yaml(gb200()))
    assert main(["plan", str(spec), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["node_groups"][0]["nvlink_domain"] == {
        "ultraserver_type": "u-p6e-gb200x72", "instances": 18, "gpus": 72, "nvlink_gbps_per_gpu": 1800.0,
        "domain_nvlink_tbps": 129.6, "ultraservers": 1, "domains": 1, "whole_domains": 1,
        "partial_domain_instances": 0}
    assert (data["nvlink_domains"], data["largest_nvlink_domain_gpus"]) == (1, 72)
    assert data["total"]["nvlink_tbps"] == 129.6 and data["node_groups"][0]["gpu_memory"] == "HBM"
    pytest.importorskip("jsonschema").validate(data, plan.json_schema())


def test_a_partial_ultraserver_is_one_partial_domain():
    p = _gb200(count=17)
    d = p.node_groups[0].nvlink_domain
    assert (d.instances, d.gpus, d.domains, d.whole_domains, d.partial_domain_instances) == (18, 72, 1, 0, 17)
    assert p.total.nvlink_tbps == pytest.approx(17 * 4 * 1.8)
    text = plan_render.render_text(p)
    assert _row(text, "NVLink domains").startswith("1 x u-p6e-gb200x72: 1 with 17 of 18 instances")
    diagram = plan_render.render_markdown(p).split("```mermaid\n", 1)[1]
    assert ('ng0u1["u-p6e-gb200x72 #1: 17 of 18 x p6e-gb200.36xlarge, 68 of 72 GPUs, NVLink 1,800 GB/s per GPU"]'
            in diagram)


def test_two_small_ultraservers_are_two_domains_of_9():
    p = _gb200(ultraserver_type="u-p6e-gb200x36", ultraserver_count=2)
    d = p.node_groups[0].nvlink_domain
    assert (d.ultraserver_type, d.instances, d.gpus, d.ultraservers, d.domains, d.whole_domains) == (
        "u-p6e-gb200x36", 9, 36, 2, 2, 2)
    assert d.domain_nvlink_tbps == pytest.approx(64.8) and p.total.nvlink_tbps == pytest.approx(129.6)
    assert (p.nvlink_domains, p.largest_nvlink_domain_gpus) == (2, 36)
    text = plan_render.render_text(p)
    assert _row(text, "NVLink domain").startswith("u-p6e-gb200x36: 9 instances, 36 GPUs, 1,800 GB/s per GPU, 64.8 TB/s")
    assert _row(text, "NVLink domains").split() == ["2", "x", "u-p6e-gb200x36", "2"]
    assert "· 2 NVLink domains of 36 GPUs ·" in _summary(text)
    diagram = plan_render.render_markdown(p).split("```mermaid\n", 1)[1]
    for n in (1, 2):
        assert f'ng0u{n}["u-p6e-gb200x36 #{n}: 9 x p6e-gb200.36xlarge, 36 GPUs, NVLink 1,800 GB/s per GPU"]' in diagram
    # fewer instances than the UltraServers hold (a warning): a partial domain, or one left unused
    ten = _gb200(count=10, ultraserver_type="u-p6e-gb200x36", ultraserver_count=2)
    assert _row(plan_render.render_text(ten), "NVLink domains").startswith(
        "2 x u-p6e-gb200x36: 1 whole, 1 with 1 of 9 instances")
    nine = _gb200(count=9, ultraserver_type="u-p6e-gb200x36", ultraserver_count=2)
    assert (nine.nvlink_domains, nine.node_groups[0].nvlink_domain.ultraservers) == (1, 2)
    assert 'ng0u2["u-p6e-gb200x36 #2: unused (9 x p6e-gb200.36xlarge)"]' in plan_render.render_markdown(nine)


def test_an_instance_is_the_nvlink_domain_of_other_gpus():
    p = plan_of("examples/p5-pcs.yaml")  # 16 x p5.48xlarge
    gpu = p.node_groups[0]
    d = gpu.nvlink_domain
    assert (d.ultraserver_type, d.instances, d.gpus, d.nvlink_gbps_per_gpu, d.ultraservers) == (None, 1, 8, 900, None)
    assert d.domain_nvlink_tbps == pytest.approx(7.2) and (d.domains, d.partial_domain_instances) == (16, 0)
    assert (p.nvlink_domains, p.largest_nvlink_domain_gpus) == (16, 8)
    assert p.total.nvlink_tbps == pytest.approx(16 * 7.2)
    text = plan_render.render_text(p)
    assert _row(text, "NVLink domain").startswith("1 instance, 8 GPUs, 900 GB/s per GPU, 7.2 TB/s")
    assert _row(text, "NVLink domains").split() == ["16", "16"]
    assert "· 16 NVLink domains of 8 GPUs ·" in _summary(text)
    assert "<br/>128 x H100<br/>NVLink domain: 1 instance, 8 GPUs\"]" in plan_render.render_markdown(p)


def test_l40s_has_no_nvlink_and_gddr6_memory():
    """The L40S is on PCIe (no NVLink domain) and its memory is GDDR6, not HBM."""
    p = plan_of_dict(base_spec(node_groups=[
        {"name": "l40s", "instance_type": "g6e.48xlarge", "count": 2},
        {"name": "cpu", "instance_type": "c7i.8xlarge", "count": 1}]))
    l40s, cpu = p.node_groups
    assert (l40s.nvlink_domain, l40s.gpu_memory, l40s.per_node.nvlink_tbps) == (None, "GDDR6", 0)
    assert (cpu.nvlink_domain, cpu.gpu_memory) == (None, None)
    assert (p.nvlink_domains, p.largest_nvlink_domain_gpus, p.total.nvlink_tbps) == (0, 0, 0)
    text = plan_render.render_text(p)
    assert _row(text, "NVLink domain").split("  ")[0] == "none (PCIe)"
    assert _row(text, "GPU memory").split()[:3] == ["358", "GiB", "GDDR6"]
    assert _row(text, "GPU memory bandwidth").split()[:2] == ["6.9", "TB/s"]
    assert "HBM" not in text.split("Storage")[0] and "NVLink domains of" not in text
    assert "<br/>16 x L40S<br/>no NVLink (PCIe)\"]" in plan_render.render_markdown(p)
    mixed = plan_of_dict(base_spec(node_groups=[
        {"name": "h100", "instance_type": "p5.48xlarge", "count": 1},
        {"name": "l40s", "instance_type": "g6e.48xlarge", "count": 1}]))
    memory = _row(plan_render.render_text(mixed), "GPU memory")
    assert memory.split("  ")[0] == "640 GiB HBM" and memory.endswith("998 GiB")  # no one kind in the total


def test_a_one_gpu_instance_has_no_nvlink_domain():
    """p5.4xlarge's one H100 has no GPU to reach over NVLink: no domain, no NVLink bandwidth, in
    the figures, the table, the summary and the diagram."""
    p = plan_of_dict(base_spec(node_groups=[
        {"name": "one", "instance_type": "p5.4xlarge", "count": 2},
        {"name": "eight", "instance_type": "p5.48xlarge", "count": 1}]))
    one, eight = p.node_groups
    assert (one.nvlink_domain, one.per_node.nvlink_tbps, one.at_max.nvlink_tbps) == (None, 0, 0)
    assert (p.nvlink_domains, p.largest_nvlink_domain_gpus) == (1, 8)
    assert p.total.nvlink_tbps == eight.at_max.nvlink_tbps == pytest.approx(7.2)
    text = plan_render.render_text(p)
    assert _row(text, "NVLink domain").split("  ")[0] == "none (one GPU)"
    assert _row(text, "NVLink domains").split()[:2] == ["-", "1"]
    assert _row(text, "NVLink bandwidth").split()[:3] == ["-", "7.2", "TB/s"]
    assert "· 1 NVLink domain of 8 GPUs ·" in _summary(text)
    assert "<br/>2 x H100<br/>no NVLink (one GPU)\"]" in plan_render.render_markdown(p)


@pytest.mark.parametrize("instance_type,per_node_gbps", [("g6e.48xlarge", 400), ("g6e.24xlarge", 200)])
def test_the_plans_efa_figure_is_the_instances_not_its_cards_added_up(instance_type, per_node_gbps):
    """EC2: g6e.48xlarge 400 Gbps for the instance (4 cards of 400), g6e.24xlarge 200 (2 of 200);
    the plan showed 1.6 Tbps and 400 Gbps."""
    p = plan_of_dict(base_spec(node_groups=[{"name": "l40s", "instance_type": instance_type, "count": 2}]))
    l40s = p.node_groups[0]
    assert (l40s.per_node.efa_gbps, l40s.at_max.efa_gbps, p.total.efa_gbps) == (
        per_node_gbps, 2 * per_node_gbps, 2 * per_node_gbps)
    assert _row(plan_render.render_text(p), "EFA").split(", ")[1].startswith(f"{per_node_gbps} Gbps")


def test_the_resolved_spec_shows_only_what_the_control_plane_reads():
    """A PCS plan leaves the Kubernetes-only fields (and HyperPod's training plans) out of the
    resolved spec where the file does not set them; an EKS plan leaves out the Slurm planes' images;
    a field the file sets stays, whatever the plane (validate warns of it)."""
    pcs = plan_of("examples/p5-pcs.yaml")
    orchestrator = pcs.resolved_spec["orchestrator"]
    assert not {"admin_role_arn", "endpoint_access", "public_access_cidrs", "namespace"} & set(orchestrator)
    assert all("labels" not in g and "training_plan_arn" not in g["capacity"]
               for g in pcs.resolved_spec["node_groups"])
    assert "images" in pcs.resolved_spec and not any(d.startswith("orchestrator.namespace") for d in pcs.defaulted)
    eks = plan_of("examples/p5en-eks.yaml")
    assert "images" not in eks.resolved_spec and "namespace" in eks.resolved_spec["orchestrator"]
    labelled = plan_of_dict(with_(base_spec(), "node_groups[0].labels", {"team": "ml"}))
    assert labelled.resolved_spec["node_groups"][0]["labels"] == {"team": "ml"}


# ---- teams -------------------------------------------------------------------------------------

def test_each_team_shows_its_gpus_and_their_hourly_cost():
    """examples/p5-pcs.yaml: 16 x p5.48xlarge (128 GPUs), pretrain 96 guaranteed and free to borrow,
    research a quarter (32) and at most 32 more."""
    made = plan_of("examples/p5-pcs.yaml")
    per_gpu = prices.table().instance_hourly("p5.48xlarge") / 8
    pretrain, research = made.teams
    assert (pretrain.guaranteed_gpus, pretrain.burst_gpus, pretrain.priority) == (96, 128, "high")
    assert (research.guaranteed_gpus, research.burst_gpus, research.priority) == (32, 64, "normal")
    assert pretrain.guaranteed_hourly_usd == round(96 * round(per_gpu, 4), 2)
    assert research.burst_hourly_usd == round(64 * round(per_gpu, 4), 2)
    text = plan_render.render_text(made)
    assert "\nTeams (GPUs at each group's maximum size)\n" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    # PCS: fmcluster sets no PreemptType there, and the GPU limit is one per account
    flat = " ".join(text.split())
    assert "cannot set PreemptType" in flat and "summed over its GPU groups" in flat
    assert "cannot set PreemptType" in plan_render.render_markdown(made)


def test_pcs_teams_say_the_gpu_limits_hold_only_where_pcs_tracks_gres_gpu():
    """Issue 37, point 13: PCS's own slurm.conf decides AccountingStorageTRES, and no PCS API
    reports it, so the plan says where 'at most' holds and how to tell on a login node; HyperPod,
    where fmcluster writes it into the controller's slurm.conf, has no such caveat."""
    for rendered in (plan_render.render_text, plan_render.render_markdown):
        flat = " ".join(rendered(plan_of("examples/p5-pcs.yaml")).split())
        assert "holds only where it tracks gres/gpu (AccountingStorageTRES)" in flat
        assert "No PCS API reports PCS's slurm.conf" in flat and "sacctmgr show tres" in flat
    hyperpod = " ".join(plan_render.render_text(plan_of("examples/p6-b200-hyperpod-slurm.yaml")).split())
    assert "AccountingStorageTRES" not in hyperpod


def test_hyperpod_teams_cost_is_unknown_and_dedicated_groups_are_shown():
    made = plan_of("examples/p6-b200-hyperpod-slurm.yaml")
    pretrain, evals = made.teams
    assert pretrain.guaranteed_hourly_usd is None and evals.dedicated == ["eval"]
    assert [g.burst_gpus for g in pretrain.node_groups] == [128, 0], "another team's group is never borrowed"
    flat = " ".join(plan_render.render_text(made).split())
    assert "summed over its GPU groups" in flat and "PreemptType" not in flat


def test_a_spec_without_teams_has_no_teams_section():
    made = plan_of("examples/p5en-reservation-pcs.yaml")
    assert made.teams == [] and "Teams" not in plan_render.render_text(made)


def test_a_groups_own_image_needs_the_aws_cli_where_its_nodes_read_their_end():
    """capacity-end reads a Capacity Block's end with the AWS CLI, and the readiness check of such a
    group wants it; a spot group's notice comes from the instance metadata service."""
    gpu = {"name": "gpu", "instance_type": "p5.48xlarge", "min_count": 2, "max_count": 2,
           "ami_id": "ami-0123456789abcdef0",
           "capacity": {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}}
    block = plan_of_dict(with_(base_spec(), "node_groups", [gpu]))
    (own,) = block.own_images
    assert own.needs[-1].startswith("the AWS CLI (`aws` on root's PATH")
    spot = plan_of_dict(with_(base_spec(), "node_groups", [{**gpu, "capacity": {"type": "spot"}}]))
    assert not any("AWS CLI" in n for o in spot.own_images for n in o.needs)
