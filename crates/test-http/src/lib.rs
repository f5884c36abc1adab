//! A loopback HTTP/1.1 stub server for tests.
//!
//! [`Server::start`] binds `127.0.0.1` on a free port and answers every request, one
//! connection at a time ([`Server::concurrent`]: a thread per connection), with what the
//! test's handler returns for it; every request is recorded. Dropping the [`Server`] stops
//! it: the accept loop ends and its thread is joined, so no test leaves a listener behind.
//!
//! Why not a mocking library: the tests need request-dependent statuses and bodies, delays
//! (timeout tests), and a blocking API usable from synchronous tests and crates as low as
//! `trellis-fetch`; this is a few dozen lines of std with no new dependencies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// One request as received.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `GET`, `POST`, ….
    pub method: String,
    /// The request target (`/v1/rerank?x=1`).
    pub target: String,
    /// The request line and the headers, as sent (CRLF line ends, the blank line included).
    pub head: String,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One answer.
#[derive(Clone, Debug)]
pub struct Response {
    /// Status code; the reason phrase is derived.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: String,
    /// Body.
    pub body: Vec<u8>,
    /// Waited before answering (for clients' timeouts).
    pub delay: Duration,
}

impl Response {
    /// `status` with a body of `content_type`.
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type: content_type.to_owned(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// `200` with a JSON body.
    pub fn json(body: impl Into<Vec<u8>>) -> Self {
        Response::new(200, "application/json", body)
    }

    /// `status` with a JSON body.
    pub fn json_status(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Response::new(status, "application/json", body)
    }

    /// `200` with a server-sent-events body.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        Response::new(200, "text/event-stream", body)
    }

    /// The same answer after `delay`.
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// The requests answered so far, shared with the serving threads.
type Log = Arc<Mutex<Vec<Request>>>;

/// A running stub server; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    requests: Log,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves on a free loopback port, answering each request with `handler(&request)`, one
    /// connection at a time.
    ///
    /// # Panics
    /// When no loopback port can be bound (a test helper).
    pub fn start(mut handler: impl FnMut(&Request) -> Response + Send + 'static) -> Server {
        Server::listen(move |stream, log| answer(stream, &mut handler, log))
    }

    /// Like [`Server::start`], but each connection is answered on a thread of its own, so
    /// that concurrent clients (benchmarks of many sessions) do not queue behind each other.
    /// Dropping the server stops accepting; answers in flight finish on their threads.
    ///
    /// # Panics
    /// When no loopback port can be bound (a test helper).
    pub fn concurrent(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Server {
        let handler = Arc::new(handler);
        Server::listen(move |stream, log| {
            let (handler, log) = (handler.clone(), log.clone());
            std::thread::spawn(move || answer(stream, &mut |r| handler(r), &log));
        })
    }

    /// Binds a free loopback port and hands each accepted connection to `on_connection`
    /// until the server is dropped.
    fn listen(mut on_connection: impl FnMut(TcpStream, &Log) + Send + 'static) -> Server {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("the bound address");
        let requests: Log = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(stream) = stream {
                    on_connection(stream, &log);
                }
            }
        });
        Server {
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// Answers the n-th request with the n-th of `responses`, then with `500` (scripted tests).
    pub fn scripted(responses: Vec<Response>) -> Server {
        let mut queue = responses.into_iter();
        Server::start(move |_| {
            queue.next().unwrap_or_else(|| {
                Response::json_status(500, r#"{"error":"stub: no response left"}"#)
            })
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests answered so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the loop sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request from `stream`, answers it with `handler` (after the response's delay)
/// and records it.
fn answer(mut stream: TcpStream, handler: &mut dyn FnMut(&Request) -> Response, log: &Log) {
    let Some(request) = read_request(&stream) else {
        return;
    };
    let response = handler(&request);
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    std::thread::sleep(response.delay);
    let _ = write_response(&mut stream, &response);
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request = Request::default();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            break;
        }
        if request.head.is_empty() {
            let mut parts = line.split_whitespace();
            request.method = parts.next().unwrap_or_default().to_owned();
            request.target = parts.next().unwrap_or_default().to_owned();
        } else if let Some((key, value)) = line.split_once(':')
            && key.trim().eq_ignore_ascii_case("content-length")
        {
            len = value.trim().parse().unwrap_or(0);
        }
        request.head.push_str(&line);
        if line.trim_end().is_empty() {
            break;
        }
    }
    if request.head.is_empty() {
        return None; // the wake-up connection of `Drop`, or a client that gave up
    }
    request.body = vec![0; len];
    reader.read_exact(&mut request.body).ok()?;
    Some(request)
}

fn write_response(stream: &mut TcpStream, r: &Response) -> std::io::Result<()> {
    let reason = match r.status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    write!(
        stream,
        "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        r.status,
        r.content_type,
        r.body.len()
    )?;
    stream.write_all(&r.body)?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str, path: &str, body: &str) -> String {
        let addr = url.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nX-Key: k1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn answers_records_and_stops_when_dropped() {
        let server = Server::start(|r| {
            Response::json_status(if r.target == "/bad" { 400 } else { 200 }, r.text())
        });
        let url = server.url();
        let ok = get(&url, "/v1", r#"{"a":1}"#);
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with(r#"{"a":1}"#), "{ok}");
        assert!(get(&url, "/bad", "x").starts_with("HTTP/1.1 400 Bad Request"));
        let seen = server.requests();
        assert_eq!(seen.len(), 2);
        assert_eq!(
            (seen[0].method.as_str(), seen[0].target.as_str()),
            ("POST", "/v1")
        );
        assert_eq!(seen[0].header("x-key"), Some("k1"));
        assert_eq!(seen[0].json()["a"], 1);
        drop(server);
        let addr = url.trim_start_matches("http://");
        assert!(
            TcpStream::connect(addr).is_err(),
            "still listening after drop"
        );
    }

    #[test]
    fn concurrent_answers_a_second_client_while_the_first_waits() {
        let server =
            Server::concurrent(|r| {
                let slow = r.target == "/slow";
                Response::json(if slow { "slow" } else { "fast" })
                    .after(Duration::from_secs(if slow { 3 } else { 0 }))
            });
        let url = server.url();
        let slow_url = url.clone();
        let slow = std::thread::spawn(move || get(&slow_url, "/slow", ""));
        // Wait until the slow request is being answered, then ask again: a one-at-a-time
        // server would answer only after the slow one's three seconds.
        while server.requests().is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let fast_url = url.clone();
        std::thread::spawn(move || tx.send(get(&fast_url, "/fast", "")));
        let fast = rx
            .recv_timeout(Duration::from_secs(2))
            .expect("the second client was answered while the first waited");
        assert!(fast.ends_with("fast"), "{fast}");
        assert!(slow.join().unwrap().ends_with("slow"));
        assert_eq!(server.requests().len(), 2);
    }

    #[test]
    fn scripted_answers_in_order_then_500() {
        let server = Server::scripted(vec![Response::json("1"), Response::json("2")]);
        let url = server.url();
        assert!(get(&url, "/", "").ends_with("\r\n\r\n1"));
        assert!(get(&url, "/", "").ends_with("\r\n\r\n2"));
        assert!(get(&url, "/", "").starts_with("HTTP/1.1 500"));
    }
}
