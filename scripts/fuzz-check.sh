#!/usr/bin/env bash
# Fuzzes what comes from outside with cargo-fuzz (libFuzzer, the nightly
# toolchain): the announcement body, a tokens file and its metadata, a
# PROXY protocol header (v1, v2 with TLVs), an
# audit line as the admin commands render it, an answer as the agent reads
# it, and node ids. Each target runs FUZZ_SECONDS (30) starting from its
# seed corpus, kept in the repository (fuzz/seeds/<target>/: real bodies,
# answers, audit lines, tokens files); what it finds goes to fuzz/corpus/
# (not kept). Any crash fails the check and leaves its input under
# fuzz/artifacts/.
#
#   scripts/fuzz-check.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz-check: SKIPPED: no nightly toolchain (cargo-fuzz needs it)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz-check: installing cargo-fuzz (crates.io)"
  cargo install cargo-fuzz --locked --quiet
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
# No sanitizer: the crate forbids unsafe code, and an ASan build of every
# dependency (aws-lc's C included) costs minutes of CI for little.
cd fuzz
cargo +nightly fuzz build -O --sanitizer none >/dev/null 2>&1 || cargo +nightly fuzz build -O --sanitizer none
status=0
for target in "${targets[@]}"; do
  log=$(mktemp)
  mkdir -p "corpus/$target"
  # The first directory takes what is found; the seeds are read, never written.
  if cargo +nightly fuzz run -O --sanitizer none "$target" "corpus/$target" "seeds/$target" \
    -- -max_total_time="$seconds" >"$log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1)
    echo "fuzz-check: $target: ${runs:-done} from $(find "seeds/$target" -type f | wc -l) seeds, no crash"
  else
    echo "fuzz-check: FAILED: $target crashed:"
    grep -E 'panicked|SUMMARY|artifact_prefix|Test unit written' "$log" | head -5 | sed 's/^/    /'
    status=1
  fi
  rm -f "$log"
done
exit "$status"
