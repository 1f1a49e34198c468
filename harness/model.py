"""A small decoder-only transformer (nanoGPT's shape). The encoding acts through its embed hook here and through
harness.attention.attend in every block, the one place attention is formed."""
import math

import torch
from torch import nn

from harness import attention as attention_lib
from harness import encodings
from harness.names import ATTENTIONS, QK_NORMS
from harness.encodings import Encoding
VOCAB_SIZE = 256  # byte-level


# QK-norm (config.QK_NORMS): q and k of each head normalized over head_dim, where each model family does it.
# rms: Qwen3's q_norm/k_norm, an RMSNorm with its own learned (D,) gain for q and for k, applied before the
#   rotation, eps 1e-6 (transformers, models/qwen3/modeling_qwen3.py, Qwen3Attention.forward).
# l2: Llama 4's weightless Llama4TextL2Norm, x * rsqrt(mean(x^2) + eps), applied after the rotation, eps 1e-5
#   (models/llama4/modeling_llama4.py, Llama4TextAttention.forward; Llama4TextConfig.rms_norm_eps).
QK_NORM_SPECS = {"rms": dict(gain=True, after_rotation=False, eps=1e-6),
                 "l2": dict(gain=False, after_rotation=True, eps=1e-5)}


class QKNorm(nn.Module):
    """One of QK_NORM_SPECS; `apply(q, k, after_rotation)` normalizes at its own side of the rotation only."""

    def __init__(self, kind, head_dim):
        super().__init__()
        spec = QK_NORM_SPECS[kind]
        self.after_rotation, self.eps = spec["after_rotation"], spec["eps"]
        self.q_gain = nn.Parameter(torch.ones(head_dim)) if spec["gain"] else None
        self.k_gain = nn.Parameter(torch.ones(head_dim)) if spec["gain"] else None

    def norm(self, x, gain):
        """x (B, H, T, D): RMS over D in fp32, back to x's dtype, then the gain (as both HF modules)."""
        y = x.float()
        y = (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        return y if gain is None else gain * y

    def apply(self, q, k, after_rotation):
        if after_rotation != self.after_rotation:
            return q, k
        return self.norm(q, self.q_gain), self.norm(k, self.k_gain)


class Block(nn.Module):
    """Pre-norm attention + MLP. The encoding is shared by all blocks and passed in, not owned."""

    def __init__(self, d_model, n_heads, head_dim, attention, mlp_ratio, qk_norm="none", layer=0,
                 attention_impl="sdpa"):
        super().__init__()
        self.n_heads, self.head_dim, self.attention = n_heads, head_dim, attention
        self.layer = layer  # the block's depth: which encoding of a per-layer policy it uses (Encoding.at)
        self.attention_impl = attention_impl  # flex | auto: this layer's bias may run in FlexAttention (harness.flex)
        self.qk_norm = QKNorm(qk_norm, head_dim) if qk_norm != "none" else None
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * n_heads * head_dim, bias=False)
        self.proj = nn.Linear(n_heads * head_dim, d_model, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model, bias=False), nn.GELU(),
                                 nn.Linear(mlp_ratio * d_model, d_model, bias=False))

    def heads(self, x):
        """x (B, T, C) block input -> q, k, v, each (B, H, T, D), before any encoding acts."""
        return self._split(self.qkv(self.ln1(x)))

    def _split(self, qkv):
        B, T, _ = qkv.shape
        return qkv.view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)

    def forward(self, x, encoding, pos, cache=None, observer=None, last=None):
        """x (B, T, C) at positions pos (T,) -> (B, T, C), or (B, last, C): only the last `last` positions' outputs
        (their queries against every key). encoding: the model's (this block asks for its own,
        encoding.at(layer)); cache, observer: harness.attention.attend's."""
        h = self.ln1(x)
        q, k, v = self._split(self.qkv(h))
        y = attention_lib.attend(encoding.at(self.layer), q, k, v, h, pos, attention=self.attention,
                                 qk_norm=self.qk_norm, impl=self.attention_impl, cache=cache, layer=self.layer,
                                 observer=observer, queries=last)
        return self.out(x[:, x.shape[1] - y.shape[2]:], y)

    def logits(self, x, encoding, pos):
        """(B, H, T, T) pre-softmax attention scores of this block for input x, -inf above the diagonal: the
        scores attend forms (observed), in the activations' dtype."""
        return self.observed(x, encoding, pos).scores

    def observed(self, x, encoding, pos):
        """harness.attention.Observed of this block for input x (B, T, C): its q, k, scores and weights."""
        out = []
        self(x, encoding, pos, observer=out.append)
        return out[0]

    def out(self, x, y):
        """The block's output from its input x (B, T, C) and the attention output y (B, H, T, D): the
        projection and the MLP, each residual."""
        B, T, _ = x.shape
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, -1))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    """Byte-level decoder-only LM: embed -> encoding.embed -> blocks -> LayerNorm -> tied output."""

    def __init__(self, *, encoding: Encoding, n_layers=2, d_model=128, n_heads=4, head_dim=None,
                 attention="softmax", mlp_ratio=4, vocab_size=VOCAB_SIZE, qk_norm="none", attention_impl="auto"):
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}; expected one of {list(ATTENTIONS)}")
        if qk_norm not in QK_NORMS:
            raise ValueError(f"unknown model.qk_norm {qk_norm!r}; expected one of {list(QK_NORMS)}")
        if attention == "linear" and qk_norm != "none":  # linear attention's q, k go through elu + 1 instead
            raise ValueError(f"model.qk_norm={qk_norm!r} needs attention=softmax (linear attention has no "
                             f"QK-norm here); use model.qk_norm=none or attention=softmax")
        if attention == "linear" and any(encoding.at(i).has_bias for i in range(encoding.period)):
            raise ValueError(f"encoding {encoding.name!r} adds an attention-score bias, which linear "
                             f"attention cannot take; use attention=softmax or a bias-free encoding")
        if attention == "linear" and any(encoding.at(i).replaces_softmax for i in range(encoding.period)):
            raise ValueError(f"encoding {encoding.name!r} replaces softmax by its own normalizer, which linear "
                             f"attention has none of; use attention=softmax")
        if attention == "linear" and attention_impl == "flex":
            raise ValueError("model.attention_impl='flex' needs attention=softmax (FlexAttention is a softmax "
                             "kernel); use model.attention_impl=auto or sdpa")
        for i in range(n_layers):  # one line now, not at the first forward, where the encoding has no layer i
            encoding.at(i)
        flexible = attention_lib.flex_plan(attention_impl, encoding, n_layers)  # per block; ValueError if flex cannot run
        head_dim = head_dim or d_model // n_heads  # direct construction; from_config passes it resolved
        self.encoding = encoding
        self.tok = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, head_dim, attention, mlp_ratio, qk_norm, layer=i,
                                          attention_impl=attention_impl if flexible[i] else "sdpa")
                                    for i in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied
        # GPT-2 init, residual projections scaled by depth; the encoding keeps its own (paper) init
        nn.init.normal_(self.tok.weight, std=0.02)
        for name, p in self.blocks.named_parameters():
            if p.dim() == 2:
                deep = name.endswith("proj.weight") or name.endswith("mlp.2.weight")
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layers) if deep else 0.02)

    def forward(self, idx, pos=None, *, cache=None, observer=None, last=None):
        """idx (B, T) bytes at positions pos (T,) -> logits (B, T, vocab). pos defaults to 0..T-1, or with a
        KVCache (harness.attention; harness.decode) to the positions right after the cached ones; the cache is
        extended by these tokens. observer(Observed): harness.attention.attend's, called by every block.
        last: logits (B, last, vocab) of the last `last` positions only; the last block forms only their queries
        and MLP, and the head runs on them alone (a sliding window's scored tokens, harness.measure.extrapolation)."""
        if last is not None and cache is not None:
            raise ValueError("last= scores the end of a full forward; with a KVCache every new position is scored")
        if pos is None:
            start = 0 if cache is None else len(cache)
            pos = torch.arange(start, start + idx.shape[1], device=idx.device)
        try:
            x = self.encoding.embed(self.tok(idx), pos)
            for i, block in enumerate(self.blocks):
                x = block(x, self.encoding, pos, cache, observer, last if i == len(self.blocks) - 1 else None)
        finally:
            self.encoding.end_forward()
        if cache is not None:
            cache.pos = cache.keys_pos(pos)
        return self.head(self.ln_f(x))


def from_config(model_cfg, encoding, vocab_size=VOCAB_SIZE):
    """Transformer from a ModelConfig and an encoding dict {name, **params}; vocab_size: the task's (bytes: 256)."""
    params = {k: v for k, v in encoding.items() if k != "name"}
    enc = encodings.build(encoding["name"], d_model=model_cfg.d_model, n_heads=model_cfg.n_heads,
                          head_dim=model_cfg.head_dim, n_layers=model_cfg.n_layers, **params)
    return Transformer(encoding=enc, n_layers=model_cfg.n_layers, d_model=model_cfg.d_model,
                       n_heads=model_cfg.n_heads, head_dim=model_cfg.head_dim, attention=model_cfg.attention,
                       mlp_ratio=model_cfg.mlp_ratio, qk_norm=model_cfg.qk_norm, vocab_size=vocab_size,
                       attention_impl=model_cfg.attention_impl)
