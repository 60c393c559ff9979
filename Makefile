# The two commands a contributor needs. Both work on a fresh machine: they install what is
# missing (Rust wasm target, cargo-leptos, wasm-bindgen-cli, npm packages, Chromium) and start a
# private Postgres when DATABASE_URL is unset or unreachable. See README.md.
.PHONY: dev test help

help:
	@echo "make dev   run Herald at http://127.0.0.1:3000 with live reload (dev inbox at /dev/inbox)"
	@echo "make test  fmt, clippy, Rust tests and browser tests (SKIP_E2E=1 to skip the browser tests)"

dev:
	scripts/dev.sh

test:
	scripts/test.sh
