"""A stand-in for the few parts of PyTorch the kit's smoke.py uses, for the tests' localhost Slurm
(no GPU, no PyTorch there). Tensors are plain numbers; the model's loss falls a little each step, as
a training run's does; all_reduce sums over the world as NCCL would over equal values. Rank, world
size and local rank come from torchrun's environment (the torchrun stand-in beside this package).
STANDIN_LOSS=nan makes the loss not finite."""
import os
import random as _random

from . import cuda, distributed, nn, optim  # noqa: F401

_state = {"loss": 1.0}

class Tensor:
    def __init__(self, value=0.0):
        self.value = value

    def detach(self):
        return Tensor(self.value)

    def item(self):
        return self.value

    def backward(self):
        _state["loss"] *= 0.97

    def cuda(self):
        return self

def manual_seed(seed):
    _random.seed(seed)

def randn(*shape, device=None):
    return Tensor(_random.random())

def _loss():
    return Tensor(float("nan") if os.environ.get("STANDIN_LOSS") == "nan" else _state["loss"])

