"""A trained run as an lm-eval `LM` (EleutherAI lm-evaluation-harness 0.4.x), registered as `harness`.

Byte-level: a token is a UTF-8 byte (vocab 256); text is encoded with `surrogateescape`, so any byte
string round-trips through str. There is no BOS/EOS byte, so an empty context and the start of a rolling
document are conditioned on `prefix` (default "\\n", a document separator), as HF models use EOT.
Batches are right-padded: the model is causal and positions start at 0 on the left, so padding after a
sequence cannot change its logits and batched scores equal unbatched ones exactly."""
import dataclasses
import inspect
import re
from pathlib import Path

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import simple_parse_args_string
from tqdm import tqdm

from harness.tasks import data
from harness import config as config_lib
from harness.lmeval import generate
from harness.lmeval.checkpoint import UsageError, load_run  # noqa: F401 - load_run: the package's API
from harness.measure import extension

GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature")
ROLLING_PROTOCOLS = data.PROTOCOLS


def _int_batch(batch_size):
    if isinstance(batch_size, str) and not batch_size.isdigit():
        raise ValueError(f"batch_size {batch_size!r} is not supported by model 'harness'; pass an integer "
                         f"(auto-sizing is HF-specific)")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return int(batch_size)


def model_args():
    """{name: default} of model `harness`'s model_args: HarnessLM's keyword arguments but model= and config=
    (run's default None: it is required on the command line). The one list: the CLI's help, the refusal of an
    unknown model_arg, parse_model_args."""
    params = inspect.signature(HarnessLM.__init__).parameters
    return {k: p.default for k, p in params.items() if k not in ("self", "model", "config")}


def parse_model_args(text, parse=simple_parse_args_string):
    """A model_args string `k=v,...` as a dict, where run's value may hold commas: a sweep's run dir is named by
    its Hydra overrides (`encoding=rope,eval.lens=[64,128],seed=0`, harness/config/resolvers.run_name). run's
    value is the longest stretch after `run=`, ending at a comma or the end, that is a directory; when none is,
    it ends before the first `,<model_arg>=` (or at the end), so a wrong path is reported whole. The rest goes
    through parse (lm-eval's parser of that string); run's value stays a string."""
    m = re.search(r"(?:^|,)run=", text)
    if not m:
        return parse(text)
    head, rest = text[:m.start()], text[m.end():]
    ends = [i for i, ch in enumerate(rest) if ch == ","] + [len(rest)]
    dirs = [i for i in ends if rest[:i] and _is_dir(rest[:i])]
    keyed = [i for i in ends if re.match(rf",(?:{'|'.join(map(re.escape, model_args()))})=", rest[i:])]
    end = dirs[-1] if dirs else (keyed or [len(rest)])[0]
    return {**parse(head), **parse(rest[end + 1:]), "run": rest[:end]}


def _is_dir(text):
    try:
        return Path(text).is_dir()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


@register_model("harness")
class HarnessLM(LM):
    """lm-eval LM over a run dir (`run=<dir>`) or an in-memory (model, config) pair.

    max_length: rolling windows have this length (default: the train length, the model's context);
    loglikelihood contexts longer than it are cut from the left, a generate_until prompt longer than it is an
    error, and generation beyond it slides the window (default: never cut, because evaluating beyond the train
    length is the point). protocol/stride: the runner's
    `nonoverlapping` or `sliding` windows for loglikelihood_rolling (stride default as the runner's:
    eval.stride or train_len // 2). rope_type + factor (+ beta_fast, beta_slow, low_freq_factor,
    high_freq_factor): RoPE eval-time extension, exactly as harness.measure.extension applies it."""

    def __init__(self, run=None, *, model=None, config=None, batch_size=8, max_batch_size=None, device=None,
                 max_length=None, protocol="nonoverlapping", stride=None, rope_type=None, factor="auto",
                 beta_fast=None, beta_slow=None, low_freq_factor=None, high_freq_factor=None, prefix="\n",
                 progress=True):
        super().__init__()
        if (run is None) == (model is None) or (model is None) != (config is None):
            raise ValueError("model 'harness' needs run=<run_dir>, or model= and config= together (not both)")
        cfg, net = load_run(run) if run is not None else (config, model)
        if protocol not in ROLLING_PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; expected one of {list(ROLLING_PROTOCOLS)}")
        if max_length is not None and int(max_length) < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        self.prefix = self.tok_encode(str(prefix))
        if len(self.prefix) != 1:
            raise ValueError(f"prefix must be one byte (the context of a document's first byte); got {prefix!r}")
        self.cfg, self.batch_size, self.progress = cfg, _int_batch(batch_size), progress
        self.decode_paths = set()  # how generate_until decoded: kv_cache and/or rerun (_greedy)
        self.train_len = cfg.train.seq_len
        self.max_length = int(max_length) if max_length is not None else None
        self.window = self.max_length or self.train_len
        self.protocol = protocol
        # the schema's range for eval.stride (>= 1; null = the default, made explicit here): 0 is refused, not
        # read as null
        config_lib.check("stride", stride, dataclasses.replace(config_lib.RANGES["eval.stride"],
                                                               null="the run's eval.stride, else train_len // 2"))
        stride = stride if stride is not None else cfg.eval.stride if cfg.eval.stride is not None else \
            max(1, self.train_len // 2)
        self.stride = min(stride, self.window) if protocol == "sliding" else None
        self._device = _device(device, cfg.device)
        self.extension = {}
        if rope_type is not None:
            net = self._extend(net, rope_type, factor, dict(beta_fast=beta_fast, beta_slow=beta_slow,
                               low_freq_factor=low_freq_factor, high_freq_factor=high_freq_factor))
        self.model = net.to(self._device).eval()

    @classmethod
    def create_from_arg_obj(cls, arg_dict, additional_config=None):
        """As LM's, but an unknown model_arg is one clear line listing the valid ones."""
        valid = list(model_args())
        bad = sorted(set(arg_dict) - set(valid))
        if bad:
            raise UsageError(f"unknown model_args {bad} for model 'harness'; expected a subset of {valid}")
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None}
        try:
            return cls(**{**arg_dict, **extra})
        except (ValueError, OSError) as e:  # construction = checking the arguments and loading the checkpoint
            raise UsageError(str(e)) from e

    @classmethod
    def create_from_arg_string(cls, arg_string, additional_config=None):
        """As LM's, but run's value may hold commas (a sweep's run dir): parse_model_args."""
        return cls.create_from_arg_obj(parse_model_args(arg_string), additional_config)

    def _extend(self, net, rope_type, factor, betas):
        """The trained model with its encoding rebuilt for rope_type (harness.measure.extension)."""
        if rope_type not in config_lib.EXTENSIONS:
            raise ValueError(f"unknown rope_type {rope_type!r}; expected one of {list(config_lib.EXTENSIONS)}")
        if not extension.applies(self.cfg.encoding):
            raise ValueError(f"rope_type applies to encodings that take rope_type and were trained with "
                             f"'default'; encoding {self.cfg.encoding} does not")
        ext = dataclasses.replace(self.cfg.eval.extension, factor=factor,
                                  **{k: float(v) for k, v in betas.items() if v is not None})
        f = extension.factor_for(rope_type, ext, self.window, self.train_len)
        scale = extension.scaling(rope_type, f, ext, self.train_len)
        self.extension = dict(extension=rope_type, factor=f, rope_type=rope_type, scaling=scale)
        return extension.extended(net, self.cfg.encoding, rope_type, scale)

    # ---- tokens
    def tok_encode(self, string):
        return list(string.encode("utf-8", "surrogateescape"))

    def tok_decode(self, tokens):
        return bytes(tokens).decode("utf-8", "surrogateescape")

    @property
    def tokenizer_name(self):
        return "bytes-utf8"

    def _cut(self, tokens):
        return tokens[-self.max_length:] if self.max_length else tokens

    @torch.no_grad()
    def _logprobs(self, seqs):
        """log-softmax (B, T, 256) float32 for right-padded token lists."""
        x = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
        for i, s in enumerate(seqs):
            x[i, :len(s)] = torch.tensor(s)
        return self.model(x.to(self._device)).float().log_softmax(-1)

    def _bar(self, total, desc):
        return tqdm(total=total, desc=desc, disable=not self.progress or self.rank != 0, leave=False)

    # ---- lm-eval request types
    def loglikelihood(self, requests):
        """(log p(continuation | context), greedy?) per request; batched longest first."""
        items = []
        for r in requests:
            ctx, cont = r.args
            c, k = self.tok_encode(ctx) or self.prefix, self.tok_encode(cont)
            if self.max_length and len(k) > self.max_length:
                raise ValueError(f"continuation of {len(k)} bytes exceeds max_length {self.max_length}")
            items.append((self._cut((c + k)[:-1]), k))
        out = [None] * len(items)
        order = sorted(range(len(items)), key=lambda i: -len(items[i][0]))
        bar = self._bar(len(items), "loglikelihood")
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            lp = self._logprobs([items[i][0] for i in idx])
            for row, i in enumerate(idx):
                inp, k = items[i]
                span = lp[row, len(inp) - len(k):len(inp)]  # (K, V): predictions of the continuation
                tgt = torch.tensor(k, device=span.device)
                ll = float(span.gather(-1, tgt[:, None]).sum())
                out[i] = (ll, bool((span.argmax(-1) == tgt).all()))
                self.cache_hook.add_partial("loglikelihood", requests[i].args, out[i])
            bar.update(len(idx))
        bar.close()
        return out

    def loglikelihood_rolling(self, requests):
        """Sum of log p over every byte of each string (first conditioned on `prefix`), in the runner's
        windows: data.eval_windows with this LM's window length, protocol and stride."""
        windows = []  # (owner, x (T,), y (T,), mask (T,))
        for i, r in enumerate(requests):
            stream = torch.tensor(self.prefix + self.tok_encode(r.args[0]), dtype=torch.uint8)
            if stream.numel() < 2:
                continue
            L = min(self.window, stream.numel() - 1)  # a string shorter than a window is one window
            stride = min(self.stride, L) if self.stride else None
            for x, y, m in data.eval_windows(stream, L, protocol=self.protocol, stride=stride):
                windows.append((i, x[0], y[0], m[0]))
        totals = [0.0] * len(requests)
        windows.sort(key=lambda w: -w[1].numel())
        bar = self._bar(len(windows), "loglikelihood_rolling")
        for b in range(0, len(windows), self.batch_size):
            chunk = windows[b:b + self.batch_size]
            lp = self._logprobs([w[1].tolist() for w in chunk])
            for row, (i, x, y, m) in enumerate(chunk):
                T = x.numel()
                ll = lp[row, :T].gather(-1, y.to(lp.device)[:, None])[:, 0]  # (T,)
                totals[i] += float(ll[m.to(lp.device)].double().sum())
            bar.update(len(chunk))
        bar.close()
        for r, t in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, t)
        return totals

    def generate_until(self, requests):
        """Greedy decoding until a stop string or max_gen_toks; output cut before the first stop."""
        jobs = []
        for r in requests:
            ctx, kw = r.args
            bad = sorted(set(kw) - set(GEN_KWARGS))
            if bad:
                raise ValueError(f"unsupported gen_kwargs {bad} for model 'harness'; expected a subset of "
                                 f"{list(GEN_KWARGS)} (decoding is greedy)")
            if kw.get("do_sample"):
                raise ValueError(f"model 'harness' decodes greedily; got do_sample={kw.get('do_sample')}, "
                                 f"temperature={kw.get('temperature')}")
            until = kw.get("until") or []
            jobs.append((self.tok_encode(ctx) or self.prefix, [until] if isinstance(until, str) else list(until),
                         int(kw.get("max_gen_toks", 256))))
        long = max(len(c) for c, _, _ in jobs) if jobs else 0
        if self.max_length and long > self.max_length:  # before any work: a cut prompt loses what it asks about
            raise ValueError(f"a generate_until prompt of {long} bytes exceeds max_length={self.max_length}; prompts "
                             f"are never cut (a needle could be cut away): raise max_length or leave it unset")
        out = [None] * len(jobs)
        order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][0]))
        bar = self._bar(len(jobs), "generate_until")
        for b in range(0, len(order), self.batch_size):
            idx = order[b:b + self.batch_size]
            for i, text in zip(idx, generate.greedy(self, [jobs[i] for i in idx])):
                out[i] = text
                self.cache_hook.add_partial("generate_until", requests[i].args, text)
            bar.update(len(idx))
        bar.close()
        return out

def _device(requested, run_device):
    """torch.device: the requested one, else the run's. harness-lm-eval, as lm-eval's CLI, passes one (default
    cuda:0); on a machine without CUDA that falls back to CPU, as lm-eval's HF model does. The devices are
    config.py's (cpu, cuda[:N]): any other is a ValueError now, not a failure at the first forward."""
    name = str(requested or run_device)
    try:
        dev = torch.device(name)
    except RuntimeError:  # 'tpu', 'cuda:x': torch's message lists types this harness does not run on
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r}; expected cpu, cuda or cuda:<N>")
    return torch.device("cpu") if dev.type == "cuda" and not torch.cuda.is_available() else dev
