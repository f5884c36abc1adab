//! The executor: tokio-postgres clients on a thread of their own, called synchronously.
//!
//! The store's methods are plain functions, called from threads and from async code alike,
//! and tokio-postgres is async (its blocking wrapper, the `postgres` crate, panics inside a
//! tokio runtime). So one thread, `trellis-store-pg`, runs a current-thread runtime that owns
//! every connection, and a caller hands it a [`Job`] — a boxed closure making the future to
//! run with a connection — and blocks on a std channel for the answer, which is allowed in
//! async code as well (the SQLite store's writer is called the same way).
//!
//! The connections serve two lanes:
//!
//! * the **write** lane: one connection, one job at a time in the order they were sent (the
//!   SQLite writer's order). This is where a group-committing writer goes: a job that drains
//!   the queued writes into one transaction. [`Executor::post`] and [`Executor::post_write`]
//!   send a job without waiting for it, and every job sent to the lane gets a **ticket**, its
//!   number in the lane's order, so a writer can tell whether a job it queued is still the
//!   lane's last ([`Executor::last_write_ticket`]) and may still take writes sent after it.
//! * the **read** lane: a few connections (`PgOptions::readers`), each taking the next
//!   queued job, so reads run side by side; their sessions are
//!   `default_transaction_read_only`, so a bug there cannot write behind the writer's back.
//!
//! A connection is opened when its lane first needs it (the writer's at start, for the
//! migrations) and again after it was closed — the server restarted or cut it off — so the
//! next job after a failure reconnects. Each job runs as a task of its own: one that panics
//! loses its connection (the server rolls back what it had begun) and its caller gets
//! [`PgError::Closed`], the lane goes on. A job must not call the store itself: the lane
//! it would wait for is the one it occupies.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, PoisonError, Weak};
use std::thread::JoinHandle;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::{Mutex, Notify, broadcast};
use tokio_postgres::{Client, Config, NoTls};

use super::error::PgError;
use super::{PgOptions, schema};
use crate::Synchronous;

/// What a job's future answers: the connection, back to its lane (none when the job had
/// none).
type Done = Pin<Box<dyn Future<Output = Option<Client>>>>;

/// A request to the executor's thread: given its lane's connection (or the error opening
/// it), makes the future that runs the request, answers the caller and gives the
/// connection back.
pub(crate) type Job = Box<dyn FnOnce(Result<Client, PgError>) -> Done + Send>;

/// Which connections a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// The one writing connection, in order.
    Write,
    /// Any of the reading connections.
    Read,
}

/// The executor's handle; dropping it lets the thread finish the queued jobs and stop.
pub(crate) struct Executor {
    url: Arc<str>,
    write: Option<UnboundedSender<Job>>,
    /// The tickets handed out on the write lane so far, locked while a job is sent so tickets
    /// follow the lane's order.
    write_tickets: std::sync::Mutex<u64>,
    read: Option<UnboundedSender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Asks the thread to start listening for notifications (sent once, by the first
    /// [`Executor::watch`]).
    listen: Option<UnboundedSender<()>>,
    listening: std::sync::atomic::AtomicBool,
    notices: broadcast::Sender<Arc<str>>,
    signals: InboxSignals,
}

/// The inbox signals of the runs executing in this process, by run id
/// ([`Executor::inbox_signal`]); the listener fires one when its run's `inbox:<run>`
/// notification arrives.
type InboxSignals = Arc<std::sync::Mutex<HashMap<String, Weak<Notify>>>>;

/// Opens connections for the lanes.
struct Connector {
    config: Config,
    /// The database's name, for messages.
    database: String,
    url: Arc<str>,
    synchronous: Synchronous,
    /// The tasks serving the connections' sockets, awaited at shutdown so each closes
    /// cleanly (it sends the server `Terminate` once its client is dropped).
    sockets: RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

impl Connector {
    /// Connects and prepares the session for `lane`.
    async fn open(&self, lane: Lane) -> Result<Client, PgError> {
        let (client, connection) = self
            .config
            .connect(NoTls)
            .await
            .map_err(|e| PgError::connect(&self.url, &self.database, &e))?;
        // The connection's socket is served by a task of its own; when it ends (the server
        // closed it), the client reports `is_closed` and the lane reconnects.
        let socket = tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        {
            let mut sockets = self.sockets.borrow_mut();
            sockets.retain(|s| !s.is_finished());
            sockets.push(socket);
        }
        let setup = match (lane, self.synchronous) {
            (Lane::Read, _) => Some("SET default_transaction_read_only = on"),
            (Lane::Write, Synchronous::Normal) => Some("SET synchronous_commit = off"),
            (Lane::Write, Synchronous::Full) => None,
        };
        if let Some(sql) = setup {
            client
                .batch_execute(sql)
                .await
                .map_err(|e| PgError::query(&self.url, e))?;
        }
        Ok(client)
    }
}

impl Executor {
    /// Starts the thread, connects the writer and migrates the database; answers the
    /// executor and the schema version once the database is ready.
    pub(crate) fn start(
        config: Config,
        database: String,
        url: Arc<str>,
        options: PgOptions,
    ) -> Result<(Executor, i64), PgError> {
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (write, write_rx) = unbounded_channel();
        let (read, read_rx) = unbounded_channel();
        let (listen, listen_rx) = unbounded_channel();
        let (notices, _) = broadcast::channel(NOTICES);
        let signals = InboxSignals::default();
        let listener = Listener {
            start: listen_rx,
            notices: notices.clone(),
            signals: signals.clone(),
        };
        let connector = Connector {
            config,
            database,
            url: url.clone(),
            synchronous: options.synchronous,
            sockets: RefCell::default(),
        };
        let readers = options.readers.max(1);
        let thread = std::thread::Builder::new()
            .name("trellis-store-pg".into())
            .spawn(move || serve(connector, readers, write_rx, read_rx, listener, ready_tx))
            .map_err(|source| PgError::Thread {
                url: url.to_string(),
                source,
            })?;
        let mut exec = Executor {
            url,
            write: Some(write),
            write_tickets: std::sync::Mutex::new(0),
            read: Some(read),
            thread: Some(thread),
            listen: Some(listen),
            listening: std::sync::atomic::AtomicBool::new(false),
            notices,
            signals,
        };
        match ready_rx.recv() {
            Ok(Ok(version)) => Ok((exec, version)),
            // Dropping the executor joins the thread, which has returned.
            Ok(Err(e)) => Err(e),
            Err(_) => {
                exec.stop();
                Err(PgError::Closed {
                    url: exec.url.to_string(),
                })
            }
        }
    }

    /// Runs `f` with a connection of `lane` on the executor's thread and waits for its
    /// answer. Blocks the calling thread (fine in async code too, like the SQLite writer).
    pub(crate) fn call<T, F>(&self, lane: Lane, f: F) -> crate::Result<T>
    where
        T: Send + 'static,
        F: AsyncFnOnce(&mut Client) -> Result<T, super::JobError> + Send + 'static,
    {
        let (reply, answer) = mpsc::sync_channel(1);
        let url = self.url.clone();
        let job: Job = Box::new(move |conn| Box::pin(run(f, conn, reply, url)));
        self.send(lane, job)?;
        answer.recv().map_err(|_| self.closed())?
    }

    /// Queues `f` on `lane` and returns at once, without waiting for the job: for callers
    /// that must not block (an agent's async task recording a tool call). What the job
    /// answers, a failure too, is dropped; on the write lane it still runs after every
    /// write sent before and before every one sent after. Fails only when the executor is
    /// closed.
    pub(crate) fn post<F>(&self, lane: Lane, f: F) -> crate::Result<()>
    where
        F: AsyncFnOnce(&mut Client) -> Result<(), super::JobError> + Send + 'static,
    {
        // The answer goes to a receiver already dropped (`run` ignores that).
        let (reply, _) = mpsc::sync_channel(1);
        let url = self.url.clone();
        let job: Job = Box::new(move |conn| Box::pin(run(f, conn, reply, url)));
        self.send(lane, job).map(drop)
    }

    /// Queues `f` on the write lane and returns at once, like [`Executor::post`], for a job
    /// that answers its callers itself (the run journal's group commit): `f` gets the lane's
    /// connection or the error opening it, and a job never sent (the executor being closed)
    /// is dropped unrun. Answers the job's ticket.
    pub(crate) fn post_write<F>(&self, f: F) -> crate::Result<u64>
    where
        F: AsyncFnOnce(Result<&mut Client, crate::Error>) + Send + 'static,
    {
        let job: Job = Box::new(move |conn| {
            Box::pin(async move {
                match conn {
                    Ok(mut client) => {
                        f(Ok(&mut client)).await;
                        Some(client)
                    }
                    Err(e) => {
                        f(Err(e.into())).await;
                        None
                    }
                }
            })
        });
        self.send(Lane::Write, job)
    }

    /// The notifications of the database's `trellis` channel from now on: the key of each
    /// stream a transaction of any process appended to (`run:<id>`, `session:<id>`,
    /// `workspace`), once it committed, and `*` when the listening connection was lost and
    /// opened again (anything may have changed meanwhile). The first call opens the
    /// listening connection.
    pub(crate) fn watch(&self) -> broadcast::Receiver<Arc<str>> {
        let rx = self.notices.subscribe();
        if !self
            .listening
            .swap(true, std::sync::atomic::Ordering::SeqCst)
            && let Some(listen) = &self.listen
        {
            let _ = listen.send(());
        }
        rx
    }

    /// The signal fired when commands are queued for `run` (by any process: its
    /// `inbox:<run>` notification); starts listening. Signals of runs nobody holds any
    /// more are forgotten.
    pub(crate) fn inbox_signal(&self, run: &str) -> Arc<Notify> {
        let signal = {
            let mut signals = self.signals.lock().unwrap_or_else(PoisonError::into_inner);
            signals.retain(|_, s| s.strong_count() > 0);
            match signals.get(run).and_then(Weak::upgrade) {
                Some(s) => s,
                None => {
                    let s = Arc::new(Notify::new());
                    signals.insert(run.to_owned(), Arc::downgrade(&s));
                    s
                }
            }
        };
        drop(self.watch());
        signal
    }

    /// The ticket of the last job sent to the write lane (0 before the first): a job whose
    /// ticket this is has no job behind it yet.
    pub(crate) fn last_write_ticket(&self) -> u64 {
        *self
            .write_tickets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `job` to `lane`; answers its ticket on the write lane (0 on the read lane).
    fn send(&self, lane: Lane, job: Job) -> crate::Result<u64> {
        let queue = match lane {
            Lane::Write => &self.write,
            Lane::Read => &self.read,
        };
        let queue = queue.as_ref().ok_or_else(|| self.closed())?;
        if lane == Lane::Read {
            queue.send(job).map_err(|_| self.closed())?;
            return Ok(0);
        }
        let mut tickets = self
            .write_tickets
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        queue.send(job).map_err(|_| self.closed())?;
        *tickets += 1;
        Ok(*tickets)
    }

    fn closed(&self) -> crate::Error {
        PgError::Closed {
            url: self.url.to_string(),
        }
        .into()
    }

    /// Closes the queues and waits for the thread to finish the queued jobs.
    fn stop(&mut self) {
        drop(self.write.take());
        drop(self.read.take());
        drop(self.listen.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A job's body: runs `f` on the connection, answers the caller, gives the connection back.
async fn run<T, F>(
    f: F,
    conn: Result<Client, PgError>,
    reply: SyncSender<crate::Result<T>>,
    url: Arc<str>,
) -> Option<Client>
where
    F: AsyncFnOnce(&mut Client) -> Result<T, super::JobError>,
{
    let mut client = match conn {
        Ok(client) => client,
        Err(e) => {
            let _ = reply.send(Err(e.into()));
            return None;
        }
    };
    let out = f(&mut client).await.map_err(|e| e.into_error(&url));
    // A caller that stopped waiting is no failure of the job.
    let _ = reply.send(out);
    Some(client)
}

/// The thread's body: the runtime, the writer's connection and migrations, then the lanes
/// until every sender is dropped.
fn serve(
    connector: Connector,
    readers: usize,
    write_rx: UnboundedReceiver<Job>,
    read_rx: UnboundedReceiver<Job>,
    listener: Listener,
    ready: SyncSender<Result<i64, PgError>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(source) => {
            let _ = ready.send(Err(PgError::Thread {
                url: connector.url.to_string(),
                source,
            }));
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async move {
        let mut writer = match connector.open(Lane::Write).await {
            Ok(client) => client,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        match schema::migrate(&mut writer, &connector.url).await {
            Ok(version) => {
                let _ = ready.send(Ok(version));
            }
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        }
        let connector = Rc::new(connector);
        let mut lanes = vec![tokio::task::spawn_local(lane(
            Rc::new(Mutex::new(write_rx)),
            connector.clone(),
            Lane::Write,
            Some(writer),
        ))];
        let reads = Rc::new(Mutex::new(read_rx));
        for _ in 0..readers {
            lanes.push(tokio::task::spawn_local(lane(
                reads.clone(),
                connector.clone(),
                Lane::Read,
                None,
            )));
        }
        let listening = tokio::task::spawn_local(listener.run(connector.clone()));
        for task in lanes {
            let _ = task.await;
        }
        listening.abort();
        let _ = listening.await;
        // Every client is dropped now: let the sockets say goodbye.
        let sockets = connector.sockets.take();
        for socket in sockets {
            let _ = socket.await;
        }
    });
}

/// One connection of a lane: takes the lane's next job until the queue closes, connecting
/// when it has no open connection.
async fn lane(
    queue: Rc<Mutex<UnboundedReceiver<Job>>>,
    connector: Rc<Connector>,
    which: Lane,
    mut client: Option<Client>,
) {
    loop {
        let Some(job) = queue.lock().await.recv().await else {
            return;
        };
        let conn = match client.take() {
            Some(c) if !c.is_closed() => Ok(c),
            _ => connector.open(which).await,
        };
        // A job that panics loses its connection; its caller sees the reply dropped.
        client = tokio::task::spawn_local(job(conn)).await.ok().flatten();
    }
}

/// How many notifications a slow watcher may fall behind before it is told it lagged (it
/// then re-reads what it follows).
const NOTICES: usize = 4096;

/// How long the listener waits before it connects again after losing its connection.
const RELISTEN: std::time::Duration = std::time::Duration::from_millis(500);

/// The `LISTEN trellis` connection, opened when the first watcher asks
/// ([`Executor::watch`]); its notifications go to every watcher.
struct Listener {
    start: UnboundedReceiver<()>,
    notices: broadcast::Sender<Arc<str>>,
    signals: InboxSignals,
}

impl Listener {
    async fn run(mut self, connector: Rc<Connector>) {
        if self.start.recv().await.is_none() {
            return;
        }
        loop {
            // Lost (the server restarted or cut it off) or never opened: try again.
            let _ = self.listen(&connector).await;
            // Whatever committed while nobody listened is unknown: watchers re-read, and
            // every run here looks at its inbox.
            let _ = self.notices.send(Arc::from(crate::Notice::Missed.text()));
            self.fire_all();
            tokio::time::sleep(RELISTEN).await;
        }
    }

    /// Fires every inbox signal (notifications may have been missed).
    fn fire_all(&self) {
        let signals = self.signals.lock().unwrap_or_else(PoisonError::into_inner);
        for s in signals.values().filter_map(Weak::upgrade) {
            s.notify_one();
        }
    }

    /// Listens on one connection until it is lost.
    async fn listen(&self, connector: &Connector) -> Result<(), tokio_postgres::Error> {
        let (client, mut connection) = connector.config.connect(NoTls).await?;
        let (notices, signals) = (self.notices.clone(), self.signals.clone());
        let messages = tokio::task::spawn_local(async move {
            let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(message) = futures::StreamExt::next(&mut stream).await {
                match message {
                    Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                        if let Some(crate::Notice::Queued(run)) = crate::Notice::parse(n.payload())
                        {
                            let signal = signals
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .get(run)
                                .and_then(Weak::upgrade);
                            if let Some(s) = signal {
                                s.notify_one();
                            }
                        }
                        let _ = notices.send(Arc::from(n.payload()));
                    }
                    Ok(_) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        });
        client
            .batch_execute(&format!("LISTEN {}", super::notify::CHANNEL))
            .await?;
        // Listening from here on: what committed before is in what watchers read.
        let _ = self.notices.send(Arc::from(crate::Notice::Missed.text()));
        self.fire_all();
        let ended = messages.await;
        drop(client);
        match ended {
            Ok(result) => result,
            Err(_) => Ok(()),
        }
    }
}
