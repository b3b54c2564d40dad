//! Cron expressions with the semantics of robfig/cron (the library flant's
//! shell-operator uses), on top of the `cron` crate's time iteration.
//!
//! We parse every field ourselves into a set of allowed values, the way robfig
//! does, then hand the `cron` crate plain numeric lists. That keeps robfig's
//! meaning where the crate differs: 5 fields get second 0, day-of-week is POSIX
//! (0-6 from Sunday; we also accept 7 as Sunday), `N/step` means `N-max/step`,
//! and when both day-of-month and day-of-week are restricted a day matching
//! *either* fires (the crate would require both). `@every <go duration>` is a
//! fixed interval computed here. The scheduler thread calls `next_after`.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Local, TimeZone, Timelike, Utc};

use crate::duration::go_duration;

/// A parsed crontab, ready to compute fire times.
#[derive(Debug, Clone)]
pub(crate) struct CronSchedule {
    rule: Rule,
    zone: Zone,
}

#[derive(Debug, Clone)]
enum Rule {
    /// `@every`: whole seconds, at least one.
    Every(Duration),
    /// Calendar rule; two schedules (earliest wins) for the DOM-or-DOW case.
    Calendar(Vec<::cron::Schedule>),
}

/// Time zone of a calendar rule: the process's, or UTC via a `TZ=UTC` prefix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Zone {
    Local,
    Utc,
}

/// One crontab field's bounds. `star_max` is the top used by `*` and `N/step`;
/// day-of-week accepts 7 explicitly but `*` stops at 6 (Saturday).
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    star_max: u32,
    names: &'static [&'static str],
}

#[rustfmt::skip]
const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

#[rustfmt::skip]
const FIELDS: [FieldSpec; 6] = [
    FieldSpec { name: "second", min: 0, max: 59, star_max: 59, names: &[] },
    FieldSpec { name: "minute", min: 0, max: 59, star_max: 59, names: &[] },
    FieldSpec { name: "hour", min: 0, max: 23, star_max: 23, names: &[] },
    FieldSpec { name: "day of month", min: 1, max: 31, star_max: 31, names: &[] },
    FieldSpec { name: "month", min: 1, max: 12, star_max: 12, names: MONTHS },
    FieldSpec { name: "day of week", min: 0, max: 7, star_max: 6, names: DAYS },
];

const DESCRIPTORS: &[(&str, &str)] = &[
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
    ("@monthly", "0 0 0 1 * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@daily", "0 0 0 * * *"),
    ("@midnight", "0 0 0 * * *"),
    ("@hourly", "0 0 * * * *"),
];

/// The values one field allows (bit n = value n), and whether it was written
/// with `*`/`?` (robfig's "star bit", cleared by a step above 1).
#[derive(Debug, Clone, Copy)]
struct FieldSet {
    bits: u64,
    star: bool,
}

impl CronSchedule {
    /// Parse a crontab: 5 fields (second 0), 6 fields (leading seconds),
    /// `@every <go duration>` or a descriptor (`@hourly`, `@daily`, `@midnight`,
    /// `@weekly`, `@monthly`, `@yearly`, `@annually`), optionally prefixed by
    /// `TZ=UTC` or `CRON_TZ=UTC`. Errors say what is wrong, not the spec itself.
    pub(crate) fn parse(spec: &str) -> Result<CronSchedule, CronError> {
        let (zone, body) = split_zone(spec.trim())?;
        let every = body.strip_prefix("@every");
        if let Some(arg) = every.filter(|a| a.is_empty() || a.starts_with(char::is_whitespace)) {
            let rule = Rule::Every(parse_every(arg)?);
            return Ok(CronSchedule { rule, zone });
        }
        let expanded = match body.strip_prefix('@') {
            Some(_) => descriptor(body)?,
            None => body,
        };
        let sets = parse_fields(expanded)?;
        let schedules = to_cron_crate(&sets)?;
        Ok(CronSchedule {
            rule: Rule::Calendar(schedules),
            zone,
        })
    }

    /// The first fire time strictly after `t`, in the local time zone (robfig
    /// works in local time too). `None` if the rule never fires again.
    pub(crate) fn next_after(&self, t: DateTime<Local>) -> Option<DateTime<Local>> {
        match self.zone {
            Zone::Local => self.next_after_in(&t),
            Zone::Utc => {
                let next = self.next_after_in(&t.with_timezone(&Utc))?;
                Some(next.with_timezone(&Local))
            }
        }
    }

    /// `next_after` in any time zone (tests use UTC to be independent of the host).
    /// A `TZ=` prefix is ignored here; `next_after` applies it.
    pub(crate) fn next_after_in<Z: TimeZone>(&self, t: &DateTime<Z>) -> Option<DateTime<Z>> {
        match &self.rule {
            Rule::Every(d) => {
                // robfig: drop the sub-second part of `t`, then add the interval.
                let whole = t.with_nanosecond(0)?;
                Some(whole + chrono::Duration::from_std(*d).ok()?)
            }
            Rule::Calendar(all) => all.iter().filter_map(|s| s.after(t).next()).min(),
        }
    }
}

/// Strip a `TZ=<zone>` / `CRON_TZ=<zone>` prefix. Without a time zone database
/// only UTC and Local can be honoured; anything else is rejected.
fn split_zone(spec: &str) -> Result<(Zone, &str), CronError> {
    let rest = match spec
        .strip_prefix("TZ=")
        .or_else(|| spec.strip_prefix("CRON_TZ="))
    {
        Some(rest) => rest,
        None => return Ok((Zone::Local, spec)),
    };
    let (name, body) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let zone = match name {
        "UTC" | "Etc/UTC" | "" => Zone::Utc,
        "Local" => Zone::Local,
        other => {
            return Err(format!(
                "time zone {other:?} is not supported: only TZ=UTC and TZ=Local are \
                 (there is no time zone database)"
            )
            .into());
        }
    };
    Ok((zone, body.trim_start()))
}

/// `@every <go duration>`: rounded like robfig (sub-second part dropped, at least 1s).
fn parse_every(arg: &str) -> Result<Duration, CronError> {
    if arg.trim().is_empty() {
        return Err("@every needs a duration, like \"@every 30s\"".into());
    }
    let d = go_duration(arg.trim()).map_err(|e| CronError::from(e.to_string()))?;
    Ok(Duration::from_secs(d.as_secs().max(1)))
}

fn descriptor(body: &str) -> Result<&'static str, CronError> {
    match DESCRIPTORS.iter().find(|(name, _)| *name == body) {
        Some((_, fields)) => Ok(fields),
        None => {
            let names: Vec<&str> = DESCRIPTORS.iter().map(|(n, _)| *n).collect();
            Err(format!(
                "unknown descriptor {body:?}; accepted: @every <duration>, {}",
                names.join(", ")
            )
            .into())
        }
    }
}

/// Split into 5 or 6 fields and parse each into a value set.
fn parse_fields(body: &str) -> Result<[FieldSet; 6], CronError> {
    let mut fields: Vec<&str> = body.split_whitespace().collect();
    match fields.len() {
        5 => fields.insert(0, "0"),
        6 => {}
        n => return Err(format!("expected 5 or 6 fields, got {n}").into()),
    }
    let mut sets = [FieldSet {
        bits: 0,
        star: false,
    }; 6];
    for (i, (spec, text)) in FIELDS.iter().zip(&fields).enumerate() {
        sets[i] = parse_field(spec, text)?;
    }
    Ok(sets)
}

/// A comma-separated list of items; the union of their values.
fn parse_field(spec: &FieldSpec, text: &str) -> Result<FieldSet, CronError> {
    let mut set = FieldSet {
        bits: 0,
        star: false,
    };
    for item in text.split(',') {
        let one = parse_item(spec, item)?;
        set.bits |= one.bits;
        set.star |= one.star;
    }
    if spec.max == 7 && set.bits & (1 << 7) != 0 {
        set.bits = (set.bits & !(1 << 7)) | 1; // 7 is Sunday, like 0
    }
    Ok(set)
}

/// One item: `*`, `?`, `N`, `N-M`, each optionally followed by `/step`.
fn parse_item(spec: &FieldSpec, item: &str) -> Result<FieldSet, CronError> {
    let name = spec.name;
    let malformed =
        |what: &str| CronError::from(format!("{name}: malformed item {item:?}: {what}"));
    if item.is_empty() {
        return Err(malformed("empty list item"));
    }
    let mut parts = item.split('/');
    let range = parts.next().unwrap_or("");
    let step = parts.next();
    if parts.next().is_some() {
        return Err(malformed("more than one '/'"));
    }
    let bounds: Vec<&str> = range.split('-').collect();
    let (start, mut end, mut star) = match bounds.as_slice() {
        ["*" | "?"] => (spec.min, spec.star_max, true),
        [one] => {
            let v = value(spec, item, one)?;
            (v, v, false)
        }
        [lo, hi] => (value(spec, item, lo)?, value(spec, item, hi)?, false),
        _ => return Err(malformed("more than one '-'")),
    };
    let mut step_n = 1;
    if let Some(step) = step {
        step_n = step
            .parse::<u32>()
            .map_err(|_| format!("{name}: step {step:?} in {item:?} must be a positive number"))?;
        if bounds.len() == 1 {
            end = spec.star_max; // "N/step" means "N-max/step"
        }
        if step_n > 1 {
            star = false;
        }
    }
    if step_n == 0 {
        return Err(format!("{name}: step in {item:?} must be a positive number").into());
    }
    if start > end {
        return Err(
            format!("{name}: range start {start} is after its end {end} in {item:?}").into(),
        );
    }
    let bits = (start..=end)
        .step_by(step_n as usize)
        .fold(0u64, |b, v| b | (1 << v));
    Ok(FieldSet { bits, star })
}

/// A number or (for month and day of week) a three-letter name, within bounds.
fn value(spec: &FieldSpec, item: &str, text: &str) -> Result<u32, CronError> {
    let name = spec.name;
    let lower = text.to_ascii_lowercase();
    if let Some(pos) = spec.names.iter().position(|n| *n == lower) {
        return Ok(pos as u32 + if name == "month" { 1 } else { 0 });
    }
    let Ok(v) = text.parse::<u32>() else {
        let hint = match spec.names.first() {
            Some(example) => format!(" or a name like {example}"),
            None => String::new(),
        };
        return Err(format!("{name}: {text:?} in {item:?} is not a number{hint}").into());
    };
    if v < spec.min || v > spec.max {
        let (lo, hi) = (spec.min, spec.max);
        return Err(format!("{name}: {v} in {item:?} is out of range {lo}-{hi}").into());
    }
    Ok(v)
}

/// Render value sets as `cron` crate expressions. Day-of-week shifts from
/// POSIX 0-6 (Sunday first) to the crate's 1-7 (Sunday = 1).
fn to_cron_crate(sets: &[FieldSet; 6]) -> Result<Vec<::cron::Schedule>, CronError> {
    let list = |i: usize, shift: u32| -> String {
        let spec = &FIELDS[i];
        let values: Vec<String> = (spec.min..=spec.star_max)
            .filter(|v| sets[i].bits & (1 << v) != 0)
            .map(|v| (v + shift).to_string())
            .collect();
        values.join(",")
    };
    let (dom, dow) = (list(3, 0), list(5, 1));
    let head = format!("{} {} {}", list(0, 0), list(1, 0), list(2, 0));
    let month = list(4, 0);
    let exprs = if sets[3].star || sets[5].star {
        vec![format!("{head} {dom} {month} {dow}")]
    } else {
        // Both restricted: a day matching either one fires (classic cron OR).
        vec![
            format!("{head} {dom} {month} *"),
            format!("{head} * {month} {dow}"),
        ]
    };
    let build = |e: &String| {
        ::cron::Schedule::from_str(e)
            .map_err(|err| CronError::from(format!("internal cron expression {e:?}: {err}")))
    };
    exprs.iter().map(build).collect()
}

/// Why a crontab was refused: what is wrong, naming the field and the item
/// (not the spec itself, which the caller names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CronError {
    problem: String,
}

impl From<String> for CronError {
    fn from(problem: String) -> CronError {
        CronError { problem }
    }
}

impl From<&str> for CronError {
    fn from(problem: &str) -> CronError {
        CronError::from(problem.to_string())
    }
}

impl std::fmt::Display for CronError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for CronError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fri 2026-11-20 10:00:00 UTC, the start of every table row.
    fn start() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 20, 10, 0, 0).unwrap()
    }

    fn next_n(spec: &str, from: DateTime<Utc>, n: usize) -> Vec<String> {
        let sched = CronSchedule::parse(spec).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        let mut t = from;
        let mut out = Vec::new();
        for _ in 0..n {
            t = sched.next_after_in(&t).expect("fires again");
            out.push(t.format("%a %Y-%m-%d %H:%M:%S").to_string());
        }
        out
    }

    /// Next four fire times from `start()`; rows from spec/crates.md §6 plus
    /// robfig details (star bit, `N/step`, names, descriptors).
    #[rustfmt::skip]
    const FIRE_TIMES: &[(&str, [&str; 4])] = &[
        ("*/5 * * * *", ["Fri 2026-11-20 10:05:00", "Fri 2026-11-20 10:10:00", "Fri 2026-11-20 10:15:00", "Fri 2026-11-20 10:20:00"]),
        ("*/10 * * * * *", ["Fri 2026-11-20 10:00:10", "Fri 2026-11-20 10:00:20", "Fri 2026-11-20 10:00:30", "Fri 2026-11-20 10:00:40"]),
        ("0 0 * * 0", ["Sun 2026-11-22 00:00:00", "Sun 2026-11-29 00:00:00", "Sun 2026-12-06 00:00:00", "Sun 2026-12-13 00:00:00"]),
        ("0 0 * * 7", ["Sun 2026-11-22 00:00:00", "Sun 2026-11-29 00:00:00", "Sun 2026-12-06 00:00:00", "Sun 2026-12-13 00:00:00"]),
        ("0 0 * * 5-7", ["Sat 2026-11-21 00:00:00", "Sun 2026-11-22 00:00:00", "Fri 2026-11-27 00:00:00", "Sat 2026-11-28 00:00:00"]),
        ("0 0 * * */2", ["Sat 2026-11-21 00:00:00", "Sun 2026-11-22 00:00:00", "Tue 2026-11-24 00:00:00", "Thu 2026-11-26 00:00:00"]),
        ("0 0 13 * 5", ["Fri 2026-11-27 00:00:00", "Fri 2026-12-04 00:00:00", "Fri 2026-12-11 00:00:00", "Sun 2026-12-13 00:00:00"]),
        ("0 0 1 * MON", ["Mon 2026-11-23 00:00:00", "Mon 2026-11-30 00:00:00", "Tue 2026-12-01 00:00:00", "Mon 2026-12-07 00:00:00"]),
        ("0 0 */1 * 1", ["Mon 2026-11-23 00:00:00", "Mon 2026-11-30 00:00:00", "Mon 2026-12-07 00:00:00", "Mon 2026-12-14 00:00:00"]),
        ("0 0 1-31 * 1", ["Sat 2026-11-21 00:00:00", "Sun 2026-11-22 00:00:00", "Mon 2026-11-23 00:00:00", "Tue 2026-11-24 00:00:00"]),
        ("0 0 0 ? * mon-FRI", ["Mon 2026-11-23 00:00:00", "Tue 2026-11-24 00:00:00", "Wed 2026-11-25 00:00:00", "Thu 2026-11-26 00:00:00"]),
        ("5/20 * * * *", ["Fri 2026-11-20 10:05:00", "Fri 2026-11-20 10:25:00", "Fri 2026-11-20 10:45:00", "Fri 2026-11-20 11:05:00"]),
        ("0 12 1 JAN,jul *", ["Fri 2027-01-01 12:00:00", "Thu 2027-07-01 12:00:00", "Sat 2028-01-01 12:00:00", "Sat 2028-07-01 12:00:00"]),
        ("0 2 */3 * * *", ["Fri 2026-11-20 12:02:00", "Fri 2026-11-20 15:02:00", "Fri 2026-11-20 18:02:00", "Fri 2026-11-20 21:02:00"]),
        ("@every 10s", ["Fri 2026-11-20 10:00:10", "Fri 2026-11-20 10:00:20", "Fri 2026-11-20 10:00:30", "Fri 2026-11-20 10:00:40"]),
        ("@every 1h30m", ["Fri 2026-11-20 11:30:00", "Fri 2026-11-20 13:00:00", "Fri 2026-11-20 14:30:00", "Fri 2026-11-20 16:00:00"]),
        ("@every 500ms", ["Fri 2026-11-20 10:00:01", "Fri 2026-11-20 10:00:02", "Fri 2026-11-20 10:00:03", "Fri 2026-11-20 10:00:04"]),
        ("@hourly", ["Fri 2026-11-20 11:00:00", "Fri 2026-11-20 12:00:00", "Fri 2026-11-20 13:00:00", "Fri 2026-11-20 14:00:00"]),
        ("@midnight", ["Sat 2026-11-21 00:00:00", "Sun 2026-11-22 00:00:00", "Mon 2026-11-23 00:00:00", "Tue 2026-11-24 00:00:00"]),
        ("@weekly", ["Sun 2026-11-22 00:00:00", "Sun 2026-11-29 00:00:00", "Sun 2026-12-06 00:00:00", "Sun 2026-12-13 00:00:00"]),
        ("@monthly", ["Tue 2026-12-01 00:00:00", "Fri 2027-01-01 00:00:00", "Mon 2027-02-01 00:00:00", "Mon 2027-03-01 00:00:00"]),
        ("@annually", ["Fri 2027-01-01 00:00:00", "Sat 2028-01-01 00:00:00", "Mon 2029-01-01 00:00:00", "Tue 2030-01-01 00:00:00"]),
    ];

    #[test]
    fn fire_times_from_a_fixed_start() {
        for (spec, want) in FIRE_TIMES {
            assert_eq!(next_n(spec, start(), 4), *want, "spec {spec:?}");
        }
    }

    #[test]
    fn every_drops_the_sub_second_part_of_the_start() {
        let from = start() + chrono::Duration::milliseconds(700);
        let want = ["Fri 2026-11-20 10:00:01", "Fri 2026-11-20 10:00:02"];
        assert_eq!(next_n("@every 1.5s", from, 2), want);
    }

    #[test]
    fn utc_prefix_is_honoured_in_local_time() {
        let from = start().with_timezone(&Local);
        let sched = CronSchedule::parse("TZ=UTC 0 12 * * *").unwrap();
        let next = sched.next_after(from).unwrap().with_timezone(&Utc);
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 11, 20, 12, 0, 0).unwrap());
        let sched = CronSchedule::parse("CRON_TZ=UTC @daily").unwrap();
        let next = sched.next_after(from).unwrap().with_timezone(&Utc);
        assert_eq!(next, Utc.with_ymd_and_hms(2026, 11, 21, 0, 0, 0).unwrap());
    }

    #[test]
    fn never_firing_rule_gives_none() {
        let sched = CronSchedule::parse("0 0 30 2 *").unwrap();
        assert_eq!(sched.next_after_in(&start()), None);
    }

    #[rustfmt::skip]
    const INVALID: &[(&str, &str)] = &[
        ("", "expected 5 or 6 fields, got 0"),
        ("* * * *", "expected 5 or 6 fields, got 4"),
        ("0 0 12 * * * 2027", "expected 5 or 6 fields, got 7"),
        ("0 0 * * 8", "day of week: 8 in \"8\" is out of range 0-7"),
        ("60 * * * *", "minute: 60 in \"60\" is out of range 0-59"),
        ("0 24 * * *", "hour: 24 in \"24\" is out of range 0-23"),
        ("0 0 0 * *", "day of month: 0 in \"0\" is out of range 1-31"),
        ("0 0 1 13 *", "month: 13 in \"13\" is out of range 1-12"),
        ("*/0 * * * *", "minute: step in \"*/0\" must be a positive number"),
        ("*/x * * * *", "minute: step \"x\" in \"*/x\" must be a positive number"),
        ("5-1 * * * *", "minute: range start 5 is after its end 1 in \"5-1\""),
        ("* * * foo *", "month: \"foo\" in \"foo\" is not a number or a name like jan"),
        ("* * * * monday", "day of week: \"monday\" in \"monday\" is not a number or a name like sun"),
        ("mon * * * *", "minute: \"mon\" in \"mon\" is not a number"),
        ("1-2-3 * * * *", "minute: malformed item \"1-2-3\": more than one '-'"),
        ("1/2/3 * * * *", "minute: malformed item \"1/2/3\": more than one '/'"),
        ("1,,2 * * * *", "minute: malformed item \"\": empty list item"),
        ("@every", "@every needs a duration, like \"@every 30s\""),
        ("@every 10", "invalid duration \"10\": missing unit (accepted: ns, us, µs, ms, s, m, h)"),
        ("@everyday", "unknown descriptor \"@everyday\"; accepted: @every <duration>, @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"),
        ("@every   ", "@every needs a duration, like \"@every 30s\""),
        ("@fortnightly", "unknown descriptor \"@fortnightly\"; accepted: @every <duration>, @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"),
        ("TZ=Europe/Berlin * * * * *", "time zone \"Europe/Berlin\" is not supported: only TZ=UTC and TZ=Local are (there is no time zone database)"),
    ];

    #[test]
    fn invalid_specs_say_why() {
        for (spec, want) in INVALID {
            assert_eq!(
                CronSchedule::parse(spec).unwrap_err().to_string(),
                *want,
                "spec {spec:?}"
            );
        }
    }
}
