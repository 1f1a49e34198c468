"""The scale rows (n_params, train_tokens, train_flops): the FLOPs formula against torch's own FLOP counter on
the real model, and the rows a run writes."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness import model as model_lib
from harness import results, runner
from harness.config import ModelConfig
from harness.measure import cost


def _matmul_flops(counter):
    """FLOPs of the dense matrix multiplies torch counted (Linear layers), attention's own products left out."""
    return sum(n for op, n in counter.get_flop_counts()["Global"].items()
               if str(op).split(".")[1] in {"mm", "addmm", "bmm"})


@pytest.mark.parametrize("n_layers,d_model,n_heads,head_dim", [(2, 64, 4, None), (3, 48, 2, 32)])
def test_training_flops_match_torch_flop_counter(n_layers, d_model, n_heads, head_dim):
    # Kaplan et al. 2020 (arXiv 2001.08361, Table 1): forward 2N per token for the weight multiplies, backward
    # twice the forward; torch's FlopCounterMode counts 2·m·n·k per matmul, so the two must agree exactly.
    m = ModelConfig(n_layers=n_layers, d_model=d_model, n_heads=n_heads, head_dim=head_dim)
    net = model_lib.from_config(m, {"name": "nope"})
    x = torch.randint(0, model_lib.VOCAB_SIZE, (3, 16))
    with FlopCounterMode(display=False) as fwd:
        net(x)
    with FlopCounterMode(display=False) as step:
        net(x).float().logsumexp(-1).sum().backward()
    n = cost.matmul_params(n_layers=n_layers, d_model=d_model, d_attn=m.n_heads * m.head_dim,
                           mlp_ratio=m.mlp_ratio, vocab=model_lib.VOCAB_SIZE)
    assert _matmul_flops(fwd) == 2 * n * x.numel()
    assert _matmul_flops(step) == 6 * n * x.numel()
    attention = 3 * 2 * n_layers * 16 * m.n_heads * m.head_dim * x.numel()  # Kaplan's n_ctx term, fwd + bwd
    assert cost.training_flops(n_layers=n_layers, d_model=d_model, d_attn=m.n_heads * m.head_dim,
                               mlp_ratio=m.mlp_ratio, vocab=model_lib.VOCAB_SIZE, seq_len=16,
                               tokens=x.numel()) == 6 * n * x.numel() + attention


def test_run_rows_state_its_scale(tmp_path, tiny):
    cfg = tiny(tmp_path)
    runner.run(cfg, tmp_path / "run", progress=False)
    df = results.load(tmp_path / "run")
    value = {m: df[df.metric == m].value.item() for m in ("n_params", "train_tokens", "train_flops")}
    net = model_lib.from_config(cfg.model, cfg.encoding)
    assert value["n_params"] == sum(p.numel() for p in net.parameters())  # tied head counted once
    assert value["train_tokens"] == cfg.train.steps * cfg.train.batch_size * cfg.train.seq_len
    assert value["train_flops"] > 6 * value["train_tokens"] * 4 * cfg.model.d_model ** 2
