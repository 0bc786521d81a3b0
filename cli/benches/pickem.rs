//! Benchmark of the pickem model (written with the model).

fn main() {
    println!("no figures yet");
}
