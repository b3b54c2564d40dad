//! The object store: every object of every resource, one global resourceVersion
//! counter, a bounded history of change events (for watch replay and consistent
//! paged lists) and the set of open watch subscriptions. All access goes through
//! one `Mutex<Store>` in the server; methods here are plain and synchronous.

use crate::objmeta::{
    carry_identity, merge_for_mode, no_finalizers, prepare_identity, same_ignoring_rv,
};
use crate::registry::{Registry, ResourceType};
use crate::status::ApiError;
use crate::util::{fmt_time, new_uid, now_secs};
use crate::validation::validate;
use crossbeam_channel::{Receiver, Sender, unbounded};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One committed change. `old` is the state before it (None for ADDED).
/// Objects are shared with the object map, so history costs no copies.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub etype: EventType,
    pub res: String,
    pub obj: Arc<Value>,
    pub old: Option<Arc<Value>>,
}

/// What a watch subscription receives.
#[derive(Debug, Clone)]
pub enum WatchMsg {
    Event(Arc<Event>),
    /// End the stream now (fault injection or shutdown).
    Close,
}

/// How a write treats `.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Main resource over HTTP: status is kept from the stored object when the
    /// resource has a status subresource.
    Main,
    /// The `status` subresource: only `.status` changes.
    Status,
    /// Direct test access: the object is taken whole.
    Whole,
}

/// Result of a delete.
#[derive(Debug)]
pub enum Deleted {
    /// Removed; the final object.
    Gone(Value),
    /// Finalizers pending: marked with deletionTimestamp.
    Marked(Value),
}

/// An open watch subscription: its id, the history to replay, and the live feed.
pub struct Subscription {
    pub id: u64,
    pub replay: Vec<Arc<Event>>,
    pub rx: Receiver<WatchMsg>,
}

type Key = (String, String, String);

struct Subscriber {
    id: u64,
    res: String,
    tx: Sender<WatchMsg>,
}

/// The in-memory state of the cluster.
pub struct Store {
    pub registry: Registry,
    rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    history: VecDeque<Arc<Event>>,
    /// Watches and snapshots from an RV below this get 410 Expired.
    floor: u64,
    limit: usize,
    subscribers: Vec<Subscriber>,
    next_id: u64,
    /// Last server-side-apply configuration per (object key, field manager).
    applied: HashMap<(Key, String), Value>,
    /// Stand in for workload controllers (see `controllers`).
    pub auto_ready: bool,
    /// Refuse to create namespaced objects in a namespace that does not exist.
    pub strict_namespaces: bool,
}

const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
const NS_KEY: &str = "/namespaces";
const DEPLOY_KEY: &str = "apps/deployments";
const RS_KEY: &str = "apps/replicasets";

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or("")
}

/// Parses a resourceVersion string; RVs are opaque to clients but ours are numbers.
pub fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version: resourceVersion: Invalid value: {s:?}: strconv.ParseUint: \
             parsing {s:?}: invalid syntax"
        ))
    })
}

impl Store {
    /// An empty store with the built-in kinds and `history_limit` kept events.
    pub fn new(history_limit: usize) -> Store {
        let mut s = Store {
            registry: Registry::builtin(),
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            floor: 1,
            limit: history_limit,
            subscribers: Vec::new(),
            next_id: 1,
            applied: HashMap::new(),
            auto_ready: false,
            strict_namespaces: false,
        };
        let ns = s.registry.by_key(NS_KEY).cloned();
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
                             "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            if let Some(rt) = &ns {
                let _ = s.create(rt, "", obj, WriteMode::Whole, false);
            }
        }
        s
    }

    /// The current (latest) resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// Bumps the counter, records the event, updates the map, notifies watches.
    fn commit(&mut self, etype: EventType, rt: &str, mut obj: Value) -> Value {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let key = (
            rt.to_string(),
            meta_str(&obj, "namespace").into(),
            meta_str(&obj, "name").into(),
        );
        let obj = Arc::new(obj);
        let old = if etype == EventType::Deleted {
            self.applied.retain(|(k, _), _| *k != key);
            self.objects.remove(&key)
        } else {
            self.objects.insert(key, obj.clone())
        };
        let ev = Arc::new(Event {
            rv: self.rv,
            etype,
            res: rt.to_string(),
            obj: obj.clone(),
            old,
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.limit {
            if let Some(e) = self.history.pop_front() {
                self.floor = e.rv;
            }
        }
        if self.limit == 0 {
            self.floor = self.rv;
        }
        self.subscribers
            .retain(|s| s.res != rt || s.tx.send(WatchMsg::Event(ev.clone())).is_ok());
        Value::clone(&obj)
    }

    /// The stored object, if any.
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        let ns = if rt.namespaced { ns } else { "" };
        self.objects
            .get(&(rt.key(), ns.to_string(), name.to_string()))
            .map(|o| Value::clone(o))
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Current objects of a resource (all namespaces), in key order.
    pub fn list(&self, rt: &ResourceType) -> Vec<Value> {
        self.list_matching(rt, |_| true)
    }

    /// The objects of a resource that `keep` accepts, copied; the others are
    /// only looked at.
    pub fn list_matching(&self, rt: &ResourceType, keep: impl Fn(&Value) -> bool) -> Vec<Value> {
        let key = rt.key();
        self.objects
            .range((key.clone(), String::new(), String::new())..)
            .take_while(|((r, _, _), _)| *r == key)
            .filter(|(_, v)| keep(v))
            .map(|(_, v)| Value::clone(v))
            .collect()
    }

    /// One LIST page at `rv`: the objects after `after` (namespace, name) that `keep`
    /// accepts, at most `limit` of them (0: all), and how many more match. When
    /// nothing of this resource changed since `rv` the live map is read in place and
    /// only the page is copied (a paged list of many objects stays linear); otherwise
    /// the state at `rv` is rebuilt from history.
    pub fn list_page(
        &self,
        rt: &ResourceType,
        rv: u64,
        after: Option<(&str, &str)>,
        keep: impl Fn(&Value) -> bool,
        limit: usize,
    ) -> Result<(Vec<Value>, usize), ApiError> {
        let key = rt.key();
        let changed = rv < self.rv
            && (rv < self.floor
                || self
                    .history
                    .iter()
                    .rev()
                    .take_while(|e| e.rv > rv)
                    .any(|e| e.res == key));
        let mut page = Vec::new();
        let mut more = 0;
        let mut take = |o: &Value| {
            if !keep(o) {
                return;
            }
            if limit == 0 || page.len() < limit {
                page.push(o.clone());
            } else {
                more += 1;
            }
        };
        if changed {
            let is_after = |o: &Value| {
                after.is_none_or(|(ns, name)| {
                    (meta_str(o, "namespace"), meta_str(o, "name")) > (ns, name)
                })
            };
            self.list_at(rt, rv)?
                .iter()
                .filter(|o| is_after(o))
                .for_each(&mut take);
        } else {
            let start = match after {
                Some((ns, name)) => {
                    Bound::Excluded((key.clone(), ns.to_string(), name.to_string()))
                }
                None => Bound::Included((key.clone(), String::new(), String::new())),
            };
            self.objects
                .range((start, Bound::Unbounded))
                .take_while(|((r, _, _), _)| *r == key)
                .for_each(|(_, o)| take(o));
        }
        Ok((page, more))
    }

    /// Objects of a resource as they were at `rv`, rebuilt by undoing history.
    pub fn list_at(&self, rt: &ResourceType, rv: u64) -> Result<Vec<Value>, ApiError> {
        if rv >= self.rv {
            return Ok(self.list(rt));
        }
        if rv < self.floor {
            return Err(ApiError::expired(format!(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter (resourceVersion {rv} is \
                 older than {})",
                self.floor
            )));
        }
        let key = rt.key();
        let id = |o: &Value| {
            (
                meta_str(o, "namespace").to_string(),
                meta_str(o, "name").to_string(),
            )
        };
        let mut state: BTreeMap<(String, String), Value> =
            self.list(rt).into_iter().map(|o| (id(&o), o)).collect();
        for e in self
            .history
            .iter()
            .rev()
            .take_while(|e| e.rv > rv)
            .filter(|e| e.res == key)
        {
            match (&e.etype, &e.old) {
                (EventType::Added, _) => {
                    state.remove(&id(&e.obj));
                }
                (_, Some(old)) => {
                    state.insert(id(old), Value::clone(old));
                }
                (_, None) => {}
            }
        }
        Ok(state.into_values().collect())
    }

    /// Creates an object. `ns` (from the URL) wins over an empty body namespace.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        mut obj: Value,
        mode: WriteMode,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        }
        crate::typing::check_body(rt, rt.preferred(), &obj)?;
        prepare_identity(rt, ns, &mut obj)?;
        let name = meta_str(&obj, "name").to_string();
        let key = (
            rt.key(),
            meta_str(&obj, "namespace").to_string(),
            name.clone(),
        );
        // As on kube-apiserver: the namespace (admission) first, then validation,
        // then the name's uniqueness (storage).
        if rt.namespaced && self.strict_namespaces && !self.namespace_exists(&key.1) {
            return Err(ApiError::not_found("", "namespaces", &key.1));
        }
        let tracks_generation = crate::defaults::tracks_generation(rt, &obj);
        let meta = &mut obj["metadata"];
        meta["uid"] = json!(new_uid());
        meta["creationTimestamp"] = json!(fmt_time(now_secs()));
        if tracks_generation {
            meta["generation"] = json!(1);
        }
        if let Some(m) = meta.as_object_mut() {
            m.remove("deletionTimestamp");
            m.remove("resourceVersion");
        }
        if mode == WriteMode::Main && rt.status {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        crate::defaults::apply(rt, &mut obj);
        validate(rt, &obj)?;
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        if rt.key() == CRD_KEY {
            self.accept_crd(&mut obj, dry_run)?;
        }
        if dry_run {
            return Ok(obj);
        }
        let saved = self.commit(EventType::Added, &rt.key(), obj);
        self.after_write(rt, &saved);
        Ok(saved)
    }

    /// Stores an object a dry-run `create` prepared (uid, timestamps and defaults
    /// kept), so admission webhooks see exactly what is stored.
    pub fn create_prepared(&mut self, rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
        let key = (
            rt.key(),
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &key.2));
        }
        if rt.namespaced && self.strict_namespaces && !self.namespace_exists(&key.1) {
            return Err(ApiError::not_found("", "namespaces", &key.1));
        }
        if rt.key() == CRD_KEY {
            self.registry
                .register_crd(&obj)
                .map_err(ApiError::invalid)?;
        }
        let saved = self.commit(EventType::Added, &rt.key(), obj);
        self.after_write(rt, &saved);
        Ok(saved)
    }

    /// Validates a CRD, registers its resource and marks it Established.
    fn accept_crd(&mut self, crd: &mut Value, dry_run: bool) -> Result<(), ApiError> {
        crate::crd::validate(crd)?;
        if !dry_run {
            self.registry.register_crd(crd).map_err(ApiError::invalid)?;
        }
        crate::crd::establish(crd);
        Ok(())
    }

    /// Replaces an object (PUT semantics). A non-empty stale resourceVersion is a Conflict.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        mut obj: Value,
        mode: WriteMode,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        }
        crate::typing::check_body(rt, rt.preferred(), &obj)?;
        let old = self.get(rt, ns, name)?;
        let body_name = meta_str(&obj, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let rv = meta_str(&obj, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(&rt.group, &rt.plural, name));
        }
        obj = merge_for_mode(rt, &old, obj, mode);
        carry_identity(rt, &old, &mut obj);
        crate::defaults::apply(rt, &mut obj);
        validate(rt, &obj)?;
        if rt.key() == CRD_KEY {
            self.accept_crd(&mut obj, dry_run)?;
        }
        if same_ignoring_rv(&old, &obj) {
            return Ok(old);
        }
        if dry_run {
            return Ok(obj);
        }
        let finalized = !obj["metadata"]["deletionTimestamp"].is_null() && no_finalizers(&obj);
        if finalized {
            return Ok(self.remove(rt, obj));
        }
        let saved = self.commit(EventType::Modified, &rt.key(), obj);
        self.after_write(rt, &saved);
        Ok(saved)
    }

    /// With auto-ready on, writes the status a controller would report (a second event).
    fn after_write(&mut self, rt: &ResourceType, saved: &Value) {
        if !self.auto_ready {
            return;
        }
        if let Some(status) = crate::controllers::ready_status(rt, saved) {
            let mut next = saved.clone();
            next["status"] = status;
            self.commit(EventType::Modified, &rt.key(), next);
        }
        if rt.key() == DEPLOY_KEY {
            self.sync_replica_set(saved);
        }
    }

    /// ReplicaSets in `ns` controlled by the object with `uid`: their names.
    fn owned_replica_sets(&self, ns: &str, uid: &str) -> Vec<String> {
        let Some(rs_rt) = self.registry.by_key(RS_KEY) else {
            return Vec::new();
        };
        self.list(rs_rt)
            .iter()
            .filter(|o| meta_str(o, "namespace") == ns && crate::controllers::controlled_by(o, uid))
            .map(|o| meta_str(o, "name").to_string())
            .collect()
    }

    /// Auto-ready's deployment controller: creates or scales the ReplicaSet for the
    /// Deployment's current template and scales the older ones it owns to 0.
    fn sync_replica_set(&mut self, deploy: &Value) {
        let (Some(rs), Some(rs_rt)) = (
            crate::controllers::replica_set_for(deploy),
            self.registry.by_key(RS_KEY).cloned(),
        ) else {
            return;
        };
        let (ns, uid) = (meta_str(deploy, "namespace"), meta_str(deploy, "uid"));
        let name = meta_str(&rs, "name").to_string();
        for old in self.owned_replica_sets(ns, uid) {
            if old == name {
                continue;
            }
            if let Ok(mut o) = self.get(&rs_rt, ns, &old) {
                o["spec"]["replicas"] = json!(0);
                let _ = self.update(&rs_rt, ns, &old, o, WriteMode::Main, false);
            }
        }
        let _ = match self.get(&rs_rt, ns, &name) {
            Ok(mut cur) => {
                cur["spec"]["replicas"] = rs["spec"]["replicas"].clone();
                self.update(&rs_rt, ns, &name, cur, WriteMode::Main, false)
            }
            Err(_) => self.create(&rs_rt, ns, rs, WriteMode::Main, false),
        };
    }

    /// Deletes an object, honouring uid/resourceVersion preconditions and finalizers.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        pre_uid: Option<&str>,
        pre_rv: Option<&str>,
        dry_run: bool,
    ) -> Result<Deleted, ApiError> {
        let old = self.get(rt, ns, name)?;
        let stale = |want: Option<&str>, field: &str| {
            want.is_some_and(|w| !w.is_empty() && w != meta_str(&old, field))
        };
        if stale(pre_uid, "uid") || stale(pre_rv, "resourceVersion") {
            return Err(ApiError::conflict(&rt.group, &rt.plural, name));
        }
        if dry_run {
            return Ok(Deleted::Gone(old));
        }
        if !no_finalizers(&old) {
            if !old["metadata"]["deletionTimestamp"].is_null() {
                return Ok(Deleted::Marked(old));
            }
            let mut marked = old.clone();
            marked["metadata"]["deletionTimestamp"] = json!(fmt_time(now_secs()));
            return Ok(Deleted::Marked(self.commit(
                EventType::Modified,
                &rt.key(),
                marked,
            )));
        }
        let last = old.clone();
        Ok(Deleted::Gone(self.remove(rt, last)))
    }

    /// Commits the DELETED event and cascades (CRD instances, namespace contents).
    fn remove(&mut self, rt: &ResourceType, last: Value) -> Value {
        let gone = self.commit(EventType::Deleted, &rt.key(), last);
        if rt.key() == CRD_KEY {
            if let Some(key) = self.registry.unregister_crd(&gone) {
                self.drop_all(|k| k.0 == key);
            }
        }
        if rt.key() == NS_KEY {
            let ns = meta_str(&gone, "name").to_string();
            self.drop_all(|k| k.1 == ns);
        }
        if rt.key() == DEPLOY_KEY {
            let ns = meta_str(&gone, "namespace").to_string();
            let owned = self.owned_replica_sets(&ns, meta_str(&gone, "uid"));
            self.drop_all(|k| k.0 == RS_KEY && k.1 == ns && owned.contains(&k.2));
        }
        gone
    }

    /// Deletes every object whose key satisfies `pred`, emitting DELETED events.
    fn drop_all(&mut self, pred: impl Fn(&Key) -> bool) {
        let doomed: Vec<Key> = self.objects.keys().filter(|k| pred(k)).cloned().collect();
        for k in doomed {
            if let Some(obj) = self.objects.get(&k) {
                let last = Value::clone(obj);
                self.commit(EventType::Deleted, &k.0, last);
            }
        }
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects
            .contains_key(&(NS_KEY.to_string(), String::new(), ns.to_string()))
    }

    /// The configuration `manager` last applied to an object (server-side apply).
    pub fn last_applied(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        manager: &str,
    ) -> Option<Value> {
        let ns = if rt.namespaced { ns } else { "" };
        let key = (rt.key(), ns.to_string(), name.to_string());
        self.applied.get(&(key, manager.to_string())).cloned()
    }

    /// Remembers what `manager` applied to the (stored) object `obj`.
    pub fn record_applied(
        &mut self,
        rt: &ResourceType,
        obj: &Value,
        manager: &str,
        applied: Value,
    ) {
        let key = (
            rt.key(),
            meta_str(obj, "namespace").to_string(),
            meta_str(obj, "name").to_string(),
        );
        self.applied.insert((key, manager.to_string()), applied);
    }

    /// Opens a subscription for a resource. With `from`, returns the history
    /// events after it for replay, or 410 Expired when it is older than history.
    pub fn subscribe(&mut self, res: &str, from: Option<u64>) -> Result<Subscription, ApiError> {
        let replay = match from {
            Some(rv) if rv < self.floor => {
                return Err(ApiError::expired(format!(
                    "too old resource version: {rv} ({})",
                    self.floor
                )));
            }
            Some(rv) => self
                .history
                .iter()
                .filter(|e| e.rv > rv && e.res == res)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        let (tx, rx) = unbounded();
        let id = self.next_id;
        self.next_id += 1;
        self.subscribers.push(Subscriber {
            id,
            res: res.to_string(),
            tx,
        });
        Ok(Subscription { id, replay, rx })
    }

    /// Closes one subscription (the watch ended on its own).
    pub fn unsubscribe(&mut self, id: u64) {
        self.subscribers.retain(|s| s.id != id);
    }

    /// Ends every open watch stream.
    pub fn drop_watches(&mut self) {
        for s in self.subscribers.drain(..) {
            let _ = s.tx.send(WatchMsg::Close);
        }
    }

    /// Forgets all history: older RVs now get 410 Expired.
    pub fn compact(&mut self) {
        self.history.clear();
        self.floor = self.rv;
    }

    /// Number of open watch subscriptions.
    pub fn watch_count(&self) -> usize {
        self.subscribers.len()
    }
}
