"""How fast a forward runs against what this machine can do: the forward's useful FLOPs (closed form) per second,
as a ratio to a plain fp32 matmul of the same process (the yardstick; the kernel benchmark uses copy bandwidth the
same way). A ratio near 1 means the forward runs at the machine's matmul speed; it is the number to compare across
machines, where seconds are not."""
import time

import torch


def forward_flops(hf: dict, T: int, causal: bool = True, head: int = None) -> float:
    """Multiply-adds x 2 of one forward of T tokens through an HF decoder config (dict): the layers' projections
    (q, k, v, o; gated MLP: gate, up, down), attention's QK^T and AV (causal: the lower triangle only, as SDPA's
    causal kernel computes it; a sliding layer attends at most its window), and the LM head on `head` positions
    (default T). Norms, RoPE and softmax are O(T C): left out."""
    C, I = hf["hidden_size"], hf["intermediate_size"]
    H, Hk = hf["num_attention_heads"], hf.get("num_key_value_heads") or hf["num_attention_heads"]
    D = hf.get("head_dim") or C // H
    n = hf["num_hidden_layers"]
    proj = C * (H * D) * 2 + C * (Hk * D) * 2 + 3 * C * I  # q, o; k, v; gate, up, down
    types = hf.get("layer_types") or ["full_attention"] * n
    window = hf.get("sliding_window") or T
    attn = 0.0
    for t in types[:n]:
        span = min(T, window) if t == "sliding_attention" else T
        # query i attends to min(i + 1, span) keys (causal): sum over i = span(span+1)/2 + (T - span) span
        pairs = span * (span + 1) / 2 + (T - span) * span if causal else T * span
        attn += 2 * 2 * H * D * pairs
    return 2.0 * proj * n * T + attn + 2.0 * C * hf["vocab_size"] * (T if head is None else head)


def yardstick(C: int, I: int, repeats: int = 5) -> float:
    """FLOP/s of a plain fp32 matmul (4096 x C) @ (C x I) in this process, the median of `repeats` after a warm-up:
    the machine's matmul speed at the model's own widths, on the threads torch uses now."""
    a, b = torch.randn(4096, C), torch.randn(C, I)
    a @ b
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2.0 * 4096 * C * I / sorted(times)[len(times) // 2]
