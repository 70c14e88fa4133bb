//! `serve`'s HTTP endpoints: `/metrics`, `/healthz`, `/stalls`, and
//! `POST /dump`. Every connection is bounded (how many at once, how long
//! its headers may take, how long it may live, one request each), so a
//! client that never reads or sends garbage costs one slot for seconds.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

use super::exposition::{self, Format};
use super::families::Family;

/// Connections served at once; more are closed as they come.
const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may live, answer included.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);

/// What the endpoints show; the serve loop refreshes it.
#[derive(Default)]
pub struct Published {
    pub families: Vec<Family>,
    /// The recent stalls, as JSON.
    pub stalls: String,
    /// The containers' waits by cause over the last minute, as JSON.
    pub why: String,
    /// Whether a flight directory takes `POST /dump`.
    pub flight: bool,
}

pub type Shared = Arc<Mutex<Published>>;

/// Serves until the task is dropped. `dumps` receives one message per
/// `POST /dump`.
pub async fn serve(listener: TcpListener, shared: Shared, dumps: mpsc::Sender<()>) {
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
        let dumps = dumps.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let response = respond(&req, &shared, &dumps);
                async move { Ok::<_, Infallible>(response) }
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

fn respond(
    req: &Request<Incoming>,
    shared: &Shared,
    dumps: &mpsc::Sender<()>,
) -> Response<Full<Bytes>> {
    let published = shared.lock().unwrap_or_else(|e| e.into_inner());
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            let format = Format::negotiate(accept);
            let body = exposition::encode(&published.families, format);
            reply(StatusCode::OK, format.content_type(), body)
        }
        (&Method::GET, "/healthz") => reply(StatusCode::OK, TEXT, "ok\n".into()),
        (&Method::GET, "/stalls") => reply(StatusCode::OK, JSON, published.stalls.clone()),
        (&Method::GET, "/why") => reply(StatusCode::OK, JSON, published.why.clone()),
        (&Method::POST, "/dump") if published.flight => match dumps.try_send(()) {
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
            "GET /metrics, /healthz, /stalls; POST /dump\n".into(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            TEXT,
            "stalltop serves /metrics, /healthz, /stalls and POST /dump\n".into(),
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

    async fn start(flight: bool) -> (std::net::SocketAddr, mpsc::Receiver<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Published {
            stalls: "[]".into(),
            why: "{\"runq\":[]}".into(),
            flight,
            ..Published::default()
        }));
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(serve(listener, shared, tx));
        (addr, rx)
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
        assert!(get(addr, "/stalls").await.ends_with("[]"));
        assert!(get(addr, "/why").await.ends_with("{\"runq\":[]}"));
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
