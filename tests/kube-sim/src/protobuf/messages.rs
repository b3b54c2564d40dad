//! The Kubernetes messages kube-sim decodes, as field tables for
//! `wire::simple`. Field numbers follow the generated.proto files of
//! k8s.io/api and k8s.io/apimachinery.

use super::wire::{Kind, simple};
use serde_json::Value;

fn owner_ref(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "kind", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "controller", Bool),
            (7, "blockOwnerDeletion", Bool),
        ],
    )
}

pub(super) fn object_meta(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "name", Str),
            (2, "generateName", Str),
            (3, "namespace", Str),
            (4, "selfLink", Str),
            (5, "uid", Str),
            (6, "resourceVersion", Str),
            (7, "generation", Int),
            (8, "creationTimestamp", Time),
            (9, "deletionTimestamp", Time),
            (10, "deletionGracePeriodSeconds", Int),
            (11, "labels", StrMap),
            (12, "annotations", StrMap),
            (13, "ownerReferences", MsgList(owner_ref)),
            (14, "finalizers", StrList),
        ],
    )
}

fn object_ref(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "kind", Str),
            (2, "namespace", Str),
            (3, "name", Str),
            (4, "uid", Str),
            (5, "apiVersion", Str),
            (6, "resourceVersion", Str),
            (7, "fieldPath", Str),
        ],
    )
}

fn local_ref(b: &[u8]) -> Result<Value, String> {
    simple(b, &[(1, "name", Kind::Str)])
}

pub(super) fn config_map(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "data", StrMap),
            (3, "binaryData", BytesMap),
            (4, "immutable", Bool),
        ],
    )
}

pub(super) fn secret(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "data", BytesMap),
            (3, "type", Str),
            (4, "stringData", StrMap),
            (5, "immutable", Bool),
        ],
    )
}

fn namespace_spec(b: &[u8]) -> Result<Value, String> {
    simple(b, &[(1, "finalizers", Kind::StrList)])
}

fn namespace_status(b: &[u8]) -> Result<Value, String> {
    simple(b, &[(1, "phase", Kind::Str)])
}

pub(super) fn namespace(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "spec", Msg(namespace_spec)),
            (3, "status", Msg(namespace_status)),
        ],
    )
}

pub(super) fn service_account(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "secrets", MsgList(object_ref)),
            (3, "imagePullSecrets", MsgList(local_ref)),
            (4, "automountServiceAccountToken", Bool),
        ],
    )
}

fn lease_spec(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "holderIdentity", Str),
            (2, "leaseDurationSeconds", Int),
            (3, "acquireTime", MicroTime),
            (4, "renewTime", MicroTime),
            (5, "leaseTransitions", Int),
            (6, "strategy", Str),
            (7, "preferredHolder", Str),
        ],
    )
}

pub(super) fn lease(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "metadata", Msg(object_meta)),
            (2, "spec", Msg(lease_spec)),
        ],
    )
}

fn preconditions(b: &[u8]) -> Result<Value, String> {
    simple(
        b,
        &[(1, "uid", Kind::Str), (2, "resourceVersion", Kind::Str)],
    )
}

pub(super) fn delete_options(b: &[u8]) -> Result<Value, String> {
    use Kind::*;
    simple(
        b,
        &[
            (1, "gracePeriodSeconds", Int),
            (2, "preconditions", Msg(preconditions)),
            (3, "orphanDependents", Bool),
            (4, "propagationPolicy", Str),
            (5, "dryRun", StrList),
        ],
    )
}
