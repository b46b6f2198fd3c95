//! Printing that can never change what a run does. `println!` panics when stdout is a closed
//! pipe (`vouch run … | head`, a closed terminal), which would kill the process mid-run and
//! leave the run for start-up reconciliation to call interrupted. Every line the CLI prints
//! goes through these macros instead: a write that fails is dropped, the work goes on.

/// `println!` that ignores a closed or failing stdout.
macro_rules! outln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that ignores a closed or failing stdout.
#[allow(unused_macros)]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout();
        let _ = write!(o, $($arg)*);
        let _ = o.flush();
    }};
}

/// `eprintln!` that ignores a closed or failing stderr.
macro_rules! errln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that ignores a closed or failing stderr.
#[allow(unused_macros)]
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}
