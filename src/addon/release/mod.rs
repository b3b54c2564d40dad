//! One module's helm release, as a module run knows it ([`ModuleRelease`]): its
//! latest revision (the converge's list, helm's storage Secrets read with our own
//! client, or `helm history` for another `HELM_DRIVER`), recovery from what a killed
//! helm left (a `pending-*` revision, an `uninstalling` release), its record read
//! once (decoded from the Secret, `helm get manifest` when it cannot be), the
//! cluster's answer to "is this object still there" (one list per kind), the upgrade
//! decision's questions, and the checksum kept on the release after a
//! deduplicated run. `module_run.rs` keeps only the run's phases.
//!
//! Runs on the queue thread of the module run; it takes the addon state's lock only
//! to read and fill the converge's shared lists, never across an API call.

pub(crate) mod chart_sum;
pub(crate) mod crd_error;
pub(crate) mod crds;
pub(crate) mod drift;
pub(crate) mod global_use;
pub(crate) mod global_use_lex;
pub mod helm;
pub(crate) mod helm_error;
pub(crate) mod helm_go_env;
pub(crate) mod post_render;
pub(crate) mod record;
pub mod release_error;
pub(crate) mod resources;
pub(crate) mod yaml11;

use super::state::Shared;
use crate::addon::Error;
use crate::addon::release::record::{Record, StoredRecord};
use crate::addon::release::release_error::ReleaseError;
use crate::log;
use helm::{ListKey, ObjectRef};
use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeSet, HashMap};

/// A module's release during one module run.
pub(in crate::addon) struct ModuleRelease<'a> {
    shared: &'a Shared,
    name: &'a str,
    /// The run's event (the `activation` of helm operation metrics).
    event: &'a str,
    last: Option<helm::Release>,
    record: OnceCell<Result<Record, String>>,
    /// This run's lists of objects, by kind and namespace.
    lists: RefCell<HashMap<ListKey, BTreeSet<String>>>,
}

impl<'a> ModuleRelease<'a> {
    /// The release's latest revision, recovered from an interrupted helm: a
    /// `pending-*` revision is dropped (its status then calls for the upgrade), an
    /// `uninstalling` release is forgotten (installed afresh).
    pub(in crate::addon) fn lookup(
        shared: &'a Shared,
        name: &'a str,
        event: &'a str,
    ) -> Result<Self, Error> {
        let mut last = latest(shared, name)?;
        if let Some(r) = last.as_ref().filter(|r| r.status.starts_with("pending-")) {
            clear_pending(shared, name, r)?;
        }
        if last.as_ref().is_some_and(|r| r.status == "uninstalling") {
            clear_uninstalling(shared, name)?;
            last = None;
        }
        Ok(ModuleRelease {
            shared,
            name,
            event,
            last,
            record: OnceCell::new(),
            lists: RefCell::new(HashMap::new()),
        })
    }

    /// The latest revision, `None` when there is no release.
    pub(in crate::addon) fn last(&self) -> Option<&helm::Release> {
        self.last.as_ref()
    }

    /// What the upgrade decision asks, answered lazily: the release's manifest and
    /// whether an object is in the cluster.
    pub(in crate::addon) fn facts(&self) -> helm::UpgradeFacts<'_> {
        helm::UpgradeFacts {
            released: Box::new(|| self.record().map(|r| r.manifest.clone())),
            exists: Box::new(|obj| self.listed(obj)),
        }
    }

    /// The latest revision's record, read once.
    fn record(&self) -> Result<&Record, ReleaseError> {
        let stored = self.last.as_ref().and_then(|r| r.stored.as_ref());
        let read =
            || read_record(self.shared, self.name, self.event, stored).map_err(|e| e.to_string());
        self.record
            .get_or_init(read)
            .as_ref()
            .map_err(|e| ReleaseError::Record(e.clone()))
    }

    /// The deployed manifest in a temp file for the post-renderer to compare with;
    /// `None` (a plain upgrade) when it cannot be read or written.
    pub(in crate::addon) fn released_file(&self) -> Option<crate::executor::ChildFile> {
        let stem = format!("{}.released-manifest.yaml", self.name);
        let tmp = &self.shared.tmp_dir;
        let file = self.record().map_err(|e| e.to_string()).and_then(|r| {
            crate::executor::ChildFile::create(tmp, &stem, r.manifest.as_bytes())
                .map_err(|e| e.to_string())
        });
        file.inspect_err(|e: &String| {
            log::warn(
                "cannot read the deployed manifest; upgrading without deduplication",
                &[("module", self.name), ("error", e)],
            )
        })
        .ok()
    }

    /// flant's checksum kept in the release's values when our `checksum` is the
    /// release's (an object to heal, a status to fix): no render needed for it.
    pub(in crate::addon) fn kept_flant_checksum(&self, checksum: &str) -> Option<String> {
        let last = self.last.as_ref()?;
        if last.checksum.as_deref() != Some(checksum) {
            return None;
        }
        let record = last.stored.as_ref()?.decode().ok()?;
        record.config[helm::CHECKSUM_VALUE]
            .as_str()
            .map(str::to_string)
    }

    /// After a run found the release's objects made by `checksum`'s values, stores
    /// that checksum on the release's Secret (a failure only costs the next run one
    /// stopped upgrade).
    pub(in crate::addon) fn keep_checksum(&self, checksum: &str) {
        let last = self.last.as_ref();
        let Some(last) = last.filter(|r| r.checksum.as_deref() != Some(checksum)) else {
            return;
        };
        let Some(stored) = &last.stored else { return };
        let (client, ns) = (&self.shared.bookkeeping, &self.shared.namespace);
        if let Err(e) = helm::record_checksum(client, ns, &stored.secret, checksum) {
            log::warn(
                "cannot keep the new checksum",
                &[("module", self.name), ("error", &e.to_string())],
            );
        }
    }

    /// Whether `obj` is in the cluster, answered from one list of its kind in its
    /// namespace (the release namespace when it renders none) on the bookkeeping
    /// client: the converge's list when one is on (listed by its first run that asks,
    /// then shared), else this run's own, so a run never reads an object by name.
    fn listed(&self, obj: &ObjectRef) -> Result<bool, ReleaseError> {
        let shared = self.shared;
        let ns = obj.namespace.as_deref().unwrap_or(&shared.namespace);
        let key: ListKey = (obj.api_version.clone(), obj.kind.clone(), Some(ns.into()));
        if let Some(names) = self.lists.borrow().get(&key) {
            return Ok(names.contains(&obj.name));
        }
        if let Some(names) = shared.lock().listed.get(&key) {
            return Ok(names.contains(&obj.name));
        }
        let context = format!("helm resource {obj}");
        let (api_version, kind) = (&obj.api_version, &obj.kind);
        let names = helm::object_names(&shared.bookkeeping, api_version, kind, Some(ns), &context)?;
        let found = names.contains(&obj.name);
        let mut st = shared.lock();
        if st.lifecycle.converge_status().2 {
            st.listed.insert(key.clone(), names.clone());
        }
        self.lists.borrow_mut().insert(key, names);
        Ok(found)
    }
}

/// The manifest and values of a release's revision: decoded from its storage
/// Secret (`stored`), or `helm get manifest` (no values) when it was not read from
/// one or its record cannot be decoded. The resource monitor reads the same way.
pub(in crate::addon) fn read_record(
    shared: &Shared,
    name: &str,
    event: &str,
    stored: Option<&StoredRecord>,
) -> Result<Record, Error> {
    if let Some(stored) = stored {
        match stored.decode() {
            Ok(record) => return Ok(record),
            Err(e) => log::warn(
                "cannot read the release record; asking helm",
                &[("module", name), ("error", &e.to_string())],
            ),
        }
    }
    let helm = &shared.helm;
    let manifest = (shared.metrics).helm_op(name, event, "get-manifest", || helm.manifest(name))?;
    Ok(Record {
        manifest,
        config: serde_json::Value::Null,
    })
}

/// The release's latest revision: the converge's list if it has the module's entry,
/// else from helm's storage Secrets with our client (no helm process), or `helm
/// history` when `HELM_DRIVER` names other storage.
fn latest(shared: &Shared, name: &str) -> Result<Option<helm::Release>, Error> {
    if let Some(cached) = shared.lock().releases.remove(name) {
        return Ok(cached);
    }
    if secrets_driver() {
        helm::release_from_secrets(&shared.bookkeeping, &shared.namespace, name)
            .map_err(Error::Release)
    } else {
        Ok(shared.helm.last_release(name)?)
    }
}

/// Whether helm stores releases in Secrets (its default), which we then read ourselves.
pub(in crate::addon) fn secrets_driver() -> bool {
    let driver = std::env::var("HELM_DRIVER").unwrap_or_default();
    matches!(driver.as_str(), "" | "secret" | "secrets")
}

/// A revision left `pending-install`/`-upgrade`/`-rollback` by a helm that was
/// killed (the operator restarted mid-upgrade) makes helm refuse every later
/// operation ("another operation is in progress"): its storage Secret is deleted,
/// so the next upgrade starts from the last finished revision.
fn clear_pending(shared: &Shared, name: &str, release: &helm::Release) -> Result<(), Error> {
    if !secrets_driver() {
        return Err(Error::Stuck {
            release: name.to_string(),
            status: release.status.clone(),
        });
    }
    let secret = format!("sh.helm.release.v1.{name}.v{}", release.revision);
    log::warn(
        "removing a release revision left pending by an interrupted helm",
        &[
            ("module", name),
            ("secret", &secret),
            ("status", &release.status),
        ],
    );
    delete_secret(shared, name, &secret)
}

/// A release whose latest revision is `uninstalling` (a `helm uninstall` that was
/// killed, and the module enabled again) makes helm refuse every upgrade ("has no
/// deployed releases"): every storage Secret of the release is deleted, so the next
/// upgrade installs it afresh, taking over the objects that are left.
fn clear_uninstalling(shared: &Shared, name: &str) -> Result<(), Error> {
    if !secrets_driver() {
        return Err(Error::Stuck {
            release: name.to_string(),
            status: "uninstalling".to_string(),
        });
    }
    log::warn(
        "installing again a release left uninstalling by an interrupted helm",
        &[("module", name)],
    );
    let api = (shared.client).api(&helm::secrets_resource(), Some(&shared.namespace));
    let params = crate::kube::ListParams {
        label_selector: format!("owner=helm,name={name}"),
        ..Default::default()
    };
    let list = api.list_all(&params).map_err(|e| Error::Kube {
        context: format!("release {name}: listing its Secrets"),
        error: Box::new(e),
    })?;
    for secret in &list.items {
        if let Some(secret) = secret["metadata"]["name"].as_str() {
            delete_secret(shared, name, secret)?;
        }
    }
    Ok(())
}

/// Deletes a storage Secret of release `name`; one already gone is no error.
fn delete_secret(shared: &Shared, name: &str, secret: &str) -> Result<(), Error> {
    let api = (shared.client).api(&helm::secrets_resource(), Some(&shared.namespace));
    match api.delete(secret, None) {
        Ok(()) => Ok(()),
        Err(e) if e.status_code() == Some(404) => Ok(()),
        Err(e) => Err(Error::Kube {
            context: format!("release {name}: deleting {secret}"),
            error: Box::new(e),
        }),
    }
}
