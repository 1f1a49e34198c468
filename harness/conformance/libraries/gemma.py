"""Google's JAX gemma package: gemma.gm.math apply_rope(inputs [B, L, N, H], positions [B, L], *,
base_frequency, scale_factor, rope_proportion) (gemma/gm/math/_positional_embeddings.py): half pairs,
p-RoPE by rope_proportion, linear interpolation by scale_factor. The gemma package's own __init__ imports
kauldron (and with it flax, optax, tensorflow-datasets); where that fails, load() takes the module file from the
installed package, which imports only jax."""
import importlib.util

from harness.conformance.libraries import lacks

_FILE = ("gm", "math", "_positional_embeddings.py")


def load():
    """gemma's apply_rope, imported normally or from its file in the installed package."""
    try:
        from gemma.gm.math import apply_rope
        return apply_rope
    except ImportError:
        spec = importlib.util.find_spec("gemma")
        if spec is None or not spec.submodule_search_locations:
            raise
        path = __import__("pathlib").Path(spec.submodule_search_locations[0]).joinpath(*_FILE)
        mod_spec = importlib.util.spec_from_file_location("_gemma_positional_embeddings", path)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        return mod.apply_rope


def rope(q, k, positions, *, rope):
    lacks("gemma", rope, partial=False)
    apply_rope = load()
    p = rope["partial_rotary_factor"] if rope["rope_type"] == "proportional" else 1.0
    scale = rope["factor"] if rope["rope_type"] == "linear" else 1.0
    return tuple(apply_rope(x, positions[None], base_frequency=rope["rope_theta"], scale_factor=scale,
                            rope_proportion=p) for x in (q, k))
