"""torchtune: RotaryPositionalEmbeddings (torchtune/modules/position_embeddings.py) and Llama3ScaledRoPE
(torchtune/models/llama3_1/_position_embeddings.py), called as its attention does: x (b, s, n_h, h_d),
input_pos (b, s)."""
import torch

from harness.conformance.libraries import lacks


class Rope(torch.nn.Module):
    """torchtune's module over max_seq_len positions as a submodule (its theta and cache buffers follow a cast);
    forward(q, k, positions) -> (q', k'), q, k (1, P, H, D), interleaved pairs."""

    def __init__(self, rope, max_seq_len):
        super().__init__()
        lacks("torchtune", rope, partial=False)
        if rope["rope_type"] == "default":
            from torchtune.modules import RotaryPositionalEmbeddings
            self.emb = RotaryPositionalEmbeddings(dim=rope["head_dim"], max_seq_len=max_seq_len,
                                                  base=rope["rope_theta"])
        else:
            from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE
            self.emb = Llama3ScaledRoPE(dim=rope["head_dim"], max_seq_len=max_seq_len, base=rope["rope_theta"],
                                        scale_factor=rope["factor"], low_freq_factor=rope["low_freq_factor"],
                                        high_freq_factor=rope["high_freq_factor"],
                                        old_context_len=rope["original_max_position_embeddings"])

    def forward(self, q, k, positions):
        return tuple(self.emb(x, input_pos=positions[None]) for x in (q, k))


def build(rope):
    """The usage cases' hook (Library.build): a cache over max_position_embeddings positions, built once."""
    return Rope(rope, rope["max_position_embeddings"])


def rope(q, k, positions, *, rope):
    return Rope(rope, int(positions.max()) + 1)(q, k, positions)
