//! The flush plot: latency (median, log scale) against store size (log scale), one line per contender,
//! one panel per number of changed partitions.

use std::collections::BTreeSet;
use std::path::Path;

use plotters::prelude::*;

use crate::BenchResult;
use crate::results::{Curve, Results, Series, Unit};

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
    let failed = |e: &dyn std::fmt::Display| {
        crate::BenchError::from(format!("drawing {}: {e}", path.display()))
    };
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

/// Ferry's flush latency against changed partitions, a line per store size, from the flush cases.
pub fn flush_by_changed(results: &Results) -> Option<Curve> {
    let sizes: BTreeSet<u64> = results.flush.iter().filter_map(|c| c.store_size).collect();
    let series: Vec<Series> = sizes
        .iter()
        .map(|size| Series {
            name: format!("store of {} partitions", crate::measure::human_count(*size)),
            points: results
                .flush
                .iter()
                .filter(|c| c.store_size == Some(*size))
                .filter_map(|c| {
                    let median = c.contender(crate::offsets::FERRY)?.stats.median();
                    Some((c.changed? as f64, median))
                })
                .collect(),
        })
        .collect();
    (!series.is_empty()).then(|| Curve {
        id: "flush-changed".to_owned(),
        title: "Ferry FileStore flush latency against changed partitions".to_owned(),
        x_label: "changed partitions per flush".to_owned(),
        unit: Unit::Seconds,
        log_x: true,
        log_y: true,
        series,
    })
}

/// A y value for people, in the curve's unit.
pub fn format_y(unit: Unit, y: f64) -> String {
    match unit {
        Unit::PerSecond => format!("{}/s", crate::measure::human_count(y.round() as u64)),
        Unit::Seconds => crate::measure::human_duration(y),
        Unit::Bytes => crate::measure::human_bytes(y),
    }
}

/// Draws one scaling curve to `path` (PNG). Log axes are drawn as log10 of the value on a linear axis.
pub fn curve(curve: &Curve, path: &Path) -> BenchResult<()> {
    let failed = |e: &dyn std::fmt::Display| {
        crate::BenchError::from(format!("drawing {}: {e}", path.display()))
    };
    let root = BitMapBackend::new(path, (760, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let tx = |x: f64| if curve.log_x { x.log10() } else { x };
    let ty = |y: f64| if curve.log_y { y.log10() } else { y };
    let points: Vec<(f64, f64)> = curve
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0)
        .collect();
    if points.is_empty() {
        root.titled(&format!("{}: no data", curve.title), ("sans-serif", 22))
            .map_err(|e| failed(&e))?;
        return root.present().map_err(|e| failed(&e));
    }
    let (mut x_lo, mut x_hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(tx(p.0)), hi.max(tx(p.0)))
        });
    let (mut y_lo, mut y_hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(ty(p.1)), hi.max(ty(p.1)))
        });
    let x_pad = ((x_hi - x_lo) * 0.08).max(0.3);
    x_lo -= x_pad;
    x_hi += x_pad;
    if curve.log_y {
        y_lo -= 0.2;
        y_hi += 0.2;
    } else {
        y_lo = 0.0;
        y_hi *= 1.15;
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(&curve.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(90)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(|e| failed(&e))?;
    let log_x = curve.log_x;
    let log_y = curve.log_y;
    let unit = curve.unit;
    chart
        .configure_mesh()
        .x_desc(curve.x_label.as_str())
        .light_line_style(RGBColor(0xee, 0xee, 0xee))
        .x_label_formatter(&|x| {
            if log_x {
                if (x - x.round()).abs() < 0.01 {
                    crate::measure::human_count(10f64.powf(x.round()) as u64)
                } else {
                    String::new()
                }
            } else {
                format!("{x:.0}")
            }
        })
        .x_labels(if log_x {
            ((x_hi - x_lo) * 4.0) as usize
        } else {
            10
        })
        .y_labels(if log_y {
            ((y_hi - y_lo) * 10.0) as usize + 1
        } else {
            8
        })
        .y_label_formatter(&|y| {
            if log_y {
                let exponent = y.floor();
                [1.0, 2.0, 5.0, 10.0]
                    .into_iter()
                    .find(|m: &f64| (y - exponent - m.log10()).abs() < 0.02)
                    .map(|m| format_y(unit, m * 10f64.powi(exponent as i32) * 1.000_001))
                    .unwrap_or_default()
            } else {
                format_y(unit, *y)
            }
        })
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| failed(&e))?;
    for (i, series) in curve.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = series
            .points
            .iter()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0 && y.is_finite())
            .map(|&(x, y)| (tx(x), ty(y)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(|e| failed(&e))?
            .label(series.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
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
    root.present().map_err(|e| failed(&e))
}

/// One bar of [`bars`]: who, and the value.
pub struct Bar {
    pub name: String,
    pub value: f64,
}

/// The bars of the Ferry vs Kafka Connect comparison: records/s (with Kafka's ProducerPerformance)
/// and the workers' peak RSS, from the worker-process case; `None` when the run has none.
pub fn connect_bars(results: &Results) -> Option<[(String, Unit, Vec<Bar>); 2]> {
    use crate::e2e::connect::{CONNECT, FERRY, PRODUCER_PERF};
    let case = results.end_to_end.iter().find(|c| c.reference == CONNECT)?;
    let label = |name: &str| match name {
        FERRY => "Ferry",
        CONNECT => "Kafka Connect 4.4",
        _ => "Java producer alone",
    };
    let rate = |name: &str| {
        let c = case.contender(name)?;
        let records = c.work?.records as f64;
        let value = records / c.stats.median();
        value.is_finite().then(|| Bar {
            name: label(name).to_owned(),
            value,
        })
    };
    let rss = |name: &str| {
        let peak = case
            .contender(name)?
            .process
            .as_ref()?
            .peak_rss_bytes
            .iter()
            .max()?;
        Some(Bar {
            name: label(name).to_owned(),
            value: *peak as f64,
        })
    };
    let rates: Vec<Bar> = [FERRY, CONNECT, PRODUCER_PERF]
        .into_iter()
        .filter_map(rate)
        .collect();
    let peaks: Vec<Bar> = [FERRY, CONNECT].into_iter().filter_map(rss).collect();
    (rates.len() >= 2 && peaks.len() == 2).then(|| {
        [
            (
                "records/s (higher is better)".to_owned(),
                Unit::PerSecond,
                rates,
            ),
            (
                "worker peak RSS (lower is better)".to_owned(),
                Unit::Bytes,
                peaks,
            ),
        ]
    })
}

/// Draws panels of bars side by side to `path` (PNG), each on its own linear axis from zero.
pub fn bars(title: &str, panels: &[(String, Unit, Vec<Bar>)], path: &Path) -> BenchResult<()> {
    let failed = |e: &dyn std::fmt::Display| {
        crate::BenchError::from(format!("drawing {}: {e}", path.display()))
    };
    let root =
        BitMapBackend::new(path, (520 * panels.len().max(1) as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| failed(&e))?;
    for (area, (caption, unit, bars)) in root
        .split_evenly((1, panels.len().max(1)))
        .iter()
        .zip(panels)
    {
        let top = bars.iter().map(|b| b.value).fold(0.0, f64::max) * 1.2;
        let unit = *unit;
        let mut chart = ChartBuilder::on(area)
            .caption(caption.as_str(), ("sans-serif", 17))
            .margin(14)
            .x_label_area_size(30)
            .y_label_area_size(90)
            .build_cartesian_2d(0.0..bars.len() as f64, 0.0..top.max(1.0))
            .map_err(|e| failed(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .light_line_style(RGBColor(0xee, 0xee, 0xee))
            .y_label_formatter(&|y| format_y(unit, *y))
            .draw()
            .map_err(|e| failed(&e))?;
        for (i, bar) in bars.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let x = i as f64;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x + 0.15, 0.0), (x + 0.85, bar.value)],
                    color.filled(),
                )))
                .map_err(|e| failed(&e))?;
            for (text, above) in [(bar.name.clone(), 0.08), (format_y(unit, bar.value), 0.03)] {
                chart
                    .draw_series(std::iter::once(Text::new(
                        text,
                        (x + 0.15, bar.value + top * above),
                        ("sans-serif", 14),
                    )))
                    .map_err(|e| failed(&e))?;
            }
        }
    }
    root.present().map_err(|e| failed(&e))
}
