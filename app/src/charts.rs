//! ECharts options for the stats pages, built on the server with charming and handed to the page
//! as JSON; `public/charts.js` draws them with the locally served ECharts. Server-only: the
//! wasm bundle never carries charming.

use charming::Chart;
use charming::component::{Axis, Grid, Legend};
use charming::element::{AxisType, Label, LabelPosition, Tooltip, Trigger};
use charming::series::{Bar, Funnel, Line};

fn json(chart: Chart) -> String {
    serde_json::to_string(&chart).unwrap_or_default()
}

fn grid() -> Grid {
    Grid::new().left("3%").right("4%").bottom("3%").contain_label(true)
}

/// Lines over shared category labels (times or days).
pub fn lines(labels: Vec<String>, series: Vec<(&str, Vec<i64>)>) -> String {
    let mut chart = Chart::new()
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
    let mut chart = Chart::new()
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

/// Sent → delivered → opened → clicked.
pub fn funnel(steps: Vec<(&str, i64)>) -> String {
    let data: Vec<(i64, &str)> = steps.into_iter().map(|(name, v)| (v, name)).collect();
    json(
        Chart::new().tooltip(Tooltip::new().trigger(Trigger::Item)).series(
            Funnel::new()
                .name("Delivery funnel")
                .left("10%")
                .width("80%")
                .min_size("5%")
                .label(Label::new().show(true).position(LabelPosition::Inside))
                .data(data),
        ),
    )
}
