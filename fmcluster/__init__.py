"""fmcluster: one validated spec to a GPU cluster for foundation-model training on AWS."""

__version__ = "0.1.0"
