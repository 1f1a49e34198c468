"""Calling conventions: how a third-party rotation or frequency function is imported and called.

Conventions of --apply (q, k are (B=1, H=1, P, D) tensors in the case's dtype unless said otherwise):
- hf: fn(q, k, cos, sin) -> (q', k'), cos/sin (1, P, R) full width as HF builds them: cat(freqs, freqs) for
  the half layout, repeat_interleave(freqs, 2) for interleaved (HF's GLM/Cohere). A partial rotary is split
  off before the call and the rest passed through, as HF's partial models (Phi, GPT-NeoX) do it themselves.
- x_cos_sin: fn(x, cos, sin) -> x', cos/sin (P, R/2) half width (harness/rope/rotation.py); x the whole head.
- complex: Meta Llama's fn(xq, xk, freqs_cis) -> (xq', xk'), xq (1, P, 1, D), freqs_cis (P, R/2) complex64;
  pairs are (2j, 2j+1) by construction, so only the interleaved layout.
- positions: fn(q, k, positions, *, rope) -> (q', k'): the implementation builds its own table from
  positions (int64 (P,)) and rope (a dict: HF rope_parameters plus head_dim, max_position_embeddings);
  raising NotImplementedError marks a case it does not support (reported as skip).
--frequencies: a mapping rope_type -> fn, HF's (config, device, seq_len) or ours (head_dim, base, seq_len, **p).
"""
import copy
import importlib
import inspect

import torch

CONVENTIONS = ("hf", "x_cos_sin", "complex", "positions")
MIN_POSITIONAL = {"hf": 4, "x_cos_sin": 3, "complex": 3, "positions": 3}


def resolve(spec, what):
    """The object named by 'pkg.module:attr' (attr may be dotted); ValueError in one line otherwise."""
    if spec.count(":") != 1:
        raise ValueError(f"{what} {spec!r}: expected pkg.module:function")
    mod_name, attr = spec.split(":")
    try:
        obj = importlib.import_module(mod_name)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # an import error inside their package is theirs, said in one line (sys.exit too)
        raise ValueError(f"{what} {spec!r}: cannot import {mod_name}: {describe(e)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what} {spec!r}: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def describe(e):
    """An exception from code under test in one line: its type and the first line of its message."""
    if isinstance(e, SystemExit):
        return f"SystemExit({e.code!r}): it tried to end the process"
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _same(a, b):
    """a is b's value still (the snapshot b taken before the call): same type, shape, dtype and bits."""
    if torch.is_tensor(b):
        return (torch.is_tensor(a) and a.shape == b.shape and a.dtype == b.dtype
                and bool(torch.equal(torch.view_as_real(a) if a.is_complex() else a,
                                     torch.view_as_real(b) if b.is_complex() else b)))
    return type(a) is type(b) and a == b


def guarded(fn, named, mutated, **kw):
    """fn(*values of named, **kw), recording in `mutated` the names of the arguments it changed in place
    (a caller's q, k or cos/sin table changed behind its back: in a model, the next layer's input)."""
    before = [(name, a, a.clone() if torch.is_tensor(a) else copy.deepcopy(a)) for name, a in named]
    before += [(name, a, copy.deepcopy(a)) for name, a in kw.items()]
    try:
        return fn(*(a for _, a in named), **kw)
    finally:
        mutated += [name for name, a, b in before if not _same(a, b) and name not in mutated]


def check_signature(fn, convention, spec):
    """ValueError in one line when fn cannot take the convention's positional arguments."""
    if not callable(fn):
        raise ValueError(f"--apply {spec!r} is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: let the first call decide
    n = MIN_POSITIONAL[convention]
    try:
        sig.bind(*range(n), **({"rope": {}} if convention == "positions" else {}))
    except TypeError as e:
        raise ValueError(f"--apply {spec!r} has signature {sig}, which cannot take the {convention!r} convention "
                         f"({n} positional arguments{', rope=' if convention == 'positions' else ''}): {e}") from None


def _full_width(t, layout):
    return torch.cat((t, t), -1) if layout == "half" else t.repeat_interleave(2, -1)


def _split(x, r):
    return x[..., :r], x[..., r:]


def call(fn, convention, q, k, cos, sin, positions, rope, layout, mutated=None):
    """(q', k') from fn under the convention; cos, sin (P, R/2) fp64 of the case (unused by `positions`).
    `mutated` (a list) collects the names of the arguments fn changed in place."""
    mutated = [] if mutated is None else mutated
    dtype, r = q.dtype, 2 * cos.shape[-1]
    if convention == "positions":
        return guarded(fn, [("q", q), ("k", k), ("positions", positions)], mutated, rope=rope)
    if convention == "x_cos_sin":
        c, s = cos.to(dtype), sin.to(dtype)
        return (guarded(fn, [("q", q), ("cos", c), ("sin", s)], mutated),
                guarded(fn, [("k", k), ("cos", c), ("sin", s)], mutated))
    (qr, qp), (kr, kp) = _split(q, r), _split(k, r)
    if convention == "hf":
        c, s = _full_width(cos, layout).to(dtype)[None], _full_width(sin, layout).to(dtype)[None]  # (1, P, R)
        q2, k2 = guarded(fn, [("q", qr), ("k", kr), ("cos", c), ("sin", s)], mutated)
    else:  # complex: Meta's (B, T, H, D) layout and complex64 freqs_cis (precompute_freqs_cis holds fp32)
        cis = torch.complex(cos.float(), sin.float())
        q2, k2 = guarded(fn, [("q", qr.transpose(1, 2)), ("k", kr.transpose(1, 2)), ("freqs_cis", cis)], mutated)
        q2, k2 = q2.transpose(1, 2), k2.transpose(1, 2)
    return torch.cat((q2, qp), -1), torch.cat((k2, kp), -1)


def hf_config(rope):
    """A transformers LlamaConfig carrying the case (v5 rope_parameters)."""
    from transformers import LlamaConfig
    params = {n: v for n, v in rope.items() if n not in ("head_dim", "max_position_embeddings")}
    return LlamaConfig(head_dim=rope["head_dim"], hidden_size=rope["head_dim"] * 2, num_attention_heads=2,
                       num_key_value_heads=2, max_position_embeddings=rope["max_position_embeddings"],
                       rope_parameters=params)


def frequencies(fn, case, rope):
    """(inv_freq fp64, attention_factor) from a provider's frequency function, HF's or ours."""
    first = next(iter(inspect.signature(fn).parameters), None)
    if first == "config":
        inv, att = fn(hf_config(rope), None, seq_len=case["seq_len"])
    else:
        kw = copy.deepcopy(case["params"])  # its own lists: a provider that edits them cannot edit the case
        if case["partial_rotary_factor"] != 1.0:
            kw["partial_rotary_factor"] = case["partial_rotary_factor"]
        inv, att = fn(case["head_dim"], case["base"], case["seq_len"], **kw)
    return torch.as_tensor(inv).double().flatten(), float(att)


# ---- adapters for installed libraries, usable as --apply ...:name --convention positions ----

def hf_llama(q, k, positions, *, rope):
    """HF transformers' whole Llama path: LlamaRotaryEmbedding (its own ROPE_INIT_FUNCTIONS, dynamic update,
    attention_scaling) then apply_rotary_pos_emb; a partial rotary split off as HF's partial models do.
    Llama's own default frequencies ignore partial_rotary_factor (no Llama is partial), so a partial default
    case takes GPTNeoXRotaryEmbedding, whose default honours it (GPT-NeoX and Pythia are partial)."""
    from transformers import GPTNeoXConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    if rope["rope_type"] not in ROPE_INIT_FUNCTIONS and rope["rope_type"] != "default":
        raise NotImplementedError(f"transformers has no rope_type {rope['rope_type']!r}")
    if rope["rope_type"] == "default" and rope.get("partial_rotary_factor", 1.0) != 1.0:
        params = {n: v for n, v in rope.items() if n not in ("head_dim", "max_position_embeddings")}
        emb = GPTNeoXRotaryEmbedding(GPTNeoXConfig(
            hidden_size=2 * rope["head_dim"], num_attention_heads=2, rope_parameters=params,
            max_position_embeddings=rope["max_position_embeddings"]))
    else:
        emb = LlamaRotaryEmbedding(hf_config(rope))
    cos, sin = emb(q, positions[None])  # (1, P, R) in q's dtype, attention_scaling applied
    r = cos.shape[-1]
    q2, k2 = apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
    return torch.cat((q2, q[..., r:]), -1), torch.cat((k2, k[..., r:]), -1)


def rotary_embedding_torch(q, k, positions, *, rope):
    """lucidrains' rotary-embedding-torch: RotaryEmbedding(dim=R, theta=base).rotate_queries_or_keys at
    offset p, one position at a time (it builds positions as arange(offset, offset+T) itself). Interleaved
    pairs, plain RoPE only (its interpolate_factor is PI, not exercised here)."""
    from rotary_embedding_torch import RotaryEmbedding
    if rope["rope_type"] != "default":
        raise NotImplementedError(f"rotary-embedding-torch has no rope_type {rope['rope_type']!r}")
    r = int(rope["head_dim"] * rope.get("partial_rotary_factor", 1.0))
    emb = RotaryEmbedding(dim=r, theta=rope["rope_theta"])
    out = []
    for x in (q, k):
        rows = [emb.rotate_queries_or_keys(x[..., i:i + 1, :], offset=int(p)) for i, p in enumerate(positions)]
        out.append(torch.cat(rows, -2))
    return tuple(out)


def torchtune(q, k, positions, *, rope):
    """torchtune's RotaryPositionalEmbeddings (plain RoPE) and Llama3ScaledRoPE (llama3), called as its attention
    does: x (b, s, n_h, h_d) with input_pos (b, s). Interleaved pairs; rotates the whole head (no partial)."""
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise NotImplementedError("torchtune's RoPE rotates the whole head (no partial_rotary_factor)")
    n = int(positions.max()) + 1
    if rope["rope_type"] == "default":
        from torchtune.modules import RotaryPositionalEmbeddings
        emb = RotaryPositionalEmbeddings(dim=rope["head_dim"], max_seq_len=n, base=rope["rope_theta"])
    elif rope["rope_type"] == "llama3":
        from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE
        emb = Llama3ScaledRoPE(dim=rope["head_dim"], max_seq_len=n, base=rope["rope_theta"],
                               scale_factor=rope["factor"], low_freq_factor=rope["low_freq_factor"],
                               high_freq_factor=rope["high_freq_factor"],
                               old_context_len=rope["original_max_position_embeddings"])
    else:
        raise NotImplementedError(f"torchtune has no rope_type {rope['rope_type']!r}")
    pos = positions[None].to(q.device)  # (1, P)
    return tuple(emb(x.transpose(1, 2), input_pos=pos).transpose(1, 2) for x in (q, k))
