use super::*;
use serde_json::json;

fn drift(path: &str, live: i64) -> Vec<Difference> {
    vec![Difference {
        path: path.into(),
        want: json!(1),
        live: json!(live),
    }]
}

fn kinds(actions: &[Action]) -> Vec<&'static str> {
    actions
        .iter()
        .map(|a| match a {
            Action::Report { .. } => "report",
            Action::Correct { .. } => "correct",
            Action::Fighting { .. } => "fighting",
            Action::Cleared { .. } => "cleared",
        })
        .collect()
}

#[test]
fn warn_reports_once_per_change_and_clears() {
    let (mut t, now) = (Tracker::default(), Instant::now());
    let a = t.observe(
        "ns/Deployment/web",
        0,
        Mode::Warn,
        drift("/spec/replicas", 3),
        now,
    );
    assert_eq!(kinds(&a), ["report"]);
    let a = t.observe(
        "ns/Deployment/web",
        0,
        Mode::Warn,
        drift("/spec/replicas", 3),
        now,
    );
    assert_eq!(kinds(&a), Vec::<&str>::new());
    let a = t.observe(
        "ns/Deployment/web",
        0,
        Mode::Warn,
        drift("/spec/replicas", 4),
        now,
    );
    assert_eq!(kinds(&a), ["report"]);
    assert_eq!(t.drifted().count(), 1);
    let a = t.observe("ns/Deployment/web", 0, Mode::Warn, Vec::new(), now);
    assert_eq!(kinds(&a), ["cleared"]);
    assert_eq!(t.drifted().count(), 0);
    assert!(
        t.observe("ns/Deployment/web", 0, Mode::Warn, Vec::new(), now)
            .is_empty()
    );
}

#[test]
fn correct_asks_once_per_module_until_its_run_ends() {
    let (mut t, now) = (Tracker::default(), Instant::now());
    let a = t.observe(
        "ns/Deployment/web",
        0,
        Mode::Correct,
        drift("/spec/replicas", 3),
        now,
    );
    assert_eq!(kinds(&a), ["report", "correct"]);
    // A second object of the same module waits for the same run.
    let a = t.observe(
        "ns/Service/web",
        0,
        Mode::Correct,
        drift("/spec/type", 3),
        now,
    );
    assert_eq!(kinds(&a), ["report"]);
    t.run_done(0, true, now);
    assert!(
        t.observe("ns/Deployment/web", 0, Mode::Correct, Vec::new(), now)
            .len()
            == 1
    );
}

#[test]
fn drift_that_returns_after_a_correction_backs_off_doubling() {
    let (mut t, mut now) = (Tracker::default(), Instant::now());
    let key = "ns/Deployment/web";
    t.observe(key, 0, Mode::Correct, drift("/spec/replicas", 5), now);
    t.run_done(0, true, now);
    t.observe(key, 0, Mode::Correct, Vec::new(), now);
    // The fighter sets it again.
    let a = t.observe(key, 0, Mode::Correct, drift("/spec/replicas", 5), now);
    assert_eq!(kinds(&a), ["report", "fighting"]);
    let Action::Fighting {
        until, corrections, ..
    } = a[1]
    else {
        unreachable!()
    };
    assert_eq!((until - now, corrections), (Duration::from_secs(10), 1));
    assert!(t.due(now).is_empty());
    assert_eq!(t.next_due(), Some(until));
    now = until;
    assert_eq!(t.due(now), [key.to_string()]);
    let a = t.observe(key, 0, Mode::Correct, drift("/spec/replicas", 5), now);
    assert_eq!(kinds(&a), ["correct"]);
    t.run_done(0, true, now);
    let a = t.observe(key, 0, Mode::Correct, drift("/spec/replicas", 5), now);
    let Action::Fighting {
        until, corrections, ..
    } = a[0]
    else {
        unreachable!()
    };
    assert_eq!((until - now, corrections), (Duration::from_secs(20), 2));
    assert_eq!(backoff(20), MAX_BACKOFF);
}

#[test]
fn a_refused_correction_is_not_tried_again_until_the_drift_changes() {
    let (mut t, now) = (Tracker::default(), Instant::now());
    let key = "ns/Service/web";
    t.observe(key, 0, Mode::Correct, drift("/spec/clusterIP", 1), now);
    t.refused(key, 0, "field is immutable".into());
    for _ in 0..3 {
        let a = t.observe(key, 0, Mode::Correct, drift("/spec/clusterIP", 1), now);
        assert!(a.is_empty(), "{a:?}");
    }
    let entry = t.drifted().next().map(|(_, e)| e.refused.clone());
    assert_eq!(entry, Some(Some("field is immutable".into())));
    let later = now + FIGHT_WINDOW;
    let a = t.observe(key, 0, Mode::Correct, drift("/spec/clusterIP", 2), later);
    assert_eq!(kinds(&a), ["report", "correct"]);
}

#[test]
fn a_failed_correction_run_holds_the_module_objects() {
    let (mut t, now) = (Tracker::default(), Instant::now());
    let key = "ns/Deployment/web";
    t.observe(key, 0, Mode::Correct, drift("/spec/replicas", 5), now);
    assert_eq!(t.run_done(0, false, now), [key.to_string()]);
    assert!(
        t.observe(key, 0, Mode::Correct, drift("/spec/replicas", 5), now)
            .is_empty()
    );
    assert_eq!(t.next_due(), Some(now + FIRST_BACKOFF));
    t.forget(0);
    assert_eq!(t.drifted().count(), 0);
}

#[test]
fn off_mode_forgets_drift() {
    let (mut t, now) = (Tracker::default(), Instant::now());
    t.observe("k", 0, Mode::Warn, drift("/a", 1), now);
    assert_eq!(
        kinds(&t.observe("k", 0, Mode::Off, drift("/a", 1), now)),
        ["cleared"]
    );
}
