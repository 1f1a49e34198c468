"""T5 relative bias (Raffel et al. 2020): one learned scalar per head and log-spaced distance bucket."""
import math

import torch
from torch import nn

from harness.encodings._base import Encoding
from harness.encodings._params import count


def relative_position_bucket(rel, bidirectional=True, num_buckets=32, max_distance=128):
    """Bucket of rel = key_pos - query_pos: exact below num_buckets/2 (per side), log-spaced up to
    max_distance, then the last bucket. Same function as HF T5's _relative_position_bucket."""
    out = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        out = out + (rel > 0).long() * num_buckets
        dist = rel.abs()
    else:
        dist = (-rel).clamp(min=0)  # causal: only keys at or before the query are distinct
    max_exact = num_buckets // 2
    # clamp(min=1) only keeps log() finite where the exact branch is taken anyway
    log_ratio = torch.log(dist.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return out + torch.where(dist < max_exact, dist, large)


class T5(Encoding):
    """Learned bucketed bias, shared by all layers (as in T5)."""

    # its row in docs/encodings.md (harness.report.encodings_table): kind, where it acts, reference
    CARD = ("bucketed learned bias (causal or bidirectional)",
            "bias",
            "Raffel et al. 2020")

    RANGES = {"num_buckets": count(2)}

    relative = True

    def __init__(self, *, n_heads, num_buckets=32, max_distance=128, bidirectional=False):
        super().__init__()
        # relative_position_bucket: distances below max_exact get a bucket each, log-spaced buckets span
        # [max_exact, max_distance), dividing by log(max_distance / max_exact)
        max_exact = num_buckets // (4 if bidirectional else 2)
        if max_exact < 1:
            raise ValueError(f"t5 num_buckets={num_buckets} leaves no exact bucket: it needs num_buckets >= "
                             f"{4 if bidirectional else 2}{' when bidirectional' if bidirectional else ''}")
        if not max_distance > max_exact:
            raise ValueError(f"t5 max_distance={max_distance} must exceed its exact range, num_buckets // "
                             f"{4 if bidirectional else 2} = {max_exact} (the log-spaced buckets span from there to "
                             f"max_distance); raise max_distance or lower num_buckets")
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.embedding = nn.Embedding(num_buckets, n_heads)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def bias(self, q, q_pos, k_pos):
        rel = k_pos[None, :] - q_pos[:, None]  # (Tq, Tk)
        buckets = relative_position_bucket(rel, self.bidirectional, self.num_buckets, self.max_distance)
        return self.embedding(buckets).permute(2, 0, 1)  # (H, Tq, Tk)
