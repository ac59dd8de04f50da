"""`fmcluster plan`: what a spec builds, what it can do and what it costs, before anyone deploys.

Owns the plan's published records (`shape`), their builders from the resolved model (`report`
and its sections: `compute`, `cluster`, `health`, `cost`, `images`, `first_deploy`) and their
renderings (`render`: text, markdown and JSON). May import the layers below it (node,
kubernetes, observability, model, spec, facts) and `fmcluster.text`; never deploy or kits."""
