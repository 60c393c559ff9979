//! Herald's development and load-test tools, kept out of the product crates: the SMTP sink
//! (also the development mail catcher behind `/dev/inbox`), the raw SMTP blast, the benchmarks
//! and the send engine's chaos suite. Only the sink, the DKIM checker and the ordinary-owner
//! set-up are built without the `lab` feature (the default): the production binary leaves the
//! rest out (`herald-server`'s own `lab` feature). The `herald` binary reaches them as `herald dev …` and
//! `herald bench …`; the engine's and the server's tests use the sink.
//!
//! Nothing here knows the web server: a benchmark that needs it gets a [`BenchEnv::serve`]
//! from the binary, which builds the server exactly as `herald serve` does.

#[cfg(feature = "lab")]
pub mod bench;
#[cfg(feature = "lab")]
pub mod bench_automations;
#[cfg(feature = "lab")]
mod bench_env;
#[cfg(feature = "lab")]
pub mod bench_messages;
#[cfg(feature = "lab")]
pub mod bench_scans;
#[cfg(feature = "lab")]
pub mod bench_segments;
#[cfg(feature = "lab")]
pub mod bench_track;
#[cfg(feature = "lab")]
pub mod bench_webhooks;
#[cfg(feature = "lab")]
pub mod blast;
#[cfg(feature = "lab")]
pub mod chaos;
pub mod dkim;
#[cfg(feature = "lab")]
pub mod load;
pub mod ordinary_owner;
pub mod smtp_sink;

#[cfg(feature = "lab")]
pub use bench_env::*;
