"""One stack per concern, composed from constructs_lib. Stacks only translate the spec into
construct props; `build` puts them together for one cluster spec."""
