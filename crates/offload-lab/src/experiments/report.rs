//! The report of an experiment for people: a text report (tables, paired
//! differences, findings, details in words, never JSON) and a
//! self-contained HTML page with an inline SVG bar chart per metric.

use offload_report::html::escape as html_escape;
use offload_report::stats::mean_ci95;
use serde_json::Value;

use super::{ArmReport, Report, METRICS};

/// A number as the tables show it: no decimals from 100 up, two below.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// A JSON value in words: scalars plainly, arrays comma-separated,
/// objects as `key=value` pairs (nested keys joined with dots).
pub fn words(v: &Value) -> String {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, x, out);
                }
            }
            other => {
                let s = scalar(other);
                out.push(if prefix.is_empty() {
                    s
                } else {
                    format!("{prefix}={s}")
                });
            }
        }
    }
    fn scalar(v: &Value) -> String {
        match v {
            Value::Null => "-".into(),
            Value::Bool(b) => if *b { "on" } else { "off" }.into(),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => u.to_string(),
                (_, Some(i), _) => i.to_string(),
                (_, _, Some(f)) => num(f),
                _ => n.to_string(),
            },
            Value::String(s) => s.clone(),
            Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(","),
            Value::Object(_) => words(v),
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out);
    out.join(" ")
}

fn groups(r: &Report) -> Vec<&'static str> {
    let mut g: Vec<&'static str> = Vec::new();
    for a in &r.arms {
        if !g.contains(&a.group) {
            g.push(a.group);
        }
    }
    g
}

fn table(arms: &[&ArmReport]) -> String {
    let shown: Vec<_> = METRICS
        .iter()
        .filter(|m| arms.iter().any(|a| a.means.contains_key(m.key)))
        .collect();
    let width = arms.iter().map(|a| a.name.len()).max().unwrap_or(3).max(3) + 2;
    let mut s = format!("{:<width$}", "arm");
    for m in &shown {
        s.push_str(&format!(" {:>12}", m.short));
    }
    s.push_str(&format!(" {:>5}\n", "runs"));
    for a in arms {
        s.push_str(&format!("{:<width$}", a.name));
        for m in &shown {
            s.push_str(&format!(
                " {:>12}",
                a.means.get(m.key).map_or("-".into(), |v| num(*v))
            ));
        }
        s.push_str(&format!(" {:>5}\n", a.runs.len()));
    }
    s
}

/// The text report.
pub fn render_text(r: &Report) -> String {
    let mut s = format!(
        "scenario {}: {}\nsource: {}\n",
        r.scenario, r.claim, r.source
    );
    for g in groups(r) {
        let arms: Vec<&ArmReport> = r.arms.iter().filter(|a| a.group == g).collect();
        if arms.iter().all(|a| a.runs.is_empty()) {
            continue;
        }
        s.push('\n');
        if !g.is_empty() {
            s.push_str(&format!("{g}:\n"));
        }
        s.push_str(&table(&arms));
    }
    if r.arms.iter().all(|a| a.runs.is_empty()) {
        s.push_str("\nno pair of runs completed\n");
    }
    s.push_str("\nsettings read back:\n");
    for a in &r.arms {
        let all: Vec<String> = a
            .settings
            .iter()
            .map(|(k, v)| match v {
                Value::Object(_) => format!("{k}: ({})", words(v)),
                _ => format!("{k}={}", words(v)),
            })
            .collect();
        s.push_str(&format!("  {}: {}\n", a.name, all.join(" ")));
    }
    for c in &r.comparison {
        let left_out = if c.left_out_pairs.is_empty() {
            String::new()
        } else {
            let runs: Vec<String> = c
                .left_out_pairs
                .iter()
                .map(|i| (i + 1).to_string())
                .collect();
            format!(
                "; run {} left out: no transaction completed",
                runs.join(", ")
            )
        };
        s.push_str(&format!(
            "\n{} - {} (paired, {} pairs, 95% t interval{left_out}):\n",
            c.b, c.a, c.pairs
        ));
        for m in METRICS {
            let Some(d) = c.difference_b_minus_a.get(m.key) else {
                continue;
            };
            let rel = if d.relative_percent.is_finite() {
                format!("{:+.1}%", d.relative_percent)
            } else {
                "-".into()
            };
            s.push_str(&format!(
                "  {:<34} {:>10} [{}, {}]  {rel}  {}\n",
                m.key,
                num(d.mean),
                num(d.ci95[0]),
                num(d.ci95[1]),
                if d.significant {
                    "interval excludes 0"
                } else {
                    "interval includes 0"
                }
            ));
        }
    }
    if !r.findings.is_empty() {
        s.push_str("\nfindings:\n");
        for x in &r.findings {
            s.push_str(&format!("  {}. [{}] {}\n", x.rank, x.severity, x.title));
            if let Some(fl) = &x.flow {
                s.push_str(&format!("      flow: {}\n", fl.description));
            }
            s.push_str(&format!("      {}\n", x.detail));
            if let Some(fix) = &x.fix {
                s.push_str(&format!("      fix: {fix}\n"));
            }
        }
    }
    for sec in &r.sections {
        if sec.lines.is_empty() {
            continue;
        }
        s.push_str(&format!("\n{}:\n", sec.title));
        for l in &sec.lines {
            s.push_str(&format!("  {l}\n"));
        }
    }
    s.push_str("\nwhat this setup cannot reproduce:\n");
    for x in r.limits {
        s.push_str(&format!("  - {x}\n"));
    }
    s.push_str(&format!(
        "\n{} runs per arm of {} s, {:.0} s in all{}\n",
        r.runs_per_arm,
        r.run_seconds,
        r.elapsed_seconds,
        if r.interrupted {
            " (interrupted: completed pairs only)"
        } else {
            ""
        }
    ));
    s
}

/// One arm's bar in a chart.
struct Bar {
    name: String,
    mean: f64,
    ci: Option<(f64, f64)>,
    n: usize,
}

/// Mean and 95% t interval of one metric over an arm's runs.
fn arm_interval(arm: &ArmReport, metric: &str) -> Option<Bar> {
    let v: Vec<f64> = arm.runs.iter().filter_map(|r| r.get(metric)).collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let ci = (n >= 2).then(|| mean_ci95(&v)).flatten();
    Some(Bar {
        name: arm.name.clone(),
        mean,
        ci,
        n,
    })
}

/// Pixels a label of `chars` characters needs at 12 px sans-serif (an
/// upper bound: 7.5 px per character), so nothing is clipped.
fn text_width(chars: usize) -> f64 {
    7.5 * chars as f64 + 8.0
}

/// One metric as an inline SVG bar chart: a bar per arm at its mean, a
/// whisker for its 95% CI over the runs. The label column and the value
/// column are as wide as their longest text.
fn svg_bars(title: &str, rows: &[Bar]) -> String {
    const PLOT: f64 = 400.0;
    const ROW: f64 = 26.0;
    let label_w = rows
        .iter()
        .map(|b| text_width(b.name.chars().count()))
        .fold(60.0f64, f64::max);
    let value = |b: &Bar| match b.ci {
        Some((lo, hi)) => format!("{} [{}, {}] n={}", num(b.mean), num(lo), num(hi), b.n),
        None => format!("{} n={}", num(b.mean), b.n),
    };
    let value_w = rows
        .iter()
        .map(|b| text_width(value(b).chars().count()))
        .fold(0.0f64, f64::max);
    let top = rows
        .iter()
        .map(|b| b.ci.map_or(b.mean, |c| c.1).max(b.mean))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let x = |v: f64| label_w + (v.max(0.0) / top) * PLOT;
    let width = (label_w + PLOT + value_w + 8.0).max(text_width(title.chars().count()));
    let height = ROW * rows.len() as f64 + 24.0;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height}\" \
         viewBox=\"0 0 {width:.0} {height}\" role=\"img\" aria-label=\"{t}\">\
         <text x=\"0\" y=\"14\" font-size=\"13\" font-weight=\"bold\">{t}</text>",
        t = html_escape(title)
    );
    for (i, b) in rows.iter().enumerate() {
        let y = 22.0 + ROW * i as f64;
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{ty}\" font-size=\"12\">{name}</text>\
             <rect x=\"{label_w:.1}\" y=\"{y}\" width=\"{bw:.1}\" height=\"{bh}\" fill=\"#4a7fb5\"/>",
            ty = y + 14.0,
            name = html_escape(&b.name),
            bw = x(b.mean) - label_w,
            bh = ROW - 8.0
        ));
        if let Some((lo, hi)) = b.ci {
            let cy = y + (ROW - 8.0) / 2.0;
            svg.push_str(&format!(
                "<line x1=\"{a:.1}\" x2=\"{c:.1}\" y1=\"{cy}\" y2=\"{cy}\" stroke=\"#000\"/>\
                 <line x1=\"{a:.1}\" x2=\"{a:.1}\" y1=\"{t}\" y2=\"{u}\" stroke=\"#000\"/>\
                 <line x1=\"{c:.1}\" x2=\"{c:.1}\" y1=\"{t}\" y2=\"{u}\" stroke=\"#000\"/>",
                a = x(lo),
                c = x(hi),
                t = cy - 5.0,
                u = cy + 5.0
            ));
        }
        svg.push_str(&format!(
            "<text x=\"{tx:.1}\" y=\"{ty}\" font-size=\"11\">{label}</text>",
            tx = label_w + PLOT + 6.0,
            ty = y + 14.0,
            label = html_escape(&value(b))
        ));
    }
    svg.push_str("</svg>");
    svg
}

/// A self-contained page: the claim, a bar chart per metric with per-arm
/// 95% CIs (inline SVG, nothing fetched), settings read back, limits, the
/// text report and the JSON.
pub fn render_html(r: &Report) -> String {
    let mut charts = String::new();
    for g in groups(r) {
        let arms: Vec<&ArmReport> = r.arms.iter().filter(|a| a.group == g).collect();
        for m in METRICS {
            let rows: Vec<Bar> = arms.iter().filter_map(|a| arm_interval(a, m.key)).collect();
            if !rows.is_empty() {
                let title = if g.is_empty() {
                    format!("{}: {}", m.key, m.meaning)
                } else {
                    format!("{g}, {}: {}", m.key, m.meaning)
                };
                charts.push_str(&format!("<figure>{}</figure>", svg_bars(&title, &rows)));
            }
        }
    }
    let mut settings = String::new();
    for a in &r.arms {
        for (k, v) in &a.settings {
            settings.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                html_escape(&a.name),
                html_escape(k),
                html_escape(&words(v))
            ));
        }
    }
    let limits: String = r
        .limits
        .iter()
        .map(|x| format!("<li>{}</li>", html_escape(x)))
        .collect();
    format!(
        "<!doctype html><html lang=en><meta charset=utf-8><title>offload lab {name}</title>\
         <style>body{{font-family:sans-serif;max-width:80em;margin:2em auto}}pre{{background:#f4f4f4;padding:1em;overflow:auto}}\
         td{{padding:.2em .6em;vertical-align:top}}figure{{margin:1em 0;overflow-x:auto}}svg{{max-width:none}}</style>\
         <h1>offload lab: {name}</h1><p><b>Claim:</b> {claim}</p><p><b>Source:</b> {source}</p>\
         <h2>Figures</h2><p>Bars: mean over each arm's runs; whiskers: 95% t interval over those runs \
         (paired differences are in the report below).</p>{charts}\
         <h2>Settings read back</h2><table>{settings}</table>\
         <h2>What this setup cannot reproduce</h2><ul>{limits}</ul>\
         <h2>Report</h2><pre>{report}</pre><h2>JSON</h2><pre>{json}</pre></html>",
        name = html_escape(r.scenario),
        claim = html_escape(r.claim),
        source = html_escape(r.source),
        report = html_escape(&render_text(r)),
        json = html_escape(&serde_json::to_string_pretty(r).unwrap_or_default())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_never_prints_json() {
        let v = serde_json::json!({"client": {"gro_max_size": 185000, "rx-gro": true}, "pin": [0, 1], "x": null});
        let w = words(&v);
        assert_eq!(w, "client.gro_max_size=185000 client.rx-gro=on pin=0,1 x=-");
        assert!(!w.contains('{') && !w.contains('"'));
    }

    #[test]
    fn long_labels_fit_the_chart() {
        let rows = [Bar {
            name: "reuseport-2-threads-batched-gro".into(),
            mean: 5.0,
            ci: Some((4.0, 6.0)),
            n: 3,
        }];
        let svg = svg_bars("packets_per_sec", &rows);
        // The bar starts after the label's width.
        let rect_x: f64 = svg
            .split("<rect x=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse().ok())
            .unwrap();
        assert!(rect_x >= text_width(rows[0].name.len()), "{svg}");
    }
}
