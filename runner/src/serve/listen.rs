//! Accepting connections: HTTP/1 with a deadline for each request's
//! headers, so a client that sends slowly cannot hold a connection (and,
//! many of them, the server's file descriptors) for ever; a bound on open
//! connections below the descriptor limit, where the oldest connection that
//! has sent nothing yet makes room for a new one (a flood of silent
//! connections cannot keep `/health` or anyone else out); and a graceful
//! stop that lets requests in flight finish.

use axum::Router;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How long a client has to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` resolves; then stops
/// accepting, lets each connection finish the request it is answering, and
/// returns once all have closed.
pub async fn serve_http(listener: TcpListener, app: Router, shutdown: impl Future<Output = ()>) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let max = max_connections();
    // Connections in the order they came, to close the oldest silent one.
    let mut silent: VecDeque<(Arc<AtomicBool>, tokio::sync::oneshot::Sender<()>)> = VecDeque::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        // Finished connections are reaped as new ones come.
        while connections.try_join_next().is_some() {}
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors, or a connection reset before it was
                // accepted: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if connections.len() >= max {
            make_room(&mut silent);
        }
        if silent.len() > 2 * max {
            silent.retain(|(heard, close)| !heard.load(Ordering::Relaxed) && !close.is_closed());
        }
        let _ = stream.set_nodelay(true);
        let heard = Arc::new(AtomicBool::new(false));
        let (close_tx, close_rx) = tokio::sync::oneshot::channel();
        silent.push_back((heard.clone(), close_tx));
        let stream = Heard { stream, heard };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                // Closed to make room: it had sent nothing.
                _ = close_rx => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
}

/// Descriptors kept for everything but connections (the run store, notes,
/// indexes, models, script workers).
const RESERVED_DESCRIPTORS: u64 = 256;

/// How many connections may be open at once: the descriptor limit less
/// what the rest of the server needs.
fn max_connections() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur
    } else {
        1024
    };
    soft.saturating_sub(RESERVED_DESCRIPTORS).clamp(64, 1 << 20) as usize
}

/// Closes the oldest connection that has sent nothing yet (connections that
/// sent something, or closed, are dropped from the queue on the way).
fn make_room(silent: &mut VecDeque<(Arc<AtomicBool>, tokio::sync::oneshot::Sender<()>)>) {
    while let Some((heard, close)) = silent.pop_front() {
        if !heard.load(Ordering::Relaxed) && !close.is_closed() {
            let _ = close.send(());
            return;
        }
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit
/// (as Go's runtime does): the default soft limit, 1,024 on most systems,
/// is a few hundred idle connections away from refusing everyone.
pub fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max.min(1 << 20);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// A connection that notes when its client first sends something.
struct Heard {
    stream: TcpStream,
    heard: Arc<AtomicBool>,
}

impl AsyncRead for Heard {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.heard.store(true, Ordering::Relaxed);
        }
        polled
    }
}

impl AsyncWrite for Heard {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
