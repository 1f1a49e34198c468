"""A small decoder-only transformer (nanoGPT's shape) that calls the encoding's hooks at fixed places."""
import math

import torch
import torch.nn.functional as F
from torch import nn

from harness import encodings, flex
from harness.names import ATTENTIONS, QK_NORMS
from harness.encodings import Encoding
VOCAB_SIZE = 256  # byte-level


def causal_mask(T, device=None):
    """(T, T) bool, True where key j <= query i: the pairs causal attention may use."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def attention_logits(q, k, bias):
    """Pre-softmax scores q k^T / sqrt(D) + bias, in q's dtype, with -inf where j > i: what SDPA forms
    inside from softmax_attention's arguments. q, k (B, H, T, D); bias (H|B,H, T, T) or None -> (B, H, T, T).
    Used wherever the harness needs the logits themselves (precision study, claims, tests)."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias.to(s.dtype)  # added in the activations dtype, as softmax_attention adds it
    return s.masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))


def softmax_attention(q, k, v, bias):
    """Causal SDPA. q, k, v (B, H, T, D); bias (H|B,H, T, T) or None. No mask tensor at all without a bias."""
    if bias is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mask = bias.to(q.dtype).masked_fill(~causal_mask(q.shape[-2], q.device), float("-inf"))
    # a 4-D (B, H, T, T) view: SDPA on CPU takes its fused kernel for it, but falls back to the unfused
    # math path for a 3-D (H, T, T) mask (4x slower at B 8, H 4, T 1024, one thread; no copy is made)
    mask = mask.expand(q.shape[0], *mask.shape[-3:]) if mask.dim() == 3 else mask
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _feature(x):
    """elu + 1: the positive feature map of Katharopoulos et al. 2020 (arXiv 2006.16236)."""
    return F.elu(x) + 1


def linear_attention(q, k, v, encoding, pos, eps=1e-6):
    """Causal linear attention with RoPE in the numerator only (RoFormer §3.3, arXiv 2104.09864; Su 2021,
    https://spaces.ac.cn/archives/8265, section 线性场景):

    out_i = sum_{j<=i} [R_i f(q_i)]^T [R_j f(k_j)] v_j / sum_{j<=i} f(q_i)^T f(k_j), in O(T) by cumulative
    sums over j of k_j v_j^T (B, H, T, D, Dv); no T x T matrix. The denominator keeps positivity."""
    fq, fk = _feature(q), _feature(k)
    rq, rk = encoding.rotate(fq, fk, pos)
    kv = torch.einsum("bhtd,bhte->bhtde", rk, v).cumsum(dim=2)  # (B, H, T, D, Dv)
    num = torch.einsum("bhtd,bhtde->bhte", rq, kv)
    den = torch.einsum("bhtd,bhtd->bht", fq, fk.cumsum(dim=2))[..., None]
    return num / (den + eps)


def linear_attention_quadratic(q, k, v, encoding, pos, eps=1e-6):
    """The same as linear_attention, written with the explicit masked T x T matrix (a test oracle)."""
    fq, fk = _feature(q), _feature(k)
    rq, rk = encoding.rotate(fq, fk, pos)
    causal = causal_mask(q.shape[-2], q.device)
    num = (rq @ rk.transpose(-1, -2)).masked_fill(~causal, 0) @ v
    den = (fq @ fk.transpose(-1, -2)).masked_fill(~causal, 0).sum(-1, keepdim=True)
    return num / (den + eps)


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

    def rotated(self, x, encoding, pos):
        """This block's encoding (encoding.at(layer)), its rotated q, k, and v (B, H, T, D), and its token_state
        (B, H, T) of the attention input (or None): the softmax path before a bias."""
        encoding = encoding.at(self.layer)
        h = self.ln1(x)
        q, k, v = self._split(self.qkv(h))
        if self.qk_norm is not None:
            q, k = self.qk_norm.apply(q, k, after_rotation=False)
        q, k = encoding.rotate(q, k, pos)
        if self.qk_norm is not None:
            q, k = self.qk_norm.apply(q, k, after_rotation=True)
        return encoding, q, k, v, encoding.token_state(h)

    def encoded(self, x, encoding, pos):
        """The softmax path's inputs: rotated q, k, then v and the encoding's bias (or None)."""
        encoding, q, k, v, state = self.rotated(x, encoding, pos)
        return q, k, v, encoding.scores_bias(q, k, pos, pos, state)

    def logits(self, x, encoding, pos):
        """(B, H, T, T) pre-softmax attention scores of this block for input x, -inf above the diagonal."""
        if self.attention != "softmax":
            raise ValueError(f"attention logits need attention 'softmax', got {self.attention!r}")
        q, k, _, bias = self.encoded(x, encoding, pos)
        return attention_logits(q, k, bias)

    def forward(self, x, encoding, pos):
        if self.attention == "linear":
            y = linear_attention(*self.heads(x), encoding.at(self.layer), pos)
        else:  # a bias of i - j alone as an (H, T) table in FlexAttention where this call can, else SDPA
            enc, q, k, v, state = self.rotated(x, encoding, pos)
            if enc.replaces_softmax:  # sigmoid, stick-breaking: the (B, H, T, T) weights are materialized
                y = enc.normalize(attention_logits(q, k, enc.scores_bias(q, k, pos, pos, state))).to(v.dtype) @ v
            elif self.attention_impl != "sdpa" and flex.runs(self.attention_impl, q, pos):
                y = flex.attention(q, k, v, enc, pos)
            else:
                y = softmax_attention(q, k, v, enc.scores_bias(q, k, pos, pos, state))
        return self.out(x, y)

    def out(self, x, y):
        """The block's output from its input x (B, T, C) and the attention output y (B, H, T, D): the
        projection and the MLP, each residual (also harness.decode's, after attention over the cache)."""
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
        flexible = flex.layer_plan(attention_impl, encoding, n_layers)  # per block; ValueError if flex cannot run
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

    def forward(self, idx, pos=None):
        """idx (B, T) bytes; pos (T,) integer positions (default 0..T-1) -> logits (B, T, vocab)."""
        if pos is None:
            pos = torch.arange(idx.shape[1], device=idx.device)
        try:
            x = self.encoding.embed(self.tok(idx), pos)
            for block in self.blocks:
                x = block(x, self.encoding, pos)
        finally:
            self.encoding.end_forward()
        return self.head(self.ln_f(x))


def from_config(model_cfg, encoding):
    """Transformer from a ModelConfig and an encoding dict {name, **params}."""
    params = {k: v for k, v in encoding.items() if k != "name"}
    enc = encodings.build(encoding["name"], d_model=model_cfg.d_model, n_heads=model_cfg.n_heads,
                          head_dim=model_cfg.head_dim, n_layers=model_cfg.n_layers, **params)
    return Transformer(encoding=enc, n_layers=model_cfg.n_layers, d_model=model_cfg.d_model,
                       n_heads=model_cfg.n_heads, head_dim=model_cfg.head_dim, attention=model_cfg.attention,
                       mlp_ratio=model_cfg.mlp_ratio, qk_norm=model_cfg.qk_norm,
                       attention_impl=model_cfg.attention_impl)
