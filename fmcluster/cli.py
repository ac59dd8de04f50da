"""The `fmcluster` command line: the only module that prints (fmcluster.terminal draws the
progress line of long commands on the stream given it here, when that is a terminal). Every command has one shape: its
module's `run(...)` returns a report (a frozen dataclass; the plan's is a frozen pydantic model,
for its JSON Schema), `render(report, fmt)` gives what goes to stdout and to stderr, and
`exit_code(report)` the exit code: 0 success, 1 a check or guard failed, 2 the spec or the
command line is invalid (or a file it names cannot be read or written), 130 Ctrl-C: one line
and no traceback, wherever it arrives. COMMANDS names each command's module. Heavy modules (aws_cdk, boto3)
are imported only by the commands that need them."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from fmcluster import __version__
from fmcluster.terminal import Progress

if TYPE_CHECKING:
    from datetime import datetime

    from fmcluster.spec.loader import LoadResult
    from fmcluster.spec.models import ClusterSpec

EXIT_OK, EXIT_INVALID = 0, 2  # the commands derive theirs (1: a check failed) from their reports


def _done(rendered: tuple[str, str], code: int) -> int:
    """Print a rendered report (stderr, then stdout) and return the command's exit code."""
    out, err = rendered
    sys.stderr.write(err)
    sys.stdout.write(out)
    return code


def _invalid(message: str) -> int:
    """A command line that argparse lets through but the command refuses."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_INVALID


def _stdin_twice(specs: list[str]) -> int | None:
    """EXIT_INVALID, after saying so, when `-` (standard input, read once) is given twice."""
    if specs.count("-") > 1:
        return _invalid("`-` (standard input) can stand for one SPEC only")
    return None


def cmd_validate(args: argparse.Namespace) -> int:
    from fmcluster.spec import loader

    if (refused := _stdin_twice(args.specs)) is not None:
        return refused
    if args.pipeline:
        from fmcluster.deploy import pipeline

        report = pipeline.run(args.specs)
    else:
        report = loader.run(args.specs)
    return _done(loader.render(report, args.format), loader.exit_code(report))


def cmd_schema(args: argparse.Namespace) -> int:
    from fmcluster.spec import schema

    report = schema.run()
    return _done(schema.render(report, "json"), schema.exit_code(report))


def _load_valid(path: str, fmt: str = "text") -> ClusterSpec | None:
    """The ClusterSpec of a valid spec file, or None after printing its problems (as
    `_valid_all`)."""
    from fmcluster.spec import loader

    return _valid(path, loader.load(path), fmt)


def _valid(path: str, result: LoadResult, fmt: str = "text") -> ClusterSpec | None:
    """The spec of a load result, or None after printing its problems (as `_valid_all`)."""
    specs = _valid_all([(path, result)], fmt)
    return specs[0] if specs else None


def _valid_all(results: list[tuple[str, LoadResult]], fmt: str) -> list[ClusterSpec] | None:
    """The specs of load results, or None after printing the problems of all of them: what
    `fmcluster validate` prints, in the command's format, so that `--format json` gives JSON on
    stdout whatever stops the command. Warnings of valid specs go to stderr as text either way:
    stdout is the command's own report then."""
    from fmcluster.spec import loader

    report = loader.ValidateReport(tuple(loader.checked(path, result) for path, result in results))
    if all(result.ok for _, result in results):
        sys.stderr.write(loader.render(report, "text")[1])
        return [result.spec for _, result in results if result.spec is not None]
    if fmt == "json":
        sys.stdout.write(loader.render(report, "json")[0])
    else:
        sys.stderr.write(loader.render(report, "text")[1])  # the problems, not the `FILE: ok` lines
    return None


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 70e9, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _window(text: str) -> tuple[datetime, datetime]:
    """START/END, two ISO 8601 times (UTC unless they say otherwise)."""
    from datetime import datetime, timezone

    try:
        start, end = (datetime.fromisoformat(part.strip().replace("Z", "+00:00")) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected START/END in ISO 8601, such as 2026-12-01T00:00Z/2026-12-08T00:00Z, got {text!r}") from None
    start, end = (t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (start, end))
    if end <= start:
        raise argparse.ArgumentTypeError(f"the window ends before it starts: {text!r}")
    return start, end


def cmd_plan(args: argparse.Namespace) -> int:
    from fmcluster.plan import render as plan

    if args.json_schema:
        from fmcluster.plan.report import json_schema
        from fmcluster.spec import schema

        report = schema.SchemaReport(json_schema())
        return _done(schema.render(report, "json"), schema.exit_code(report))
    if not args.spec:
        return _invalid("plan needs a SPEC (or --json-schema)")
    from fmcluster.spec import loader

    result = loader.load(args.spec)
    spec = _valid(args.spec, result, args.format)
    if spec is None:
        return EXIT_INVALID
    reservations = _preflight_reservations(args.preflight, spec.name, args.spec) if args.preflight else []
    if reservations is None:
        return EXIT_INVALID
    plan_report = plan.run(spec, result.data, args.checkpoint_params, reservations)
    return _done(plan.render(plan_report, args.format), plan.exit_code(plan_report))


def _preflight_reservations(path: str, cluster: str, spec_path: str) -> list[dict[str, object]] | None:
    """The reservations of the preflight report saved in `path` (fmcluster.deploy.preflight.saved);
    None, after saying why, when it is no such report of the cluster."""
    from fmcluster.deploy.preflight import saved

    try:
        return saved.reservations(path, cluster, spec_path)
    except saved.Unusable as refused:
        print(f"error: {path}: {refused.message}", file=sys.stderr)
        if refused.hint is not None:
            print(f"  hint: {refused.hint}", file=sys.stderr)
        return None


def cmd_preflight(args: argparse.Namespace) -> int:
    from fmcluster.deploy import preflight

    spec = _load_valid(args.spec, args.format)
    if spec is None:
        return EXIT_INVALID
    report = preflight.run(spec, args.window)
    return _done(preflight.render(report, args.format), preflight.exit_code(report))


def cmd_diff(args: argparse.Namespace) -> int:
    from fmcluster.deploy import diff
    from fmcluster.spec import loader

    if args.deployed:
        if len(args.specs) != 1:
            return _invalid("diff --deployed takes one SPEC: fmcluster diff --deployed SPEC")
        spec = _load_valid(args.specs[0], args.format)
        if spec is None or _node_unusable():
            return EXIT_INVALID
        from fmcluster.deploy import deployed

        with Progress(sys.stderr) as progress:
            report = diff.run_deployed(spec, args.allow_data_loss, name=args.specs[0],
                                       synthesize=_synthesizer(progress, {id(spec): ("SPEC", args.specs[0])}),
                                       read=_reader(progress, deployed.read))
        return _done(diff.render(report, args.format), diff.exit_code(report))
    if len(args.specs) != 2:
        return _invalid("diff takes OLD and NEW (or --deployed SPEC)")
    if (refused := _stdin_twice(args.specs)) is not None:
        return refused
    old_path, new_path = args.specs
    specs = _valid_all([(p, loader.load(p)) for p in (old_path, new_path)], args.format)
    if specs is None or _node_unusable():
        return EXIT_INVALID
    old, new = specs
    with Progress(sys.stderr) as progress:
        report = diff.run(old, new, args.allow_data_loss, names=(old_path, new_path),
                          synthesize=_synthesizer(progress, {id(old): ("OLD", old_path), id(new): ("NEW", new_path)}))
    return _done(diff.render(report, args.format), diff.exit_code(report))


def _node_unusable() -> bool:
    """True, after saying why, when the CDK app's Node.js cannot run here (missing, of another
    line, a TMPDIR or HOME it cannot write): found before `diff` synthesizes, as `synth` finds it."""
    from fmcluster.deploy import synth

    problem = synth.environment_problem()
    if problem is not None:
        print(f"error: {problem[0]}" + (f"\n  hint: {problem[1]}" if problem[1] else ""), file=sys.stderr)
    return problem is not None


def _synthesizer(progress: Progress,
                 files: dict[int, tuple[str, str]]) -> Callable[[ClusterSpec], dict[str, dict[str, Any]]]:
    """What `diff` synthesizes a spec with: the CDK app on the spec's file (`files`: the spec's
    id -> its role, OLD or NEW, and its path), its steps shown on a terminal under its role."""
    from fmcluster.deploy import synth

    def synthesize(spec: ClusterSpec) -> dict[str, dict[str, Any]]:
        role, path = files[id(spec)]
        progress.step(f"{role}: starting the CDK app")
        steps = (lambda text: progress.step(f"{role}: {text}")) if progress.on else None
        return synth.templates(path, steps)

    return synthesize


def _reader(progress: Progress, read: Callable[..., Any]) -> Callable[..., Any]:
    """`read`, the deployed stacks' reader of `diff --deployed`, shown as a step on a terminal."""
    def reading(*args: Any, **kwargs: Any) -> Any:
        progress.step("reading the deployed stacks")
        return read(*args, **kwargs)

    return reading


def cmd_synth(args: argparse.Namespace) -> int:
    from fmcluster.deploy import synth

    if bool(args.specs) == bool(args.assembly):
        return _invalid("synth takes SPEC... (or --assembly DIR, without SPEC)")
    if (refused := _stdin_twice(args.specs)) is not None:
        return refused
    if args.output == "":
        return _invalid("-o names no directory: give one, such as -o cdk.out")
    if args.assembly:
        report = synth.summarize(args.assembly)
    else:
        with Progress(sys.stderr) as progress:
            progress.step("starting the CDK app")
            report = synth.run(args.specs, args.output, progress.step if progress.on else None)
    return _done(synth.render(report, "text"), synth.exit_code(report))


def cmd_stack_policy(args: argparse.Namespace) -> int:
    from fmcluster.deploy import stack_policy

    report = stack_policy.run(args.lift)
    return _done(stack_policy.render(report, "json"), stack_policy.exit_code(report))


def cmd_step(args: argparse.Namespace) -> int:
    from fmcluster.deploy import steps

    report = steps.run(args.name, args.args)
    if report.error:
        return _done(steps.render(report), steps.exit_code(report))
    sys.stdout.flush()
    os.execve(report.argv[0], list(report.argv), dict(report.env))  # the program's exit status is the command's
    return EXIT_OK  # not reached


def cmd_change_set(args: argparse.Namespace) -> int:
    from fmcluster.deploy import change_set

    report = change_set.run(args.stack, args.name, region=args.region, role_arn=args.role_arn,
                            allow_data_loss=args.allow_data_loss, delete=args.delete, wait_s=args.wait)
    return _done(change_set.render(report, args.format), change_set.exit_code(report))


def cmd_jobs(args: argparse.Namespace) -> int:
    from fmcluster.kits import writer
    from fmcluster.model.cluster import resolve

    spec = _load_valid(args.spec)
    if spec is None:
        return EXIT_INVALID
    report = writer.run(resolve(spec), args.output, args.team)
    return _done(writer.render(report, "text"), writer.exit_code(report))


def cmd_verify(args: argparse.Namespace) -> int:
    from fmcluster.kits import verify
    from fmcluster.model.cluster import resolve

    spec = _load_valid(args.spec, args.format)
    if spec is None:
        return EXIT_INVALID
    report = verify.run(resolve(spec), args.results)
    return _done(verify.render(report, args.format), verify.exit_code(report))


def cmd_destroy(args: argparse.Namespace) -> int:
    from fmcluster.deploy import destroy

    if args.yes is not None and not args.with_data:
        return _invalid("--yes confirms --with-data: give both, or neither")
    spec = _load_valid(args.spec)
    if spec is None:
        return EXIT_INVALID

    def shown(plan: destroy.Plan) -> None:
        sys.stdout.write(destroy.render_plan(plan, args.dry_run))
        sys.stdout.flush()

    def confirm(plan: destroy.Plan) -> str | None:
        """The name typed at the prompt; None where nobody can type (no terminal, or the spec
        came on standard input) or nothing was typed."""
        if args.spec == "-" or not sys.stdin.isatty():
            return None
        sys.stderr.write(f"This deletes the data of {plan.cluster} for good. Type the cluster's name to go on: ")
        sys.stderr.flush()
        typed = sys.stdin.readline()
        return typed.strip() if typed.strip() else None

    def say(text: str) -> None:
        print(f"fmcluster destroy: {text}", file=sys.stderr, flush=True)

    report = destroy.run(spec, args.spec, with_data=args.with_data, yes=args.yes, force=args.force,
                         dry_run=args.dry_run, shown=shown, confirm=confirm, say=say)
    return _done(destroy.render(report, "text"), destroy.exit_code(report))


def cmd_init(args: argparse.Namespace) -> int:
    from fmcluster.deploy import init

    report = init.run(args.directory, args.orchestrator, args.instance_type, name=args.name, region=args.region,
                      az_id=args.az_id)
    return _done(init.render(report, "text"), init.exit_code(report))


SPEC_HELP = "a spec file (- reads it from standard input)"
EXIT_INTERRUPTED = 130  # Ctrl-C, for every command: 128 + SIGINT, as a shell reports it


def _format_help(**formats: str) -> str:
    """The help of --format: what each format gives, the first the default."""
    first, *_ = formats
    return "; ".join(f"{name}{' (default)' if name == first else ''}: {gives}" for name, gives in formats.items())


def _init_args(p: argparse.ArgumentParser) -> None:
    from fmcluster.deploy import init_choices as init

    p.add_argument("directory", metavar="DIR", help="the project's directory, new or empty")
    p.add_argument("--orchestrator", choices=init.ORCHESTRATORS, default=init.DEFAULT_ORCHESTRATOR,
                   help=f"the control plane (default {init.DEFAULT_ORCHESTRATOR})")
    p.add_argument("--instance-type", choices=init.instance_types(), default=init.DEFAULT_INSTANCE_TYPE,
                   metavar="TYPE", help="the GPU node group's instance type: " + ", ".join(init.instance_types())
                   + f" (default {init.DEFAULT_INSTANCE_TYPE})")
    p.add_argument("--name", help="the cluster's name, which prefixes every stack (default: DIR's name)")
    p.add_argument("--region", default=init.DEFAULT_REGION, help=f"the AWS region (default {init.DEFAULT_REGION})")
    p.add_argument("--az-id", metavar="ID",
                   help="the AZ ID of the GPU capacity, such as use1-az4 (default: the examples' for the region)")
    p.set_defaults(func=cmd_init)


def _verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="result files or directories (read recursively): the kit's results/*, or plain outputs "
                        "of nccl-tests, dcgmi diag and fio")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=_format_help(text="a table of VERDICT, GROUP, TEST, NODE, MEASURED and PASS AT with "
                                          "each row's note, the files not judged and why, then the cluster's "
                                          "verdict",
                                     json="the same rows, the verdict (null when nothing was judged) and the "
                                          "files not judged with why (not_judged), as one object, whatever "
                                          "the exit code"))
    p.set_defaults(func=cmd_verify)


def _jobs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("-o", "--output", default="acceptance", metavar="DIR",
                   help="the kit's directory (default acceptance); the files of an earlier kit are replaced "
                        "(it lists them in DIR/.fmcluster-kit), any other file the kit would write over is refused")
    p.add_argument("--team", metavar="TEAM",
                   help="on a cluster with teams, the team the jobs run as: its Slurm account, or its namespace's "
                        "queue on Kubernetes (default: the spec's first team)")
    p.set_defaults(func=cmd_jobs)


def _change_set_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", metavar="STACK", help="the stack, such as llm-pretrain-storage")
    p.add_argument("name", metavar="CHANGE_SET", help="the change set (the pipeline's is PipelineChange)")
    p.add_argument("--region", help="the stack's region (default: that of the credentials)")
    p.add_argument("--role-arn", metavar="ARN",
                   help="a role to assume first, such as the CDK deploy role of the stack's account")
    p.add_argument("--allow-data-loss", action="store_true",
                   help="exit 0 even when what holds data (a file system, bucket, key, metrics or dashboards "
                        "workspace) is replaced or removed")
    p.add_argument("--delete", action="store_true", help="delete the change set after judging it")
    p.add_argument("--wait", type=_positive_number, default=600, metavar="SECONDS",
                   help="how long to wait for a change set still being created (default 600)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=_format_help(text="how many resources change and each stateful one replaced or removed",
                                     json="the verdict as one object, with ok and each finding"))
    p.set_defaults(func=cmd_change_set)


def _step_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the step program: allowance, diff-deployed, guard-change-set, "
                                                "protect-storage, record-deployed or review-comment")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="its arguments, as they are")
    p.set_defaults(func=cmd_step)


def _stack_policy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lift", action="store_true",
                   help="print the policy that allows every update instead (to lift the protection on purpose)")
    p.set_defaults(func=cmd_stack_policy)


def _validate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=_format_help(text="`FILE: ok` on stdout per valid file; each problem on stderr, at its "
                                          "line and column, with the line, a caret and a hint",
                                     json="on stdout a list of {file, ok, diagnostics}, each diagnostic with "
                                          "line, column, severity, path, message, hint and rule"))
    p.add_argument("--pipeline", action="store_true",
                   help="the files are GitOps pipeline files (such as examples/pipeline/pipeline.yaml): check each "
                        "and every spec it lists")
    p.set_defaults(func=cmd_validate)


def _synth_args(p: argparse.ArgumentParser) -> None:
    p.usage = "fmcluster synth [-h] [-o DIR] (SPEC [SPEC ...] | --assembly DIR)"
    p.add_argument("specs", nargs="*", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("-o", "--output", default="cdk.out", metavar="DIR", help="assembly directory (default cdk.out)")
    p.add_argument("--assembly", metavar="DIR",
                   help="summarize the cloud assembly already in DIR (such as `npx cdk synth` writes) instead")
    p.set_defaults(func=cmd_synth)


def _plan_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", nargs="?", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help=_format_help(text="tables for a terminal, ending with the resolved spec as YAML",
                                     markdown="the same tables, a Mermaid diagram and the resolved spec in a "
                                              "collapsed block, for a pull-request comment",
                                     json="the typed plan, for programs (its JSON Schema: --json-schema)"))
    p.add_argument("--checkpoint-params", type=_positive_number, metavar="N",
                   help="model size for the checkpoint write time, such as 70e9 (default 70e9)")
    p.add_argument("--json-schema", action="store_true", help="print the JSON Schema of --format json")
    p.add_argument("--preflight", metavar="REPORT",
                   help="a saved `fmcluster preflight SPEC --format json`: show the windows of the reservations "
                        "and Capacity Blocks it read")
    p.set_defaults(func=cmd_plan)


def _preflight_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=_format_help(text="a table of STATUS, CHECK and RESULT, with a hint under a failed check",
                                     json="the checks and the reservations and Capacity Blocks read: what "
                                          "`fmcluster plan --preflight` takes"))
    p.add_argument("--window", type=_window, metavar="START/END",
                   help="ISO 8601 times the cluster must run, such as 2026-12-01T00:00Z/2026-12-08T00:00Z "
                        "(checked against Capacity Block start and end; default: now)")
    p.set_defaults(func=cmd_preflight)


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.usage = "fmcluster diff [-h] [--format {text,json}] [--allow-data-loss] (OLD NEW | --deployed SPEC)"
    p.add_argument("specs", nargs="+", metavar="SPEC",
                   help="OLD and NEW, or with --deployed one SPEC (- reads one from standard input)")
    p.add_argument("--deployed", action="store_true",
                   help="compare SPEC with its cluster's stacks as deployed (reads CloudFormation, read-only)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=_format_help(text="per stack its changes (add, update, replace, remove), what changes "
                                          "and why, then the data loss and refused updates",
                                     json="the same as one object: stacks, data_loss, fails, notes, rolls, new_cluster "
                                           "and the verdict"))
    p.add_argument("--allow-data-loss", action="store_true",
                   help="exit 0 even when a stateful resource (file system, bucket, key, metrics or dashboards "
                        "workspace) is replaced or removed, or when the cluster's name, region or account changes "
                        "(a new cluster beside the old one)")
    p.set_defaults(func=cmd_diff)


def _destroy_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--with-data", action="store_true",
                   help="delete what holds data too: the storage stack (its termination protection lifted), the "
                        "observability stack, the network, and what CloudFormation retains (buckets emptied of "
                        "every version, file systems, keys, the accounting database, log groups); asks for the "
                        "cluster's name")
    p.add_argument("--yes", metavar="NAME",
                   help="with --with-data, the cluster's name, for scripts: no prompt (another name is refused)")
    p.add_argument("--force", action="store_true",
                   help="delete the cluster even while nodes of its compute groups are up (their jobs end); "
                        "never lifts the guard on data")
    p.add_argument("--dry-run", action="store_true",
                   help="only say what would be deleted and kept, and what the rest costs (read-only)")
    p.set_defaults(func=cmd_destroy)


def _schema_args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_schema)


INVALID = "the command line is invalid"
HELP_WIDTH = 100  # the widest line of a command's exit codes


@dataclass(frozen=True)
class Command:
    """A command of `fmcluster`: its one-line help (in `fmcluster --help`), what `fmcluster NAME
    --help` says of it, the function that adds its arguments, and the module of its run, render
    and exit_code. Ctrl-C (exit 130) is the same for every command and is added to its exit codes."""
    help: str
    description: str
    examples: tuple[str, ...]
    exit_codes: tuple[tuple[int, str], ...]
    add_arguments: Callable[[argparse.ArgumentParser], None]
    module: str

    def epilog(self) -> str:
        codes = (*self.exit_codes, (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"))
        return "\n".join(["examples:", *(f"  {line}" for line in self.examples), "", "exit codes:",
                          *(textwrap.fill(meaning, HELP_WIDTH, initial_indent=f"  {code:<4} ",
                                          subsequent_indent=" " * 7) for code, meaning in codes)])


COMMANDS: dict[str, Command] = {
    "init": Command(
        "write a new cluster project (spec, cdk.json, .gitignore, pins, CI and deploy workflows, pipeline "
        "file) into a new directory",
        "Write a new cluster project into DIR: cluster.yaml (a spec for the control plane and instance type, "
        "a comment on every field), cdk.json (runs the installed CDK app on it), .gitignore, requirements.txt "
        "(the fmcluster the project runs, pinned), a GitHub Actions workflow that validates, plans and diffs "
        "every pull request, a deploy workflow and the template of the OIDC role it assumes, and pipeline.yaml "
        "(a GitOps pipeline for the spec). DIR must be new or empty: nothing is written over.",
        ("fmcluster init my-cluster",
         "fmcluster init my-cluster --orchestrator eks --instance-type p5en.48xlarge --region us-east-1"),
        ((0, "the project was written"),
         (2, "refused, with nothing written: DIR is not empty, the spec rules refuse the combination, "
             f"or {INVALID}")),
        _init_args, "fmcluster.deploy.init"),
    "validate": Command(
        "check spec files (or pipeline files); print ok or located errors",
        "Check spec files: their YAML, every field and every rule across fields. Each problem is shown at "
        "the line and column of its field, with a hint where one helps. Reads no account and never imports "
        "aws_cdk.",
        ("fmcluster validate examples/p5-pcs.yaml examples/p5en-eks.yaml",
         "fmcluster validate --pipeline examples/pipeline/pipeline.yaml --format json"),
        ((0, "every file is valid (warnings do not count)"),
         (2, f"a file is invalid, or {INVALID}")),
        _validate_args, "fmcluster.spec.loader"),
    "synth": Command(
        "synthesize the CDK cloud assembly of one or more specs",
        "Synthesize the CDK cloud assembly of one or more specs (the same templates as "
        "`npx cdk synth -c spec=SPEC`) and print one line per stack; with --assembly, summarize an assembly "
        "already written. An invalid spec writes nothing.",
        ("fmcluster synth examples/p5-pcs.yaml -o cdk.out",
         "fmcluster synth --assembly cdk.out"),
        ((0, "the assembly was written (or read) and summarized"),
         (1, "the CDK app failed (it said why)"),
         (2, f"a spec is invalid, there is no assembly in the --assembly DIR, or {INVALID}")),
        _synth_args, "fmcluster.deploy.synth"),
    "plan": Command(
        "what a spec builds, what it can do and what it costs",
        "What a spec builds, what it can do and what it costs, before anyone deploys: every resolved "
        "default, per node group and in total the instances, GPUs, PFLOPS, memory, EFA and NVLink, the "
        "storage, the subnets and their addresses, the stacks and the estimated cost. No AWS call.",
        ("fmcluster plan examples/p5-pcs.yaml",
         "fmcluster plan examples/p5en-eks.yaml --format markdown --checkpoint-params 405e9"),
        ((0, "the plan was printed"),
         (2, f"the spec is invalid, the --preflight REPORT cannot be used, or {INVALID}")),
        _plan_args, "fmcluster.plan.render"),
    "preflight": Command(
        "read-only checks of the target account (needs AWS credentials)",
        "Read-only checks of the target account and region before a deploy (needs AWS credentials): "
        "the credentials' account, the AZ IDs, the instance types offered in the GPU AZ, quotas, "
        "reservations and Capacity Blocks (size, state, window), placement groups and AMIs.",
        ("fmcluster preflight examples/p5-pcs.yaml",
         "fmcluster preflight examples/p5-pcs.yaml --window 2026-12-01/2026-12-08 --format json"),
        ((0, "every check passed (warnings do not count)"),
         (1, "a check failed, or nothing could be checked (no credentials, no access)"),
         (2, f"the spec is invalid, or {INVALID}")),
        _preflight_args, "fmcluster.deploy.preflight"),
    "diff": Command(
        "what changing a spec from OLD to NEW (or deploying SPEC over its deployed stacks) does to "
        "deployed resources",
        "What changing a spec from OLD to NEW does to deployed resources: both are synthesized and their "
        "templates compared, each change judged as CloudFormation would make it. With --deployed, SPEC is "
        "compared with its cluster's stacks as deployed (read-only; needs AWS credentials).",
        ("fmcluster diff examples/p5-pcs.yaml examples/p5en-reservation-pcs.yaml",
         "fmcluster diff --deployed examples/p5-pcs.yaml --format json"),
        ((0, "no stateful resource is replaced or removed, the cluster keeps its name, region and account "
             "(or --allow-data-loss), and no update is refused"),
         (1, "without --allow-data-loss, a stateful resource is replaced or removed, or the cluster's name, "
             "region or account changes (a new cluster beside the old one, its data left behind); with or "
             "without it, an update the service refuses, or nothing could be compared"),
         (2, f"a spec is invalid, or {INVALID}")),
        _diff_args, "fmcluster.deploy.diff"),
    "schema": Command(
        "print the JSON Schema of the spec",
        "Print the JSON Schema of the spec, for editors that complete and check YAML as it is typed.",
        ("fmcluster schema > cluster-spec.schema.json",),
        ((0, "the schema was printed"),
         (2, INVALID)),
        _schema_args, "fmcluster.spec.schema"),
    "jobs": Command(
        "write the cluster's acceptance jobs (NCCL, DCGM, file-system throughput, a PyTorch smoke test: "
        "sbatch scripts on Slurm, Kueue-admitted manifests on Kubernetes) and the serving job of its serving "
        "section",
        "Write the cluster's acceptance kit: NCCL, DCGM, file-system throughput and a PyTorch smoke test per "
        "GPU node group, with the figures each result is held to (sbatch scripts on Slurm, Kueue-admitted "
        "manifests on Kubernetes), and the serving job of the spec's serving section.",
        ("fmcluster jobs examples/p5-pcs.yaml -o acceptance",),
        ((0, "the kit was written"),
         (2, "the spec is invalid, the directory cannot be written or holds files of the user's where the kit's go, "
             f"--team names no team of the spec, or {INVALID}")),
        _jobs_args, "fmcluster.kits.writer"),
    "verify": Command(
        "judge the acceptance kit's results, or plain outputs of nccl-tests, dcgmi diag and fio, against "
        "the cluster's figures: PASS, WARN or FAIL per test and node; exit 1 on a FAIL, 2 when nothing "
        "could be judged",
        "Judge the acceptance kit's results (its results/ directory, or the whole kit's directory), or "
        "plain outputs of nccl-tests, dcgmi diag and fio, against the cluster's figures: PASS, WARN or FAIL "
        "per test and node, the slow nodes named. A file is judged by its content, the tool's own lines; "
        "the kit's scripts, sources, notes, what is not a regular file and files over "
        "64 MiB are listed as not judged, with the reason. The examples run from a "
        "checkout of fmcluster, on the outputs of tests/data/verify-plain.",
        ("fmcluster verify examples/p5-pcs.yaml tests/data/verify-plain",
         "fmcluster verify --format json examples/p5-pcs.yaml tests/data/verify-plain"),
        ((0, "at least one result was judged and none failed"),
         (1, "a result failed"),
         (2, f"nothing could be judged (a file cannot be read, or none holds a result), the spec is invalid, "
             f"or {INVALID}")),
        _verify_args, "fmcluster.kits.verify"),
    "stack-policy": Command(
        "print the stack policy of a cluster's storage stack: no replacing or deleting its stateful resources",
        "Print the stack policy of a cluster's storage stack (the stack named after the cluster, "
        "CLUSTER-storage), which denies replacing or deleting its stateful resources (file systems, buckets, "
        "the key), as JSON for `aws cloudformation set-stack-policy`. The policy is the same for every "
        "cluster: it takes no name.",
        ("fmcluster stack-policy > stack-policy.json",
         "fmcluster stack-policy --lift"),
        ((0, "the policy was printed"),
         (2, INVALID)),
        _stack_policy_args, "fmcluster.deploy.stack_policy"),
    "step": Command(
        "run one of the GitOps pipeline's step programs from this installation (the pipeline and the "
        "deploy workflow run them)",
        "Run one of the GitOps pipeline's step programs, shipped with fmcluster, with bash: diff-deployed "
        "(compare with the spec as last deployed), guard-change-set, record-deployed, protect-storage, "
        "allowance and review-comment. A project made by `fmcluster init` has no copy of them; the pipeline's "
        "steps and the GitHub Actions deploy workflow run them this way, with this installation's fmcluster.",
        ("fmcluster step allowance llm-pretrain",
         "fmcluster step diff-deployed /fmcluster/llm-pretrain/deployed-spec cluster.yaml"),
        ((0, "the step passed (the program's own exit status)"),
         (1, "the step failed or its guard stopped the deploy (the program's own exit status)"),
         (2, f"no such step program, or {INVALID}")),
        _step_args, "fmcluster.deploy.steps"),
    "change-set": Command(
        "judge a CloudFormation change set before it is executed: exit 1 if it replaces or removes "
        "a stateful resource (reads CloudFormation, read-only)",
        "Judge a CloudFormation change set before it is executed (read-only: DescribeChangeSet, nested "
        "change sets included; needs AWS credentials): does it replace, may it replace or does it remove "
        "what holds data, a file system, bucket, key, metrics or dashboards workspace?",
        ("fmcluster change-set llm-pretrain-storage PipelineChange --region us-east-1",
         "fmcluster change-set llm-pretrain-storage PipelineChange --allow-data-loss --delete --format json"),
        ((0, "no stateful resource is replaced or removed, or --allow-data-loss"),
         (1, "a stateful resource is replaced or removed without --allow-data-loss, or the change set cannot "
             "be read"),
         (2, INVALID)),
        _change_set_args, "fmcluster.deploy.change_set"),
    "destroy": Command(
        "delete a cluster's stacks that hold no data, newest first; --with-data deletes the data too "
        "(needs AWS credentials)",
        "Delete the stacks of a cluster that hold no data, in the reverse of the deploy order, each waited for, "
        "and say what is kept (the storage and observability stacks, the network they are built on, what "
        "CloudFormation retains) and what that costs a month. With --with-data, after the cluster's name is "
        "typed (or --yes=NAME), delete those too and what CloudFormation retains. Refuses while nodes of the "
        "compute groups are up, unless --force.",
        ("fmcluster destroy examples/p5-pcs.yaml --dry-run",
         "fmcluster destroy examples/p5-pcs.yaml",
         "fmcluster destroy examples/p5-pcs.yaml --with-data --yes=llm-pretrain"),
        ((0, "what the plan deletes was deleted (with --dry-run: would be), or none of the cluster's stacks is "
             "deployed in the spec's region"),
         (1, "refused, with nothing deleted (nodes up, --with-data not confirmed or another name typed, another "
             "account, a stack busy, the account unreadable), or a deletion failed: what came before it is gone, "
             "the rest is still there"),
         (2, f"the spec is invalid, or {INVALID}")),
        _destroy_args, "fmcluster.deploy.destroy"),
}

EXIT_CODES = """exit codes (what each means for a command: fmcluster COMMAND --help):
  0    success
  1    a check or guard failed
  2    the spec or the command line is invalid
  130  interrupted (Ctrl-C)"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fmcluster", description="Validate, review and synthesize GPU cluster specs for AWS.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"fmcluster {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        command.add_arguments(sub.add_parser(
            name, help=command.help, description=textwrap.fill(command.description, 79),
            epilog=command.epilog(), formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command line; without `argv`, that of this process (the `fmcluster` program and
    `python -m fmcluster`)."""
    try:
        args = build_parser().parse_args(argv)
        command: Callable[[argparse.Namespace], int] = args.func  # set_defaults(func=...) of each command
        return command(args)
    except BrokenPipeError:  # `fmcluster schema | head`: the reader has gone, so has stdout
        _drop_stdout()
        return EXIT_OK
    except KeyboardInterrupt:  # Ctrl-C, anywhere; the CDK app, if one runs, is already stopped (synth.run_app)
        return _interrupted()
    except OSError as exc:  # a file the command reads or writes, where its module does not say so itself
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}\n  hint: check the path and its permissions", file=sys.stderr)
        return EXIT_INVALID


def _interrupted() -> int:
    """Say so in one line; a second Ctrl-C meanwhile is ignored, so it cannot end in a traceback."""
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        sys.stdout.flush()
    except OSError:
        _drop_stdout()
    print("fmcluster: interrupted", file=sys.stderr)
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
    return EXIT_INTERRUPTED


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush finds no broken pipe
    (Python's documentation, "Note on SIGPIPE")."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test's capture)
        pass
