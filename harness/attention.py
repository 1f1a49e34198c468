"""The one place attention is formed (DESIGN.md §2). `attend` calls every hook an encoding has on attention
(rotate, token_state, scores_bias, normalize; bias through scores_bias or the FlexAttention table), forms the
scores and the causal mask, and picks the kernel: SDPA, FlexAttention (a bias of i - j alone, harness.flex),
or materialized weights (an encoding's own normalizer, or an observer that wants the weights). The model's
blocks, KV-cache decoding, the attention statistics, the precision study and the claims all come through here,
so the weights any code reports are the ones the model uses.

Shapes: q, k, v (B, H, T, D); positions (T,) integers shared by the batch; scores and weights (B, H, Tq, Tk).
Causality is by index: query row r sees keys 0 .. r + Tk - Tq (the diagonal of a full forward; with a cache,
every cached key and the new keys up to its own)."""
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from harness import flex


def causal_mask(Tq, Tk=None, device=None):
    """(Tq, Tk) bool, True where query row r may use key j: j <= r + Tk - Tq (Tk defaults to Tq)."""
    Tk = Tq if Tk is None else Tk
    return torch.ones(Tq, Tk, dtype=torch.bool, device=device).tril(Tk - Tq)


def attention_logits(q, k, bias):
    """Pre-softmax scores q k^T / sqrt(D) + bias, in q's dtype, -inf where a key is not visible: what SDPA
    forms inside from softmax_attention's arguments. bias (H|B,H, Tq, Tk) or None -> (B, H, Tq, Tk)."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias.to(s.dtype)  # added in the activations dtype, as softmax_attention adds it
    return s.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))


def softmax_attention(q, k, v, bias):
    """Causal SDPA. bias (H|B,H, Tq, Tk) or None: no mask tensor at all for a square call without a bias."""
    Tq, Tk = q.shape[-2], k.shape[-2]
    if bias is None and Tq == Tk:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mask = torch.zeros(Tq, Tk, dtype=q.dtype, device=q.device) if bias is None else bias.to(q.dtype)
    mask = mask.masked_fill(~causal_mask(Tq, Tk, q.device), float("-inf"))
    # a 4-D (B, H, Tq, Tk) view: SDPA on CPU takes its fused kernel for it, but falls back to the unfused
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
    causal = causal_mask(q.shape[-2], device=q.device)
    num = (rq @ rk.transpose(-1, -2)).masked_fill(~causal, 0) @ v
    den = (fq @ fk.transpose(-1, -2)).masked_fill(~causal, 0).sum(-1, keepdim=True)
    return num / (den + eps)


class Observed(NamedTuple):
    """What an observer of attend sees of one layer: q, k (B, H, T|Tk, D) after the encoding and QK-norm, the
    scores (B, H, T, Tk) in the activations' dtype (-inf where not visible) and the fp32 weights (B, H, T, Tk)
    the layer's output is computed from."""
    layer: int
    q: torch.Tensor
    k: torch.Tensor
    scores: torch.Tensor
    weights: torch.Tensor


class KVCache:
    """Per block: keys and values (B, H, Tc, D) after the encoding (rotated, QK-normed), the encoding's
    token_state (B, H, Tc) or None; and the positions (Tc,) of the cached tokens, advanced once per forward."""

    def __init__(self, n_layers):
        self.k, self.v, self.state, self.pos = [None] * n_layers, [None] * n_layers, [None] * n_layers, None

    def __len__(self):
        return 0 if self.pos is None else int(self.pos.numel())

    def keys_pos(self, pos):
        """(Tc + T,) positions of every key a forward over new positions pos (T,) attends to."""
        return pos if self.pos is None else torch.cat((self.pos, pos))

    def extend(self, layer, k, v, state):
        """Append the new tokens' k, v (B, H, T, D) and state (B, H, T) to layer's; return all of them."""
        if self.k[layer] is not None:
            k, v = torch.cat((self.k[layer], k), 2), torch.cat((self.v[layer], v), 2)
            state = None if state is None else torch.cat((self.state[layer], state), -1)
        self.k[layer], self.v[layer], self.state[layer] = k, v, state
        return k, v, state


def rotate(encoding, q, k, pos):
    """The encoding's rotation alone, q, k (B, H, T, D) at positions pos (T,): what the rotation precision
    studies and cost claims measure (attend applies it with the QK-norm around it)."""
    return encoding.rotate(q, k, pos)


def positions_bias(encoding, q, q_pos, k_pos):
    """The encoding's bias as a function of positions, (H|B,H, Tq, Tk) or None (q given for Shaw's q . R^K)."""
    return encoding.bias(q, q_pos, k_pos)


def attend(encoding, q, k, v, h, pos, *, attention="softmax", qk_norm=None, impl="sdpa", cache=None, layer=0,
           observer=None, queries=None):
    """One block's attention output (B, H, T, D) for its projections q, k, v (B, H, T, D) before any encoding,
    its attention input h (B, T, C) (token_state reads it) and the new tokens' positions pos (T,).

    encoding: this block's own (Encoding.at(layer)); attention: softmax | linear; qk_norm: the block's QKNorm or
    None; impl: the block's attention_impl (flex | auto may take FlexAttention, full forwards only); cache: a
    KVCache to attend over and extend (layer's slot); observer: called with an Observed (the output is then
    computed from its weights); queries: only the last `queries` rows of the output (B, H, queries, D), against
    every key: a sliding window's scored positions, in the cache path's shapes (q rows after the keys' start)."""
    if attention == "linear":
        if observer is not None:
            raise ValueError("attention weights need attention=softmax (linear attention forms none)")
        return linear_attention(q, k, v, encoding, pos)[:, :, -(queries or q.shape[-2]):]
    if qk_norm is not None:
        q, k = qk_norm.apply(q, k, after_rotation=False)
    q, k = encoding.rotate(q, k, pos)
    if qk_norm is not None:
        q, k = qk_norm.apply(q, k, after_rotation=True)
    state = encoding.token_state(h)  # (B, H, T) or None
    k_pos = pos
    if cache is not None:
        k, v, state = cache.extend(layer, k, v, state)
        k_pos = cache.keys_pos(pos)
    if queries is not None and queries < q.shape[-2]:  # rotated at their own positions, then the rows dropped
        q, pos = q[:, :, -queries:], pos[-queries:]
    if observer is None and q.shape[-2] > QUERY_BLOCK and (encoding.replaces_softmax or encoding.content_bias):
        return _blocked(encoding, q, k, v, pos, k_pos, state)
    if observer is None and not encoding.replaces_softmax:
        if cache is None and q.shape[-2] == k.shape[-2] and impl != "sdpa" and flex.runs(impl, q, pos):
            return flex.attention(q, k, v, distance_table(q, encoding, pos))
        return softmax_attention(q, k, v, encoding.scores_bias(q, k, pos, k_pos, state))
    scores = attention_logits(q, k, encoding.scores_bias(q, k, pos, k_pos, state))
    weights = normalized(encoding, scores)
    if observer is not None:
        observer(Observed(layer, q, k, scores, weights.float()))
    return weights.to(v.dtype) @ v


# Scores that no fused kernel forms (an encoding's own normalizer, or a bias that reads content: one (B, H, Tq, Tk)
# tensor per batch) are formed QUERY_BLOCK query rows at a time, each block against the keys its rows see: the
# masked half of the square is never built, and a block's tensors stay in cache. One stick-breaking layer at
# B 8, H 4, T 1024, D 32 on one CPU thread: 5.0 s whole, 1.2 s in blocks of 64 (CoPE 4.1 s -> 0.7 s, FoX 0.8 -> 0.3).
QUERY_BLOCK = 64


def _blocked(encoding, q, k, v, pos, k_pos, state):
    """attend's output for q (B, H, Tq, D) at pos (Tq,) against k, v (B, H, Tk, D) at k_pos (Tk,), Tq <= Tk, formed
    block by block: rows r0..r1 see keys 0 .. r1 + Tk - Tq - 1, as a KV-cache decode of those rows would."""
    off, outs = k.shape[-2] - q.shape[-2], []
    for r0 in range(0, q.shape[-2], QUERY_BLOCK):
        r1 = min(r0 + QUERY_BLOCK, q.shape[-2])
        qb, kb, vb = q[:, :, r0:r1], k[:, :, :off + r1], v[:, :, :off + r1]
        bias = encoding.scores_bias(qb, kb, pos[r0:r1], k_pos[:off + r1], None if state is None else state[..., :off + r1])
        if encoding.replaces_softmax:
            outs.append(normalized(encoding, attention_logits(qb, kb, bias)).to(v.dtype) @ vb)
        else:
            outs.append(softmax_attention(qb, kb, vb, bias))
    return torch.cat(outs, 2)


def normalized(encoding, scores):
    """Attention weights from scores (B, H, Tq, Tk): the encoding's own normalizer on the activations' dtype
    (sigmoid, stick-breaking), else softmax in fp32 (as SDPA accumulates)."""
    own = encoding.normalize(scores)
    return torch.softmax(scores.float(), -1) if own is None else own


# ---- FlexAttention's per-layer plan and bias table (the kernel itself is harness.flex)
def flex_unsupported(encoding):
    """Why one layer's encoding has no bias of i - j alone (SDPA then), or None when it has one."""
    if not encoding.has_bias:
        return "it adds no score bias"
    if encoding.replaces_softmax:
        return "it replaces softmax by its own normalizer (FlexAttention is a softmax kernel)"
    if encoding.content_bias:
        return "its bias reads q (content_bias), not positions alone"
    if not encoding.relative or encoding.shift_unit != 1:
        return "its bias is not a function of i - j alone (relative is False)"
    # has_bias says the class overrides bias(); a wrapper's may still return None (L2Normed around RoPE)
    device = next((t.device for t in (*encoding.parameters(), *encoding.buffers())), torch.device("cpu"))
    p = torch.zeros(1, dtype=torch.long, device=device)
    with torch.no_grad():
        if encoding.bias(torch.zeros(1, 1, 1, 1, device=device), p, p) is None:
            return "it adds no score bias"
    return None


def flex_plan(requested, encoding, n_layers):
    """[bool] per block: may it take FlexAttention? An explicit 'flex' that no block can take: ValueError."""
    if requested not in flex.IMPLS:
        raise ValueError(f"unknown model.attention_impl {requested!r}; expected one of {list(flex.IMPLS)}")
    reasons = [flex_unsupported(encoding.at(i)) for i in range(n_layers)]
    if requested == "flex" and all(reasons):
        raise ValueError(f"model.attention_impl='flex' needs a score bias of i - j alone, but encoding "
                         f"{encoding.name!r} has none ({reasons[0]}); use one of ['auto', 'sdpa']")
    return [requested != "sdpa" and r is None for r in reasons]


def distance_table(q, encoding, pos):
    """(H, T) table[h, d] = bias at distance d, read from the encoding's own hook at key pos[0]."""
    H, T = q.shape[1], q.shape[-2]
    table = encoding.bias(q, pos, pos[:1])[..., 0]  # (H|1, T) or (1, H|1, T): bias[., i, 0] = f(pos[i] - pos[0])
    if table.dim() == 3 and table.shape[0] != 1:
        raise ValueError(f"{type(encoding).__name__}.bias is per batch element {tuple(table.shape)}: set its "
                         f"content_bias = True")
    return table.reshape(-1, T).to(q.dtype).expand(H, T).contiguous()  # in q's dtype, as softmax_attention adds it


def flex_attention(q, k, v, encoding, pos, compiled=True):
    """Causal attention with encoding's bias as a distance table in FlexAttention: equal to
    softmax_attention(q, k, v, encoding.bias(q, pos, pos)) for pos = arange(T) + offset."""
    return flex.attention(q, k, v, distance_table(q, encoding, pos), compiled)
