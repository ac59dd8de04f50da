"""`fmcluster jobs` (the acceptance and serving kits) and `fmcluster verify` (their results judged)."""

from __future__ import annotations

import argparse

from fmcluster.cli.core import EXIT_INVALID, INVALID, SPEC_HELP, Command, done, format_help, load_valid


def cmd_jobs(args: argparse.Namespace) -> int:
    from fmcluster.kits import writer
    from fmcluster.model.cluster import resolve

    spec = load_valid(args.spec)
    if spec is None:
        return EXIT_INVALID
    report = writer.run(resolve(spec), args.output, args.team)
    return done(writer.render(report, "text"), writer.exit_code(report))


def cmd_verify(args: argparse.Namespace) -> int:
    from fmcluster.kits import verify
    from fmcluster.model.cluster import resolve

    spec = load_valid(args.spec, args.format)
    if spec is None:
        return EXIT_INVALID
    report = verify.run(resolve(spec), args.results)
    return done(verify.render(report, args.format), verify.exit_code(report))


def _jobs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("-o", "--output", default="acceptance", metavar="DIR",
                   help="the kit's directory (default acceptance); the files of an earlier kit are replaced "
                        "(it lists them in DIR/.fmcluster-kit), any other file the kit would write over is refused")
    p.add_argument("--team", metavar="TEAM",
                   help="on a cluster with teams, the team the jobs run as: its Slurm account, or its namespace's "
                        "queue on Kubernetes (default: the spec's first team)")
    p.set_defaults(func=cmd_jobs)


def _verify_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="result files or directories (read recursively): the kit's results/*, or plain outputs "
                        "of nccl-tests, dcgmi diag and fio")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help=format_help(text="a table of VERDICT, GROUP, TEST, NODE, MEASURED and PASS AT with "
                                         "each row's note, the files not judged and why, then the cluster's "
                                         "verdict",
                                    json="the same rows, the verdict (null when nothing was judged) and the "
                                         "files not judged with why (not_judged), as one object, whatever "
                                         "the exit code"))
    p.set_defaults(func=cmd_verify)


JOBS = Command(
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
    _jobs_args, "fmcluster.kits.writer")


VERIFY = Command(
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
    _verify_args, "fmcluster.kits.verify")
