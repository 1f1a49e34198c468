"""Liger-Kernel's RoPE (liger_kernel/transformers/rope.py `liger_rotary_pos_emb`, dispatched to its Triton kernel,
liger_kernel/ops/rope.py): HF's apply_rotary_pos_emb signature (q, k, cos, sin), so every rope_type's table runs.
Without CUDA the kernel runs under Triton's CPU interpreter (TRITON_INTERPRET=1, which `make conformance-field` sets
on a machine without CUDA). The interpreter has no real bfloat16 (numpy has none: a kernel that doubles bf16 values
is off by about 4 there), so bf16 without CUDA is a skip that says so, not a verdict on the library."""


def apply(q, k, cos, sin):
    import torch
    if q.dtype == torch.bfloat16 and not torch.cuda.is_available():
        raise NotImplementedError("Triton's CPU interpreter has no bfloat16 (numpy has none); run bf16 on a GPU")
    from liger_kernel.transformers.rope import liger_rotary_pos_emb
    return liger_rotary_pos_emb(q, k, cos, sin)
