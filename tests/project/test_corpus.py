"""tests/support/corpus.py makes the assemblies of specs asked for together in one run of the app,
and where that run fails makes each alone, so that the spec that fails is the one recorded (its
readers fail with the app's message) and the others are made. (That one run writes each
assembly as `fmcluster synth` writes it alone: tests/cdk/test_examples_synth.py.)"""

from __future__ import annotations

import pytest

from tests.support.corpus import Corpus, SynthesisError
from tests.support.paths import ROOT

pytestmark = pytest.mark.synth


def test_a_spec_that_fails_among_others_is_recorded_alone(tmp_path):
    corpus = Corpus(tmp_path / "corpus")
    good = ("examples/p5-pcs.yaml+copy", (ROOT / "examples/p5-pcs.yaml").read_text())
    bad = ("examples/p5-pcs.yaml+broken", "name: x\n")
    with pytest.warns(UserWarning, match=r"the app exited 2 on 2 specs at once; each is made alone"):
        corpus.assemblies([good, bad])
    made = corpus.assembly(good[0], text=good[1])
    assert (made / "manifest.json").is_file() and (made / "llm-pretrain-network.template.json").is_file()
    said = r"(?s)^examples/p5-pcs.yaml\+broken: the app exited 2\n.*field `region` is missing"
    for _ in range(2):  # recorded: asked again, its reader fails at once with the app's message
        with pytest.raises(SynthesisError, match=said):
            corpus.assembly(bad[0], text=bad[1])
    # nothing left of the run of both: each folder holds a spec made or one that failed
    folders = {p.name for p in (tmp_path / "corpus" / "assemblies").iterdir() if p.is_dir()}
    made_or_failed = {p.parent.name for p in (tmp_path / "corpus" / "assemblies").glob("*/.complete")} | {
        p.stem for p in (tmp_path / "corpus" / "assemblies").glob("*.failed")}
    assert folders == made_or_failed and len(folders) == 2
