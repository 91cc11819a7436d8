//! Prints how far the two-window estimate is from an exact sliding log, and
//! what an adversary who knows the window alignment gets through, beside a
//! fixed window. `cargo run --release --example accuracy`
use ratebound::count::window::Rate;
use ratebound_testkit::accuracy::{
    admitted_fixed, admitted_sliding, boundary_attack, max_in_span, on_off, poisson, population,
    Errors, Rng,
};

fn pct(x: f64) -> String {
    format!("{:.3}%", x * 100.0)
}

fn main() {
    let minute = 60_000;
    println!("## One caller, Poisson arrivals, 200 windows (window 1 min)\n");
    println!("| limit | load | requests | wrongly admitted | wrongly refused |");
    println!("|---|---|---|---|---|");
    for limit in [10u32, 100, 1_000] {
        for load in [0.5, 0.9, 1.0, 1.2, 2.0, 5.0] {
            let rate = Rate {
                limit,
                window_ms: minute,
            };
            let mut rng = Rng(42);
            let mean = minute as f64 / (f64::from(limit) * load);
            let start = 1_000 * minute + 12_345;
            let times = poisson(&mut rng, start, start + 200 * minute, mean);
            let mut e = Errors::default();
            e.replay(rate, &times);
            let share = |n: usize| pct(n as f64 / e.requests as f64);
            println!(
                "| {limit} | {load} | {} | {} | {} |",
                e.requests,
                share(e.wrongly_admitted),
                share(e.wrongly_refused)
            );
        }
    }

    println!("\n## On/off bursts (3× the limit for a third of a window, then quiet)\n");
    println!("| limit | requests | wrongly admitted | wrongly refused |");
    println!("|---|---|---|---|");
    for limit in [10u32, 100, 1_000] {
        let rate = Rate {
            limit,
            window_ms: minute,
        };
        let times = on_off(&mut Rng(7), rate, 1_000 * minute, 1_200 * minute);
        let mut e = Errors::default();
        e.replay(rate, &times);
        let share = |n: usize| pct(n as f64 / e.requests as f64);
        println!(
            "| {limit} | {} | {} | {} |",
            e.requests,
            share(e.wrongly_admitted),
            share(e.wrongly_refused)
        );
    }

    println!(
        "\n## Populations: 2,000 callers, rates log-normal around 5% of the limit, 20 windows\n"
    );
    println!("Callers above their limit: about 0.13% with σ = 1, about 2.3% with σ = 1.5 (they send a large share of the requests).\n");
    println!("| limit | spread (σ) | requests | wrong decisions | compliant callers refused |");
    println!("|---|---|---|---|---|");
    for limit in [10u32, 100, 1_000] {
        for sigma in [1.0, 1.5] {
            let rate = Rate {
                limit,
                window_ms: minute,
            };
            let e = population(3, rate, 2_000, 20, 0.05, sigma);
            println!(
                "| {limit} | {sigma} | {} | {} | {} |",
                e.requests,
                pct(e.wrong_share()),
                pct(e.refused_share())
            );
        }
    }

    println!("\n## An adversary who knows the alignment (limit 100 a minute)\n");
    println!("Quiet for a window, then a request every millisecond from 100 ms before a boundary on, for two windows.\n");
    println!("| limiter | most admitted in any 200 ms | in any 6 s (1/10 window) | in any 1 min (one window) |");
    println!("|---|---|---|---|");
    let rate = Rate {
        limit: 100,
        window_ms: minute,
    };
    let attack = boundary_attack(rate, 1, 100);
    for (name, admitted) in [
        ("fixed window", admitted_fixed(rate, &attack)),
        ("two-window estimate", admitted_sliding(rate, &attack)),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            max_in_span(&admitted, 200),
            max_in_span(&admitted, 6_000),
            max_in_span(&admitted, minute)
        );
    }
    println!("\nA burst at the end of a window still weighs fully in the true trailing window, while the estimate lets it slide out linearly: the estimate never lets 2 × limit through in a moment, but up to about 2 × limit − 1 spread over one window length.");
}
