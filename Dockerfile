# syntax=docker/dockerfile:1
#
# Herald's production image: the `herald` binary and the built site (wasm, JS, CSS).
#
#   docker build -t herald .
#   docker run --rm -e DATABASE_URL=... herald herald migrate        # once per release
#   docker run -p 3000:3000 -e DATABASE_URL=... -e HERALD_APP_DATABASE_URL=... \
#     -e HERALD_BASE_URL=https://herald.example.com -e HERALD_SECRET_KEY=... \
#     -e HERALD_SMTP_URL=smtp://user:pass@relay:587?tls=required herald
#   docker run ... herald herald worker                             # extra workers, any number
#
# In production `herald serve` does not migrate; run `herald migrate` before starting a release.

# ---------------------------------------------------------------------------------------------
# Node 22 for the build-time tools (Tailwind CSS 4 needs Node 20+; bookworm's nodejs is 18).
FROM node:22-bookworm-slim AS node

# ---------------------------------------------------------------------------------------------
FROM rust:1.95-bookworm AS builder

COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version && npm --version

# Pinned build tools (see README, "Toolchain recipe"). cargo-leptos is built with no_downloads:
# it runs tailwindcss and wasm-opt from node_modules/.bin and wasm-bindgen from PATH instead of
# fetching binaries at build time. wasm-bindgen-cli must equal the wasm-bindgen crate's version.
RUN rustup target add wasm32-unknown-unknown
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo install cargo-leptos --version 0.3.10 --locked --features no_downloads
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    cargo install wasm-bindgen-cli --version 0.2.130

WORKDIR /build

# npm packages first, so source changes do not reinstall them. The lockfile may lack other
# platforms' optional packages (see scripts/lib.sh); then npm install --no-save, same versions.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund || npm install --no-save --no-audit --no-fund

COPY . .
# ECharts is served by the app itself (scripts/lib.sh, vendor_assets).
RUN mkdir -p public/vendor && cp node_modules/echarts/dist/echarts.min.js public/vendor/

# Release build: server with the release profile, wasm with `wasm-release` (opt-level z, LTO),
# then wasm-opt, minified CSS. The target directory is a cache mount, so the results are copied
# out in the same step. SQLX_OFFLINE=true comes from .cargo/config.toml.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/build/cargo-target \
    CARGO_TARGET_DIR=/build/cargo-target cargo leptos build --release \
 && mkdir -p /out \
 && cp /build/cargo-target/release/herald /out/herald \
 && cp -r /build/target/site /out/site \
 && test -f /out/site/pkg/herald.wasm && test -f /out/site/pkg/herald.css

# ---------------------------------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime

# CA certificates for TLS to the SMTP relay (lettre uses rustls with the system roots).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --home-dir /app --shell /usr/sbin/nologin herald

COPY --from=builder /out/herald /usr/local/bin/herald
COPY --from=builder /out/site /app/site

WORKDIR /app
# HERALD_BIND listens on all interfaces inside the container. HERALD_BASE_URL must still be
# set to the public URL: mail links and the same-origin check on form posts use it.
ENV HERALD_ENV=production \
    HERALD_BIND=0.0.0.0:3000 \
    HERALD_DATA_DIR=/app/data \
    LEPTOS_SITE_ROOT=/app/site \
    LEPTOS_OUTPUT_NAME=herald \
    LEPTOS_ENV=PROD \
    RUST_LOG=info

USER herald
EXPOSE 3000
CMD ["herald", "serve"]
