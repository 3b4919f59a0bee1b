//! `speedup.svg`: grouped bars per workload, kiln's GPU path over its CPU
//! path and over PyTorch, on a log axis with the 1x line, drawn with
//! plotters' SVG backend into a string (text is left to the viewer's fonts).

use plotters::coord::combinators::{BindKeyPoints, IntoLogRange};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::labels::{count_label, times_label};
use super::report::BenchFile;

const SIZE: (u32, u32) = (1200, 660);
const FONT: &str = "sans-serif";
const OVER_CPU: RGBColor = RGBColor(0x4c, 0x78, 0xa8);
const OVER_TORCH: RGBColor = RGBColor(0xd9, 0x5f, 0x02);
/// The x axis in integer units (so plotters takes our tick positions and
/// label formatter): a group is `GROUP` wide, a bar `BAR`, the gap between a
/// group's two bars `GAP`.
const GROUP: i32 = 100;
const BAR: i32 = 30;
const GAP: i32 = 4;

/// One workload's bars.
#[derive(Debug, PartialEq)]
pub(crate) struct Group {
    pub(crate) label: String,
    pub(crate) over_cpu: Option<f64>,
    pub(crate) over_torch: Option<f64>,
}

/// One bar of each group: legend name, colour, value, left edge in the group.
struct Series {
    name: &'static str,
    color: RGBColor,
    value: fn(&Group) -> Option<f64>,
    offset: i32,
}

const SERIES: [Series; 2] = [
    Series {
        name: "over kiln's CPU path (same host)",
        color: OVER_CPU,
        value: |g| g.over_cpu,
        offset: GROUP / 2 - GAP / 2 - BAR,
    },
    Series {
        name: "over PyTorch on the GPU (same run; grid: with TF32)",
        color: OVER_TORCH,
        value: |g| g.over_torch,
        offset: GROUP / 2 + GAP / 2,
    },
];

/// The workloads with at least one speedup, vadd first, then the anneal
/// shapes in apps' order, then the embedding grid (against PyTorch with TF32
/// allowed, its faster mode).
pub(crate) fn groups(bench: &BenchFile) -> Vec<Group> {
    let c = &bench.comparisons;
    let vadd = c.vadd.iter().map(|v| Group {
        label: format!("vadd {} f32", count_label(v.n)),
        over_cpu: None,
        over_torch: v.speedup_over_torch,
    });
    let anneal = c.anneal.iter().map(|a| Group {
        label: format!("anneal {}", a.shape),
        over_cpu: a.speedup_over_cpu,
        over_torch: a.speedup_over_torch,
    });
    let grid = c.grid.iter().map(|g| Group {
        label: format!("grid {} {}", g.shape, g.dtype),
        over_cpu: None,
        over_torch: g.speedup_over_tf32,
    });
    vadd.chain(anneal)
        .chain(grid)
        .filter(|g| g.over_cpu.is_some() || g.over_torch.is_some())
        .collect()
}

/// A log axis from a power of ten below the smallest bar (and 1x) to one
/// above the largest, with room for the labels over the bars.
fn y_range(groups: &[Group]) -> (f64, f64) {
    let values = groups
        .iter()
        .flat_map(|g| [g.over_cpu, g.over_torch])
        .flatten();
    let (lo, hi) = values.fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // A third of the smallest value: every bar is at least half a decade
    // tall. A hair under the power of ten, so plotters labels it (its tick
    // search rounds `log10(0.1)` up to -0.99..., past 0.1).
    (
        10f64.powf((lo / 3.0).log10().floor()) * (1.0 - 1e-9),
        10f64.powf((hi * 1.4).log10().ceil()),
    )
}

/// `0.1x`, `1x`, `100x`.
fn axis_label(y: f64) -> String {
    let text = format!("{y:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}x")
}

fn title(bench: &BenchFile) -> String {
    let device = match bench.apps.device.as_str() {
        "cpu" => "no GPU (apps ran on the CPU)",
        name => name,
    };
    format!(
        "kiln GPU speedup, {device}, {} (ratio of median times; higher is faster)",
        bench.date
    )
}

/// The chart as an SVG document.
pub(crate) fn render_svg(bench: &BenchFile) -> anyhow::Result<String> {
    let groups = groups(bench);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        if groups.is_empty() {
            draw_empty(&root, bench)?;
        } else {
            draw_bars(&root, bench, &groups)?;
        }
        root.present()?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_empty(root: &Area<'_>, bench: &BenchFile) -> anyhow::Result<()> {
    let style = TextStyle::from((FONT, 22).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    let (w, h) = (SIZE.0 as i32, SIZE.1 as i32);
    root.draw(&Text::new(title(bench), (w / 2, h / 3), style.clone()))?;
    root.draw(&Text::new(
        "no speedups to plot: no GPU figures with a CPU or PyTorch figure beside them",
        (w / 2, h / 2),
        style,
    ))?;
    Ok(())
}

fn draw_bars(root: &Area<'_>, bench: &BenchFile, groups: &[Group]) -> anyhow::Result<()> {
    let (lo, hi) = y_range(groups);
    let n = groups.len() as i32;
    let centers: Vec<i32> = (0..n).map(|i| i * GROUP + GROUP / 2).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(title(bench), (FONT, 22))
        .margin(24)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (0..n * GROUP).with_key_points(centers),
            (lo..hi).log_scale(),
        )?;
    let group_label = |x: &i32| {
        let i = usize::try_from(x / GROUP).unwrap_or(usize::MAX);
        groups.get(i).map_or(String::new(), |g| g.label.clone())
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&group_label)
        .y_label_formatter(&|y| axis_label(*y))
        .y_desc("speedup (log scale)")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .draw()?;

    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0, 1.0), (n * GROUP, 1.0)],
            BLACK.stroke_width(2),
        )))?
        .label("1x: as fast")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    // Each value is written on the side of its bar's top away from the 1x
    // line: above a bar that reaches past it, inside one that stays under.
    let above = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    let inside = TextStyle::from((FONT, 14).into_font())
        .color(&WHITE)
        .pos(Pos::new(HPos::Center, VPos::Top));
    let value_label = |x: i32, v: f64| {
        if v >= 1.0 {
            Text::new(times_label(v), (x + BAR / 2, v), above.clone())
        } else {
            Text::new(times_label(v), (x + BAR / 2, v / 1.04), inside.clone())
        }
    };
    for Series {
        name,
        color,
        value,
        offset,
    } in SERIES
    {
        let bars: Vec<(i32, f64)> = (0..n)
            .zip(groups)
            .filter_map(|(i, g)| value(g).map(|v| (i * GROUP + offset, v)))
            .collect();
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x, v)| Rectangle::new([(x, lo), (x + BAR, v)], color.filled())),
            )?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        chart.draw_series(bars.iter().map(|&(x, v)| value_label(x, v)))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::report::{fixture, merge};
    use super::*;

    use kiln_bench_schema::{Engine, Workload};

    #[test]
    fn groups_hold_every_workload_with_a_speedup() {
        let groups = groups(&fixture());
        let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "vadd 2^28 f32",
                "anneal 1000x64x32",
                "anneal 10000x128x256",
                "anneal 100000x384x1024",
                "anneal 1000000x128x2048"
            ]
        );
        assert_eq!(
            groups[0].over_cpu, None,
            "apps runs no CPU vadd beside the GPU one"
        );
        assert!(groups[2].over_cpu.unwrap() > 18.0);
    }

    #[test]
    fn the_axis_spans_every_bar_and_1x() {
        let (lo, hi) = y_range(&groups(&fixture()));
        assert!((lo - 0.1).abs() < 1e-9 && lo < 0.1, "{lo}");
        assert_eq!(hi, 100.0);
        let only_fast = [Group {
            label: "x".into(),
            over_cpu: Some(3.0),
            over_torch: None,
        }];
        let (lo, hi) = y_range(&only_fast);
        assert!((lo - 0.1).abs() < 1e-9 && hi == 10.0, "{lo} {hi}");
        assert_eq!(axis_label(0.1), "0.1x");
        assert_eq!(axis_label(100.0), "100x");
    }

    #[test]
    fn svg_has_the_title_labels_and_both_series() {
        let svg = render_svg(&fixture()).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        for text in [
            "NVIDIA H100 80GB HBM3, 2026-11-21",
            "vadd 2^28 f32",
            "anneal 10000x128x256",
            "anneal 1000000x128x2048",
            "over kiln&apos;s CPU path",
            "over PyTorch on the GPU",
            "18.45x",
            "0.93x",
            "1x: as fast",
        ] {
            assert!(svg.contains(text), "no `{text}` in the SVG");
        }
        // Two CPU ratios (only the small shapes have a CPU run) and five
        // PyTorch ratios, each a rect filled with its series' colour.
        let bars = |c: RGBColor| {
            let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            svg.lines()
                .filter(|l| l.contains("<rect") && l.contains(&fill))
                .count()
        };
        // One more rect per series: its legend swatch.
        assert_eq!(bars(OVER_CPU), 2 + 1);
        assert_eq!(bars(OVER_TORCH), 5 + 1);
    }

    #[test]
    fn svg_without_speedups_says_why() {
        let mut bench = fixture();
        bench.apps.device = "cpu".into();
        bench.apps.figures.retain(|f| {
            matches!(
                f.kind,
                Workload::Anneal {
                    engine: Engine::Cpu,
                    ..
                }
            )
        });
        let bench = merge(bench.date, bench.command, bench.apps, Err("skipped".into()));
        assert!(groups(&bench).is_empty());
        let svg = render_svg(&bench).unwrap();
        assert!(svg.contains("no speedups to plot"));
    }
}
