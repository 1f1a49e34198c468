"""Peak memory (DESIGN.md §5) of one training step and of one evaluation forward, in bytes.

peak = bytes of the persistent state that is live throughout (parameters, optimizer state; counted
once per storage) + the peak of the extra tensor memory allocated while the step runs.

CUDA: the extra part is torch.cuda.max_memory_allocated() - memory_allocated() at the start.
CPU: the torch profiler's allocation events (profile_memory=True). c10's CPU allocator reports each
allocation and free to the profiler together with `total_allocated`, the running net sum of the
bytes allocated since profiling began; its maximum inside a record_function region is the region's
peak extra tensor memory. This is exact for tensor memory (it counts every CPU tensor allocation,
not an RSS sample), and excludes what the allocator does not own (Python objects, code, mmap'd data).
Frees of tensors allocated before the region are not subtracted, so gradients are set to None
before the region (they are then allocated, and counted, inside it)."""
import contextlib
import copy
import os

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile, record_function

from harness import train

REGION = "harness.measure.memory"


def state_bytes(*objs):
    """Bytes of the distinct storages among tensors in modules / optimizers / tensors."""
    seen, total = set(), 0
    for obj in objs:
        if isinstance(obj, torch.nn.Module):
            tensors = list(obj.parameters()) + list(obj.buffers())
        elif isinstance(obj, torch.optim.Optimizer):
            tensors = [v for s in obj.state.values() for v in s.values() if torch.is_tensor(v)]
        else:
            tensors = [obj]
        for t in tensors:
            s = t.untyped_storage()
            if s.data_ptr() not in seen:
                seen.add(s.data_ptr())
                total += s.nbytes()
    return total


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n.children)


@contextlib.contextmanager
def _quiet_stderr():
    """The CPU profiler's C++ side prints start/stop lines on fd 2; hide them (exceptions still raise)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_extra_bytes(fn, device="cpu"):
    """Peak bytes of tensor memory allocated by fn() above what was live when it started."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        torch.empty(64, dtype=torch.uint8)  # probe: its free event reports the counter just before fn
        with record_function(REGION):
            fn()
    events = list(_walk(prof.profiler.kineto_results.experimental_event_tree()))
    region = [e for e in events if e.name == REGION]
    if len(region) != 1:
        raise RuntimeError(f"memory: expected one profiler region {REGION!r}, found {len(region)}")
    t0, t1 = region[0].start_time_ns, region[0].end_time_ns
    allocs = sorted((e.start_time_ns, e.extra_fields.total_allocated) for e in events
                    if e.tag == _EventType.Allocation and str(e.extra_fields.device) == "cpu")
    # total_allocated is a process-wide counter that keeps tensors allocated under an earlier profiler
    # session, so the peak is taken relative to its value right before the region.
    before = [total for t, total in allocs if t < t0]
    if not before:
        raise RuntimeError("memory: the profiler recorded no allocation before the region (probe missing)")
    return max([0, *(total - before[-1] for t, total in allocs if t0 <= t <= t1)])


def train_peak_bytes(model, train_cfg, device):
    """Peak memory of one fwd + bwd + AdamW step at (batch_size, seq_len), after one warm-up step."""
    m = copy.deepcopy(model).train()
    opt = train.optimizer(m, train_cfg)
    x = torch.randint(0, 256, (train_cfg.batch_size, train_cfg.seq_len), generator=torch.Generator().manual_seed(0))
    batch = (x, torch.roll(x, -1, 1), None, None)
    train.step(m, opt, batch, train_cfg, device)  # creates the optimizer state
    opt.zero_grad(set_to_none=True)
    extra = peak_extra_bytes(lambda: train.step(m, opt, batch, train_cfg, device), device)
    return state_bytes(m, opt) + extra


def eval_peak_bytes(model, seq_len, device, batch_size=1):
    """Peak memory of one no-grad forward at (batch_size, seq_len)."""
    x = torch.randint(0, 256, (batch_size, seq_len), generator=torch.Generator().manual_seed(0)).to(device)
    model.eval()
    with torch.no_grad():
        extra = peak_extra_bytes(lambda: model(x), device)
    return state_bytes(model) + extra
