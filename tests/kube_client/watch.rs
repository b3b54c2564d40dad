//! The reflector against kube-sim: paged initial list, resume after a dropped
//! stream, relist with an exact diff after 410, server-side selectors.

use crate::kube_client_common;

use kube_client_common::*;
use kube_sim::{Sim, SimOptions};
use shell_operator::kube::{Cache, Event, ListParams, WatchErrorKind};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// 25 objects listed 10 at a time: three LIST pages with continue tokens, one
/// Synced event with all 25, then a watch from the list's resourceVersion: the
/// path taken when the server refuses the streaming initial list.
#[test]
fn initial_list_is_paged() {
    let sim = Sim::start();
    for i in 0..25 {
        sim.create(cm("paged", &format!("cm-{i:02}"), "x", &[]))
            .unwrap();
    }
    sim.create(cm("other", "elsewhere", "x", &[])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("v1", "ConfigMap", "test").unwrap();
    let mut p = fast_params("paged");
    p.page_size = 10;
    p.watch_list = false;
    let (h, rx) = c.watch(&r, p);
    let ev = take(&rx, 1, T);
    let Event::Synced(objs) = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(objs.len(), 25);
    let objs: Vec<serde_json::Value> = objs
        .iter()
        .map(|j| serde_json::from_str(&j.json).expect("json"))
        .collect();
    assert!(objs.iter().all(|o| o["metadata"]["namespace"] == "paged"));
    let reqs = sim.requests();
    let lists: Vec<&String> = reqs
        .iter()
        .filter(|r| r.contains("/namespaces/paged/configmaps?") && r.contains("limit=10"))
        .collect();
    assert_eq!(lists.len(), 3, "{reqs:#?}");
    assert_eq!(
        lists.iter().filter(|r| r.contains("continue=")).count(),
        2,
        "{reqs:#?}"
    );
    eventually(T, "watch opened", || {
        sim.requests()
            .iter()
            .any(|r| r.contains("watch=1") && r.contains("allowWatchBookmarks=true"))
    });
    assert_eq!(h.store().lock().unwrap().len(), 25);
    h.join();

    // The one-shot API pages the same way.
    let api = c.api(&r, Some("paged"));
    let page = api
        .list(&ListParams {
            limit: 10,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.items.len(), 10);
    assert!(!page.metadata.continue_token.is_empty());
    let all = api
        .list_all(&ListParams {
            limit: 7,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(all.items.len(), 25);
    assert!(!all.metadata.resource_version.is_empty());
}

/// The server drops every watch; changes made meanwhile arrive exactly once after
/// the reflector resumes from its last resourceVersion, without a relist.
#[test]
fn watch_resumes_after_drop_without_loss_or_duplicates() {
    let sim = Sim::start();
    sim.create(cm("w", "a", "1", &[])).unwrap();
    sim.create(cm("w", "b", "1", &[])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("", "configmaps", "test").unwrap();
    let (h, rx) = c.watch(&r, fast_params("w"));
    assert_eq!(show(&take(&rx, 1, T)), ["sync[a,b]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);
    sim.create(cm("w", "c", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+c"]);

    for round in 0..3 {
        sim.drop_watches();
        let d = format!("d{round}");
        sim.create(cm("w", &d, "1", &[])).unwrap();
        let mut a = sim.get("v1", "ConfigMap", "w", "a").unwrap();
        a["data"]["v"] = format!("r{round}").into();
        sim.update(a).unwrap();
        sim.delete("v1", "ConfigMap", "w", &d).unwrap();
        let got = take(&rx, 3, T);
        assert_eq!(
            show(&got),
            [format!("+{d}"), format!("~a:r{round}"), format!("-{d}")]
        );
    }
    sim.delete("v1", "ConfigMap", "w", "b").unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["-b"]);
    // Nothing else: no doubled event, one streamed initial list and no LIST.
    assert_eq!(
        show(&drain(&rx, Duration::from_millis(500))),
        Vec::<String>::new()
    );
    let lists = sim
        .requests()
        .iter()
        .filter(|r| r.contains("/configmaps?") && !r.contains("watch="))
        .count();
    assert_eq!(lists, 0, "{:#?}", sim.requests());
    let initial = sim
        .requests()
        .iter()
        .filter(|r| r.contains("sendInitialEvents=true"))
        .count();
    assert_eq!(initial, 1, "{:#?}", sim.requests());
    let resumed = sim
        .requests()
        .iter()
        .filter(|r| r.contains("watch=1"))
        .count();
    assert!(resumed >= 4, "{:#?}", sim.requests());
    h.join();
}

/// While the reflector is cut off, objects change and history is compacted; the
/// watch gets 410, the reflector relists and reports exactly what changed.
#[test]
fn expired_watch_relists_and_emits_exact_diff() {
    let sim = Sim::start_with(SimOptions {
        history_limit: 10_000,
        ..Default::default()
    })
    .unwrap();
    for n in ["keep", "change", "drop", "recreate"] {
        sim.create(cm("x", n, "1", &[])).unwrap();
    }
    let c = client_for(&sim);
    let r = c.resolve("v1", "cm", "test").unwrap();
    let (h, rx) = c.watch(&r, fast_params("x"));
    assert_eq!(show(&take(&rx, 1, T)), ["sync[change,drop,keep,recreate]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);

    // Cut the reflector off: every request fails until we say so.
    sim.fail_next(1_000_000, 503);
    sim.drop_watches();
    let mut ch = sim.get("v1", "ConfigMap", "x", "change").unwrap();
    ch["data"]["v"] = "2".into();
    sim.update(ch).unwrap();
    sim.delete("v1", "ConfigMap", "x", "drop").unwrap();
    sim.delete("v1", "ConfigMap", "x", "recreate").unwrap();
    sim.create(cm("x", "recreate", "new", &[])).unwrap();
    sim.create(cm("x", "added", "1", &[])).unwrap();
    sim.compact();
    sim.fail_next(0, 503);

    let got = take(&rx, 5, T);
    assert!(
        got.iter().any(|e| matches!(
            e,
            Event::WatchError {
                kind: WatchErrorKind::Expired,
                ..
            }
        )),
        "{got:?}"
    );
    let mut shown = show(&got);
    let pos = |s: &str| shown.iter().position(|x| x == s);
    assert!(pos("-recreate") < pos("+recreate"), "{shown:?}");
    shown.sort();
    assert_eq!(
        shown,
        ["+added", "+recreate", "-drop", "-recreate", "~change:2"]
    );
    // Deleted carries the last known state.
    let del = got.iter().find_map(|e| match e {
        Event::Deleted(o) if o.meta.name == "recreate" => Some(o.value()),
        _ => None,
    });
    assert_eq!(del.unwrap()["data"]["v"], "1");
    // After the relist the watch goes on normally and nothing is doubled.
    sim.create(cm("x", "after", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+after"]);
    assert_eq!(
        show(&drain(&rx, Duration::from_millis(500))),
        Vec::<String>::new()
    );
    assert_eq!(h.store().lock().unwrap().len(), 5);
    h.join();
}

/// With the cache off the reflector stores nothing per object: events pass through
/// and a relist after 410 is delivered whole, for the consumer to diff.
#[test]
fn cache_off_passes_events_through_and_delivers_relists_whole() {
    let sim = Sim::start_with(SimOptions {
        history_limit: 10_000,
        ..Default::default()
    })
    .unwrap();
    for n in ["a", "b"] {
        sim.create(cm("off", n, "1", &[])).unwrap();
    }
    let c = client_for(&sim);
    let r = c.resolve("v1", "cm", "test").unwrap();
    let mut p = fast_params("off");
    p.cache = Cache::Off;
    let (h, rx) = c.watch(&r, p);
    assert_eq!(show(&take(&rx, 1, T)), ["sync[a,b]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);
    sim.create(cm("off", "c", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+c"]);
    assert!(h.store().lock().unwrap().is_empty(), "nothing cached");

    sim.fail_next(1_000_000, 503);
    sim.drop_watches();
    sim.delete("v1", "ConfigMap", "off", "a").unwrap();
    sim.create(cm("off", "d", "1", &[])).unwrap();
    sim.compact();
    sim.fail_next(0, 503);
    let got = take(&rx, 1, T);
    assert_eq!(show(&got), ["relist[b,c,d]"], "{got:?}");
    sim.create(cm("off", "e", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+e"]);
    h.join();
}

/// Label selectors go to the server: only matching objects are listed, and an
/// object that stops or starts matching arrives as Deleted or Added.
#[test]
fn label_selector_is_applied_by_the_server() {
    let sim = Sim::start();
    sim.create(cm("s", "web", "1", &[("app", "web")])).unwrap();
    sim.create(cm("s", "db", "1", &[("app", "db")])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("", "ConfigMap", "test").unwrap();
    let sel = shell_operator::kube::selector::parse_label_selector("app in (web)").unwrap();
    let mut p = fast_params("s");
    p.label_selector = shell_operator::kube::selector::encode_label_selector(&sel).unwrap();
    p.field_selector = "metadata.name!=ignored".into();
    let (h, rx) = c.watch(&r, p);
    assert_eq!(show(&take(&rx, 1, T)), ["sync[web]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);
    let mut db = sim.get("v1", "ConfigMap", "s", "db").unwrap();
    db["metadata"]["labels"]["app"] = "web".into();
    sim.update(db).unwrap();
    let mut web = sim.get("v1", "ConfigMap", "s", "web").unwrap();
    web["metadata"]["labels"]["app"] = "none".into();
    sim.update(web).unwrap();
    assert_eq!(show(&take(&rx, 2, T)), ["+db", "-web"]);
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.contains("labelSelector=app%20in%20%28web%29")),
        "{:#?}",
        sim.requests()
    );
    h.join();
}

/// A reflector stops promptly while backing off and sends nothing afterwards.
#[test]
fn stop_is_prompt() {
    let sim = Sim::start();
    let c = client_for(&sim);
    let r = c.resolve("", "ConfigMap", "test").unwrap();
    sim.fail_next(1_000_000, 500);
    let mut p = fast_params("s");
    p.backoff_base = Duration::from_secs(5);
    p.backoff_max = Duration::from_secs(5);
    let (h, rx) = c.watch(&r, p);
    let first = take(&rx, 0, T);
    let _ = first;
    let t0 = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    h.join();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

/// Stopping a streaming reflector: nothing is delivered after stop(), and the
/// thread ends by the next bookmark (kube-sim sends one per second).
#[test]
fn stop_while_streaming_delivers_nothing_more() {
    let sim = Sim::start();
    sim.create(cm("q", "a", "1", &[])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("", "ConfigMap", "test").unwrap();
    let (h, rx) = c.watch(&r, fast_params("q"));
    assert_eq!(show(&take(&rx, 1, T)), ["sync[a]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);
    sim.create(cm("q", "b", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+b"]);
    h.stop();
    for i in 0..5 {
        sim.create(cm("q", &format!("late{i}"), "1", &[])).unwrap();
    }
    let t0 = std::time::Instant::now();
    h.join();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(
        show(&drain(&rx, Duration::from_millis(300))),
        Vec::<String>::new()
    );
    // Dropping a handle stops its reflector as well.
    let (h2, rx2) = c.watch(&r, fast_params("q"));
    assert_eq!(take(&rx2, 1, T).len(), 1);
    drop(h2);
    // The thread ends and drops its sender.
    eventually(T, "reflector thread ended", || {
        matches!(
            rx2.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    });
}

/// Stopping a reflector whose stream is silent (no event, no bookmark) ends
/// its read at once and closes the connection (issue 39: a reload that removes
/// a hook stops its watches; they used to wait for the stream's next line).
#[test]
fn stop_interrupts_a_silent_stream() {
    let sim = Sim::start();
    sim.set_bookmark_interval(Duration::from_secs(3600));
    let c = client_for(&sim);
    let r = c.resolve("", "ConfigMap", "test").unwrap();
    let (h, rx) = c.watch(&r, fast_params("silent"));
    assert_eq!(take(&rx, 1, T).len(), 1, "synced");
    eventually(T, "watch open", || sim.watch_count() == 1);
    std::thread::sleep(Duration::from_millis(700));
    let t0 = std::time::Instant::now();
    h.join();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    eventually(T, "the server's watch ended", || sim.watch_count() == 0);
}

/// An HTTP 410 when (re)opening the watch also leads to a relist with a diff, and a
/// 410 on a LIST continue token restarts the paged list from the beginning.
#[test]
fn http_410_on_watch_open_and_on_continue_token() {
    let sim = Sim::start();
    for i in 0..6 {
        sim.create(cm("g", &format!("o{i}"), "1", &[])).unwrap();
    }
    let c = client_for(&sim);
    let r = c.resolve("v1", "ConfigMap", "test").unwrap();
    // The second page's continue token has expired once.
    sim.fail_matching("continue=", 1, 410);
    let mut p = fast_params("g");
    p.page_size = 4;
    p.watch_list = false;
    let (h, rx) = c.watch(&r, p);
    assert_eq!(show(&take(&rx, 1, T)), ["sync[o0,o1,o2,o3,o4,o5]"]);
    let first_pages = sim
        .requests()
        .iter()
        .filter(|r| {
            r.contains("/namespaces/g/configmaps?")
                && !r.contains("continue=")
                && !r.contains("watch=")
        })
        .count();
    assert_eq!(
        first_pages,
        2,
        "the list restarted once: {:#?}",
        sim.requests()
    );
    eventually(T, "watch open", || sim.watch_count() == 1);

    // Next watch open answers 410 as an HTTP status.
    sim.fail_matching("watch=1", 1, 410);
    sim.drop_watches();
    sim.delete("v1", "ConfigMap", "g", "o0").unwrap();
    let got = take(&rx, 1, T);
    assert!(
        got.iter().any(|e| matches!(
            e,
            Event::WatchError {
                kind: WatchErrorKind::Expired,
                ..
            }
        )),
        "{got:?}"
    );
    assert_eq!(show(&got), ["-o0"]);
    sim.create(cm("g", "after", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+after"]);
    assert_eq!(
        show(&drain(&rx, Duration::from_millis(300))),
        Vec::<String>::new()
    );
    h.join();
}

/// `watch_with_sink` delivers the same events on the reflector's own thread.
#[test]
fn sink_consumer_gets_the_same_events() {
    let sim = Sim::start();
    sim.create(cm("k", "a", "1", &[])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("", "ConfigMap", "test").unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let main_thread = std::thread::current().id();
    let h = c.watch_with_sink(&r, fast_params("k"), move |e| {
        assert_ne!(std::thread::current().id(), main_thread);
        tx.send(e).is_ok()
    });
    assert_eq!(show(&take(&rx, 1, T)), ["sync[a]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);
    sim.create(cm("k", "b", "1", &[])).unwrap();
    sim.delete("v1", "ConfigMap", "k", "a").unwrap();
    assert_eq!(show(&take(&rx, 2, T)), ["+b", "-a"]);
    h.join();
}

/// How many watch requests kube-sim has seen.
fn watch_requests(sim: &Sim) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.contains("watch=1"))
        .count()
}

/// Issue 11, item 11: a burst of failed watch opens grows the backoff to its cap;
/// once a watch opens again the backoff starts over, so a later short burst costs
/// milliseconds, not a capped delay per failure. A 429's `Retry-After` is waited
/// for instead of the (short) backoff.
#[test]
fn backoff_starts_over_after_a_watch_opens_and_honours_retry_after() {
    let sim = Sim::start();
    sim.create(cm("bo", "a", "1", &[])).unwrap();
    let c = client_for(&sim);
    let r = c.resolve("", "ConfigMap", "test").unwrap();
    let mut p = fast_params("bo");
    p.backoff_max = Duration::from_secs(2);
    let (h, rx) = c.watch(&r, p);
    assert_eq!(show(&take(&rx, 1, T)), ["sync[a]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);

    // Eight failed opens: 20 ms doubling up to the 2 s cap.
    let before = watch_requests(&sim);
    sim.fail_matching("watch=1", 8, 500);
    sim.drop_watches();
    eventually(T, "watch reopened", || {
        sim.watch_count() == 1 && watch_requests(&sim) >= before + 9
    });

    // A short burst now: three failures at 20, 40, 80 ms.
    sim.fail_matching("watch=1", 3, 500);
    sim.drop_watches();
    let t0 = std::time::Instant::now();
    sim.create(cm("bo", "after-burst", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+after-burst"]);
    assert!(
        t0.elapsed() < Duration::from_millis(900),
        "recovered after {:?}",
        t0.elapsed()
    );

    // A 429 with Retry-After: 1 is waited out, although the backoff is at 20 ms.
    sim.fail_matching("watch=1", 1, 429);
    sim.drop_watches();
    let t0 = std::time::Instant::now();
    sim.create(cm("bo", "after-429", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+after-429"]);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(950) && waited < Duration::from_secs(3),
        "waited {waited:?}"
    );
    h.join();
}

/// Issue 12: the initial state of 1,200 objects arrives in one request (a watch
/// with `sendInitialEvents`, ended by the `k8s.io/initial-events-end` bookmark),
/// not in three pages each waiting on the client's rate limiter; the same stream
/// then carries the changes.
#[test]
fn initial_list_streams_in_one_request() {
    let sim = Sim::start();
    for i in 0..1200 {
        sim.create(cm("wl", &format!("o{i:04}"), "1", &[])).unwrap();
    }
    let c = client_for(&sim);
    let r = c.resolve("v1", "ConfigMap", "test").unwrap();
    let (h, rx) = c.watch(&r, fast_params("wl"));
    let ev = take(&rx, 1, T);
    let Event::Synced(objs) = &ev[0] else {
        panic!("{:?}", show(&ev))
    };
    assert_eq!(objs.len(), 1200);
    let to_wl: Vec<String> = sim
        .requests()
        .into_iter()
        .filter(|r| r.contains("/namespaces/wl/"))
        .collect();
    assert_eq!(to_wl.len(), 1, "{to_wl:#?}");
    assert!(
        to_wl[0].contains("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
        "{to_wl:#?}"
    );
    sim.create(cm("wl", "later", "1", &[])).unwrap();
    assert_eq!(show(&take(&rx, 1, T)), ["+later"]);
    assert_eq!(h.store().lock().unwrap().len(), 1201);
    h.join();
}

/// A server that refuses `sendInitialEvents` (422, WatchList off) gets paged LISTs,
/// and is not asked again after a relist.
#[test]
fn a_server_without_watch_list_gets_paged_lists() {
    let sim = Sim::start();
    sim.set_watch_list(false);
    for i in 0..5 {
        sim.create(cm("old", &format!("o{i}"), "1", &[])).unwrap();
    }
    let c = client_for(&sim);
    let r = c.resolve("v1", "ConfigMap", "test").unwrap();
    let mut p = fast_params("old");
    p.page_size = 2;
    let (h, rx) = c.watch(&r, p);
    assert_eq!(show(&take(&rx, 1, T)), ["sync[o0,o1,o2,o3,o4]"]);
    eventually(T, "watch open", || sim.watch_count() == 1);
    // Cut off while o5 is created and history is forgotten: 410, relist.
    sim.fail_next(1_000_000, 500);
    sim.drop_watches();
    sim.create(cm("old", "o5", "1", &[])).unwrap();
    sim.compact();
    sim.fail_next(0, 500);
    assert_eq!(show(&take(&rx, 1, T)), ["+o5"]);
    let reqs = sim.requests();
    let streamed = reqs
        .iter()
        .filter(|r| r.contains("sendInitialEvents"))
        .count();
    let pages = reqs
        .iter()
        .filter(|r| r.contains("/namespaces/old/configmaps?limit=2"))
        .count();
    assert_eq!(streamed, 1, "asked once: {reqs:#?}");
    assert!(pages >= 4, "three pages, then a relist: {reqs:#?}");
    h.join();
}
