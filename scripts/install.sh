#!/usr/bin/env bash
# `make install` (after make has created .venv): hami-fast (editable, with the test extras) and its Rust engine.
# A cold build takes a minute or two, so each stage says what it does and the engine's build
# reports cargo's progress; pip's full output is kept in $VENV/install.log.
set -euo pipefail
VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
stage() { printf '==> %s\n' "$*"; }

[ -x "$PY" ] || { echo "no $PY: make install creates it" >&2; exit 2; }
stage "installing hami-fast into $VENV: Python dependencies and the Rust engine (about 75 s cold, seconds once built)"
log="$VENV/install.log"
start=$SECONDS
# Every 10th package pip collects, every 10th crate cargo compiles and each hami crate, as one
# line; how many packages pip installed.
progress() {
  awk '/^ *Collecting /{p++; if (p % 10 == 1) {printf "    pip: collecting %s (package %d)\n", $2, p; fflush()}}
       /^ *Compiling /{n++; if (n % 10 == 1 || $2 ~ /^hami/) {printf "    cargo: compiling %s (crate %d)\n", $2, n; fflush()}}
       /^ *Finished .*profile/{sub(/^ */, ""); print "    cargo: " $0; fflush()}
       /^Successfully installed/{n = NF - 2; printf "    pip: installed %d package%s\n", n, (n == 1 ? "" : "s"); fflush()}'
}
if ! "$PY" -m pip install -v -e '.[test]' 2>&1 | tee "$log" | progress; then
  echo "make install failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
stage "installed in $((SECONDS - start)) s: $VENV/bin/hami-fast ($("$VENV/bin/hami-fast" --version))"
