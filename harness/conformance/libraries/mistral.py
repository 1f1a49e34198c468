"""Mistral's reference inference code (mistral-inference; mistral_inference/rope.py precompute_freqs_cis(dim, end,
theta) and apply_rotary_emb(xq, xk, freqs_cis), called as transformer.py / transformer_layers.py call them):
Transformer.freqs_cis is precompute_freqs_cis(head_dim, 128_000, rope_theta) (complex64, fp32 angles), indexed by the
flattened tokens' positions, and Attention.forward rotates xq, xk of shape (tokens, heads, head_dim) as complex pairs
(2j, 2j + 1) in fp32, cast back: interleaved pairs. rope.py imports only torch (transformer_layers.py is what
imports xformers), so it is imported as is. Plain RoPE only (no scaling in its TransformerArgs), whole head.
Its model fixes end = 128_000, so positions past 127_999 do not exist there; the adapter passes end = max position
+ 1, which the function takes, so the suite's 131_071 is checked with the same maths."""
from harness.conformance.libraries import lacks


def rope(q, k, positions, *, rope):
    from mistral_inference.rope import apply_rotary_emb, precompute_freqs_cis
    lacks("mistral-inference", rope, partial=False)
    freqs_cis = precompute_freqs_cis(rope["head_dim"], int(positions.max()) + 1, rope["rope_theta"])[positions]
    q2, k2 = apply_rotary_emb(q[0], k[0], freqs_cis=freqs_cis)  # (1, P, H, D) -> the model's (tokens, H, D)
    return q2[None], k2[None]
