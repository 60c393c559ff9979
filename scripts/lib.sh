# shellcheck shell=bash
# Helpers shared by scripts/dev.sh and scripts/test.sh. Source it; do not run it.
#
#   ensure_tools     Rust targets/components, cargo-leptos, wasm-bindgen-cli, npm packages,
#                    Chromium. Idempotent: each step is skipped when already satisfied.
#   ensure_postgres  Exports a reachable DATABASE_URL: the caller's if it works, otherwise a
#                    private cluster under .herald/pg (created once, started if stopped).
#   ensure_moto      Exports HERALD_MOTO_SERVER: moto's S3 server for the media tests.
#   leptos_env CMD   Runs CMD with the compile-time settings `cargo leptos build` uses, so plain
#                    cargo commands share its build artifacts instead of invalidating them.

HERALD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export HERALD_ROOT

# Pinned tool versions (see docs/development.md, "Toolchain recipe"). wasm-bindgen-cli must match the
# wasm-bindgen crate in Cargo.lock exactly, or the generated JS and the wasm disagree.
HERALD_CARGO_LEPTOS_VERSION=0.3.10
HERALD_WASM_BINDGEN_VERSION=0.2.130

# Builds live outside the checkout so CI can reuse them across clean clones (and `git clean`
# does not throw away a 20-minute build). cargo-leptos still writes the site (pkg/, CSS) to
# target/site in the checkout: that path is relative to the workspace root, not the target dir.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/herald/target}"

# cargo install puts binaries here; make sure a fresh shell finds them.
case ":$PATH:" in
  *":$HOME/.cargo/bin:"*) ;;
  *) export PATH="$HOME/.cargo/bin:$PATH" ;;
esac

# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
if [[ -t 2 ]]; then
  _c_step=$'\033[1;34m' _c_warn=$'\033[1;33m' _c_err=$'\033[1;31m' _c_off=$'\033[0m'
else
  _c_step='' _c_warn='' _c_err='' _c_off=''
fi
# Each step says when it starts (minutes and seconds since the script did), so a run's log shows
# where its time went.
log() { printf '%s==>%s [%dm%02ds] %s\n' "$_c_step" "$_c_off" $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }
warn() { printf '%swarning:%s %s\n' "$_c_warn" "$_c_off" "$*" >&2; }
die() {
  printf '%serror:%s %s\n' "$_c_err" "$_c_off" "$*" >&2
  exit 1
}

# Runs a command as root: directly when we are root, else through sudo.
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root to run: $* (install it yourself, or install sudo)"
  fi
}

# apt-get install, with one `apt-get update` per script run.
_apt_updated=0
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* with your package manager"
  if [[ $_apt_updated -eq 0 ]]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    _apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------
ensure_tools() {
  log "Checking tools"
  command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup (https://rustup.rs)"
  command -v rustup >/dev/null 2>&1 || die "rustup not found: the wasm target is added with rustup (https://rustup.rs)"

  # The front end compiles to wasm; fmt and clippy run in the test command.
  if ! rustup target list --installed | grep -qx 'wasm32-unknown-unknown'; then
    log "Adding Rust target wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
  fi
  local installed
  installed="$(rustup component list --installed 2>/dev/null || true)"
  local component
  for component in rustfmt clippy; do
    if ! grep -q "^$component" <<<"$installed"; then
      log "Adding Rust component $component"
      rustup component add "$component"
    fi
  done

  # cargo-leptos built with no_downloads: it never fetches tailwind/wasm-opt/wasm-bindgen from
  # the internet; it runs them from PATH (node_modules/.bin first). `env -u CARGO_TARGET_DIR`
  # keeps cargo install's throwaway build out of Herald's target directory.
  if ! cargo leptos --version 2>/dev/null | grep -qF " $HERALD_CARGO_LEPTOS_VERSION"; then
    log "Installing cargo-leptos $HERALD_CARGO_LEPTOS_VERSION (takes a while the first time)"
    env -u CARGO_TARGET_DIR cargo install cargo-leptos --version "$HERALD_CARGO_LEPTOS_VERSION" \
      --locked --features no_downloads
  fi

  # Without --locked, as in the verified recipe (docs/development.md, "Toolchain recipe"). --force replaces
  # an installed wasm-bindgen-cli of another version.
  if ! wasm-bindgen --version 2>/dev/null | grep -qF " $HERALD_WASM_BINDGEN_VERSION"; then
    log "Installing wasm-bindgen-cli $HERALD_WASM_BINDGEN_VERSION"
    env -u CARGO_TARGET_DIR cargo install wasm-bindgen-cli --version "$HERALD_WASM_BINDGEN_VERSION" --force
    wasm-bindgen --version 2>/dev/null | grep -qF " $HERALD_WASM_BINDGEN_VERSION" ||
      die "another wasm-bindgen comes first on PATH ($(command -v wasm-bindgen)); remove it or put ~/.cargo/bin first"
  fi

  command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js 20 or newer (with npm)"
  # Tailwind CSS 4's engine (@tailwindcss/oxide) needs Node 20; Debian 12's own nodejs is 18.
  node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
    die "Node.js 20 or newer is required (found $(node --version)); see https://nodejs.org"
  # Tailwind CSS and wasm-opt (binaryen) for the build; Playwright for the browser tests.
  npm_install_if_needed "$HERALD_ROOT"
  npm_install_if_needed "$HERALD_ROOT/end2end"
  vendor_assets

  # Playwright's own browser download (`npx playwright install`) is not used: Debian's Chromium
  # works with it through launchOptions.executablePath (see end2end/playwright.config.ts).
  if [[ ! -x /usr/bin/chromium ]]; then
    log "Installing Chromium (Debian package) for the browser tests"
    apt_install chromium
  fi
}

# A Python tool in its own venv in the cache beside the target dir, made once (pip takes ~30 s);
# prints the venv's path. `python_tool VENV_NAME REQUIREMENT PROBE`: PROBE is the venv's program
# whose presence says the install finished.
python_tool() {
  local venv="$HOME/.cache/herald/$1" requirement="$2" probe="$3"
  if [[ ! -x "$venv/bin/$probe" ]]; then
    command -v python3 >/dev/null 2>&1 || die "python3 not found: $requirement needs Python 3"
    log "Installing $requirement in $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$requirement" >&2 ||
      die "pip could not install $requirement"
  fi
  printf '%s\n' "$venv"
}

# moto's S3 server, for the media tests' bucket (images can live in an S3-compatible bucket, and
# the tests start one). Exports HERALD_MOTO_SERVER, which the tests start on a free port.
HERALD_MOTO_VERSION=5.2.5
ensure_moto() {
  local venv
  venv="$(python_tool "moto-$HERALD_MOTO_VERSION" "moto[server]==$HERALD_MOTO_VERSION" moto_server)"
  export HERALD_MOTO_SERVER="$venv/bin/moto_server"
}

# An independent check of the API's OpenAPI document (the Python project's validator, not
# Herald's own code): `validate_openapi URL`.
HERALD_OPENAPI_VALIDATOR_VERSION=0.9.0
validate_openapi() {
  local venv
  venv="$(python_tool "openapi-spec-validator-$HERALD_OPENAPI_VALIDATOR_VERSION" \
    "openapi-spec-validator==$HERALD_OPENAPI_VALIDATOR_VERSION" openapi-spec-validator)"
  local doc
  doc="$(mktemp --suffix=.json)"
  curl -fsS --max-time 10 -o "$doc" "$1" || die "could not fetch the OpenAPI document from $1"
  "$venv/bin/openapi-spec-validator" "$doc"
  local status=$?
  rm -f "$doc"
  return "$status"
}

# Browser libraries the app serves itself (never from a CDN), copied from node_modules into the
# assets dir cargo-leptos publishes. ECharts draws the stats charts (charming builds their options).
vendor_assets() {
  local src="$HERALD_ROOT/node_modules/echarts/dist/echarts.min.js" dest="$HERALD_ROOT/public/vendor/echarts.min.js"
  [[ -f "$src" ]] || die "node_modules/echarts is missing: run npm ci in $HERALD_ROOT"
  if ! cmp -s "$src" "$dest"; then
    mkdir -p "$(dirname "$dest")"
    cp "$src" "$dest"
  fi
}

# `npm ci` when node_modules is missing or package-lock.json changed since the last install
# (a checksum stamp inside node_modules records the lockfile it was installed from).
npm_install_if_needed() {
  local dir="$1" stamp="$1/node_modules/.herald-lock.sha256" want="" name
  name="${1#"$HERALD_ROOT"}"
  name="${name#/}"
  name="${name:-the repository root}"
  if [[ -f "$dir/package-lock.json" ]]; then
    want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  fi
  if [[ -d "$dir/node_modules" && -n "$want" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return 0
  fi
  if [[ -n "$want" ]]; then
    log "npm ci in $name"
    local out
    if ! out="$(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error 2>&1)"; then
      grep -m 6 'npm error' <<<"$out" >&2 || true
      # A lockfile written against a registry mirror that lacks other platforms' optional
      # packages (Tailwind's oxide-darwin-*, -win32-*, ...) has no entries for them, and npm ci
      # rejects it. npm install --no-save installs the same locked versions and leaves
      # package-lock.json untouched.
      warn "npm ci failed; retrying with npm install --no-save (locked versions, lockfile untouched)"
      (cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error)
    else
      printf '%s\n' "$out" | grep -v '^npm warn' | sed '/^$/d' >&2 || true
    fi
  else
    log "npm install in $name (no package-lock.json yet)"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
  fi
  sha256sum "$dir/package-lock.json" | cut -d' ' -f1 >"$stamp"
}

# Runs "$@" with the compile-time environment `cargo leptos build` (debug) gives the server
# build. leptos reads LEPTOS_OUTPUT_NAME with option_env!, and cargo-leptos adds
# `--cfg erase_components` to RUSTFLAGS in debug builds; a plain `cargo test` without both
# would rebuild leptos and everything above it, and the next `cargo leptos build` would rebuild
# it all again. Keep in sync with cargo-leptos (config/project.rs, to_envs). RUSTFLAGS from the
# environment replaces any rustflags in .cargo/config.toml: if that file ever gains some, add
# them here too (cargo-leptos itself appends --cfg erase_components to them).
leptos_env() {
  RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg erase_components" LEPTOS_OUTPUT_NAME=herald "$@"
}

# ---------------------------------------------------------------------------------------------
# Postgres
# ---------------------------------------------------------------------------------------------

# True when a libpq URL accepts connections and queries.
pg_reachable() {
  PGCONNECT_TIMEOUT=3 psql "$1" -Atqc 'select 1' >/dev/null 2>&1
}

# True when something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The directory holding initdb, pg_ctl and postgres (same major version for all three).
pg_bindir() {
  local initdb
  initdb="$(command -v initdb 2>/dev/null || true)"
  if [[ -z "$initdb" ]]; then
    # Debian keeps the server binaries off PATH; take the newest installed major version.
    initdb="$(find /usr/lib/postgresql -path '*/bin/initdb' 2>/dev/null | sort -V | tail -n1 || true)"
  fi
  [[ -n "$initdb" ]] || return 1
  dirname "$(readlink -f "$initdb")"
}

# Runs a Postgres server command as the cluster's owner. initdb and postgres refuse to run as
# root, so as root they run as the `postgres` system user; otherwise as ourselves.
_pg_run() {
  if [[ $EUID -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ensure_postgres() {
  if [[ -n "${DATABASE_URL:-}" ]]; then
    command -v psql >/dev/null 2>&1 || apt_install postgresql-client
    if pg_reachable "$DATABASE_URL"; then
      log "Using DATABASE_URL (${DATABASE_URL%%\?*})"
      export DATABASE_URL
      return 0
    fi
    warn "DATABASE_URL is set but not reachable; using Herald's private Postgres instead"
  fi

  local port="${HERALD_PG_PORT:-5433}"
  local pgdir="$HERALD_ROOT/.herald/pg" pglog="$HERALD_ROOT/.herald/pg.log"
  local bindir
  if ! bindir="$(pg_bindir)"; then
    log "Installing PostgreSQL (Debian package)"
    apt_install postgresql
    bindir="$(pg_bindir)" || die "PostgreSQL installed but initdb not found"
  fi
  command -v psql >/dev/null 2>&1 || export PATH="$bindir:$PATH"
  mkdir -p "$HERALD_ROOT/.herald"

  if [[ $EUID -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no 'postgres' user for the cluster to run as"
    # The postgres user must be able to reach the data directory. A checkout under /root (mode
    # 700) is out of its reach: keep the data in /var/tmp then, behind a symlink at .herald/pg.
    if [[ ! -e "$pgdir" ]] && ! runuser -u postgres -- test -x "$HERALD_ROOT/.herald"; then
      local alt
      alt="/var/tmp/herald-pg-$(printf '%s' "$HERALD_ROOT" | sha256sum | cut -c1-12)"
      warn "user postgres cannot reach $HERALD_ROOT; keeping the cluster in $alt (linked from .herald/pg)"
      mkdir -p "$alt"
      ln -sfn "$alt" "$pgdir"
    fi
  fi
  # With the data kept elsewhere, its log goes next to it, where user postgres can write.
  if [[ -L "$pgdir" ]]; then pglog="$(readlink -f "$pgdir").log"; fi

  if [[ ! -f "$pgdir/PG_VERSION" ]]; then
    log "Creating a private Postgres cluster in .herald/pg"
    mkdir -p "$pgdir"
    chmod 700 "$pgdir"
    if [[ $EUID -eq 0 ]]; then chown -R postgres:postgres "$(readlink -f "$pgdir")"; fi
    # Trust auth over 127.0.0.1 only: it is a throwaway development and test database.
    _pg_run "$bindir/initdb" -D "$(readlink -f "$pgdir")" -U postgres --auth=trust \
      --encoding=UTF8 --locale=C >/dev/null
    # fsync and friends off: the tests create and drop many databases, and a crash may lose
    # this cluster's data, which is fine for what it is. No Unix socket: TCP on 127.0.0.1 only,
    # so it never clashes with a system Postgres's socket directory.
    cat >>"$pgdir/postgresql.conf" <<'EOF'

# Herald's private development/test cluster (scripts/lib.sh)
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  fi

  if _pg_run "$bindir/pg_ctl" -D "$(readlink -f "$pgdir")" status >/dev/null 2>&1; then
    # It may have been started on another port than today's default: ask it.
    port="$(sed -n 4p "$pgdir/postmaster.pid" 2>/dev/null || true)"
    port="${port:-${HERALD_PG_PORT:-5433}}"
    log "Private Postgres already running (.herald/pg, port $port)"
  else
    # Another checkout's cluster (or anything else) may hold the default port: take the next
    # free one, unless the port was asked for explicitly.
    if [[ -z "${HERALD_PG_PORT:-}" ]]; then
      while port_in_use "$port"; do
        port=$((port + 1))
        ((port < 5500)) || die "no free port for Postgres between 5433 and 5499; set HERALD_PG_PORT"
      done
    fi
    log "Starting private Postgres on 127.0.0.1:$port (log: ${pglog#"$HERALD_ROOT"/})"
    touch "$pglog"
    if [[ $EUID -eq 0 ]]; then chown postgres:postgres "$pglog"; fi
    # The port is given here rather than in postgresql.conf so HERALD_PG_PORT can change it.
    _pg_run "$bindir/pg_ctl" -D "$(readlink -f "$pgdir")" -l "$pglog" -o "-p $port" -w -t 60 start >/dev/null ||
      { tail -n 20 "$pglog" >&2; die "Postgres did not start (is port $port taken? set HERALD_PG_PORT)"; }
  fi

  local admin="postgres://postgres@127.0.0.1:$port/postgres"
  pg_reachable "$admin" || die "private Postgres is running but does not answer on 127.0.0.1:$port (see $pglog)"
  if [[ "$(psql "$admin" -Atqc "select 1 from pg_database where datname = 'herald'")" != 1 ]]; then
    log "Creating database herald"
    psql "$admin" -qc 'CREATE DATABASE herald' >/dev/null
  fi
  export DATABASE_URL="postgres://postgres@127.0.0.1:$port/herald"
  log "DATABASE_URL=$DATABASE_URL"
}

# DATABASE_URL with its database name replaced: db_url_with_name URL NAME.
db_url_with_name() {
  local url="$1" name="$2" base query=""
  base="${url%%\?*}"
  if [[ "$base" != "$url" ]]; then query="?${url#*\?}"; fi
  local scheme="${base%%://*}" rest="${base#*://}"
  # rest is user@host:port[/db]
  rest="${rest%%/*}"
  printf '%s://%s/%s%s\n' "$scheme" "$rest" "$name" "$query"
}
