//! Object calls on one resource: get, list, create, replace, delete (with
//! propagationPolicy), patch (merge, JSON patch, strategic merge, server-side
//! apply) and the same on subresources (`status`, `scale`). Namespaced and
//! cluster-scoped alike; errors carry the server's Status message. Used by queue
//! threads (object patcher, hooks' side effects) and the monitors' startup.

use super::Client;
use super::decode;
use super::discovery::Resource;
use super::error::KubeError;
use super::http::{Request, strip_query};
use super::reflector::Object;
use super::selector::query_escape;
use serde_json::Value;
use ureq::http::Method;
use vendor_k8s_types::ObjectList;

/// A patch and its flavour.
#[derive(Debug, Clone)]
pub enum Patch {
    /// `application/merge-patch+json` (RFC 7386).
    Merge(Value),
    /// `application/json-patch+json` (RFC 6902): an array of operations.
    Json(Value),
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic(Value),
    /// `application/apply-patch+yaml`: server-side apply of a full intent object.
    Apply(Value),
}

impl Patch {
    fn content_type(&self) -> &'static str {
        match self {
            Patch::Merge(_) => "application/merge-patch+json",
            Patch::Json(_) => "application/json-patch+json",
            Patch::Strategic(_) => "application/strategic-merge-patch+json",
            Patch::Apply(_) => "application/apply-patch+yaml",
        }
    }

    fn body(&self) -> &Value {
        match self {
            Patch::Merge(v) | Patch::Json(v) | Patch::Strategic(v) | Patch::Apply(v) => v,
        }
    }
}

/// Options of a patch.
#[derive(Debug, Clone, Default)]
pub struct PatchParams {
    /// `fieldManager`; server-side apply requires one (default `shell-operator`).
    pub field_manager: Option<String>,
    /// `force=true`: take over conflicting fields (apply only).
    pub force: bool,
    /// `dryRun=All`: the server validates and answers, and stores nothing.
    pub dry_run: bool,
}

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Foreground,
    Background,
    Orphan,
}

/// Options of a list call (one page).
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    pub label_selector: String,
    pub field_selector: String,
    /// Page size; 0 means no limit.
    pub limit: u32,
    pub continue_token: String,
}

/// Calls on one resource in one namespace (or cluster-wide).
pub struct Api<'c> {
    client: &'c Client,
    resource: Resource,
    namespace: Option<String>,
}

impl<'c> Api<'c> {
    pub(crate) fn new(client: &'c Client, resource: Resource, namespace: Option<&str>) -> Api<'c> {
        let namespace = namespace
            .filter(|n| !n.is_empty() && resource.namespaced)
            .map(String::from);
        Api {
            client,
            resource,
            namespace,
        }
    }

    /// The object's path; a namespaced resource needs a namespace here.
    fn object_path(&self, name: &str, sub: Option<&str>) -> Result<String, KubeError> {
        if name.is_empty() {
            return Err(KubeError::Invalid(format!(
                "{}: object name is empty",
                self.resource.kind
            )));
        }
        if self.resource.namespaced && self.namespace.is_none() {
            return Err(KubeError::Invalid(format!(
                "{} '{name}' is namespaced; no namespace given",
                self.resource.kind
            )));
        }
        let mut p = format!(
            "{}/{}",
            self.resource.collection_path(self.namespace.as_deref()),
            query_escape(name)
        );
        if let Some(s) = sub {
            p.push('/');
            p.push_str(s);
        }
        Ok(p)
    }

    fn call(
        &self,
        verb: &'static str,
        method: Method,
        path: &str,
        body: Option<(&'static str, Vec<u8>)>,
    ) -> Result<Value, KubeError> {
        let req = Request {
            verb,
            method,
            path,
            body,
        };
        self.client.transport().send(&req)?.json(verb, path)
    }

    fn json_body(v: &Value) -> Option<(&'static str, Vec<u8>)> {
        Some((
            "application/json",
            serde_json::to_vec(v).unwrap_or_default(),
        ))
    }

    /// GET one object.
    pub fn get(&self, name: &str) -> Result<Value, KubeError> {
        self.call("GET", Method::GET, &self.object_path(name, None)?, None)
    }

    /// GET a subresource such as `status` or `scale`.
    pub fn get_subresource(&self, sub: &str, name: &str) -> Result<Value, KubeError> {
        self.call(
            "GET",
            Method::GET,
            &self.object_path(name, Some(sub))?,
            None,
        )
    }

    /// One LIST page.
    pub fn list(&self, p: &ListParams) -> Result<ObjectList<Value>, KubeError> {
        let path = self.list_path(p);
        let req = Request {
            verb: "LIST",
            method: Method::GET,
            path: &path,
            body: None,
        };
        self.client.transport().send(&req)?.json("LIST", &path)
    }

    /// The path of a LIST request with `p`'s selectors, limit and continue token.
    fn list_path(&self, p: &ListParams) -> String {
        let mut q = Vec::new();
        if !p.label_selector.is_empty() {
            q.push(format!("labelSelector={}", query_escape(&p.label_selector)));
        }
        if !p.field_selector.is_empty() {
            q.push(format!("fieldSelector={}", query_escape(&p.field_selector)));
        }
        if p.limit > 0 {
            q.push(format!("limit={}", p.limit));
        }
        if !p.continue_token.is_empty() {
            q.push(format!("continue={}", query_escape(&p.continue_token)));
        }
        let mut path = self.resource.collection_path(self.namespace.as_deref());
        if !q.is_empty() {
            path = format!("{path}?{}", q.join("&"));
        }
        path
    }

    /// Every page of a LIST; the result carries the snapshot's resourceVersion.
    pub fn list_all(&self, p: &ListParams) -> Result<ObjectList<Value>, KubeError> {
        let mut p = p.clone();
        let mut all = self.list(&p)?;
        while !all.metadata.continue_token.is_empty() {
            p.continue_token = std::mem::take(&mut all.metadata.continue_token);
            let page = self.list(&p)?;
            all.items.extend(page.items);
            all.metadata.continue_token = page.metadata.continue_token;
        }
        Ok(all)
    }

    /// Every page of a LIST, each object decoded once as a reflector decodes its
    /// list (canonical text, metadata, `apiVersion`/`kind` filled in), with the
    /// list's resourceVersion (its first page's: later pages continue that snapshot).
    pub(crate) fn list_objects(&self, p: &ListParams) -> Result<(Vec<Object>, String), KubeError> {
        let mut p = ListParams {
            continue_token: String::new(),
            ..p.clone()
        };
        let api_version = self.resource.api_version();
        let type_meta = Some((api_version.as_str(), self.resource.kind.as_str()));
        let mut objects = Vec::new();
        let mut version: Option<String> = None;
        loop {
            let path = self.list_path(&p);
            let req = Request {
                verb: "LIST",
                method: Method::GET,
                path: &path,
                body: None,
            };
            let body = self.client.transport().send(&req)?.ok("LIST", &path)?;
            let (items, meta) =
                decode::list_page(&body, type_meta).map_err(|message| KubeError::Decode {
                    what: format!("LIST {}", strip_query(&path)),
                    message,
                })?;
            objects.extend(items.into_iter().map(|i| i.object));
            let version = version.get_or_insert_with(|| meta.resource_version.clone());
            if meta.continue_token.is_empty() {
                return Ok((objects, version.clone()));
            }
            p.continue_token = meta.continue_token;
        }
    }

    /// POST a new object (its namespace comes from this Api, or the object).
    pub fn create(&self, obj: &Value) -> Result<Value, KubeError> {
        let ns = self
            .namespace
            .clone()
            .or_else(|| obj["metadata"]["namespace"].as_str().map(String::from));
        let api = Api::new(self.client, self.resource.clone(), ns.as_deref());
        if api.resource.namespaced && api.namespace.is_none() {
            return Err(KubeError::Invalid(format!(
                "{} is namespaced; no namespace given",
                self.resource.kind
            )));
        }
        let path = api.resource.collection_path(api.namespace.as_deref());
        api.call("POST", Method::POST, &path, Self::json_body(obj))
    }

    /// PUT a whole object (optimistic concurrency through its resourceVersion).
    pub fn replace(&self, name: &str, obj: &Value) -> Result<Value, KubeError> {
        self.call(
            "PUT",
            Method::PUT,
            &self.object_path(name, None)?,
            Self::json_body(obj),
        )
    }

    /// PUT a subresource, e.g. `status`.
    pub fn replace_subresource(
        &self,
        sub: &str,
        name: &str,
        obj: &Value,
    ) -> Result<Value, KubeError> {
        self.call(
            "PUT",
            Method::PUT,
            &self.object_path(name, Some(sub))?,
            Self::json_body(obj),
        )
    }

    /// DELETE an object; Ok(()) also when the server answers with the object.
    pub fn delete(&self, name: &str, propagation: Option<Propagation>) -> Result<(), KubeError> {
        let path = self.object_path(name, None)?;
        let body = propagation.map(|p| {
            let policy = match p {
                Propagation::Foreground => "Foreground",
                Propagation::Background => "Background",
                Propagation::Orphan => "Orphan",
            };
            let v = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy});
            ("application/json", v.to_string().into_bytes())
        });
        let req = Request {
            verb: "DELETE",
            method: Method::DELETE,
            path: &path,
            body,
        };
        self.client
            .transport()
            .send(&req)?
            .json::<serde::de::IgnoredAny>("DELETE", &path)
            .map(|_| ())
    }

    /// PATCH an object.
    pub fn patch(&self, name: &str, patch: &Patch, p: &PatchParams) -> Result<Value, KubeError> {
        self.patch_at(self.object_path(name, None)?, patch, p)
    }

    /// PATCH a subresource, e.g. `status` or `scale`.
    pub fn patch_subresource(
        &self,
        sub: &str,
        name: &str,
        patch: &Patch,
        p: &PatchParams,
    ) -> Result<Value, KubeError> {
        self.patch_at(self.object_path(name, Some(sub))?, patch, p)
    }

    fn patch_at(
        &self,
        mut path: String,
        patch: &Patch,
        p: &PatchParams,
    ) -> Result<Value, KubeError> {
        let mut q = Vec::new();
        let manager = match (&p.field_manager, patch) {
            (Some(m), _) => Some(m.as_str()),
            (None, Patch::Apply(_)) => Some("shell-operator"),
            _ => None,
        };
        if let Some(m) = manager {
            q.push(format!("fieldManager={}", query_escape(m)));
        }
        if p.force && matches!(patch, Patch::Apply(_)) {
            q.push("force=true".to_string());
        }
        if p.dry_run {
            q.push("dryRun=All".to_string());
        }
        if !q.is_empty() {
            path = format!("{path}?{}", q.join("&"));
        }
        let body = Some((
            patch.content_type(),
            serde_json::to_vec(patch.body()).unwrap_or_default(),
        ));
        self.call("PATCH", Method::PATCH, &path, body)
    }
}
