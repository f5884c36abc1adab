//! The targets table: each target of issue 2, item 5, Trellis against the anchor, with a
//! verdict, and the count of targets met.

use serde_json::Value;

use super::fmt::{Table, ms_opt, num, pct, ratio, speedup, us_opt, verdict};
use super::lg_async_file;
use crate::harness::{Backend, G1_NODE_STEPS};
use crate::langgraph::LangGraph;
use crate::results::{Area, Cold, Size, Throughput, Trellis};

/// The anchor's results, when there are any.
#[derive(Clone, Copy)]
struct Anchor<'a>(Option<&'a LangGraph>);

impl Anchor<'_> {
    /// A number of one of the anchor's result files.
    fn num(self, file: &str, path: &[&str]) -> Option<f64> {
        self.0.and_then(|l| l.num(file, path))
    }

    /// The median of one of the anchor's cases.
    fn median(self, file: &str, path: &[&str]) -> Option<f64> {
        self.0.and_then(|l| l.median_p90(file, path)).map(|m| m.0)
    }
}

/// The targets table, then how many targets were met.
pub(super) fn summary(out: &mut String, t: &Trellis, lg: Option<&LangGraph>) {
    out.push_str("## Targets\n\n");
    let mut tab = Table::new(&[
        "target",
        "Trellis",
        "LangGraph",
        "measured",
        "target",
        "met?",
    ]);
    let lg = Anchor(lg);
    if let Some(g1) = &t.g1 {
        g1_node_step(&mut tab, g1, lg);
    }
    if let Some(g3) = &t.g3 {
        g3_node_step(&mut tab, g3, lg);
    }
    if let Some(g1) = &t.g1 {
        durable_runs(&mut tab, g1, lg);
    }
    if let Some(size) = &t.size {
        bytes_per_run(&mut tab, size, lg);
    }
    if let Some(g2) = &t.g2 {
        fan_out(&mut tab, g2, lg);
    }
    if let Some(conc) = &t.concurrent {
        concurrent_runs(&mut tab, conc, lg);
    }
    if let Some(cold) = &t.cold {
        cold_start(&mut tab, cold, lg);
    }
    tab.render(out);
    verdict_count(out, &tab);
}

/// Node-step overhead in G1, in memory: the median per step.
fn g1_node_step(tab: &mut Table, g1: &Area, lg: Anchor<'_>) {
    let step = |key: &str| {
        g1.get(key)
            .map(|c| c.stats.median_ms / G1_NODE_STEPS as f64 * 1e3)
    };
    let (ours, theirs) = (
        step("memory/async"),
        lg.num("g1", &["cases", "memory/async", "per_step_median_us"]),
    );
    let r = speedup(theirs, ours);
    tab.row(vec![
        "node-step overhead, G1 in memory (median per step)".into(),
        format!("{} µs", us_opt(ours)),
        format!("{} µs (InMemorySaver)", us_opt(theirs)),
        ratio(r),
        "≥ 100× lower".into(),
        verdict(r, 100.0),
    ]);
}

/// Node-step overhead in the G3 chain, in memory: T100/100 and the slope.
fn g3_node_step(tab: &mut Table, g3: &Area, lg: Anchor<'_>) {
    let ours = crate::g3::per_node_us(g3, Backend::Memory.key());
    let t100 = lg.num("g3", &["per_node", "memory", "T100_div_100_us"]);
    let slope = lg.num("g3", &["per_node", "memory", "slope_us"]);
    for (label, o, l) in [
        (
            "node-step overhead, G3 chain of 100 in memory (T100/100)",
            ours.map(|o| o.0),
            t100,
        ),
        (
            "node-step overhead, G3 in memory (slope (T100 − T1)/99)",
            ours.map(|o| o.1),
            slope,
        ),
    ] {
        let r = speedup(l, o);
        tab.row(vec![
            label.into(),
            format!("{} µs", us_opt(o)),
            format!("{} µs (InMemorySaver)", us_opt(l)),
            ratio(r),
            "≥ 100× lower".into(),
            verdict(r, 100.0),
        ]);
    }
}

/// Durable G1 runs on SQLite, FULL and NORMAL, pipelined and per step, with their commits.
fn durable_runs(tab: &mut Table, g1: &Area, lg: Anchor<'_>) {
    for (ours, theirs, label) in [
        (
            "durable_full/async",
            "sqlite/async",
            "FULL, pipelined (Durability::Async) vs durability=\"async\"",
        ),
        (
            "durable_full/sync",
            "sqlite/sync",
            "FULL, per-step (Durability::Sync) vs durability=\"sync\"",
        ),
        (
            "durable_normal/async",
            "sqlite_sync_normal/async",
            "NORMAL, pipelined vs durability=\"async\"",
        ),
        (
            "durable_normal/sync",
            "sqlite_sync_normal/sync",
            "NORMAL, per-step vs durability=\"sync\"",
        ),
    ] {
        let c = g1.get(ours);
        let o = c.map(|c| c.stats.median_ms);
        let l = lg.median("g1", &["cases", theirs]);
        let r = speedup(l, o);
        let commits = c.and_then(|c| c.commits_per_run);
        // The target is for a crash-safe durable run: the default (pipelined) mode is one
        // — events are committed before they are published and a crash resumes from the
        // store. The per-step mode (a commit and fsync after every step) is reported
        // beside LangGraph's durability="sync" for comparison, not as the target.
        let per_step = ours.ends_with("/sync");
        let (target, met) = if per_step {
            ("comparison (per-step mode)".to_owned(), "–".to_owned())
        } else {
            ("≥ 10× faster".to_owned(), verdict(r, 10.0))
        };
        tab.row(vec![
            format!("durable G1 run (SQLite WAL), {label}"),
            format!(
                "{} ms; {} commits, {} fsyncs per run",
                ms_opt(o),
                num(commits.map(|c| c.commits), 2),
                num(commits.map(|c| c.fsyncs), 2)
            ),
            format!("{} ms{}", ms_opt(l), lg_commits(lg.0, theirs)),
            ratio(r),
            target,
            met,
        ]);
    }
}

/// Bytes per durable G1 run on disk.
fn bytes_per_run(tab: &mut Table, size: &[Size], lg: Anchor<'_>) {
    let o = size
        .iter()
        .find(|s| s.key == "durable_full/async")
        .map(|s| s.bytes_per_run);
    let l = lg.num("resume", &["size", "async", "bytes_per_run_file"]);
    let r = speedup(l, o);
    tab.row(vec![
        "bytes per G1 run on disk (after VACUUM)".into(),
        format!("{} B", num(o, 0)),
        format!("{} B (SqliteSaver, durability=\"async\")", num(l, 0)),
        ratio(r).replace('×', "× smaller"),
        "≤ 1/10".into(),
        verdict(r, 10.0),
    ]);
}

/// Fan-out to 1000 nodes and a collector, per backend.
fn fan_out(tab: &mut Table, g2: &Area, lg: Anchor<'_>) {
    for (ours, theirs) in [
        ("none", "none"),
        ("memory", "memory"),
        ("durable_full", "sqlite/async"),
    ] {
        let o = g2.get(&format!("N=1000/{ours}")).map(|c| c.stats.median_ms);
        let l = lg.median("g2", &["cases", &format!("N=1000/{theirs}")]);
        let r = speedup(l, o);
        tab.row(vec![
            format!("fan-out N = 1000 + collector, {ours} vs {theirs}"),
            format!("{} ms", ms_opt(o)),
            format!("{} ms", ms_opt(l)),
            ratio(r),
            "≥ 50× faster".into(),
            verdict(r, 50.0),
        ]);
    }
}

/// 100 concurrent G1 runs with sleeps: throughput as a share of the ideal.
fn concurrent_runs(tab: &mut Table, conc: &[Throughput], lg: Anchor<'_>) {
    for th in conc
        .iter()
        .filter(|c| c.sleep_us > 0 && !c.key.starts_with("sleep_only"))
    {
        let eff = th.ideal_runs_per_s.map(|i| th.runs_per_s / i);
        let durable = th.key.starts_with("durable");
        let target = if durable { 0.5 } else { 0.9 };
        let lg_file = lg_async_file(&th.key);
        let lg_eff = lg_file.and_then(|f| lg.num(f, &["efficiency_vs_ideal"]));
        let lg_rps = lg_file.and_then(|f| lg.num(f, &["throughput_runs_per_s"]));
        tab.row(vec![
            format!(
                "100 concurrent G1 runs, 10 ms sleeps, {}",
                th.key.trim_end_matches("/sleep=10000us")
            ),
            format!("{:.0} runs/s", th.runs_per_s),
            format!(
                "{} runs/s = {} ({})",
                num(lg_rps, 1),
                pct(lg_eff),
                lg_file.unwrap_or("–")
            ),
            format!("{} of ideal {}", pct(eff), num(th.ideal_runs_per_s, 0)),
            format!("≥ {:.0} % of ideal", target * 100.0),
            verdict(eff, target),
        ]);
    }
}

/// The CLI's cold start to a resumed run.
fn cold_start(tab: &mut Table, cold: &Cold, lg: Anchor<'_>) {
    let o = cold.resume.as_ref().map(|s| s.median_ms);
    let l = lg.median("cold", &["cases", "cold_cli_sqlite_resume_G1", "wall"]);
    let r = speedup(l, o);
    tab.row(vec![
        "CLI cold start to a resumed run (wall, spawn → exit)".into(),
        match (&cold.not_measured, o) {
            (Some(why), _) => format!("not measured: {why}"),
            (None, o) => format!("{} ms", ms_opt(o)),
        },
        format!("{} ms (cold_cli_sqlite_resume_G1)", ms_opt(l)),
        ratio(r),
        "≥ 20× faster".into(),
        verdict(r, 20.0),
    ]);
}

/// The line under the table: targets met, missed and not measured.
fn verdict_count(out: &mut String, tab: &Table) {
    let verdicts: Vec<&String> = tab
        .column(5)
        .into_iter()
        .filter(|v| v.as_str() != "–")
        .collect();
    let met = verdicts.iter().filter(|v| v.as_str() == "met").count();
    let missed = verdicts.iter().filter(|v| v.contains("missed")).count();
    out.push_str(&format!(
        "{met} of {} target rows met, {missed} missed, {} not measured (rows marked – are comparisons, not \
         targets). The issue quotes LangGraph figures \
         (about 10 % and 1 % of the ideal throughput, 50.6 KB per G1 run) from the anchor's stored pass-2 \
         run, which its README says ran under heavy load; the LangGraph numbers above were measured in \
         this invocation.\n\n",
        verdicts.len(),
        verdicts.len() - met - missed
    ));
}

/// The anchor's checkpointer transactions per G1 run (from probe_commits.json).
fn lg_commits(lg: Option<&LangGraph>, case: &str) -> String {
    let durability = case.rsplit('/').next().unwrap_or("async");
    let calls = lg.and_then(|l| {
        l.value(
            "probe_commits",
            &["calls_per_run", &format!("G1/{durability}")],
        )
    });
    let total: Option<f64> = calls
        .and_then(Value::as_object)
        .map(|o| o.values().filter_map(Value::as_f64).sum());
    match total {
        Some(n) if case.starts_with("sqlite/") => {
            format!("; {n:.0} commits, {n:.0} fsyncs per run")
        }
        Some(n) => format!("; {n:.0} commits, no fsync, per run"),
        None => String::new(),
    }
}
