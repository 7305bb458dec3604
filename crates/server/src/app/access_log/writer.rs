//! The access logs' writers and where each site's lines go: one writer thread per target
//! (file or stdout), shared by every format written there; the server's log and each
//! site's own, as nginx's `access_log` at the http level and in a server block (a site with
//! its own log writes there *instead of* the server's).
//!
//! Must not block a worker: workers hand whole batches over a bounded channel (see
//! `LogBuffer`); only this thread touches the file.
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use super::{CHANNEL_BATCHES, LogBuffer, LogFormat, LogMsg, LogTarget, Sink};
use crate::config::Config;
use crate::start_error::{AtPart as _, Part, StartError};

/// How long a stopping server waits for its last log lines to be written.
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The logger: one thread that writes batches to the target.
#[derive(Clone)]
pub(crate) struct Logger {
    tx: SyncSender<LogMsg>,
    target: LogTarget,
}

impl Logger {
    /// Opens the target (an error names the path) and starts the writer thread.
    pub(crate) fn start(target: &LogTarget) -> std::io::Result<Logger> {
        let mut sink = open(target)?;
        let path = target.clone();
        let (tx, rx): (SyncSender<LogMsg>, Receiver<LogMsg>) = sync_channel(CHANNEL_BATCHES);
        std::thread::Builder::new()
            .name("linerate-log".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        LogMsg::Lines(batch) => {
                            if let Err(e) =
                                sink.write_all(batch.as_bytes()).and_then(|_| sink.flush())
                            {
                                tracing::error!(error = %e, "access log write failed");
                            }
                        }
                        LogMsg::Flush(done) => {
                            let _ = done.send(());
                        }
                        LogMsg::Reopen => match open(&path) {
                            Ok(s) => {
                                sink = s;
                                tracing::info!("access log reopened");
                            }
                            Err(e) => tracing::error!(
                                error = %e,
                                "access log not reopened; still writing to the old file"
                            ),
                        },
                    }
                }
            })?;
        Ok(Logger {
            tx,
            target: target.clone(),
        })
    }

    /// The file it writes, if it writes one.
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        match &self.target {
            LogTarget::File(p) => Some(p),
            LogTarget::Stdout => None,
        }
    }

    /// Asks the writer to reopen the file once the batches before this call are written.
    pub(crate) fn reopen(&self) {
        let _ = self.tx.send(LogMsg::Reopen);
    }

    /// Waits (at most `FLUSH_WAIT`) until the batches sent before this call are written.
    pub(crate) fn flush(&self) {
        let (done, wait) = sync_channel(1);
        if self.tx.send(LogMsg::Flush(done)).is_ok() && wait.recv_timeout(FLUSH_WAIT).is_err() {
            tracing::warn!("access log: the last lines were not written in time");
        }
    }
}

/// Every access log of a server: the writers, and the (target, format) pairs lines are
/// formatted for (a worker's buffer keeps one batch per pair).
#[derive(Clone)]
pub(crate) struct Logs {
    writers: Vec<Logger>,
    /// Each pair's writer (an index into `writers`) and its key.
    sinks: Vec<(usize, LogTarget, LogFormat)>,
    /// The server's own log (`Config::access_log`), an index into `sinks`.
    global: Option<usize>,
}

impl Logs {
    /// Opens every log `config` names (one writer per target): `None` when it names none.
    /// An error names the log's place in `config`.
    pub(crate) fn start(config: &Config) -> Result<Option<Logs>, StartError> {
        let mut logs = Logs {
            writers: Vec::new(),
            sinks: Vec::new(),
            global: None,
        };
        if let Some(target) = &config.access_log {
            let i = logs
                .add(target, &config.access_log_format)
                .at(Part::AccessLog)?;
            logs.global = Some(i);
        }
        for si in 0..config.sites.len() {
            if let Some((target, format)) = site_log(config, si) {
                logs.add(target, format).at(Part::SiteLog(si))?;
            }
        }
        Ok((!logs.sinks.is_empty()).then_some(logs))
    }

    /// The sink for `target` written in `format`, started if new.
    fn add(&mut self, target: &LogTarget, format: &LogFormat) -> std::io::Result<usize> {
        if let Some(i) = self.find(target, format) {
            return Ok(i);
        }
        let writer = match self.writers.iter().position(|w| w.target == *target) {
            Some(w) => w,
            None => {
                self.writers.push(Logger::start(target)?);
                self.writers.len() - 1
            }
        };
        self.sinks.push((writer, target.clone(), format.clone()));
        Ok(self.sinks.len() - 1)
    }

    fn find(&self, target: &LogTarget, format: &LogFormat) -> Option<usize> {
        self.sinks
            .iter()
            .position(|(_, t, f)| t == target && f == format)
    }

    /// Where each site of `config` logs (by site index; `None`: not logged): its own log,
    /// else the server's. A site log this server did not open at start is an error (a
    /// reload cannot open one: the workers' buffers were made at start).
    pub(crate) fn route(&self, config: &Config) -> Result<Vec<Option<usize>>, StartError> {
        (0..config.sites.len().max(1))
            .map(|si| match site_log(config, si) {
                Some((target, format)) => self.find(target, format).map(Some).ok_or_else(|| {
                    StartError::invalid(
                        Part::SiteLog(si),
                        format!(
                            "the access log {} was not open at start; restart to open it",
                            describe(target)
                        ),
                    )
                }),
                None => Ok(self.global),
            })
            .collect()
    }

    /// A buffer for one worker.
    pub(crate) fn buffer(&self) -> LogBuffer {
        LogBuffer::new(
            self.sinks
                .iter()
                .map(|(w, _, format)| Sink {
                    lines: String::new(),
                    tx: self.writers[*w].tx.clone(),
                    dropped: 0,
                    format: format.clone(),
                })
                .collect(),
        )
    }

    /// The files the logs write.
    pub(crate) fn files(&self) -> impl Iterator<Item = &std::path::Path> {
        self.writers.iter().filter_map(Logger::file)
    }

    /// Reopens every log file (after logrotate renamed them).
    pub(crate) fn reopen(&self) {
        self.writers.iter().for_each(Logger::reopen);
    }

    /// Waits for what the workers handed off last to be written, in every log.
    pub(crate) fn flush(&self) {
        self.writers.iter().for_each(Logger::flush);
    }
}

/// Site `si`'s own log, when it names one: its file (else the server's) and its format
/// (else the server's). A site that names neither has none of its own.
fn site_log(config: &Config, si: usize) -> Option<(&LogTarget, &LogFormat)> {
    let site = config.sites.get(si)?;
    if site.access_log.is_none() && site.access_log_format.is_none() {
        return None;
    }
    let target = site.access_log.as_ref().or(config.access_log.as_ref())?;
    let format = site
        .access_log_format
        .as_ref()
        .unwrap_or(&config.access_log_format);
    Some((target, format))
}

fn describe(target: &LogTarget) -> String {
    match target {
        LogTarget::Stdout => "on stdout".to_string(),
        LogTarget::File(p) => p.display().to_string(),
    }
}

/// Opens a log target for appending; the error names the path.
fn open(target: &LogTarget) -> std::io::Result<Box<dyn std::io::Write + Send>> {
    Ok(match target {
        LogTarget::Stdout => Box::new(std::io::stdout()),
        // Through the privilege keeper: after a drop to another user, SIGUSR1 still reopens a
        // log in root's directory.
        LogTarget::File(p) => Box::new(crate::privsep::open_append(p).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot open access log {}: {e}", p.display()),
            )
        })?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Site;

    /// Each site logs to its own log, else the server's; a reload's site log that was not
    /// open at start is refused, naming the site; sites naming one file share its writer.
    #[test]
    fn sites_route_to_their_own_log_else_the_servers() {
        let d = std::env::temp_dir().join(format!("linerate-logs-route-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let file = |n: &str| LogTarget::File(d.join(n));
        let site = |log: Option<&str>, format: Option<LogFormat>| Site {
            access_log: log.map(file),
            access_log_format: format,
            ..Site::default()
        };
        let mut config = Config {
            access_log: Some(file("all.log")),
            sites: vec![
                site(None, None),
                site(Some("a.log"), None),
                site(None, Some(LogFormat::Json)),
                site(Some("a.log"), None),
            ],
            ..Config::default()
        };
        let logs = Logs::start(&config).unwrap().unwrap();
        // all.log (combined), a.log (combined), all.log (json): two files, three sinks.
        assert_eq!(logs.writers.len(), 2);
        assert_eq!(logs.sinks.len(), 3);
        assert_eq!(
            logs.route(&config).unwrap(),
            vec![Some(0), Some(1), Some(2), Some(1)]
        );
        config.sites[0] = site(Some("new.log"), None);
        let e = logs.route(&config).unwrap_err();
        assert_eq!(e.part, Part::SiteLog(0));
        assert!(e.to_string().contains("was not open at start"), "{e}");
        // Without a log of the server's, a site without its own is not logged.
        config.access_log = None;
        config.sites = vec![site(None, None), site(Some("a.log"), None)];
        let logs = Logs::start(&config).unwrap().unwrap();
        assert_eq!(logs.route(&config).unwrap(), vec![None, Some(0)]);
        let _ = std::fs::remove_dir_all(&d);
    }
}
