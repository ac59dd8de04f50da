"""The command line: exit codes, output format, no tracebacks, no CDK import for validate; every
command of one shape (run -> report, render, exit_code), and only the CLI prints."""

import argparse
import ast
import dataclasses
import importlib
import inspect
import json
import re
import subprocess
import sys

import pytest
from pydantic import BaseModel

from fmcluster.cli import COMMANDS, build_parser, main
from fmcluster.cli.validate import cmd_validate
from tests.support.paths import EXAMPLES_DIR, ROOT

EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (EXAMPLES_DIR).glob("*.yaml"))


def run(*args):
    return subprocess.run([sys.executable, "-m", "fmcluster", *args], cwd=ROOT, capture_output=True, text=True)


def test_examples_validate_ok(capsys):
    assert main(["validate", *[str(ROOT / e) for e in EXAMPLES]]) == 0
    out = capsys.readouterr().out
    assert out.count(": ok") == len(EXAMPLES)


def test_invalid_spec_exits_2_with_located_errors(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text((ROOT / "examples/p5-pcs.yaml").read_text().replace("count: 16", "count: sixteen"))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"{spec}:" in err and ": error: node_groups[0].count: " in err


def test_one_bad_file_among_good_ones(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["validate", str(ROOT / EXAMPLES[0]), str(bad)]) == 2
    captured = capsys.readouterr()
    assert ": ok" in captured.out and "bad.yaml" in captured.err


def test_warnings_do_not_fail(tmp_path, capsys):
    text = (ROOT / "examples/p5-pcs.yaml").read_text().replace(
        "  type: pcs", "  admin_role_arn: arn:aws:iam::111122223333:role/admin\n  type: pcs")
    spec = tmp_path / "warn.yaml"
    spec.write_text(text)
    assert main(["validate", str(spec)]) == 0
    assert ": warning: orchestrator.admin_role_arn: " in capsys.readouterr().err


def test_json_format(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["validate", "--format", "json", str(ROOT / EXAMPLES[0]), str(bad)]) == 2
    report = json.loads(capsys.readouterr().out)
    assert [r["ok"] for r in report] == [True, False]
    assert report[1]["diagnostics"][0]["path"]


@pytest.mark.parametrize("content", [
    "name: [unclosed\n", "- a\n- b\n", "", "name: 5\nfoo: bar\n", b"\xff\xfe\x00".decode("latin-1"),
])
def test_bad_input_never_tracebacks(tmp_path, content):
    spec = tmp_path / "spec.yaml"
    spec.write_text(content, encoding="latin-1")
    result = run("validate", str(spec))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{spec}:" in result.stderr


@pytest.mark.parametrize("target", ["missing.yaml", "."])
def test_missing_file_and_directory(target):
    result = run("validate", target)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_bad_command_line_exits_2():
    assert run("validate").returncode == 2
    assert run("frobnicate").returncode == 2


@pytest.mark.parametrize("argv, specs, format", [
    (["validate", "a.yaml"], ["a.yaml"], "text"),
    (["validate", "a.yaml", "dir/b.yaml", ""], ["a.yaml", "dir/b.yaml", ""], "text"),
    (["validate", "--format", "json", "a.yaml"], ["a.yaml"], "json"),
    (["validate", "a.yaml", "--format=json"], ["a.yaml"], "json"),
    (["validate", "--", "-a.yaml"], ["-a.yaml"], "text"),
])
def test_validate_command_line(argv, specs, format):
    args = build_parser().parse_args(argv)
    assert (args.command, args.specs, args.format, args.func) == ("validate", specs, format, cmd_validate)


def test_the_program_validates_every_file_it_is_given():
    result = run("validate", *EXAMPLES)
    assert result.returncode == 0 and result.stdout.count(": ok") == len(EXAMPLES)


def test_validate_does_not_import_aws_cdk_or_boto3():
    code = ("import sys; from fmcluster.cli import main; rc = main(['validate', *sys.argv[1:]]); "
            "heavy = [m for m in ('aws_cdk', 'jsii', 'boto3', 'botocore', 'constructs') if m in sys.modules]; "
            "print('HEAVY', heavy); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code, *EXAMPLES], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout


def test_schema_is_json_schema_of_the_spec(capsys):
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["additionalProperties"] is False
    assert {"name", "region", "availability_zone_id", "orchestrator", "node_groups"} <= set(schema["required"])
    assert "throughput_per_tib" in schema["$defs"]["LustreSpec"]["properties"]


def test_schema_describes_every_field(capsys):
    """Each model and each field carries its documentation (`Field(description=...)`), which
    editors show from the schema."""
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    models = {"ClusterSpec": schema, **schema["$defs"]}
    undocumented = [name for name, model in models.items() if not model.get("description")]
    undocumented += [f"{name}.{field}" for name, model in models.items()
                     for field, prop in model.get("properties", {}).items() if not prop.get("description")]
    assert undocumented == []


def test_published_schema_file_is_current(capsys):
    """docs/cluster-spec.schema.json (used by editors) matches `fmcluster schema`."""
    main(["schema"])
    assert json.loads(capsys.readouterr().out) == json.loads((ROOT / "docs/cluster-spec.schema.json").read_text()), \
        "regenerate it: python -m fmcluster schema > docs/cluster-spec.schema.json"


def test_examples_validate_against_published_schema():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json.loads((ROOT / "docs/cluster-spec.schema.json").read_text())
    for example in EXAMPLES:
        jsonschema.validate(yaml.safe_load((ROOT / example).read_text()), schema)


def test_readme_shows_real_validate_output():
    """The error-format example in the docs (Commands) is what validate prints for tests/data/bad-spec.yaml."""
    result = run("validate", "tests/data/bad-spec.yaml")
    assert result.returncode == 2
    readme = (ROOT / "docs" / "commands.md").read_text()
    assert "$ fmcluster validate tests/data/bad-spec.yaml\n" + result.stderr in readme


@pytest.mark.parametrize("flags, policy", [([], "protecting"), (["--lift"], "lifting")])
def test_stack_policy_prints_the_storage_stacks_policy(flags, policy, capsys):
    from fmcluster.deploy import stack_policy

    assert main(["stack-policy", *flags]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == getattr(stack_policy, policy)()
    if policy == "protecting":
        (deny,) = [s for s in printed["Statement"] if s["Effect"] == "Deny"]
        assert deny["Action"] == ["Update:Replace", "Update:Delete"]
        assert "AWS::FSx::FileSystem" in deny["Condition"]["StringEquals"]["ResourceType"]


# ---- one shape for every command -------------------------------------------------------------

# Engines besides `run` that a command's module (or another) has, returning the same report.
OTHER_ENGINES = {"validate": ["fmcluster.deploy.pipeline:run"], "diff": ["fmcluster.deploy.diff:run_deployed"],
                 "synth": ["fmcluster.deploy.synth:summarize"]}


def annotation(function, value):
    """An annotation of `function` (a string: the modules use postponed annotations) as the
    object it names in the function's module."""
    return eval(value, vars(sys.modules[function.__module__])) if isinstance(value, str) else value


def is_frozen(kind) -> bool:
    if dataclasses.is_dataclass(kind):
        return kind.__dataclass_params__.frozen
    return issubclass(kind, BaseModel) and kind.model_config.get("frozen") is True  # the plan: its JSON Schema


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_one_shape(name):
    """run(...) -> a frozen report; render(report, fmt) -> (stdout, stderr); exit_code(report) -> int."""
    module = importlib.import_module(COMMANDS[name].module)
    report = annotation(module.run, inspect.signature(module.run).return_annotation)
    assert is_frozen(report), f"{module.__name__}.run returns {report}, not a frozen dataclass"
    render, exit_code = inspect.signature(module.render), inspect.signature(module.exit_code)
    assert list(render.parameters) == ["report", "fmt"] and list(exit_code.parameters) == ["report"]
    assert annotation(module.render, render.parameters["report"].annotation) is report
    assert annotation(module.exit_code, exit_code.parameters["report"].annotation) is report
    assert annotation(module.render, render.return_annotation) == tuple[str, str]
    assert annotation(module.exit_code, exit_code.return_annotation) is int
    assert module.FORMATS and all(isinstance(f, str) for f in module.FORMATS)
    for target in OTHER_ENGINES.get(name, []):
        other_module, function = target.split(":")
        engine = getattr(importlib.import_module(other_module), function)
        assert annotation(engine, inspect.signature(engine).return_annotation) is report, target


# The modules of fmcluster/cli/ that hold no command: the package, what the commands share, the program
CLI_SHARED = ("__init__", "core", "program")


def test_each_command_module_holds_its_commands_arguments_and_dispatch():
    """fmcluster/cli/ has a module per command, or per small family of commands: each Command of
    COMMANDS is declared in one, beside the function that adds its arguments and the dispatch
    those arguments set; every other module of the package declares a command; and a command
    module imports no module of the CLI but core."""
    files = sorted((ROOT / "fmcluster" / "cli").glob("*.py"))
    command_modules = {f"fmcluster.cli.{p.stem}" for p in files if p.stem not in CLI_SHARED}
    for name, command in COMMANDS.items():
        module = command.add_arguments.__module__
        assert module in command_modules, f"{name}: its arguments are added in {module}"
        assert any(value is command for value in vars(sys.modules[module]).values()), f"{name} not in {module}"
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        assert parser.get_default("func").__module__ == module, f"{name}: dispatched outside {module}"
    assert {c.add_arguments.__module__ for c in COMMANDS.values()} == command_modules
    for path in files:
        if path.stem in CLI_SHARED:
            continue
        nodes = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.Import, ast.ImportFrom))]
        imported = {alias.name if isinstance(n, ast.Import) else f"{n.module}.{alias.name}"
                    for n in nodes for alias in n.names}
        cli = {name for name in imported if name == "fmcluster.cli" or name.startswith("fmcluster.cli.")}
        assert all(name == "fmcluster.cli.core" or name.startswith("fmcluster.cli.core.") for name in cli), \
            f"{path.name} imports {sorted(cli)}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_and_offers_the_formats_its_module_renders(name, capsys):
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    shown = re.search(r"--format \{([a-z,]+)\}", capsys.readouterr().out)
    formats = tuple(importlib.import_module(COMMANDS[name].module).FORMATS)
    assert (tuple(shown.group(1).split(",")) if shown else formats[:1]) == formats


def fmcluster_sources():
    return [(path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), str(path)))
            for path in sorted((ROOT / "fmcluster").rglob("*.py"))]


def test_only_the_cli_prints():
    """No module of fmcluster/ but those of fmcluster/cli/ calls print() or writes to sys.stdout /
    sys.stderr: the engines return reports, the CLI prints them."""
    found = []
    for name, tree in fmcluster_sources():
        if name.startswith("fmcluster/cli/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{name}:{node.lineno}: print()")
            elif (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
                  and isinstance(node.value, ast.Name) and node.value.id == "sys"):
                found.append(f"{name}:{node.lineno}: sys.{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module == "sys":
                found += [f"{name}:{node.lineno}: from sys import {a.name}" for a in node.names
                          if a.name in ("stdout", "stderr")]
    assert found == []


def test_the_only_entry_point_is_the_cli():
    """No `if __name__ == "__main__":` in fmcluster/ but __main__.py (`python -m fmcluster`): every
    command is a subcommand of `fmcluster`."""
    def main_guard(test: ast.expr) -> bool:
        return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
                and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))

    found = [f"{name}:{node.lineno}" for name, tree in fmcluster_sources() if name != "fmcluster/__main__.py"
             for node in ast.walk(tree) if isinstance(node, ast.If) and main_guard(node.test)]
    assert found == []


def test_synth_summarizes_an_assembly_already_written(tmp_path, capsys):
    """`fmcluster synth --assembly DIR` (make synth, after `npx cdk synth`): a line per stack."""
    (tmp_path / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": {
        "c-storage": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "c-storage.template.json"}},
        "Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}}}}))
    (tmp_path / "c-storage.template.json").write_text(json.dumps({"Resources": {
        "Data": {"Type": "AWS::S3::Bucket"}, "Logs": {"Type": "AWS::S3::Bucket"}, "Key": {"Type": "AWS::KMS::Key"},
        "Topic": {"Type": "AWS::SNS::Topic"}}}))
    assert main(["synth", "--assembly", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (f"c-storage: 4 resources (1 KMS::Key, 2 S3::Bucket) -> "
                                       f"{tmp_path / 'c-storage.template.json'}\n")
    assert main(["synth", "--assembly", str(tmp_path / "none")]) == 2
    assert "no cloud assembly to read" in capsys.readouterr().err
    assert main(["synth", "--assembly", str(tmp_path), "examples/p5-pcs.yaml"]) == 2
    assert main(["synth"]) == 2


def test_a_cluster_no_vpc_holds_is_reported_at_its_count(tmp_path, capsys):
    """`count: 9000` in examples/p5-pcs.yaml, which leaves vpc_cidr to its default (the largest
    VPC already): the subnet error is at the count's line and column, not at the file's first key."""
    text = (EXAMPLES_DIR / "p5-pcs.yaml").read_text()
    assert "count: 16  " in text and "vpc_cidr" not in text
    huge = tmp_path / "huge.yaml"
    huge.write_text(text.replace("count: 16  ", "count: 9000", 1))
    assert main(["validate", str(huge)]) == 2
    err = capsys.readouterr().err
    line = next(i for i, row in enumerate(huge.read_text().splitlines(), 1) if "count: 9000" in row)
    column = huge.read_text().splitlines()[line - 1].index("9000") + 1
    found = re.search(rf"^{re.escape(str(huge))}:(\d+):(\d+): error: (\S+): (.*)\[gpu-subnet-holds-cluster\]$",
                      err, re.MULTILINE)
    assert found and (int(found[1]), int(found[2]), found[3]) == (line, column, "node_groups[0].count"), err
    assert "default vpc_cidr 10.0.0.0/16" in found[4]
    assert "hint: no VPC holds that" in err and "use a larger vpc_cidr" not in err
