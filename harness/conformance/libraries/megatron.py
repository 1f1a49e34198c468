"""megatron-core, its pure-PyTorch path (megatron/core/models/common/embeddings/rotary_pos_embedding.py,
yarn_rotary_pos_embedding.py, rope_utils.py _apply_rotary_pos_emb_bshd): the embedding for max_seq_len
positions, gathered at the positions, applied to t [s, b, h, d]. Its get_emb moves the frequencies to
torch.cuda.current_device() at first use; without CUDA the adapter makes that device the CPU while megatron builds
its tables (cpu_device), then puts torch.cuda.current_device back."""
import contextlib

from harness.conformance.libraries import lacks, rotary_dim


@contextlib.contextmanager
def cpu_device():
    """torch.cuda.current_device() answers "cpu" inside the block where there is no CUDA (megatron's get_emb calls it
    to place the frequencies; on a CPU machine it raises), and is restored on the way out, exception or not."""
    import torch
    if torch.cuda.is_available():
        yield
        return
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: "cpu"
    try:
        yield
    finally:
        torch.cuda.current_device = saved


def apply(t, freqs):
    """The angles convention: _apply_rotary_pos_emb_bshd(t, freqs) with freqs [s, 1, 1, R] (half pairs)."""
    from megatron.core.models.common.embeddings.rope_utils import _apply_rotary_pos_emb_bshd
    return _apply_rotary_pos_emb_bshd(t, freqs)


def rope(q, k, positions, *, rope):
    from megatron.core.models.common.embeddings.rope_utils import _apply_rotary_pos_emb_bshd
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
    from megatron.core.models.common.embeddings.yarn_rotary_pos_embedding import YarnRotaryEmbedding
    lacks("megatron-core", rope)
    kind, n, mscale = rope["rope_type"], int(positions.max()) + 1, 1.0
    common = dict(kv_channels=rope["head_dim"], rotary_percent=rotary_dim(rope) / rope["head_dim"],
                  rotary_base=rope["rope_theta"], use_cpu_initialization=True)
    if kind == "llama3" and (rope["low_freq_factor"], rope["high_freq_factor"],
                             rope["original_max_position_embeddings"]) != (1.0, 4.0, 8192):
        raise NotImplementedError("megatron-core's llama3 scaling fixes low/high freq factor 1/4 and length 8192")
    with cpu_device():
        if kind == "yarn":  # YarnRotaryEmbedding's forward returns (emb, mscale); mscale 1, all_dim 0: HF's default
            emb, mscale = YarnRotaryEmbedding(
                scaling_factor=rope["factor"], beta_fast=rope.get("beta_fast", 32.0),
                beta_slow=rope.get("beta_slow", 1.0),
                original_max_position_embeddings=rope["original_max_position_embeddings"], **common)(n)
        else:
            emb = RotaryEmbedding(seq_len_interpolation_factor=rope["factor"] if kind == "linear" else None,
                                  rope_scaling=kind == "llama3", rope_scaling_factor=rope.get("factor", 8.0),
                                  **common)(n)  # [n, 1, 1, R]
    freqs = emb[positions]
    return tuple(_apply_rotary_pos_emb_bshd(x, freqs, mscale=mscale) for x in (q, k))
