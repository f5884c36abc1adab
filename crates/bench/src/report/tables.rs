//! One detail table per area: every Trellis case next to the matching anchor case.

use super::fmt::{Table, ms, ms_opt, num, pct, ratio, speedup, us, us_opt};
use super::{lg_async_file, lg_backend};
use crate::harness::G1_NODE_STEPS;
use crate::langgraph::LangGraph;
use crate::results::{Area, Commits, Trellis};

/// Renders every area that was measured.
pub fn all(out: &mut String, t: &Trellis, lg: Option<&LangGraph>) {
    out.push_str("## Details\n\n");
    if let Some(a) = &t.g1 {
        g1(out, a, lg);
    }
    if let Some(a) = &t.g2 {
        g2(out, a, lg);
    }
    if let Some(a) = &t.g3 {
        g3(out, a, lg);
    }
    concurrent(out, t, lg);
    size(out, t, lg);
    resume(out, t, lg);
    cold(out, t, lg);
    floor(out, lg);
}

fn loads(out: &mut String, what: &str, a: &Area, lg: Option<&LangGraph>, file: &str) {
    let theirs = lg
        .and_then(|l| l.load_of(file))
        .map_or("–".into(), |(s, e)| format!("{s:.2} → {e:.2}"));
    out.push_str(&format!(
        "### {what}\n\n1-minute load: Trellis {:.2} → {:.2}, LangGraph {theirs}.\n\n",
        a.load_start, a.load_end
    ));
}

fn lg_stats(lg: Option<&LangGraph>, file: &str, path: &[&str]) -> (Option<f64>, Option<f64>) {
    lg.and_then(|l| l.median_p90(file, path))
        .map_or((None, None), |(m, p)| (Some(m), Some(p)))
}

fn g1(out: &mut String, a: &Area, lg: Option<&LangGraph>) {
    loads(
        out,
        "G1 feature workflow with retries (9 node steps per run)",
        a,
        lg,
        "g1",
    );
    let mut t = Table::new(&[
        "Trellis case",
        "runs",
        "median ms",
        "p90 ms",
        "CPU ms/run",
        "µs/step (median / p90)",
        "commits / fsyncs per run",
        "LangGraph case",
        "median ms",
        "p90 ms",
        "CPU ms/run",
        "µs/step (median)",
        "× faster (median)",
    ]);
    for c in &a.cases {
        let theirs = match c.key.as_str() {
            "durable_full/async" => "sqlite/async",
            "durable_full/sync" => "sqlite/sync",
            "durable_normal/async" => "sqlite_sync_normal/async",
            "durable_normal/sync" => "sqlite_sync_normal/sync",
            k => k,
        };
        let (m, p) = lg_stats(lg, "g1", &["cases", theirs]);
        let cpu = lg.and_then(|l| l.num("g1", &["cases", theirs, "cpu_mean_ms"]));
        let step = |x: f64| x / G1_NODE_STEPS as f64 * 1e3;
        t.row(vec![
            c.key.clone(),
            c.stats.n.to_string(),
            ms(c.stats.median_ms),
            ms(c.stats.p90_ms),
            ms_opt(c.stats.cpu_mean_ms),
            format!(
                "{} / {}",
                us(step(c.stats.median_ms)),
                us(step(c.stats.p90_ms))
            ),
            Commits::show(c.commits_per_run, 2),
            theirs.to_owned(),
            ms_opt(m),
            ms_opt(p),
            ms_opt(cpu),
            us_opt(m.map(step)),
            ratio(speedup(m, Some(c.stats.median_ms))),
        ]);
    }
    t.render(out);
}

fn g2(out: &mut String, a: &Area, lg: Option<&LangGraph>) {
    per_unit(
        out,
        a,
        lg,
        ("G2 fan-out N workers + collector", "g2", "N=", "µs/worker"),
    );
}

fn g3(out: &mut String, a: &Area, lg: Option<&LangGraph>) {
    per_unit(out, a, lg, ("G3 linear chain", "g3", "len=", "µs/node"));
    let mut t = Table::new(&[
        "per node",
        "Trellis T100/100 µs",
        "Trellis slope µs",
        "LangGraph T100/100 µs",
        "LangGraph slope µs",
        "× (T100/100)",
        "× (slope)",
    ]);
    for backend in ["none", "memory", "durable_full"] {
        let ours = crate::g3::per_node_us(a, backend);
        let mode = lg_backend(backend);
        let l = |k: &str| lg.and_then(|l| l.num("g3", &["per_node", mode, k]));
        let (lt, ls) = (l("T100_div_100_us"), l("slope_us"));
        t.row(vec![
            format!("{backend} vs {mode}"),
            us_opt(ours.map(|o| o.0)),
            us_opt(ours.map(|o| o.1)),
            us_opt(lt),
            us_opt(ls),
            ratio(speedup(lt, ours.map(|o| o.0))),
            ratio(speedup(ls, ours.map(|o| o.1))),
        ]);
    }
    t.render(out);
}

/// A table of cases keyed `<prefix><units>/<backend>` (G2: workers, G3: nodes), with the
/// cost per unit on both sides.
fn per_unit(
    out: &mut String,
    a: &Area,
    lg: Option<&LangGraph>,
    (title, area, prefix, unit): (&str, &str, &str, &str),
) {
    loads(out, title, a, lg, area);
    let mut t = Table::new(&[
        "Trellis case",
        "runs",
        "median ms",
        "p90 ms",
        "CPU ms/run",
        unit,
        "commits / fsyncs per run",
        "LangGraph case",
        "median ms",
        "p90 ms",
        "CPU ms/run",
        unit,
        "× faster (median)",
    ]);
    for c in &a.cases {
        let (n_text, backend) = c
            .key
            .trim_start_matches(prefix)
            .split_once('/')
            .unwrap_or(("0", ""));
        let n: f64 = n_text.parse().unwrap_or(f64::NAN);
        let theirs = format!("{prefix}{n_text}/{}", lg_backend(backend));
        let (m, p) = lg_stats(lg, area, &["cases", &theirs]);
        let cpu = lg.and_then(|l| l.num(area, &["cases", &theirs, "cpu_mean_ms"]));
        t.row(vec![
            c.key.clone(),
            c.stats.n.to_string(),
            ms(c.stats.median_ms),
            ms(c.stats.p90_ms),
            ms_opt(c.stats.cpu_mean_ms),
            us(c.stats.median_ms / n * 1e3),
            Commits::show(c.commits_per_run, 2),
            theirs,
            ms_opt(m),
            ms_opt(p),
            ms_opt(cpu),
            us_opt(m.map(|m| m / n * 1e3)),
            ratio(speedup(m, Some(c.stats.median_ms))),
        ]);
    }
    t.render(out);
}

fn concurrent(out: &mut String, tr: &Trellis, lg: Option<&LangGraph>) {
    let Some(conc) = &tr.concurrent else { return };
    out.push_str("### 100 concurrent G1 runs (each node sleeps 10 ms; ideal 1111 runs/s)\n\n");
    out.push_str("One process per configuration on each side (peak RSS attributable).\n\n");
    let mut t = Table::new(&[
        "Trellis config",
        "runs",
        "runs/s",
        "of ideal",
        "of floor",
        "CPU ms/run",
        "run latency median / p90 ms",
        "RSS before / peak MiB",
        "commits / fsyncs per run",
        "load",
        "LangGraph config",
        "runs/s",
        "of ideal",
        "CPU ms/run",
        "run latency median / p90 ms",
        "RSS before / peak MiB",
        "× runs/s",
    ]);
    let floor = conc
        .iter()
        .find(|c| c.key.starts_with("sleep_only"))
        .map(|c| c.runs_per_s);
    for th in conc {
        let file = lg_async_file(&th.key);
        let n = |k: &str| file.and_then(|f| lg.and_then(|l| l.num(f, &[k])));
        let lat = file.and_then(|f| lg.and_then(|l| l.median_p90(f, &["per_run_latency"])));
        let lg_rps = n("throughput_runs_per_s");
        t.row(vec![
            th.key.clone(),
            th.runs.to_string(),
            format!("{:.1}", th.runs_per_s),
            pct(th.ideal_runs_per_s.map(|i| th.runs_per_s / i)),
            pct(floor.filter(|_| th.sleep_us > 0).map(|f| th.runs_per_s / f)),
            ms(th.cpu_ms_per_run),
            format!("{} / {}", ms(th.latency.median_ms), ms(th.latency.p90_ms)),
            format!("{:.1} / {:.1}", th.rss_before_mib, th.peak_rss_mib),
            Commits::show(th.commits_per_run, 3),
            format!("{:.2}→{:.2}", th.load[0], th.load[1]),
            file.unwrap_or("–").to_owned(),
            num(lg_rps, 1),
            pct(n("efficiency_vs_ideal")),
            num(n("cpu_ms_per_run"), 2),
            lat.map_or("–".into(), |(m, p)| format!("{} / {}", ms(m), ms(p))),
            format!(
                "{} / {}",
                num(n("rss_before_mb"), 1),
                num(n("peak_rss_mb"), 1)
            ),
            ratio(speedup(Some(th.runs_per_s), lg_rps)),
        ]);
    }
    t.render(out);
}

fn size(out: &mut String, tr: &Trellis, lg: Option<&LangGraph>) {
    let Some(size) = &tr.size else { return };
    out.push_str("### Bytes per G1 run on disk\n\n");
    let mut t = Table::new(&[
        "Trellis case",
        "runs",
        "file after VACUUM, B",
        "B/run",
        "B/run net of empty schema",
        "event blob B/run",
        "events/run",
        "commits / fsyncs per run",
        "LangGraph B/run (async / exit)",
        "LangGraph raw blob B/run",
        "× smaller",
    ]);
    let l = |d: &str, k: &str| lg.and_then(|l| l.num("resume", &["size", d, k]));
    for s in size {
        let theirs = l("async", "bytes_per_run_file");
        t.row(vec![
            s.key.clone(),
            s.runs.to_string(),
            s.file_bytes.to_string(),
            format!("{:.0}", s.bytes_per_run),
            format!("{:.0}", s.bytes_per_run_net),
            format!("{:.0}", s.blob_bytes_per_run),
            format!("{:.1}", s.events_per_run),
            Commits::show(Some(s.commits_per_run), 2),
            format!(
                "{} / {}",
                num(theirs, 0),
                num(l("exit", "bytes_per_run_file"), 0)
            ),
            num(l("async", "raw_payload_bytes_per_run"), 0),
            ratio(speedup(theirs, Some(s.bytes_per_run))),
        ]);
    }
    t.render(out);
}

fn resume(out: &mut String, tr: &Trellis, lg: Option<&LangGraph>) {
    let Some(resume) = &tr.resume else { return };
    out.push_str("### Resume a paused G1 run (answer the approval, run to the end)\n\n");
    let mut t = Table::new(&[
        "Trellis case",
        "runs",
        "run until pause, median / p90 ms",
        "resume to end, median / p90 ms",
        "LangGraph case",
        "run until pause, median / p90 ms",
        "resume to end, median / p90 ms",
        "× faster (resume median)",
    ]);
    for r in resume {
        let theirs = if r.key == "memory" {
            "memory/command_resume"
        } else {
            "sqlite/command_resume"
        };
        let first =
            lg.and_then(|l| l.median_p90("resume", &["resume", theirs, "run_until_interrupt"]));
        let end = lg.and_then(|l| l.median_p90("resume", &["resume", theirs, "resume_to_end"]));
        let pair = |x: Option<(f64, f64)>| {
            x.map_or("–".into(), |(m, p)| format!("{} / {}", ms(m), ms(p)))
        };
        t.row(vec![
            r.key.clone(),
            r.resume_to_end.n.to_string(),
            pair(Some((
                r.run_until_interrupt.median_ms,
                r.run_until_interrupt.p90_ms,
            ))),
            pair(Some((r.resume_to_end.median_ms, r.resume_to_end.p90_ms))),
            theirs.to_owned(),
            pair(first),
            pair(end),
            ratio(speedup(end.map(|e| e.0), Some(r.resume_to_end.median_ms))),
        ]);
    }
    t.render(out);
}

fn cold(out: &mut String, tr: &Trellis, lg: Option<&LangGraph>) {
    let Some(cold) = &tr.cold else { return };
    out.push_str("### CLI cold start\n\n");
    if let Some(why) = &cold.not_measured {
        out.push_str(&format!("Trellis resume case **not measured**: {why}\n\n"));
    }
    let mut t = Table::new(&[
        "Trellis command",
        "n",
        "wall median / p90 ms",
        "LangGraph case",
        "wall median / p90 ms",
        "× faster (median)",
    ]);
    let l = |case: &str| lg.and_then(|l| l.median_p90("cold", &["cases", case, "wall"]));
    let pair =
        |x: Option<(f64, f64)>| x.map_or("–".into(), |(m, p)| format!("{} / {}", ms(m), ms(p)));
    for (label, ours, theirs) in [
        ("`trellis --help`", cold.help.as_ref(), "python_-c_pass"),
        (
            cold.command.as_str(),
            cold.resume.as_ref(),
            "cold_cli_sqlite_resume_G1",
        ),
    ] {
        let (lm, lp) = (l(theirs), ours.map(|s| (s.median_ms, s.p90_ms)));
        t.row(vec![
            if label.starts_with('`') {
                label.to_owned()
            } else {
                format!("`{label}`")
            },
            ours.map_or("–".into(), |s| s.n.to_string()),
            pair(lp),
            theirs.to_owned(),
            pair(lm),
            ratio(speedup(lm.map(|x| x.0), lp.map(|x| x.0))),
        ]);
    }
    t.render(out);
    if let Some(cli) = &cold.cli {
        out.push_str(&format!(
            "CLI binary: `{cli}`; 1-minute load {:.2} → {:.2}.\n\n",
            cold.load[0], cold.load[1]
        ));
    }
}

fn floor(out: &mut String, lg: Option<&LangGraph>) {
    let Some(lg) = lg else { return };
    let get = |k: &str| lg.median_p90("sqlite_floor", &[k]);
    if get("insert_commit_FULL").is_none() {
        return;
    }
    let when = if lg.ran_now {
        "in this invocation"
    } else {
        "in the stored run"
    };
    out.push_str(&format!(
        "### The disk's floor (the anchor's bench_sqlite_floor.py, {when})\n\n"
    ));
    let mut t = Table::new(&["operation", "median ms", "p90 ms"]);
    for (label, k) in [
        (
            "SQLite WAL insert + commit, synchronous=FULL",
            "insert_commit_FULL",
        ),
        (
            "SQLite WAL insert + commit, synchronous=NORMAL",
            "insert_commit_NORMAL",
        ),
        ("raw fsync after a 2.3 KB write", "raw_fsync"),
    ] {
        let (m, p) = get(k).map_or((None, None), |(m, p)| (Some(m), Some(p)));
        t.row(vec![label.into(), ms_opt(m), ms_opt(p)]);
    }
    t.render(out);
}
