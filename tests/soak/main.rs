//! The soak test (`make soak`; 2 minutes in `cargo test`): the real operator
//! binary against an in-process kube-sim at ~100 object changes/s with random
//! (seeded) API faults, a schedule hook every second and admission webhook
//! traffic, checked from outside. The driver keeps its own record of every
//! change and the hooks append what they saw to a ledger; after a quiet tail the
//! two must agree (every create and delete exactly once, updates in order and at
//! most once, the same final state), the operator's RSS, fds and threads must be
//! flat after warm-up, and on SIGTERM it exits 0 leaving no zombie or orphan.
//! `SOAK_SECONDS`, `SOAK_SEED`, `SOAK_RELEASE=1` and `SOAK_OPERATOR` steer it;
//! docs/soak.md explains the ledger and what exactly-once means across 410s.

#[path = "../common/mod.rs"]
mod common;
#[path = "../webhook_common/mod.rs"]
mod webhook_common;

mod admission;
mod checks;
mod driver;
mod faults;
mod hooks;
mod launch;
mod ledger;
mod procs;
mod settings;

use driver::Driver;
use faults::Injector;
use kube_sim::Sim;
use launch::Running;
use ledger::KindLedger;
use settings::{Rng, Settings};
use std::time::{Duration, Instant};

/// Changes per second the driver aims at.
const RATE: u64 = 100;

#[test]
fn soak_every_change_reaches_the_hooks_once_and_resources_stay_flat() {
    let s = Settings::from_env();
    println!(
        "soak: seed {} (SOAK_SEED={} replays it), {:?} run, binary {}",
        s.seed,
        s.seed,
        s.total,
        s.binary.display()
    );
    let sim = Sim::start();
    let pki = webhook_common::Pki::make();
    let mut driver = Driver::new(&sim, Rng::new(s.seed));
    driver.create_many(0, 40);
    driver.create_many(1, 10);
    let mut op = Running::start(&s.binary, &hooks::all(), &sim, &pki);
    let mut ledgers = [
        KindLedger::new(op.out("cms.ledger")),
        KindLedger::new(op.out("secrets.ledger")),
    ];
    let synced = wait_until(Duration::from_secs(60), || {
        ledgers.iter_mut().for_each(KindLedger::poll);
        ledgers.iter().all(|l| l.synchronizations == 1)
    });
    assert!(
        synced.is_some(),
        "no Synchronization in 60 s:\n{}",
        op.log_tail()
    );
    let started = Instant::now();
    let port = op.port_from_log("admission webhook server listening");
    let mut client = admission::Client::spawn(port, pki.path("ca.crt"), Rng::new(s.seed ^ 0xadd));
    let mut sampler = procs::Sampler::spawn(op.pid(), started);
    let mut faults = Injector::new(Rng::new(s.seed ^ 0xfa17));
    drive(&s, &mut driver, &mut ledgers, &mut faults, &sim);
    let quiet_at = faults.quiet(&sim);
    let deadline = s.tail().max(Duration::from_secs(90));
    let recovery = wait_until(deadline, || matches(&mut ledgers, &sim));
    let fenced = recovery.is_some() && fence(&mut driver, &mut ledgers, &sim);
    let run_time = started.elapsed();
    client.stop();
    let code = checks::stop(&mut op);
    sampler.stop();
    let report = checks::Report {
        settings: &s,
        driver: &driver,
        ledgers: &ledgers,
        faults: &faults,
        sim: &sim,
        recovery,
        quiet_at,
        run_time,
        observed: &sampler.observed.lock().expect("sampler lock"),
        tally: &client.tally.lock().expect("tally lock"),
        ticks: std::fs::read_to_string(op.out("ticks.log")).unwrap_or_default(),
    };
    report.print();
    assert!(
        fenced,
        "the hooks did not match the server after the quiet tail:\n{}\n{}",
        report.diff(),
        op.log_tail()
    );
    report.assert_all(code, &op.hooks_dir());
}

/// Changes at [`RATE`] and faults until the drive time is over.
fn drive(
    s: &Settings,
    driver: &mut Driver,
    ledgers: &mut [KindLedger; 2],
    faults: &mut Injector,
    sim: &Sim,
) {
    let began = Instant::now();
    let mut done = 0u64;
    while began.elapsed() < s.drive() {
        ledgers.iter_mut().for_each(KindLedger::poll);
        let due = (began.elapsed().as_millis() as u64 * RATE / 1000).min(done + RATE);
        while done < due {
            driver.change(ledgers);
            done += 1;
        }
        faults.tick(sim, s.drive().saturating_sub(began.elapsed()));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when each kind's hook view equals kube-sim's objects.
fn matches(ledgers: &mut [KindLedger; 2], sim: &Sim) -> bool {
    ledgers.iter_mut().for_each(KindLedger::poll);
    (0..2).all(|k| ledgers[k].view == driver::server_state(sim, k))
}

/// A last create of each kind, after everything else: once the hooks have it and
/// match the server again, every earlier event has been delivered (each queue
/// runs in order), so nothing late can still arrive.
fn fence(driver: &mut Driver, ledgers: &mut [KindLedger; 2], sim: &Sim) -> bool {
    driver.create_named(0, "zz-fence");
    driver.create_named(1, "zz-fence");
    wait_until(Duration::from_secs(60), || matches(ledgers, sim)).is_some()
}

/// Polls `cond` every 100 ms; how long it took, or None after `timeout`.
fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let began = Instant::now();
    loop {
        if cond() {
            return Some(began.elapsed());
        }
        if began.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
