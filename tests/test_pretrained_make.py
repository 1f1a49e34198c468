"""`make pretrained MODEL=<dir>` end to end on a tiny random Llama checkpoint this test writes (config, weights and a
byte-level BPE tokenizer trained on the prompts' own text, all local files): every sweep of the model report runs
through Hydra and the report names the checkpoint, with retrieval intervals inside [0, 1]."""
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # make pretrained end to end: make test-slow

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[1]


def tiny_checkpoint(path: Path, trained=512):
    """A 2-layer LlamaForCausalLM (random weights, seeded) and its tokenizer, saved as an HF checkpoint dir."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from harness.pretrained import retrieval
    from harness.tasks import data
    text = bytes(data.split(data.load_corpus("kjv").data)["train"][:20_000].numpy()).decode()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<s>"])
    tok.train_from_iterator([retrieval.PASSKEY_INTRO, retrieval.FILLER, retrieval.RULER_INTRO, text], trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>")
    fast.save_pretrained(path)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=trained,
                                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)
    return path


def test_make_pretrained_model_runs_the_whole_report_for_a_local_checkpoint(tmp_path):
    model = tiny_checkpoint(tmp_path / "tiny-llama")
    out = tmp_path / "out"
    args = ("pretrained.windows=3 pretrained.samples=4 'pretrained.depths=[0.25,0.75]' "
            "'pretrained.multiples=[1.0,2.0]' threads=1")
    r = subprocess.run(["make", "--no-print-directory", "pretrained", f"MODEL={model}", f"MODEL_OUT={out}",
                        f"PRETRAINED_ARGS={args}"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "WANDB_MODE": "disabled"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = (out / "report" / "report.md").read_text()
    assert "## Pretrained model: tiny-llama" in text and "trained context 512" in text
    for part in ("code: the Python stdlib, n = 3 windows", "prose: the King James Bible, n = 3 windows",
                 "#### passkey", "#### RULER niah_single_2", "#### RULER niah_multikey_1",
                 "### RoPE precision pipelines against fp32", "### Code against prose at 1024 tokens",
                 "### Speed against the machine"):
        assert part in text, part
    assert "Claims on the real model" not in text  # the claims are about SmolLM2
    assert (out / "report" / "retrieval_tiny_llama.png").is_file()


def test_a_checkpoint_replaced_at_its_path_is_evaluated_again(tmp_path):
    """status.json records the evaluated checkpoint's sha256: the same command after another model was saved at
    the same path reruns the job and says why (before: 'skip: finished' with the old model's rows)."""
    import sys
    model = tiny_checkpoint(tmp_path / "m")
    cmd = [sys.executable, "-m", "harness", "pretrained=smollm2", f"pretrained.path={model}", "pretrained.windows=1",
           "pretrained.multiples=[1.0]", "threads=1", f"out={tmp_path / 'out'}", "wandb.mode=disabled"]

    def run():
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout
    assert "ok " in run() and "skip " in run()
    import torch
    torch.manual_seed(1)
    m = transformers.LlamaForCausalLM.from_pretrained(model)
    for p in m.parameters():
        p.data.normal_()
    m.save_pretrained(model)
    out = run()
    assert "rerun " in out and "the checkpoint it evaluated is not the one at its path now" in out


def test_a_checkpoint_that_cannot_load_is_one_line_before_any_work(tmp_path):
    """A GGUF file cut short (before: a reshape error from deep in the loader), a directory without a tokenizer
    (before: a request to install sentencepiece), one whose config names custom code (before: transformers'
    interactive prompt), a file that is no GGUF: each refused by check_files in one line naming the path."""
    import json
    from harness.pretrained import checkpoint
    shipped = checkpoint.locate("smollm2")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(shipped.read_bytes()[:50_000_000])
    (tmp_path / "junk.gguf").write_bytes(b"not a model")
    model = tiny_checkpoint(tmp_path / "m")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((model / "config.json").read_text())
    custom = tmp_path / "custom"
    import shutil
    shutil.copytree(model, custom)
    (custom / "config.json").write_text(json.dumps({**json.loads((model / "config.json").read_text()),
                                                    "auto_map": {"AutoModelForCausalLM": "x.Y"}}))
    for path, says in ((cut, "is not a whole GGUF file"), (tmp_path / "junk.gguf", "is not a GGUF file"),
                       (bare, "has no tokenizer"), (custom, "names custom code")):
        with pytest.raises(ValueError, match=says) as e:
            checkpoint.check_files(path)
        assert "\n" not in str(e.value) and str(path) in str(e.value)
    assert checkpoint.check_files(model) == model and checkpoint.check_files(shipped) == shipped
