//! The one duration syntax of every command: a bare number of seconds
//! (`2`, `0.5`) or a number with a unit (`500ms`, `50us`, `2m`).

use std::time::Duration;

/// Parses a duration argument.
pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("{text:?} is not a number of seconds"));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{text:?}: {e} (a number of seconds, or 500ms, 50us, 2m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_seconds_and_units() {
        assert_eq!(parse("1"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse("50us"), Ok(Duration::from_micros(50)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert!(parse("-1").is_err());
        assert!(parse("soon").is_err());
    }
}
