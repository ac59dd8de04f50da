"""The allow-list of IAM wildcards (tests/support/security.py, ALLOWED_WILDCARDS) holds only what
the synthesized templates need: an entry that no case's template uses allows what nothing does
(the node replacer's ec2:TerminateInstances once it kept static AWS PCS nodes drained), and would
let a later change grant it again unnoticed. The cases are tests/cdk/test_security.py's, read from
the run's corpus (tests/support/corpus.py)."""

from __future__ import annotations

from tests.cdk.test_security import CASES, synthesized
from tests.support import security


def test_every_allowed_wildcard_is_used(corpus):
    used: set[int] = set()
    for case in CASES:
        for template in synthesized(corpus, case).templates.values():
            used |= security.allowances_used(template)
    stale = [(entry.actions, entry.resource) for i, entry in enumerate(security.ALLOWED_WILDCARDS) if i not in used]
    assert stale == []
