"""A real pretrained RoPE model in the loop: a local HF checkpoint (a directory or a GGUF file) evaluated with the
harness's own RoPE (`rope`, `rope_resonance`, the precision pipelines) in place of the model's rotary embedding.

`checkpoint` finds and loads it offline, `rotary` swaps the RoPE, `scoring` scores long windows in chunks,
`study` turns one configuration into tidy rows (DESIGN.md §5, *Pretrained models*)."""
