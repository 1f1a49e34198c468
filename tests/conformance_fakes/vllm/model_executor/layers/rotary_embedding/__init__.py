"""vllm/model_executor/layers/rotary_embedding get_rope(head_size, max_position, is_neox_style, rope_parameters)
-> layer(positions, query, key) on (tokens, heads * head_size): a cos/sin table over max_position rows gathered at
the positions, neox (half) pairs, the first int(head_size * partial_rotary_factor) features. The fake has default
and linear (positions / factor) only; _ROPE_DICT is get_rope's memo."""
import torch
from _rot import inv_freq, rotate

_ROPE_DICT = {}


class _Rope(torch.nn.Module):
    def __init__(self, head_size, rotary_dim, max_position, base, factor):
        super().__init__()
        self.head_size = head_size
        self.table = torch.outer(torch.arange(max_position).float() / factor, inv_freq(rotary_dim, base))

    def forward(self, positions, query, key):
        ang = self.table[positions][:, None]
        ang = torch.cat((ang, ang), -1)
        return tuple(rotate(x.view(len(positions), -1, self.head_size), ang).flatten(-2) for x in (query, key))


def get_rope(head_size, max_position, is_neox_style=True, rope_parameters=None, dtype=None):
    p = rope_parameters or {}
    kind = p.get("rope_type", "default")
    if kind not in ("default", "linear") or not is_neox_style:
        raise NotImplementedError(f"the fake has no {kind}")
    return _Rope(head_size, int(head_size * p.get("partial_rotary_factor", 1.0)), max_position,
                 p.get("rope_theta", 10000), p["factor"] if kind == "linear" else 1.0)
