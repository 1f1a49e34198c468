"""Multi-process training under torchrun: process group set-up, per-rank batch shares, loss averaging.

`torchrun --nproc_per_node N -m harness ...` starts N copies of the job; each one calls `setup` (gloo on
CPU, nccl on CUDA). Every rank draws the same global batch from the same generator and trains on its own
disjoint slice, so the global batch, the data order and the random positions equal a 1-process run's,
and DDP's gradient average over the slices is the gradient of the global batch. Rank 0 measures and
writes; the other ranks only train. Without torchrun (WORLD_SIZE unset or 1) everything here is a no-op."""
import os

import torch
import torch.distributed as dist


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def launched() -> bool:
    """True when this process was started by torchrun (or any launcher that sets WORLD_SIZE > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def setup(device: str):
    """Join the process group torchrun describes; on CUDA pin this rank to its local GPU."""
    if not launched() or dist.is_initialized():
        return
    if device.startswith("cuda"):
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))  # "cuda" then means this rank's GPU
    dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")


def teardown():
    if dist.is_initialized():
        dist.destroy_process_group()


def check_batch(batch_size: int):
    """The global batch must split evenly, or ranks would train on different amounts of data."""
    n = world_size()
    if batch_size % n:
        raise ValueError(f"train.batch_size {batch_size} is not divisible by the number of processes {n}; "
                         f"choose a multiple of {n}")


def shard(batch):
    """This rank's slice of a global batch (x, y, mask, pos) and its loss weight.

    x, y, mask are (B, T); pos is (T,) and shared. The weight makes DDP's average over ranks equal the
    mean over all scored targets of the global batch, also when ranks hold different numbers of scored
    targets (synthetic tasks' masks): weight = world_size * scored_here / scored_total (1 without a mask)."""
    n, r = world_size(), rank()
    if n == 1:
        return batch, 1.0
    x, y, mask, pos = batch
    b = x.shape[0] // n
    part = slice(r * b, (r + 1) * b)
    local_mask = None if mask is None else mask[part]
    weight = 1.0 if mask is None else n * float(local_mask.sum()) / max(1.0, float(mask.sum()))
    return (x[part], y[part], local_mask, pos), weight


def mean_over_ranks(loss: torch.Tensor) -> float:
    """The global batch's loss from each rank's weighted loss (a sum over ranks / world size)."""
    if world_size() == 1:
        return loss.item()
    total = loss.detach().float().clone()
    dist.all_reduce(total)
    return total.item() / world_size()


def wrap(model, device):
    """DistributedDataParallel around model when running under torchrun; else the model itself."""
    if world_size() == 1:
        return model
    ids = [torch.cuda.current_device()] if str(device).startswith("cuda") else None
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
