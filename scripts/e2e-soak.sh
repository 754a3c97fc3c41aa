#!/usr/bin/env bash
# Each end-to-end module N times in a row, as the machine is (loaded or not): a flake is a bug.
# Usage: scripts/e2e-soak.sh N [module ...]   (modules: tests/e2e/test_e2e_*.py; default all)
# Needs the e2e environment (.ci/run's KUBE_BIN_DIR, HELM, KWOK_BIN). Writes one line per run and a
# table to $SOAK_OUT/soak.md (default e2e-soak-results/); exits non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
runs="${1:?usage: scripts/e2e-soak.sh N [module ...]}"
shift
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=(tests/e2e/test_e2e_*.py)
out="${SOAK_OUT:-e2e-soak-results}"
mkdir -p "$out"
export HAMI_FAST_E2E=1 HAMI_FAST_E2E_REQUIRE=1
failed=0
printf '| module | run | result | seconds | load (1 min) |\n|---|---:|---|---:|---:|\n' > "$out/soak.md"
for module in "${modules[@]}"; do
  name="$(basename "$module" .py)"
  for i in $(seq 1 "$runs"); do
    start=$SECONDS
    log="$out/$name-$i.log"
    # one control plane at a time on a shared machine
    if flock /tmp/hami-e2e.lock .venv/bin/python -m pytest "$module" -q -rfEs -p no:cacheprovider > "$log" 2>&1; then
      result=passed
    else
      result="FAILED ($(grep -cE '^(FAILED|ERROR) ' "$log") tests, see $log)"
      failed=1
    fi
    line="| $name | $i | $result | $((SECONDS - start)) | $(cut -d' ' -f1 /proc/loadavg) |"
    echo "$line" | tee -a "$out/soak.md"
  done
done
exit $failed
