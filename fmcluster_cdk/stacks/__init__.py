"""One stack per concern, composed from fmcluster_cdk.constructs. Stacks only translate the spec into
construct props; `build` puts them together for one cluster spec."""
