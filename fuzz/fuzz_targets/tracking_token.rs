//! Open and click tokens arrive in URLs anyone can forge: each decoder must refuse garbage
//! (never panic), and nothing but a token Herald signed may verify.
#![no_main]
use herald_engine::infra::tokens::Signer;
use herald_engine::tracking::TrackingKeys;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else { return };
    let keys = TrackingKeys::new(&Signer::new(b"fuzzing-key-fuzzing-key-fuzzing-key"));
    assert!(keys.verify_open(token).is_none(), "a forged open token verified: {token:?}");
    assert!(keys.verify_click(token).is_none(), "a forged click token verified: {token:?}");
    assert!(keys.verify_message_open(token).is_none(), "a forged message open token verified: {token:?}");
    assert!(keys.verify_message_click(token).is_none(), "a forged message click token verified: {token:?}");
});
