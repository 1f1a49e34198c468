"""HF transformers through its own rotary classes (transformers/models/*/modeling_*.py, modeling_rope_utils.py)."""
import torch

from harness.conformance.libraries import lacks, rotary_dim, split


def _params(rope):
    return {n: v for n, v in rope.items() if n not in ("head_dim", "max_position_embeddings")}


def _rotary(config, rotary, q, positions, rope, **extra):
    """A model's own rotary class on a two-head config of the case (rope_parameters plus `extra`), called as its
    model calls it: rotary(x, position_ids) -> its cos, sin (or freqs_cis) at the positions."""
    cfg = config(hidden_size=2 * rope["head_dim"], head_dim=rope["head_dim"], num_attention_heads=2,
                 num_key_value_heads=2, rope_parameters={**_params(rope), **extra},
                 max_position_embeddings=rope["max_position_embeddings"])
    return rotary(cfg)(q, positions[None])


class Llama(torch.nn.Module):
    """LlamaRotaryEmbedding (its ROPE_INIT_FUNCTIONS, dynamic update, attention_scaling) as a submodule, so that
    `.half()` / `.to(torch.bfloat16)` reach its buffers (inv_freq, original_inv_freq) as a model's cast does;
    forward(q, k, positions) -> (q', k') then apply_rotary_pos_emb, q, k (1, H, P, D). A partial rotary is split
    off as HF's partial models do. Llama's own default frequencies ignore partial_rotary_factor (no Llama is
    partial), so a partial default case takes GPTNeoXRotaryEmbedding, whose default honours it (GPT-NeoX and
    Pythia are partial)."""

    def __init__(self, rope):
        from transformers import GPTNeoXConfig, LlamaConfig
        from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        super().__init__()
        lacks("transformers", rope)
        shape = dict(hidden_size=2 * rope["head_dim"], num_attention_heads=2, rope_parameters=_params(rope),
                     max_position_embeddings=rope["max_position_embeddings"])
        if rope["rope_type"] == "default" and rope.get("partial_rotary_factor", 1.0) != 1.0:
            self.emb = GPTNeoXRotaryEmbedding(GPTNeoXConfig(**shape))
        else:
            self.emb = LlamaRotaryEmbedding(LlamaConfig(head_dim=rope["head_dim"], num_key_value_heads=2, **shape))

    def forward(self, q, k, positions):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        cos, sin = self.emb(q, positions[None])  # (1, P, R) in q's dtype, attention_scaling applied
        r = cos.shape[-1]
        q2, k2 = apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
        return torch.cat((q2, q[..., r:]), -1), torch.cat((k2, k[..., r:]), -1)


def build_llama(rope):
    """The usage cases' hook (Library.build): the module a model holds, to be cast and called again."""
    return Llama(rope)


def llama(q, k, positions, *, rope):
    """A fresh Llama(rope) per call (class Llama): the golden cases' adapter."""
    return Llama(rope)(q, k, positions)


def deepseek_v3(q, k, positions, *, rope):
    """DeepseekV3RotaryEmbedding over qk_rope_head_dim = R, then apply_rotary_pos_emb_interleave on the rope part
    (modeling_deepseek_v3.py: q_pe, k_pe). Its output pairs come back in the half basis: judged on logits."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (DeepseekV3RotaryEmbedding,
                                                                       apply_rotary_pos_emb_interleave)
    lacks("transformers-deepseek-v3", rope)
    r = rotary_dim(rope)
    params = {n: v for n, v in _params(rope).items() if n != "partial_rotary_factor"}
    cfg = DeepseekV3Config(qk_rope_head_dim=r, qk_nope_head_dim=rope["head_dim"] - r, hidden_size=64,
                           num_attention_heads=2, num_key_value_heads=2, rope_parameters=params,
                           max_position_embeddings=rope["max_position_embeddings"])
    cos, sin = DeepseekV3RotaryEmbedding(cfg)(q, positions[None])
    q2, k2 = apply_rotary_pos_emb_interleave(q[..., :r], k[..., :r], cos, sin)
    return torch.cat((q2, q[..., r:]), -1), torch.cat((k2, k[..., r:]), -1)


def gptj(q, k, positions, *, rope):
    """GPT-J (modeling_gptj.py) as GPTJAttention.forward rotates: the sin | cos table of create_sinusoidal_positions
    (base 10000 fixed, fp32) gathered at position_ids and cast to the activations' dtype, then
    apply_rotary_pos_emb (rotate_every_two: interleaved pairs) on the first rotary_dim features of q, k
    (b, s, h, d)."""
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb, create_sinusoidal_positions
    lacks("transformers-gptj", rope)
    if rope["rope_theta"] != 10000.0:
        raise NotImplementedError(f"transformers-gptj has base 10000 only (create_sinusoidal_positions); got "
                                  f"{rope['rope_theta']:g}")
    r, ids = rotary_dim(rope), positions[None]
    table = create_sinusoidal_positions(int(positions.max()) + 1, r)[None]  # (1, P, r): sin | cos
    sincos = torch.gather(table, 1, ids.unsqueeze(-1).repeat(1, 1, table.shape[-1])).to(q.dtype)
    sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
    return tuple(split(lambda x: apply_rotary_pos_emb(x, sin, cos), x, r) for x in (q, k))


def cohere(q, k, positions, *, rope):
    """Cohere (modeling_cohere.py): CohereRotaryEmbedding (its default, else ROPE_INIT_FUNCTIONS; the angles
    repeat_interleave'd, cos and sin cast to the activations' dtype) then apply_rotary_pos_emb, which rotates
    interleaved pairs in fp32 and casts back. No partial rotary (its default rotates the whole head)."""
    from transformers import CohereConfig
    from transformers.models.cohere.modeling_cohere import CohereRotaryEmbedding, apply_rotary_pos_emb
    lacks("transformers-cohere", rope, partial=False)
    cos, sin = _rotary(CohereConfig, CohereRotaryEmbedding, q, positions, rope)  # (1, P, D) in q's dtype
    return apply_rotary_pos_emb(q, k, cos, sin)


def glm(q, k, positions, *, rope):
    """GLM (modeling_glm.py): GlmRotaryEmbedding (cos, sin over the rotary width, partial_rotary_factor honoured)
    then apply_rotary_pos_emb, which takes the first half of cos and sin, repeat_interleaves it and rotates
    interleaved pairs of the first R features (ChatGLM's convention), passing the rest through."""
    from transformers import GlmConfig
    from transformers.models.glm.modeling_glm import GlmRotaryEmbedding, apply_rotary_pos_emb
    lacks("transformers-glm", rope)
    cos, sin = _rotary(GlmConfig, GlmRotaryEmbedding, q, positions, rope)  # (1, P, R) in q's dtype
    return apply_rotary_pos_emb(q, k, cos, sin)


def llama4(q, k, positions, *, rope):
    """Llama 4 (modeling_llama4.py): Llama4TextRotaryEmbedding's complex freqs_cis (torch.polar, complex64, times
    attention_scaling), then apply_rotary_emb: q and k (b, s, h, d) in fp32 as complex pairs (2j, 2j + 1), cast
    back. No partial rotary (the complex product takes the whole head)."""
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextRotaryEmbedding, apply_rotary_emb
    lacks("transformers-llama4", rope, partial=False)
    freqs_cis = _rotary(Llama4TextConfig, Llama4TextRotaryEmbedding, q, positions, rope)  # (1, P, D/2) complex64
    return apply_rotary_emb(q, k, freqs_cis)


def qwen2_vl(q, k, positions, *, rope):
    """Qwen2-VL's text path (modeling_qwen2_vl.py): Qwen2VLRotaryEmbedding with M-RoPE sections (the temporal, height
    and width position ids, all the token's index for text) recomposed by mrope_section, then Llama's
    apply_rotary_pos_emb. For text M-RoPE must equal 1-D RoPE. Sections in Qwen2-VL's 16 : 24 : 24 proportion of
    D/2; no partial rotary (the sections cover the whole head)."""
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding, apply_rotary_pos_emb
    lacks("transformers-qwen2-vl", rope, partial=False)
    half = rope["head_dim"] // 2
    sections = [half // 4, 3 * half // 8, half - half // 4 - 3 * half // 8]  # 16, 24, 24 at head_dim 128
    cos, sin = _rotary(Qwen2VLTextConfig, Qwen2VLRotaryEmbedding, q, positions, rope, mrope_section=sections)
    return apply_rotary_pos_emb(q, k, cos, sin)


def gpt_oss(q, k, positions, *, rope):
    """GPT-OSS (modeling_gpt_oss.py): GptOssRotaryEmbedding (cos and sin of width D/2, not repeated) then
    apply_rotary_pos_emb, whose _apply_rotary_emb chunks x into halves: half pairs, in the activations' dtype. (Its
    hub kernel replaces the apply only where the `kernels` package is enabled; the model's own code runs here.) No
    partial rotary (the halves are of the whole head)."""
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding, apply_rotary_pos_emb
    lacks("transformers-gpt-oss", rope, partial=False)
    cos, sin = _rotary(GptOssConfig, GptOssRotaryEmbedding, q, positions, rope)  # (1, P, D/2) in q's dtype
    return apply_rotary_pos_emb(q, k, cos, sin)
