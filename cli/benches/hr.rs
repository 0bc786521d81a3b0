//! Benchmark of the hr model (written with the model).

fn main() {
    println!("no figures yet");
}
