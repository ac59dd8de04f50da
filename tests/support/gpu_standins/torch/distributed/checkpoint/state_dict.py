"""torch.distributed.checkpoint.state_dict: the model's and optimizer's state dicts (FSDP's
sharded ones: here each rank's whole), and setting them back."""


def get_state_dict(model, optimizers):
    return model.state_dict(), optimizers.state_dict()


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict):
    model.load_state_dict(model_state_dict)
    optimizers.load_state_dict(optim_state_dict)
