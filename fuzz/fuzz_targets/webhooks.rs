//! Every provider webhook parser, the generic endpoint end to end with a valid signature, and
//! SES's envelope, notification and certificate parsing.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_engine::webhooks::fuzz(data));
