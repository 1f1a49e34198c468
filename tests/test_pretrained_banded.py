"""harness.pretrained.banded (sliding-window attention by blocks of queries, registered through transformers'
AttentionInterface) against transformers' own eager attention, which applies the sliding-window mask of
transformers/masking_utils.py (sliding_window_overlay: kv_idx > q_idx - window) over the whole rectangle."""
import pytest
import torch

transformers = pytest.importorskip("transformers")

from harness.pretrained import banded, scoring  # noqa: E402

WINDOW = 6


def gemma3(impl):
    """A 6-layer random Gemma3ForCausalLM, 5 sliding layers (window 6) and one global, as Gemma 3 interleaves them."""
    torch.manual_seed(0)
    cfg = transformers.Gemma3TextConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        sliding_window=WINDOW, max_position_embeddings=64, attn_implementation=impl)
    return transformers.Gemma3ForCausalLM(cfg).eval()


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(banded, "BLOCK", 5)  # blocks shorter than the window and than the sequence: every edge case


def test_banded_equals_eager_sliding_attention(small_blocks):
    ref, model = gemma3("eager"), gemma3("sdpa")
    assert banded.use(model) == banded.NAME
    x = torch.randint(0, 97, (23,))
    with torch.no_grad():
        want, got = ref(x[None]).logits[0], model(x[None]).logits[0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # the window matters here: without it (every layer global) the logits differ
    flat = gemma3("eager")
    flat.config.sliding_window = 1000
    for layer in flat.model.layers:
        layer.self_attn.sliding_window = None
    with torch.no_grad():
        assert not torch.allclose(flat(x[None]).logits[0], want, atol=1e-3)


def test_banded_with_a_kv_cache_equals_the_full_forward(small_blocks):
    """A prefill of 15 tokens, then 8 more in one call (queries are the last 8 of 23 keys), then one token."""
    ref, model = gemma3("eager"), gemma3("sdpa")
    banded.use(model)
    x = torch.randint(0, 97, (24,))
    with torch.no_grad():
        want = ref(x[None]).logits[0]
        cache = transformers.DynamicCache(config=model.config)
        model(x[None, :15], past_key_values=cache, use_cache=True)
        mid = model(x[None, 15:23], past_key_values=cache, use_cache=True).logits[0]
        last = model(x[None, 23:], past_key_values=cache, use_cache=True).logits[0]
    torch.testing.assert_close(torch.cat([mid, last]), want[15:], atol=1e-5, rtol=1e-5)


def test_scoring_hidden_states_match_and_models_without_sliding_layers_keep_sdpa():
    ref, model = gemma3("sdpa"), gemma3("sdpa")
    banded.use(model)
    x = torch.randint(0, 97, (40,))
    torch.testing.assert_close(scoring.hidden(model, x), scoring.hidden(ref, x), atol=1e-5, rtol=1e-5)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        attn_implementation="sdpa"))
    assert banded.use(llama) == "sdpa"


def test_padded_input_is_refused():
    model = gemma3("sdpa")
    banded.use(model)
    q = torch.zeros(1, 4, 3, 16)
    with pytest.raises(ValueError, match="takes no attention_mask"):
        banded.banded_attention(model.model.layers[0].self_attn, q, q, q, torch.ones(1, 1, 3, 3, dtype=torch.bool))
