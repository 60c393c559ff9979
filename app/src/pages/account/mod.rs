//! `/account`: the signed-in person's profile, password, sessions and two-factor.

pub mod overview;
pub mod two_factor;
