//! The flush plot: latency (median, log scale) against store size (log scale), one line per contender,
//! one panel per number of changed partitions.

use std::collections::BTreeSet;
use std::path::Path;

use plotters::prelude::*;

use crate::BenchResult;
use crate::results::Results;

const COLORS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x55, 0x55, 0x55),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
];

/// Draws the plot of `results.flush` to `path` (PNG).
pub fn flush_latency(results: &Results, path: &Path) -> BenchResult<()> {
    let failed = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", path.display());
    let changed: BTreeSet<u64> = results.flush.iter().filter_map(|c| c.changed).collect();
    let panels = changed.len().max(1);
    let root = BitMapBackend::new(path, (560 * panels as u32, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    if results.flush.is_empty() {
        root.titled("no flush cases in this run", ("sans-serif", 24))
            .map_err(|e| failed(&e))?;
        return root.present().map_err(|e| failed(&e));
    }
    let contenders: Vec<String> = results.flush[0]
        .contenders
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let sizes: Vec<u64> = results.flush.iter().filter_map(|c| c.store_size).collect();
    // x is log10(store size) on a linear axis, labelled at the powers of ten only.
    let (x_lo, x_hi) = (
        (sizes.iter().copied().min().unwrap_or(1) as f64).log10() - 0.3,
        (sizes.iter().copied().max().unwrap_or(1) as f64).log10() + 0.3,
    );
    let times: Vec<f64> = results
        .flush
        .iter()
        .flat_map(|c| c.contenders.iter().map(|k| k.stats.median()))
        .filter(|t| t.is_finite() && *t > 0.0)
        .collect();
    // y is log10(seconds), labelled at 1, 2 and 5 times each power of ten.
    let (y_lo, y_hi) = (
        times.iter().copied().fold(f64::INFINITY, f64::min).log10() - 0.2,
        times.iter().copied().fold(0.0, f64::max).log10() + 0.2,
    );
    let areas = root.split_evenly((1, panels));
    for (area, changed) in areas.iter().zip(&changed) {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "flush of {} changed partition{}",
                    crate::measure::human_count(*changed),
                    if *changed == 1 { "" } else { "s" }
                ),
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(|e| failed(&e))?;
        chart
            .configure_mesh()
            .x_desc("partitions in the store")
            .y_desc("median latency")
            .x_labels(((x_hi - x_lo) * 4.0) as usize)
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 0.01 {
                    crate::measure::human_count(10f64.powf(x.round()) as u64)
                } else {
                    String::new()
                }
            })
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .y_labels(((y_hi - y_lo) * 10.0) as usize + 1)
            .y_label_formatter(&|y| {
                let exponent = y.floor();
                [1.0, 2.0, 5.0, 10.0]
                    .into_iter()
                    .find(|m: &f64| (y - exponent - m.log10()).abs() < 0.02)
                    // A hair above the round value, so 1 ms prints as "1.00 ms", not "1000 µs".
                    .map(|m| {
                        crate::measure::human_duration(m * 10f64.powi(exponent as i32) * 1.000_001)
                    })
                    .unwrap_or_default()
            })
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| failed(&e))?;
        for (i, name) in contenders.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = results
                .flush
                .iter()
                .filter(|c| c.changed == Some(*changed))
                .filter_map(|c| {
                    let size = (c.store_size? as f64).log10();
                    let median = c.contender(name)?.stats.median();
                    (median.is_finite() && median > 0.0).then_some((size, median.log10()))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| failed(&e))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
                )
                .map_err(|e| failed(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(|e| failed(&e))?;
    }
    root.present().map_err(|e| failed(&e))
}
