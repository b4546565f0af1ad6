//! Writes the seed corpus of every target: `seeds DIR` creates
//! `DIR/<target>/<name>` files (see `offload_fuzz::seeds`).

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: seeds DIR");
        std::process::exit(2);
    };
    match offload_fuzz::seeds::write_all(std::path::Path::new(&dir)) {
        Ok(n) => println!("{n} seed files written under {}", dir.to_string_lossy()),
        Err(e) => {
            eprintln!("seeds: {e}");
            std::process::exit(1);
        }
    }
}
