//! Prints how far fleet bounds (`"scope": "fleet"`, src/count/fleet/) are
//! from an exact fleet-wide sliding log, beside dividing the limit by the
//! members, a service call per request and node scope, on the same traces.
//! `cargo run --release --example fleet_accuracy`
use ratebound::count::window::Rate;
use ratebound_testkit::fleet_sim::{
    compliant, fleet_sync, ideal, per_node, per_request, report, trace, Arrival, BetweenAnswers,
    Report, Setup, Skew,
};

const WINDOWS: u64 = 60;
const NODES: [usize; 5] = [2, 3, 4, 8, 16];
const LOADS: [f64; 4] = [0.5, 1.0, 2.0, 5.0];
const SYNCS: [u64; 3] = [100, 500, 2_000];

/// One trace and every strategy's report on it.
struct Case {
    rate: Rate,
    nodes: usize,
    load: f64,
    ideal: Report,
    one_counter: Report,
    divided: Report,
    per_request: Report,
    node_scope: Report,
    /// Fleet sync, per entry of `SYNCS`.
    fleet: Vec<Report>,
}

fn start(rate: Rate) -> u64 {
    1_000 * rate.window_ms
}

fn whole(rate: Rate) -> (u64, u64) {
    (start(rate), start(rate) + WINDOWS * rate.window_ms)
}

fn case(rate: Rate, nodes: usize, load: f64, skew: Skew, syncs: &[u64]) -> Case {
    let (from, to) = whole(rate);
    let seed = 1 + nodes as u64 * 1_000 + (load * 10.0) as u64;
    let tr = trace(seed, rate, nodes, load, skew, from, to);
    let ok = compliant(rate, &tr);
    let score = |d: &[bool]| report(rate, &tr, &ok, d, (from, to));
    let share = Rate {
        limit: (rate.limit / nodes as u32).max(1),
        ..rate
    };
    let alone: Vec<Arrival> = tr.iter().map(|a| Arrival { node: 0, ..*a }).collect();
    Case {
        rate,
        nodes,
        load,
        ideal: score(&ideal(rate, &tr)),
        one_counter: score(&per_node(rate, 1, &alone)),
        divided: score(&per_node(share, nodes, &tr)),
        per_request: score(&per_request(rate, &tr)),
        node_scope: score(&per_node(rate, nodes, &tr)),
        fleet: syncs
            .iter()
            .map(|&s| score(&fleet_sync(rate, nodes, &Setup::new(s), &tr).decisions))
            .collect(),
    }
}

/// The stated error: (nodes − 1) × per-node admission rate ×
/// sync_ms, with the per-node rate taken as the offered rate (what a node
/// admits while it still has room) spread evenly.
fn stated(rate: Rate, nodes: usize, load: f64, sync_ms: u64) -> f64 {
    let per_node_ms = f64::from(rate.limit) * load / rate.window_ms as f64 / nodes as f64;
    (nodes - 1) as f64 * per_node_ms * sync_ms as f64
}

fn over(r: &Report, rate: Rate) -> String {
    let ratio = r.max_window as f64 / f64::from(rate.limit);
    format!("{ratio:.3} (+{})", r.over(rate))
}

fn vs_ideal(r: &Report, ideal: &Report) -> String {
    format!("{:.3}", r.admitted as f64 / ideal.admitted.max(1) as f64)
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn refused(r: &Report) -> String {
    if r.compliant == 0 {
        "–".into()
    } else {
        pct(r.compliant_refused_share())
    }
}

fn main() {
    let minute = Rate {
        limit: 600,
        window_ms: 60_000,
    };
    println!("# Fleet bounds: accuracy\n");
    println!(
        "One fleet bound of {} a minute, Poisson arrivals for {WINDOWS} windows, the same trace for every strategy. \
         The service is simulated: fixed windows on the clock, INCRBY on every call, the count read back as limit − remaining; \
         each call takes 1–3 ms each way; each node syncs every `sync_ms` (±5 %) from a random phase, one call in flight per key.\n",
        minute.limit
    );
    println!("- *over*: the most admitted in any span of one window, as a ratio of the limit (and how many above it);");
    println!("- *admitted*: total admitted over what the exact sliding log admits;");
    println!("- *refused*: of the requests arriving while the fleet's offered count in the trailing window was under the limit (compliant), the share refused (– when there are none);");
    println!("- *stated*: (nodes − 1) × per-node rate × sync_ms, the per-node rate being the offered rate spread evenly;");
    println!("- *one counter*: the two-window estimate over the whole fleet's arrivals with no lag (what fleet sync would be with instant syncs): its own edge error.\n");

    let even: Vec<Case> = NODES
        .iter()
        .flat_map(|&n| LOADS.iter().map(move |&l| (n, l)))
        .map(|(n, l)| case(minute, n, l, Skew::Even, &SYNCS))
        .collect();

    println!("## Fleet sync against the stated error (even load)\n");
    println!("*within?*: whether fleet sync's excess is at most the stated error plus the one counter's own; *within 2×?*: the same with twice the stated error (a hit can wait one sync period to be sent and another before a given node reads it).\n");
    println!("| nodes | load | sync_ms | stated | over, fleet sync | over, one counter | within? | within 2×? | admitted | refused |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let (mut rows, mut within, mut within2) = (0, 0, 0);
    for c in &even {
        for (s, f) in SYNCS.iter().zip(&c.fleet) {
            let bound = stated(c.rate, c.nodes, c.load, *s);
            let edge = c.one_counter.over(c.rate) as f64;
            let measured = f.over(c.rate) as f64;
            let (holds, holds2) = (measured <= bound + edge, measured <= 2.0 * bound + edge);
            rows += 1;
            within += usize::from(holds);
            within2 += usize::from(holds2);
            let yes = |b: bool| if b { "yes" } else { "**no**" };
            println!(
                "| {} | {} | {s} | {bound:.1} | {} | {} | {} | {} | {} | {} |",
                c.nodes,
                c.load,
                over(f, c.rate),
                over(&c.one_counter, c.rate),
                yes(holds),
                yes(holds2),
                vs_ideal(f, &c.ideal),
                refused(f)
            );
        }
    }
    println!(
        "\nWithin the stated error: {within} of {rows} rows; within twice it: {within2} of {rows}."
    );
    read_limits(minute);

    println!("\n## Beside the alternatives (even load, fleet sync at 500 ms)\n");
    strategies(&even, 1);

    for (skew, name) in [
        (Skew::OneNode, "all on one node"),
        (Skew::EightyTwenty, "80 % on one node"),
    ] {
        let cases: Vec<Case> = [4usize, 16]
            .iter()
            .flat_map(|&n| LOADS.iter().map(move |&l| (n, l)))
            .map(|(n, l)| case(minute, n, l, skew, &SYNCS))
            .collect();
        println!("\n## Skewed: {name}\n");
        println!("Fleet sync per sync_ms, then the alternatives.\n");
        println!("| nodes | load | over @100 | @500 | @2000 | admitted @500 | refused @500 |");
        println!("|---|---|---|---|---|---|---|");
        for c in &cases {
            let o: Vec<String> = c.fleet.iter().map(|f| over(f, c.rate)).collect();
            println!(
                "| {} | {} | {} | {} | {} |",
                c.nodes,
                c.load,
                o.join(" | "),
                c.fleet.get(1).map_or("".into(), |f| vs_ideal(f, &c.ideal)),
                c.fleet.get(1).map_or("".into(), refused)
            );
        }
        println!();
        strategies(&cases, 1);
    }

    per_second();
    restarts(minute);
    outage(minute);
    attacks();
    cost();
}

/// `k` requests on `node` from `t`, one every `gap` ms.
fn run_of(node: usize, t: u64, k: u64, gap: u64) -> Vec<Arrival> {
    (0..k)
        .map(|i| Arrival {
            t: t + i * gap,
            node,
        })
        .collect()
}

fn sorted(mut v: Vec<Arrival>) -> Vec<Arrival> {
    v.sort_by_key(|a| (a.t, a.node));
    v
}

/// Admitted by fleet sync on `tr` with `setup`, under each rule.
fn both(rate: Rate, nodes: usize, setup: &Setup, tr: &[Arrival]) -> [usize; 2] {
    [BetweenAnswers::Estimate, BetweenAnswers::Shares].map(|guard| {
        let s = Setup {
            guard,
            ..setup.clone()
        };
        let run = fleet_sync(rate, nodes, &s, tr);
        run.decisions.iter().filter(|&&d| d).count()
    })
}

/// The attack shapes, 300 a minute, 3 nodes, 200 ms syncs (the e2e trials'
/// figures): admitted under the estimate alone and under the shares.
fn attacks() {
    let rate = Rate {
        limit: 300,
        window_ms: 60_000,
    };
    let n = 3;
    let t0 = 1_000 * rate.window_ms + 5_000;
    let edge = 1_001 * rate.window_ms;
    let mut setup = Setup::new(200);
    setup.aligned = true;
    println!("\n## Under attack (issue 22): 300 a minute, 3 nodes, sync 200 ms\n");
    println!("Admitted in all, the rule before issue 22 (the fleet estimate alone; a new key or a restarted node alone at limit / nodes; the node count forgotten after two minutes; failed syncs re-sent) beside the shares (each node's unsynced admissions at most (limit − count at its last answer − what the others are taken to hold) / nodes; a new key a tenth of its share until its first answer; the count kept; timed-out syncs sent again once the service answers). The limit is 300 (the window-edge row spans two windows).\n");
    println!("| shape | before | shares |");
    println!("|---|---|---|");
    let row = |name: &str, setup: &Setup, tr: Vec<Arrival>| {
        let [before, after] = both(rate, n, setup, &tr);
        println!("| {name} | {before} | {after} |");
    };
    // One a node, syncs aligned, then 400 a node within 20 ms of a sync.
    let mut tr: Vec<Arrival> = (0..n).map(|node| Arrival { t: t0, node }).collect();
    for node in 0..n {
        tr.extend((0..400).map(|i| Arrival {
            t: t0 + 1_010 + i / 20,
            node,
        }));
    }
    row(
        "synchronised burst right after a sync (1 a node, then 400 a node)",
        &setup,
        sorted(tr),
    );
    // One a node a second before, then 400 a node over the 200 ms around a
    // window's end.
    let warm = (0..n).map(|node| Arrival {
        t: edge - 1_000,
        node,
    });
    let tr = warm
        .chain((0..n).flat_map(|node| {
            run_of(node, edge - 100, 400, 0)
                .into_iter()
                .enumerate()
                .map(move |(i, a)| Arrival {
                    t: a.t + i as u64 / 2,
                    ..a
                })
        }))
        .collect();
    row(
        "burst at a window edge (1 a node a second before, then 400 a node over the 200 ms around the edge)",
        &setup,
        sorted(tr),
    );
    // The budget used on node 0, then 200 on each other within 20 ms.
    let mut tr = run_of(0, t0, 300, 20);
    for node in 1..n {
        tr.extend(
            run_of(node, t0 + 7_000, 200, 0)
                .into_iter()
                .enumerate()
                .map(|(i, a)| Arrival {
                    t: a.t + i as u64 / 10,
                    ..a
                }),
        );
    }
    row(
        "new-key join: 300 on node 0, then 200 on each other at once",
        &setup,
        sorted(tr),
    );
    // The key answered, the service down 130 s, then 400 a node over 4 s.
    let mut long = setup.clone();
    long.outage = Some((t0 + 1_000, t0 + 200_000));
    let late = t0 + 131_000;
    let mut tr: Vec<Arrival> = (0..n).map(|node| Arrival { t: t0, node }).collect();
    for node in 0..n {
        tr.extend(run_of(node, late, 400, 10));
    }
    row(
        "outage over a minute, then 400 a node (the count is in the late window only)",
        &long,
        sorted(tr.clone()),
    );
    // The budget used, then node 2 restarted 3 times, 60 at once after each.
    let mut rs = setup.clone();
    rs.restarts = vec![(t0 + 10_000, 2), (t0 + 15_000, 2), (t0 + 20_000, 2)];
    let mut tr: Vec<Arrival> = (0..n).flat_map(|node| run_of(node, t0, 200, 30)).collect();
    for &(t, node) in &rs.restarts {
        tr.extend(run_of(node, t + 1, 60, 1));
    }
    row(
        "3 restarts of one node after the budget is used, 60 at once after each",
        &rs,
        sorted(tr),
    );
    // Answers lost (calls counted, then timed out) for 10 s, 4 × the limit.
    let mut slow = setup.clone();
    slow.aligned = false;
    slow.lost_answers = Some((t0 + 500, t0 + 1_500));
    let tr = (0..n).flat_map(|node| run_of(node, t0, 400, 40)).collect();
    row("syncs timing out for 1 s (a junk spray's effect; counted, unanswered), 4 × the limit over 16 s: the honest caller's admissions", &slow, sorted(tr));
    // The worst ordering: a flood on every node, syncs at random phases.
    let mut flood = setup.clone();
    flood.aligned = false;
    let tr = (0..n)
        .flat_map(|node| run_of(node, t0 + node as u64, 2_000, 2))
        .collect();
    row(
        "flood: 500 a second on every node for 4 s, syncs at random phases",
        &flood,
        sorted(tr),
    );
}

/// What the shares cost compliant callers: refused while the fleet's
/// offered count was under the limit, before and with the shares.
fn cost() {
    let minute = Rate {
        limit: 600,
        window_ms: 60_000,
    };
    let second = Rate {
        limit: 100,
        window_ms: 1_000,
    };
    println!("\n## What the shares cost compliant callers\n");
    println!("Compliant requests refused (the fleet's offered count in the trailing window under the limit) and the worst window, the rule before issue 22 beside the shares, the same traces.\n");
    println!("| bound | nodes | skew | load | sync_ms | refused, before | refused, shares | over, before | over, shares |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (rate, name, syncs) in [
        (minute, "600/min", [200u64, 500]),
        (second, "100/s", [100, 100]),
    ] {
        for n in [3usize, 16] {
            for (skew, sname) in [
                (Skew::Even, "even"),
                (Skew::EightyTwenty, "80/20"),
                (Skew::OneNode, "one node"),
            ] {
                for load in [0.5, 0.9, 2.0] {
                    let (from, to) = whole(rate);
                    let seed = 1 + n as u64 * 1_000 + (load * 10.0) as u64;
                    let tr = trace(seed, rate, n, load, skew, from, to);
                    let ok = compliant(rate, &tr);
                    let mut seen = Vec::new();
                    for sync in syncs {
                        if seen.contains(&sync) {
                            continue;
                        }
                        seen.push(sync);
                        let [b, a] =
                            [BetweenAnswers::Estimate, BetweenAnswers::Shares].map(|guard| {
                                let s = Setup {
                                    guard,
                                    ..Setup::new(sync)
                                };
                                report(
                                    rate,
                                    &tr,
                                    &ok,
                                    &fleet_sync(rate, n, &s, &tr).decisions,
                                    (from, to),
                                )
                            });
                        println!(
                            "| {name} | {n} | {sname} | {load} | {sync} | {} | {} | {} | {} |",
                            refused(&b),
                            refused(&a),
                            over(&b, rate),
                            over(&a, rate)
                        );
                    }
                }
            }
        }
    }
}

/// The answer's count reads no higher than the limit sent as the override:
/// past the limit, `prev` under-counts what the fleet admitted. Sending a
/// larger override shows the whole count.
fn read_limits(rate: Rate) {
    println!("\n## Reading counts above the limit (even load)\n");
    println!("With the bound's own limit as the override, a count above it reads as the limit (remaining 0), so the previous window's over-admission is invisible to the next window's estimate. The same runs with a larger override (limit × 16).\n");
    println!("| nodes | load | sync_ms | stated | over, override = limit | over, override = 16 × limit | admitted, = limit | admitted, 16 × |");
    println!("|---|---|---|---|---|---|---|---|");
    let (from, to) = whole(rate);
    for n in [4usize, 16] {
        for load in [2.0, 5.0] {
            let seed = 1 + n as u64 * 1_000 + (load * 10.0) as u64;
            let tr = trace(seed, rate, n, load, Skew::Even, from, to);
            let ok = compliant(rate, &tr);
            let ideal_r = report(rate, &tr, &ok, &ideal(rate, &tr), (from, to));
            for sync in [500u64, 2_000] {
                let mut setup = Setup::new(sync);
                let at_limit = report(
                    rate,
                    &tr,
                    &ok,
                    &fleet_sync(rate, n, &setup, &tr).decisions,
                    (from, to),
                );
                setup.read_limit = Some(rate.limit.saturating_mul(16));
                let wide = report(
                    rate,
                    &tr,
                    &ok,
                    &fleet_sync(rate, n, &setup, &tr).decisions,
                    (from, to),
                );
                println!(
                    "| {n} | {load} | {sync} | {:.1} | {} | {} | {} | {} |",
                    stated(rate, n, load, sync),
                    over(&at_limit, rate),
                    over(&wide, rate),
                    vs_ideal(&at_limit, &ideal_r),
                    vs_ideal(&wide, &ideal_r)
                );
            }
        }
    }
}

/// Over / admitted / refused for every strategy, fleet sync at `SYNCS[k]`.
fn strategies(cases: &[Case], k: usize) {
    println!("| nodes | load | | exact log | fleet sync | divide by members | call per request | node scope |");
    println!("|---|---|---|---|---|---|---|---|");
    for c in cases {
        let Some(f) = c.fleet.get(k) else { continue };
        let all = [&c.ideal, f, &c.divided, &c.per_request, &c.node_scope];
        let row = |what: &str, cell: &dyn Fn(&Report) -> String| {
            let cells: Vec<String> = all.iter().map(|r| cell(r)).collect();
            println!(
                "| {} | {} | {what} | {} |",
                c.nodes,
                c.load,
                cells.join(" | ")
            );
        };
        row("over", &|r| over(r, c.rate));
        row("admitted", &|r| vs_ideal(r, &c.ideal));
        row("refused", &refused);
    }
}

/// A bound per second, where a sync period is a large part of the window.
fn per_second() {
    let second = Rate {
        limit: 100,
        window_ms: 1_000,
    };
    println!(
        "\n## A bound per second ({} a second, even load)\n",
        second.limit
    );
    println!(
        "The same, {WINDOWS} windows of one second: sync_ms is now 10 % to 200 % of the window.\n"
    );
    println!("| nodes | load | sync_ms | stated | over, fleet sync | over, one counter | over, call per request | admitted | refused |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for n in [4usize, 16] {
        for load in [1.0, 2.0, 5.0] {
            let c = case(second, n, load, Skew::Even, &SYNCS);
            for (s, f) in SYNCS.iter().zip(&c.fleet) {
                println!(
                    "| {n} | {load} | {s} | {:.1} | {} | {} | {} | {} | {} |",
                    stated(second, n, load, *s),
                    over(f, second),
                    over(&c.one_counter, second),
                    over(&c.per_request, second),
                    vs_ideal(f, &c.ideal),
                    refused(f)
                );
            }
        }
    }
}

/// Nodes restarting empty: their unsent hits are lost and they decide
/// alone until their first answer.
fn restarts(rate: Rate) {
    println!("\n## Node restarts (4 nodes, even load, sync 500 ms)\n");
    println!("A restarted node loses its unsent hits and the sync in flight, and decides alone at its share until its first answer.\n");
    println!("| load | restarts | over | admitted | refused | decided alone |");
    println!("|---|---|---|---|---|---|");
    let (from, to) = whole(rate);
    let w = rate.window_ms;
    for load in [1.0, 2.0, 5.0] {
        let tr = trace(77, rate, 4, load, Skew::Even, from, to);
        let ok = compliant(rate, &tr);
        let ideal_r = report(rate, &tr, &ok, &ideal(rate, &tr), (from, to));
        let plans: [(&str, Vec<(u64, usize)>); 3] = [
            ("none", Vec::new()),
            (
                "node 0 once a window",
                (0..WINDOWS)
                    .map(|k| (from + k * w + w * 7 / 10, 0))
                    .collect(),
            ),
            (
                "all 4 at once, every 5 windows",
                (0..WINDOWS / 5)
                    .flat_map(|k| (0..4).map(move |n| (from + (5 * k + 2) * w + w / 3, n)))
                    .collect(),
            ),
        ];
        for (name, restarts) in plans {
            let mut setup = Setup::new(500);
            setup.restarts = restarts;
            let run = fleet_sync(rate, 4, &setup, &tr);
            let r = report(rate, &tr, &ok, &run.decisions, (from, to));
            println!(
                "| {load} | {name} | {} | {} | {} | {} |",
                over(&r, rate),
                vs_ideal(&r, &ideal_r),
                refused(&r),
                run.alone
            );
        }
    }
}

/// The service down for 5 windows: each node alone at limit / nodes.
fn outage(rate: Rate) {
    let w = rate.window_ms;
    let (from, to) = whole(rate);
    let (down, up) = (from + 10 * w + w / 4, from + 15 * w + w / 4);
    println!(
        "\n## The service down for 5 windows (4 nodes, sync 500 ms, calls time out after 100 ms)\n"
    );
    println!("Each node decides alone at limit / 4 once its last answer is older than 2 × sync_ms + the timeout; the hits it admits meanwhile are sent when the service is back (those still young enough to weigh).\n");
    println!("| skew | load | over, down | admitted, down | refused, down | over, 2 windows after | refused, 2 windows after | divide by members: refused, down |");
    println!("|---|---|---|---|---|---|---|---|");
    for (skew, name) in [
        (Skew::Even, "even"),
        (Skew::EightyTwenty, "80/20"),
        (Skew::OneNode, "one node"),
    ] {
        for load in [0.5, 1.0, 2.0, 5.0] {
            let tr = trace(91, rate, 4, load, skew, from, to);
            let ok = compliant(rate, &tr);
            let mut setup = Setup::new(500);
            setup.outage = Some((down, up));
            let run = fleet_sync(rate, 4, &setup, &tr);
            let share = Rate {
                limit: rate.limit / 4,
                ..rate
            };
            let divided = per_node(share, 4, &tr);
            let ideal_d = ideal(rate, &tr);
            let during = (down, up);
            let after = (up, up + 2 * w);
            let r_down = report(rate, &tr, &ok, &run.decisions, during);
            let i_down = report(rate, &tr, &ok, &ideal_d, during);
            let d_down = report(rate, &tr, &ok, &divided, during);
            let r_after = report(rate, &tr, &ok, &run.decisions, after);
            println!(
                "| {name} | {load} | {} | {} | {} | {} | {} | {} |",
                over(&r_down, rate),
                vs_ideal(&r_down, &i_down),
                refused(&r_down),
                over(&r_after, rate),
                refused(&r_after),
                refused(&d_down)
            );
        }
    }
}
