//! The WebSocket clients and the HTTP run starts of a round.

use super::*;

pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(super) async fn connect(addr: SocketAddr) -> anyhow::Result<Socket> {
    let mut req = format!("ws://{addr}/api/events").into_client_request()?;
    req.headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse()?);
    let (ws, _) = tokio_tungstenite::connect_async(req).await?;
    Ok(ws)
}

/// `POST /api/workflows` over a fresh connection (HTTP/1.1, `Connection: close`): the run id.
pub(super) async fn start_run(
    addr: SocketAddr,
    workload: Workload,
    i: usize,
) -> anyhow::Result<String> {
    let body = workload.body(i).to_string();
    let req = format!(
        "POST /api/workflows HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    tcp.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("no HTTP response: {text}"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    anyhow::ensure!(status == "201", "POST /api/workflows: {head}\n{body}");
    let v: Value = serde_json::from_str(body)?;
    v["run"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no run id in {v}"))
}

/// The fields of a server frame the clients read (the event body is skipped).
#[derive(Deserialize)]
pub(super) struct In<'a> {
    #[serde(rename = "type", borrow)]
    ty: &'a str,
    #[serde(default, borrow)]
    name: Option<&'a str>,
    #[serde(default, borrow)]
    stream: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    ts: Option<i64>,
}

/// One event frame as a client received it.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    /// Its seq.
    pub seq: u64,
    /// When the client had parsed it.
    pub at: Instant,
    /// The frame's `ts` (commit time, epoch ms) subtracted from the client's wall clock at
    /// receipt, in ms.
    pub ts_lag_ms: f64,
}

/// What one client saw of its run.
#[derive(Debug)]
pub struct Client {
    /// The run.
    pub run: String,
    /// When the server acknowledged its subscription (the `subscribed` frame; events
    /// published before are replays, as for the anchor's readers before their stream's
    /// response headers); until then, when it sent its subscribe frame.
    pub subscribed_at: Instant,
    /// Every event frame of the run, in order of receipt.
    pub frames: Vec<Received>,
    /// The name of the last event frame (`workflow:completed` when the run succeeded).
    pub last_name: String,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
}

/// What the client thread measured.
#[derive(Debug)]
pub struct ClientRound {
    /// From the first POST to the last run's final frame at its last client.
    pub wall: Duration,
    /// Connecting the clients (untimed) plus `wall`, for the machine's other load.
    pub wall_with_setup: Duration,
    /// CPU of the whole process over `wall` (`getrusage(RUSAGE_SELF)`).
    pub process_cpu: Duration,
    /// CPU of the client thread over `wall` (`RUSAGE_THREAD`): the clients, the HTTP
    /// requests and the latency tap.
    pub client_cpu: Duration,
    /// CPU of the child processes (git) reaped over `wall` (`RUSAGE_CHILDREN`).
    pub children_cpu: Duration,
    /// Per run: POST sent, 201 received, first event frame at a client, last client done.
    pub runs: HashMap<String, RunTimes>,
    /// Per client.
    pub clients: Vec<Client>,
    /// When the service published each run event (`(stream, seq)`), from the tap.
    pub published: HashMap<(String, u64), Instant>,
    /// Events the tap lost to lagging.
    pub tap_lagged: u64,
    /// Runs that could not be started, with why.
    pub start_errors: Vec<String>,
}

/// One run's client-side times.
#[derive(Clone, Copy, Debug)]
pub struct RunTimes {
    /// Before the POST.
    pub submitted: Instant,
    /// The 201 parsed.
    pub created: Instant,
    /// The last of its clients received the final frame.
    pub done: Option<Instant>,
    /// Its first event frame at any of its clients.
    pub first_event: Option<Instant>,
}

pub(super) const TERMINAL: [&str; 3] =
    ["workflow:completed", "workflow:error", "workflow:cancelled"];

/// Reads `run:<run>` on `ws` from seq 0 until the run's final frame.
pub(super) async fn follow(mut ws: Socket, run: String) -> Client {
    let stream = format!("run:{run}");
    let sub = json!({ "type": "subscribe", "stream": stream, "since": 0 }).to_string();
    let subscribed_at = Instant::now();
    let mut c = Client {
        run,
        subscribed_at,
        frames: Vec::new(),
        last_name: String::new(),
        error: None,
    };
    if let Err(e) = ws.send(Message::text(sub)).await {
        c.error = Some(format!("subscribe: {e}"));
        return c;
    }
    let read = async {
        while let Some(m) = ws.next().await {
            let text = match m {
                Ok(Message::Text(t)) => t,
                Ok(Message::Close(f)) => return Some(format!("closed: {f:?}")),
                Ok(_) => continue,
                Err(e) => return Some(format!("{e}")),
            };
            let at = Instant::now();
            let f: In<'_> = match serde_json::from_str(&text) {
                Ok(f) => f,
                Err(e) => return Some(format!("bad frame {e}: {text}")),
            };
            match f.ty {
                "event" if f.stream.as_deref() == Some(stream.as_str()) => {
                    let ts_lag_ms = epoch_ms() - f.ts.unwrap_or(0) as f64;
                    c.frames.push(Received {
                        seq: f.seq.unwrap_or(0),
                        at,
                        ts_lag_ms,
                    });
                    let name = f.name.unwrap_or("");
                    if TERMINAL.contains(&name) {
                        c.last_name = name.to_owned();
                        return None;
                    }
                }
                // From here on the server delivers the stream live (the anchor's readers
                // count likewise from their stream's response headers).
                "subscribed" if f.stream.as_deref() == Some(stream.as_str()) => {
                    c.subscribed_at = at;
                }
                "error" => return Some(format!("error frame: {text}")),
                _ => {}
            }
        }
        Some("connection ended".to_owned())
    };
    c.error = match tokio::time::timeout(Duration::from_secs(120), read).await {
        Ok(e) => e,
        Err(_) => Some("no final frame within 120 s".into()),
    };
    let _ = ws.close(None).await;
    c
}

/// Records when each run event was published until `stop`, then what is already queued.
pub(super) async fn tap(
    mut rx: broadcast::Receiver<Arc<LiveEvent>>,
    stop: CancellationToken,
) -> (HashMap<(String, u64), Instant>, u64) {
    let mut out = HashMap::new();
    let mut lagged = 0;
    let mut take = |e: &LiveEvent| {
        if matches!(e.event, ServiceEventBody::Run(_))
            && let StreamId::Run(run) = &e.stream
        {
            out.insert((run.to_string(), e.seq), e.published_at());
        }
    };
    loop {
        let r = tokio::select! {
            biased;
            r = rx.recv() => r,
            () = stop.cancelled() => break,
        };
        match r {
            Ok(e) => take(&e),
            Err(broadcast::error::RecvError::Lagged(n)) => lagged += n,
            Err(broadcast::error::RecvError::Closed) => return (out, lagged),
        }
    }
    loop {
        match rx.try_recv() {
            Ok(e) => take(&e),
            Err(broadcast::error::TryRecvError::Lagged(n)) => lagged += n,
            Err(_) => return (out, lagged),
        }
    }
}

/// The round, on the client thread.
pub(super) async fn client_round(
    addr: SocketAddr,
    follow_at: SocketAddr,
    workload: Workload,
    runs: usize,
    per_run: usize,
    live: broadcast::Receiver<Arc<LiveEvent>>,
) -> anyhow::Result<ClientRound> {
    let setup = Instant::now();
    let stop = CancellationToken::new();
    let tapped = tokio::spawn(tap(live, stop.clone()));
    // Connect every client first (untimed).
    let mut sockets = Vec::with_capacity(runs * per_run);
    for _ in 0..runs * per_run {
        sockets.push(connect(follow_at).await?);
    }
    let thread0 = usage::thread_cpu_time();
    let cpu0 = usage::cpu_time();
    let children0 = usage::children_cpu_time();
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(runs);
    for i in 0..runs {
        let mine: Vec<Socket> = sockets.drain(..per_run).collect();
        tasks.push(tokio::spawn(async move {
            let submitted = Instant::now();
            let run = start_run(addr, workload, i).await;
            let created = Instant::now();
            let run = match run {
                Ok(r) => r,
                Err(e) => return Err(format!("run {i}: {e:#}")),
            };
            let followers: Vec<_> = mine
                .into_iter()
                .map(|ws| tokio::spawn(follow(ws, run.clone())))
                .collect();
            let mut clients = Vec::new();
            for f in followers {
                match f.await {
                    Ok(c) => clients.push(c),
                    Err(e) => return Err(format!("run {i}: a client task failed: {e}")),
                }
            }
            let done = clients
                .iter()
                .filter_map(|c| c.frames.last().map(|f| f.at))
                .max();
            let first_event = clients
                .iter()
                .filter_map(|c| c.frames.first().map(|f| f.at))
                .min();
            let times = RunTimes {
                submitted,
                created,
                done,
                first_event,
            };
            Ok((run, times, clients))
        }));
    }
    let mut out = ClientRound {
        wall: Duration::ZERO,
        wall_with_setup: Duration::ZERO,
        process_cpu: Duration::ZERO,
        client_cpu: Duration::ZERO,
        children_cpu: Duration::ZERO,
        runs: HashMap::new(),
        clients: Vec::new(),
        published: HashMap::new(),
        tap_lagged: 0,
        start_errors: Vec::new(),
    };
    for t in tasks {
        match t.await? {
            Ok((run, times, clients)) => {
                out.runs.insert(run, times);
                out.clients.extend(clients);
            }
            Err(e) => out.start_errors.push(e),
        }
    }
    // The measured window ends at the last final frame; the CPU counters a little later
    // (after the awaits above, microseconds).
    let end = out
        .runs
        .values()
        .filter_map(|r| r.done)
        .max()
        .unwrap_or_else(Instant::now);
    out.client_cpu = usage::thread_cpu_time().saturating_sub(thread0);
    out.process_cpu = usage::cpu_time().saturating_sub(cpu0);
    out.children_cpu = usage::children_cpu_time().saturating_sub(children0);
    out.wall = end.saturating_duration_since(t0);
    out.wall_with_setup = setup.elapsed();
    stop.cancel();
    let (published, lagged) = tapped.await?;
    out.published = published;
    out.tap_lagged = lagged;
    Ok(out)
}
