//! Markdown tables and number formatting.

/// A markdown table.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells are left empty).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The cells of column `i` (rows without it are skipped).
    pub fn column(&self, i: usize) -> Vec<&String> {
        self.rows.iter().filter_map(|r| r.get(i)).collect()
    }

    /// Renders the table followed by a blank line.
    pub fn render(&self, out: &mut String) {
        let line = |cells: &[String]| {
            let padded: Vec<String> = (0..self.header.len())
                .map(|i| {
                    cells
                        .get(i)
                        .map_or(String::new(), |c| c.replace('|', "\\|"))
                })
                .collect();
            format!("| {} |\n", padded.join(" | "))
        };
        out.push_str(&line(&self.header));
        out.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out.push('\n');
    }
}

/// A duration in milliseconds with precision suited to its size.
pub fn ms(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x < 1.0 {
        format!("{x:.3}")
    } else if x < 100.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

/// An optional duration in milliseconds.
pub fn ms_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), ms)
}

/// A duration in microseconds.
pub fn us(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 1000.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// An optional duration in microseconds.
pub fn us_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), us)
}

/// A plain number with `digits` decimals, `–` when absent.
pub fn num(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "–".into(),
    }
}

/// A ratio like `123×` / `4.5×`.
pub fn ratio(x: Option<f64>) -> String {
    match x {
        Some(r) if r.is_finite() && r >= 100.0 => format!("{r:.0}×"),
        Some(r) if r.is_finite() && r >= 10.0 => format!("{r:.1}×"),
        Some(r) if r.is_finite() => format!("{r:.2}×"),
        _ => "–".into(),
    }
}

/// A fraction as a percentage.
pub fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:.1} %", v * 100.0),
        _ => "–".into(),
    }
}

/// `baseline / ours` when both exist and ours is positive.
pub fn speedup(baseline: Option<f64>, ours: Option<f64>) -> Option<f64> {
    match (baseline, ours) {
        (Some(b), Some(o)) if o > 0.0 => Some(b / o),
        _ => None,
    }
}

/// "met" / "**missed**" / "not measured" for `value >= target`.
pub fn verdict(value: Option<f64>, target: f64) -> String {
    match value {
        Some(v) if v.is_finite() && v >= target => "met".into(),
        Some(v) if v.is_finite() => "**missed**".into(),
        _ => "not measured".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_table() {
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["1".into(), "x|y".into()]);
        let mut s = String::new();
        t.render(&mut s);
        assert_eq!(s, "| a | b |\n|---|---|\n| 1 | x\\|y |\n\n");
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(Some(120.0), 100.0), "met");
        assert_eq!(verdict(Some(99.9), 100.0), "**missed**");
        assert_eq!(verdict(None, 100.0), "not measured");
        assert_eq!(ratio(speedup(Some(10.0), Some(0.1))), "100×");
    }
}
