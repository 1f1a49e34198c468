"""Throughput: tokens/s over timed steps after warm-up, the median of repeats (harness.measure.timing).

Train = fwd + bwd + optimizer step on a copy of the model (the trained weights are not touched);
eval = fwd under no_grad. Inputs are random bytes: the cost does not depend on the content."""
import copy

import torch

from harness import train
from harness.measure import timing


def train_tokens_per_s(model, train_cfg, device, *, warmup=2, repeats=5, steps=2):
    """fwd + bwd + AdamW step on (batch_size, seq_len) random bytes."""
    m = copy.deepcopy(model).train()
    opt = train.optimizer(m, train_cfg)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (train_cfg.batch_size, train_cfg.seq_len), generator=g)
    batch = (x, torch.roll(x, -1, 1), None, None)
    sec = timing.median(timing.seconds_per_call(lambda: train.step(m, opt, batch, train_cfg, device),
                                                repeats=repeats, inner=steps, warmup=warmup, device=device))
    return x.numel() / sec


def eval_tokens_per_s(model, seq_len, batch_size, device, *, warmup=2, repeats=5, steps=1):
    """Forward of (batch_size, seq_len) random bytes, no grad."""
    x = torch.randint(0, 256, (batch_size, seq_len), generator=torch.Generator().manual_seed(0)).to(device)
    model.eval()
    with torch.no_grad():
        sec = timing.median(timing.seconds_per_call(lambda: model(x), repeats=repeats, inner=steps, warmup=warmup,
                                                    device=device))
    return x.numel() / sec
