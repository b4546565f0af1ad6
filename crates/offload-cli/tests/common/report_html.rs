//! The HTML report read back: its per-flow TCP table
//! (`<tr data-flow="ID">`, each value in `<b data-k="PATH">TEXT</b>`)
//! against the same run's `--json` (`flows[].tcp`), so a figure the JSON
//! has and the page lacks, or shows otherwise, fails a test.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The TCP table's values by flow id and JSON path.
pub fn tcp_cells(html: &str) -> BTreeMap<u64, BTreeMap<String, String>> {
    let mut m: BTreeMap<u64, BTreeMap<String, String>> = BTreeMap::new();
    for row in html.split("<tr data-flow=\"").skip(1) {
        let Some((id, rest)) = row.split_once('"') else {
            continue;
        };
        let id: u64 = id.parse().expect("a flow id");
        let row = rest.split("</tr>").next().unwrap_or("");
        let cells = m.entry(id).or_default();
        for v in row.split("<b data-k=\"").skip(1) {
            let (k, rest) = v.split_once("\">").expect("data-k=\"...\">");
            let text = rest.split("</b>").next().unwrap_or("");
            assert!(
                cells.insert(k.to_string(), text.to_string()).is_none(),
                "flow {id}: {k} twice"
            );
        }
    }
    m
}

/// Every leaf of each TCP flow's `tcp` record in `json` shown in its row
/// of `html`'s TCP table: integers and strings as in the JSON, numbers
/// with a fraction within 0.0005 (shown with three decimals), null as
/// "-", booleans as "yes"/"no"; Wireshark's flags and the first frames
/// may leave out a zero or null. Returns how many non-zero values were
/// found, per JSON path.
pub fn tcp_table_matches_json(html: &str, json: &Value, what: &Path) -> BTreeMap<String, u64> {
    let cells = tcp_cells(html);
    let mut nonzero = BTreeMap::new();
    let mut flows = 0;
    for f in json["flows"].as_array().expect("flows[]") {
        let t = &f["tcp"];
        if t.is_null() {
            continue;
        }
        flows += 1;
        let id = f["id"].as_u64().expect("flows[].id");
        let row = cells
            .get(&id)
            .unwrap_or_else(|| panic!("{}: flow {id} has no TCP row", what.display()));
        let mut leaves = Vec::new();
        walk(t, String::new(), &mut leaves);
        assert!(
            leaves.len() > 20,
            "{}: {} TCP figures",
            what.display(),
            leaves.len()
        );
        for (path, v) in leaves {
            let optional = path.starts_with("wireshark.") || path.starts_with("first_frames.");
            let zero = v.is_null() || v.as_f64() == Some(0.0);
            let shown = row.get(&path);
            let ctx = format!(
                "{} flow {id} {path}: json {v}, html {shown:?}",
                what.display()
            );
            let Some(shown) = shown else {
                assert!(optional && zero, "{ctx}");
                continue;
            };
            match &v {
                Value::Null => assert_eq!(shown, "-", "{ctx}"),
                Value::Bool(b) => assert_eq!(shown, if *b { "yes" } else { "no" }, "{ctx}"),
                Value::String(s) => assert_eq!(shown, s, "{ctx}"),
                Value::Number(n) if n.is_f64() => {
                    let x: f64 = shown.parse().unwrap_or(f64::NAN);
                    assert!((x - n.as_f64().unwrap()).abs() <= 0.0005 + 1e-9, "{ctx}");
                }
                Value::Number(n) => assert_eq!(shown, &n.to_string(), "{ctx}"),
                _ => panic!("{ctx}: not a leaf"),
            }
            if !zero && !matches!(v, Value::Bool(_) | Value::String(_)) {
                *nonzero.entry(path).or_insert(0) += 1;
            }
        }
    }
    assert!(flows > 0, "{}: no TCP flow", what.display());
    nonzero
}

fn walk(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, p, out);
            }
        }
        _ => out.push((path, v.clone())),
    }
}

/// `offload analyze PATH --json --html` (into `dir`): the report's TCP
/// table checked against the JSON ([`tcp_table_matches_json`]).
pub fn check_report(path: &Path, dir: &Path) -> BTreeMap<String, u64> {
    let html = dir.join(format!(
        "{}.html",
        path.file_name().unwrap().to_string_lossy()
    ));
    let out = super::offload(&[
        "analyze",
        path.to_str().unwrap(),
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    let json = super::json_of(&super::succeeded(out, "offload analyze --json --html"));
    let text = std::fs::read_to_string(&html).unwrap();
    tcp_table_matches_json(&text, &json, path)
}
