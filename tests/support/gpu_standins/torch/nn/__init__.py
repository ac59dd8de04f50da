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


class TransformerEncoderLayer(Module):
    pass


class TransformerEncoder(Module):
    pass
