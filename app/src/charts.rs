//! ECharts options for the stats pages, built on the server with charming and handed to the page
//! as JSON; `public/charts.js` draws them with the locally served ECharts. Server-only: the
//! wasm bundle never carries charming. Every chart uses Herald's palette (the Tailwind colours
//! of the app's buttons and badges), not ECharts' default one.

use chrono::{DateTime, Duration, Timelike, Utc};

use charming::Chart;
use charming::component::{Axis, Grid, Legend};
use charming::element::{AxisType, Color, Label, LabelPosition, Tooltip, Trigger};
use charming::series::{Bar, Line};

/// indigo-600, emerald-600, amber-600, rose-600, sky-600, slate-500.
const PALETTE: [&str; 6] = ["#4f46e5", "#059669", "#d97706", "#e11d48", "#0284c7", "#64748b"];

fn json(chart: Chart) -> String {
    serde_json::to_string(&chart).unwrap_or_default()
}

/// A chart in Herald's colours.
fn themed() -> Chart {
    Chart::new().color(PALETTE.iter().map(|c| Color::from(*c)).collect::<Vec<Color>>())
}

fn grid() -> Grid {
    Grid::new().left("3%").right("4%").bottom("3%").contain_label(true)
}

/// Lines over shared category labels (times or days).
pub fn lines(labels: Vec<String>, series: Vec<(&str, Vec<i64>)>) -> String {
    let mut chart = themed()
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new())
        .grid(grid())
        .x_axis(Axis::new().type_(AxisType::Category).data(labels))
        .y_axis(Axis::new().type_(AxisType::Value).min_interval(1));
    for (name, values) in series {
        chart = chart.series(Line::new().name(name).data(values));
    }
    json(chart)
}

/// Long labels (URLs) would squeeze the bars: keep 40 characters; the tooltip has no more room.
fn short(label: String) -> String {
    if label.chars().count() <= 40 { label } else { format!("{}…", label.chars().take(39).collect::<String>()) }
}

/// Horizontal bars, largest first at the top.
pub fn bars(labels: Vec<String>, series: Vec<(&str, Vec<i64>)>) -> String {
    let mut chart = themed()
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new())
        .grid(grid())
        .x_axis(Axis::new().type_(AxisType::Value).min_interval(1))
        .y_axis(Axis::new().type_(AxisType::Category).inverse(true).data(labels.into_iter().map(short).collect()));
    for (name, values) in series {
        chart = chart.series(Bar::new().name(name).data(values));
    }
    json(chart)
}

/// Sent → delivered → opened → clicked, as bars one under the other: each step's name is an
/// axis label and its count sits beside its bar, so no label ever lies on another (a funnel's
/// labels inside its shapes did, once a step was small), and a step with nothing has no bar.
pub fn funnel(steps: Vec<(&str, i64)>) -> String {
    let labels: Vec<String> = steps.iter().map(|(name, _)| name.to_string()).collect();
    let values: Vec<i64> = steps.iter().map(|(_, v)| *v).collect();
    json(
        themed()
            .tooltip(Tooltip::new().trigger(Trigger::Axis))
            .grid(grid().right("12%"))
            .x_axis(Axis::new().type_(AxisType::Value).min_interval(1))
            .y_axis(Axis::new().type_(AxisType::Category).inverse(true).data(labels))
            .series(
                Bar::new()
                    .name("Readers")
                    .bar_width("60%")
                    .label(Label::new().show(true).position(LabelPosition::Right))
                    .data(values),
            ),
    )
}

/// Opens and clicks over time from hourly counts (hours without any are absent): every hour
/// from the first to the last, up to two days (labelled `09:00` when they fall on one day),
/// otherwise every day. A send read within its first hour has one point: it is drawn as bars.
pub fn timeline(points: &[(DateTime<Utc>, i64, i64)]) -> Option<String> {
    let first = points.iter().map(|p| p.0).min()?;
    let last = points.iter().map(|p| p.0).max()?;
    let hourly = last - first <= Duration::hours(48);
    let step = if hourly { Duration::hours(1) } else { Duration::days(1) };
    let start = if hourly {
        first.with_minute(0).and_then(|t| t.with_second(0)).unwrap_or(first)
    } else {
        first.date_naive().and_hms_opt(0, 0, 0).map(|t| t.and_utc()).unwrap_or(first)
    };
    let mut slots: Vec<(DateTime<Utc>, i64, i64)> = Vec::new();
    let mut t = start;
    while t <= last {
        slots.push((t, 0, 0));
        t += step;
    }
    for (at, opens, clicks) in points {
        let i = ((*at - start).num_seconds() / step.num_seconds()).max(0) as usize;
        if let Some(slot) = slots.get_mut(i) {
            slot.1 += opens;
            slot.2 += clicks;
        }
    }
    let one_day = first.date_naive() == last.date_naive();
    let format = match (hourly, one_day) {
        (true, true) => "%H:00",
        (true, false) => "%b %d %H:00",
        (false, _) => "%b %d",
    };
    let labels: Vec<String> = slots.iter().map(|s| s.0.format(format).to_string()).collect();
    let opens: Vec<i64> = slots.iter().map(|s| s.1).collect();
    let clicks: Vec<i64> = slots.iter().map(|s| s.2).collect();
    if slots.len() == 1 {
        return Some(bars(labels, vec![("Opens", opens), ("Clicks", clicks)]));
    }
    Some(lines(labels, vec![("Opens", opens), ("Clicks", clicks)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    /// charming writes one axis as an object and several as an array.
    fn one(v: &serde_json::Value) -> &serde_json::Value {
        if v.is_array() { &v[0] } else { v }
    }

    #[test]
    fn a_one_day_send_gets_every_hour_labelled_by_the_hour() {
        let chart = timeline(&[(at("2026-11-27T09:00:00Z"), 5, 1), (at("2026-11-27T12:00:00Z"), 2, 0)]).expect("chart");
        let v: serde_json::Value = serde_json::from_str(&chart).expect("json");
        let labels = one(&v["xAxis"])["data"].clone();
        assert_eq!(labels, serde_json::json!(["09:00", "10:00", "11:00", "12:00"]));
        assert_eq!(v["series"][0]["data"], serde_json::json!([5, 0, 0, 2]));
        assert_eq!(v["color"][0], "#4f46e5");
        let week = timeline(&[(at("2026-11-20T09:00:00Z"), 1, 0), (at("2026-11-27T10:00:00Z"), 1, 1)]).expect("chart");
        let v: serde_json::Value = serde_json::from_str(&week).expect("json");
        assert_eq!(one(&v["xAxis"])["data"].as_array().map(Vec::len), Some(8), "a day per point: {v}");
        assert!(timeline(&[]).is_none());
    }

    #[test]
    fn the_funnel_names_each_step_on_its_axis() {
        let v: serde_json::Value =
            serde_json::from_str(&funnel(vec![("Sent", 3), ("Opened", 0), ("Clicked", 0)])).expect("json");
        assert_eq!(one(&v["yAxis"])["data"], serde_json::json!(["Sent", "Opened", "Clicked"]));
        assert_eq!(v["series"][0]["data"], serde_json::json!([3, 0, 0]));
    }
}
