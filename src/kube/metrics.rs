//! The client's Prometheus series: requests by verb and code, request latency by
//! verb and code, and time spent waiting in the QPS limiter. Created unregistered;
//! the operator registers them with [`ClientMetrics::register`] on its registry.
//! Updated by every thread that sends requests (prometheus types are lock-free).

use crate::metrics::Families;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// Request metrics of one client; `component` tells the main client from the patcher's.
#[derive(Clone)]
pub struct ClientMetrics {
    /// `kubernetes_client_request_result_total{component,verb,code}`.
    pub requests: IntCounterVec,
    /// `kubernetes_client_request_latency_seconds{component,verb,code}`.
    pub(crate) latency: HistogramVec,
    /// `kubernetes_client_rate_limiter_latency_seconds{component}`.
    pub rate_limiter: Histogram,
}

impl ClientMetrics {
    /// New series named `<prefix>kubernetes_client_*` with the given component label.
    pub(crate) fn new(prefix: &str, component: &str) -> ClientMetrics {
        let requests = IntCounterVec::new(
            Opts::new(
                format!("{prefix}kubernetes_client_request_result_total"),
                "Kubernetes API requests by verb and code",
            )
            .const_label("component", component),
            &["verb", "code"],
        );
        let latency = HistogramVec::new(
            HistogramOpts::new(
                format!("{prefix}kubernetes_client_request_latency_seconds"),
                "Kubernetes API request latency",
            )
            .const_label("component", component),
            &["verb", "code"],
        );
        let rate_limiter = Histogram::with_opts(
            HistogramOpts::new(
                format!("{prefix}kubernetes_client_rate_limiter_latency_seconds"),
                "Time requests waited for the client-side QPS limiter",
            )
            .const_label("component", component),
        );
        // The names and label sets are fixed strings, so construction cannot fail for
        // any prefix made of metric-name characters; fall back to a safe prefix if not.
        match (requests, latency, rate_limiter) {
            (Ok(requests), Ok(latency), Ok(rate_limiter)) => ClientMetrics {
                requests,
                latency,
                rate_limiter,
            },
            _ if !prefix.is_empty() => ClientMetrics::new("", component),
            _ => unreachable!("fixed metric names are valid"),
        }
    }

    /// Registers every series on `registry`.
    pub(crate) fn register(&self, registry: &Families) -> prometheus::Result<()> {
        registry.register(Box::new(self.requests.clone()))?;
        registry.register(Box::new(self.latency.clone()))?;
        registry.register(Box::new(self.rate_limiter.clone()))
    }

    /// Records one finished request; `code` is the HTTP status or `<error>`.
    pub(crate) fn observe(&self, verb: &str, code: &str, seconds: f64) {
        self.requests.with_label_values(&[verb, code]).inc();
        self.latency
            .with_label_values(&[verb, code])
            .observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_and_counts() {
        let m = ClientMetrics::new("shell_operator_", "main");
        let r = Families::default();
        m.register(&r).unwrap();
        m.observe("GET", "200", 0.01);
        m.observe("GET", "200", 0.02);
        m.observe("LIST", "500", 0.02);
        assert_eq!(m.requests.with_label_values(&["GET", "200"]).get(), 2);
        let names: Vec<String> = r.gather().iter().map(|f| f.name().to_string()).collect();
        assert!(
            names.contains(&"shell_operator_kubernetes_client_request_result_total".to_string()),
            "{names:?}"
        );
    }
}
