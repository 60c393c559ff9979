#!/usr/bin/env bash
# The least Postgres work a durable send of 100k messages can cost on this machine: the send
# log's own writes with nothing of Herald around them. A scratch copy of `sends` (same columns,
# same indexes) gets 100k queued rows in one INSERT (the fan-out's floor), is claimed 50 rows a
# transaction by 16 connections with `FOR UPDATE SKIP LOCKED` (the claim's floor, without the
# eligibility checks) and is marked sent 16 rows a transaction (the 250s' floor), each commit
# durable as in production. Prints the CPU Postgres spent on each, per 100k messages.
#
# Why: `herald bench send` compares the end-to-end rate with the raw SMTP blast; this says how
# much of the two cores the database alone needs for the same messages, however fast Herald is.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_bench scripts/bench-postgres-floor.sh
# The database must hold Herald's schema (any database `herald bench send` has run on).
set -euo pipefail
url=${DATABASE_URL:?set DATABASE_URL to a scratch database (the table floor_sends is created and dropped there)}
rows=100000
clients=16
work=$(mktemp -d)
trap 'rm -rf "$work"; psql -q "$url" -c "DROP TABLE IF EXISTS floor_sends; DROP SEQUENCE IF EXISTS floor_batches" >/dev/null 2>&1 || true' EXIT

# CPU seconds of every Postgres process of this machine, ended backends included (the
# postmaster has reaped them: their time is in its children's counters).
pg_cpu() {
  local ticks=0 pid stat
  for pid in $(pgrep -x postgres); do
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    stat=${stat##*) }
    read -r -a f <<< "$stat"
    # Fields 14–17 of stat (utime stime cutime cstime), counted from the state (field 3).
    ticks=$((ticks + f[11] + f[12] + f[13] + f[14]))
  done
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }' 
}

phase() { # name, then the command
  local name=$1 cpu0 cpu1 t0 t1
  shift
  cpu0=$(pg_cpu)
  t0=$(date +%s.%N)
  "$@" > "$work/out" 2>&1 || { cat "$work/out"; exit 1; }
  t1=$(date +%s.%N)
  cpu1=$(pg_cpu)
  awk -v name="$name" -v wall="$t1 - $t0" -v cpu="$cpu1 - $cpu0" -v rows="$rows" 'BEGIN {
    split(wall, w, " - "); split(cpu, c, " - ")
    printf "%-56s %6.2f s wall, %6.2f s Postgres CPU per 100k\n", name, (w[1] - w[2]) * 100000 / rows, (c[1] - c[2]) * 100000 / rows
  }'
}

psql -q -v ON_ERROR_STOP=1 "$url" <<'SQL'
DROP TABLE IF EXISTS floor_sends;
CREATE TABLE floor_sends (LIKE sends INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES INCLUDING CONSTRAINTS);
DROP SEQUENCE IF EXISTS floor_batches;
CREATE SEQUENCE floor_batches;
SQL

phase "insert ${rows} queued rows (one statement)" psql -q -v ON_ERROR_STOP=1 "$url" -c \
  "INSERT INTO floor_sends (tenant_id, campaign_id, reader_id, email)
   SELECT '00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002', g,
          'reader' || g || '@example.com' FROM generate_series(1, $rows) g"
psql -q "$url" -c "ANALYZE floor_sends"

# Each connection keeps a cursor (its last claimed id), as each delivery loop does: without it,
# every claim walks the queue index entries of every row already claimed.
cat > "$work/claim.sql" <<'SQL'
WITH picked AS (
    SELECT id FROM floor_sends WHERE campaign_id = '00000000-0000-0000-0000-000000000002' AND status = 'queued'
      AND id > :cursor ORDER BY id LIMIT 50 FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE floor_sends s SET status = 'sending', lease_token = :client_id, armed = true, attempts = s.attempts + 1,
           updated_at = now()
    FROM picked WHERE s.id = picked.id RETURNING s.id
)
SELECT coalesce(max(id), 0) AS cursor FROM claimed \gset
SQL
phase "claim, 50 rows a transaction, ${clients} connections" \
  pgbench -n -M prepared -D cursor=0 -c "$clients" -j 2 -t $((rows / 50 / clients)) -f "$work/claim.sql" "$url"

cat > "$work/sent.sql" <<'SQL'
SELECT nextval('floor_batches') AS k \gset
UPDATE floor_sends s SET status = 'sent', sent_at = now(), smtp_reply = '250 2.0.0 Ok: queued as 4Xk2', provider_id = '4Xk2',
       armed = false, updated_at = now()
WHERE s.id BETWEEN (:k - 1) * 16 + 1 AND :k * 16 AND s.status IN ('sending', 'queued');
SQL
phase "record 250s, 16 rows a transaction, ${clients} connections" \
  pgbench -n -M prepared -c "$clients" -j 2 -t $((rows / 16 / clients)) -f "$work/sent.sql" "$url"

psql -Atq "$url" -c "SELECT count(*) FILTER (WHERE status = 'sent') || ' of ' || count(*) || ' rows sent' FROM floor_sends"
