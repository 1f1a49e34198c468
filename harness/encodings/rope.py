"""RoPE (Su et al. 2021, arXiv 2104.09864): rotate q and k by position; any base, layout, partial
rotary, the HF rope_types for context extension (PI, NTK, dynamic NTK, YaRN, Llama 3, LongRoPE) and
p-RoPE (`proportional`, arXiv 2410.06205). The rotated width is 2 * len(inv_freq): the rope_type decides it."""
import torch

from harness.encodings._base import RotaryEncoding
from harness.rope import LAYOUTS, frequencies, rotary_table, to_device
from harness.rope.frequencies import SEQ_LEN_TYPES
from harness.rope.apply import apply_rotary_qk, check_impl


class Rope(RotaryEncoding):
    """Rotary position embedding; `scaling` holds the HF rope_scaling keys for `rope_type`."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("rotary: any base, `half`/`interleaved` layout, partial rotary, `rope_type` "
            "default/linear (PI)/ntk/dynamic/yarn/llama3/longrope/proportional (p-RoPE)",
            "rotate",
            "Su et al. 2021; HF `ROPE_INIT_FUNCTIONS`; Barbero et al. 2025")

    relative = True

    def __init__(self, *, head_dim, base=10000.0, layout="half", partial_rotary_factor=1.0,
                 rope_type="default", scaling=None, impl="auto"):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"unknown rope layout {layout!r}; expected one of {list(LAYOUTS)}")
        check_impl(impl)
        self.head_dim, self.base, self.layout, self.impl = head_dim, float(base), layout, impl
        self.partial_rotary_factor = partial_rotary_factor
        self.rope_type, self.scaling = rope_type, dict(scaling or {})
        # dynamic NTK and LongRoPE pick their frequencies from the call's longest position: keys cached at a
        # prefill were rotated with other frequencies than a full forward would use (harness/decode.py)
        self.cacheable = rope_type not in SEQ_LEN_TYPES
        Rope.frequencies(self, None)  # validate every knob now, at build time (not a subclass's override)

    def frequencies(self, seq_len):
        """(inv_freq (R/2,), attention_factor) for a sequence of seq_len positions."""
        return frequencies(self.rope_type, self.head_dim, self.base, seq_len,
                           partial_rotary_factor=self.partial_rotary_factor, **self.scaling)

    def table(self, pos, dtype=torch.float32):
        """cos, sin (T, R/2) for positions pos (T,): phase in fp32 (as HF), or fp64 for fp64 inputs."""
        return self.per_positions(pos, dtype, lambda: self._table(pos, dtype))

    def _table(self, pos, dtype):
        # seq_len only where the type depends on it: pos.max() is a device-to-host sync
        needs_len = self.rope_type in SEQ_LEN_TYPES and pos.numel()
        inv_freq, attention_factor = self.frequencies(int(pos.max()) + 1 if needs_len else None)
        work = torch.promote_types(inv_freq.dtype, dtype)
        return rotary_table(to_device(inv_freq, pos.device, work), pos, attention_factor, dtype=work)

    def rotate(self, q, k, pos):
        cos, sin = self.table(pos, q.dtype)
        # q and k in one call: one launch for both on the fused kernels (the table is read once)
        return apply_rotary_qk(q, k, cos, sin, self.layout, impl=self.impl)
