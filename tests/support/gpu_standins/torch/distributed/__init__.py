import os

_world = {"up": False}


def init_process_group(backend):
    if backend != "nccl":
        raise RuntimeError(f"stand-in: backend {backend}")
    _world["up"] = True


def get_rank():
    return int(os.environ["RANK"])


def get_world_size():
    return int(os.environ["WORLD_SIZE"])


def all_reduce(tensor):
    tensor.value = tensor.value * get_world_size()


def destroy_process_group():
    _world["up"] = False
