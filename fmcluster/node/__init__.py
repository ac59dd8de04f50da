"""What runs on a node: the scripts of each control plane, rendered from the model's setup of a
node group (fmcluster.model.node; `ClusterModel.node`), and the node images they run on.

- `pcs`, `hyperpod`, `eks`: one renderer per plane, each taking the model, a group and the
  deploy-time values of the other stacks (`refs`): AWS PCS's node lifecycle scripts, SageMaker
  HyperPod's lifecycle folders, Amazon EKS's user data.
- `program` (a node's program, step by step), `shell` (the script assembly from the package data
  in scripts/), `nccl` (the EFA / NCCL environment), `runtime` (Enroot and Pyxis, pinned).
- `image` (the node images' recipes), `accounting` (the teams as Slurm accounting), `topology`
  (where a group's nodes sit in EC2's network).

It imports the facts, the spec and the model only (tests/project/test_layers.py)."""
