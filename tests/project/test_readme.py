"""The commands the README and the docs show work as written, in a fresh shell, outside make.

The command blocks (```console, `$ ` prompts) of the sections in RUN (per markdown file) are run
as scripts (but the commands that need AWS, NEEDS_AWS), one bash per block with a clean
environment (no venv or node_modules on PATH, no CDK or AWS variables but
AWS_EC2_METADATA_DISABLED), in a copy of the repository as a fresh clone has it. The copy shares
this checkout's .venv, .venv-scan and node_modules (links), dated so that `make install` there has nothing to
do: what is tested is the commands, not a second installation (.ci/run installs from scratch).
Output a page shows under a command must be in what it prints (`...` skips lines).

Every other command of the README and of docs/ is either checked by the test named in CHECKED or
needs an AWS account or a running cluster (NEEDS_AWS); a new command block must be sorted into
one of them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.paths import ROOT

# Every markdown file whose commands are held here: the README and the documentation site's pages.
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))]

# What a reader of a control plane's guide has done first: installed fmcluster (the venv, activated)
# and gone somewhere of their own, outside the repository, where the guide's `fmcluster init` starts
# a project ($WORK: a directory of the test's)
IN_A_PROJECT = 'source .venv/bin/activate && mkdir -p "$WORK/projects" && cd "$WORK/projects"'
# The guides that start from `fmcluster init`: page -> its section with the block -> orchestrator
GUIDES = {
    "docs/guides/pcs.md": ("From spec to a running cluster (AWS PCS)", "pcs"),
    "docs/guides/eks.md": ("Amazon EKS (`eks`)", "eks"),
    "docs/guides/hyperpod-slurm.md": ("SageMaker HyperPod Slurm (`hyperpod-slurm`)", "hyperpod-slurm"),
    "docs/guides/hyperpod-eks.md": ("SageMaker HyperPod on EKS (`hyperpod-eks`)", "hyperpod-eks"),
    "docs/guides/ultraservers.md": ("UltraServers (P6e-GB200)", "pcs"),
}

# File -> section -> what a reader does first that the section says in words, not in a command block.
RUN = {
    "README.md": {"Quick start": "source .venv/bin/activate"},
    **{page: {section: IN_A_PROJECT} for page, (section, _) in GUIDES.items()},
    "docs/gitops.md": {
        # the project made in the clone, as the README's quick start makes its own (npx finds the
        # pinned CDK CLI in the clone's node_modules), under a directory name of its own
        "From a project of your own":
            "source .venv/bin/activate && fmcluster init gitops-demo --name my-cluster > /dev/null && cd gitops-demo",
        "The pipeline file": "",
        "Synthesize and deploy the pipeline once": "",
        "GitHub Actions instead":
            "mkdir -p .github/workflows && cp examples/github-actions/deploy.yml .github/workflows/",
    },
}
DIFF_TEST = "tests/deploy/test_diff.py::test_readme_shows_real_diff_output"
# Commands whose output another test compares with what a page shows.
CHECKED = {
    "fmcluster validate tests/data/bad-spec.yaml": "tests/project/test_cli.py::test_readme_shows_real_validate_output",
    "fmcluster plan examples/p5-pcs.yaml": "tests/plan/test_plan.py::test_readme_shows_real_plan_output",
    "fmcluster preflight examples/p5en-reservation-pcs.yaml":
        "tests/deploy/test_preflight.py::test_readme_shows_real_preflight_output",
    "fmcluster diff examples/p5-pcs.yaml p5-pcs-efa.yaml": DIFF_TEST,
    "fmcluster diff examples/p5-pcs.yaml p5-pcs-grow.yaml": DIFF_TEST,
    "fmcluster jobs examples/p5-pcs.yaml -o acceptance": "tests/kits/test_jobs.py::test_readme_shows_real_jobs_output",
    "fmcluster capacity find examples/p5-pcs.yaml": "tests/deploy/test_capacity.py::test_docs_show_real_find_output",
    "fmcluster destroy examples/p5-pcs.yaml --dry-run":
        "tests/deploy/test_destroy.py::test_docs_show_real_destroy_output",
}
NEEDS_AWS = re.compile(r"(GROUP=\$\()?(aws|kubectl|sinfo|sbatch|srun)\b")
BANNERS = re.compile(r"end-of-life|not supported anymore|Traceback", re.I)


class Command(NamedTuple):
    text: str  # as typed after `$ `, continuation lines included
    shown: str  # the output the page shows under it


def sections(page: str) -> dict[str, str]:
    """Heading -> the text under it up to the next heading, of one markdown file (the `#` lines
    inside code blocks are not headings)."""
    found: dict[str, list[str]] = {}
    body: list[str] = []
    fence = False
    for line in (ROOT / page).read_text().splitlines(keepends=True):
        if line.lstrip(" ").startswith("```"):
            fence = not fence
        heading = None if fence else re.match(r"^#{1,3} (.+)\n", line)
        if heading:
            body = found.setdefault(heading.group(1), [])
        else:
            body.append(line)
    return {title: "".join(lines) for title, lines in found.items()}


def blocks(text: str) -> list[list[Command]]:
    """The command blocks of a page's text, each a list of commands; a block indented in a list
    item is read without its indentation."""
    found = []
    for indent, block in re.findall(r"^( *)```console\n(.*?)^\1```", text, re.S | re.M):
        commands: list[Command] = []
        lines = [line[len(indent):] if line.startswith(indent) else line for line in block.splitlines()]
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            typed = [lines[i][2:]]
            while typed[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                typed.append(lines[i])
            shown = []
            while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
                i += 1
                shown.append(lines[i])
            commands.append(Command("\n".join(typed), "\n".join(shown)))
            i += 1
        found.append(commands)
    return found


def fresh_env() -> dict[str, str]:
    """A new login's environment: the system's PATH, without this checkout's venv and node_modules,
    and no AWS credentials (not even a profile of the machine's, which the CDK CLI would find: the
    commands run are the ones that need none)."""
    inside = {str(ROOT), str(ROOT.resolve())}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not any(p == r or p.startswith(r + os.sep) for r in inside)
            and not (os.environ.get("VIRTUAL_ENV") and p.startswith(os.environ["VIRTUAL_ENV"]))]
    env = {"PATH": os.pathsep.join(path), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           # no probe of an EC2 metadata service for credentials from a test (nothing else is set)
           "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The repository as a fresh clone of this working tree has it, sharing .venv, .venv-scan and
    node_modules."""
    stamps = [ROOT / ".venv/.installed", ROOT / "node_modules/.installed", ROOT / ".venv-scan/.installed",
              ROOT / ".venv/bin/node"]
    if not all(p.exists() for p in stamps):
        if os.environ.get("CI"):
            pytest.fail("make install first")
        pytest.skip("make install first")
    if subprocess.run(["make", "-q", "install"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("the installation is older than its inputs: make install first")
    inputs = ["requirements.txt", "requirements-scan.txt", "pyproject.toml", "package.json", "package-lock.json",
              ".nvmrc"]
    oldest = min(p.stat().st_mtime for p in stamps[:3])
    copy = tmp_path_factory.mktemp("clone") / "fmcluster"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    for shared in (".venv", "node_modules", ".venv-scan"):
        (copy / shared).symlink_to(ROOT / shared)
    for name in inputs:  # as old as the installation, so that make install has nothing to do
        os.utime(copy / name, (oldest - 60, oldest - 60))
    return copy


def run_block(clone: Path, commands: list[Command], setup: str, out: Path) -> list[tuple[Command, str, str]]:
    out.mkdir(parents=True)
    script = ["cd " + shlex_quote(str(clone)), f"export WORK={shlex_quote(str(out))}", setup]
    for n, command in enumerate(commands):
        script.append(f"{{ {command.text}\n}} > {out}/{n}.out 2> {out}/{n}.err "
                      f"|| {{ rc=$?; echo \"exit $rc: command {n}\" > {out}/failed; exit $rc; }}")
    result = subprocess.run(["bash", "--noprofile", "--norc", "-c", "\n".join(script)], env=fresh_env(),
                            capture_output=True, text=True, timeout=600)
    ran = [(c, (out / f"{n}.out").read_text() if (out / f"{n}.out").exists() else "",
            (out / f"{n}.err").read_text() if (out / f"{n}.err").exists() else "") for n, c in enumerate(commands)]
    if result.returncode:
        failed = (out / "failed").read_text() if (out / "failed").exists() else result.stderr
        n = int(failed.split("command ")[1]) if "command " in failed else -1
        detail = f"{ran[n][0].text!r}\nstdout: {ran[n][1][-3000:]}\nstderr: {ran[n][2][-3000:]}" if n >= 0 else ""
        pytest.fail(f"{failed.strip()}: {detail}")
    return ran


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def assert_shows(command: Command, stdout: str) -> None:
    """Each part of what the page shows (split at `...` lines) is in the output, in order."""
    at = 0
    for part in re.split(r"^\.\.\.\n?", command.shown + "\n", flags=re.M):
        part = part.strip("\n")
        if part:
            found = stdout.find(part, at)
            assert found >= 0, f"{command.text!r} shows\n{part}\nbut printed\n{stdout[:3000]}"
            at = found + len(part)


@pytest.mark.parametrize("page, section", [(page, section) for page, run in RUN.items() for section in run])
def test_section_runs_as_written_in_a_fresh_shell(page, section, clone, tmp_path):
    found = [[c for c in block if not NEEDS_AWS.match(c.text)] for block in blocks(sections(page)[section])]
    found = [block for block in found if block]
    assert found, f"no command block in {page}, {section}"
    for index, commands in enumerate(found):
        for command, stdout, stderr in run_block(clone, commands, RUN[page][section], tmp_path / str(index)):
            assert_shows(command, stdout)
            assert not BANNERS.search(stderr), f"{command.text!r}: {stderr[-3000:]}"
    for project in (clone, clone / "my-cluster"):
        assert not (project / "cdk.context.json").exists(), "synthesis must not look anything up"


def test_quick_start_starts_a_project_validates_plans_and_synthesizes():
    """The README's Quick start starts with `fmcluster init` (after installing, which it says in
    words: RUN activates the venv, as a clone's reader does), and validates, plans and synthesizes
    the project in its own directory, with fmcluster and with the CDK CLI."""
    quick_start = sections("README.md")["Quick start"]
    typed = [c.text for block in blocks(quick_start) for c in block]
    assert typed[0].startswith("fmcluster init my-cluster")
    assert typed[1] == "cd my-cluster"
    for command in ("fmcluster validate cluster.yaml", "fmcluster plan cluster.yaml",
                    "fmcluster synth cluster.yaml", "npx aws-cdk synth -q"):
        assert any(t.startswith(command) for t in typed), command
    assert "pipx install" in quick_start and "make install" in quick_start and "make test" in quick_start


def test_every_command_shown_is_run_checked_or_needs_aws():
    assert set(RUN) <= set(PAGES)
    unsorted, shown = [], set()
    for page in PAGES:
        for title, body in sections(page).items():
            assert title not in RUN.get(page, {}) or blocks(body), f"{page}: no command block in {title}"
            for commands in blocks(body):
                for command in commands:
                    if title in RUN.get(page, {}) or NEEDS_AWS.match(command.text):
                        continue
                    key = next((k for k in CHECKED if command.text.startswith(k)), None)
                    if key is None:
                        unsorted.append(f"{page}, {title}: {command.text}")
                    else:
                        shown.add(key)
    assert not unsorted, f"run them (RUN), name their test (CHECKED) or mark them NEEDS_AWS: {unsorted}"
    assert shown == set(CHECKED), f"no page shows {set(CHECKED) - shown}: remove them from CHECKED"
    for test in set(CHECKED.values()):
        path, name = test.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), test


@pytest.mark.parametrize("page", GUIDES)
def test_each_control_plane_guide_starts_a_project_with_init(page):
    """A guide walks from `fmcluster init` (the project's cluster.yaml, run above in a fresh shell)
    to a deploy of that project, not of an example, with the README's command: `npx aws-cdk deploy`
    in the project, whose cdk.json names the spec."""
    section, orchestrator = GUIDES[page]
    typed = [c.text for block in blocks(sections(page)[section]) for c in block if not NEEDS_AWS.match(c.text)]
    assert typed[:3] == [f"fmcluster init my-cluster --orchestrator {orchestrator} --instance-type "
                         f"{typed[0].rsplit(' ', 1)[-1]}", "cd my-cluster", "fmcluster validate cluster.yaml"]
    text = (ROOT / page).read_text()
    assert not re.search(r"cdk deploy -c spec=examples/", text), "a guide deploys a project, not an example"
    assert "my-cluster.yaml" not in text, "init writes cluster.yaml"
    if orchestrator in ("pcs", "hyperpod-slurm") and page != "docs/guides/ultraservers.md":
        assert "npx aws-cdk deploy --all" in " ".join(text.split())


def test_the_walkthrough_deploys_every_stack_in_order():
    """The PCS walkthrough names every stack `cdk deploy` makes for its project, in the order it
    deploys them: the node images (an hour on a first deploy), observability and the reference GPU
    image (after the cluster) included."""
    from fmcluster.deploy import init
    from fmcluster.model import cluster as cluster_model
    from fmcluster.spec import loader

    text = " ".join((ROOT / "docs/guides/pcs.md").read_text().split())
    step = text[text.index("**Deploy.**"):text.index("**Log in.**")]
    spec = loader.load_text(init.spec_text("pcs", "p5.48xlarge", "my-cluster", "us-east-1", "use1-az4")).spec
    names = [s.name for s in cluster_model.resolve(spec).stacks]
    assert len(names) == 6
    assert [n for n in sorted(names, key=step.find) if n in step] == names, step
