#!/usr/bin/env bash
# `make test`: the one command that says whether Herald works. From a clean clone it installs
# what is missing, starts a private Postgres if no DATABASE_URL works, then runs, stopping at
# the first failure:
#
#   1. cargo fmt --check
#   2. clippy, native (engine + server, all targets) and wasm (frontend), warnings denied
#   3. cargo test (engine + server; the Rust tests make a fresh database per test, owned by an
#      ordinary role that is not a superuser, whatever DATABASE_URL names)
#   4. cargo leptos build, then against a real `herald serve` on a fresh database, with the dev
#      mail catcher: the OpenAPI document validated and a TypeScript client generated from it,
#      and the Playwright suite (skip with SKIP_E2E=1 for a quick local run; run only
#      this step with E2E_ONLY=1, and pass Playwright arguments in PLAYWRIGHT_ARGS, e.g.
#      PLAYWRIGHT_ARGS="crawler.spec.ts")
#
# Safe to run repeatedly; the e2e server and database are removed on exit.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HERALD_ROOT"

started=$SECONDS
ensure_tools
ensure_postgres

if [[ "${E2E_ONLY:-0}" == 1 ]]; then
  warn "E2E_ONLY=1: fmt, clippy and the Rust tests skipped"
else
log "cargo fmt --check"
cargo fmt --all --check

# Native steps run under leptos_env (see lib.sh) so they share build artifacts with
# `cargo leptos build` below instead of rebuilding leptos and everything above it each time.
log "clippy (native: herald-types, herald-engine, herald-server)"
leptos_env cargo clippy -p herald-types -p herald-engine -p herald-devtools -p herald-server --all-targets \
  --features herald-server/lab -- -D warnings
# The production binary: the server without the lab (no `dev`, `bench` or `seed-states`).
log "clippy (native: the production binary, without the lab)"
leptos_env cargo clippy -p herald-server --bin herald -- -D warnings

# The front end's target dir and environment are cargo-leptos's own for the wasm build, so the
# proc macros built for this step are the ones `cargo leptos build` reuses.
log "clippy (wasm32: herald-frontend)"
leptos_env cargo clippy -p herald-frontend --target wasm32-unknown-unknown \
  --target-dir "$CARGO_TARGET_DIR/front" -- -D warnings

ensure_moto
log "cargo test (DATABASE_URL=${DATABASE_URL%%\?*})"
# A test that hangs would run on into CI's own limit, and the tail of its output would not say
# which test it was. Cap the step, and on a timeout name the tests libtest reported as running
# for over a minute that never finished.
mkdir -p "$HERALD_ROOT/.herald"
test_log="$HERALD_ROOT/.herald/cargo-test.log"
set +e
leptos_env timeout -k 30s "${RUST_TESTS_TIMEOUT:-45m}" cargo test -p herald-types -p herald-engine -p herald-devtools -p herald-server -p herald-app \
  --features herald-server/lab 2>&1 | tee "$test_log"
status=${PIPESTATUS[0]}
set -e
if [[ $status -eq 124 || $status -eq 137 ]]; then
  warn "tests still running when the time ran out:"
  sed -n 's/^test \(.*\) has been running for over .*/\1/p' "$test_log" | sort -u | while read -r name; do
    grep -q "^test $name \.\.\. " "$test_log" || echo "  $name" >&2
  done
  die "cargo test did not finish within ${RUST_TESTS_TIMEOUT:-45m}"
fi
[[ $status -eq 0 ]] || die "cargo test failed"

# The render-freeze guarantee loads both cores for half a minute and measures
# latencies, so it runs alone, after the suite, instead of beside a hundred other tests.
log "render freeze attack (alone)"
# The same packages as above, so cargo reuses that build instead of resolving features anew.
leptos_env timeout -k 30s 5m cargo test -p herald-types -p herald-engine -p herald-devtools -p herald-server -p herald-app \
  --features herald-server/lab --test api -- --ignored --exact \
  render_freeze::render_freeze_attack_leaves_health_logins_and_tracking_responsive --nocapture
# So does the scheduler's precision with 100,000 readers due at once.
log "100,000 automation steps due at once (alone)"
leptos_env timeout -k 30s 5m cargo test -p herald-types -p herald-engine -p herald-devtools -p herald-server -p herald-app \
  --features herald-server/lab --test api -- --ignored --exact \
  automation_steps::a_hundred_thousand_due_steps_run_within_a_minute --nocapture
fi

if [[ "${SKIP_E2E:-0}" == 1 ]]; then
  warn "SKIP_E2E=1: browser tests skipped"
  log "Passed (without e2e) in $((SECONDS - started))s"
  exit 0
fi

# Runs after cargo test on purpose: cargo test also links target/debug/herald, and the copy
# the browser tests run must be the one cargo-leptos built (it knows the site's file names).
# With the lab: the browser tests use `herald dev routes`, `dev ordinary-owner` and `admin seed-states`.
log "cargo leptos build"
cargo leptos build --bin-features lab

# cargo-leptos writes the site to `site-root` ("target/site") relative to the workspace root,
# even when CARGO_TARGET_DIR points elsewhere; look in both places in case that ever changes.
site_root=""
for candidate in "$HERALD_ROOT/target/site" "$CARGO_TARGET_DIR/site"; do
  if [[ -f "$candidate/pkg/herald.js" && -f "$candidate/pkg/herald.css" ]]; then
    site_root="$candidate"
    break
  fi
done
[[ -n "$site_root" ]] || die "cargo leptos build left no site (pkg/herald.js, pkg/herald.css) in target/site or \$CARGO_TARGET_DIR/site"
herald_bin="$CARGO_TARGET_DIR/debug/herald"
[[ -x "$herald_bin" ]] || die "no server binary at $herald_bin"

# ---------------------------------------------------------------------------------------------
# End-to-end: a real server on its own ports and its own database
# ---------------------------------------------------------------------------------------------
e2e_bind=127.0.0.1:3100
e2e_smtp=127.0.0.1:2626
e2e_base="http://$e2e_bind"
e2e_dir="$HERALD_ROOT/.herald/e2e"
e2e_log="$e2e_dir/server.log"
# The server migrates and runs as an ordinary owner (not a superuser, not BYPASSRLS), as on
# managed Postgres; the command creates that role when DATABASE_URL is a superuser's.
owner_url="$(RUST_LOG=error "$herald_bin" dev ordinary-owner | tail -n 1)" || die "could not set up the ordinary owner role"
e2e_db="herald_e2e_$(date +%Y%m%d%H%M%S)_$$"
e2e_url="$(db_url_with_name "$owner_url" "$e2e_db")"
server_pid=""

cleanup() {
  local status=$?
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    # Graceful shutdown lets in-flight jobs finish; do not wait for ever.
    for _ in $(seq 1 50); do
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -9 "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  # WITH (FORCE) ends the runtime role's pooled connections if the server did not.
  psql "$owner_url" -qc "DROP DATABASE IF EXISTS \"$e2e_db\" WITH (FORCE)" >/dev/null 2>&1 ||
    warn "could not drop database $e2e_db"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A server left over from an interrupted run would answer our readiness check with old code.
if curl -fsS -o /dev/null --max-time 2 "$e2e_base/healthz" 2>/dev/null; then
  die "something is already listening on $e2e_bind; stop it first"
fi

log "Creating database $e2e_db"
psql "$owner_url" -qc "CREATE DATABASE \"$e2e_db\"" >/dev/null

rm -rf "$e2e_dir"
mkdir -p "$e2e_dir"
# The server and the browser tests' own `herald` commands (the crawler's seed-states and
# routes) share these settings: one database, one data dir (so one development secret key).
e2e_env=(
  DATABASE_URL="$e2e_url"
  HERALD_ENV=development
  HERALD_BIND="$e2e_bind"
  HERALD_BASE_URL="$e2e_base"
  HERALD_DEV_SMTP_BIND="$e2e_smtp"
  HERALD_SMTP_URL="smtp://$e2e_smtp"
  HERALD_DATA_DIR="$e2e_dir"
  # The crawler opens every campaign editor at two widths, loads, reloads and edits it within a
  # minute, as one member: more previews than a person makes (the limit has its own API test).
  HERALD_PREVIEWS_PER_MINUTE=1000
  # A list takes three public-form entries an hour before its form asks for the proof of work,
  # so a browser test reaches the check in four sign-ups (every other test signs up once a list).
  HERALD_PUBLIC_ENTRIES_PER_LIST_PER_HOUR=3
  LEPTOS_SITE_ROOT="$site_root"
  RUST_LOG="${RUST_LOG:-info}"
)
e2e_cli="$e2e_dir/herald"
{
  echo '#!/usr/bin/env bash'
  printf 'exec env'
  printf ' %q' "${e2e_env[@]}" "$herald_bin"
  echo ' "$@"'
} >"$e2e_cli"
chmod +x "$e2e_cli"

log "Starting herald serve on $e2e_base (log: ${e2e_log#"$HERALD_ROOT"/})"
# Development mode: migrations run on start and the dev mail catcher (and /dev/inbox) is on.
"$e2e_cli" serve >"$e2e_log" 2>&1 &
server_pid=$!

ready=0
for _ in $(seq 1 120); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    break
  fi
  if curl -fsS -o /dev/null --max-time 2 "$e2e_base/readyz" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.5
done
if [[ $ready -ne 1 ]]; then
  warn "server log:"
  cat "$e2e_log" >&2
  if kill -0 "$server_pid" 2>/dev/null; then
    die "herald serve did not become ready at $e2e_base/readyz within 60s"
  fi
  die "herald serve exited before it was ready"
fi

log "OpenAPI document: validated (openapi-spec-validator), then a TypeScript client generated from it"
validate_openapi "$e2e_base/api/v1/openapi.json" || die "the served OpenAPI document is not valid"
# The browser suite's api_client.spec.ts sends a campaign through this client.
rm -rf end2end/generated
(cd end2end && npx openapi-ts --input "$e2e_base/api/v1/openapi.json" --output generated/herald-api \
  --client @hey-api/client-fetch >/dev/null) || die "@hey-api/openapi-ts could not generate a client from the document"

log "Playwright (end2end/)"
if ! (cd end2end && HERALD_E2E_BASE_URL="$e2e_base" HERALD_E2E_CLI="$e2e_cli" npx playwright test ${PLAYWRIGHT_ARGS:-}); then
  warn "last 100 lines of the server log ($e2e_log):"
  tail -n 100 "$e2e_log" >&2
  die "browser tests failed (traces: end2end/test-results, report: npx playwright show-report in end2end/)"
fi

log "All checks passed in $((SECONDS - started))s"
