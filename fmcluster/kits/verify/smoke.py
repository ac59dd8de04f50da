"""The parser of the lines the acceptance kit's smoke test prints (fmcluster.kits.common.SMOKE_PY:
`fmcluster-smoke step=... loss=...`, then `fmcluster-smoke ok` or `failed`), and its own verdict.
Pure: the text in, a frozen SmokeResult out."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Optional

from fmcluster.kits.verify.judging import Verdict
from fmcluster.kits.verify.reading import float_or_none, int_or_none

_SMOKE = re.compile(r"fmcluster-smoke\s+(.*)$")


@dataclass(frozen=True)
class SmokeStep:
    step: int
    loss: float
    tokens_per_s: Optional[float]
    host: Optional[str]
    rank: Optional[int]


@dataclass(frozen=True)
class SmokeResult:
    steps: tuple[SmokeStep, ...]
    outcome: Optional[str]  # "ok", "failed", None (no final line)
    reason: Optional[str]  # of a failure
    world_size: Optional[int]
    steps_declared: Optional[int]  # the final line's steps=
    complete: bool  # the final line is there
    errors: tuple[str, ...]

    @property
    def losses(self) -> tuple[float, ...]:
        return tuple(s.loss for s in self.steps)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.host for s in self.steps if s.host))

    @property
    def tokens_per_s(self) -> Optional[float]:
        """The median rate (the first steps warm up)."""
        rates = [s.tokens_per_s for s in self.steps if s.tokens_per_s is not None and math.isfinite(s.tokens_per_s)]
        return statistics.median(rates) if rates else None

    @property
    def verdict(self) -> Verdict:
        """PASS: the final `ok` line, every loss finite and the last no higher than the first; FAIL
        otherwise (a missing final line is a truncated run)."""
        if self.outcome != "ok" or not self.steps:
            return Verdict.FAIL
        if not all(math.isfinite(loss) for loss in self.losses):
            return Verdict.FAIL
        if self.losses[-1] > self.losses[0]:
            return Verdict.FAIL
        if self.steps_declared is not None and len(self.steps) != self.steps_declared:
            return Verdict.WARN
        return Verdict.PASS


def _fields(rest: str) -> tuple[list[str], dict[str, str]]:
    words: list[str] = []
    fields: dict[str, str] = {}
    for token in rest.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
        else:
            words.append(token)
    return words, fields


def parse_smoke(text: str) -> SmokeResult:
    """The smoke test's lines, wherever they sit in a line (torchrun or srun may prefix them)."""
    steps: list[SmokeStep] = []
    errors: list[str] = []
    outcome: Optional[str] = None
    reason: Optional[str] = None
    world: Optional[int] = None
    declared: Optional[int] = None
    for line in text.splitlines():
        match = _SMOKE.search(line)
        if match is None:
            if "Traceback (most recent call last)" in line or re.search(r"\b\w*Error: ", line):
                if len(errors) < 10:
                    errors.append(line.strip()[:300])
            continue
        words, fields = _fields(match.group(1))
        if "step" in fields:
            step = int_or_none(fields["step"])
            loss = float_or_none(fields.get("loss", ""))
            if step is None or loss is None:
                errors.append(f"unreadable step line: {line.strip()[:200]}")
                continue
            rank = int_or_none(fields["rank"]) if "rank" in fields else None
            steps.append(SmokeStep(step, loss, float_or_none(fields.get("tokens_per_s", "")), fields.get("host"), rank))
            if not math.isfinite(loss):
                errors.append(f"loss not finite at step {step}: {fields.get('loss')}")
        elif words and words[0] in ("ok", "failed"):
            outcome = words[0]
            world = int_or_none(fields.get("world_size", "")) if "world_size" in fields else world
            declared = int_or_none(fields.get("steps", "")) if "steps" in fields else declared
            if outcome == "failed":
                reason = fields.get("reason") or " ".join(words[1:]) or "unknown"
                errors.append(f"smoke test failed: {reason}")
    if outcome is None:
        errors.append("truncated: no final fmcluster-smoke ok/failed line")
    if not steps:
        errors.append("no fmcluster-smoke step lines")
    elif outcome == "ok" and math.isfinite(steps[0].loss) and math.isfinite(steps[-1].loss) \
            and steps[-1].loss > steps[0].loss:
        first, last = steps[0], steps[-1]
        errors.append(f"loss rose: {first.loss:g} at step {first.step}, {last.loss:g} at step {last.step}")
    return SmokeResult(tuple(steps), outcome, reason, world, declared, outcome is not None, tuple(errors))
