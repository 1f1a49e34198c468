"""The encoding contract (DESIGN.md §2, with the bias hook extended to receive q for Shaw)."""
from torch import nn


class Encoding(nn.Module):
    """A positional encoding acts at up to three fixed points of the model; defaults do nothing.

    Positions are a 1-D integer tensor (T,) shared by the batch; the runner may randomize them.
    """

    name = ""  # set by the registry to the module's file name
    relative = False  # attention logits depend only on m - n (checked by the registry tests)
    rotary = False  # rotate() is an orthogonal map on q and k: norms preserved
    shift_unit = 1  # relative shifts are multiples of this (2D RoPE: the grid width)

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

    @property
    def has_bias(self):
        """True when this encoding adds a score bias, which linear attention cannot take."""
        return type(self).bias is not Encoding.bias
