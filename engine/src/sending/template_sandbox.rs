//! Tenants' templates, rendered in child processes that the kernel holds to a memory limit.
//!
//! MiniJinja's fuel bounds instructions, not memory: `{% set a = a ~ a %}` written 35 times is
//! about 150 instructions and 32 GiB, and a list that holds itself twice, nested 35 deep, costs
//! nothing until it is printed. Rust aborts the whole process when an allocation fails, so no
//! check inside the process can refuse one, and a list of every operation that can grow a value
//! would be one MiniJinja release away from incomplete. The bound that holds whatever a template
//! does is the kernel's: every render runs in a `herald render-sandbox` child whose address space
//! is capped with `RLIMIT_AS`, so a template that asks for too much kills only its own child. The
//! caller gets a template error, the next render gets a fresh child, and the server's memory never
//! moves. The child also stops any render that runs longer than [`RENDER_TIMEOUT`] (few
//! instructions can still mean minutes of copying), and output is capped while it is written.
//!
//! Parsing stays in the calling process (it is linear in the source, which callers cap), so
//! syntax errors keep their positions without a round trip. Children are pooled and keep the
//! parsed templates of recent [`TemplateSet`]s, so rendering a campaign for one reader is one
//! round trip carrying that reader's variables.
//!
//! Renders never run on the async runtime's threads: the round trip to a child is blocking pipe
//! I/O, so it runs on tokio's blocking pool, and [`admit`] bounds how many run at once (as many
//! as the machine has cores across the process, two per workspace). A send waits for its turn;
//! a request someone is waiting on is refused with [`Busy`] (429) instead of queueing behind a
//! workspace that is rendering templates that run to the time limit. Children run at the lowest
//! CPU priority, so logins, tracking and delivery win the cores while a render is burning them.
//!
//! Wire format, both ways: a 4-byte little-endian length, then that many bytes of JSON.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use herald_types::TenantId;
use minijinja::{AutoEscape, Environment, UndefinedBehavior, Value};
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::sending::message::{self, TemplateError};

/// MiniJinja instructions one render may execute: far above any real message, low enough that a
/// runaway loop fails in milliseconds.
const FUEL: u64 = 1_000_000;
/// Text one template may produce, checked as it is written.
pub const MAX_OUTPUT_BYTES: usize = 2 * 1024 * 1024;
/// Address space a child may take beyond what it had when it started.
const CHILD_MEMORY_BYTES: u64 = 256 * 1024 * 1024;
/// The longest one render may take before its child gives up.
const RENDER_TIMEOUT: Duration = Duration::from_secs(5);
/// Exit code of a child that stopped a render for taking too long: this plus the index (in the
/// request's names) of the template it was rendering, so the caller knows which one, without
/// rendering the others again one by one (each at up to the full time limit).
const EXIT_TIMED_OUT_AT: i32 = 80;
/// Template indexes an exit code can carry.
const TIMED_OUT_INDEXES: i32 = 32;
/// Idle children kept for the next render; more are started when renders overlap.
const MAX_IDLE_CHILDREN: usize = 8;
/// Parsed template sets a child keeps; past this it forgets them all and reparses on demand.
const MAX_CACHED_SETS: usize = 64;
/// Largest frame either side accepts: a few templates' worth of output, JSON-escaped.
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// Renders one workspace may have running at once.
const RENDERS_PER_WORKSPACE: usize = 2;
/// How long a request waits for a turn to render before it is refused.
const REQUEST_WAIT: Duration = Duration::from_secs(1);
/// CPU priority of a child (`nice`): the lowest, so the server's own threads always win.
const CHILD_NICENESS: i32 = 19;
/// The hidden `herald` subcommand that runs [`child_main`].
pub const CHILD_COMMAND: &str = "render-sandbox";

/// How a family of templates treats values: each maps to one MiniJinja configuration, built the
/// same way in the caller (to parse) and in the child (to render).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dialect {
    /// Campaigns: a missing value prints nothing; `"body"` is HTML-escaped and, for Markdown
    /// bodies, Markdown-escaped too.
    Campaign { markdown: bool },
    /// Transactional templates: a missing value is an error; `"html"` is HTML-escaped.
    Transactional,
}

impl Dialect {
    fn environment(self) -> Environment<'static> {
        let (escaped, undefined, markdown) = match self {
            Dialect::Campaign { markdown } => ("body", UndefinedBehavior::Chainable, markdown),
            Dialect::Transactional => ("html", UndefinedBehavior::Strict, false),
        };
        let mut env = Environment::new();
        env.set_undefined_behavior(undefined);
        env.set_debug(true);
        env.set_fuel(Some(FUEL));
        env.set_auto_escape_callback(move |name| if name == escaped { AutoEscape::Html } else { AutoEscape::None });
        // Herald's escaping: `&<>"'` only, so URLs in `href="{{ url }}"` stay URLs (MiniJinja's
        // own escapes `/` too, which hides links from click tracking).
        env.set_formatter(move |out, state, value| message::format_value(out, state.auto_escape(), markdown, value));
        env
    }
}

/// Why a render produced no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderFailure {
    pub error: TemplateError,
    /// The template's own fault whatever the data (an unknown filter, a runaway loop, a template
    /// that needs too much memory), as opposed to one reader's data (`length` of a missing value).
    pub mistake: bool,
}

/// Parsed templates of one dialect, rendered in a sandbox child.
pub struct TemplateSet {
    /// Names this set to the children that have parsed it.
    id: u64,
    dialect: Dialect,
    sources: Vec<(&'static str, String)>,
    /// Unit tests render here, without a child.
    #[cfg(test)]
    env: Environment<'static>,
}

impl TemplateSet {
    /// Parses every template; the first syntax error is returned with its position.
    pub fn parse(dialect: Dialect, sources: Vec<(&'static str, String)>) -> Result<Self, TemplateError> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let mut env = dialect.environment();
        for (name, src) in &sources {
            env.add_template_owned(*name, src.clone()).map_err(|e| message::template_error(name, src, &e))?;
        }
        Ok(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            dialect,
            sources,
            #[cfg(test)]
            env,
        })
    }

    pub fn source(&self, name: &str) -> &str {
        self.sources.iter().find(|(n, _)| *n == name).map_or("", |(_, s)| s.as_str())
    }

    /// Renders each of `names` with `vars`, in one round trip to a sandbox child, when `turn`
    /// is admitted (see [`admit`]).
    pub async fn render(
        self: &Arc<Self>,
        turn: Turn,
        names: &[&'static str],
        vars: &Value,
    ) -> Result<Vec<Result<String, RenderFailure>>, Busy> {
        Ok(self.render_each(turn, names, std::slice::from_ref(vars)).await?.pop().unwrap_or_default())
    }

    /// [`Self::render`] for several sets of variables (one reader each) in one round trip: a
    /// send renders its claimed batch at once instead of paying a round trip per reader.
    pub async fn render_each(
        self: &Arc<Self>,
        turn: Turn,
        names: &[&'static str],
        vars: &[Value],
    ) -> Result<Vec<Vec<Result<String, RenderFailure>>>, Busy> {
        let slot = admit(turn).await?;
        let count = (vars.len(), names.len());
        let outcomes: Vec<Vec<Result<String, Failure>>> = match renderer() {
            #[cfg(test)]
            Renderer::InProcess => {
                let _slot = slot;
                vars.iter()
                    .map(|v| names.iter().map(|name| render_here(&self.env, name, self.source(name), v)).collect())
                    .collect()
            }
            Renderer::Children(pool) => {
                // The round trip blocks on pipes for up to RENDER_TIMEOUT: never on a runtime
                // thread. The slot goes with it: a caller that gives up (a client that hangs up)
                // does not free a turn while its child still renders.
                let (set, names, vars) = (Arc::clone(self), names.to_vec(), vars.to_vec());
                tokio::task::spawn_blocking(move || {
                    let _slot = slot;
                    pool.render(&set, &names, &vars)
                })
                .await
                .unwrap_or_else(|_| vec![vec![Err(Failure::unavailable()); count.1]; count.0])
            }
        };
        // A sandbox that could not answer says nothing of the template or the readers: the
        // caller tries again later (a send keeps its rows queued), instead of failing each reader
        // of the batch for good as it would for a template error in their data.
        if outcomes.iter().flatten().any(|o| o.as_ref().is_err_and(|f| f.unavailable)) {
            return Err(unavailable());
        }
        Ok(outcomes
            .into_iter()
            .map(|one| names.iter().zip(one).map(|(name, outcome)| outcome.map_err(|f| f.into_failure(name))).collect())
            .collect())
    }

    /// [`Self::render`] for one template.
    pub async fn render_one(
        self: &Arc<Self>,
        turn: Turn,
        name: &'static str,
        vars: &Value,
    ) -> Result<Result<String, RenderFailure>, Busy> {
        self.render(turn, &[name], vars).await?.pop().ok_or_else(unavailable)
    }
}

/// A failure as it crosses the pipe (the caller knows which template it asked for).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Failure {
    line: Option<usize>,
    column: Option<usize>,
    message: String,
    mistake: bool,
    /// No child could answer (none could be started, or the render's thread failed): nothing
    /// about the template or the reader, so the caller must try again, never fail the reader.
    /// Made on this side of the pipe only.
    #[serde(skip)]
    unavailable: bool,
}

impl Failure {
    fn from_error(src: &str, e: &minijinja::Error) -> Self {
        let TemplateError { line, column, message, .. } = message::template_error("", src, e);
        Failure { line, column, message, mistake: message::is_template_mistake(e), unavailable: false }
    }

    fn limit(message: String) -> Self {
        Failure { line: None, column: None, message, mistake: true, unavailable: false }
    }

    fn unavailable() -> Self {
        Failure { line: None, column: None, message: UNAVAILABLE.into(), mistake: false, unavailable: true }
    }

    fn into_failure(self, field: &'static str) -> RenderFailure {
        RenderFailure {
            error: TemplateError { field, line: self.line, column: self.column, message: self.message, block: None },
            mistake: self.mistake,
        }
    }
}

/// Renders in this process, writing through [`CappedOutput`]: what the child runs, and what unit
/// tests run without one.
fn render_here(env: &Environment<'static>, name: &str, src: &str, vars: &Value) -> Result<String, Failure> {
    if src.trim().is_empty() {
        return Ok(String::new());
    }
    let mut out = CappedOutput(Vec::new());
    match env.get_template(name).and_then(|t| t.render_captured_to(vars, &mut out).map(drop)) {
        Ok(_) => Ok(String::from_utf8(out.0).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())),
        Err(_) if out.0.len() > MAX_OUTPUT_BYTES => {
            Err(Failure::limit(format!("the rendered text is larger than {} MB", MAX_OUTPUT_BYTES / (1024 * 1024))))
        }
        Err(e) => Err(Failure::from_error(src, &e)),
    }
}

/// A buffer that refuses to grow past [`MAX_OUTPUT_BYTES`] (its length is left just past the
/// cap, so the caller can tell this error from the template's own).
struct CappedOutput(Vec<u8>);

impl Write for CappedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.0.len() + buf.len() > MAX_OUTPUT_BYTES {
            self.0.resize(MAX_OUTPUT_BYTES + 1, 0);
            return Err(io::Error::other("output limit"));
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Turns: how many renders run at once
// ---------------------------------------------------------------------------------------------

/// Whose render this is, and whether it may wait for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    tenant: TenantId,
    waits: bool,
}

impl Turn {
    /// A send in the background: waits for its turn however long that takes.
    pub fn background(tenant: TenantId) -> Self {
        Turn { tenant, waits: true }
    }

    /// A request someone is waiting on (a preview, a save, the messages API): refused with
    /// [`Busy`] when no turn comes within [`REQUEST_WAIT`] (its workspace's share, or the whole
    /// process, busy with renders).
    pub fn request(tenant: TenantId) -> Self {
        Turn { tenant, waits: false }
    }
}

const UNAVAILABLE: &str = "templates cannot be rendered right now; try again in a moment";

/// No sandbox child could render: like a refused turn, a moment's wait, not a failure of the
/// template.
fn unavailable() -> Busy {
    Busy { message: UNAVAILABLE.into(), retry_after: RENDER_TIMEOUT }
}

/// A render refused because too many are running, or because no sandbox child could answer; the
/// caller answers 429 with `Retry-After`, and a send tries again later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Busy {
    pub message: String,
    pub retry_after: Duration,
}

impl From<Busy> for crate::Error {
    fn from(b: Busy) -> Self {
        crate::Error::Busy { message: b.message, retry_after_secs: b.retry_after.as_secs().max(1) }
    }
}

/// A turn to render: one of the process's slots and one of the workspace's.
pub struct Slot {
    _process: OwnedSemaphorePermit,
    _workspace: WorkspaceSlot,
}

/// The workspace's permit; the workspace's semaphore is forgotten when its last render ends.
struct WorkspaceSlot {
    tenant: TenantId,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for WorkspaceSlot {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut map = WORKSPACE_SLOTS.lock().unwrap_or_else(|p| p.into_inner());
        // One reference is the map's: nobody else holds or waits for this semaphore.
        if map.get(&self.tenant).is_some_and(|s| Arc::strong_count(s) == 1) {
            map.remove(&self.tenant);
        }
    }
}

static PROCESS_SLOTS: OnceLock<Arc<Semaphore>> = OnceLock::new();
static WORKSPACE_SLOTS: std::sync::LazyLock<Mutex<HashMap<TenantId, Arc<Semaphore>>>> =
    std::sync::LazyLock::new(Mutex::default);

/// One render slot per core: more children than cores only makes each render slower.
fn process_slots() -> Arc<Semaphore> {
    Arc::clone(PROCESS_SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Arc::new(Semaphore::new(cores))
    }))
}

/// Waits for (or refuses) a turn to render: the workspace's slot first, so a workspace that
/// floods the queue holds at most [`RENDERS_PER_WORKSPACE`] of the process's slots. A request
/// waits at most [`REQUEST_WAIT`] for both together (a send's own quick renders free their slots
/// in milliseconds; a flood of slow templates does not).
pub async fn admit(turn: Turn) -> Result<Slot, Busy> {
    let workspace = {
        let mut map = WORKSPACE_SLOTS.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(map.entry(turn.tenant).or_insert_with(|| Arc::new(Semaphore::new(RENDERS_PER_WORKSPACE))))
    };
    let mut workspace_slot = WorkspaceSlot { tenant: turn.tenant, permit: None };
    let deadline = tokio::time::Instant::now() + REQUEST_WAIT;
    let busy = |message: &str| Busy { message: message.into(), retry_after: RENDER_TIMEOUT };
    let workspace_permit = if turn.waits {
        Arc::clone(&workspace).acquire_owned().await.ok()
    } else {
        tokio::time::timeout_at(deadline, Arc::clone(&workspace).acquire_owned()).await.ok().and_then(Result::ok)
    };
    drop(workspace);
    workspace_slot.permit = Some(
        workspace_permit
            .ok_or_else(|| busy("This workspace is already rendering two templates; try again when they finish."))?,
    );
    let process = process_slots();
    let process_permit = if turn.waits {
        process.acquire_owned().await.ok()
    } else {
        tokio::time::timeout_at(deadline, process.acquire_owned()).await.ok().and_then(Result::ok)
    };
    let process_permit = process_permit
        .ok_or_else(|| busy("Herald is rendering many templates right now; try again in a few seconds."))?;
    Ok(Slot { _process: process_permit, _workspace: workspace_slot })
}

// ---------------------------------------------------------------------------------------------
// The caller's side: a pool of children
// ---------------------------------------------------------------------------------------------

enum Renderer {
    /// Unit tests of this crate have no `herald` binary to start.
    #[cfg(test)]
    InProcess,
    Children(Pool),
}

static RENDERER: OnceLock<Renderer> = OnceLock::new();

fn renderer() -> &'static Renderer {
    #[cfg(test)]
    let default = || Renderer::InProcess;
    #[cfg(not(test))]
    let default = || Renderer::Children(Pool::new(std::env::current_exe().unwrap_or_else(|_| "herald".into())));
    RENDERER.get_or_init(default)
}

/// Renders through `program render-sandbox` instead of this executable: for test binaries,
/// which are not `herald`. Only the first call counts, and only before the first render.
pub fn use_program(program: impl Into<PathBuf>) {
    let _ = RENDERER.set(Renderer::Children(Pool::new(program.into())));
}

struct Pool {
    program: PathBuf,
    idle: Mutex<Vec<Worker>>,
}

/// A running child and the template sets it has parsed.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    parsed: HashSet<u64>,
}

#[derive(Serialize)]
struct RequestOut<'a> {
    set: u64,
    dialect: Dialect,
    /// Sent only to a child that has not parsed this set (or has forgotten it).
    sources: Option<&'a [(&'static str, String)]>,
    names: &'a [&'static str],
    /// One set per reader; every name is rendered with each.
    vars: &'a [Value],
}

#[derive(Deserialize)]
struct RequestIn {
    set: u64,
    dialect: Dialect,
    sources: Option<Vec<(String, String)>>,
    names: Vec<String>,
    vars: Vec<serde_json::Value>,
}

/// Outcomes per set of variables, then per name.
type Outcomes = Vec<Vec<Result<String, Failure>>>;

#[derive(Serialize, Deserialize)]
enum Response {
    Rendered(Outcomes),
    /// The request named a set this child does not have: send it again with the sources.
    UnknownSet,
}

/// How a round trip to a child went wrong.
enum Fault {
    /// The child is gone: it hit its memory limit, its time limit, or something killed it.
    Died(Option<std::process::ExitStatus>),
    /// The request could not be written or the answer made no sense.
    Broken(io::Error),
}

impl Pool {
    fn new(program: PathBuf) -> Self {
        Pool { program, idle: Mutex::new(Vec::new()) }
    }

    fn render(&self, set: &TemplateSet, names: &[&'static str], vars: &[Value]) -> Outcomes {
        match self.render_together(set, names, vars) {
            Ok(outcomes) => outcomes,
            // A child that died took the whole request with it; render its parts one by one so
            // that the error lands on the reader, and the template, that needs too much.
            Err((f, _)) if f.mistake && vars.len() > 1 => vars
                .iter()
                .map(|v| self.render(set, names, std::slice::from_ref(v)).pop().unwrap_or_default())
                .collect(),
            // One reader, and the child said which template ran out of time: the ones before it
            // finished (they are rendered again for their text, quickly), the ones after it never
            // ran. Callers take the first failure in order, so `at`'s is the one they report.
            Err((f, Some(at))) if at < names.len() => {
                let mut one = if at == 0 {
                    Vec::new()
                } else {
                    match self.render_together(set, &names[..at], vars) {
                        Ok(mut done) => done.pop().unwrap_or_default(),
                        Err((e, _)) => vec![Err(e); at],
                    }
                };
                one.extend(std::iter::repeat_n(Err(f), names.len() - at));
                vec![one]
            }
            Err((f, _)) if f.mistake && names.len() > 1 => vec![
                names
                    .iter()
                    .map(|name| match self.render_together(set, std::slice::from_ref(name), vars) {
                        Ok(mut one) => {
                            one.pop().and_then(|mut o| o.pop()).unwrap_or_else(|| Err(Failure::unavailable()))
                        }
                        Err((f, _)) => Err(f),
                    })
                    .collect(),
            ],
            Err((f, _)) => vars.iter().map(|_| names.iter().map(|_| Err(f.clone())).collect()).collect(),
        }
    }

    /// One request for all of `names`; `Err` when no child could answer it, with the index of
    /// the template that ran out of time when that is why.
    fn render_together(
        &self,
        set: &TemplateSet,
        names: &[&'static str],
        vars: &[Value],
    ) -> Result<Outcomes, (Failure, Option<usize>)> {
        // A child killed from outside (the OOM killer, an operator) is not the template's fault:
        // the render is tried once more on a fresh child before it is blamed.
        for attempt in 0..2 {
            let mut worker = self.take().map_err(|e| {
                tracing::error!(error = %e, program = %self.program.display(), "cannot start a template sandbox");
                (Failure::unavailable(), None)
            })?;
            match worker.exchange(set, names, vars) {
                Ok(outcomes) => {
                    self.give_back(worker);
                    return Ok(outcomes);
                }
                Err(Fault::Died(status)) => {
                    tracing::warn!(?status, template_set = set.id, "a template sandbox child died");
                    if let Some(code) = status.and_then(|s| s.code())
                        && (EXIT_TIMED_OUT_AT..EXIT_TIMED_OUT_AT + TIMED_OUT_INDEXES).contains(&code)
                    {
                        let limit = RENDER_TIMEOUT.as_secs();
                        let at = usize::try_from(code - EXIT_TIMED_OUT_AT).ok();
                        return Err((Failure::limit(format!("rendering took longer than {limit} seconds")), at));
                    }
                    // SIGABRT is how a Rust process ends when an allocation fails.
                    if status.and_then(|s| s.signal()) == Some(6) || attempt == 1 {
                        let limit = CHILD_MEMORY_BYTES / (1024 * 1024);
                        let f = Failure::limit(format!("the template needs more than {limit} MB of memory"));
                        return Err((f, None));
                    }
                }
                Err(Fault::Broken(e)) => {
                    tracing::error!(error = %e, template_set = set.id, "a template sandbox child misbehaved");
                    worker.kill();
                    return Err((Failure::unavailable(), None));
                }
            }
        }
        Err((Failure::unavailable(), None))
    }

    fn take(&self) -> io::Result<Worker> {
        if let Some(w) = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return Ok(w);
        }
        let mut child = Command::new(&self.program)
            .arg(CHILD_COMMAND)
            // The child needs nothing from the environment; secrets stay out of it.
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the child has no pipes"));
        };
        Ok(Worker { child, stdin, stdout, parsed: HashSet::new() })
    }

    fn give_back(&self, worker: Worker) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_CHILDREN {
            idle.push(worker);
        } else {
            drop(idle);
            worker.kill();
        }
    }
}

impl Worker {
    fn exchange(&mut self, set: &TemplateSet, names: &[&'static str], vars: &[Value]) -> Result<Outcomes, Fault> {
        let mut with_sources = !self.parsed.contains(&set.id);
        loop {
            let request = RequestOut {
                set: set.id,
                dialect: set.dialect,
                sources: with_sources.then_some(set.sources.as_slice()),
                names,
                vars,
            };
            let body = serde_json::to_vec(&request).map_err(|e| Fault::Broken(e.into()))?;
            if write_frame(&mut self.stdin, &body).is_err() {
                return Err(self.died());
            }
            let answer = match read_frame(&mut self.stdout) {
                Ok(Some(answer)) => answer,
                Ok(None) | Err(_) => return Err(self.died()),
            };
            match serde_json::from_slice(&answer).map_err(|e| Fault::Broken(e.into()))? {
                Response::Rendered(outcomes)
                    if outcomes.len() == vars.len() && outcomes.iter().all(|o| o.len() == names.len()) =>
                {
                    self.parsed.insert(set.id);
                    return Ok(outcomes);
                }
                Response::Rendered(_) => return Err(Fault::Broken(io::Error::other("wrong number of renders"))),
                Response::UnknownSet if !with_sources => {
                    self.parsed.clear();
                    with_sources = true;
                }
                Response::UnknownSet => return Err(Fault::Broken(io::Error::other("sources sent but not kept"))),
            }
        }
    }

    fn died(&mut self) -> Fault {
        // Closing stdin ends a child that is merely confused; one that is gone is reaped.
        let _ = self.child.kill();
        Fault::Died(self.child.wait().ok())
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(body)?;
    w.flush()
}

/// `None` at a clean end of input.
fn read_frame(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(io::Error::other("frame too large"));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

// ---------------------------------------------------------------------------------------------
// The child's side
// ---------------------------------------------------------------------------------------------

/// The `herald render-sandbox` process: renders requests from stdin until it closes. Started
/// only by [`Pool`]; never reads files, the network or the environment.
pub fn child_main() -> io::Result<()> {
    // The watchdog is started before the memory cap so that its stack is part of the baseline.
    let deadline = Arc::new(Mutex::new(None::<Instant>));
    // Which of the request's templates is rendering, for the exit code of a timeout.
    let rendering = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (watched, watched_rendering) = (Arc::clone(&deadline), Arc::clone(&rendering));
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let overdue = watched.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|d| Instant::now() > d);
            if overdue {
                let at = watched_rendering.load(Ordering::Relaxed).min(TIMED_OUT_INDEXES as usize - 1);
                std::process::exit(EXIT_TIMED_OUT_AT + at as i32);
            }
        }
    });
    cap_address_space()?;
    // Below everything else on the machine: the server's threads win the cores while a render
    // burns one. Failing to lower priority is not a reason to refuse to render.
    let _ = rustix::process::setpriority_process(None, CHILD_NICENESS);

    let mut stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    let mut sets: HashMap<u64, (Environment<'static>, Vec<(String, String)>)> = HashMap::new();
    while let Some(frame) = read_frame(&mut stdin)? {
        let request: RequestIn = serde_json::from_slice(&frame).map_err(io::Error::other)?;
        if let Some(sources) = request.sources {
            if sets.len() >= MAX_CACHED_SETS {
                sets.clear();
            }
            let mut env = request.dialect.environment();
            for (name, src) in &sources {
                // The caller parsed these already; a failure here shows at render as "not found".
                let _ = env.add_template_owned(name.clone(), src.clone());
            }
            sets.insert(request.set, (env, sources));
        }
        let response = match sets.get(&request.set) {
            None => Response::UnknownSet,
            Some((env, sources)) => {
                let mut outcomes = Vec::with_capacity(request.vars.len());
                for vars in &request.vars {
                    let vars = Value::from_serialize(vars);
                    // Each reader has the whole time limit: a batch of quick renders is fine.
                    *deadline.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + RENDER_TIMEOUT);
                    let one: Vec<Result<String, Failure>> = request
                        .names
                        .iter()
                        .enumerate()
                        .map(|(i, name)| {
                            rendering.store(i, Ordering::Relaxed);
                            let src = sources.iter().find(|(n, _)| n == name).map_or("", |(_, s)| s.as_str());
                            render_here(env, name, src, &vars)
                        })
                        .collect();
                    outcomes.push(one);
                }
                *deadline.lock().unwrap_or_else(|p| p.into_inner()) = None;
                Response::Rendered(outcomes)
            }
        };
        write_frame(&mut stdout, &serde_json::to_vec(&response).map_err(io::Error::other)?)?;
    }
    Ok(())
}

/// Caps this process's address space at what it uses now plus [`CHILD_MEMORY_BYTES`].
fn cap_address_space() -> io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    // statm's first field is the total program size in pages.
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let page_size = rustix::param::page_size() as u64;
    let cap = pages * page_size + CHILD_MEMORY_BYTES;
    setrlimit(Resource::As, Rlimit { current: Some(cap), maximum: Some(cap) }).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(body: &str) -> Arc<TemplateSet> {
        Arc::new(
            TemplateSet::parse(Dialect::Campaign { markdown: false }, vec![("body", body.to_string())])
                .expect("parses"),
        )
    }

    fn turn() -> Turn {
        Turn::background(TenantId::new())
    }

    #[tokio::test]
    async fn output_is_capped_while_it_is_written() {
        let set = campaign("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}");
        let e = set.render_one(turn(), "body", &minijinja::context! {}).await.expect("a turn").expect_err("too large");
        assert!(e.mistake);
        assert!(e.error.message.contains("larger than 2 MB"), "{}", e.error);
    }

    #[tokio::test]
    async fn failures_name_their_template_and_position() {
        let set = campaign("line\n{{ reader.name | nosuchfilter }}");
        let e =
            set.render_one(turn(), "body", &minijinja::context! {}).await.expect("a turn").expect_err("unknown filter");
        assert_eq!((e.error.field, e.error.line), ("body", Some(2)));
        assert!(e.mistake);
    }

    #[tokio::test]
    async fn a_batch_renders_each_reader_and_keeps_failures_to_their_reader() {
        let set = campaign("Hi {{ name }}{% if fail %}{{ fail | length }}{% endif %}");
        let vars = [minijinja::context! { name => "A" }, minijinja::context! { name => "B", fail => true }];
        let out = set.render_each(turn(), &["body"], &vars).await.expect("a turn");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0][0].as_deref().ok(), Some("Hi A"));
        assert!(out[1][0].as_ref().is_err_and(|e| !e.mistake), "{:?}", out[1]);
    }

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        write_frame(&mut buf, b"{\"a\":1}").expect("writes");
        let mut r = buf.as_slice();
        assert_eq!(read_frame(&mut r).expect("reads").as_deref(), Some(&b"{\"a\":1}"[..]));
        assert!(read_frame(&mut r).expect("clean end").is_none());
    }
}
