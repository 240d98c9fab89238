//! Small SVG line/point charts for the benchmark's figures (no font metrics needed: text is
//! placed by anchor, so the layout does not depend on a font backend).

use std::fmt::Write;

/// One series of a chart.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Join the points with a line (otherwise markers only).
    pub line: bool,
}

/// A chart: title, axis labels, log or linear axes.
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The series.
    pub series: Vec<Series>,
}

const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
const W: f64 = 860.0;
const H: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 250.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;

/// Tick positions: 1-2-5 steps on a linear axis, 1-2-5 per decade on a log axis.
fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let mut t = Vec::new();
        let mut dec = 10f64.powf(lo.log10().floor());
        while dec <= hi * 1.0001 {
            for m in [1.0, 2.0, 5.0] {
                let v = dec * m;
                if v >= lo * 0.9999 && v <= hi * 1.0001 {
                    t.push(v);
                }
            }
            dec *= 10.0;
        }
        t
    } else {
        let raw = (hi - lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let mut v = (lo / step).ceil() * step;
        let mut t = Vec::new();
        while v <= hi + step * 1e-9 {
            t.push(v);
            v += step;
        }
        t
    }
}

fn label(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1e4 || v.abs() < 1e-3 {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Range of the data with a 5% margin (in log space for log axes).
fn range(vals: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let v: Vec<f64> = vals
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .collect();
    let (mut lo, mut hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        let (l, h) = (lo.log10(), hi.log10());
        let pad = ((h - l) * 0.05).max(0.05);
        return (10f64.powf(l - pad), 10f64.powf(h + pad));
    }
    if hi - lo < 1e-12 {
        lo -= 0.5;
        hi += 0.5;
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

impl Chart {
    /// Renders the chart as a standalone SVG document.
    pub fn render(&self) -> String {
        let all = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let (x0, x1) = range(all().map(|p| p.0), self.log_x);
        let (y0, y1) = range(all().map(|p| p.1), self.log_y);
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let sx = |x: f64| {
            let t = if self.log_x {
                (x.log10() - x0.log10()) / (x1.log10() - x0.log10())
            } else {
                (x - x0) / (x1 - x0)
            };
            LEFT + t * pw
        };
        let sy = |y: f64| {
            let t = if self.log_y {
                (y.log10() - y0.log10()) / (y1.log10() - y0.log10())
            } else {
                (y - y0) / (y1 - y0)
            };
            TOP + (1.0 - t) * ph
        };
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + pw / 2.0,
            escape(&self.title)
        );
        for t in ticks(x0, x1, self.log_x) {
            let x = sx(t);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                label(t)
            );
        }
        for t in ticks(y0, y1, self.log_y) {
            let y = sy(t);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                label(t)
            );
        }
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + pw / 2.0,
            H - 12.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + ph / 2.0,
            escape(&self.y_label)
        );
        for (k, ser) in self.series.iter().enumerate() {
            let c = COLORS[k % COLORS.len()];
            let pts: Vec<(f64, f64)> = ser
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .filter(|p| (!self.log_x || p.0 > 0.0) && (!self.log_y || p.1 > 0.0))
                .map(|&(x, y)| (sx(x), sy(y)))
                .collect();
            if ser.line && pts.len() > 1 {
                let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
                    path.join(" ")
                );
            }
            for (x, y) in &pts {
                let _ = writeln!(s, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}"/>"#);
            }
            let ly = TOP + 10.0 + 18.0 * k as f64;
            let lx = LEFT + pw + 14.0;
            let _ = writeln!(
                s,
                r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{c}" stroke-width="2"/><circle cx="{:.1}" cy="{ly}" r="3.5" fill="{c}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                lx + 22.0,
                lx + 11.0,
                lx + 28.0,
                ly + 4.0,
                escape(&ser.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}
