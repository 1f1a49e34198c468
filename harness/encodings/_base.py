"""The encoding contract (DESIGN.md §2): the hooks an encoding may override, called by the model (embed) and by
harness.attention.attend (the rest), and Wrapper, which forwards every hook to an inner encoding."""
import torch
from torch import nn

# The hooks on attention, in the order attend calls them; a wrapper forwards each (Wrapper). A new hook is one
# method on Encoding + its name here + its call in harness/attention.py + the encoding that overrides it.
HOOKS = ("rotate", "token_state", "scores_bias", "bias", "normalize")


class Encoding(nn.Module):
    """A positional encoding acts at fixed points of the model: `embed` on the token embeddings and the HOOKS
    inside attention (rotate q and k, a per-token state, a score bias, the normalizer); defaults do nothing
    (softmax for the normalizer).

    Positions are a 1-D integer tensor (T,) shared by the batch; the runner may randomize them.
    """

    name = ""  # set by the registry to the module's file name
    relative = False  # attention logits depend only on m - n (checked by the registry tests)
    rotary = False  # rotate() is an orthogonal map on q and k: norms preserved
    shift_unit = 1  # relative shifts are multiples of this (2D RoPE: the grid width)
    content_bias = False  # the bias reads content (Shaw's q . R^K, CoPE's q . k, FoX's gates): not positions alone
    period = 1  # distinct per-layer encodings, cycled over the depth (harness/encodings/_layered.py)
    cacheable = True  # q, k from one call stay valid against k from another (KV-cache decoding, harness/decode.py)

    def at(self, layer):
        """The encoding block `layer` (0-based) uses: itself, except for a per-layer policy (Layered)."""
        return self

    def embed(self, x, pos):
        """x (B, T, C) token embeddings -> (B, T, C); absolute encodings add here."""
        return x

    def rotate(self, q, k, pos):
        """q (B, H, T, D), k (B, H, T, D) -> rotated q, k; the rotary family and xPos act here."""
        return q, k

    def bias(self, q, q_pos, k_pos):
        """Additive score bias (H, Tq, Tk) or (B, H, Tq, Tk), or None. q (B, H, Tq, D) is given for
        encodings whose bias depends on content (Shaw's q . R^K term)."""
        return None

    def token_state(self, x):
        """x (B, T, C): the block's attention input (after its LayerNorm) -> a per-token tensor (B, H, T) that
        scores_bias receives for every key, or None. KV-cache decoding keeps it next to the keys, as it keeps k
        (FoX's log forget gates; the authors' FgateDynamicCache keeps the same). None: the bias needs no input."""
        return None

    def scores_bias(self, q, k, q_pos, k_pos, state):
        """The bias the model adds to q k^T / sqrt(D): bias(q, q_pos, k_pos), unless an encoding's bias also
        reads the keys k (B, H, Tk, D) (CoPE's gates σ(q·k)) or the per-key token_state (B, H, Tk) (FoX), which
        then overrides this. The model and KV-cache decoding call this; bias() stays the positions-only view
        (FlexAttention tables, the bias precision study). Query row r's own key is key r + Tk - Tq."""
        return self.bias(q, q_pos, k_pos)

    def normalize(self, scores):
        """scores (B, H, Tq, Tk): q k^T / sqrt(D) + bias, -inf where a key is not visible; query row r's own key
        is key r + Tk - Tq (the diagonal of a full forward, the newest keys when decoding with a cache) ->
        attention weights, same shape, or None: softmax, which harness.attention applies in its kernels (SDPA,
        FlexAttention) or materialized. An encoding that replaces it (sigmoid attention, stick-breaking) returns
        its weights, and attention runs on them (`replaces_softmax`)."""
        return None

    @property
    def replaces_softmax(self):
        """True when normalize() is not softmax: no SDPA or FlexAttention kernel, no linear attention."""
        return type(self).normalize is not Encoding.normalize

    def per_positions(self, pos, dtype, make):
        """make() -> tensors, computed once per positions tensor and dtype: every block of a forward
        passes the same `pos`, so per-layer tables are built once per forward, not n_layers times (on an
        H100 the rebuilt RoPE table cost a training step 19% against NoPE, see harness/bench/overhead.py).
        The key holds `pos` itself (so its memory is not reused by another tensor), its version and the
        parameters' versions. A result that requires grad is not kept (each use needs its own graph), and
        the model drops what was kept at the end of each forward (`end_forward`): nothing outlives a
        forward, so memory measured around one does not depend on the one before."""
        if pos.is_inference():  # inference-mode tensors keep no version counter
            return make()
        key = (pos._version, dtype, tuple(p._version for p in self.parameters()))
        hit = self.__dict__.get("_per_positions")
        if hit is not None and hit[0] is pos and hit[1] == key:
            return hit[2]
        out = make()
        if not any(t.requires_grad for t in out):
            self.__dict__["_per_positions"] = (pos, key, out)
        return out

    def end_forward(self):
        """Called by the model after each forward: forget the tables kept by per_positions."""
        self.__dict__.pop("_per_positions", None)

    @property
    def has_bias(self):
        """True when this encoding adds a score bias, which linear attention cannot take."""
        return type(self).bias is not Encoding.bias or type(self).scores_bias is not Encoding.scores_bias

    @property
    def bias_only(self):
        """True when positions reach the scores through bias() alone, as a function of positions: no
        embed, no rotate, and a bias that does not read q. Such a bias is the encoding's whole positional
        signal and can be measured on its own, from positions (harness/measure/precision_bias.py). False
        for Shaw (its bias reads q) and for RoPE with a bias (rope_alibi, rope_bias): their rotation is
        what the RoPE precision pipelines measure, and their bias adds to rotated scores."""
        cls = type(self)
        return (self.has_bias and not self.content_bias and cls.embed is Encoding.embed
                and cls.rotate is Encoding.rotate)


class RotaryEncoding(Encoding):
    """The rotary sub-contract code outside the model relies on (the real-model backend, the precision studies,
    conformance): a 1-D RoPE over `head_dim` with `base`, `layout` (harness.rope.LAYOUTS) and HF's `rope_type`,
    whose `frequencies(seq_len)` give (inv_freq (R/2,), attention factor) and whose `table(pos, dtype)` gives
    (cos, sin), each (T, R/2). `rope` and its variants implement it (harness/encodings/rope.py)."""

    rotary = True
    head_dim: int
    base: float
    layout: str
    rope_type: str

    def frequencies(self, seq_len):
        raise NotImplementedError

    def table(self, pos, dtype=torch.float32):
        raise NotImplementedError


class Wrapper(Encoding):
    """An encoding around `inner` (a sliding window, a QK-norm): every hook in HOOKS forwards to inner unless the
    subclass overrides it, and so do the flags and what is derived from which hooks the inner overrides
    (replaces_softmax, has_bias). One mechanism, so a hook added to HOOKS reaches every wrapper."""

    FLAGS = ("relative", "rotary", "shift_unit", "content_bias", "cacheable")

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        for flag in self.FLAGS:
            setattr(self, flag, getattr(inner, flag))

    @property
    def replaces_softmax(self):
        return type(self).normalize is not Wrapper.normalize or self.inner.replaces_softmax

    @property
    def has_bias(self):
        own = type(self).bias is not Wrapper.bias or type(self).scores_bias is not Wrapper.scores_bias
        return own or self.inner.has_bias

    @property
    def bias_only(self):
        return False  # a wrapper changes what its inner's bias is measured against (window, norm)

    def end_forward(self):
        super().end_forward()
        self.inner.end_forward()


def _forwarding(hook):
    def forward(self, *args):
        return getattr(self.inner, hook)(*args)
    forward.__name__ = forward.__qualname__ = hook
    forward.__doc__ = f"inner's {hook} (Wrapper)"
    return forward


for _hook in HOOKS:
    setattr(Wrapper, _hook, _forwarding(_hook))
