"""rotary_pos_embedding.py RotaryEmbedding: inv_freq over int(kv_channels * rotary_percent), forward(n) ->
emb [n, 1, 1, R] = cat(freqs, freqs); seq_len_interpolation_factor divides the positions."""
import torch
from _rot import inv_freq


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, kv_channels, rotary_percent, rotary_interleaved=False, seq_len_interpolation_factor=None,
                 rotary_base=10000, rope_scaling=False, rope_scaling_factor=8.0, use_cpu_initialization=False,
                 cp_group=None):
        super().__init__()
        if rope_scaling:
            raise NotImplementedError("the fake has no llama3 scaling")
        self.inv_freq = inv_freq(int(kv_channels * rotary_percent), rotary_base)
        self.factor = seq_len_interpolation_factor or 1.0

    def forward(self, max_seq_len, offset=0, packed_seq=False, cp_group=None):
        freqs = torch.outer(torch.arange(max_seq_len).float() / self.factor, self.inv_freq)
        return torch.cat((freqs, freqs), -1)[:, None, None, :]
