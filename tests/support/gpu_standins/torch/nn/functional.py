def mse_loss(output, target):
    return output
