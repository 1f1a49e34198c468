"""The kernel lab: RoPE kernel speed against the machine (kernel_spec, kernel_bench, kernel_timing, kernel_gate,
kernel_icount, kernel_env, kernel_decode, kernel_report, kernel_table), outside kernels (external_rope), the
training-step overhead (overhead), FlexAttention against SDPA (flex_bench), and the lab's tools: the paired A/B of
C kernel builds (kernel_ab), the gate's trials and its child process (gate_trials, gate_support), and the one-off
GPU probes whose outputs are under results/baselines/h200_probe/ (probes/). Run-level measurements stay in
harness/measure/; this package imports from there (timing), never the other way."""
