//! The chaos suite's short run (docs/chaos.md): real `herald worker` processes, a Postgres
//! cluster of its own that it restarts, the SMTP sink misbehaving, randomised faults from a
//! printed seed. `HERALD_CHAOS_SEED` replays a seed; `herald dev chaos --minutes N` is the long run.

use herald_devtools::chaos::{ChaosArgs, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reader_gets_exactly_one_copy_through_kills_restarts_and_a_misbehaving_smtp_server() {
    // The harness checks templates in this process (starting a send): its render sandbox is the
    // herald binary, not this test binary (run alone, nothing else here would have said so).
    herald_engine::sending::template_sandbox::use_program(env!("CARGO_BIN_EXE_herald"));
    let args = ChaosArgs {
        seed: std::env::var("HERALD_CHAOS_SEED").ok().and_then(|s| s.parse().ok()),
        bin: Some(env!("CARGO_BIN_EXE_herald").into()),
        ..ChaosArgs::default()
    };
    let reports = run(&args).await.unwrap_or_else(|e| panic!("the chaos round could not run: {e:#}"));
    for r in &reports {
        assert!(r.violations.is_empty(), "seed {}: {:#?}", r.seed, r.violations);
        // The faults really happened, and mail really flowed.
        assert!(r.faults.get("sigkill").copied().unwrap_or(0) + r.faults.get("pg restart").copied().unwrap_or(0) > 0);
        assert!(r.copies_received >= r.messages_expected);
    }
}
