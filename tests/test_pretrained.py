"""The pretrained backend on a small random-initialised LlamaForCausalLM built from a config (no weights, no
file): the harness's RoPE swapped into the model against transformers' own forward with the same
rope_parameters, chunked scoring against the model's own loss, and the one-line refusals."""
import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers")

from harness import encodings  # noqa: E402
from harness.hf import rope_from_hf  # noqa: E402
from harness.pretrained import checkpoint, rotary, scoring, variants  # noqa: E402

TRAINED = 64  # the toy checkpoint's max_position_embeddings
# One rope_parameters dict per rope_type transformers has (transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS
# plus each model's default), keys as HF documents them (RopeParameters); longrope's factor lists need
# head_dim / 2 = 8 entries (Phi-3's config has the same shape).
HF_TYPES = {
    "default": {},
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": TRAINED},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": TRAINED},
    "longrope": {"short_factor": [1.0, 1.1, 1.2, 1.3, 1.5, 1.8, 2.0, 2.5],
                 "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0],
                 "original_max_position_embeddings": TRAINED // 2},
    "proportional": {"partial_rotary_factor": 0.5},
}


def llama(rope_type="default", **keys):
    """A 2-layer random LlamaForCausalLM (GQA 4:2, head_dim 16) with these rope_parameters, fp32, eval."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=TRAINED,
                                   rope_parameters={"rope_type": rope_type, "rope_theta": 10000.0, **keys},
                                   attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(cfg).eval()


def ids(T, seed=1):
    return torch.randint(0, 97, (T,), generator=torch.Generator().manual_seed(seed))


def harness_encoding(model):
    return encodings.build("rope", **rope_from_hf(model.config.to_dict()), impl="eager")


@pytest.mark.parametrize("rope_type", sorted(HF_TYPES))
def test_swap_equals_transformers_per_rope_type(rope_type):
    """For each HF rope_type: the model rotating with the harness's rope (frequencies, attention factor, table,
    rotation) gives transformers' own logits; 96 > 64 tokens so dynamic and longrope take their long branch.
    fp32; tolerance 1e-5 absolute on logits of size ~1 (the two paths run the same elementwise maths, so they are
    expected bit-identical or a few ulps apart, not merely close)."""
    model = llama(rope_type, **HF_TYPES[rope_type])
    x = ids(96)
    with torch.no_grad():
        want = model(x[None]).logits
        with rotary.swapped(model, harness_encoding(model), length=96):
            got = model(x[None]).logits
        again = model(x[None]).logits  # restored on exit
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert torch.equal(again, want)


@pytest.mark.parametrize("extension", sorted(variants.EXTENSIONS))
def test_study_variants_equal_transformers(extension):
    """Each variant of the study, built from the checkpoint's config as the study builds it, against transformers
    configured with the same rope_parameters (HF's keys and defaults); `ntk` (static NTK, not an HF type) against
    HF's default RoPE at the closed-form base base * factor^(d/(d-2)); resonance_yarn against HF's YaRN with the
    wavelengths rounded (arXiv 2403.00071), whose table differs, so only within 1e-3 of the rounded maths."""
    plain = llama()
    enc, params = variants.build(plain.config.to_dict(), extension, 2.0)
    hf_keys = dict(params["scaling"])
    if extension == "ntk":
        d = 16
        ref = llama("default")
        ref.model.rotary_emb.inv_freq.copy_(1.0 / ((10000.0 * 2.0 ** (d / (d - 2))) ** (torch.arange(0, d, 2) / d)))
    else:
        ref = llama(params["rope_type"], **hf_keys)
    x = ids(128)
    with torch.no_grad():
        want = ref(x[None]).logits
        with rotary.swapped(plain, enc, length=128):
            got = plain(x[None]).logits
    if extension == "resonance_yarn":
        assert not torch.allclose(got, want, atol=1e-5)  # the rounding changes the model
        return
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_none_is_the_unmodified_model_bit_for_bit():
    model = llama()
    enc, _ = variants.build(model.config.to_dict(), "none", 2.0)
    x = ids(80)
    with torch.no_grad():
        want = model(x[None]).logits
        with rotary.swapped(model, enc):
            got = model(x[None]).logits
    assert torch.equal(got, want)


def test_chunked_nll_equals_the_models_own_loss():
    model = llama()
    x = ids(70)
    with torch.no_grad():
        want = F.cross_entropy(model(x[None]).logits[0, :-1], x[1:], reduction="none")
    got = scoring.token_nll(model, x, chunk=16)  # 69 targets: 5 chunks, the last one partial
    torch.testing.assert_close(got.float(), want, atol=1e-5, rtol=1e-5)


def test_prefix_of_a_longer_window_equals_a_shorter_forward():
    """Causal: the NLL of a window's first L tokens does not depend on what follows (the study's shorter lengths
    are prefixes of its windows) for a rope_type that ignores the length; dynamic NTK does depend on it."""
    model = llama()
    x = ids(120)
    torch.testing.assert_close(scoring.token_nll(model, x)[:47], scoring.token_nll(model, x[:48]), atol=1e-5, rtol=0)
    dyn = llama("dynamic", factor=2.0)
    assert not torch.allclose(scoring.token_nll(dyn, x)[:47], scoring.token_nll(dyn, x[:48]), atol=1e-4)


def test_pipeline_stages_change_the_model_and_fp32_does_not():
    model = llama()
    enc, _ = variants.build(model.config.to_dict(), "none", 2.0)
    x = ids(64)

    def h(pipeline):
        with rotary.swapped(model, enc, pipeline):
            return scoring.hidden(model, x)
    kl, ref, low = scoring.token_kl(model, x, h("fp32"), h("bf16"))
    assert kl.mean() > 0 and not torch.equal(ref, low)
    kl, ref, low = scoring.token_kl(model, x, h("fp32"), h("fp32"))
    assert torch.equal(kl, torch.zeros_like(kl)) and torch.equal(ref, low)


def test_pipeline_with_an_extension_is_refused_in_one_line():
    model = llama()
    enc, _ = variants.build(model.config.to_dict(), "yarn", 2.0)
    with pytest.raises(ValueError, match="rope_type 'default'"), rotary.swapped(model, enc, "hf_bf16"):
        pass
    enc, _ = variants.build(model.config.to_dict(), "dynamic", 2.0)
    with pytest.raises(ValueError, match="depends on the sequence length"), rotary.swapped(model, enc):
        pass


def test_refusals_name_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="expected one of"):
        checkpoint.locate("no_such_model")
    with pytest.raises(ValueError, match="not an HF checkpoint directory or a .gguf file"):
        checkpoint.locate("smollm2", tmp_path / "missing.gguf")
    with pytest.raises(ValueError, match="without config.json"):
        checkpoint.locate("smollm2", tmp_path)
    with pytest.raises(ValueError, match="unknown pretrained.extension"):
        variants.build(llama().config.to_dict(), "pi", 2.0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match="no rotary embedding module"):
        checkpoint.check_rotary(gpt2)


def gemma3(full=None):
    """A 6-layer random Gemma3ForCausalLM (5 sliding-window layers at θ 1e4, one global at θ 1e6, as Gemma 3) whose
    full-attention layers take `full` as their rope_parameters when given."""
    torch.manual_seed(0)
    rp = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
          "full_attention": full or {"rope_type": "default", "rope_theta": 1000000.0}}
    cfg = transformers.Gemma3TextConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
                                        num_attention_heads=4, num_key_value_heads=1, head_dim=16, sliding_window=16,
                                        max_position_embeddings=TRAINED, rope_parameters=rp,
                                        attn_implementation="sdpa")
    return transformers.Gemma3ForCausalLM(cfg).eval()


@pytest.mark.parametrize("extension, layers", [("none", "all"), ("yarn", "global"), ("linear", "global")])
def test_per_layer_type_rope_equals_transformers(extension, layers):
    """Gemma 3's two RoPEs (rotary_emb(x, position_ids, layer_type)): the harness's encodings per layer type, the
    extension on the global layers only, against transformers configured with the same per-layer-type
    rope_parameters; final logit soft-capping as the model applies it (scoring.logits)."""
    plain = gemma3()
    enc, params = variants.build(plain.config.to_dict(), extension, 2.0, layers=layers)
    assert sorted(enc) == ["full_attention", "sliding_attention"] and params["layers"] == layers
    keys = {k: v for k, v in params["scaling"].items()}
    ref = gemma3({"rope_type": params["rope_type"], "rope_theta": 1000000.0, **keys}) if extension != "none" else plain
    x = ids(100)
    with torch.no_grad():
        want = ref(x[None]).logits[0]
        with rotary.swapped(plain, enc):
            got = scoring.logits(plain, scoring.hidden(plain, x))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    if extension != "none":
        assert not torch.allclose(got, gemma3()(x[None]).logits[0], atol=1e-4)  # the extension changes the model


@pytest.mark.parametrize("extension", ["none", "yarn", "resonance_yarn"])
def test_kv_cache_decoding_under_the_swap_equals_the_full_forward(extension):
    """HF's KV cache through the swapped RoPE: a prefill of 40 tokens then 8 one-token steps (rotary_emb sees the
    offset positions) give the full forward's logits at those positions."""
    model = llama()
    enc, _ = variants.build(model.config.to_dict(), extension, 2.0)
    x = ids(48)
    with torch.no_grad(), rotary.swapped(model, enc):
        full = model(x[None]).logits[0]
        out = model(x[None, :40], use_cache=True)
        steps, cache = [out.logits[0, -1]], out.past_key_values
        for t in range(40, 47):
            out = model(x[None, t:t + 1], past_key_values=cache, use_cache=True)
            steps.append(out.logits[0, -1])
            cache = out.past_key_values
    torch.testing.assert_close(torch.stack(steps), full[39:47], atol=1e-5, rtol=0)


class CharTokenizer:
    """A stand-in tokenizer for the prompt's structure: one id per character (ids 0..96 are ASCII 32..128)."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [min(ord(c), 127) - 31 if c != "\n" else 0 for c in text]}

    def decode(self, ids):
        return "".join("\n" if i == 0 else chr(i + 31) for i in ids)


@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("needle", ["passkey", "single", "multikey"])
def test_retrieval_prompt_has_the_length_and_the_needle_at_its_depth(needle, depth):
    from harness.pretrained import retrieval
    tok = CharTokenizer()
    key = 31415 if needle == "passkey" else ("falcon", 2718281)
    hay = None if needle == "passkey" else retrieval.prose_haystack(tok, tok("a line of prose.\n" * 80)["input_ids"],
                                                                      1200)
    ids, ans = retrieval.prompt(tok, needle, 1000, depth, key, retrieval.distractors(needle), hay)
    assert len(ids) + len(ans) - 1 == 1000
    text, value = tok.decode(ids), key if needle == "passkey" else key[1]
    assert tok.decode(ans) == f" {value}" and text.endswith("is")
    at = text.index(str(value))
    intro = retrieval.PASSKEY_INTRO if needle == "passkey" else retrieval.RULER_INTRO
    assert text.startswith(intro) and abs((at - len(intro)) / (1000 - len(intro) - 150) - depth) < 0.2
    assert text.count("special magic numbers for") == {"passkey": 0, "single": 1, "multikey": 4}[needle]
    with pytest.raises(ValueError, match="shorter than the"):
        retrieval.prompt(tok, needle, 100, 0.5, key, retrieval.distractors(needle), hay)


def test_retrieval_scores_with_a_shared_prefix_as_without_one():
    """Teacher-forced scoring of prompts that share a prefix: reusing the previous prompt's cached prefix gives the
    answer NLL and exact match of scoring each prompt whole (fp32, 1e-6), and a length-dependent variant (dynamic
    NTK past the trained context) never reuses."""
    from harness.pretrained import retrieval, study
    model = llama()
    x = ids(90).tolist()
    prompts = [(x[:70], x[70:74]), (x[:40] + x[60:70], x[5:9]), (x[:40], x[10:13])]
    whole = retrieval.Scorer(model, lambda a, b: False)
    shared = retrieval.Scorer(model, lambda a, b: True)
    want = [whole.score(p, a) for p, a in prompts]
    got = [shared.score(p, a) for p, a in prompts]
    assert [w[2] for w in want] == [0, 0, 0] and [g[2] for g in got] == [0, 40, 39]
    for (wa, wn, _), (ga, gn, _) in zip(want, got):
        assert wa == ga and abs(wn - gn) < 1e-6 * max(1.0, abs(wn))
    dyn = variants.build(model.config.to_dict(), "dynamic", 2.0)[0]
    same = study.same_frequencies(dyn)
    assert same(32, TRAINED) and not same(TRAINED, 96) and not same(80, 96)


@pytest.mark.parametrize("T", [48, 96])
def test_forward_flops_is_pytorchs_own_count(T):
    """The closed-form FLOPs of a forward against PyTorch's FlopCounterMode (torch.utils.flop_counter), which counts
    every matmul of the model's actual forward, eager attention's QK^T and AV over the whole (T x T) square
    included: with causal=False the two agree exactly (both count matmuls only)."""
    from torch.utils.flop_counter import FlopCounterMode
    from harness.pretrained import speed
    model = llama()
    model.set_attn_implementation("eager")  # CPU SDPA's fused kernel is not counted by FlopCounterMode
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(ids(T)[None])
    want = fc.get_total_flops()
    assert speed.forward_flops(model.config.to_dict(), T, causal=False) == want
    assert speed.forward_flops(model.config.to_dict(), T) < want  # the causal count is the lower triangle


def test_the_swap_goes_through_rope_init_functions_and_leaves_other_models_alone():
    """transformers' seam: inside the context the registry holds the harness's rope_type and the model's rotary
    module is its own class built from it; a second model of the same family, run inside the context, is its
    unmodified self (fp32 and a precision pipeline alike); on exit the registry entry is gone."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    model, other = llama(), llama()
    enc, _ = variants.build(model.config.to_dict(), "yarn", 2.0)
    x = ids(40)
    with torch.no_grad():
        want = other(x[None]).logits
        before = set(ROPE_INIT_FUNCTIONS)
        for pipeline, e in (("fp32", enc), ("bf16", harness_encoding(model))):
            with rotary.swapped(model, e, pipeline):
                added = set(ROPE_INIT_FUNCTIONS) - before
                assert torch.equal(other(x[None]).logits, want)
                if pipeline == "fp32":
                    assert len(added) == 1 and type(model.model.rotary_emb) is type(other.model.rotary_emb)
                    assert model.model.rotary_emb.rope_type == added.pop()
                assert not torch.equal(model(x[None]).logits, want)
        assert set(ROPE_INIT_FUNCTIONS) == before and torch.equal(model(x[None]).logits, want)


def test_only_the_pretrained_backend_touches_transformers_modeling_code():
    """No module of the harness rebinds a modeling module's rotation, a model's rotary module or a module's forward
    (assignments and setattr to apply_rotary_pos_emb, rotary_emb, forward) except harness/pretrained/rotary.py,
    which swaps the model's rotary module for one of its own class and rebinds the rotation inside one attention
    module's own forward (the precision pipelines). Calling transformers' functions as references is not touching."""
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "harness"
    names = {"apply_rotary_pos_emb", "rotary_emb", "forward"}
    hits = set()
    for p in root.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            if any(isinstance(t, ast.Attribute) and t.attr in names for t in targets):
                hits.add(str(p.relative_to(root)))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in names:
                hits.add(str(p.relative_to(root)))
    assert hits == {"pretrained/rotary.py"}, sorted(hits)  # the detector sees the one place allowed


FAMILIES = {  # small random models of the RoPE families the backend takes: (config class, model class, extra keys)
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {"head_dim": 16}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {"head_dim": 16, "sliding_window": 16}),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", {"partial_rotary_factor": 0.5, "pad_token_id": 0}),
}


@pytest.mark.parametrize("family, extension", [(f, e) for f in sorted(FAMILIES) for e in ("none", "yarn")
                                               if (f, e) != ("phi3", "yarn")])
def test_every_family_rotates_as_transformers_does(family, extension):
    """Per family (Llama, Mistral, Qwen2/3, Gemma 2, Phi-3 with partial rotary): the harness's RoPE through the
    swap gives transformers' own logits, for the checkpoint's own RoPE (bit for bit) and for YaRN x2 (against the
    model configured with HF's YaRN rope_parameters; 1e-5). Phi3Config validates any extension as LongRoPE
    (short/long factor lists), so Phi-3 is compared with its own RoPE only."""
    conf_cls, model_cls, extra = FAMILIES[family]

    def build(rope):
        torch.manual_seed(0)
        cfg = getattr(transformers, conf_cls)(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                              num_attention_heads=4, num_key_value_heads=2,
                                              max_position_embeddings=TRAINED, rope_parameters=rope, **extra)
        return getattr(transformers, model_cls)(cfg).eval()
    plain = build({"rope_type": "default", "rope_theta": 10000.0})
    enc, params = variants.build(plain.config.to_dict(), extension, 2.0)
    ref = plain if extension == "none" else build({"rope_type": "yarn", "rope_theta": 10000.0, **params["scaling"]})
    x = ids(100)
    with torch.no_grad():
        want = ref(x[None]).logits
        with rotary.swapped(plain, enc, length=100):
            got = plain(x[None]).logits
    if extension == "none":
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_resonance_keeps_its_own_table_on_the_real_model():
    """Resonance RoPE's table reduces positions modulo the integer wavelengths (its authors' tiling): the swapped
    model rotates with that table, so its logits equal, bit for bit, a reference built from the encoding's own table
    through HF's own rotation formula (rotate_half); HF's rotary class (position x frequency in fp32, no modulo)
    would differ in the last bits."""
    model = llama()
    enc, _ = variants.build(model.config.to_dict(), "resonance_yarn", 2.0)
    x = ids(90)
    cos, sin = enc.table(torch.arange(90), torch.float32)  # (T, R/2)
    full_cos, full_sin = torch.cat([cos, cos], -1)[None], torch.cat([sin, sin], -1)[None]
    ref = llama()
    ref.model.rotary_emb.forward = lambda h, position_ids, *a, **k: (full_cos[:, position_ids[0]],
                                                                    full_sin[:, position_ids[0]])
    with torch.no_grad():
        want = ref(x[None]).logits
        with rotary.swapped(model, enc, length=90):
            got = model(x[None]).logits
    assert torch.equal(got, want)
