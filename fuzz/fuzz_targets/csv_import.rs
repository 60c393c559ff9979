//! An uploaded CSV file through delimiter detection, the preview, the mapping guess and the
//! import job's parser, in chunk sizes the input picks.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| herald_engine::audience::import::fuzz_csv(data));
