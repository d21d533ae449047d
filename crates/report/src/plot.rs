//! Charts as SVG text (the `plotters` crate's SVG backend only: no system
//! libraries, no fonts): a latency histogram on a log axis, lines over
//! time, and grouped bars for the sweeps. Each function returns a whole
//! `<svg>` document; an HTML page inlines them as they are.

use plotters::prelude::*;

/// Wide enough to fill the page's column (1,100 pixels less its margins).
const SIZE: (u32, u32) = (1040, 400);

/// The colours series take, in turn.
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// A named line: (x, y) points.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a line chart's second figure of one direction, p99
    /// beside p50).
    pub dashed: bool,
    /// Its colour's index (series that belong together share one); `None`:
    /// its place among the series.
    pub colour: Option<usize>,
}

/// A tick's label: three figures at most, no trailing zeros, k, M and G
/// for thousands (`50k`, `1.5M`), so that an axis reads at a glance.
pub fn tick(v: f64) -> String {
    let mut x = v.abs();
    let mut unit = "";
    for next in ["k", "M", "G", "T"] {
        if x < 999.5 {
            break;
        }
        x /= 1000.0;
        unit = next;
    }
    let decimals = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    let mut text = format!("{x:.decimals$}");
    if text.contains('.') {
        text = text.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    let sign = if v < 0.0 && text != "0" { "-" } else { "" };
    format!("{sign}{text}{unit}")
}

/// A latency tick given in microseconds, in the unit that fits (`100ns`,
/// `1us`, `2.5ms`).
pub fn latency_tick(us: f64) -> String {
    let mut x = us * 1000.0;
    let mut unit = "ns";
    for next in ["us", "ms", "s"] {
        if x < 999.5 {
            break;
        }
        x /= 1000.0;
        unit = next;
    }
    format!("{}{unit}", tick(x))
}

/// A named histogram: (lowest, highest, count) buckets, values in µs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    pub name: String,
    pub buckets: Vec<(f64, f64, u64)>,
}

/// Draws into an SVG string; a drawing error (which the SVG backend does
/// not make for these charts) leaves the chart empty but for a note.
fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, plotters::coord::Shift>) -> Result<(), String>) -> String {
    let mut out = String::new();
    let failed = {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let drawn = root.fill(&WHITE).map_err(|e| e.to_string()).and_then(|()| draw(&root));
        let presented = root.present().map_err(|e| e.to_string());
        drawn.and(presented).err()
    };
    match failed {
        None => out,
        Some(e) => format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"40\"><text x=\"4\" y=\"20\">chart not drawn: {}</text></svg>",
            SIZE.0,
            escape(&e)
        ),
    }
}

/// Text safe inside XML and HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A chart's frame: the title over it, room for the axes' labels.
fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    y_labels: u32,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder.caption(title, ("sans-serif", 18)).margin(12).x_label_area_size(38).y_label_area_size(y_labels);
    builder
}

/// The legend, boxed: top left over lines (which start a second in, and
/// whose latencies rise from the left), top right over bars.
fn legend<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    at: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// Lines over a shared x axis (seconds, say); an empty chart says so.
/// Earlier series are drawn wider, so that a line another one covers
/// (the same values) still shows at its edges.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let points = series.iter().flat_map(|s| s.points.iter());
    let x_max = points.clone().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let y_max = points.map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    svg(|root| {
        let mut chart =
            frame(root, title, 70).build_cartesian_2d(0f64..x_max, 0f64..y_max).map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|x| tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, s) in series.iter().enumerate() {
            draw_line(&mut chart, s, i, series.len())?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

/// One series of a line chart, solid or dashed, wider the earlier it is.
fn draw_line<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    s: &Series,
    i: usize,
    of: usize,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = colour(s.colour.unwrap_or(i));
    let width = 1 + (of - i).min(3) as u32;
    let style = c.stroke_width(width);
    let drawn = if s.dashed {
        chart.draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, style))
    } else {
        chart.draw_series(LineSeries::new(s.points.iter().copied(), style))
    };
    let dashed = s.dashed;
    drawn.map_err(|e| e.to_string())?.label(s.name.as_str()).legend(move |(x, y)| {
        let end = if dashed { x + 8 } else { x + 20 };
        PathElement::new(vec![(x, y), (end, y)], c.stroke_width(width))
    });
    Ok(())
}

/// Latency percentiles: for each set, the share of its requests at or
/// under each latency (the histogram summed up to each bucket's top), on
/// a log axis of latency; a curve that rises late has a long tail.
pub fn percentile_chart(title: &str, sets: &[Buckets]) -> String {
    let curves: Vec<Series> = sets
        .iter()
        .map(|set| {
            let total: u64 = set.buckets.iter().map(|b| b.2).sum();
            let mut sum = 0;
            let points = set
                .buckets
                .iter()
                .filter(|b| b.2 > 0)
                .map(|&(_, hi, count)| {
                    sum += count;
                    (hi.max(0.001), 100.0 * sum as f64 / total.max(1) as f64)
                })
                .collect();
            Series { name: set.name.clone(), points, ..Series::default() }
        })
        .collect();
    let xs = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let lo = xs.clone().fold(f64::INFINITY, f64::min);
    let hi = xs.fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo / 1.5, hi * 1.5) } else { (0.1, 10.0) };
    svg(|root| {
        let mut chart = frame(root, title, 60)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..100.0)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("latency (log scale)")
            .y_desc("% of requests at or under")
            .x_label_formatter(&|x| latency_tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, s) in curves.iter().enumerate() {
            draw_line(&mut chart, s, i, curves.len())?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

/// Latency histograms on a log axis of microseconds, each as a share of
/// its requests per bucket, so directions of different sizes compare.
pub fn histogram_chart(title: &str, sets: &[Buckets]) -> String {
    let all = sets.iter().flat_map(|s| s.buckets.iter());
    let lo = all.clone().map(|b| b.0.max(0.001)).fold(f64::INFINITY, f64::min);
    let hi = all.map(|b| b.1.max(0.001)).fold(0.0, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo { (lo, hi * 1.2) } else { (0.1, 10.0) };
    let share = |set: &Buckets, count: u64| {
        let total: u64 = set.buckets.iter().map(|b| b.2).sum();
        100.0 * count as f64 / total.max(1) as f64
    };
    let y_max =
        sets.iter().flat_map(|s| s.buckets.iter().map(move |b| share(s, b.2))).fold(0.0, f64::max).max(1e-9)
            * 1.1;
    svg(|root| {
        let mut chart = frame(root, title, 60)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("latency (log scale)")
            .y_desc("% of requests")
            .x_label_formatter(&|x| latency_tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, set) in sets.iter().enumerate() {
            let c = colour(i);
            let bars = set.buckets.iter().map(|&(b_lo, b_hi, count)| {
                Rectangle::new(
                    [(b_lo.max(lo), 0.0), (b_hi.max(b_lo.max(lo) * 1.0001), share(set, count))],
                    c.mix(0.55).filled(),
                )
            });
            chart
                .draw_series(bars)
                .map_err(|e| e.to_string())?
                .label(set.name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.mix(0.55).filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

/// Grouped bars: a group per category (a stripe size, a journal mode, a
/// policy), a bar per series in each.
pub fn bar_chart(title: &str, y_label: &str, categories: &[String], series: &[Series]) -> String {
    let y_max = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max).max(1e-9) * 1.15;
    let n = categories.len().max(1) as f64;
    let per = series.len().max(1) as f64;
    svg(|root| {
        let mut chart =
            frame(root, title, 70).build_cartesian_2d(0f64..n, 0f64..y_max).map_err(|e| e.to_string())?;
        let label = |x: &f64| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 0.26 {
                categories.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(categories.len() * 2 + 1)
            .x_label_formatter(&label)
            .y_label_formatter(&|y| tick(*y))
            .y_desc(y_label)
            .draw()
            .map_err(|e| e.to_string())?;
        for (k, s) in series.iter().enumerate() {
            let c = colour(k);
            let bars = s.points.iter().map(|&(i, v)| {
                let left = i + 0.1 + 0.8 * k as f64 / per;
                Rectangle::new([(left, 0.0), (left + 0.8 / per, v)], c.filled())
            });
            chart
                .draw_series(bars)
                .map_err(|e| e.to_string())?
                .label(s.name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn well_formed(svg: &str) {
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(!svg.contains("chart not drawn"), "{svg}");
    }

    #[test]
    fn each_chart_is_a_whole_svg_document() {
        let line = Series { name: "read".into(), points: vec![(0.0, 1.0), (1.0, 3.0)], ..Series::default() };
        well_formed(&line_chart("IOPS", "s", "IOPS", std::slice::from_ref(&line)));
        let hist = Buckets { name: "read".into(), buckets: vec![(1.0, 1.1, 10), (2.0, 2.2, 5)] };
        well_formed(&histogram_chart("latency", &[hist]));
        let bars = Series { name: "tar".into(), points: vec![(0.0, 3.0), (1.0, 5.0)], ..Series::default() };
        well_formed(&bar_chart("policies", "s", &["sync".into(), "async".into()], &[bars]));
    }

    #[test]
    fn names_are_escaped_for_xml() {
        let line =
            Series { name: "a<b & \"c\"".into(), points: vec![(0.0, 1.0), (1.0, 2.0)], ..Series::default() };
        let svg = line_chart("t", "x", "y", &[line]);
        assert!(!svg.contains("a<b"), "{svg}");
    }

    #[test]
    fn ticks_read_at_a_glance() {
        let cases =
            [(0.0, "0"), (0.5, "0.5"), (7.0, "7"), (12.5, "12.5"), (50_000.0, "50k"), (1_500_000.0, "1.5M")];
        for (v, text) in cases {
            assert_eq!(tick(v), text, "{v}");
        }
        assert_eq!(tick(999_999.0), "1M");
        assert_eq!(latency_tick(0.1), "100ns");
        assert_eq!(latency_tick(1.0), "1us");
        assert_eq!(latency_tick(2500.0), "2.5ms");
    }

    #[test]
    fn a_percentile_curve_rises_to_all_the_requests() {
        let set = Buckets { name: "read".into(), buckets: vec![(1.0, 2.0, 3), (2.0, 4.0, 0), (4.0, 8.0, 1)] };
        let svg = percentile_chart("p", &[set]);
        well_formed(&svg);
        assert!(svg.contains("% of requests at or under"), "{svg}");
    }

    #[test]
    fn an_empty_chart_is_still_drawn() {
        well_formed(&line_chart("nothing", "s", "IOPS", &[]));
        well_formed(&histogram_chart("nothing", &[]));
    }
}
