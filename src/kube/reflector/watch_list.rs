//! The initial list as one streaming watch (Kubernetes' "watch-list", KEP-3157):
//! instead of paging through LIST requests, each one waiting on our own rate
//! limiter, the reflector opens one watch with `sendInitialEvents=true` and
//! `resourceVersionMatch=NotOlderThan`; the server sends every current object as
//! ADDED, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"` carrying
//! the list's resourceVersion, and the same stream goes on as an ordinary watch.
//! One request, one round trip, no client-side throttling between pages.
//!
//! A server that refuses those parameters (older than 1.27, or with its WatchList
//! feature gate off: 422 Invalid; or 403) makes the reflector fall back to paged
//! LISTs for the rest of its life. A 400 is not that: the server refuses the request
//! itself (a field selector the resource does not support), and a LIST would fail
//! the same way. Part of the reflector's state machine (`reflector.rs`).

use super::{Reflector, State, WatchErrorKind};
use crate::kube::decode::{self, Initial};
use crate::kube::http::Stream;
use crate::log;
use std::io::BufRead;
use std::time::Duration;

impl Reflector {
    /// Opens the watch-list stream (or falls back to a LIST).
    pub(super) fn open_watch_list(&mut self) -> State {
        let secs = self.watch_timeout_secs();
        let path = format!(
            "{}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={secs}{}",
            self.path(),
            self.selectors()
        );
        match self
            .client
            .transport()
            .stream(&path, Duration::from_secs(secs + 30))
        {
            Ok(stream) => {
                self.backoff.reset();
                State::InitialEvents {
                    stream,
                    items: Vec::new(),
                }
            }
            Err(e) if matches!(e.status_code(), Some(403 | 422)) => {
                self.watch_list = false;
                log::info(
                    "the API server does not stream initial lists: listing in pages",
                    &[
                        ("resource", &self.resource.resource),
                        ("error", &e.to_string()),
                    ],
                );
                State::Empty
            }
            Err(e) => {
                let next = self.fail(super::failure_kind(&e), &e.to_string(), State::Empty);
                self.wait_as_asked(next, e.retry_after())
            }
        }
    }

    /// Reads one line of the initial events; at the end bookmark the list is
    /// installed and the stream goes on as the watch.
    pub(super) fn read_initial(
        &mut self,
        mut stream: Stream,
        mut items: Vec<crate::kube::cache::Item>,
    ) -> State {
        self.line.clear();
        let read = stream.read_until(b'\n', &mut self.line);
        let message = match read {
            Ok(0) => "watch-list stream ended before its initial-events-end bookmark".to_string(),
            Ok(_) => match decode::initial_line(&self.line, self.type_meta()) {
                Initial::Item(item) => {
                    items.push(item);
                    return State::InitialEvents { stream, items };
                }
                Initial::Skip => return State::InitialEvents { stream, items },
                Initial::End(rv) => {
                    self.backoff.reset();
                    return match self.finish_list(items, &rv) {
                        true => State::Watching { rv, stream },
                        false => State::Stopped,
                    };
                }
                Initial::Expired(m) => return self.desync(&m),
                Initial::Failed(m) => m,
            },
            Err(e) => e.to_string(),
        };
        self.fail(WatchErrorKind::UnexpectedEof, &message, State::Empty)
    }
}
