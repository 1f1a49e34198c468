"""Token-level LM (task.tokenizer, harness.tasks.tokens): the corpus in a real checkpoint's tokens, split in bytes
first, a model whose vocabulary is the tokenizer's, and one-line refusals."""
import json

import pytest
import torch

from harness import results, runner
from harness.tasks import data, tokens
from tests.tiny_runs import TEXT, tiny


@pytest.fixture(scope="module")
def smollm2():
    try:
        tokens.check("smollm2")
    except ValueError as e:  # make test installs it; a bare checkout without the pretrained extra does not
        pytest.skip(str(e))
    return tokens.load("smollm2")


def test_each_byte_split_is_tokenized_on_its_own(smollm2):
    corpus = data.Corpus(name="t", data=TEXT.encode(), sha256="t", source="test")
    splits, vocab = tokens.splits(corpus, "smollm2")
    assert vocab == 49152  # SmolLM2's vocabulary (HuggingFaceTB/SmolLM2-135M config.json: vocab_size 49152)
    by_bytes = data.split(corpus.data)
    for k, ids in splits.items():  # the ids decode to that split's own text: no token crosses a split boundary
        assert smollm2.decode(ids.tolist()) == bytes(by_bytes[k].numpy()).decode()
        assert ids.dtype == torch.int32 and int(ids.max()) < vocab


def test_a_token_level_run_has_the_tokenizers_vocabulary(tmp_path, smollm2):
    cfg = tiny(tmp_path, **{"task.tokenizer": "smollm2", "eval.extension.types": []})
    assert runner.run(cfg, tmp_path / "run", progress=False)["status"] == "ok"
    df = results.load(tmp_path / "run")
    ppl = df[(df.metric == "ppl") & (df.eval_len == 16)].value.iloc[0]
    assert 100 < ppl < 49152 * 2  # per token over a 49,152-word vocabulary, 4 steps in: near uniform, not bytes
    status = json.loads((tmp_path / "run" / results.STATUS).read_text())
    assert status["task"]["tokenizer"] == "smollm2"
    n_params = df[df.metric == "n_params"].value.iloc[0]
    assert n_params > 49152 * 32  # the embedding alone (d_model 32)


def test_tokenizer_refusals():
    with pytest.raises(ValueError, match=r"unknown task.tokenizer 'nope'; expected one of \['gemma3', 'smollm2'\]"):
        tokens.check("nope")
    with pytest.raises(ValueError, match="task.tokenizer applies to task lm"):
        from harness.config import TaskConfig
        TaskConfig(name="copy", tokenizer="smollm2")
