//! Wall-clock times in named time zones, for the campaign scheduler. The server has no time-zone
//! database, so the browser's (`Intl`) converts "2026-12-01 09:00 in Europe/Paris" to UTC and
//! back; the calendar arithmetic around it is plain Rust. Outside the browser (server rendering)
//! only UTC is known, and the other conversions answer `None`.

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = (if y >= 0 { y } else { y - 399 }) / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number from [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = (if z >= 0 { z } else { z - 146_096 }) / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `2026-12-01T09:00` (a `datetime-local` value, seconds optional) as seconds since the epoch,
/// reading the wall-clock time as if it were UTC.
pub fn parse_local(value: &str) -> Option<i64> {
    let (date, time) = value.trim().split_once('T')?;
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    let mut t = time.splitn(3, ':');
    let hour: i64 = t.next()?.parse().ok()?;
    let minute: i64 = t.next()?.parse().ok()?;
    let second: i64 = t.next().map(|s| s.split('.').next().unwrap_or("0").parse().ok()).unwrap_or(Some(0))?;
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..60).contains(&second);
    valid.then(|| days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

fn split(secs: i64) -> (i64, u32, u32, i64, i64, i64) {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rest = secs.rem_euclid(86_400);
    (y, m, d, rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Seconds since the epoch as RFC 3339 in UTC: `2026-12-01T08:00:00Z`.
pub fn format_utc(secs: i64) -> String {
    let (y, m, d, h, mi, s) = split(secs);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Wall-clock seconds as a `datetime-local` value: `2026-12-01T09:00`.
pub fn format_local(secs: i64) -> String {
    let (y, m, d, h, mi, _) = split(secs);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}")
}

/// Wall-clock seconds for people: `2026-12-01 09:00`.
pub fn format_human(secs: i64) -> String {
    format_local(secs).replace('T', " ")
}

/// An RFC 3339 timestamp (`2026-12-01T08:00:00.123+00:00`, `…Z`) as seconds since the epoch.
pub fn parse_rfc3339(value: &str) -> Option<i64> {
    let v = value.trim();
    let base = parse_local(v.get(0..19)?)?;
    let rest = &v[19..];
    let rest = rest.strip_prefix('.').map(|r| r.trim_start_matches(|c: char| c.is_ascii_digit())).unwrap_or(rest);
    let offset = match rest {
        "Z" | "z" | "" => 0,
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (h, m) = o.get(1..)?.split_once(':')?;
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60)
        }
    };
    Some(base - offset)
}

/// The wall-clock time (as seconds, read as UTC) in zone `tz` at the instant `utc`.
#[cfg(feature = "hydrate")]
pub fn wall_seconds(tz: &str, utc: i64) -> Option<i64> {
    use web_sys::js_sys::{Array, Date, Function, Object, Reflect, global};
    use web_sys::wasm_bindgen::{JsCast, JsValue};
    if tz == "UTC" {
        return Some(utc);
    }
    let intl = Reflect::get(&global(), &JsValue::from_str("Intl")).ok()?;
    let ctor: Function = Reflect::get(&intl, &JsValue::from_str("DateTimeFormat")).ok()?.dyn_into().ok()?;
    let options = Object::new();
    for (k, v) in [
        ("timeZone", tz),
        ("hourCycle", "h23"),
        ("year", "numeric"),
        ("month", "numeric"),
        ("day", "numeric"),
        ("hour", "numeric"),
        ("minute", "numeric"),
        ("second", "numeric"),
    ] {
        Reflect::set(&options, &JsValue::from_str(k), &JsValue::from_str(v)).ok()?;
    }
    // An unknown zone throws a RangeError here, which comes back as Err.
    let format = Reflect::construct(&ctor, &Array::of2(&JsValue::from_str("en-US"), &options)).ok()?;
    let to_parts: Function = Reflect::get(&format, &JsValue::from_str("formatToParts")).ok()?.dyn_into().ok()?;
    let date = Date::new(&JsValue::from_f64(utc as f64 * 1000.0));
    let parts = Array::from(&to_parts.call1(&format, &date).ok()?);
    let (mut y, mut mo, mut d, mut h, mut mi, mut s) = (None, None, None, None, None, None);
    for part in parts.iter() {
        let kind = Reflect::get(&part, &JsValue::from_str("type")).ok()?.as_string()?;
        let value = Reflect::get(&part, &JsValue::from_str("value")).ok()?.as_string()?;
        match kind.as_str() {
            "year" => y = value.parse::<i64>().ok(),
            "month" => mo = value.parse::<u32>().ok(),
            "day" => d = value.parse::<u32>().ok(),
            "hour" => h = value.parse::<i64>().ok().map(|h| h % 24),
            "minute" => mi = value.parse::<i64>().ok(),
            "second" => s = value.parse::<i64>().ok(),
            _ => {}
        }
    }
    Some(days_from_civil(y?, mo?, d?) * 86_400 + h? * 3600 + mi? * 60 + s?)
}

#[cfg(not(feature = "hydrate"))]
pub fn wall_seconds(tz: &str, utc: i64) -> Option<i64> {
    (tz == "UTC").then_some(utc)
}

/// A `datetime-local` value meant in zone `tz`, as RFC 3339 UTC. Across a daylight-saving jump
/// the second pass settles on the offset in force at the resulting instant.
pub fn local_to_utc(local: &str, tz: &str) -> Option<String> {
    let wall = parse_local(local)?;
    let offset = |t: i64| wall_seconds(tz, t).map(|w| w - t);
    let guess = wall - offset(wall)?;
    Some(format_utc(wall - offset(guess)?))
}

/// An RFC 3339 instant as a `datetime-local` value in zone `tz`.
pub fn utc_to_local(rfc3339: &str, tz: &str) -> Option<String> {
    wall_seconds(tz, parse_rfc3339(rfc3339)?).map(format_local)
}

/// An RFC 3339 instant as `2026-12-01 09:00` in zone `tz`.
pub fn utc_to_human(rfc3339: &str, tz: &str) -> Option<String> {
    wall_seconds(tz, parse_rfc3339(rfc3339)?).map(format_human)
}

/// An RFC 3339 instant written the way the browser's own locale writes dates, in the browser's
/// time zone: `Nov 28, 2026, 8:10 AM` (en-US), `28.11.2026, 08:10` (de-DE). Outside the browser
/// there is neither a locale nor a zone to ask: None.
#[cfg(feature = "hydrate")]
pub fn locale_format(rfc3339: &str) -> Option<String> {
    use web_sys::js_sys::{Array, Date, Intl, Object, Reflect};
    use web_sys::wasm_bindgen::JsValue;
    let date = Date::new(&JsValue::from_f64(parse_rfc3339(rfc3339)? as f64 * 1000.0));
    let options = Object::new();
    Reflect::set(&options, &JsValue::from_str("dateStyle"), &JsValue::from_str("medium")).ok()?;
    Reflect::set(&options, &JsValue::from_str("timeStyle"), &JsValue::from_str("short")).ok()?;
    let format = Intl::DateTimeFormat::new(&Array::new(), &options);
    format.format().call1(&JsValue::NULL, &date).ok()?.as_string()
}

#[cfg(not(feature = "hydrate"))]
pub fn locale_format(_rfc3339: &str) -> Option<String> {
    None
}

/// The browser's time zone (`Europe/Paris`), when known.
#[cfg(feature = "hydrate")]
pub fn browser_time_zone() -> Option<String> {
    use web_sys::js_sys::{Array, Object, Reflect};
    use web_sys::wasm_bindgen::JsValue;
    let options = web_sys::js_sys::Intl::DateTimeFormat::new(&Array::new(), &Object::new()).resolved_options();
    Reflect::get(&options, &JsValue::from_str("timeZone")).ok()?.as_string().filter(|s| !s.is_empty())
}

#[cfg(not(feature = "hydrate"))]
pub fn browser_time_zone() -> Option<String> {
    None
}

/// Every zone the browser knows (`Intl.supportedValuesOf`), or the short list when it cannot say.
#[cfg(feature = "hydrate")]
pub fn known_time_zones() -> Vec<String> {
    use web_sys::js_sys::{Array, Function, Reflect, global};
    use web_sys::wasm_bindgen::{JsCast, JsValue};
    let all = (|| {
        let intl = Reflect::get(&global(), &JsValue::from_str("Intl")).ok()?;
        let f: Function = Reflect::get(&intl, &JsValue::from_str("supportedValuesOf")).ok()?.dyn_into().ok()?;
        let list = Array::from(&f.call1(&intl, &JsValue::from_str("timeZone")).ok()?);
        Some(list.iter().filter_map(|v| v.as_string()).collect::<Vec<String>>())
    })();
    match all {
        Some(mut zones) if !zones.is_empty() => {
            // Some engines leave UTC out of the list.
            if !zones.iter().any(|z| z == "UTC") {
                zones.insert(0, "UTC".into());
            }
            zones
        }
        _ => common_time_zones(),
    }
}

#[cfg(not(feature = "hydrate"))]
pub fn known_time_zones() -> Vec<String> {
    common_time_zones()
}

/// The zones offered before the browser has said which it knows.
pub fn common_time_zones() -> Vec<String> {
    [
        "UTC",
        "Europe/London",
        "Europe/Dublin",
        "Europe/Lisbon",
        "Europe/Paris",
        "Europe/Berlin",
        "Europe/Madrid",
        "Europe/Rome",
        "Europe/Amsterdam",
        "Europe/Brussels",
        "Europe/Zurich",
        "Europe/Stockholm",
        "Europe/Warsaw",
        "Europe/Athens",
        "Europe/Helsinki",
        "Europe/Istanbul",
        "Europe/Moscow",
        "Africa/Lagos",
        "Africa/Johannesburg",
        "Asia/Dubai",
        "Asia/Kolkata",
        "Asia/Singapore",
        "Asia/Shanghai",
        "Asia/Tokyo",
        "Australia/Sydney",
        "Pacific/Auckland",
        "America/Sao_Paulo",
        "America/New_York",
        "America/Chicago",
        "America/Denver",
        "America/Los_Angeles",
        "America/Toronto",
        "America/Mexico_City",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// The browser's clock as `14:03`; empty outside the browser.
pub fn now_hm() -> String {
    #[cfg(feature = "hydrate")]
    {
        let now = web_sys::js_sys::Date::new_0();
        format!("{:02}:{:02}", now.get_hours(), now.get_minutes())
    }
    #[cfg(not(feature = "hydrate"))]
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip() {
        for days in [-800_000, -1, 0, 1, 59, 365, 10_957, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn local_and_rfc3339() {
        let t = parse_local("2026-12-01T09:00").expect("parses");
        assert_eq!(format_utc(t), "2026-12-01T09:00:00Z");
        assert_eq!(format_local(t), "2026-12-01T09:00");
        assert_eq!(parse_rfc3339("2026-12-01T09:00:00Z"), Some(t));
        assert_eq!(parse_rfc3339("2026-12-01T10:00:00.250+01:00"), Some(t));
        assert_eq!(parse_rfc3339("2026-12-01T04:00:00-05:00"), Some(t));
        assert_eq!(local_to_utc("2026-12-01T09:00", "UTC").as_deref(), Some("2026-12-01T09:00:00Z"));
        assert_eq!(utc_to_human("2026-12-01T09:00:00+00:00", "UTC").as_deref(), Some("2026-12-01 09:00"));
        assert!(parse_local("2026-13-01T09:00").is_none());
        assert!(parse_local("tomorrow").is_none());
    }
}
