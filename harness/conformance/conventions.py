"""Calling conventions: how a case is handed to the code under test and how its answer is read back.

A `Calling` fixes everything but the dtype. q and k reach the code as (B=1, H=2, P, D) laid out by qk_layout
(bhsd (1, H, P, D), bshd (1, P, H, D), sbhd (P, 1, H, D)); head 0 of q is the case's q and head 1 its k, and k
the reverse, so code that mixes up heads and positions moves a head's values to the wrong phase and fails.
Conventions of --apply:
- hf: fn(q, k, cos, sin) -> (q', k'), cos/sin (1, P, W) as HF builds them (the function broadcasts them over
  heads: HF's unsqueeze_dim); full width W = R by default, cat(freqs, freqs) for the half layout and
  repeat_interleave(freqs, 2) for interleaved (HF's GLM/Cohere); --width half passes (1, P, R/2). A partial
  rotary is split off before the call and the rest passed through, as HF's partial models do it themselves.
- x_cos_sin: fn(x, cos, sin) -> x', the whole head; cos/sin (P, W) shaped to broadcast against x (bshd:
  (P, 1, W), sbhd: (P, 1, 1, W)), half width by default (harness/rope/rotation.py), --width full as hf's.
- angles: fn(x, theta) -> x', theta the full-width angle tensor (what x-transformers', Megatron's and
  rotary-embedding-torch's apply functions take), shaped as x_cos_sin's tables. The attention factor is not an
  angle: the suite multiplies the returned x' by it in fp64 (the rotation is linear).
- complex: Meta Llama's fn(xq, xk, freqs_cis) -> (xq', xk'), freqs_cis (P, R/2) complex64; pairs are (2j, 2j+1)
  by construction, so only the interleaved layout; qk_layout bshd unless given.
- positions: fn(q, k, positions, *, rope) -> (q', k'): the implementation builds its own table from positions
  (int64 (P,)) and rope (a dict: HF rope_parameters plus head_dim, max_position_embeddings); raising
  NotImplementedError marks a case it does not support (skip). With --positions dense (auto: for the
  length-dependent rope_types, whose table follows the length of the call) it gets every position 0..L-1,
  q and k built once per case, and the suite gathers the sampled rows from its output.
  Optional hook for the usage cases (--usage cast; --build, a library's Library.build): build(rope) -> a
  torch.nn.Module that holds the code's own module(s) as submodules, so a model's .half() / .to(dtype) reaches
  their buffers, and whose forward(q, k, positions) -> (q', k') is called as the positions function is.
--order sin-cos passes sin before cos (timm's apply_rot_embed(x, sin, cos)); --compare logits judges only
q'(m)·k'(n), for code that returns q', k' in a permuted basis of its own (DeepSeek-V3's
apply_rotary_pos_emb_interleave); --array hands NumPy / JAX / MLX arrays instead of torch tensors (arrays.py).
"""
import copy
import dataclasses
import inspect

import torch

from harness.conformance import arrays

CONVENTIONS = ("hf", "x_cos_sin", "angles", "complex", "positions")
QK_LAYOUTS = ("bhsd", "bshd", "sbhd")
WIDTHS = ("half", "full")
ORDERS = ("cos-sin", "sin-cos")
COMPARES = ("outputs", "logits")
POSITION_MODES = ("auto", "sampled", "dense")
LENGTH_DEPENDENT = ("dynamic", "longrope")  # their table depends on the length of the call (HF: max position + 1)
NATURAL_LAYOUT = {"hf": "half", "x_cos_sin": "half", "angles": "half", "complex": "interleaved", "positions": "half"}
HEADS = 2
_MIN_POSITIONAL = {"hf": 4, "x_cos_sin": 3, "angles": 2, "complex": 3, "positions": 3}
_TABLES = ("hf", "x_cos_sin")  # the conventions handed cos and sin, where --width and --order mean something


@dataclasses.dataclass(frozen=True)
class Calling:
    """How the code under test is called: every CLI flag of the call. None: the convention's own default."""
    convention: str = "hf"
    layout: str | None = None
    qk_layout: str | None = None
    width: str | None = None
    order: str | None = None
    compare: str = "outputs"
    positions: str | None = None
    array: str = "torch"

    def __post_init__(self):
        from harness.rope.rotation import LAYOUTS
        c = self.convention
        for flag, value, choices in (("--convention", c, CONVENTIONS), ("--layout", self.layout, LAYOUTS),
                                     ("--qk-layout", self.qk_layout, QK_LAYOUTS), ("--width", self.width, WIDTHS),
                                     ("--order", self.order, ORDERS), ("--compare", self.compare, COMPARES),
                                     ("--positions", self.positions, POSITION_MODES),
                                     ("--array", self.array, arrays.ARRAYS)):
            if value is not None and value not in choices:
                raise ValueError(f"unknown {flag} {value!r}; choose one of {list(choices)}")
        defaults = {"layout": NATURAL_LAYOUT[c], "qk_layout": "bshd" if c == "complex" else "bhsd",
                    "width": "full" if c in ("hf", "angles") else "half", "order": "cos-sin", "positions": "auto"}
        # a value that equals the default is allowed anywhere: the worker gets the filled-in fields back
        if c not in _TABLES and (self.width or defaults["width"]) + (self.order or "cos-sin") != (
                defaults["width"] + "cos-sin"):
            raise ValueError(f"--width and --order apply to the conventions handed cos and sin ({list(_TABLES)}), "
                             f"not {c!r}")
        if c != "positions" and self.positions not in (None, "auto"):
            raise ValueError(f"--positions applies to --convention positions (the others are handed their table), "
                             f"not {c!r}")
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if c == "complex" and self.layout != "interleaved":
            raise ValueError("--convention complex pairs (2j, 2j+1) by construction; it needs --layout interleaved")

    def dense(self, rope_type):
        """True where the positions convention gets every position 0..L-1 for this rope_type."""
        return self.convention == "positions" and (
            self.positions == "dense" or (self.positions == "auto" and rope_type in LENGTH_DEPENDENT))


def check_signature(fn, convention, spec):
    """ValueError in one line when fn cannot take the convention's positional arguments."""
    if not callable(fn):
        raise ValueError(f"--apply {spec!r} is not callable")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: let the first call decide
    n = _MIN_POSITIONAL[convention]
    try:
        sig.bind(*range(n), **({"rope": {}} if convention == "positions" else {}))
    except TypeError as e:
        raise ValueError(f"--apply {spec!r} has signature {sig}, which cannot take the {convention!r} convention "
                         f"({n} positional arguments{', rope=' if convention == 'positions' else ''}): {e}") from None


def _same(a, b):
    """a still holds the snapshot b (taken by _snapshot before the call): same kind, shape, dtype and bits."""
    if torch.is_tensor(b):
        if not arrays.is_array(a):
            return False
        a = arrays.back(a)
        return (a.shape == b.shape and a.dtype == b.dtype
                and bool(torch.equal(torch.view_as_real(a) if a.is_complex() else a,
                                     torch.view_as_real(b) if b.is_complex() else b)))
    return type(a) is type(b) and a == b


def _snapshot(a):
    if arrays.is_array(a):
        return arrays.back(a).clone()
    return copy.deepcopy(a)


def guarded(fn, named, mutated, **kw):
    """fn(*values of named, **kw), recording in `mutated` the names of the arguments it changed in place
    (a caller's q, k or cos/sin table changed behind its back: in a model, the next layer's input)."""
    before = [(name, a, _snapshot(a)) for name, a in list(named) + list(kw.items())]
    try:
        return fn(*(a for _, a in named), **kw)
    finally:
        mutated += [name for name, a, b in before if not _same(a, b) and name not in mutated]


def heads(q, k):
    """(q_in, k_in) (H, P, D): q's heads are (q, k), k's are (k, q)."""
    return torch.stack((q, k)), torch.stack((k, q))


def shaped(x, qk_layout):
    """(H, P, D) -> the 4-D layout handed to the code."""
    x = x[None]  # (1, H, P, D)
    return {"bhsd": x, "bshd": x.transpose(1, 2), "sbhd": x.permute(2, 0, 1, 3)}[qk_layout].contiguous()


def unshaped(y, qk_layout, like):
    """The code's 4-D output -> (H, P, D); TypeError in one line where its shape is not the input's."""
    want = tuple(shaped(like, qk_layout).shape)
    if tuple(y.shape) != want:
        raise TypeError(f"returned shape {tuple(y.shape)}, expected the input's {want} ({qk_layout})")
    return {"bhsd": y[0], "bshd": y[0].transpose(0, 1), "sbhd": y.permute(1, 2, 0, 3)[0]}[qk_layout]


def _table(t, c):
    """A (P, W) table shaped to broadcast against x in c's qk_layout."""
    return {"bhsd": t, "bshd": t[:, None], "sbhd": t[:, None, None]}[c.qk_layout]


def _wide(t, layout):
    return torch.cat((t, t), -1) if layout == "half" else t.repeat_interleave(2, -1)


def call(fn, c, q, k, phase, att, positions, rope, mutated):
    """(q', k') (H, P, D) torch, in the dtype fn returned, from fn called under Calling c. q, k (H, P, D) in the case's dtype; phase (P, R/2)
    fp64 and att the attention factor (unused by `positions`). `mutated` collects the arguments fn changed."""
    dtype, r, to = q.dtype, 2 * phase.shape[-1], (lambda t: arrays.to(c.array, t))
    qx, kx = to(shaped(q, c.qk_layout)), to(shaped(k, c.qk_layout))
    if c.convention == "positions":
        out = guarded(fn, [("q", qx), ("k", kx), ("positions", to(positions))], mutated, rope=rope)
        return _read(out, c, q)
    cos, sin = phase.cos() * att, phase.sin() * att
    if c.width == "full":
        cos, sin, phase = _wide(cos, c.layout), _wide(sin, c.layout), _wide(phase, c.layout)
    pair = (("cos", cos), ("sin", sin))[:: 1 if c.order == "cos-sin" else -1]
    if c.convention in ("x_cos_sin", "angles"):
        table = [(n, to(_table(t.to(dtype), c))) for n, t in pair]
        if c.convention == "angles":  # the angles in fp32 whatever x's dtype, as the implementations hold them
            table = [("theta", to(_table(phase.float(), c)))]
        out = [guarded(fn, [("q" if i == 0 else "k", x)] + table, mutated) for i, x in enumerate((qx, kx))]
        # angles: x' as returned; the attention factor is not an angle, and the judge applies it (run.judge)
        return tuple(unshaped(arrays.back(o), c.qk_layout, q) for o in out)
    qr, kr = to(shaped(q[..., :r], c.qk_layout)), to(shaped(k[..., :r], c.qk_layout))
    if c.convention == "hf":
        table = [(n, to(t.to(dtype)[None])) for n, t in pair]  # (1, P, W)
        out = guarded(fn, [("q", qr), ("k", kr)] + table, mutated)
    else:  # complex: freqs_cis complex64 (Meta's precompute_freqs_cis holds fp32)
        out = guarded(fn, [("q", qr), ("k", kr), ("freqs_cis", to(torch.complex(cos.float(), sin.float())))],
                      mutated)
    q2, k2 = _read(out, c, q[..., :r])
    return torch.cat((q2, q[..., r:].to(q2.dtype)), -1), torch.cat((k2, k[..., r:].to(k2.dtype)), -1)


def _read(out, c, like):
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(arrays.is_array(t) for t in out)):
        raise TypeError(f"returned {type(out).__name__}, expected two arrays (q', k')")
    return tuple(unshaped(arrays.back(t), c.qk_layout, like) for t in out)
