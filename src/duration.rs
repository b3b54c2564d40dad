//! Go-style durations (`10s`, `1m30s`, `1.5h`, `500ms`), the syntax flant's flags,
//! settings and `@every` schedules use.

use std::time::Duration;

/// Parses a Go `time.ParseDuration` string. A value must have a unit; `0` alone is
/// accepted as zero, as in Go.
pub fn go_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("missing unit in duration {text:?}")),
            unit => return Err(format!("unknown unit {unit:?} in duration {text:?}")),
        };
        total += value * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("invalid duration {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::go_duration;
    use std::time::Duration;

    #[test]
    fn go_syntax() {
        assert_eq!(go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(go_duration("0"), Ok(Duration::ZERO));
        assert!(
            go_duration("30ks")
                .unwrap_err()
                .contains("unknown unit \"ks\"")
        );
        assert!(go_duration("10").unwrap_err().contains("missing unit"));
        assert!(go_duration("").is_err());
        assert!(go_duration("abc").is_err());
    }
}
