//! Watch reads a stop can interrupt. A reflector thread blocks reading its
//! watch stream; told to stop, it used to notice only at the stream's next line
//! (an event, or kube-apiserver's bookmark about once a minute), so a stopped
//! watch kept its thread and its connection that long. A reload that removes
//! a hook stops its watches, and 100 reloads in a row must not leave 100 of
//! them behind.
//!
//! [`InterruptibleConnector`] sits between ureq's TCP and TLS layers. A thread
//! that registered its stop channel ([`stop_reads_on`], the reflector threads)
//! waits for input in slices of [`CHECK_EVERY`], checking the channel between
//! slices, and gets a `ConnectionAborted` error once it has disconnected; the
//! whole read keeps its timeout. Other threads read as before. A slice that
//! times out has read nothing, so the connection is still whole when the
//! next slice starts.

use crossbeam_channel::{Receiver, TryRecvError};
use std::cell::RefCell;
use std::time::Instant;
use ureq::Error;
use ureq::unversioned::transport::time::Duration as UreqDuration;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

/// How often a waiting read checks its thread's stop channel.
const CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

thread_local! {
    /// The current thread's stop channel: disconnected means stop.
    static STOP: RefCell<Option<Receiver<()>>> = const { RefCell::new(None) };
}

/// Makes this thread's reads end once `stop`'s sender is gone.
pub(crate) fn stop_reads_on(stop: Receiver<()>) {
    STOP.with(|s| *s.borrow_mut() = Some(stop));
}

/// `None`: this thread registered no stop; else whether it was told to stop.
fn stop_state() -> Option<bool> {
    STOP.with(|s| {
        let s = s.borrow();
        let rx = s.as_ref()?;
        Some(!matches!(rx.try_recv(), Err(TryRecvError::Empty)))
    })
}

/// Wraps the TCP transport (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct InterruptibleConnector;

impl<In: Transport> Connector<In> for InterruptibleConnector {
    type Out = Interruptible<In>;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, Error> {
        Ok(chained.map(|inner| Interruptible { inner }))
    }
}

/// A transport whose waits for input a stop ends.
#[derive(Debug)]
pub(crate) struct Interruptible<T> {
    inner: T,
}

impl<T: Transport> Transport for Interruptible<T> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.inner.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        if stop_state().is_none() {
            return self.inner.await_input(timeout);
        }
        let whole = timeout.for_read();
        let started = Instant::now();
        loop {
            let left = match whole.after {
                UreqDuration::NotHappening => None,
                UreqDuration::Exact(d) => Some(d.saturating_sub(started.elapsed())),
            };
            let slice = left.map_or(CHECK_EVERY, |l| l.min(CHECK_EVERY));
            let last = left.is_some_and(|l| l <= CHECK_EVERY);
            let next = NextTimeout {
                after: slice.into(),
                reason: whole.reason,
                per_read: None,
                per_write: timeout.per_write,
            };
            match self.inner.await_input(next) {
                Err(Error::Timeout(_)) if !last => {}
                other => return other,
            }
            if stop_state() == Some(true) {
                // Not `Interrupted`: `BufRead::read_until` would retry that at once.
                let e = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "watch stopped");
                return Err(Error::Io(e));
            }
        }
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}
