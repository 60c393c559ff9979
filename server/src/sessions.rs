//! Herald's own tower-sessions store on the main sqlx 0.9 pool.
//!
//! Why not tower-sessions-sqlx-store: it is built on sqlx 0.8, which would put a second sqlx and
//! a second connection pool in the binary. This store is ~60 lines against one small table.

use async_trait::async_trait;
use sqlx::PgPool;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};

#[derive(Clone, Debug)]
pub struct PgSessionStore {
    pool: PgPool,
}

impl PgSessionStore {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Deletes expired sessions; run periodically.
    pub async fn delete_expired(&self) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query("DELETE FROM sessions WHERE expiry_date < now()").execute(&self.pool).await?.rows_affected())
    }
}

fn backend(e: impl std::fmt::Display) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

fn expiry_secs(record: &Record) -> f64 {
    record.expiry_date.unix_timestamp() as f64
}

#[async_trait]
impl SessionStore for PgSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        // A fresh id on the (astronomically unlikely) collision rather than overwriting.
        loop {
            let data = serde_json::to_value(&record.data).map_err(|e| session_store::Error::Encode(e.to_string()))?;
            let inserted = sqlx::query(
                "INSERT INTO sessions (id, data, expiry_date) VALUES ($1, $2, to_timestamp($3))
                 ON CONFLICT (id) DO NOTHING",
            )
            .bind(record.id.to_string())
            .bind(data)
            .bind(expiry_secs(record))
            .execute(&self.pool)
            .await
            .map_err(backend)?
            .rows_affected();
            if inserted == 1 {
                return Ok(());
            }
            record.id = Id::default();
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let data = serde_json::to_value(&record.data).map_err(|e| session_store::Error::Encode(e.to_string()))?;
        sqlx::query(
            "INSERT INTO sessions (id, data, expiry_date) VALUES ($1, $2, to_timestamp($3))
             ON CONFLICT (id) DO UPDATE SET data = excluded.data, expiry_date = excluded.expiry_date",
        )
        .bind(record.id.to_string())
        .bind(data)
        .bind(expiry_secs(record))
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let row: Option<(serde_json::Value, f64)> = sqlx::query_as(
            "SELECT data, extract(epoch FROM expiry_date)::float8 FROM sessions WHERE id = $1 AND expiry_date > now()",
        )
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?;
        let Some((data, expiry)) = row else { return Ok(None) };
        let data = serde_json::from_value(data).map_err(|e| session_store::Error::Decode(e.to_string()))?;
        let expiry_date = time::OffsetDateTime::from_unix_timestamp(expiry as i64)
            .map_err(|e| session_store::Error::Decode(e.to_string()))?;
        Ok(Some(Record { id: *id, data, expiry_date }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        sqlx::query("DELETE FROM sessions WHERE id = $1")
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(backend)?;
        Ok(())
    }
}
