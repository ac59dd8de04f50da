"""The plan's published shape: the records `fmcluster plan --json` writes and `fmcluster plan
--json-schema` publishes (docs/plan.schema.json), apart from the code that builds them
(fmcluster.plan.report and its sections) and renders them (fmcluster.plan.render). Pydantic models
only, importing pydantic and fmcluster.facts; the modules import one another directly."""
