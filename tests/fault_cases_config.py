"""Fault cases of the configuration's numbers (tests/fault_cases.py collects them): every numeric knob is checked
for type, finiteness and range by the schema (harness/config/ranges.py, one table), the encoding's parameters
by the same table plus their constructors' relations, before any work: one `harness: error:` line naming the key,
the bad value and what is valid, exit 2, nothing written. Hurried-user inputs that are fine (unsorted or repeated
eval lengths) run and measure each length once."""
import pandas as pd

from tests.fault_kit import Case, expect, harness, rejected, the_run, with_base, LM_ERR


def lengths_once(ctx, procs):
    """eval.lens=[32,16,16]: ppl rows at 16 and 32, one per length and protocol."""
    df = pd.read_parquet(the_run(ctx) / "rows.parquet")
    ppl = df[df.metric == "ppl"]
    return (expect(sorted(set(ppl.eval_len)) == [16, 32], f"ppl at {sorted(set(ppl.eval_len))}, want [16, 32]")
            + expect(not ppl.duplicated(["eval_len", "protocol"]).any(), "a length is measured twice"))


LMEVAL = ["-m", "harness.lmeval.cli", "{run}", "--tasks", "pystdlib_ppl"]


def base_quiet_lm_eval(ctx):
    """The shared run, and lm-eval's own INFO lines (its task selection, before the model is built) off: the case
    judges the harness's one line."""
    with_base(ctx)
    ctx.env = {**ctx.env, "LMEVAL_LOG_LEVEL": "WARNING"}


CASES = [
    # --- the list: accepted and silently wrong, or trained to NaN without naming the cause
    rejected("config: negative warm-up", ["train.warmup=-5"],
             r"train\.warmup must be >= 0 \(0 = no warm-up\), got -5$"),
    rejected("config: local_global without a global layer", ["encoding=local_global", "encoding.local_layers=9",
                                                             "model.n_layers=4"],
             r"local_global local_layers=9 .*model\.n_layers=4"),
    rejected("config: sliding stride 0", ["eval.protocol=sliding", "eval.stride=0"],
             r"eval\.stride must be >= 1 or null \(= train\.seq_len // 2\), got 0$"),
    rejected("config: negative sliding stride", ["eval.protocol=sliding", "eval.stride=-4"],
             r"eval\.stride must be >= 1 .*got -4$"),
    Case("config: lm-eval model_arg stride=0", [*LMEVAL, "--model_args", "protocol=sliding,stride=0"], rc=2,
         line=LM_ERR + r"stride must be >= 1 or null .*got 0$", setup=base_quiet_lm_eval, unchanged=True),
    rejected("config: lr inf", ["train.lr=inf"], r"train\.lr must be > 0 and finite, got inf$"),
    rejected("config: min_lr_frac nan", ["train.min_lr_frac=nan"],
             r"train\.min_lr_frac must be a number in \[0, 1\].*got nan$"),
    rejected("config: grad_clip nan", ["train.grad_clip=nan"], r"train\.grad_clip must be >= 0 and finite .*got nan$"),
    rejected("config: weight_decay inf", ["train.weight_decay=inf"],
             r"train\.weight_decay must be >= 0 and finite, got inf$"),
    rejected("config: rope base nan", ["encoding=rope", "encoding.base=nan"],
             r"encoding\.base must be > 0 and finite, got nan$"),
    rejected("config: irope floor_scale nan", ["encoding=irope", "encoding.floor_scale=nan"],
             r"encoding\.floor_scale must be > 0 and finite, got nan$"),
    rejected("config: threads -1", ["threads=-1"], r"threads must be >= 0 \(0 = .*\), got -1$"),
    rejected("config: negative seed", ["seed=-1"], r"seed must be an integer in \[0, 2\*\*32 - 1\].*got -1$"),
    rejected("config: seed beyond the generators' range", ["seed=18446744073709551616"],
             r"seed must be an integer in \[0, 2\*\*32 - 1\].*got 18446744073709551616$"),
    rejected("config: synthetic min_len above seq_len", ["task=copy", "task.min_len=32"],
             r"task\.min_len 32 exceeds train\.seq_len 16"),
    rejected("config: eval length 0 alone", ["eval.lens=[0]"],
             r"eval\.lens must be a non-empty list of lengths >= 1 .*got \[0\]$"),
    rejected("config: train batch 0", ["train.batch_size=0"], r"train\.batch_size must be >= 1, got 0$"),
    rejected("config: eval batch 0", ["eval.batch_size=0"], r"eval\.batch_size must be >= 1, got 0$"),
    rejected("config: eval max_tokens 0", ["eval.max_tokens=0"], r"eval\.max_tokens must be >= 1, got 0$"),
    rejected("config: precision max_tokens 0", ["precision.max_tokens=0"],
             r"precision\.max_tokens must be >= 1, got 0$"),
    rejected("config: steps 0", ["train.steps=0"], r"train\.steps must be >= 1, got 0$"),
    # --- new: hostile or hurried input the issue did not list
    rejected("config: min_lr_frac above 1", ["train.min_lr_frac=1.5"],
             r"train\.min_lr_frac must be a number in \[0, 1\]"),
    rejected("config: negative min_lr_frac (lr < 0 at the end)", ["train.min_lr_frac=-0.5"],
             r"train\.min_lr_frac must be a number in \[0, 1\].*got -0\.5$"),
    rejected("config: negative weight_decay", ["train.weight_decay=-0.1"],
             r"train\.weight_decay must be >= 0 and finite, got -0\.1$"),
    rejected("config: negative grad_clip", ["train.grad_clip=-1"],
             r"train\.grad_clip must be >= 0 and finite .*got -1\.0$"),
    rejected("config: max_position beyond int64", ["train.max_position=99999999999999999999"],
             r"train\.max_position must be at most 2\*\*63 - 1 \(int64\), got 99999999999999999999$"),
    rejected("config: empty eval.multiples", ["eval.multiples=[]"],
             r"eval\.multiples must be a non-empty list .*got \[\]$"),
    rejected("config: eval multiple 0", ["eval.multiples=[0,1]"], r"eval\.multiples must be a .*>= 1.*got \[0, 1\]$"),
    Case("config: unsorted and repeated eval lengths run once each", harness("eval.lens=[32,16,16]"), line=r"^ok ",
         stream="out", rows="more", check=lengths_once),
    rejected("config: negative eval warm-up", ["eval.warmup=-1"], r"eval\.warmup must be >= 0.*got -1$"),
    rejected("config: extension factor inf", ["eval.extension.factor=inf"],
             r"eval\.extension\.factor must be 'auto' or a number >= 1 and finite, got inf$"),
    rejected("config: llama3 low_freq_factor above high", ["eval.extension.types=[llama3]",
                                                          "eval.extension.low_freq_factor=8"],
             r"eval\.extension\.high_freq_factor 4\.0 must be > low_freq_factor 8\.0"),
    rejected("config: yarn beta_fast nan", ["eval.extension.types=[yarn]", "eval.extension.beta_fast=nan"],
             r"eval\.extension\.beta_fast must be > 0 and finite, got nan$"),
    rejected("config: negative finetune_steps", ["eval.extension.finetune_steps=-1"],
             r"eval\.extension\.finetune_steps must be >= 0 \(0 = off\), got -1$"),
    rejected("config: finetune length 0", ["eval.extension.finetune_lens=[0]"],
             r"eval\.extension\.finetune_lens must be a list of lengths >= 1.*got \[0\]$"),
    rejected("config: synthetic min_len 0", ["task=copy", "task.min_len=0"],
             r"task\.min_len must be >= 1 or null .*got 0$"),
    rejected("config: eval_samples 0", ["task=copy", "task.eval_samples=0"],
             r"task\.eval_samples must be >= 1, got 0$"),
    rejected("config: a model too big for this machine",
             ["model.d_model=65536", "model.n_heads=64", "model.n_layers=64"],
             r"model\.d_model=65536, n_heads=64, .* parameters: .* GiB .*this machine has .* GiB"),
    rejected("config: float for an int encoding parameter", ["encoding=shaw", "encoding.max_distance=2.5"],
             r"encoding\.max_distance must be an integer >= 1, got 2\.5$"),
    rejected("config: bool for an int encoding parameter", ["encoding=learned", "encoding.max_len=true"],
             r"encoding\.max_len must be an integer >= 1, got True$"),
    rejected("config: int for a bool encoding parameter", ["encoding=t5", "encoding.bidirectional=2"],
             r"encoding\.bidirectional must be true or false, got 2$"),
    rejected("config: t5 with one bucket", ["encoding=t5", "encoding.num_buckets=1"],
             r"encoding\.num_buckets must be >= 2, got 1$"),
    rejected("config: t5 max_distance inside its exact range", ["encoding=t5", "encoding.max_distance=8"],
             r"t5 max_distance=8 must exceed .*num_buckets"),
    rejected("config: xpos scale_base 0", ["encoding=xpos", "encoding.scale_base=0"],
             r"encoding\.scale_base must be > 0 and finite, got 0$"),
    rejected("config: fire mlp_width 0", ["encoding=fire", "encoding.mlp_width=0"],
             r"encoding\.mlp_width must be >= 1, got 0$"),
    rejected("config: sinusoidal negative base", ["encoding=sinusoidal", "encoding.base=-1"],
             r"encoding\.base must be > 0 and finite, got -1$"),
    rejected("config: sinusoidal scale inf", ["encoding=sinusoidal", "encoding.scale=inf"],
             r"encoding\.scale must be > 0 and finite or null .*got inf$"),
    rejected("config: rope_rf rho outside [0, 1]", ["encoding=rope_rf", "encoding.rho=5"],
             r"encoding\.rho must be a number in \[0, 1\].*got 5$"),
    rejected("config: rope scaling factor nan",
             ["encoding=rope", "encoding.rope_type=linear", "+encoding.scaling.factor=nan"],
             r"encoding\.scaling\.factor must be finite, got nan$"),
    rejected("config: comrope init_std inf", ["encoding=comrope", "encoding.init_std=inf"],
             r"encoding\.init_std must be > 0 and finite, got inf$"),
    rejected("config: rnope_swa without its NoPE layer",
             ["encoding=rnope_swa", "encoding.rope_layers=3", "model.n_layers=2"],
             r"rnope_swa rope_layers=3 .*model\.n_layers=2"),
    rejected("config: irope without its NoPE layer", ["encoding=irope", "encoding.nope_every=4", "model.n_layers=2"],
             r"irope nope_every=4 .*model\.n_layers=2"),
    rejected("config: pretrained factor nan", ["pretrained=smollm2", "pretrained.factor=nan"],
             r"pretrained\.factor must be >= 1 and finite, got nan$"),
    rejected("config: pretrained kl_bar inf", ["pretrained=smollm2", "pretrained.kl_bar=inf"],
             r"pretrained\.kl_bar must be > 0 and finite, got inf$"),
    rejected("config: precision dtype in capitals", ["precision.dtypes=[BF16]"],
             r"unknown precision\.dtypes entry 'BF16'; expected one of \['fp32', 'bf16', 'fp16'\]$"),
    rejected("config: effective-length bar nan", ["eval.effective_length.threshold=nan"],
             r"eval\.effective_length\.threshold must be a number in \(0, 1\].*got nan$"),
    rejected("config: task parameter nan", ["task=flip_flop", "task.params.p_ignore=nan"],
             r"task\.params\.p_ignore must be finite, got nan$"),
    rejected("config: odd head_dim for rope", ["model.d_model=28", "model.n_heads=2", "model.head_dim=7"],
             r"RoPE needs an even head_dim, got 7$"),
]
