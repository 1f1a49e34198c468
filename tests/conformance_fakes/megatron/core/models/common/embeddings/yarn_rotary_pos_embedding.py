"""yarn_rotary_pos_embedding.py: the fake has no YaRN (the name only, as the adapter imports it)."""


class YarnRotaryEmbedding:
    def __init__(self, *a, **k):
        raise NotImplementedError("the fake has no YaRN")
