//! A Postgres cluster the harness owns: initdb in a temporary directory, so that a round can
//! restart it (`pg_ctl restart -m immediate`) and throw it away afterwards.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::process::Command;

/// The cluster, stopped (`-m immediate`) and deleted when dropped.
pub(super) struct OwnedPostgres {
    pub(super) dir: PathBuf,
    bindir: PathBuf,
    pub(super) port: u16,
}

impl OwnedPostgres {
    pub(super) async fn start() -> anyhow::Result<Self> {
        let bindir = pg_bindir().context("no PostgreSQL server binaries (initdb) found")?;
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("herald-chaos-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let pg = Self { dir, bindir, port };
        if is_root() {
            run_ok(Command::new("chown").arg("-R").arg("postgres:postgres").arg(&pg.dir)).await?;
        }
        pg.pg_cmd("initdb", &["-D", &pg.data(), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C"])
            .await?;
        // Durable enough for the question asked (a restart -m immediate still recovers from the
        // WAL; fsync only matters to a power cut), fast enough for a short run.
        let conf = "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = 300\n\
                    fsync = off\nfull_page_writes = off\n";
        let conf_path = Path::new(&pg.data()).join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)?;
        text.push_str(conf);
        std::fs::write(&conf_path, text)?;
        pg.ctl(&["start"]).await?;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    pub(super) fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    async fn ctl(&self, extra: &[&str]) -> anyhow::Result<()> {
        let log = self.dir.join("pg.log").display().to_string();
        let port = format!("-p {}", self.port);
        let data = self.data();
        let mut args = vec!["-D", &data, "-l", &log, "-o", &port, "-w", "-t", "60"];
        args.extend_from_slice(extra);
        self.pg_cmd("pg_ctl", &args).await
    }

    /// `pg_ctl restart -m immediate`: every connection dies, the server recovers from its WAL.
    pub(super) async fn restart_immediate(&self) -> anyhow::Result<()> {
        self.ctl(&["-m", "immediate", "restart"]).await
    }

    async fn pg_cmd(&self, tool: &str, args: &[&str]) -> anyhow::Result<()> {
        let exe = self.bindir.join(tool);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.arg("-u").arg("postgres").arg("--").arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args);
        run_ok(&mut cmd).await
    }
}

impl Drop for OwnedPostgres {
    fn drop(&mut self) {
        let exe = self.bindir.join("pg_ctl");
        let data = self.data();
        let mut cmd = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.arg("-u").arg("postgres").arg("--").arg(&exe);
            c
        } else {
            std::process::Command::new(&exe)
        };
        let _ = cmd.args(["-D", &data, "-m", "immediate", "stop"]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    // SAFETY-free check: root's home and uid 0 show in /proc/self/status.
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn pg_bindir() -> Option<PathBuf> {
    if let Ok(out) = std::process::Command::new("sh").arg("-c").arg("command -v initdb").output()
        && out.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        return std::fs::canonicalize(p).ok()?.parent().map(Path::to_path_buf);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort_by_key(|p| p.parent().and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok()).unwrap_or(0));
    found.pop()
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn run_ok(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.stdin(Stdio::null()).output().await?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}{}",
            cmd.as_std(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
