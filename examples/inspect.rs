//! `h5mount inspect` through the library: print the tree listing of a file.
//!
//! `cargo run --example inspect -- FILE.h5 [PATH]`

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: inspect FILE.h5 [PATH]");
        std::process::exit(2);
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) =
        h5mount::inspect::inspect(path.as_ref(), args.get(2).map(String::as_str), &mut out)
    {
        eprintln!("inspect: {e}");
        std::process::exit(2);
    }
}
