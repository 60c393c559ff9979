//! What every other module stands on, knowing nothing of newsletters: the database pool and
//! tenant transactions, migrations, sealing secrets at rest, signed tokens, password hashing,
//! the egress policy for server-side requests, rate limiting and the job poller.

pub mod data_migrations;
pub mod db;
pub mod egress;
pub mod job_poll;
pub mod migrate;
pub mod password;
pub mod rate_limit;
pub mod sealing;
pub mod sql_files;
pub mod tokens;
