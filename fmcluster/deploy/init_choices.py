"""What `fmcluster init` offers and defaults to: the choices of its command line, kept apart from
the project writer (fmcluster/deploy/init.py) so that building the command line's parser, which
every command does, imports the catalog alone and not the spec's models."""

from __future__ import annotations

from fmcluster.facts import catalog, controlplanes

ORCHESTRATORS = controlplanes.ORCHESTRATOR_TYPES
DEFAULT_ORCHESTRATOR = "pcs"
DEFAULT_INSTANCE_TYPE = "p5.48xlarge"
DEFAULT_REGION = "us-east-1"


def instance_types() -> list[str]:
    """The GPU instance types of the catalog: what --instance-type offers."""
    return catalog.known_names(gpu_only=True)
