//! The demo's picture: side effects per intended payment against the retry rate, without
//! and with keys, from the payments storm (`retry_storm_payments --rates`).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::Result;

/// One retry rate: percent, charges per intent without keys, with keys.
pub(crate) struct Point {
    pub(crate) percent: u32,
    pub(crate) without: f64,
    pub(crate) with: f64,
}

/// Reads the storm's `rate<TAB>percent<TAB>intents<TAB>naive<TAB>idem` lines.
pub(crate) fn parse(stdout: &str) -> Result<Vec<Point>> {
    let mut points = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with("rate\t")) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [_, percent, intents, naive, idem] = fields[..] else {
            return Err(format!("payments --rates: expected 5 fields: {line:?}"));
        };
        let number = |s: &str| s.parse::<f64>().map_err(|e| format!("{s:?} in {line:?}: {e}"));
        let intents = number(intents)?.max(1.0);
        points.push(Point {
            percent: percent.parse().map_err(|e| format!("{percent:?}: {e}"))?,
            without: number(naive)? / intents,
            with: number(idem)? / intents,
        });
    }
    if points.is_empty() {
        return Err("payments --rates printed no rate line".into());
    }
    Ok(points)
}

/// Reads one line's value off a point.
type Series = fn(&Point) -> f64;

/// Draws the two lines into `target/demo/retry_rate.svg` and returns the path.
pub(crate) fn draw(root: &Path, points: &[Point]) -> Result<PathBuf> {
    let dir = root.join("target/demo");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("retry_rate.svg");
    let area = SVGBackend::new(&path, (800, 480)).into_drawing_area();
    let failed = |e: String| format!("drawing {}: {e}", path.display());
    area.fill(&WHITE).map_err(|e| failed(e.to_string()))?;
    let mut chart = ChartBuilder::on(&area)
        .caption("idem-payments: cards charged per intended payment", ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(0u32..100u32, 0.0f64..2.2f64)
        .map_err(|e| failed(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("retry rate (% of payments sent twice)")
        .y_desc("charges per intended payment")
        .draw()
        .map_err(|e| failed(e.to_string()))?;
    // What the storm measured, thick; what a reader would predict, thin: a naive retry
    // charges once more, so 1 + the retry rate.
    let lines: [(Series, &str, RGBColor, u32); 3] = [
        (|p| p.without, "without keys, measured", RED, 3),
        (|p| p.with, "with idem, measured", BLUE, 3),
        (|p| 1.0 + f64::from(p.percent) / 100.0, "reference: 1 + retry rate", BLACK, 1),
    ];
    for (value, label, color, width) in lines {
        let line = points.iter().map(|p| (p.percent, value(p)));
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(width)))
            .map_err(|e| failed(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 24, y)], color.stroke_width(width))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(e.to_string()))?;
    area.present().map_err(|e| failed(e.to_string()))?;
    drop(chart);
    drop(area);
    Ok(path)
}
