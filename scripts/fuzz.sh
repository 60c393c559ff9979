#!/usr/bin/env bash
# The fuzz targets in fuzz/: the CSV importer, the tracking-token decoders, every
# webhook parser, the template renderer with its limits (through the real sandbox), and the
# header/address builder.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 60 s each, every target)
#
# cargo-fuzz builds with sanitizer flags only nightly compilers take; this machine has stable
# Rust only, so RUSTC_BOOTSTRAP=1 lets stable accept them (the ASan runtime ships with stable).
# New inputs go to fuzz/corpus/<target> (git-ignored; fuzz/seeds/<target> are the seeds kept in
# the repository), crashes to fuzz/artifacts/<target>. Not part of `make test`: it takes as long
# as you give it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(csv_import tracking_token webhooks template mail_headers)
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  log "installing cargo-fuzz 0.13.2"
  cargo install cargo-fuzz --version 0.13.2 --locked
fi

# The template target renders through `herald render-sandbox`, as the server does.
log "building the herald binary (the template target's sandbox)"
leptos_env cargo build -p herald-server --bin herald
herald_bin="$CARGO_TARGET_DIR/debug/herald"

export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/herald/fuzz-target}"
# A copy of its own, so a rebuild of the main target during a long run does not pull the binary
# from under the sandbox.
mkdir -p "$CARGO_TARGET_DIR"
cp "$herald_bin" "$CARGO_TARGET_DIR/herald-sandbox"
export HERALD_BIN="$CARGO_TARGET_DIR/herald-sandbox"
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
  log "fuzzing $t for ${seconds}s"
  (cd fuzz && cargo fuzz run --release "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 -print_final_stats=1)
  log "$t: corpus $(find "fuzz/corpus/$t" -type f | wc -l) inputs"
done
