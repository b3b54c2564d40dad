//! Discovery: which resources the server has. Caches `/api`, `/apis` and each
//! group-version's resource list, and resolves what a hook writes as `kind` (Kind,
//! plural, singular or short name, any case) plus an optional `apiVersion` to a
//! [`Resource`]. Without apiVersion the preferred version of each group is searched,
//! core group first, then groups in the server's order; the first match wins. A miss
//! drops the cache and asks the server again once (a CRD created after start).
//! Shared by all threads through the client; the cache is behind a mutex, and
//! requests are made without holding it.

use super::error::KubeError;
use super::http::{Request, Transport};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use ureq::http::Method;
use vendor_k8s_types::{APIGroupList, APIResource, APIResourceList, APIVersions};

/// A resolved resource: where its objects live and whether they are namespaced.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    /// The plural name used in URLs, e.g. `deployments`.
    pub resource: String,
    pub kind: String,
    pub namespaced: bool,
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection path, in `namespace` when the resource is namespaced and one is
    /// given (None or a cluster-scoped resource: across the cluster).
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let prefix = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace.filter(|n| self.namespaced && !n.is_empty()) {
            Some(ns) => format!("{prefix}/namespaces/{ns}/{}", self.resource),
            None => format!("{prefix}/{}", self.resource),
        }
    }
}

/// The discovery cache.
pub(crate) struct Discovery {
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    /// Group-versions to search when no apiVersion is given, in order.
    preferred: Option<Vec<String>>,
    /// Resource lists fetched so far, by group-version.
    lists: HashMap<String, Arc<Vec<APIResource>>>,
}

impl Discovery {
    pub(crate) fn new() -> Discovery {
        Discovery {
            cache: Mutex::new(Cache::default()),
        }
    }

    /// Forgets everything learnt so far.
    pub(crate) fn invalidate(&self) {
        *self.lock() = Cache::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves `kind` (+ optional `api_version`); `context` names the hook and
    /// binding for the error message.
    pub(crate) fn resolve(
        &self,
        t: &Transport,
        api_version: &str,
        kind: &str,
        context: &str,
    ) -> Result<Resource, KubeError> {
        for attempt in 0..2 {
            if attempt == 1 {
                self.invalidate();
            }
            if let Some(r) = self.find(t, api_version.trim(), kind.trim())? {
                return Ok(r);
            }
        }
        Err(KubeError::UnknownKind {
            context: context.into(),
            api_version: api_version.into(),
            kind: kind.into(),
        })
    }

    fn find(
        &self,
        t: &Transport,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Resource>, KubeError> {
        let gvs = if api_version.is_empty() {
            self.preferred(t)?
        } else {
            vec![api_version.to_string()]
        };
        for gv in gvs {
            let Some(list) = self.resources(t, &gv)? else {
                continue;
            };
            if let Some(r) = list.iter().find(|r| spelled(r, kind)) {
                let (group, version) = match gv.split_once('/') {
                    Some((g, v)) => (g.to_string(), v.to_string()),
                    None => (String::new(), gv.clone()),
                };
                return Ok(Some(Resource {
                    group,
                    version,
                    resource: r.name.clone(),
                    kind: r.kind.clone(),
                    namespaced: r.namespaced,
                }));
            }
        }
        Ok(None)
    }

    /// The preferred group-version of every group: `v1` first, then `/apis` order.
    fn preferred(&self, t: &Transport) -> Result<Vec<String>, KubeError> {
        if let Some(p) = &self.lock().preferred {
            return Ok(p.clone());
        }
        let core: APIVersions = t.send(&get("/api"))?.json("GET", "/api")?;
        let groups: APIGroupList = t.send(&get("/apis"))?.json("GET", "/apis")?;
        let mut out: Vec<String> = core.versions.into_iter().take(1).collect();
        for g in groups.groups {
            match g
                .preferred_version
                .or_else(|| g.versions.into_iter().next())
            {
                Some(v) => out.push(v.group_version),
                None => continue,
            }
        }
        self.lock().preferred = Some(out.clone());
        Ok(out)
    }

    /// The resources of `gv`, None when the server does not serve it.
    fn resources(
        &self,
        t: &Transport,
        gv: &str,
    ) -> Result<Option<Arc<Vec<APIResource>>>, KubeError> {
        if let Some(l) = self.lock().lists.get(gv) {
            return Ok(Some(l.clone()));
        }
        let path = if gv.contains('/') {
            format!("/apis/{gv}")
        } else {
            format!("/api/{gv}")
        };
        let resp = t.send(&get(&path))?;
        if resp.status == 404 {
            return Ok(None);
        }
        let list: APIResourceList = resp.json("GET", &path)?;
        let list = Arc::new(list.resources);
        self.lock().lists.insert(gv.to_string(), list.clone());
        Ok(Some(list))
    }
}

fn get(path: &str) -> Request<'_> {
    Request {
        verb: "GET",
        method: Method::GET,
        path,
        body: None,
    }
}

/// Whether `kind` names resource `r`: Kind, plural, singular or a short name, any case.
/// Subresources (`pods/status`) and resources without verbs never match.
fn spelled(r: &APIResource, kind: &str) -> bool {
    if r.name.contains('/') || r.verbs.is_empty() {
        return false;
    }
    let eq = |s: &str| !s.is_empty() && s.eq_ignore_ascii_case(kind);
    eq(&r.kind) || eq(&r.name) || eq(&r.singular_name) || r.short_names.iter().any(|s| eq(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deploy() -> APIResource {
        APIResource {
            name: "deployments".into(),
            singular_name: "deployment".into(),
            namespaced: true,
            kind: "Deployment".into(),
            verbs: vec!["get".into(), "list".into()],
            short_names: vec!["deploy".into()],
        }
    }

    #[test]
    fn every_spelling_matches() {
        let r = deploy();
        for k in [
            "Deployment",
            "deployment",
            "DEPLOYMENT",
            "deployments",
            "Deployments",
            "deploy",
            "DEPLOY",
        ] {
            assert!(spelled(&r, k), "{k}");
        }
        for k in ["deploys", "dep", ""] {
            assert!(!spelled(&r, k), "{k}");
        }
        let sub = APIResource {
            name: "deployments/status".into(),
            ..deploy()
        };
        assert!(!spelled(&sub, "Deployment"));
        let noverbs = APIResource {
            verbs: vec![],
            ..deploy()
        };
        assert!(!spelled(&noverbs, "Deployment"));
    }

    #[test]
    fn paths() {
        let r = Resource {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            kind: "Deployment".into(),
            namespaced: true,
        };
        assert_eq!(
            r.collection_path(Some("ns")),
            "/apis/apps/v1/namespaces/ns/deployments"
        );
        assert_eq!(r.collection_path(None), "/apis/apps/v1/deployments");
        assert_eq!(r.api_version(), "apps/v1");
        let n = Resource {
            group: "".into(),
            version: "v1".into(),
            resource: "nodes".into(),
            kind: "Node".into(),
            namespaced: false,
        };
        assert_eq!(n.collection_path(Some("ns")), "/api/v1/nodes");
        assert_eq!(n.api_version(), "v1");
    }
}
