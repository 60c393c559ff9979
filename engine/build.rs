// `sqlx::migrate!` embeds ../migrations at compile time, but cargo does not know the macro read
// that folder: without this, a new migration file is not picked up until something else in the
// engine changes (sqlx's own advice, `sqlx migrate build-script`).
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
