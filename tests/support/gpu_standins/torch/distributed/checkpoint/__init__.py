"""torch.distributed.checkpoint's save and load (DCP), as PyTorch's FileSystemWriter lays a
checkpoint out: a file of each rank's state in the checkpoint's directory, then, once every rank
wrote its file, rank 0's .metadata, which makes it a checkpoint load can read. Both are
collectives. load fills the state dict it is given in place (a tensor's value, another value
replaced) and fails on a directory without .metadata, as DCP's does."""
import json
import os

from .. import _collective, get_rank, get_world_size

METADATA = ".metadata"


def _encoded(value):
    from ... import Tensor
    if isinstance(value, Tensor):
        return {"tensor": value.value}
    if isinstance(value, dict):
        return {"dict": {key: _encoded(item) for key, item in value.items()}}
    if isinstance(value, list):
        return {"list": [_encoded(item) for item in value]}
    return {"value": value}


def _decoded_into(target, saved):
    """`target` (a dict) filled in place from the saved form of a dict."""
    from ... import Tensor
    for key, item in saved["dict"].items():
        if "tensor" in item and isinstance(target.get(key), Tensor):
            target[key].value = item["tensor"]
        elif "dict" in item and isinstance(target.get(key), dict):
            _decoded_into(target[key], item)
        else:
            target[key] = _plain(item)


def _plain(item):
    from ... import Tensor
    if "tensor" in item:
        return Tensor(item["tensor"])
    if "dict" in item:
        return {key: _plain(value) for key, value in item["dict"].items()}
    if "list" in item:
        return [_plain(value) for value in item["list"]]
    return item["value"]


def _state(state_dict):
    return {key: (value.state_dict() if hasattr(value, "state_dict") else value) for key, value in state_dict.items()}


def save(state_dict, *, checkpoint_id):
    rank = get_rank()
    os.makedirs(checkpoint_id, exist_ok=True)
    with open(os.path.join(checkpoint_id, f"__{rank}_0.distcp"), "w") as out:
        json.dump(_encoded(_state(state_dict)), out)
    _collective(rank, len)  # every rank's file written
    if rank == 0:
        with open(os.path.join(checkpoint_id, METADATA), "w") as out:
            json.dump({"world_size": get_world_size()}, out)
    _collective(rank, len)  # the metadata written: the checkpoint is whole on every rank


def load(state_dict, *, checkpoint_id):
    if not os.path.exists(os.path.join(checkpoint_id, METADATA)):
        raise FileNotFoundError(f"stand-in: {checkpoint_id} has no {METADATA}: not a complete checkpoint")
    with open(os.path.join(checkpoint_id, f"__{get_rank()}_0.distcp")) as source:
        _decoded_into(state_dict, json.load(source))
    _collective(get_rank(), len)
    from ... import _run

    _run["resumed"] = True
