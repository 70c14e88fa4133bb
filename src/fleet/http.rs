//! `serve`'s HTTP endpoints: `/metrics`, `/healthz`, `/stalls`, `/why` and
//! `POST /dump`. Every connection is bounded (how many at once, how long
//! its headers may take, how long it may live, one request each), so a
//! client that never reads or sends garbage costs one slot for seconds.
//! `/stalls` and `/why` are asked of the serve loop when a client wants
//! them: a node nobody asks spends nothing on them.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::exposition::{self, Format};
use super::families::Family;

/// Connections served at once; more are closed as they come.
const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may live, answer included.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an answer of the serve loop may take before the client is told
/// to come back.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What the endpoints show; the serve loop refreshes it.
#[derive(Default)]
pub struct Published {
    pub families: Vec<Family>,
    /// Whether a flight directory takes `POST /dump`.
    pub flight: bool,
}

pub type Shared = Arc<Mutex<Published>>;

/// What a client asked the serve loop for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Question {
    /// The recent stalls, as JSON.
    Stalls,
    /// The containers' waits by cause over the last minute, as JSON.
    Why,
}

/// A question and where its answer goes.
pub struct Ask {
    pub question: Question,
    pub answer: oneshot::Sender<String>,
}

/// Where the endpoints send what they cannot answer themselves.
#[derive(Clone)]
pub struct Channels {
    /// One message per `POST /dump`.
    pub dumps: mpsc::Sender<()>,
    pub asks: mpsc::Sender<Ask>,
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Shared, channels: Channels) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors and the like: let it pass.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            continue; // dropping the stream closes it
        };
        let shared = Arc::clone(&shared);
        let channels = channels.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = Arc::clone(&shared);
                let channels = channels.clone();
                async move { Ok::<_, Infallible>(respond(&req, &shared, &channels).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
            drop(slot);
        });
    }
}

async fn respond(
    req: &Request<Incoming>,
    shared: &Shared,
    channels: &Channels,
) -> Response<Full<Bytes>> {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/stalls") => return ask(&channels.asks, Question::Stalls).await,
        (&Method::GET, "/why") => return ask(&channels.asks, Question::Why).await,
        _ => {}
    }
    let published = shared.lock().unwrap_or_else(|e| e.into_inner());
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            let format = Format::negotiate(accept);
            let body = exposition::encode(&published.families, format);
            reply(StatusCode::OK, format.content_type(), body)
        }
        (&Method::GET, "/healthz") => reply(StatusCode::OK, TEXT, "ok\n".into()),
        (&Method::POST, "/dump") if published.flight => match channels.dumps.try_send(()) {
            Ok(()) => reply(StatusCode::ACCEPTED, TEXT, "dump planned\n".into()),
            Err(_) => reply(
                StatusCode::SERVICE_UNAVAILABLE,
                TEXT,
                "a dump was just asked for\n".into(),
            ),
        },
        (&Method::POST, "/dump") => reply(
            StatusCode::CONFLICT,
            TEXT,
            "no flight recorder: start serve with --flight-dir\n".into(),
        ),
        (_, "/metrics" | "/healthz" | "/stalls" | "/why" | "/dump") => reply(
            StatusCode::METHOD_NOT_ALLOWED,
            TEXT,
            "GET /metrics, /healthz, /stalls, /why; POST /dump\n".into(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "stalltop serves /metrics, /healthz, /stalls, /why and POST /dump\n".into(),
        ),
    }
}

/// The serve loop's answer to `question`, as JSON; 503 when it cannot
/// answer in time (it is stopping, or busy past `ANSWER_TIMEOUT`).
async fn ask(asks: &mpsc::Sender<Ask>, question: Question) -> Response<Full<Bytes>> {
    let (answer, answered) = oneshot::channel();
    let asked = asks.send(Ask { question, answer });
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, async {
        asked.await.ok()?;
        answered.await.ok()
    });
    match answer.await {
        Ok(Some(json)) => reply(StatusCode::OK, JSON, json),
        _ => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "stalltop is stopping or busy: ask again\n".into(),
        ),
    }
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    /// A server, and the dumps and questions it sends to the serve loop.
    async fn serving(
        flight: bool,
    ) -> (
        std::net::SocketAddr,
        mpsc::Receiver<()>,
        mpsc::Receiver<Ask>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Published {
            flight,
            ..Published::default()
        }));
        let (dumps, dumps_rx) = mpsc::channel(1);
        let (asks, asks_rx) = mpsc::channel(4);
        tokio::spawn(serve(listener, shared, Channels { dumps, asks }));
        (addr, dumps_rx, asks_rx)
    }

    /// A server with a serve loop that answers each question by its name.
    async fn start(flight: bool) -> (std::net::SocketAddr, mpsc::Receiver<()>) {
        let (addr, dumps, mut asks) = serving(flight).await;
        tokio::spawn(async move {
            while let Some(ask) = asks.recv().await {
                let _ = ask.answer.send(format!("\"{:?}\"", ask.question));
            }
        });
        (addr, dumps)
    }

    /// One request on a fresh connection; the whole answer (empty if the
    /// server closed or reset the connection without one).
    async fn send(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let _ = stream.write_all(request).await;
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        let _ = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("answered or closed within 5 s");
        String::from_utf8_lossy(&answer).into_owned()
    }

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        send(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        )
        .await
    }

    #[tokio::test]
    async fn endpoints_answer_and_unknown_ones_are_refused() {
        let (addr, _dumps) = start(false).await;
        let health = get(addr, "/healthz").await;
        assert!(
            health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
            "{health}"
        );
        let stalls = get(addr, "/stalls").await;
        assert!(
            stalls.starts_with("HTTP/1.1 200") && stalls.ends_with("\"Stalls\""),
            "{stalls}"
        );
        let why = get(addr, "/why").await;
        assert!(
            why.contains("application/json") && why.ends_with("\"Why\""),
            "{why}"
        );
        assert!(get(addr, "/metrics")
            .await
            .contains("text/plain; version=0.0.4"));
        assert!(get(addr, "/nope").await.starts_with("HTTP/1.1 404"));
        let post = send(addr, b"POST /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        let dump = send(addr, b"POST /dump HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(dump.starts_with("HTTP/1.1 409"), "no flight dir: {dump}");
    }

    #[tokio::test]
    async fn a_question_is_asked_only_when_a_client_asks_it() {
        let (addr, _dumps, mut asks) = serving(false).await;
        get(addr, "/metrics").await;
        get(addr, "/healthz").await;
        assert!(asks.try_recv().is_err(), "nothing asked for /metrics");
        let client = tokio::spawn(async move { get(addr, "/why").await });
        let ask = asks.recv().await.expect("/why asks the serve loop");
        assert_eq!(ask.question, Question::Why);
        ask.answer.send("{\"runq\":[]}".into()).unwrap();
        assert!(client.await.unwrap().ends_with("{\"runq\":[]}"));
    }

    #[tokio::test]
    async fn a_serve_loop_that_is_gone_gets_a_503() {
        let (addr, _dumps, asks) = serving(false).await;
        drop(asks);
        let stalls = get(addr, "/stalls").await;
        assert!(stalls.starts_with("HTTP/1.1 503"), "{stalls}");
    }

    #[tokio::test]
    async fn post_dump_asks_the_flight_recorder() {
        let (addr, mut dumps) = start(true).await;
        let dump = send(addr, b"POST /dump HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(dump.starts_with("HTTP/1.1 202"), "{dump}");
        assert_eq!(dumps.try_recv(), Ok(()));
    }

    #[tokio::test]
    async fn garbage_silence_and_a_flood_of_connections_do_not_stop_it() {
        let (addr, _dumps) = start(false).await;
        let garbage = send(addr, b"\x00\x01\x02 nonsense \xff\r\n\r\n").await;
        assert!(
            garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"),
            "{garbage}"
        );
        // Half a request that never ends, and clients that never read.
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS + 8 {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(b"GET /metr").await.unwrap();
            idle.push(stream);
        }
        // Every slot is taken: a new client is closed at once, not left hanging.
        assert_eq!(get(addr, "/healthz").await, "");
        drop(idle);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(get(addr, "/healthz").await.ends_with("ok\n"));
    }
}
