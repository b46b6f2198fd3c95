//! `vouch-bench`: storage benchmarks. Exit codes: 0 measured (targets are reported, not
//! enforced: no test or exit code asserts a timing), 1 a measurement failed or a chain it
//! wrote does not verify, 2 bad flags.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "vouch-bench", about = "Storage benchmarks for vouch")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Durable journal appends (1 and N writers) beside this disk's fsync limit.
    Journal {
        /// Total length of each of the four measurements (split over the rounds).
        #[arg(long, default_value_t = 6.0)]
        seconds: f64,
        /// Interleaved rounds: each measures all four in turn for seconds ÷ rounds.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Concurrent writers of the last phase, each appending to its own run.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// A folder on the disk to measure (a scratch folder is made inside and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print the figures as one JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Journal {
            seconds,
            rounds,
            writers,
            dir,
            json,
        } => {
            let dir = dir.unwrap_or_else(std::env::temp_dir);
            match vouch_bench::JournalOptions::new(seconds, writers, rounds, dir) {
                Err(e) => {
                    eprintln!("vouch-bench: {e:#}");
                    2
                }
                Ok(opts) => journal(&opts, json),
            }
        }
    };
    std::process::exit(code);
}

fn journal(opts: &vouch_bench::JournalOptions, json: bool) -> i32 {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = match vouch_bench::journal(opts, &mut |line| eprintln!("{line}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vouch-bench journal: {e:#}");
            return 1;
        }
    };
    if json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("vouch-bench journal: encode the report: {e}");
                return 1;
            }
        }
    } else {
        print!("{}", vouch_bench::render(&report, &command));
    }
    if report.broken_chains > 0 {
        eprintln!(
            "vouch-bench journal: {} chains written by this run do not verify",
            report.broken_chains
        );
        return 1;
    }
    0
}
