"""The one error the CDK side raises on bad props: it names the construct, as the CDK's own
`ValidationError` does, so a message says which stack and construct of the app refused what.

    ConstructError(self, "scaling 4..2 is not a range")
    str(error) == "llm-pretrain-cluster/NodeGroup-gpu/Resource: scaling 4..2 is not a range"

A spec that passes validation (fmcluster.spec) never reaches one: each is a construct used against
its documented props, so an fmcluster bug, reported with its path. A ValueError, as before.
"""

from __future__ import annotations

from constructs import IConstruct


class ConstructError(ValueError):
    """Bad props of the construct `scope` (a stack or a construct, after its `super().__init__`)."""

    def __init__(self, scope: IConstruct, message: str) -> None:
        self.path: str = scope.node.path  # the construct path, such as NAME-cluster/Cluster
        self.message = message
        super().__init__(f"{self.path}: {message}")
