from . import functional  # noqa: F401


class Module:
    def __init__(self, *args, **kwargs):
        pass

    def cuda(self):
        return self

    def parameters(self):
        return []

    def __call__(self, data):
        from .. import _loss
        return _loss()

    def state_dict(self):
        """The model's one weight, the loss level (what training changes, and a checkpoint keeps)."""
        from .. import Tensor, _state
        return {"weight": Tensor(_state["loss"])}

    def load_state_dict(self, state_dict):
        from .. import _state
        _state["loss"] = state_dict["weight"].value


class TransformerEncoderLayer(Module):
    pass


class TransformerEncoder(Module):
    pass
