"""jax.vmap(fn, in_axes, out_axes) for the equinox fake, on torch: fn over the slices along in_axes, stacked at
out_axes (single array argument only)."""
import torch


def vmap(fn, in_axes=0, out_axes=0):
    return lambda x: torch.stack([fn(s) for s in x.unbind(in_axes)], out_axes)
