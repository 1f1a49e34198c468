"""Multimodal RoPE (M-RoPE) of Qwen2-VL (Wang et al. 2024, arXiv 2409.12191, §2.1): each token has three position
ids (t, h, w) and the D/2 rotated pairs are split over the three axes; pair j turns by the id of its axis times
base^(-2j/D), the frequencies of one D-dim RoPE. Two assignments of pairs to axes, as in HF transformers:

- `sections` (Qwen2-VL, `mrope_section` in rope_scaling, e.g. [16, 24, 24] for D = 128): contiguous blocks, the
  first sections[0] pairs (the fastest frequencies) follow t, the next sections[1] h, the last sections[2] w
  (src/transformers/models/qwen2_vl/modeling_qwen2_vl.py, Qwen2VLRotaryEmbedding.recomposition_frequencies; in
  older releases apply_multimodal_rotary_pos_emb).
- `interleaved` (Qwen3-VL's MRoPE-interleave, e.g. [24, 20, 20]): pair j follows h when j % 3 == 1 and
  j < 3·sections[1], w when j % 3 == 2 and j < 3·sections[2], t otherwise, so every axis gets high and low
  frequencies (src/transformers/models/qwen3_vl/modeling_qwen3_vl.py, Qwen3VLTextRotaryEmbedding
  .recomposition_frequencies; in older releases apply_interleaved_mrope). Sections whose slices would run past the
  last pair are refused: HF silently truncates them, so the axes would not get the pairs the knob names.

Pairs are in the `half` layout (pair j = features (j, j + D/2), HF's rotate_half), the table built once per forward.
Positions here are 1-D integers p shared by the batch, read as a raster of frames of height x width cells:
t = p // (height·width), h = (p // width) % height, w = p % width (harness/encodings/rope2d.py reads p as
(p // width, p % width) the same way). Qwen2-VL gives text tokens t = h = w = p (then M-RoPE is 1-D RoPE); this
harness has no text mode, every position is a raster cell.

Relative: a score depends only on (t_i - t_j, h_i - h_j, w_i - w_j). A shift of p by k·height·width changes t by
exactly k and leaves h and w unchanged (integer floor division, for any sign of k), so the logits are invariant
under whole-frame shifts: shift_unit = height·width. A shift by one row or cell is not: h and w wrap at the frame's
edge. The rotation of a key depends on its own position only, so cached keys stay valid (cacheable).
"""
import torch

from harness.encodings._base import Encoding
from harness.encodings._params import count
from harness.tasks.positions import raster
from harness.rope import frequencies, rotary_table, to_device
from harness.rope.apply import apply_rotary_qk, check_impl

LAYOUTS = ("sections", "interleaved")
# The papers' splits of D/2 = 64 pairs, scaled to head_dim/2 when `sections` is None: Qwen2-VL [16, 24, 24]
# (h and w 3/8 each), Qwen3-VL [24, 20, 20] (h and w 5/16 each); t takes the rest.
DEFAULT_SHARE = {"sections": 3 / 8, "interleaved": 5 / 16}


def default_sections(head_dim, layout):
    """The paper's split scaled to head_dim/2 pairs: [4, 6, 6] (sections) or [6, 5, 5] (interleaved) at 32."""
    spatial = int(DEFAULT_SHARE[layout] * (head_dim // 2))
    return [head_dim // 2 - 2 * spatial, spatial, spatial]


def pair_axes(sections, layout):
    """The axis (0 t, 1 h, 2 w) each of the sum(sections) pairs follows, as HF assigns them: a list of ints."""
    n = sum(sections)
    if layout == "sections":
        return [axis for axis, s in enumerate(sections) for _ in range(s)]
    # Qwen3-VL: t everywhere, then h on pairs 1, 4, ... below 3·s_h and w on pairs 2, 5, ... below 3·s_w
    return [j % 3 if j % 3 and j < 3 * sections[j % 3] else 0 for j in range(n)]


class MRoPE(Encoding):
    """Rotation by (t, h, w) of a frame raster; pairs split over the three axes (`sections` or `interleaved`)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("multi-axis rotary over a (frame, row, col) raster of p: pairs split in `sections` "
            "(Qwen2-VL) or `interleaved` (Qwen3-VL)",
            "rotate",
            "Wang et al. 2024 (HF `modeling_qwen2_vl.py`, `modeling_qwen3_vl.py`)")

    RANGES = {"height": count(1), "sections": count(0, entries="pairs per axis", null="the layout's default split")}

    relative = True
    rotary = True
    cacheable = True

    def __init__(self, *, head_dim, height=4, width=4, sections=None, layout="sections", base=10000.0,
                 impl="auto"):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"unknown mrope layout {layout!r}; expected one of {list(LAYOUTS)}")
        if head_dim % 2:
            raise ValueError(f"mrope needs an even head_dim (rotated pairs), got {head_dim}")
        if height < 1 or width < 1:
            raise ValueError(f"mrope height and width must be >= 1, got height={height}, width={width}")
        pairs = head_dim // 2
        sections = default_sections(head_dim, layout) if sections is None else sections
        ok = (isinstance(sections, (list, tuple)) and len(sections) == 3
              and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sections))
        if not ok or sum(sections) != pairs:
            raise ValueError(f"mrope sections must be 3 non-negative ints (t, h, w) summing to head_dim/2 = {pairs}, "
                             f"got {sections!r}")
        if layout == "interleaved" and (3 * sections[1] > pairs + 1 or 3 * sections[2] > pairs):
            raise ValueError(f"mrope layout 'interleaved' gives h every third pair from 1 and w from 2, so it needs "
                             f"3*sections[1] <= {pairs + 1} and 3*sections[2] <= {pairs}, got {list(sections)}")
        check_impl(impl)
        self.head_dim, self.base, self.layout, self.impl = head_dim, float(base), layout, impl
        self.height, self.width, self.sections = int(height), int(width), [int(s) for s in sections]
        self.axes = pair_axes(self.sections, layout)  # (D/2,) axis of each pair
        self.shift_unit = self.height * self.width  # a whole frame: only t changes

    def coordinates(self, pos):
        """pos (T,) int -> (3, T) int: (t, h, w) of each position in the frame raster."""
        return raster(pos, (self.height, self.width))

    def table(self, pos, dtype=torch.float32):
        """cos, sin (T, D/2): pair j's phase is coordinate axes[j] times base^(-2j/D). Made in fp32+ (no buffer a
        model-wide .to(bf16) would cast)."""
        return self.per_positions(pos, dtype, lambda: self._table(pos, dtype))

    def _table(self, pos, dtype):
        work = torch.promote_types(torch.float32, dtype)
        inv_freq = to_device(frequencies("default", self.head_dim, self.base)[0], pos.device, work)  # (D/2,)
        cos, sin = rotary_table(inv_freq, self.coordinates(pos), dtype=work)  # (3, T, D/2): every axis, every pair
        pick = torch.tensor(self.axes, device=pos.device).expand(1, pos.numel(), -1)  # (1, T, D/2)
        return cos.gather(0, pick)[0], sin.gather(0, pick)[0]

    def rotate(self, q, k, pos):
        cos, sin = self.table(pos, q.dtype)
        return apply_rotary_qk(q, k, cos, sin, "half", impl=self.impl)
