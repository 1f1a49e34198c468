"""mrope against HF transformers' own M-RoPE code (installed, no downloads; configs built here).

Sources: Qwen2-VL (Wang et al. 2024, arXiv 2409.12191, §2.1), huggingface/transformers
src/transformers/models/qwen2_vl/modeling_qwen2_vl.py (Qwen2VLRotaryEmbedding: cos/sin from (3, B, T) position
ids, contiguous `mrope_section`; apply_rotary_pos_emb with rotate_half) and
src/transformers/models/qwen3_vl/modeling_qwen3_vl.py (Qwen3VLTextRotaryEmbedding: MRoPE-interleave). In the
installed release (5.x) the section split that older releases did in apply_multimodal_rotary_pos_emb /
apply_interleaved_mrope is the rotary embedding's recomposition_frequencies; the rotation is the plain
apply_rotary_pos_emb. The (t, h, w) ids are derived here from the raster the encoding documents, not from it.
"""
import pytest
import torch

from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

from harness.encodings import build

HF = {"sections": (Qwen2VLTextConfig, Qwen2VLRotaryEmbedding), "interleaved": (Qwen3VLTextConfig,
                                                                                Qwen3VLTextRotaryEmbedding)}
# (head_dim, sections, layout, base): the tiny model's defaults, the registry tests' head_dim 16, and the papers'
# real splits at head_dim 128 with their bases (Qwen2-VL 1e6; 5e5 is HF's Qwen3VLTextConfig default).
CASES = [(32, [4, 6, 6], "sections", 10000.0), (16, [2, 3, 3], "sections", 10000.0),
         (128, [16, 24, 24], "sections", 1e6), (32, [6, 5, 5], "interleaved", 10000.0),
         (128, [24, 20, 20], "interleaved", 5e5), (32, [0, 8, 8], "sections", 10000.0)]


def hf_rotary(head_dim, sections, layout, base):
    config_cls, rotary_cls = HF[layout]
    rope = {"rope_type": "default", "rope_theta": base, "mrope_section": list(sections)}
    if layout == "interleaved":
        rope["mrope_interleaved"] = True
    config = config_cls(hidden_size=4 * head_dim, num_attention_heads=4, num_key_value_heads=4, head_dim=head_dim,
                        rope_parameters=rope)
    return rotary_cls(config)


def raster_ids(pos, height, width):
    """(3, 1, T) position ids (t, h, w) for HF: frames of height x width cells in raster order."""
    frame, cell = divmod_floor(pos, height * width)
    row, col = divmod_floor(cell, width)
    return torch.stack((frame, row, col))[:, None, :]


def divmod_floor(a, b):
    q = torch.div(a, b, rounding_mode="floor")
    return q, a - q * b


def qk(T, D, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, T, D, generator=g, dtype=dtype), torch.randn(2, 3, T, D, generator=g, dtype=dtype)


@pytest.mark.parametrize("D, sections, layout, base", CASES)
@pytest.mark.parametrize("height, width", [(4, 4), (3, 5)])
def test_mrope_equals_hf_recomposition_in_fp64(D, sections, layout, base, height, width):
    # HF's forward holds the phase in fp32 (`.float()`), so here its own inv_freq buffer and its own
    # recomposition_frequencies (the section / interleave split) run on fp64 phases, and HF's
    # apply_rotary_pos_emb rotates in fp64. Ours takes fp64 q, k and builds its table in fp64 from the same fp32
    # inv_freq values: both sides are the same fp64 products and sums up to order, |q| < 8, so 1e-12 bounds it.
    rot = hf_rotary(D, sections, layout, base)
    pos = torch.arange(-2 * height * width + 7, 5 * height * width + 10)  # negative ids too: a floor raster
    ids = raster_ids(pos, height, width)
    freqs = ids[..., None].double() * rot.inv_freq.double()  # (3, 1, T, D/2)
    cos = rot.recomposition_frequencies(freqs.cos().clone())  # (1, T, D): [split, split] for rotate_half
    sin = rot.recomposition_frequencies(freqs.sin().clone())
    q, k = qk(pos.numel(), D, torch.float64)
    ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)  # unsqueeze_dim=1: (1, 1, T, D) over (B, H, T, D)
    enc = build("mrope", head_dim=D, sections=sections, layout=layout, base=base, height=height, width=width,
                impl="eager")
    got_q, got_k = enc.rotate(q, k, pos)
    torch.testing.assert_close(got_q, ref_q, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_k, ref_k, rtol=0, atol=1e-12)


@pytest.mark.parametrize("impl", ["eager", "auto"])
@pytest.mark.parametrize("D, sections, layout, base", CASES)
def test_mrope_equals_hf_rotary_embedding_forward_in_fp32(D, sections, layout, base, impl):
    # HF end to end: Qwen*RotaryEmbedding.forward given (3, B, T) ids -> cos, sin (B, T, D) in fp32, then
    # apply_rotary_pos_emb in fp32. Ours in fp32: the same fp32 inv_freq and fp32 phase p * inv_freq, the same
    # torch cos/sin, so the tables agree bit for bit; the rotation q*cos + rotate_half(q)*sin rounds two products
    # and a sum (a fused kernel may use FMA), <= 1.5 ulp of max|q| apart: atol 2^-21 * max|q| (= 3 ulp).
    rot = hf_rotary(D, sections, layout, base)
    pos = torch.arange(0, 150)
    q, k = qk(pos.numel(), D, torch.float32, seed=1)
    cos, sin = rot(q, raster_ids(pos, 4, 4))
    ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)
    enc = build("mrope", head_dim=D, sections=sections, layout=layout, base=base, impl=impl)
    got_q, got_k = enc.rotate(q, k, pos)
    atol = 2.0 ** -21 * float(torch.cat((q, k)).abs().max())
    torch.testing.assert_close(got_q, ref_q, rtol=0, atol=atol)
    torch.testing.assert_close(got_k, ref_k, rtol=0, atol=atol)


def test_qwen3_interleave_gives_each_axis_the_pairs_its_section_names():
    # Qwen3-VL's split read off HF's own recomposition: put the axis number in as the "frequency" of every pair
    rot = hf_rotary(128, [24, 20, 20], "interleaved", 5e5)
    marks = torch.arange(3.0)[:, None, None, None].expand(3, 1, 1, 64).clone()  # (3, B, T, D/2): axis a -> a
    axes = rot.recomposition_frequencies(marks)[0, 0, :64].long()
    assert axes.bincount(minlength=3).tolist() == [24, 20, 20]
    assert build("mrope", head_dim=128, sections=[24, 20, 20], layout="interleaved").axes == axes.tolist()


def test_whole_frame_shift_is_relative_and_a_row_shift_is_not():
    # shift_unit = height * width: p + k*H*W has t + k and the same (h, w) exactly; p + width moves h, which
    # wraps at the frame's bottom edge, so (h_i - h_j) changes for pairs across it
    enc = build("mrope", head_dim=32, height=4, width=4).double()
    assert enc.shift_unit == 16
    q, k = qk(48, 32, torch.float64)

    def scores(pos):
        rq, rk = enc.rotate(q, k, pos)
        return rq @ rk.transpose(-1, -2)

    base = scores(torch.arange(48))
    for shift in (16, -32, 16 * 1001):
        torch.testing.assert_close(scores(torch.arange(48) + shift), base, rtol=0, atol=1e-9)
    assert (scores(torch.arange(48) + 4) - base).abs().max() > 1e-2


@pytest.mark.parametrize("kw, msg", [
    (dict(sections=[4, 6]), r"^mrope sections must be 3 non-negative ints \(t, h, w\) summing to head_dim/2 = 16, "
                            r"got \[4, 6\]$"),
    (dict(sections=[4, 6, 7]), r"summing to head_dim/2 = 16, got \[4, 6, 7\]$"),
    (dict(sections=[-1, 9, 8]), r"got \[-1, 9, 8\]$"),
    (dict(sections=[4, 6, 6], layout="interleaved"), r"needs 3\*sections\[1\] <= 17 and 3\*sections\[2\] <= 16"),
    (dict(layout="contiguous"), r"expected one of \['sections', 'interleaved'\]$"),
    (dict(width=0), r"height and width must be >= 1"),
])
def test_bad_knobs_fail_in_one_line(kw, msg):
    with pytest.raises(ValueError, match=msg):
        build("mrope", head_dim=32, **kw)
