"""RoPE inverse frequencies, one function per rope_type, shaped like HF's ROPE_INIT_FUNCTIONS.

Each function returns ``(inv_freq, attention_factor)``: inv_freq is a float32 tensor of shape
(rotary_dim/2,), attention_factor a float that scales cos/sin (YaRN, LongRoPE; 1.0 elsewhere).
Its length decides the rotated width R = 2 * len(inv_freq) everywhere downstream (the table, every
impl): `proportional` returns head_dim/2 entries, zeros past the rotated ones, so the whole head is
paired (j, j + D/2) and a zero frequency is the identity (cos 1, sin 0).
Parameter names are HF's so an HF ``rope_scaling`` dict maps over unchanged.
"""
import inspect
import math

import torch


def _check_knobs(head_dim: int, base: float, partial_rotary_factor: float) -> None:
    """Validate base, partial_rotary_factor and head_dim, the knobs every rope_type reads."""
    if not 0 < base < float("inf"):  # NaN fails the comparison too
        raise ValueError(f"rope base must be positive and finite, got {base}")
    if not 0.0 < partial_rotary_factor <= 1.0:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {partial_rotary_factor}")
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")


def _check_common(head_dim: int, base: float, partial_rotary_factor: float) -> int:
    """Validate the shared knobs; return the rotary dimension."""
    _check_knobs(head_dim, base, partial_rotary_factor)
    dim = int(head_dim * partial_rotary_factor)
    if dim % 2 or dim == 0:
        raise ValueError(
            f"RoPE needs an even, non-zero rotary dim; head_dim {head_dim} x partial_rotary_factor "
            f"{partial_rotary_factor} = {dim}"
        )
    return dim


def _check_factor(factor: float) -> None:
    if factor < 1.0:
        raise ValueError(f"rope scaling factor must be >= 1, got {factor}")


def _base_inv_freq(dim: int, base: float) -> torch.Tensor:
    # theta_j = base^(-2j/d), j = 0..d/2-1 (RoFormer eq. 15); int64 arange then float, as HF does.
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def default(head_dim, base=10000.0, seq_len=None, *, partial_rotary_factor=1.0):
    """Plain RoPE (Su et al. 2021)."""
    dim = _check_common(head_dim, base, partial_rotary_factor)
    return _base_inv_freq(dim, base), 1.0


def linear(head_dim, base=10000.0, seq_len=None, *, factor, partial_rotary_factor=1.0):
    """Position interpolation (Chen et al. 2023): positions divided by factor."""
    _check_factor(factor)
    inv_freq, att = default(head_dim, base, partial_rotary_factor=partial_rotary_factor)
    return inv_freq / factor, att


def ntk(head_dim, base=10000.0, seq_len=None, *, factor, partial_rotary_factor=1.0):
    """Static NTK-aware scaling (bloc97 2023): base' = base * factor^(d/(d-2))."""
    _check_factor(factor)
    dim = _check_common(head_dim, base, partial_rotary_factor)
    return _base_inv_freq(dim, base * factor ** (dim / (dim - 2))), 1.0


def dynamic(head_dim, base=10000.0, seq_len=None, *, factor, original_max_position_embeddings,
            partial_rotary_factor=1.0):
    """Dynamic NTK: NTK rescale by the current length; the original frequencies at or below the trained
    length. Stateless, so it cannot keep stale frequencies after a long sequence (HF #25306)."""
    _check_factor(factor)
    dim = _check_common(head_dim, base, partial_rotary_factor)
    L = original_max_position_embeddings
    seq_len = L if seq_len is None else max(int(seq_len), L)
    base = base * ((factor * seq_len / L) - (factor - 1)) ** (dim / (dim - 2))
    return _base_inv_freq(dim, base), 1.0


def _yarn_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn(head_dim, base=10000.0, seq_len=None, *, factor, original_max_position_embeddings,
         beta_fast=32.0, beta_slow=1.0, mscale=None, mscale_all_dim=None, attention_factor=None,
         truncate=True, partial_rotary_factor=1.0):
    """YaRN (Peng et al. 2023): per-frequency blend of interpolation and extrapolation by wavelength.

    beta_fast/beta_slow count rotations over the original context: with a tiny trained length (say 64)
    the defaults 32/1 put almost every frequency in the blend ramp; pass smaller betas there."""
    _check_factor(factor)
    dim = _check_common(head_dim, base, partial_rotary_factor)
    L = original_max_position_embeddings
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)

    def correction_dim(n_rot):
        # the dimension index whose wavelength fits n_rot times into L
        return (dim * math.log(L / (n_rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_weight = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_weight) + extrapolation * extrapolation_weight
    return inv_freq, float(attention_factor)


def llama3(head_dim, base=10000.0, seq_len=None, *, factor, original_max_position_embeddings,
           low_freq_factor=1.0, high_freq_factor=4.0, partial_rotary_factor=1.0):
    """Llama 3.1: interpolate long wavelengths, keep short ones, smooth blend between."""
    _check_factor(factor)
    if high_freq_factor <= low_freq_factor:
        raise ValueError(f"llama3 needs high_freq_factor > low_freq_factor, got "
                         f"{high_freq_factor} <= {low_freq_factor}")
    inv_freq, _ = default(head_dim, base, partial_rotary_factor=partial_rotary_factor)
    L = original_max_position_embeddings
    low_freq_wavelen, high_freq_wavelen = L / low_freq_factor, L / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    out = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (L / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * out / factor + smooth * out
    is_medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, out), 1.0


def longrope(head_dim, base=10000.0, seq_len=None, *, short_factor, long_factor,
             original_max_position_embeddings, factor, attention_factor=None,
             partial_rotary_factor=1.0):
    """LongRoPE (Ding et al. 2024): searched per-frequency rescale factors, short or long by seq_len.

    factor = target context / original context; it sets the default attention_factor. Required: Phi-3's
    rope_scaling has none and HF derives it (max_position_embeddings / original, 32 for Phi-3-128k), so a
    default of 1 would silently drop the attention factor (harness.hf fills HF's value in)."""
    _check_factor(factor)
    dim = _check_common(head_dim, base, partial_rotary_factor)
    for name, f in (("short_factor", short_factor), ("long_factor", long_factor)):
        if len(f) != dim // 2:
            raise ValueError(f"longrope {name} needs {dim // 2} entries (rotary dim / 2), got {len(f)}")
    L = original_max_position_embeddings
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(L))
    ext = long_factor if (seq_len is not None and seq_len > L) else short_factor
    ext = torch.tensor(ext, dtype=torch.float32)
    inv_freq_shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext * base ** inv_freq_shape), float(attention_factor)


def proportional(head_dim, base=10000.0, seq_len=None, *, partial_rotary_factor=1.0, factor=1.0):
    """p-RoPE (Barbero et al. 2025, arXiv 2410.06205, §6): rotate only the highest p fraction of the
    frequencies, leave the lowest (semantic) ones unrotated. Gemma 4's global layers, p = 0.25.

    HF's `_compute_proportional_rope_parameters` (transformers/modeling_rope_utils.py): the exponent keeps
    the full head_dim as denominator (unlike partial rotary, which re-spaces R/2 frequencies over R), and
    inv_freq is (head_dim/2,): int(p * head_dim // 2) rotated frequencies, then zeros (identity pairs).
    factor divides every frequency (PI), as HF does; HF's default 1.0."""
    _check_knobs(head_dim, base, partial_rotary_factor)
    _check_factor(factor)
    angles = int(partial_rotary_factor * head_dim // 2)  # HF's rope_angles, floor of p*D/2 (D=64, p=0.3: 9)
    if angles == 0:
        raise ValueError(f"proportional RoPE rotates no pair: partial_rotary_factor {partial_rotary_factor} x "
                         f"head_dim {head_dim} / 2 < 1; use the `nope` encoding for no rotation")
    rotated = 1.0 / (base ** (torch.arange(0, 2 * angles, 2, dtype=torch.int64).float() / head_dim))
    inv_freq = torch.cat((rotated, torch.zeros(head_dim // 2 - angles, dtype=torch.float32)))  # (D/2,)
    return inv_freq / factor, 1.0


ROPE_INIT_FUNCTIONS = {
    "default": default,
    "linear": linear,
    "ntk": ntk,
    "dynamic": dynamic,
    "yarn": yarn,
    "llama3": llama3,
    "longrope": longrope,
    "proportional": proportional,
}


# The types whose frequencies depend on the sequence length (the others ignore seq_len).
SEQ_LEN_TYPES = ("dynamic", "longrope")


def frequencies(rope_type, head_dim, base=10000.0, seq_len=None, **params):
    """(inv_freq, attention_factor) for rope_type; params are the HF rope_scaling keys for that type."""
    if rope_type not in ROPE_INIT_FUNCTIONS:
        raise ValueError(f"unknown rope_type {rope_type!r}; expected one of {sorted(ROPE_INIT_FUNCTIONS)}")
    fn = ROPE_INIT_FUNCTIONS[rope_type]
    kw = {n: p for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(params) - set(kw))
    missing = sorted(n for n, p in kw.items() if p.default is p.empty and n not in params)
    if unknown or missing:
        what = f"does not take {unknown}" if unknown else f"needs {missing}"
        raise ValueError(f"rope_type {rope_type!r} {what}; its parameters: {sorted(kw)}")
    return fn(head_dim, base, seq_len, **params)
