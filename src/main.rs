//! The `h5mount` command.

fn main() {
    eprintln!("h5mount: not implemented yet");
    std::process::exit(2);
}
