//! Webhook request metrics: a counter by server, binding and result, and a
//! duration histogram by server and binding. Registered in the operator's
//! registry at startup; updated by the webhook handler threads.

use crate::metrics::{Metrics, MetricsError};
use prometheus::{CounterVec, HistogramOpts, HistogramVec, Opts};
use std::time::Duration;

/// Request duration buckets: webhooks answer within the API server's timeout (≤ 30 s).
const BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The webhook metrics.
pub struct WebhookMetrics {
    /// `<prefix>webhook_requests_total{webhook, binding, result}`.
    pub(crate) requests: CounterVec,
    /// `<prefix>webhook_request_seconds{webhook, binding}`.
    pub(crate) seconds: HistogramVec,
}

impl WebhookMetrics {
    /// Creates the metrics under `prefix` and registers them in `metrics`.
    pub fn register(prefix: &str, metrics: &Metrics) -> Result<WebhookMetrics, MetricsError> {
        let err = |e: prometheus::Error| MetricsError(e.to_string());
        let requests = CounterVec::new(
            Opts::new(
                format!("{prefix}webhook_requests_total"),
                "Webhook requests by server (admission, conversion), binding and result.",
            ),
            &["webhook", "binding", "result"],
        )
        .map_err(err)?;
        let seconds = HistogramVec::new(
            HistogramOpts::new(
                format!("{prefix}webhook_request_seconds"),
                "Time to answer a webhook request, hook run included.",
            )
            .buckets(BUCKETS.to_vec()),
            &["webhook", "binding"],
        )
        .map_err(err)?;
        metrics.register(Box::new(requests.clone()))?;
        metrics.register(Box::new(seconds.clone()))?;
        Ok(WebhookMetrics { requests, seconds })
    }

    /// Counts one answered request.
    pub(crate) fn observe(&self, webhook: &str, binding: &str, result: &str, took: Duration) {
        self.requests
            .with_label_values(&[webhook, binding, result])
            .inc();
        self.seconds
            .with_label_values(&[webhook, binding])
            .observe(took.as_secs_f64());
    }
}
