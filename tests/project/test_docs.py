"""The documentation: the site builds strictly, its generated pages are current, the paths it
names exist, it points nowhere outside the repository, and the license it states is the package's.

The commands the pages show are run by tests/project/test_readme.py.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# A repository path as the docs write it in backticks: under a top-level folder of the project, or
# one of its root files. Globs (`fmcluster/observability/rules/*.yaml`) must match something.
REPO_PATH = re.compile(r"(?:fmcluster|fmcluster_cdk|tests|docs|examples|bench|docker)/[\w.*/-]*"
                       r"|app\.py|cdk\.json|Makefile|pyproject\.toml|package(?:-lock)?\.json|\.nvmrc"
                       r"|requirements(?:-scan)?\.txt|LICENSE|mkdocs\.yml|README\.md")
# The research notes quote paths of other repositories (AWS's samples), not of this one.
QUOTES_OTHER_REPOSITORIES = {ROOT / "docs" / "research-notes.md"}


def gen_reference():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_the_site_builds_strictly(tmp_path):
    """mkdocs.yml says strict and warns on every broken link, anchor and page left out of the nav;
    any warning at all fails here too."""
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is not installed (the `docs` extra): run make install")
        pytest.skip("mkdocs is not installed (the `docs` extra)")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output, output
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    for page in ("design/index.html", "reference/rules/index.html", "reference/spec/index.html",
                 "guides/pcs/index.html", "guides/hyperpod-slurm/index.html", "guides/eks/index.html",
                 "guides/hyperpod-eks/index.html", "runbooks/index.html", "development/index.html"):
        assert page in built, page


def test_a_broken_link_fails_the_build(tmp_path):
    """The strict build is live: a link to a missing page and to a missing anchor each fail it."""
    pytest.importorskip("mkdocs")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md) and [nowhere](#no-such-heading)\n")
    config = (ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[0] + "\nnav:\n  - Home: index.md\n"
    (tmp_path / "mkdocs.yml").write_text(config)
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "missing.md" in result.stderr and "no-such-heading" in result.stderr


def test_the_generated_reference_is_current():
    module = gen_reference()
    for name, render in module.PAGES.items():
        page = ROOT / "docs" / "reference" / name
        assert page.read_text() == render(), f"docs/reference/{name} is stale: run python docs/gen_reference.py"


def test_the_rule_reference_lists_every_rule_with_its_docstring():
    from fmcluster.spec import rules

    text = (ROOT / "docs" / "reference" / "rules.md").read_text()
    module = gen_reference()
    for fn in rules.RULES:
        severity = "warning" if rules.rule_id(fn) in rules.WARNING_RULES else "error"
        described = module.first_paragraph(fn.__doc__) or "-"
        assert f"| `{rules.rule_id(fn)}` | {severity} | {described} |" in text, rules.rule_id(fn)


def test_the_spec_reference_lists_every_field_of_the_schema():
    from fmcluster.spec import models

    text = (ROOT / "docs" / "reference" / "spec.md").read_text()
    schema = models.json_schema()
    listed = set(re.findall(r"^\| `([^`]+)` \|", text, re.M))
    for name, node in schema["$defs"].items():  # every field of every object of the spec appears under its parent
        for field in node.get("properties", {}):
            assert any(path == field or path.endswith(("." + field, "]." + field)) for path in listed), (name, field)
    for field in schema["properties"]:
        assert field in listed
    assert "`node_groups[].capacity.reservation_id`" in text and "`serving.model.parameters_billions`" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_repository_path_the_docs_name_exists(page):
    if page in QUOTES_OTHER_REPOSITORIES:
        pytest.skip("quotes other repositories' paths")
    missing = []
    for span in re.findall(r"`([^`\n]+)`", without_code_blocks(page.read_text())):
        path = span.split("::")[0]
        if REPO_PATH.fullmatch(path) and not glob.glob(str(ROOT / path)):
            missing.append(span)
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_path_check_catches_a_missing_path():
    assert REPO_PATH.fullmatch("fmcluster/spec/models.py") and REPO_PATH.fullmatch("tests/x.py")
    assert REPO_PATH.fullmatch("fmcluster/observability/rules/*.yaml")
    assert not REPO_PATH.fullmatch("GROUP/nccl.sbatch") and not REPO_PATH.fullmatch("/fsx/models")
    assert not glob.glob(str(ROOT / "fmcluster/no_such_module.py"))


def test_nothing_points_outside_the_repository():
    """The design document is docs/design.md: no file names the documents it replaced."""
    outside = re.compile(r"\b(?:DESIGN|FACTS|STYLE)\.md\b|\.\./shared\b|\bshared/(?:DESIGN|FACTS|STYLE)")
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".json", ".txt", "") and path.is_file():
            if path == Path(__file__).resolve():
                continue
            text = path.read_text(errors="replace")
            found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}" for m in outside.finditer(text)]
    assert not found, f"point these at docs/design.md, or remove them: {found}"


def test_the_readme_stays_short_and_links_into_the_docs():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert re.search(r"A user install takes about \d+ MB", text), "the README says how big a user install is"
    for target in re.findall(r"\]\((docs/[^)#]+)", text) + re.findall(r"\]\((LICENSE)\)", text):
        assert (ROOT / target).is_file(), target
    for page in ("docs/install.md", "docs/design.md", "docs/spec.md", "docs/runbooks.md", "docs/development.md"):
        assert f"]({page})" in text, page


def test_the_license_file_is_the_one_the_package_metadata_names():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert json.loads((ROOT / "package.json").read_text())["license"] == "Apache-2.0"


def test_each_page_is_once_in_the_navigation_and_the_index():
    """The site's navigation (mkdocs.yml) lists each page once, and the index's table of what to
    read links each page from one row: a page listed twice is two entries for one thing."""
    import re

    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    pages = re.findall(r":\s+(\S+\.md)\s*$", nav, flags=re.MULTILINE)
    assert pages and sorted(p for p in set(pages) if pages.count(p) > 1) == []
    rows = [line for line in (ROOT / "docs/index.md").read_text().splitlines() if line.startswith("| ")]
    linked = [set(re.findall(r"\]\(([^)#]+\.md)", row)) for row in rows]
    twice = sorted({page for i, row in enumerate(linked) for page in row
                    if any(page in other for other in linked[i + 1:])})
    assert twice == []
