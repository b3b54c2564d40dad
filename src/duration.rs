//! Go duration strings (`time.ParseDuration` syntax), as hooks write them in
//! `settings.executionMinInterval` and `@every` crontabs: a sequence of decimal
//! numbers each with a unit, like "300ms", "1.5h" or "2h45m". Shared by the
//! config parser, the cron adapter and any flag that takes a Go duration.

use std::time::Duration;

const UNITS: &str = "ns, us, µs, ms, s, m, h";

/// Parse a Go duration. "0" alone is allowed, as in Go. Negative durations
/// (valid in Go) are rejected because nothing here can use them.
pub(crate) fn go_duration(s: &str) -> Result<Duration, DurationError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(
            format!("invalid duration {s:?}: expected a number with a unit like 30s").into(),
        );
    }
    let mut nanos: u128 = 0;
    let mut rest = body;
    while !rest.is_empty() {
        let (part, tail) = component(s, rest)?;
        nanos = nanos.saturating_add(part);
        rest = tail;
    }
    if neg && nanos > 0 {
        return Err(format!("invalid duration {s:?}: negative durations are not allowed").into());
    }
    let nanos = u64::try_from(nanos)
        .map_err(|_| DurationError::from(format!("invalid duration {s:?}: too large")))?;
    Ok(Duration::from_nanos(nanos))
}

/// One `<number><unit>` component at the start of `rest`: its nanoseconds and the tail.
fn component<'a>(orig: &str, rest: &'a str) -> Result<(u128, &'a str), DurationError> {
    let digits = |t: &str| t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let int_len = digits(rest);
    let (int_part, mut tail) = rest.split_at(int_len);
    let mut frac_part = "";
    if let Some(after_dot) = tail.strip_prefix('.') {
        let n = digits(after_dot);
        frac_part = &after_dot[..n];
        tail = &after_dot[n..];
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(format!("invalid duration {orig:?}: expected a number at {rest:?}").into());
    }
    let unit_len = tail
        .find(|c: char| c.is_ascii_digit() || c == '.')
        .unwrap_or(tail.len());
    let (unit, tail) = tail.split_at(unit_len);
    let unit_nanos = unit_nanos(orig, unit)?;
    let int: u128 = parse_digits(orig, int_part)?;
    let frac = parse_digits(orig, frac_part)?;
    let scale = 10u128
        .checked_pow(frac_part.len() as u32)
        .unwrap_or(u128::MAX);
    let total = int
        .saturating_mul(unit_nanos)
        .saturating_add(frac.saturating_mul(unit_nanos) / scale);
    Ok((total, tail))
}

fn parse_digits(orig: &str, d: &str) -> Result<u128, DurationError> {
    if d.is_empty() {
        return Ok(0);
    }
    // Overlong fractions only lose precision below a nanosecond; cap them.
    let d = &d[..d.len().min(30)];
    d.parse()
        .map_err(|_| DurationError::from(format!("invalid duration {orig:?}: number too large")))
}

fn unit_nanos(orig: &str, unit: &str) -> Result<u128, DurationError> {
    Ok(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => {
            return Err(
                format!("invalid duration {orig:?}: missing unit (accepted: {UNITS})").into(),
            );
        }
        other => {
            return Err(format!(
                "invalid duration {orig:?}: unknown unit {other:?} (accepted: {UNITS})"
            )
            .into());
        }
    })
}

/// Why a Go duration (`30s`, `1h2m`) was refused: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DurationError {
    problem: String,
}

impl From<String> for DurationError {
    fn from(problem: String) -> DurationError {
        DurationError { problem }
    }
}

impl From<&str> for DurationError {
    fn from(problem: &str) -> DurationError {
        DurationError::from(problem.to_string())
    }
}

impl std::fmt::Display for DurationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for DurationError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_go() {
        let ms = |n: u64| Duration::from_millis(n);
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("30s", ms(30_000)),
            ("1h30m", ms(5_400_000)),
            ("1.5h", ms(5_400_000)),
            ("300ms", ms(300)),
            (".5s", ms(500)),
            ("5.s", ms(5_000)),
            ("+2m", ms(120_000)),
            ("1h2m3s4ms", ms(3_723_004)),
            ("10us", Duration::from_micros(10)),
            ("10µs", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            ("1.000000001s", Duration::from_nanos(1_000_000_001)),
        ];
        for (input, want) in cases {
            assert_eq!(go_duration(input), Ok(*want), "input {input:?}");
        }
    }

    #[test]
    fn bad_go_durations_say_why() {
        let cases: &[(&str, &str)] = &[
            (
                "",
                "invalid duration \"\": expected a number with a unit like 30s",
            ),
            (
                "30",
                "invalid duration \"30\": missing unit (accepted: ns, us, µs, ms, s, m, h)",
            ),
            (
                "30ks",
                "invalid duration \"30ks\": unknown unit \"ks\" (accepted: ns, us, µs, ms, s, m, h)",
            ),
            (
                "-1s",
                "invalid duration \"-1s\": negative durations are not allowed",
            ),
            ("s", "invalid duration \"s\": expected a number at \"s\""),
            (".s", "invalid duration \".s\": expected a number at \".s\""),
            (
                "1h-5m",
                "invalid duration \"1h-5m\": unknown unit \"h-\" (accepted: ns, us, µs, ms, s, m, h)",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                go_duration(input).unwrap_err().to_string(),
                *want,
                "input {input:?}"
            );
        }
    }
}
