"""A stand-in for the few parts of PyTorch the kit's smoke.py uses, for the tests' localhost Slurm
(no GPU, no PyTorch there). Tensors are plain numbers; the model's one weight is the loss level,
which falls a little at each step, as a training run's loss does; the collectives
(torch.distributed) reduce the ranks' real values over a connection to rank 0, as NCCL would; a
checkpoint (torch.distributed.checkpoint) holds each rank's state in a file of its own and is
complete once rank 0 wrote its .metadata. Rank, world size and local rank come from torchrun's
environment (the torchrun stand-in beside this package). STANDIN_LOSS=nan makes the loss not
finite; STANDIN_STEP_SECONDS makes each step take that long (a GPU's work, so a test can signal a
run while it trains), and STANDIN_RESUMED_STEP_SECONDS, where set, each step of a run that resumed
from a checkpoint (torch.distributed.checkpoint.load: a run nobody signals need not be slow)."""
import os
import random as _random
import time as _time

from . import cuda, distributed, nn, optim  # noqa: F401

_state = {"loss": 1.0}  # the model's weight (nn.Module.state_dict)
_run = {"resumed": False}  # set by torch.distributed.checkpoint.load


class Tensor:
    def __init__(self, value=0.0):
        self.value = value

    def detach(self):
        return Tensor(self.value)

    def item(self):
        return self.value

    def backward(self):
        seconds = os.environ.get("STANDIN_STEP_SECONDS", "0")
        if _run["resumed"]:
            seconds = os.environ.get("STANDIN_RESUMED_STEP_SECONDS", seconds)
        _time.sleep(float(seconds))
        _state["loss"] *= 0.97

    def cuda(self):
        return self


def tensor(data, device=None):
    """A tensor of one number (a list of one, as smoke.py builds its flags)."""
    values = data if isinstance(data, (list, tuple)) else [data]
    if len(values) != 1:
        raise ValueError("stand-in: tensors of one number only")
    return Tensor(float(values[0]))


def manual_seed(seed):
    _random.seed(seed)


def randn(*shape, device=None):
    return Tensor(_random.random())


def _loss():
    return Tensor(float("nan") if os.environ.get("STANDIN_LOSS") == "nan" else _state["loss"])
