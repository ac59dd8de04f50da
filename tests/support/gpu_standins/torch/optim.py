class AdamW:
    def __init__(self, parameters, lr):
        self.lr = lr
        self.steps = 0  # its state: the steps it took

    def zero_grad(self):
        pass

    def step(self):
        self.steps += 1

    def state_dict(self):
        return {"state": {"step": self.steps}, "param_groups": [{"lr": self.lr}]}

    def load_state_dict(self, state_dict):
        self.steps = state_dict["state"]["step"]
        self.lr = state_dict["param_groups"][0]["lr"]
