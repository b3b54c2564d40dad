//! Small helpers shared by the whole crate: RFC 3339 timestamps without a date
//! library, pseudo-random UIDs, URL query decoding and the Kubernetes version
//! priority order used to pick a group's preferred version.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Formats epoch seconds as `YYYY-MM-DDTHH:MM:SSZ`, the form Kubernetes uses.
pub fn fmt_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac]Z` back into epoch seconds.
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |a: usize, z: usize| s.get(a..z)?.parse::<i64>().ok();
    let days = days_from_civil(num(0, 4)?, num(5, 7)?, num(8, 10)?);
    Some(days * 86_400 + num(11, 13)? * 3600 + num(14, 16)? * 60 + num(17, 19)?)
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Human age as kubectl prints it: `5s`, `3m`, `2h`, `4d`.
pub fn fmt_age(secs: i64) -> String {
    match secs.max(0) {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(1);

/// splitmix64: a tiny, good-enough mixer for UIDs and generated names.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A fresh pseudo-random 64-bit value (time + process counter).
pub fn random_u64() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    mix(nanos ^ mix(COUNTER.fetch_add(1, Ordering::Relaxed)))
}

/// A UUID-shaped unique id (version 4 layout).
pub fn new_uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// Five lowercase alphanumerics, as appended to `generateName`.
pub fn name_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHA[(x % ALPHA.len() as u64) as usize];
            x /= ALPHA.len() as u64;
            c as char
        })
        .collect()
}

/// Decodes `%XX` escapes and `+` (space) in a query component.
pub fn url_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Splits a raw query string into decoded key/value pairs.
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (url_decode(k), url_decode(v)),
            None => (url_decode(p), String::new()),
        })
        .collect()
}

/// Kubernetes version priority: GA > beta > alpha > other, newer first.
/// Returns a sort key where smaller sorts first.
pub fn version_rank(v: &str) -> (u8, i64, i64, String) {
    let Some(rest) = v.strip_prefix('v') else {
        return (3, 0, 0, v.to_string());
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<i64>() else {
        return (3, 0, 0, v.to_string());
    };
    let tail = &rest[digits.len()..];
    let minor = |t: &str| t.parse::<i64>().ok();
    match tail {
        "" => (0, -major, 0, String::new()),
        t if t.starts_with("beta") => match minor(&t[4..]) {
            Some(n) => (1, -major, -n, String::new()),
            None => (3, 0, 0, v.to_string()),
        },
        t if t.starts_with("alpha") => match minor(&t[5..]) {
            Some(n) => (2, -major, -n, String::new()),
            None => (3, 0, 0, v.to_string()),
        },
        _ => (3, 0, 0, v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip() {
        let t = 1_795_500_000;
        assert_eq!(parse_time(&fmt_time(t)), Some(t));
        assert_eq!(fmt_time(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn decode_query() {
        let q = parse_query("labelSelector=a%3Db%2Cc+in+(x)&watch");
        assert_eq!(q[0], ("labelSelector".into(), "a=b,c in (x)".into()));
        assert_eq!(q[1], ("watch".into(), String::new()));
    }

    #[test]
    fn version_order() {
        let mut v = vec!["v1beta1", "v2", "v1alpha1", "v1", "foo"];
        v.sort_by_key(|x| version_rank(x));
        assert_eq!(v, ["v2", "v1", "v1beta1", "v1alpha1", "foo"]);
    }
}
