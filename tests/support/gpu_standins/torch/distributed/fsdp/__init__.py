def FullyShardedDataParallel(module):
    return module
