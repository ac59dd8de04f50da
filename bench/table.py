"""The table of the latest speed figures, from bench/results/*.json, in docs/development.md.

    python bench/table.py           print it
    python bench/table.py --write   put it in docs/development.md between the bench markers

`make bench` writes it after measuring; tests/project/test_bench.py holds the page to the results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README = ROOT / "docs" / "development.md"  # the page that quotes the figures
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def _met(target: dict) -> str:
    return "met" if target["met"] else "**missed**"


def render() -> str:
    validate, synth, make_test, summary = (_load(n) for n in ("validate", "synth", "make_test", "summary"))
    v_floor, v_one = validate["import_pydantic_yaml"]["wall_s"], validate["validate_one_example"]["wall_s"]
    s_floor, s_default = synth["minimal_cdk_app"]["wall_s"], synth["default_example"]["wall_s"]
    s_one, s_many = synth["one_node_group"]["wall_s"], synth["sixty_four_node_groups"]["wall_s"]
    t_validate, t_synth, t_growth = validate["targets"][0], synth["targets"][0], synth["targets"][1]
    t_alone, t_test, t_fast = make_test["targets"]
    t_ratio = validate["targets"][1]
    rows = [
        ("`fmcluster validate` of an example (well under a keystroke)",
         f"**{v_one:.3f} s** (`python -c \"import pydantic, yaml\"`: {v_floor:.3f} s, "
         f"{validate['over_import_floor']}x)", f"{t_validate['limit']} s", _met(t_validate)),
        ("`fmcluster validate` of an example / `python -c \"import pydantic, yaml\"`",
         f"**{t_ratio['measured']}x**", f"{t_ratio['limit']}x", _met(t_ratio)),
        ("`fmcluster synth` of the default example / a minimal CDK app (one bucket, same settings)",
         f"{s_default:.2f} s / {s_floor:.2f} s = **{t_synth['measured']}x**", f"{t_synth['limit']}x", _met(t_synth)),
        ("synthesis of 64 p5.48xlarge node groups / of 1 (EKS: Kueue takes 64)",
         f"{s_many:.2f} s / {s_one:.2f} s = **{t_growth['measured']}x**", f"{t_growth['limit']}x", _met(t_growth)),
        ("`make test` on a fresh clone", f"**{t_alone['measured']:.0f} s**", f"{t_alone['limit']} s", _met(t_alone)),
        ("`make install` + `make test` on a fresh clone",
         f"{make_test['make_install_s']:.0f} s + {make_test['make_test_s']:.0f} s = **{t_test['measured']:.0f} s**",
         f"{t_test['limit']} s", _met(t_test)),
        ("`make test-fast` (the lane between commits), after it", f"**{t_fast['measured']:.0f} s**",
         f"{t_fast['limit']} s", _met(t_fast)),
    ]
    reference = synth["minimal_cdk_app_cdk_default_settings"]["wall_s"]
    lines = [f"Measured {summary['when']} on commit {summary['commit']} ({summary['cpus']} CPUs, Python "
             f"{summary['python']}), medians of {validate['runs']} (validate) and {synth['runs']} (synth) runs; "
             f"`make test` on a fresh clone of commit {make_test['commit']}.",
             "", "| Target | Measured | Limit | |", "|---|---|---|---|"]
    lines += [f"| {what} | {measured} | {limit} | {met} |" for what, measured, limit, met in rows]
    lines += ["", f"For reference, the same minimal app with CDK's default App settings (built-in validation on) "
                  f"takes {reference:.2f} s: the default example synthesizes in "
                  f"{s_default / reference:.2f}x that."]
    if "module_floor" in synth:  # since issue 36: what the service modules alone cost (bench/synth.py)
        module_floor = synth["module_floor"]["wall_s"]
        lines[-1] += (f" The module floor (the minimal app loading the {len(synth['module_floor']['classes'])} "
                      f"service modules the default example's resources come from) takes {module_floor:.2f} s, "
                      f"{module_floor / s_floor:.2f}x the minimal app: the default example is "
                      f"{s_default / module_floor:.2f}x that.")
    return "\n".join(lines)


def readme_block(text: str) -> str:
    return text[text.index(START) + len(START):text.index(END)].strip("\n")


def write() -> None:
    text = README.read_text()
    before, after = text[:text.index(START) + len(START)], text[text.index(END):]
    README.write_text(f"{before}\n{render()}\n{after}")


if __name__ == "__main__":
    write() if "--write" in sys.argv[1:] else print(render())
