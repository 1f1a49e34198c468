"""jax.numpy.concatenate on torch, for the equinox fake."""
import torch


def concatenate(arrays, axis=0):
    return torch.cat(arrays, axis)
