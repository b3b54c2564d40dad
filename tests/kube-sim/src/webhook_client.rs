//! The HTTPS client kube-sim uses to call admission and conversion webhooks,
//! the way kube-apiserver does: a `clientConfig` is resolved to an address
//! (`url`, or `service` routed through the Service's Endpoints / EndpointSlice
//! object, since there is no cluster DNS), the server certificate is verified
//! with the `caBundle` against `<service>.<namespace>.svc` (or the URL's host),
//! and one JSON POST is made within the webhook's timeout (`webhook_http`).
//! Used by `admission` and `conversion`.

use crate::registry::ResourceType;
use crate::store::Store;
use base64::Engine;
use serde_json::Value;
use std::net::{SocketAddr, ToSocketAddrs};

/// Where and how to call one webhook.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The address actually dialled (from the URL or the Endpoints object).
    pub addr: SocketAddr,
    /// The name the certificate must carry.
    pub server_name: String,
    /// Path and query sent in the request line.
    pub path: String,
    /// The URL as kube-apiserver names it in errors (`https://svc.ns.svc:443/p?timeout=10s`).
    pub url: String,
    /// PEM from `caBundle`.
    pub ca_pem: Vec<u8>,
}

/// Why a webhook call failed; `Display` reads like Go's `url.Error` text.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The clientConfig could not be turned into an address (service missing, no endpoints).
    Resolve(String),
    /// The timeout passed before an answer arrived.
    Timeout,
    /// Connecting, TLS or the HTTP exchange failed.
    Transport(String),
    /// The webhook answered with a non-2xx HTTP status.
    Status(u16, String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Resolve(m) | CallError::Transport(m) => f.write_str(m),
            CallError::Timeout => f.write_str("context deadline exceeded"),
            CallError::Status(code, body) => {
                write!(
                    f,
                    "an error on the server ({body:?}) has prevented the request from succeeding (post status {code})"
                )
            }
        }
    }
}

fn service_lookup(st: &Store, plural: &str, group: &str, ns: &str, name: &str) -> Option<Value> {
    let rt: &ResourceType = st.registry.by_path(group, "v1", plural)?;
    st.get(rt, ns, name).ok()
}

/// Resolves `clientConfig` against the stored Services and Endpoints.
pub fn resolve(st: &Store, cc: &Value, timeout_secs: u64) -> Result<Endpoint, CallError> {
    let ca_pem = decode_ca(cc)?;
    if let Some(url) = cc["url"].as_str() {
        return from_url(url, ca_pem, timeout_secs);
    }
    let svc = &cc["service"];
    let (ns, name) = (
        svc["namespace"].as_str().unwrap_or(""),
        svc["name"].as_str().unwrap_or(""),
    );
    let port = svc["port"].as_u64().unwrap_or(443);
    let path = svc["path"].as_str().unwrap_or("");
    let host = format!("{name}.{ns}.svc");
    let url = format!("https://{host}:{port}{path}?timeout={timeout_secs}s");
    let service = service_lookup(st, "services", "", ns, name)
        .ok_or_else(|| CallError::Resolve(format!("Post {url:?}: service \"{name}\" not found")))?;
    let addr = endpoint_addr(st, &service, ns, name, port)
        .map_err(|m| CallError::Resolve(format!("Post {url:?}: {m}")))?;
    Ok(Endpoint {
        addr,
        server_name: host,
        path: format!("{path}?timeout={timeout_secs}s"),
        url,
        ca_pem,
    })
}

fn decode_ca(cc: &Value) -> Result<Vec<u8>, CallError> {
    let b64 = cc["caBundle"].as_str().unwrap_or("");
    if b64.is_empty() {
        return Err(CallError::Resolve(
            "clientConfig.caBundle is empty: kube-sim has no system roots to verify the webhook with".into(),
        ));
    }
    base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| CallError::Resolve(format!("clientConfig.caBundle is not base64: {e}")))
}

fn from_url(url: &str, ca_pem: Vec<u8>, timeout_secs: u64) -> Result<Endpoint, CallError> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| CallError::Resolve(format!("clientConfig.url {url:?} must be https")))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            (h, p.parse::<u16>().unwrap_or(443))
        }
        _ => (authority, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let sep = if path.contains('?') { '&' } else { '?' };
    let full = format!("{url}{sep}timeout={timeout_secs}s");
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            CallError::Resolve(format!(
                "Post {full:?}: dial tcp: lookup {host}: no such host"
            ))
        })?;
    Ok(Endpoint {
        addr,
        server_name: host.to_string(),
        path: format!("{path}{sep}timeout={timeout_secs}s"),
        url: full,
        ca_pem,
    })
}

/// The Service port entry `port` names: (its name, its targetPort as a number if numeric).
fn service_port(service: &Value, port: u64) -> Result<(String, Option<u64>), String> {
    let ports = service["spec"]["ports"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let p = ports
        .iter()
        .find(|p| p["port"].as_u64() == Some(port))
        .ok_or_else(|| format!("service port {port} not found"))?;
    let name = p["name"].as_str().unwrap_or("").to_string();
    let target = match &p["targetPort"] {
        Value::Number(n) => n.as_u64(),
        Value::Null => Some(port),
        _ => None,
    };
    Ok((name, target))
}

/// The address of the first ready endpoint, with the endpoint port named like the
/// service port (kube-apiserver's rule), else the numeric targetPort.
fn endpoint_addr(
    st: &Store,
    service: &Value,
    ns: &str,
    name: &str,
    port: u64,
) -> Result<SocketAddr, String> {
    let (port_name, target) = service_port(service, port)?;
    let candidates = endpoints_candidates(st, ns, name);
    for (ip, ports) in candidates {
        let by_name = ports.iter().find(|(n, _)| *n == port_name).map(|(_, p)| *p);
        let chosen = by_name.or(target);
        if let (Some(p), Ok(ip)) = (chosen, ip.parse::<std::net::IpAddr>()) {
            return Ok(SocketAddr::new(ip, p as u16));
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}

/// (ip, [(port name, port)]) from the Endpoints object, then from EndpointSlices.
fn endpoints_candidates(st: &Store, ns: &str, name: &str) -> Vec<(String, Vec<(String, u64)>)> {
    let named_ports = |ps: &Value| -> Vec<(String, u64)> {
        ps.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|p| {
                        Some((
                            p["name"].as_str().unwrap_or("").to_string(),
                            p["port"].as_u64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    if let Some(ep) = service_lookup(st, "endpoints", "", ns, name) {
        for subset in ep["subsets"].as_array().into_iter().flatten() {
            let ports = named_ports(&subset["ports"]);
            for a in subset["addresses"].as_array().into_iter().flatten() {
                if let Some(ip) = a["ip"].as_str() {
                    out.push((ip.to_string(), ports.clone()));
                }
            }
        }
    }
    if let Some(rt) = st
        .registry
        .by_path("discovery.k8s.io", "v1", "endpointslices")
        .cloned()
    {
        let slices = st.list(&rt).into_iter().filter(|s| {
            s["metadata"]["namespace"] == ns
                && s["metadata"]["labels"]["kubernetes.io/service-name"] == name
        });
        for s in slices {
            let ports = named_ports(&s["ports"]);
            for e in s["endpoints"].as_array().into_iter().flatten() {
                if e["conditions"]["ready"] == false {
                    continue;
                }
                for ip in e["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    out.push((ip.to_string(), ports.clone()));
                }
            }
        }
    }
    out
}

pub use crate::webhook_http::post_json;
