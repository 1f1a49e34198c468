"""torchtune: RotaryPositionalEmbeddings (torchtune/modules/position_embeddings.py) and Llama3ScaledRoPE
(torchtune/models/llama3_1/_position_embeddings.py), called as its attention does: x (b, s, n_h, h_d),
input_pos (b, s)."""
from harness.conformance.libraries import lacks


def rope(q, k, positions, *, rope):
    lacks("torchtune", rope, partial=False)
    n = int(positions.max()) + 1
    if rope["rope_type"] == "default":
        from torchtune.modules import RotaryPositionalEmbeddings
        emb = RotaryPositionalEmbeddings(dim=rope["head_dim"], max_seq_len=n, base=rope["rope_theta"])
    else:
        from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE
        emb = Llama3ScaledRoPE(dim=rope["head_dim"], max_seq_len=n, base=rope["rope_theta"],
                               scale_factor=rope["factor"], low_freq_factor=rope["low_freq_factor"],
                               high_freq_factor=rope["high_freq_factor"],
                               old_context_len=rope["original_max_position_embeddings"])
    return tuple(emb(x, input_pos=positions[None]) for x in (q, k))
