"""A mutation test of `fmcluster validate` over the examples (issue 15).

Each example is mutated at every value it holds (wrong types, out-of-range and extreme numbers,
long strings, control characters, removed keys; and values of the right type the rules must
judge: flipped booleans, numbers at 0, 1 and doubled, every control plane and capacity type),
as a whole (alias bombs, recursive aliases,
merge keys, deep nesting, many node groups) and replaced by what is not a spec at all (a
directory, a FIFO, a device, binary garbage, an empty or a huge file). All of them go to one
`fmcluster validate` process, as a user would run it, under a timeout; the contract:

- no traceback and no hang: the process ends within the timeout, exit 0 or 2;
- one verdict per file: `FILE: ok` or `FILE: N error(s)`, with N the errors printed for it;
- each problem is one located line, `FILE:LINE:COL: SEVERITY: PATH: MESSAGE [rule]`, at a line and
  column inside the file, followed only by the spec's line with a caret and a hint or reason.

The mutations that validate and touch the control plane, and a sample of the others, are then
synthesized (a few also linted): a spec `validate` accepts must synthesize, into templates
cfn-lint finds no error in. `FMCLUSTER_FUZZ_LINT=1` synthesizes and lints every accepted mutation
(about 270, some 20 minutes). The command line's other edges, output paths it cannot write and
Ctrl-C, have their mutation test in tests/project/test_cli_edges.py.
"""

from __future__ import annotations

import copy
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from fmcluster.spec import loader
from tests.support.corpus import Corpus
from tests.support.paths import EXAMPLES_DIR, ROOT
from tests.support.specs import SAFE_DUMPER, leaves, replaced

EXAMPLES = sorted((EXAMPLES_DIR).glob("*.yaml"))
TIMEOUT_S = 240
# Values a leaf is replaced by; each leaf gets a few, chosen by its position, so every kind of
# value meets every kind of field across the examples without a combinatorial explosion.
REPLACEMENTS: tuple[Any, ...] = (
    None, True, -1, 0, 1, 10**30, 3.5, "", "x", "a\nb\x00c", "é" * 5000, [], {}, [1, 2], {"a": 1},
    "${AWS::Region}", "/", "../../etc", "default", "aws:x",
)
HEADER = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|accepted): (?P<path>\S.*?): "
                    r"(?P<message>\S.*?)(?: \[(?P<rule>[a-z][a-z0-9-]*)\])?$")
SOURCE = re.compile(r"^ (?P<line>\d+) \| (?P<text>.*)$")
CARET = re.compile(r"^ +\| (?P<pad> *)\^$")
NOTE = re.compile(r"^  (hint|reason): \S.*$")
VERDICT = re.compile(r"^(?P<file>.+?): (?:ok|(?P<n>\d+) errors?)$")


def removed(data: Any, path: tuple[Any, ...]) -> Any:
    out = copy.deepcopy(data)
    node = out
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return out


def bomb(levels: int = 9) -> str:
    lines = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def whole_document_mutations(text: str, data: dict[str, Any]) -> Iterator[tuple[str, str | bytes]]:
    yield "bomb", bomb() + text
    yield "recursive", text + "loop: &loop [x, *loop]\n"
    yield "recursive-map", text + "loop: &loop {a: *loop}\n"
    yield "deep", text + "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n"
    yield "deep-flow", text + "deep: " + "[" * 2000 + "]" * 2000 + "\n"
    group = data["node_groups"][0]
    # (teams name node groups: they go with the groups the mutation leaves out)
    body = yaml.safe_dump({k: v for k, v in data.items() if k not in ("node_groups", "teams")}, sort_keys=False)
    first = yaml.safe_dump([{k: v for k, v in group.items() if k != "team"}], sort_keys=False).replace(
        "- ", "- &base\n  ", 1)
    # the first group anchored, a second made from it by a merge key, with its own name
    yield "merge", body + "node_groups:\n" + "".join(f"  {line}\n" for line in first.splitlines()) + \
        f"  - <<: *base\n    name: {group['name'][:20]}-b\n"
    many = {**data, "node_groups": [{**group, "name": f"g{i:03d}"} for i in range(120)]}
    yield "many-groups", yaml.safe_dump(many, sort_keys=False)
    yield "duplicate-key", text + f"name: {data['name']}\n"
    yield "tabs", text.replace("  ", "\t", 1)
    yield "bom-and-crlf", "\ufeff" + text.replace("\n", "\r\n")
    yield "nul-byte", text.replace(":", ":\x00", 1)
    yield "binary", bytes(range(256)) * 4
    yield "latin-1", text.encode("utf-8") + "# caf\xe9\n".encode("latin-1")
    yield "list", "- " + text.replace("\n", "\n  ")
    yield "scalar", "just words\n"
    yield "empty", ""
    yield "two-documents", text + "---\n" + text
    yield "tagged", re.sub(r"(?m)^name: ", "name: !!python/object:os.system ", text, count=1)


def value_mutations(data: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for n, path in enumerate(leaves(data)):
        label = ".".join(map(str, path))
        for k in range(3):
            value = REPLACEMENTS[(n * 3 + k) % len(REPLACEMENTS)]
            yield f"{label}={k}", replaced(data, path, value)
        yield f"{label}-removed", removed(data, path)


CHOICES = {"type": None, "deployment_type": ("PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2"),
           "compression": ("LZ4", "NONE"), "endpoint_access": ("public-and-private", "private")}
PLANES = ("pcs", "hyperpod-slurm", "eks", "hyperpod-eks")
CAPACITY = ("on-demand", "reservation", "capacity-block", "spot")


def semantic_mutations(data: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Values of the right type that the rules must judge: booleans flipped, whole numbers at 0, 1
    and doubled, every choice of the choice fields (the control plane, capacity types, ...)."""
    for path in leaves(data):
        node = data
        for part in path:
            node = node[part]
        label, key = ".".join(map(str, path)), path[-1]
        if isinstance(node, bool):
            yield f"{label}=not", replaced(data, path, not node)
        elif isinstance(node, int):
            for value in (0, 1, node * 2):
                yield f"{label}={value}", replaced(data, path, value)
        elif key == "type" and path[:1] == ("orchestrator",):
            for plane in PLANES:
                yield f"{label}={plane}", replaced(data, path, plane)
        elif key == "type" and "capacity" in path:
            for capacity in CAPACITY:
                yield f"{label}={capacity}", replaced(data, path, capacity)
        elif isinstance(key, str) and CHOICES.get(key):
            for choice in CHOICES[key] or ():
                yield f"{label}={choice}", replaced(data, path, choice)


@pytest.fixture(scope="module")
def mutants(tmp_path_factory) -> dict[Path, str]:
    """Mutation file -> what it is; every example's mutations, and files that are not specs."""
    root = tmp_path_factory.mktemp("mutations")
    files: dict[Path, str] = {}
    for example in EXAMPLES:
        text = example.read_text()
        data = yaml.safe_load(text)
        for i, (label, mutated) in enumerate(value_mutations(data)):
            path = root / f"{example.stem}-v{i:04d}.yaml"
            path.write_text(yaml.dump(mutated, Dumper=SAFE_DUMPER, sort_keys=False, allow_unicode=True))
            files[path] = f"{example.name}: {label}"
        for i, (label, mutated) in enumerate(semantic_mutations(data)):
            path = root / f"{example.stem}-s{i:04d}.yaml"
            path.write_text(yaml.dump(mutated, Dumper=SAFE_DUMPER, sort_keys=False, allow_unicode=True))
            files[path] = f"{example.name}: {label}"
        for label, content in whole_document_mutations(text, data):
            path = root / f"{example.stem}-{label}.yaml"
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8", newline="")
            files[path] = f"{example.name}: {label}"
    (root / "a-directory.yaml").mkdir()
    files[root / "a-directory.yaml"] = "a directory"
    os.mkfifo(root / "a-fifo.yaml")
    files[root / "a-fifo.yaml"] = "a FIFO nobody writes to"
    with open(root / "huge.yaml", "wb") as handle:
        handle.truncate(64 << 20)
    files[root / "huge.yaml"] = "a 64 MiB file"
    files[Path("/dev/zero")] = "an endless device"
    files[root / "missing.yaml"] = "no such file"
    return files


@pytest.fixture(scope="module")
def run(mutants) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fmcluster", "validate", *map(str, mutants)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def test_there_are_many_mutations_of_every_kind(mutants):
    assert len(mutants) > 1000
    for example in EXAMPLES:
        assert sum(1 for what in mutants.values() if what.startswith(example.name)) > 100


def test_no_traceback_no_hang_exit_0_or_2(run):
    assert run.returncode in (0, 2), run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout


def test_one_verdict_per_file_and_one_located_line_per_problem(run, mutants):
    verdicts: dict[str, int] = {}
    for line in run.stdout.splitlines():
        found = VERDICT.match(line)
        assert found and found["n"] is None, line
        verdicts[found["file"]] = 0
    errors: dict[str, int] = {}
    lines = run.stderr.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        header = HEADER.match(line)
        if header is None:
            verdict = VERDICT.match(line)
            assert verdict and verdict["n"] is not None, f"not a located line or a verdict: {line!r}"
            assert verdict["file"] not in verdicts, f"two verdicts for {verdict['file']}"
            verdicts[verdict["file"]] = int(verdict["n"])
            i += 1
            continue
        file, at = header["file"], (int(header["line"]), int(header["col"]))
        assert at >= (1, 1), line
        if header["sev"] == "error":
            errors[file] = errors.get(file, 0) + 1
        i += 1
        if i < len(lines) and SOURCE.match(lines[i]):
            source = SOURCE.match(lines[i])
            assert int(source["line"]) == at[0], (line, lines[i])
            caret = CARET.match(lines[i + 1])
            assert caret, (line, lines[i + 1])
            assert len(caret["pad"]) == at[1] - 1, (line, lines[i + 1])
            assert at[1] - 1 <= len(source["text"]) + 1, (line, lines[i])  # the column is on the line
            i += 2
        while i < len(lines) and NOTE.match(lines[i]):
            i += 1
    named = {str(path) for path in mutants}
    assert set(verdicts) == named, named ^ set(verdicts)
    for file, count in verdicts.items():
        assert errors.get(file, 0) == count, (file, mutants[Path(file)], count, errors.get(file, 0))


def test_files_that_are_not_specs_are_refused(run, mutants):
    for path, what in mutants.items():
        if what in ("a directory", "a FIFO nobody writes to", "a 64 MiB file", "an endless device", "no such file"):
            assert f"{path}: 1 error" in run.stderr, what


def test_every_whole_document_mutation_that_must_fail_does(run, mutants):
    must_fail = ("bomb", "recursive", "recursive-map", "deep", "deep-flow", "many-groups", "duplicate-key",
                 "binary", "latin-1", "list", "scalar", "empty", "two-documents", "tagged", "nul-byte")
    for path, what in mutants.items():
        if what.split(": ", 1)[-1] in must_fail:
            assert re.search(rf"^{re.escape(str(path))}: \d+ errors?$", run.stderr, re.M), what


def test_merge_keys_and_a_byte_order_mark_are_fine(run, mutants):
    for path, what in mutants.items():
        if what.endswith(": merge") or what.endswith(": bom-and-crlf"):
            assert f"{path}: ok" in run.stdout, (what, [line for line in run.stderr.splitlines()
                                                        if line.startswith(str(path))])


def accepted_mutations(mutants: dict[Path, str], run: subprocess.CompletedProcess[str]) -> list[str]:
    return sorted(str(p) for p in mutants if f"{p}: ok" in run.stdout and re.search(r"-[vs]\d{4}", p.name))


def synthesize_and_lint(files: list[str], lint: list[str], mutants: dict[Path, str], tmp_path: Path,
                        corpus: Corpus) -> None:
    """Each of `files` synthesizes; the templates of those in `lint` have no cfn-lint error (through
    the run's corpus: a template byte-identical to an example's, a mutant's network stack say, is
    linted once a run). Those not linted synthesize through the corpus too (Corpus.in_process, the
    same build_app): mutants that differ only in what resolves the same (a third of the plane
    mutants) synthesize once."""
    from fmcluster.deploy.synth import app_context, cdk_json
    from fmcluster_cdk.synthesis import build_app

    context = app_context(cdk_json(ROOT))
    for i, file in enumerate(files):
        result = loader.load(file)
        assert result.ok, file
        if file not in lint:
            assert corpus.in_process(result.spec), mutants[Path(file)]
            continue
        build_app([result.spec], str(tmp_path / f"out{i}"), context).synth()
        written = sorted((tmp_path / f"out{i}").glob("*.template.json"))
        assert written, mutants[Path(file)]
        for template in written:
            errors = corpus.lint_errors(template)
            assert not errors, (mutants[Path(file)], template.name, errors[:3])


@pytest.mark.synth
def test_what_validates_synthesizes(mutants, run, tmp_path, corpus):
    """A spec that validate accepts must synthesize (issue 15: hyperpod-eks with login.count 0 did
    not): every accepted mutation that changes the control plane or its own nodes, and a fixed
    sample of the other accepted ones; a few of them are linted too (cfn-lint takes seconds per
    assembly: test_every_accepted_mutation_lints_clean lints them all, on demand)."""
    accepted = accepted_mutations(mutants, run)
    planes = [f for f in accepted if "orchestrator." in mutants[Path(f)]]
    others = [f for f in accepted if f not in planes]
    sample = planes + random.Random(15).sample(others, min(8, len(others)))
    assert len(planes) >= 6, planes  # the plane switches and login counts that validate
    synthesize_and_lint(sample, random.Random(16).sample(sample, 4), mutants, tmp_path, corpus)


@pytest.mark.skipif(os.environ.get("FMCLUSTER_FUZZ_LINT") != "1",
                    reason="about 20 minutes: set FMCLUSTER_FUZZ_LINT=1 to run it")
def test_every_accepted_mutation_lints_clean(mutants, run, tmp_path, corpus):
    """Every accepted mutation synthesized and linted: templates cfn-lint finds no error in (how an
    empty tag value, which CloudWatch alarms refuse, was found)."""
    accepted = accepted_mutations(mutants, run)
    synthesize_and_lint(accepted, accepted, mutants, tmp_path, corpus)


def test_what_validates_plans(mutants, run):
    """`fmcluster plan` of every accepted mutation, in every format (pure: milliseconds each)."""
    from fmcluster.plan import render as plan_render
    from fmcluster.plan import report as plan

    accepted = [p for p in mutants if f"{p}: ok" in run.stdout]
    assert len(accepted) > 100
    for path in accepted:
        result = loader.load(path)
        report = plan.build(result.spec, result.data)
        for render in plan_render.RENDERERS.values():
            assert render(report), mutants[path]
