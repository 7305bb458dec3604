//! `LISTEN`/`NOTIFY` ([`Pool::listen`]): a [`Listener`] is a stream of [`Notice`]s heard on a
//! connection of its own, opened and driven on the pool's tokio runtime with either driver
//! (it is long-lived, so it takes no session and no worker's thread, and its reader may be on
//! any thread). When that connection is lost, it is opened again with the pool's backoff, its
//! channels listened to again, and only then a [`Notice::Missed`] is given: whatever the reader
//! reads after that mark is covered by notifications from then on.
//!
//! Dropping the listener stops its task and closes its connection.
//!
//! [`Pool::listen`]: crate::Pool::listen
#![forbid(unsafe_code)]

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::oneshot;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls, Notification, Socket};

use crate::error::{Error, describe};
use crate::metrics::Gauge;
use crate::notices::{Heard, LISTEN_BUFFER, Notices};
use crate::pool::Target;
use crate::reconnect::{FIRST_RETRY, next_wait};

/// What a [`Listener`] hears.
#[derive(Debug)]
pub enum Notice {
    /// A notification on one of the listener's channels, once the transaction that sent it
    /// committed: its channel, payload, and the process id of the backend that sent it.
    Notification(Notification),
    /// Notifications may have been missed just before this point: the connection was lost
    /// and is listening again, or the reader fell [`LISTEN_BUFFER`] notifications behind.
    /// Read the state the notifications are about again; from here on, nothing is missed
    /// until the next mark.
    Missed,
}

/// The notifications on some channels ([`Pool::listen`](crate::Pool::listen)), as a
/// [`Stream`] of [`Notice`]s, in the order PostgreSQL sent them. It never ends while the pool's
/// runtime runs (a lost connection is opened again); dropped, it closes its connection.
pub struct Listener {
    notices: Arc<Notices<Notification>>,
}

impl Stream for Listener {
    type Item = Notice;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Notice>> {
        self.notices.poll_next(cx).map(|next| {
            next.map(|heard| match heard {
                Heard::Item(n) => Notice::Notification(n),
                Heard::Missed => Notice::Missed,
            })
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.notices.close_reader();
    }
}

/// A listener on `channels`, its connection opened and listening on `runtime` before the
/// future returns ([`Error::BadName`] for a name refused, [`Error::Unavailable`] when the
/// database cannot be reached, [`Error::Query`] when it refuses the `LISTEN`).
pub(crate) fn start(
    runtime: &tokio::runtime::Handle,
    target: &Arc<Target>,
    channels: &[&str],
) -> impl Future<Output = Result<Listener, Error>> + Send + 'static {
    let sql: Result<String, Error> = channels
        .iter()
        .map(|c| crate::names::quote(c).map(|q| format!("LISTEN {q};")))
        .collect();
    let (runtime, target) = (runtime.clone(), target.clone());
    async move {
        let sql = sql?;
        let (ready, answer) = oneshot::channel();
        runtime.spawn(run(target, sql, ready));
        answer.await.unwrap_or(Err(Error::Unavailable))
    }
}

/// An open connection that listens.
type Listening = (Client, Connection<Socket, NoTlsStream>);

/// The listener's task: opens the connection and hands the [`Listener`] to `ready`, then
/// passes on what it hears until the reader is gone, re-opening the connection when lost.
async fn run(target: Arc<Target>, sql: String, ready: oneshot::Sender<Result<Listener, Error>>) {
    let (mut conn, early) = match open(&target, &sql).await {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let notices = Arc::new(Notices::new(LISTEN_BUFFER));
    // The reader's stream ends when this task does, however it ends.
    let _writer = WriterGone(notices.clone());
    early.into_iter().for_each(|n| notices.push(n));
    if ready
        .send(Ok(Listener {
            notices: notices.clone(),
        }))
        .is_err()
    {
        return;
    }
    loop {
        let counted = target.counters.hold(Gauge::ListenersOpen);
        if hear(&mut conn.1, &notices).await == Woke::ReaderGone {
            return;
        }
        drop((conn, counted));
        let mut wait = FIRST_RETRY;
        let mut said = false;
        conn = loop {
            if pause(wait, &notices).await == Woke::ReaderGone {
                return;
            }
            match open(&target, &sql).await {
                Ok((conn, early)) => {
                    target.counters.reconnected();
                    if said {
                        tracing::info!("listener's connection open again");
                    }
                    // Listening again: what changed since the loss is the reader's to read.
                    notices.missed();
                    early.into_iter().for_each(|n| notices.push(n));
                    break conn;
                }
                Err(e) => {
                    if !said {
                        tracing::warn!(error = %e, "listener's database unreachable; retrying");
                        said = true;
                    }
                    wait = next_wait(wait);
                }
            }
        };
    }
}

/// Why the task stopped waiting.
#[derive(PartialEq, Eq)]
enum Woke {
    /// The listener was dropped.
    ReaderGone,
    /// The connection ended, or the pause is over.
    Over,
}

/// Passes on the notifications `connection` hears until it ends or the reader is gone.
async fn hear(
    connection: &mut Connection<Socket, NoTlsStream>,
    notices: &Notices<Notification>,
) -> Woke {
    poll_fn(|cx| {
        if notices.poll_reader_gone(cx).is_ready() {
            return Poll::Ready(Woke::ReaderGone);
        }
        loop {
            match connection.poll_message(cx) {
                Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => notices.push(n),
                // A notice (a warning the server sent): nothing for the reader.
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => {
                    tracing::warn!(error = describe(&e), "listener's connection ended");
                    return Poll::Ready(Woke::Over);
                }
                Poll::Ready(None) => return Poll::Ready(Woke::Over),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await
}

/// Waits `wait`, or less when the reader goes.
async fn pause(wait: std::time::Duration, notices: &Notices<Notification>) -> Woke {
    let mut sleep = pin!(tokio::time::sleep(wait));
    poll_fn(|cx| {
        if notices.poll_reader_gone(cx).is_ready() {
            return Poll::Ready(Woke::ReaderGone);
        }
        sleep.as_mut().poll(cx).map(|()| Woke::Over)
    })
    .await
}

/// Opens a connection and runs `sql` (the `LISTEN`s) on it, driving it meanwhile; the
/// notifications heard by then come back with it, to be passed on in order.
async fn open(target: &Target, sql: &str) -> Result<(Listening, Vec<Notification>), Error> {
    let (client, mut connection) = target.config.connect(NoTls).await.map_err(|e| {
        tracing::debug!(error = describe(&e), "listener's connection did not open");
        Error::Unavailable
    })?;
    let mut early = Vec::new();
    {
        let mut listen = pin!(client.batch_execute(sql));
        poll_fn(|cx| {
            if let Poll::Ready(done) = listen.as_mut().poll(cx) {
                return Poll::Ready(done.map_err(Error::Query));
            }
            loop {
                match connection.poll_message(cx) {
                    Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => early.push(n),
                    Poll::Ready(Some(Ok(_))) => {}
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(Error::Query(e))),
                    Poll::Ready(None) => return Poll::Ready(Err(Error::Unavailable)),
                    Poll::Pending => return Poll::Pending,
                }
            }
        })
        .await?;
    }
    Ok(((client, connection), early))
}

/// Ends the reader's stream when dropped (the task is over, or the runtime dropped it).
struct WriterGone(Arc<Notices<Notification>>);

impl Drop for WriterGone {
    fn drop(&mut self) {
        self.0.close_writer();
    }
}
