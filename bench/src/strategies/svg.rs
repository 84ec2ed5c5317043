//! A hand-written SVG line chart of a figure per turn (context tokens: the ramp of
//! full history, the flat sliding window, degrau's sawtooth; or the cost of each
//! turn), one polyline per policy, with axes, ticks, a legend, the machine the
//! figures came from, and optionally shaded turns (those after a long pause).

use std::fmt::Write as _;

/// One line of the chart.
pub struct Series<'a> {
    /// Legend text.
    pub label: &'a str,
    /// Stroke colour.
    pub color: &'a str,
    /// One value per turn (turn 1 first).
    pub values: Vec<u64>,
}

/// A horizontal reference line (a threshold, a limit).
pub struct Rule<'a> {
    /// Its label.
    pub label: &'a str,
    /// Its value.
    pub value: u64,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 86.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 80.0;
const BOTTOM: f64 = 70.0;

/// A "nice" step (1, 2 or 5 times a power of ten) giving about `count` ticks up to `max`.
pub fn nice_step(max: f64, count: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / count;
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    (nice * power).max(1.0)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn tick_label(value: f64) -> String {
    if value >= 1000.0 && (value / 1000.0).fract() == 0.0 {
        format!("{}k", value / 1000.0)
    } else if value >= 1000.0 {
        format!("{:.1}k", value / 1000.0)
    } else {
        format!("{value}")
    }
}

/// Turns to shade, and what the shade means (for the legend).
pub struct Marks<'a> {
    /// Legend text.
    pub label: &'a str,
    /// 1-based turns.
    pub turns: Vec<usize>,
}

/// The chart as an SVG document; each `subtitle` line goes under the title,
/// `y_label` along the y axis; `marks` shades turns.
pub fn chart(
    title: &str,
    subtitle: &[&str],
    y_label: &str,
    series: &[Series<'_>],
    rules: &[Rule<'_>],
    marks: Option<&Marks<'_>>,
) -> String {
    let frame = Frame::of(series, rules);
    let mut svg = String::new();
    header(&mut svg, title, subtitle);
    y_ticks(&mut svg, &frame);
    x_ticks(&mut svg, &frame);
    axes(&mut svg, &frame, y_label);
    // Shaded turns, under the lines.
    shade(&mut svg, &frame, marks);
    reference_lines(&mut svg, &frame, rules);
    polylines(&mut svg, &frame, series);
    legend(&mut svg, series, marks);
    svg.push_str("</svg>\n");
    svg
}

/// Where the plot's values go: the turns and the y axis's top and step, fitted
/// to the series and the rules.
struct Frame {
    turns: usize,
    y_max: f64,
    y_step: f64,
    plot_w: f64,
    plot_h: f64,
}

impl Frame {
    fn of(series: &[Series<'_>], rules: &[Rule<'_>]) -> Frame {
        let turns = series
            .iter()
            .map(|s| s.values.len())
            .max()
            .unwrap_or(1)
            .max(2);
        let data_max = series
            .iter()
            .flat_map(|s| s.values.iter().copied())
            .chain(rules.iter().map(|r| r.value))
            .max()
            .unwrap_or(1) as f64;
        let y_step = nice_step(data_max, 6.0);
        let y_max = (data_max / y_step).ceil() * y_step;
        Frame {
            turns,
            y_max,
            y_step,
            plot_w: WIDTH - LEFT - RIGHT,
            plot_h: HEIGHT - TOP - BOTTOM,
        }
    }

    /// The x of a turn (1-based).
    fn x(&self, turn: f64) -> f64 {
        LEFT + (turn - 1.0) / (self.turns as f64 - 1.0) * self.plot_w
    }

    /// The y of a value.
    fn y(&self, value: f64) -> f64 {
        TOP + self.plot_h - value / self.y_max * self.plot_h
    }
}

/// The document's opening, its background, the title and the subtitle lines.
fn header(svg: &mut String, title: &str, subtitle: &[&str]) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="26" font-size="16" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (i, line) in subtitle.iter().enumerate() {
        let _ = writeln!(
            svg,
            r##"<text x="{LEFT}" y="{}" fill="#555555">{}</text>"##,
            46 + 16 * i,
            escape(line)
        );
    }
}

/// The grid lines and the y ticks.
fn y_ticks(svg: &mut String, frame: &Frame) {
    let mut tick = 0.0;
    while tick <= frame.y_max + 0.5 {
        let ty = frame.y(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{ty:.1}" x2="{:.1}" y2="{ty:.1}" stroke="#e5e5e5"/>"##,
            WIDTH - RIGHT
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            ty + 4.0,
            tick_label(tick)
        );
        tick += frame.y_step;
    }
}

/// The x ticks: turn 1, then every nice step.
fn x_ticks(svg: &mut String, frame: &Frame) {
    let x_step = nice_step(frame.turns as f64, 8.0);
    let mut turn = x_step;
    let mut x_ticks = vec![1.0];
    while turn <= frame.turns as f64 {
        x_ticks.push(turn);
        turn += x_step;
    }
    for t in x_ticks {
        let tx = frame.x(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#333333"/>"##,
            TOP + frame.plot_h,
            TOP + frame.plot_h + 5.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{tx:.1}" y="{:.1}" text-anchor="middle">{t}</text>"#,
            TOP + frame.plot_h + 19.0
        );
    }
}

/// The axes and their titles.
fn axes(svg: &mut String, frame: &Frame, y_label: &str) {
    let _ = writeln!(
        svg,
        r##"<path d="M{LEFT},{TOP} V{:.1} H{:.1}" fill="none" stroke="#333333"/>"##,
        TOP + frame.plot_h,
        WIDTH - RIGHT
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">turn</text>"#,
        LEFT + frame.plot_w / 2.0,
        HEIGHT - 28.0
    );
    let _ = writeln!(
        svg,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + frame.plot_h / 2.0,
        escape(y_label)
    );
}

/// A band over each marked turn, kept inside the plot at the first and last.
fn shade(svg: &mut String, frame: &Frame, marks: Option<&Marks<'_>>) {
    let band = (frame.plot_w / (frame.turns as f64 - 1.0)).max(1.5);
    for &turn in marks.iter().flat_map(|m| &m.turns) {
        // Kept inside the plot at the first and last turns.
        let from = (frame.x(turn as f64) - band / 2.0).max(LEFT);
        let to = (frame.x(turn as f64) + band / 2.0).min(WIDTH - RIGHT);
        let _ = writeln!(
            svg,
            r##"<rect x="{from:.1}" y="{TOP}" width="{:.1}" height="{:.1}" fill="#f2c14e" fill-opacity="0.35"/>"##,
            to - from,
            frame.plot_h
        );
    }
}

/// The reference lines (a threshold, a limit), dashed, each with its label.
fn reference_lines(svg: &mut String, frame: &Frame, rules: &[Rule<'_>]) {
    for rule in rules {
        let ry = frame.y(rule.value as f64);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{ry:.1}" x2="{:.1}" y2="{ry:.1}" stroke="#888888" stroke-dasharray="6 4"/>"##,
            WIDTH - RIGHT
        );
        let _ = writeln!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#666666">{}</text>"##,
            WIDTH - RIGHT - 4.0,
            ry - 5.0,
            escape(rule.label)
        );
    }
}

/// One polyline per series.
fn polylines(svg: &mut String, frame: &Frame, series: &[Series<'_>]) {
    // The series, the first ones wider, so that a line drawn over another (degrau
    // equals full history until its first step) leaves it visible.
    for (index, s) in series.iter().enumerate() {
        let width = (3.4 - 0.9 * index as f64).max(1.4);
        let mut points = String::new();
        for (i, value) in s.values.iter().enumerate() {
            let _ = write!(
                points,
                "{:.1},{:.1} ",
                frame.x(i as f64 + 1.0),
                frame.y(*value as f64)
            );
        }
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="{width:.1}" stroke-linejoin="round" points="{}"/>"#,
            s.color,
            points.trim_end()
        );
    }
}

/// The legend, top left inside the plot: the marks first if any, then each series.
fn legend(svg: &mut String, series: &[Series<'_>], marks: Option<&Marks<'_>>) {
    let entries = series.len() + usize::from(marks.is_some());
    let legend_h = 20.0 * entries as f64 + 10.0;
    let _ = writeln!(
        svg,
        r##"<rect x="{:.1}" y="{:.1}" width="250" height="{legend_h:.1}" fill="#ffffff" fill-opacity="0.9" stroke="#cccccc"/>"##,
        LEFT + 12.0,
        TOP + 8.0
    );
    if let Some(marks) = marks {
        let ly = TOP + 24.0 + 20.0 * series.len() as f64;
        let _ = writeln!(
            svg,
            r##"<rect x="{:.1}" y="{:.1}" width="24" height="10" fill="#f2c14e" fill-opacity="0.6"/>"##,
            LEFT + 22.0,
            ly - 5.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 54.0,
            ly + 4.0,
            escape(marks.label)
        );
    }
    for (i, s) in series.iter().enumerate() {
        let ly = TOP + 24.0 + 20.0 * i as f64;
        let _ = writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="3"/>"#,
            LEFT + 22.0,
            LEFT + 46.0,
            s.color
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 54.0,
            ly + 4.0,
            escape(s.label)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_nice() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(1000.0, 8.0), 200.0);
        assert_eq!(nice_step(19.0, 8.0), 5.0);
        assert_eq!(nice_step(180_000.0, 6.0), 50_000.0);
    }

    #[test]
    fn a_chart_has_one_polyline_per_series_and_a_legend() {
        let svg = chart(
            "t <1>",
            &["machine"],
            "context tokens",
            &[
                Series {
                    label: "full",
                    color: "#d62728",
                    values: vec![1, 2, 3],
                },
                Series {
                    label: "stepped",
                    color: "#2ca02c",
                    values: vec![1, 1, 1],
                },
            ],
            &[Rule {
                label: "threshold",
                value: 2,
            }],
            None,
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains(">stepped</text>"));
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains(">context tokens</text>"));
        assert!(!svg.contains("#f2c14e"));
    }

    #[test]
    fn marked_turns_are_shaded_and_named_in_the_legend() {
        let marks = Marks {
            label: "after a gap of more than 5 minutes",
            turns: vec![2, 3],
        };
        let svg = chart(
            "cost",
            &[],
            "cost of the turn",
            &[Series {
                label: "full",
                color: "#d62728",
                values: vec![5, 1, 9],
            }],
            &[],
            Some(&marks),
        );
        assert_eq!(
            svg.matches(r##"fill="#f2c14e" fill-opacity="0.35""##)
                .count(),
            2
        );
        assert!(svg.contains(">after a gap of more than 5 minutes</text>"));
    }
}
