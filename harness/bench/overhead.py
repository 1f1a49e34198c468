"""RoPE's training-step overhead against NoPE (EleutherAI measured <= 3% on GPU).

One model shape, one encoding at a time: fwd + bwd + AdamW step on random bytes under the chosen
autocast dtype, timed after warm-up. The encodings are timed in rounds (nope, rope, rope eager, nope,
...) so that clock drift hits them all; each encoding's time is the median over rounds. overhead =
t(encoding) / t(nope) - 1. Runs anywhere the model runs; the GPU figure is the one the target is about.

  python -m harness.bench.overhead --device cuda --layers 8 --d-model 1024 --heads 16 --seq-len 2048 --batch 8
"""
import argparse
from types import SimpleNamespace

import torch

from harness import encodings, train
from harness.measure import timing
from harness.model import Transformer

# (label, encoding name, params): rope with the model's default impl (auto -> fused kernel) and with
# the HF-style eager formula, to show what the kernel buys inside a training step
VARIANTS = [("nope", "nope", {}), ("rope", "rope", {}), ("rope_eager", "rope", {"impl": "eager"})]


def step_fn(name, params, a, device):
    """A zero-argument training step of a fresh model with encoding `name`."""
    torch.manual_seed(0)
    enc = encodings.build(name, d_model=a.d_model, n_heads=a.heads, head_dim=a.d_model // a.heads, **params)
    model = Transformer(encoding=enc, n_layers=a.layers, d_model=a.d_model, n_heads=a.heads).to(device)
    cfg = SimpleNamespace(lr=3e-4, weight_decay=0.1, grad_clip=1.0)  # what train.optimizer and train.step read
    opt = train.optimizer(model, cfg)
    x = torch.randint(0, 256, (a.batch, a.seq_len), generator=torch.Generator().manual_seed(0))
    batch = (x, torch.roll(x, -1, 1), None, None)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[a.autocast]

    def run():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            train.step(model, opt, batch, cfg, device)
    return run


def measure(a):
    device = torch.device(a.device)
    fns = {label: step_fn(name, params, a, device) for label, name, params in VARIANTS}
    for fn in fns.values():  # warm-up: kernels compiled/loaded, allocator settled
        timing.seconds_per_call(fn, repeats=0, warmup=a.warmup, device=device)
    times = {label: [] for label in fns}
    for _ in range(a.rounds):  # one timing per encoding per round: drift hits them all alike
        for label, fn in fns.items():
            times[label] += timing.seconds_per_call(fn, repeats=1, inner=a.steps, warmup=0, device=device)
    med = {label: timing.median(t) for label, t in times.items()}
    return {label: dict(step_s=med[label], tokens_per_s=a.batch * a.seq_len / med[label],
                        overhead_vs_nope=med[label] / med["nope"] - 1, spread=(min(t), max(t)))
            for label, t in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.bench.overhead", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--autocast", choices=["bf16", "fp16", "fp32"], default="fp32")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args(argv)
    print(f"device {torch.cuda.get_device_name() if a.device == 'cuda' else a.device}, torch {torch.__version__}, "
          f"{vars(a)}")
    for label, r in measure(a).items():
        print(f"{label:11s} step {1e3 * r['step_s']:9.3f} ms  {r['tokens_per_s']:12.0f} tok/s  "
              f"overhead vs nope {100 * r['overhead_vs_nope']:+6.2f}%  (rounds {1e3 * r['spread'][0]:.3f}"
              f"-{1e3 * r['spread'][1]:.3f} ms)")


if __name__ == "__main__":
    main()
