"""The compute a training run spent, in the units scaling papers use: parameters, tokens, FLOPs.

FLOPs follow Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (arXiv 2001.08361), Table 1:
a forward pass costs 2·N + 2·n_layer·n_ctx·d_attn per token, N the parameters of the matrix multiplies,
and training (forward + backward) three times that. N here counts every matrix multiply the model runs:
per layer q, k, v, output projection (4·d_model·d_attn) and MLP (2·mlp_ratio·d_model²), plus the output head
(d_model·vocab; tied to the embedding, but it is still a multiply, and at d_model 128 it is 8% of the work).
Encoding-specific parameters (bias tables, learned positions) are left out, so every encoding of one model
size has the same FLOPs: a rung of a compute ladder is one number."""
import torch


def matmul_params(*, n_layers, d_model, d_attn, mlp_ratio, vocab):
    """N of Kaplan's formula: the weights of every matrix multiply of a forward pass."""
    return n_layers * (4 * d_model * d_attn + 2 * mlp_ratio * d_model * d_model) + d_model * vocab


def training_flops(*, n_layers, d_model, d_attn, mlp_ratio, vocab, seq_len, tokens):
    """FLOPs of training on `tokens` tokens in sequences of seq_len: 3 · (2·N + 2·n_layers·seq_len·d_attn) per token."""
    n = matmul_params(n_layers=n_layers, d_model=d_model, d_attn=d_attn, mlp_ratio=mlp_ratio, vocab=vocab)
    return 3.0 * (2.0 * n + 2.0 * n_layers * seq_len * d_attn) * tokens


def trainable_params(model: torch.nn.Module):
    """Trainable parameters, each shared tensor (the tied embedding and head) counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
