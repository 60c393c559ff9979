#!/usr/bin/env bash
# `make dev`: installs what is missing, makes sure a Postgres is running, then runs
# `cargo leptos watch`, which rebuilds the server and the wasm front end on every change and
# reloads the browser. `herald serve` migrates the database itself in development.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HERALD_ROOT"

ensure_tools
ensure_postgres
# Herald runs as production unless told otherwise; this is the one place that tells it.
export HERALD_ENV="${HERALD_ENV:-development}"

# cargo-leptos runs `herald` with no arguments, which means `herald serve`. Its site-addr in
# Cargo.toml is 127.0.0.1:3000, the same as HERALD_BIND's default.
bind="${HERALD_BIND:-127.0.0.1:3000}"
base="${HERALD_BASE_URL:-http://$bind}"
log "Starting Herald (cargo leptos watch); the first build takes several minutes"
log "  App:       $base"
log "  Dev inbox: $base/dev/inbox   (mail is caught by the SMTP catcher on ${HERALD_DEV_SMTP_BIND:-127.0.0.1:2525})"
# With the lab: `herald dev …`, `herald bench …` and `herald admin seed-states` (demo data).
exec cargo leptos watch --bin-features lab
