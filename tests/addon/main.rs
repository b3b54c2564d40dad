//! addon-operator end to end (one test binary for the area): the helm client, the
//! real binary as `addon-operator` and its HA takeover, against kube-sim with the
//! real helm 3 and 4.

#[path = "../common/mod.rs"]
mod common;

mod autoheal;
mod contract;
mod deploy;
mod ha;
mod hardening;
mod harness;
mod helm;
mod lifecycle;
mod metrics;
mod newer;
mod operator;
mod parallel;
mod production;
mod reactions;
mod reload;
mod restart;
mod scenarios;
mod slow_api;
mod ux;
