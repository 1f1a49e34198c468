"""Ready adapters for RoPE libraries: `python -m harness.conformance --library NAME` (`--library list`).

One module per library, each a few lines that call the library as its own models do, importing it only when a
case runs. An entry says which rope_types and options the library has; a case it lacks is a skip
(NotImplementedError), never a FAIL. `install` names why a library cannot be installed here, where it cannot.
Sources read for each adapter are cited in its module.
"""
import dataclasses
import importlib
import importlib.metadata

import torch

from harness.conformance.cases import ROPE_TYPES


@dataclasses.dataclass(frozen=True)
class Library:
    """One adapter: the library's pip name and import, the adapter, how it is called, what it has. build
    (optional, "pkg.module:fn"): fn(rope) -> the library's torch.nn.Module(s) inside one module whose
    forward(q, k, positions) -> (q', k') is called as `apply` is (its calling, the positions convention), for the
    usage cases (usage.py): a module built once, cast (.half(), .to(torch.bfloat16)), kept and called again."""
    name: str
    dist: str
    module: str
    apply: str
    calling: dict
    rope_types: tuple
    options: str
    install: str = ""
    build: str = ""


_A = "harness.conformance.libraries."
HF_TYPES = tuple(t for t in ROPE_TYPES if t != "ntk")  # HF's ROPE_INIT_FUNCTIONS: every type but a static ntk
_ENTRIES = (
    Library("transformers", "transformers", "transformers", _A + "transformers:llama", {"convention": "positions"},
            HF_TYPES,
            "LlamaRotaryEmbedding (every rope_type of ROPE_INIT_FUNCTIONS), GPTNeoXRotaryEmbedding for a partial "
            "default; half pairs; no static ntk", build=_A + "transformers:build_llama"),
    Library("transformers-deepseek-v3", "transformers", "transformers", _A + "transformers:deepseek_v3",
            {"convention": "positions", "layout": "interleaved", "compare": "logits"},
            ("default", "linear", "dynamic", "yarn", "llama3", "longrope"),
            "DeepseekV3RotaryEmbedding + apply_rotary_pos_emb_interleave: interleaved pairs returned in the half "
            "basis (judged on logits); rotates the whole qk_rope_head_dim (partial: the rope part only)"),
    Library("transformers-gptj", "transformers", "transformers", _A + "transformers:gptj",
            {"convention": "positions", "layout": "interleaved", "qk_layout": "bshd"}, ("default",),
            "GPT-J's create_sinusoidal_positions (base 10000 only) + apply_rotary_pos_emb (rotate_every_two): "
            "interleaved pairs, the table in the activations' dtype; partial via rotary_dim"),
    Library("transformers-cohere", "transformers", "transformers", _A + "transformers:cohere",
            {"convention": "positions", "layout": "interleaved"},
            HF_TYPES,
            "CohereRotaryEmbedding (every rope_type of ROPE_INIT_FUNCTIONS) + apply_rotary_pos_emb: interleaved "
            "pairs, table in the activations' dtype, rotation in fp32; no partial rotary"),
    Library("transformers-glm", "transformers", "transformers", _A + "transformers:glm",
            {"convention": "positions", "layout": "interleaved"},
            HF_TYPES,
            "GlmRotaryEmbedding + apply_rotary_pos_emb: the first half of cos and sin repeat_interleaved, interleaved "
            "pairs of the first R features (ChatGLM's), the rest passed through; partial_rotary_factor honoured"),
    Library("transformers-llama4", "transformers", "transformers", _A + "transformers:llama4",
            {"convention": "positions", "layout": "interleaved", "qk_layout": "bshd"},
            HF_TYPES,
            "Llama4TextRotaryEmbedding (complex freqs_cis) + apply_rotary_emb: complex pairs in fp32, interleaved; "
            "no partial rotary"),
    Library("transformers-qwen2-vl", "transformers", "transformers", _A + "transformers:qwen2_vl",
            {"convention": "positions"}, HF_TYPES,
            "Qwen2VLRotaryEmbedding (M-RoPE: temporal, height, width ids recomposed by mrope_section; for text all "
            "equal to the index) + apply_rotary_pos_emb: half pairs; no partial rotary"),
    Library("transformers-gpt-oss", "transformers", "transformers", _A + "transformers:gpt_oss",
            {"convention": "positions"}, HF_TYPES,
            "GptOssRotaryEmbedding (cos, sin of width D/2) + apply_rotary_pos_emb (x chunked into halves): half "
            "pairs; no partial rotary"),
    Library("torchtune", "torchtune", "torchtune", _A + "torchtune:rope",
            {"convention": "positions", "layout": "interleaved", "qk_layout": "bshd"}, ("default", "llama3"),
            "RotaryPositionalEmbeddings, Llama3ScaledRoPE; interleaved pairs; no partial rotary",
            build=_A + "torchtune:build"),
    Library("litgpt", "litgpt", "litgpt.model", _A + "litgpt:rope", {"convention": "positions"},
            ("default", "linear", "yarn", "llama3"),
            "build_rope_cache (condense_ratio, extra_config for llama3 / yarn) + apply_rope; half pairs; partial "
            "via rotary_percentage"),
    Library("megatron-core", "megatron-core", "megatron.core.models.common.embeddings.rope_utils",
            _A + "megatron:rope", {"convention": "positions", "qk_layout": "sbhd"}, ("default", "linear", "llama3",
                                                                                     "yarn"),
            "RotaryEmbedding (seq_len_interpolation_factor, rope_scaling), YarnRotaryEmbedding, then the "
            "pure-PyTorch _apply_rotary_pos_emb_bshd on [s, b, h, d]; half pairs (its rotary_interleaved is not "
            "checked); partial via rotary_percent"),
    Library("megatron-core-apply", "megatron-core", "megatron.core.models.common.embeddings.rope_utils",
            _A + "megatron:apply", {"convention": "angles", "qk_layout": "sbhd"}, ROPE_TYPES,
            "_apply_rotary_pos_emb_bshd(t, freqs) alone: full-width angles [s, 1, 1, R], any table"),
    Library("liger-kernel", "liger-kernel", "liger_kernel", _A + "liger:apply", {"convention": "hf"}, ROPE_TYPES,
            "liger_rotary_pos_emb, a Triton kernel with HF's signature (q, k, cos, sin): any table; without CUDA under "
            "Triton's CPU interpreter (TRITON_INTERPRET=1), where bf16 is a skip (the interpreter has none)"),
    Library("local-attention", "local-attention", "local_attention", _A + "local_attention:rope",
            {"convention": "positions"}, ("default",),
            "SinusoidalEmbeddings (a table over 0..n-1, fp32) + apply_rotary_pos_emb: half pairs, the whole head; "
            "no scaling types, no partial rotary"),
    Library("x-transformers", "x-transformers", "x_transformers", _A + "x_transformers:rope",
            {"convention": "positions", "layout": "interleaved"}, ("default", "linear", "ntk"),
            "RotaryEmbedding(interpolation_factor, base_rescale_factor) + apply_rotary_pos_emb; interleaved pairs; "
            "partial by the angles' width", build=_A + "x_transformers:build"),
    Library("rotary-embedding-torch", "rotary-embedding-torch", "rotary_embedding_torch",
            _A + "rotary_embedding_torch:rotate_queries_or_keys", {"convention": "positions", "layout": "interleaved"},
            ("default", "linear", "ntk"),
            "style 1: RotaryEmbedding.rotate_queries_or_keys(x, offset) (it builds the positions); interpolate_factor, "
            "theta_rescale_factor; interleaved; partial by dim", build=_A + "rotary_embedding_torch:build"),
    Library("rotary-embedding-torch-freqs", "rotary-embedding-torch", "rotary_embedding_torch",
            _A + "rotary_embedding_torch:freqs_then_apply", {"convention": "positions", "layout": "interleaved"},
            ("default", "linear", "ntk"), "style 2: freqs = RotaryEmbedding(positions), apply_rotary_emb(freqs, x)"),
    Library("timm", "timm", "timm.layers.pos_embed_sincos", "timm.layers.pos_embed_sincos:apply_rot_embed",
            {"convention": "x_cos_sin", "layout": "interleaved", "width": "full", "order": "sin-cos"}, ROPE_TYPES,
            "apply_rot_embed(x, sin_emb, cos_emb): sin first, full width, interleaved (its vision RoPE builds 2-D "
            "tables; the 1-D rotation is what is checked)",
            install="timm imports torchvision at import; PyPI's Linux torchvision is a CUDA build whose _C.so links "
                    "libtorch_cuda, so with this CPU torch it fails (torchvision::nms does not exist); the CPU "
                    "build is only on PyTorch's own index, which this machine cannot reach"),
    Library("keras-hub", "keras-hub", _A + "keras_hub:load", _A + "keras_hub:rope",
            {"convention": "positions", "qk_layout": "bshd"}, ("default", "linear", "ntk", "yarn"),
            "keras_hub.layers.RotaryEmbedding (torch backend): rope_type linear / yarn, and its 'dynamic' "
            "(checked as static ntk, the closest HF type); half pairs; partial by the input's width"),
    Library("llama-models", "llama-models", "llama_models.llama3.model", _A + "llama_models:rope",
            {"convention": "positions", "layout": "interleaved", "qk_layout": "bshd"}, ("default", "llama3"),
            "llama3 precompute_freqs_cis(use_scaled) + apply_rotary_emb; llama3 constants fixed (8, 1, 4, 8192); "
            "no partial"),
    Library("llama-models-apply", "llama-models", "llama_models.llama3.model",
            "llama_models.llama3.model:apply_rotary_emb", {"convention": "complex"}, ROPE_TYPES,
            "apply_rotary_emb(xq, xk, freqs_cis) alone, any table"),
    Library("mlx", "mlx", "mlx.core", _A + "mlx:rope", {"convention": "positions", "array": "mlx"},
            ("default", "linear"), "mlx.core.fast.rope(traditional=False, base, scale, offset): half pairs; partial "
                                   "by dims"),
    Library("mlx-traditional", "mlx", "mlx.core", _A + "mlx:rope_traditional",
            {"convention": "positions", "array": "mlx", "layout": "interleaved"}, ("default", "linear"),
            "mlx.core.fast.rope(traditional=True, base, scale, offset): interleaved pairs; partial by dims"),
    Library("gemma", "gemma", _A + "gemma:load", _A + "gemma:rope", {"convention": "positions", "array": "jax",
                                                           "qk_layout": "bshd"},
            ("default", "linear", "proportional"),
            "gemma.gm.math apply_rope(inputs, positions, base_frequency, scale_factor, rope_proportion): half "
            "pairs, p-RoPE by rope_proportion, no partial rotary"),
    Library("mlx-lm", "mlx-lm", "mlx_lm.models.rope_utils", _A + "mlx_lm:rope",
            {"convention": "positions", "array": "mlx"},
            HF_TYPES,
            "rope_utils.initialize_rope: nn.RoPE (default, linear), DynamicNTKScalingRoPE, Llama3RoPE, YarnRoPE, "
            "SuScaledRoPE (longrope), ProportionalRoPE, all mx.fast.rope; half pairs; partial by dims"),
    Library("mlx-lm-deepseek-v2", "mlx-lm", "mlx_lm.models.deepseek_v2", _A + "mlx_lm:deepseek_v2",
            {"convention": "positions", "array": "mlx", "layout": "interleaved"}, ("default", "yarn"),
            "deepseek_v2.DeepseekV2YarnRotaryEmbedding (its own YaRN, traditional=True): interleaved pairs over "
            "the rope part (partial: qk_rope_head_dim = R)"),
    Library("mistral-inference", "mistral-inference", "mistral_inference.rope", _A + "mistral:rope",
            {"convention": "positions", "layout": "interleaved", "qk_layout": "bshd"}, ("default",),
            "precompute_freqs_cis(head_dim, end, theta)[positions] + apply_rotary_emb on (tokens, heads, D): "
            "complex pairs in fp32, interleaved; plain RoPE only, no partial"),
    Library("mistral-inference-apply", "mistral-inference", "mistral_inference.rope",
            "mistral_inference.rope:apply_rotary_emb", {"convention": "complex"}, ROPE_TYPES,
            "apply_rotary_emb(xq, xk, freqs_cis) alone, any table"),
    Library("equinox", "equinox", "equinox", _A + "equinox:rope",
            {"convention": "positions", "array": "jax", "qk_layout": "bshd", "positions": "dense"}, ("default",),
            "eqx.nn.RotaryPositionalEmbedding(embedding_size, theta) vmapped over heads: positions 0..L-1 only "
            "(dense), half pairs; partial by embedding_size"),
    Library("olmo-core", "ai2-olmo-core", "olmo_core.nn.rope", _A + "olmo_core:rope",
            {"convention": "positions", "qk_layout": "bshd"}, ("default", "linear", "llama3", "yarn"),
            "RotaryEmbedding(head_size, theta, scaling=PI / Stepwise (llama3) / YaRN config, "
            "partial_rotary_factor) called as its attention calls it (head_first=False, start_pos); half pairs"),
    Library("olmo-core-complex", "ai2-olmo-core", "olmo_core.nn.rope", _A + "olmo_core:complex_rope",
            {"convention": "positions", "qk_layout": "bshd", "layout": "interleaved"}, ("default",),
            "ComplexRotaryEmbedding (RoPEType.complex): complex pairs, interleaved; no scaling; partial"),
    Library("vllm", "vllm", "vllm.model_executor.layers.rotary_embedding", _A + "vllm:rope",
            {"convention": "positions", "qk_layout": "bshd"}, ROPE_TYPES,
            "get_rope(head_dim, max_position, is_neox_style=True, rope_parameters) then rotary_emb(positions, q, k) "
            "on (tokens, heads * D), forward_native on CPU (VLLM_TARGET_DEVICE=cpu); every rope_type; half pairs; "
            "partial via partial_rotary_factor"),
)
LIBRARIES = {lib.name: lib for lib in _ENTRIES}


def lacks(lib, rope, partial=True):
    """Raise NotImplementedError (a skip) where library `lib` has no such rope_type, or no partial rotary."""
    have = LIBRARIES[lib].rope_types
    if rope["rope_type"] not in have:
        raise NotImplementedError(f"{lib} has no rope_type {rope['rope_type']!r} (it has {list(have)})")
    if not partial and rope["rope_type"] != "proportional" and rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise NotImplementedError(f"{lib} has no partial rotary")


def rotary_dim(rope):
    """R: the rotated features of a case (p-RoPE rotates over the whole head)."""
    if rope["rope_type"] == "proportional":
        return rope["head_dim"]
    return int(rope["head_dim"] * rope.get("partial_rotary_factor", 1.0))


def split(fn, x, r, dim=-1):
    """fn(x[..., :r]) with x[..., r:] passed through: partial rotary as the libraries' models do it."""
    return torch.cat((fn(x[..., :r]), x[..., r:]), dim)


def missing(lib):
    """Why lib cannot run here ('' when its module imports); module "pkg.mod:fn" also calls fn()."""
    mod, _, probe = lib.module.partition(":")  # "pkg.mod:fn": import, then call fn() (an adapter's own loader)
    try:
        m = importlib.import_module(mod)
        if probe:
            getattr(m, probe)()
    except Exception as e:  # an import that fails for any reason: the reason is the message
        first = (str(e).strip().splitlines() or [""])[0]
        why = f"{lib.dist} does not import ({type(e).__name__}: {first}); pip install {lib.dist}"
        return why + (f" (on this project's machines it cannot be: {lib.install})" if lib.install else "")
    return ""


def version(lib):
    try:
        return importlib.metadata.version(lib.dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def listing():
    """Every adapter: installed or why not, its rope_types and options."""
    lines = []
    for lib in LIBRARIES.values():
        why = missing(lib)
        state = f"installed ({version(lib)})" if not why else f"not here: {why}"
        lines.append(f"{lib.name}: {state}\n    rope_types {list(lib.rope_types)}; {lib.options}")
    return "\n".join(lines)
