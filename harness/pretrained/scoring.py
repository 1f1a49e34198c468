"""Score long windows of a pretrained HF causal LM without a (T x vocab) logits tensor: the base model's hidden
states once, then the LM head over chunks of positions (16k x 49k fp32 logits would be 3 GB)."""
import torch
import torch.nn.functional as F

CHUNK = 1024  # positions per LM-head chunk: (1024 x 49152) fp32 logits = 192 MiB


def hidden(model, ids):
    """The final hidden states (T, C) of ids (T,) int64, positions 0..T-1, no KV cache."""
    with torch.no_grad():
        return model.model(input_ids=ids[None], use_cache=False).last_hidden_state[0]


def logits(model, h):
    """The LM head on hidden states h (t, C) -> (t, V) fp32, with the final logit soft-cap where the
    config has one (Gemma 2/3: cap * tanh(logits / cap), applied by the ForCausalLM after its lm_head)."""
    out = model.lm_head(h).float()
    cap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(out / cap) * cap if cap else out


def chunks(n, chunk=CHUNK):
    """[start, end) ranges covering 0..n in steps of chunk."""
    return [(s, min(s + chunk, n)) for s in range(0, n, chunk)]


def token_nll(model, ids, chunk=CHUNK):
    """NLL in nats (T-1,) float64 on the CPU of each next token ids[1:] given its prefix (ids on the model's
    device)."""
    with torch.no_grad():
        h = hidden(model, ids)
        out = torch.empty(ids.numel() - 1, dtype=torch.float64)
        for s, e in chunks(ids.numel() - 1, chunk):
            out[s:e] = F.cross_entropy(logits(model, h[s:e]), ids[s + 1:e + 1], reduction="none").double().cpu()
        return out


def token_kl(model, ids, h_ref, h_low, chunk=CHUNK):
    """(KL(p_ref || p_low), NLL_ref, NLL_low), each (T-1,) float64, per next-token prediction of ids (T,), from two
    forwards' hidden states (T, C) of the same weights (a RoPE swap each: harness.pretrained.rotary)."""
    with torch.no_grad():
        n = ids.numel() - 1
        kl, nll_ref, nll_low = (torch.empty(n, dtype=torch.float64) for _ in range(3))
        for s, e in chunks(n, chunk):
            a = F.log_softmax(logits(model, h_ref[s:e]), -1)  # (c, V)
            b = F.log_softmax(logits(model, h_low[s:e]), -1)
            kl[s:e] = (a.exp() * (a - b)).sum(-1).double().cpu()
            tgt = ids[s + 1:e + 1, None]
            nll_ref[s:e], nll_low[s:e] = -a.gather(1, tgt)[:, 0].double().cpu(), -b.gather(1, tgt)[:, 0].double().cpu()
        return kl, nll_ref, nll_low
